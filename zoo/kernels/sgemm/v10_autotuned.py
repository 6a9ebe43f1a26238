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
    these at once. On the H200 the sweep (results/tune/nvidia-h200-sgemm.json)
    picked v09's own shape, 128 x 128 x 16 with 64 x 64 warp tiles, ahead of
    15 others (31 to 40.8 TFLOP/s at 4096^3), so there v10 runs v09's kernel
    and the two differ only by noise at large sizes. At 1024^3 a call is
    shorter than numba's host-side launch path (argument checks, reshapes, the
    launch itself), so figures there measure the host as much as the kernel.

Measured:
    NVIDIA H200, size 4096: 40,702 GFLOP/s (3,377 us a call), 80.5% of cuBLAS, 212
    registers, occupancy bound 12%. Other sizes, % of cuBLAS: 1024: 25.5%, 2048: 64.5%,
    4095: 62.0%, 4097: 68.5%, 8192: 83.3%, 3000x5000x2000: 58.0%. From
    results/nvidia-h200.json.
"""
from zoo.kernels.sgemm import tune
from zoo.kernels.sgemm.v09_double_buffered import DEFAULT, build, launch_with, validate  # noqa: F401

TILES = tune.best_tiles() or DEFAULT  # read once, when the module is imported
sgemm_kernel = build(TILES)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    launch_with(sgemm_kernel, TILES, A, B, C, out, alpha, beta)
