"""The ring kernel v10 launches for an int4 call, per shape class: this GPU's measured fastest, else a default.

v10's kernel refills a slot as soon as its run is in registers, so a warp keeps two runs in flight; v09's keeps
one. Which is faster depends on the GPU as well as on the shape. At 4096 x 14336 (128 blocks: one an SM), in a
CUDA graph, v10's kernel takes 11.2 us on the H100 against v09's 11.7, but 12.6 on the H200 against v09's 9.3
(Nsight Compute, the kernel alone: 16.3 against 14.5 there). So the choice is measured on each GPU, as sgemm's
tile shapes are (``zoo.tune_table``):

    class              what it is                                 tuned at        default without a table
    one_block_an_sm    a grid of at most one block an SM          4096 x 14336    v10's kernel, 2 slots
    two_blocks_an_sm   more blocks than SMs                       14336 x 4096    v09's kernel, 2 slots

The defaults are the H100's choices (two blocks an SM already make 64 KB in flight an SM with v09's kernel, and
v10's was slower there: 11.3 -> 11.9 us at 14336 x 4096). ``python -m zoo tune gemv`` (``tune.sweep``) times
each candidate at each class's shape and writes this GPU's table; v10 reads it on its first int4 call. Groups of
64 always take v09's kernel: v10's needs a few more than its 128 registers for their four scales a run.
"""

import functools
from typing import NamedTuple

from zoo import tune_table
from zoo.device import sm_count


class Ring(NamedTuple):
    """A ring kernel and its slots a warp."""

    kernel: str = "v10"  # "v10": v10's kernel (refill after read); "v09": v09's (refill a run later)
    stages: int = 2  # slots a warp, 36 KB a block each


SHAPE_CLASSES = {"one_block_an_sm": (4096, 14336), "two_blocks_an_sm": (14336, 4096)}  # class: (out, in) tuned at
CLASS_DEFAULTS = {"one_block_an_sm": Ring("v10", 2), "two_blocks_an_sm": Ring("v09", 2)}


def shape_class(blocks, sms=None):
    """The class of a grid of ``blocks`` (see the module docstring)."""
    return "one_block_an_sm" if blocks <= (sms or sm_count()) else "two_blocks_an_sm"


def cache_path():
    return tune_table.cache_path("gemv")


def path():
    return tune_table.repo_path("gemv")


@functools.cache
def table():
    """(the table as saved, {class: fastest Ring}), read on the first int4 call and kept."""
    data = tune_table.read(cache_path(), path())
    best = {cls: Ring(**e["best"]["tiles"]) for cls, e in data.get("classes", {}).items() if e.get("best")}
    return data, best


def ring_for(blocks):
    """The ring for a grid of ``blocks``: the table's fastest for its class, else the class's default."""
    cls = shape_class(blocks)
    return table()[1].get(cls) or CLASS_DEFAULTS[cls]
