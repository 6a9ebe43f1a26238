"""Tile shapes of the SGEMM kernels from v09 on, and the lookups that pick one for a call.

``Tiles`` names a shape: block tile BM x BN over BK slices of K, warp tile WM x WN,
thread tile TM x TN per sub-tile. v09 builds its kernel from one; v10 and later
steps launch, for the call's *shape class* (``zoo.runtime.tune_table.ShapeClasses``), the shape that a sweep measured
fastest on this GPU, or without a sweep the class's own default:

    class   what it is                                   tuned at              default without a table
    small   fewer 128 x 128 output tiles than SMs        1024 x 1024 x 1024    64 x 128 (4 blocks an SM)
    skinny  M or N at most 256 (a few rows, a long K)    256 x 4096 x 4096     64 x 128
    large   everything else                              4096 x 4096 x 4096    v08's 128 x 128 (2 an SM)

The class depends on the GPU's SM count, so the defaults adapt to any GPU: on a 40-SM T4 a
1024^3 product is "large". The defaults are the shapes the sweep chose on the H200 and the
H100 for each class; both fit any GPU of compute capability 7.0 or later (at most 242 registers
a thread and 33 KB of shared memory a block, where every such GPU has 64 K registers and at
least 64 KB an SM).

``python -m zoo tune sgemm`` (``sweeps/tune.py``) measures this GPU and writes its table to the
user's cache (``~/.cache/zoo``, or ``$ZOO_CACHE``); ``--save`` also writes the repository's
results/tune/<gpu>-sgemm.json, which ships the tables of the GPUs the zoo was measured on. A
lookup reads the cache's table, else the repository's, else the defaults. Tables are read on the
first lookup (not at import: a step that is only listed or compiled never touches them). Nothing
here imports the host tooling (``zoo.bench.results``, ``zoo.bench.harness``): the steps and the spec import this.
"""

import functools
import math
from typing import NamedTuple

from zoo import SIMULATOR
from zoo.device import sm_count
from zoo.runtime import tune_table


