"""The packed ring an int4 call launches (v10), per shape class: this GPU's measured fastest, else a default.

v10's ring has choices no one GPU settles: its kernel (``KERNELS`` in v10: addresses computed or immediate, blocks of
eight warps or of one group of 32 rows), two or three slots a warp, a slot refilled before the run's math or after
it, and the run at which a warp lets the next kernel start. ``python -m zoo tune gemv`` (``sweeps/tune.py``) times
every combination at one shape per class and writes this GPU's table (``zoo.runtime.tune_table``); v10 reads it on
its first int4 call. The H200's picks, three kernels for three classes, show why it is measured:

    class              what it is                                     tuned at        default without a table
    one_block_an_sm    a grid of at most one block an SM              4096 x 14336    one_group_a_block, 2 slots
    two_blocks_an_sm   more blocks than SMs, at most twice as many    8192 x 8192     packed, 2 slots
    many_blocks_an_sm  more than two blocks an SM                     14336 x 4096    packed, 2 slots

A class is the class of a grid of a block a group of 32 rows (``SHAPE_CLASSES.of(out, in)``, the protocol of
``zoo.runtime.tune_table``), whichever kernel runs: the shape alone places a call, and the tune times every kernel at
its class's shape. The table is tuned with groups of 128; v10 applies each pick to groups of 64 too.

A saved table names each kernel for what it is (``Ring.kernel``); tables written when the kernels were named by the
step that added them (``"v12"``) are read through ``OLD_NAMES`` (``.ci/gemv-tune-names`` renames them on disk).
"""

import functools
from typing import NamedTuple

from zoo.device import sm_count
from zoo.runtime import tune_table


class Ring(NamedTuple):
    """A choice of v10's ring: its kernel, slots a warp, the order of a slot's refill and the trigger."""

    kernel: str = "packed"  # one of v10's KERNELS: "packed", "immediate_offsets", "one_group_a_block"
    stages: int = 2  # slots a warp, about 4.7 KB each
    refill_after_math: bool = False  # refill a slot after its run's math (v09's order), not once it is in registers
    trigger_early: int = 0  # runs before its last at which a warp lets the next kernel start


DEFAULTS = {
    "one_block_an_sm": Ring("one_group_a_block", 2),
    "two_blocks_an_sm": Ring("packed", 2),
    "many_blocks_an_sm": Ring("packed", 2),
}
# Kernels as saved tables named them before v10 held them all (the step that added each). The row-major rings of v09
# to v11 were candidates then; v10 reads packed weights, and their rows in an old table are read and never picked.
OLD_NAMES = {
    "v09": "row_major",
    "v10": "row_major_refill_after_read",
    "v11": "row_major_scales_in_the_ring",
    "v12": "packed",
    "v13": "immediate_offsets",
    "v14": "one_group_a_block",
}


def _place(rows, cols=None, sms=None):
    """The class of a GEMV of ``rows`` outputs (``cols``, its row length, places nothing): the class of a grid of a
    block a group of 32 rows on this GPU's SMs. ``zoo tune --size``, the table and v10's launch place a shape so."""
    blocks, sms = -(-rows // 32), sms or sm_count()
    return "one_block_an_sm" if blocks <= sms else "two_blocks_an_sm" if blocks <= 2 * sms else "many_blocks_an_sm"


SHAPE_CLASSES = tune_table.ShapeClasses(  # class: the (out, in) it is tuned at
    {"one_block_an_sm": (4096, 14336), "two_blocks_an_sm": (8192, 8192), "many_blocks_an_sm": (14336, 4096)}, _place
)


def renamed(choice):
    """A saved row's ``tiles`` with its kernel under the name it has now (``OLD_NAMES``)."""
    return {**choice, "kernel": OLD_NAMES.get(choice.get("kernel"), choice.get("kernel"))}


def cache_path():
    return tune_table.cache_path("gemv")


def path():
    return tune_table.repo_path("gemv")


@functools.cache
def table():
    """(the table, {class: [Ring, ...] timed and agreeing, fastest first}), read on the first int4 call. Each entry
    is filed under the class its tuned shape is in now, whatever its saved name (a table tuned when 14336 x 4096 was
    the second of two classes gives its rows to the third), and its kernels read under their names of now."""
    data = tune_table.read(cache_path(), path())
    classes = SHAPE_CLASSES.filed(data.get("classes", {}))
    data = {**data, "classes": classes}
    ranked = {
        cls: [Ring(**renamed(r["tiles"])) for r in e.get("rows", []) if "ms" in r and r.get("agrees")]
        for cls, e in classes.items()
    }
    return data, ranked


def ring_for(rows, kernels):
    """The ring for a call of ``rows`` outputs: the table's fastest of ``kernels`` (v10's) for its class, else the
    class's default."""
    cls = SHAPE_CLASSES.of(rows)
    mine = [choice for choice in table()[1].get(cls, []) if choice.kernel in kernels]
    return mine[0] if mine else DEFAULTS[cls]
