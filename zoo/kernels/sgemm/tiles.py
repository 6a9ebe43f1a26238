"""Tile shapes of the SGEMM kernels from v09 on, and the lookups that pick one for a call.

``Tiles`` names a shape: block tile BM x BN over BK slices of K, warp tile WM x WN,
thread tile TM x TN per sub-tile. v09 builds its kernel from one; v10 and later
steps launch the shape that ``python -m zoo tune sgemm`` (``tune.sweep``) measured
fastest on this GPU for the call's *shape class*:

    small   fewer 128 x 128 output tiles than SMs       tuned at 1024 x 1024 x 1024
    skinny  M or N at most 256 (a few rows, a long K)   tuned at 256 x 4096 x 4096
    large   everything else                              tuned at 4096 x 4096 x 4096

The table is results/tune/<gpu>-sgemm.json, read on the first lookup (not at import:
a step that is only listed or compiled never touches it). Nothing here imports the
host tooling (``zoo.results``, ``zoo.harness``): the steps and the spec import this.
"""

import functools
import json
import math
from pathlib import Path
from typing import NamedTuple

from zoo.device import slug, sm_count


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


DEFAULT = Tiles()  # v08's shape: what v09 runs, and what later steps run where the GPU has not been tuned
# One warp per 32 x 32 block tile: the simulator runs every thread in Python, and its cost grows with
# the block tile, not with the matrix. The GPU runs the tuned shapes (checked at GPU_TEST_SIZES).
SIMULATOR_TILES = Tiles(BM=32, BN=32, BK=8, WM=32, WN=32, WN_ITER=1, TM=8, TN=4)

SHAPE_CLASSES = {  # class: the (M, N, K) it is tuned at
    "small": (1024, 1024, 1024),
    "skinny": (256, 4096, 4096),
    "large": (4096, 4096, 4096),
}
CLASS_TILE = 128  # the output tile the small class is defined by (v09's)
SKINNY_SIDE = 256
RESULTS = Path(__file__).resolve().parents[3] / "results"  # the repository's results folder


def path():
    """Where this GPU's tune table is (or would be) saved."""
    return RESULTS / "tune" / f"{slug()}-sgemm.json"


def output_tiles(m, n, bm, bn):
    """Blocks of a grid that covers an M x N output with BM x BN tiles, partial ones included."""
    return -(-m // bm) * -(-n // bn)


def shape_class(m, n, k, sms=None):
    """'skinny', 'small' or 'large' for an M x N x K product (see the module docstring)."""
    if min(m, n) <= SKINNY_SIDE:
        return "skinny"
    return "small" if output_tiles(m, n, CLASS_TILE, CLASS_TILE) < (sms or sm_count()) else "large"


def waves(m, n, tiles, blocks_per_sm, sms=None):
    """Wave quantization of one launch: (output tiles, waves of resident blocks, fullness of the last wave)."""
    count = output_tiles(m, n, tiles.BM, tiles.BN)
    slots = (sms or sm_count()) * max(1, blocks_per_sm)
    w = count / slots
    return count, w, w / math.ceil(w)


@functools.cache
def table():
    """(the table as saved, {class: fastest Tiles}), read and parsed on first use, then kept: tiles_for runs on
    every call. A table written before classes existed holds one best shape, tuned at 4096^3: the large class's."""
    p = path()
    data = json.loads(p.read_text()) if p.exists() else {}
    entries = data.get("classes", {"large": data} if data else {})
    best = {cls: Tiles(**e["best"]["tiles"]) for cls, e in entries.items() if e.get("best")}
    return data, best


def best_tiles(shape_class_name="large"):
    """The fastest tiles recorded for this device and class, or None."""
    return table()[1].get(shape_class_name)


@functools.cache
def tuned_gflops(tiles):
    """The highest GFLOP/s the sweep recorded for ``tiles`` at any class's shape on this device, or None."""
    data, _ = table()
    rates = [
        row["gflops"]
        for entry in data.get("classes", {}).values()
        for row in entry.get("rows", [])
        if row.get("tiles") == tiles._asdict() and row.get("agrees", True) and row.get("gflops")
    ]
    return max(rates, default=None)


def tiles_for(m, n, k):
    """The tuned tiles for an M x N x K call: its class's, else the large class's, else None."""
    return best_tiles(shape_class(m, n, k)) or best_tiles("large")