class Tiles(NamedTuple):
    """The tile shape: block tile BM x BN x BK, warp tile WM x WN, thread tile TM x TN per sub-tile."""

    BM: int = 128
    BN: int = 128
    BK: int = 16
    WM: int = 64
    WN: int = 64
    WN_ITER: int = 4  # sub-tiles per warp tile, along N
    TM: int = 8
    TN: int = 4

    @property
    def threads(self):
        return (self.BM // self.WM) * (self.BN // self.WN) * 32


DEFAULT = Tiles()  # v08's shape: what v09 runs, and the large class's default
# 64 x 128 block tiles with 64 x 32 warp tiles: 64 results a thread at 118 registers, 4 blocks an SM. At 1024^3
# they make 128 blocks for 132 SMs where 128 x 128 tiles make 64; the sweep picked them for the small and the
# skinny class on the H200 (v14 99% of cuBLAS at 1024^3 with them).
SMALL = Tiles(BM=64, BN=128, BK=16, WM=64, WN=32, WN_ITER=2, TM=8, TN=4)
CLASS_DEFAULTS = {"small": SMALL, "skinny": SMALL, "large": DEFAULT}
# One warp per 32 x 32 block tile: the simulator runs every thread in Python, and its cost grows with
# the block tile, not with the matrix. The GPU runs the tuned shapes (checked at GPU_TEST_SIZES).
SIMULATOR_TILES = Tiles(BM=32, BN=32, BK=8, WM=32, WN=32, WN_ITER=1, TM=8, TN=4)
STEP_TILES = SIMULATOR_TILES if SIMULATOR else DEFAULT  # the shape of a step's module-level kernels (v11 on)

CLASS_TILE = 128  # the output tile the small class is defined by (v09's)
SKINNY_SIDE = 256
KERNEL = "double_buffered"  # the kernel the sweep times each tile shape on (v09's), as a table's rows name it


def cache_path():
    """Where ``zoo tune`` keeps this GPU's table for this user (``zoo.runtime.tune_table.cache_path``)."""
    return tune_table.cache_path("sgemm")


def path():
    """Where the repository ships this GPU's table (``zoo tune --save`` writes it)."""
    return tune_table.repo_path("sgemm")


def output_tiles(m, n, bm, bn):
    """Blocks of a grid that covers an M x N output with BM x BN tiles, partial ones included."""
    return -(-m // bm) * -(-n // bn)


def product_class(m, n, k, sms=None):
    """'skinny', 'small' or 'large' for an M x N x K product (see the module docstring)."""
    if min(m, n) <= SKINNY_SIDE:
        return "skinny"
    return "small" if output_tiles(m, n, CLASS_TILE, CLASS_TILE) < (sms or sm_count()) else "large"


SHAPE_CLASSES = tune_table.ShapeClasses(  # class: the (M, N, K) it is tuned at
    {"small": (1024, 1024, 1024), "skinny": (256, 4096, 4096), "large": (4096, 4096, 4096)}, product_class
)


def waves(m, n, tiles, blocks_per_sm, sms=None):
    """Wave quantization of one launch: (output tiles, waves of resident blocks, fullness of the last wave)."""
    count = output_tiles(m, n, tiles.BM, tiles.BN)
    slots = (sms or sm_count()) * max(1, blocks_per_sm)
    w = count / slots
    return count, w, w / math.ceil(w)


@functools.cache
def table():
    """(the table as saved, {class: fastest Tiles}): the user's cache, else the repository's, read and parsed on
    first use, then kept: tiles_for runs on every call. A table written before classes existed holds one best
    shape, tuned at 4096^3: the large class's. A row names the kernel it timed (``KERNEL``; a table written before
    rows named it timed that one too), and each class is filed under the class its shape is in now."""
    data = tune_table.read(cache_path(), path())
    entries = SHAPE_CLASSES.filed(data.get("classes", {"large": data} if data else {}))
    best = {
        cls: Tiles(**e["best"]["tiles"])
        for cls, e in entries.items()
        if e.get("best") and e["best"].get("kernel", KERNEL) == KERNEL
    }
    return data, best


def best_tiles(class_name="large"):
    """The fastest tiles recorded for this device and class, or None."""
    return table()[1].get(class_name)


@functools.cache
def tuned_gflops(tiles):
    """The highest GFLOP/s the sweep recorded for ``tiles`` at any class's shape on this device; without a
    table, the rate a tuned step reaches on this GPU (``expected_gflops``); None in the simulator."""
    data, _ = table()
    rates = [
        row["gflops"]
        for entry in data.get("classes", {}).values()
        for row in entry.get("rows", [])
        if row.get("tiles") == tiles._asdict() and row.get("agrees", True) and row.get("gflops")
    ]
    return max(rates, default=None) or expected_gflops()


# FP32 lanes an SM issues an FFMA on each cycle: 64 on Volta, Turing and the A100, 128 from sm_86 on (Hopper too)
FP32_LANES = {(7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}
EXPECTED_FRACTION = 0.7  # of the FP32 peak: v14 reaches 71% at 4096^3 on the H100 and the H200 (47.6 of 66.9)


def expected_gflops():
    """What a tuned SGEMM step reaches on this GPU, from its SMs, clock and FP32 lanes: the plans' rate where no
    sweep measured one. None in the simulator (the plans then go by waves alone)."""
    from zoo.device import compute_capability, properties

    cc, props = compute_capability(), properties()
    if cc is None or not props.get("clock_khz"):
        return None
    peak = props["multiprocessors"] * FP32_LANES.get(cc, 128) * 2 * props["clock_khz"] * 1e3  # FLOP/s: an FFMA is 2
    return EXPECTED_FRACTION * peak / 1e9


def pick_tiles(m, n, k):
    """The tiles a step (v11 on) launches a call of this shape with: ``tiles_for``'s (the simulator's small ones)."""
    return SIMULATOR_TILES if SIMULATOR else tiles_for(m, n, k)


def tiles_for(m, n, k):
    """The tiles for an M x N x K call: the table's for its class, else the class's default (``CLASS_DEFAULTS``)."""
    cls = SHAPE_CLASSES.of(m, n, k)
    return best_tiles(cls) or CLASS_DEFAULTS[cls]
