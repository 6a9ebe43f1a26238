"""Autotuned: v09's kernel with the tile shape a sweep on this GPU measured fastest.

Changes:
    No new kernel code. ``python -m zoo tune sgemm`` (``tune.sweep``) compiles
    v09's kernel for every valid tile shape in ``tune.candidates()`` (block
    tile, warp tile, thread tile, BK), times each at 4096^3 and saves the table
    to results/tune/<gpu>-sgemm.json. This variant launches with the fastest
    shape recorded for the GPU it runs on, or v09's shape where the GPU has not
    been tuned (the simulator, or a new card).

Why it is faster:
    The best tile shape depends on the chip: registers per SM, shared memory
    per SM, SM count against the number of output tiles (wave quantization),
    and how much latency the warps must hide. A hand-picked shape from another
    GPU is rarely the best one here; measuring beats reasoning about all of
    these at once.

Measured:
    not yet measured on a GPU.
"""
import functools

from zoo.kernels.sgemm import tune
from zoo.kernels.sgemm.v09_double_buffered import DEFAULT, build, launch_with, validate  # noqa: F401


@functools.lru_cache(maxsize=None)
def tuned():
    """(tiles, kernel) for this device: the sweep's winner, else v09's tiles."""
    tiles = tune.best_tiles() or DEFAULT
    return tiles, build(tiles)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    tiles, kernel = tuned()
    launch_with(kernel, tiles, A, B, C, out, alpha, beta)
