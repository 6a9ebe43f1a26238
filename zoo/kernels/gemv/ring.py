"""The ring kernel an int4 call launches, per shape class: this GPU's measured fastest, else a default.

Six steps have a ring kernel: v09's refills a slot a run after reading it (one run a warp in flight), v10's right
after reading it (two), v11's carries each run's scales in its slot too, v12's reads weights packed in its order,
refilling a slot in either order (``refill_after_math``: v09's) and letting the next kernel start at a warp's last
run or earlier (``trigger_early``), v13's is v12's with fewer instructions to ask for a run's codes, and v14's is
v13's in blocks of one group of 32 rows (smaller blocks where a group has fewer than eight warps). Which is faster
depends on the GPU as well as on the shape. At 4096 x 14336 (128 blocks: one an SM), in a CUDA graph, v10's kernel
takes 11.2 us on the H100 against v09's 11.7, but 12.6 on the H200 against v09's 9.3 (Nsight Compute, the kernel
alone: 16.3 against 14.5 there); v11's takes 11.15 on the H100, first, and 10.4 on the H200, second to v09's. So the
choice is measured on each GPU, as sgemm's tile shapes are (``zoo.tune_table``):

    class              what it is                                 tuned at        default without a table
    one_block_an_sm    a grid of at most one block an SM          4096 x 14336    the step's own kernel, 2 slots
    two_blocks_an_sm   more blocks than SMs, at most twice as     8192 x 8192     v09's kernel, 2 slots (v12 to v14:
                       many                                                       v12's)
    many_blocks_an_sm  more than two blocks an SM                 14336 x 4096    the same

The grid is the launching step's own. v09's to v13's blocks of eight warps make 14336 x 4096 224 blocks, two an SM;
v14's blocks of one group make it 448, three or four an SM, a class of its own: v14 launches there the ring tuned
for its grid, and v10 to v13 the one tuned at 8192 x 8192, their own class's shape (until v14 they had two classes,
the second tuned at 14336 x 4096: on the H200 its pick there, v14's kernel, took 9.46 us at 8192 x 8192, 3.42x
fp16's weights per second; tuned at 8192 x 8192 itself, the class picks v12's kernel with two slots, 9.15 us, 3.54x).

The defaults are the H100's choices for v10 and v11 (two blocks an SM already make 64 KB in flight an SM with v09's
kernel, and v10's was slower there: 11.3 -> 11.9 us at 14336 x 4096); v12's is v11's order with two slots, within 2%
of the H100's pick at a block an SM (v09's order, three slots: 10.67 against 10.86 us). ``python -m zoo tune gemv``
(``tune.sweep``) times every step's kernel at each class's shape and writes this GPU's table with all of them,
fastest first; a step launches the fastest of the kernels it has (v10: v09's and its own; v11: v09's and its own;
v12: its own in either order, since v09's kernel cannot read packed weights; v13: v12's and its own; v14: v12's,
v13's and its own), read on its first int4 call, for the class of its own grid. The table is tuned with groups of
128; v11 to v14 apply their pick to groups of 64 too (v10's kernel takes 128 only).
"""

import functools
from typing import NamedTuple

from zoo import tune_table
from zoo.device import sm_count


class Ring(NamedTuple):
    """A ring kernel and its slots a warp."""

    kernel: str = "v10"  # the step whose kernel: "v09" (refill a run later), "v10" (refill after read), "v11" (scales),
    # "v12" (packed weights), "v13" (v12's, the copies' addresses in the instructions), "v14" (v13's, a block a group)
    stages: int = 2  # slots a warp, about 36 KB a block each
    refill_after_math: bool = False  # v12's to v14's only: refill a slot after its run's math (v09's order)
    trigger_early: int = 0  # v12's to v14's only: runs before its last at which a warp lets the next kernel start


SHAPE_CLASSES = {  # class: (out, in) tuned at
    "one_block_an_sm": (4096, 14336),
    "two_blocks_an_sm": (8192, 8192),
    "many_blocks_an_sm": (14336, 4096),
}


def defaults(kernels):
    """Each class's ring without a table, for a step whose ring kernels are ``kernels`` (its own last): its own
    where an SM holds one block, the first (v09's, where it has it) where it holds more."""
    more = Ring(kernels[0], 2)
    return {"one_block_an_sm": Ring(kernels[-1], 2), "two_blocks_an_sm": more, "many_blocks_an_sm": more}


def shape_class(blocks, sms=None):
    """The class of a grid of ``blocks`` (see the module docstring)."""
    sms = sms or sm_count()
    return "one_block_an_sm" if blocks <= sms else "two_blocks_an_sm" if blocks <= 2 * sms else "many_blocks_an_sm"


def rows_class(rows, sms=None):
    """The class of a GEMV of ``rows`` outputs: the class of the grid of a block a group of 32 rows (v14's; v09's to
    v13's too wherever a group has eight warps). ``zoo tune --size`` and ``table`` place a shape so."""
    return shape_class(-(-rows // 32), sms)


def cache_path():
    return tune_table.cache_path("gemv")


def path():
    return tune_table.repo_path("gemv")


@functools.cache
def table():
    """(the table, {class: [Ring, ...] timed and agreeing, fastest first}), read on the first int4 call. Each entry
    is filed under the class its tuned shape is in now, whatever its saved name: a table tuned when 14336 x 4096 was
    the second of two classes gives its rows to the third (and ``zoo tune --size`` keeps them there)."""
    data = tune_table.read(cache_path(), path())
    classes = {rows_class(e["shape"][0]) if e.get("shape") else cls: e for cls, e in data.get("classes", {}).items()}
    data = {**data, "classes": classes}
    ranked = {
        cls: [Ring(**r["tiles"]) for r in e.get("rows", []) if "ms" in r and r.get("agrees")]
        for cls, e in data.get("classes", {}).items()
    }
    return data, ranked


def ring_for(blocks, kernels):
    """The ring for a grid of ``blocks`` launched by a step whose ring kernels are ``kernels`` (v11: ``("v09",
    "v11")``): the table's fastest of them for the grid's class, else the class's default."""
    cls = shape_class(blocks)
    mine = [choice for choice in table()[1].get(cls, []) if choice.kernel in kernels]
    return mine[0] if mine else defaults(kernels)[cls]
