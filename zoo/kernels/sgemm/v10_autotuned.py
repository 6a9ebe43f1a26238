"""Autotuned: v09's kernel with the tile shape a sweep on this GPU measured fastest for the call's shape class.

Changes:
    No new kernel code. ``python -m zoo tune sgemm`` (``tune.sweep``) compiles
    v09's kernel for every valid tile shape in ``tune.candidates()`` (block
    tile, warp tile, thread tile, BK) and times each on one shape per class:
    small (fewer 128 x 128 output tiles than SMs, tuned at 1024^3), skinny (M
    or N at most 256, tuned at 256 x 4096 x 4096) and large (tuned at 4096^3).
    The table goes to results/tune/<gpu>-sgemm.json. Each call looks up its
    class from its own M, N, K (``tune.tiles_for``) and launches the kernel
    built for that class's fastest shape (compiled on first use, then kept),
    or v09's shape where the GPU has not been tuned (the simulator, a new card).

Why it is faster:
    The best tile shape depends on the chip (registers and shared memory per
    SM, how much latency the warps must hide) and on the problem: a large tile
    reuses each loaded value more, but a problem with few tiles leaves SMs idle
    for the whole call (wave quantization: the tune table records, for each
    shape, output tiles, resident blocks per SM and the waves they make).
    Measuring beats reasoning about all of these at once. On the H200 the
    large class keeps v09's 128 x 128 x 16 with 64 x 64 warp tiles (41.5
    TFLOP/s in the sweep at 4096^3, 2 blocks per SM). The small and skinny
    classes both pick 64 x 128 x 16 with 64 x 32 warp tiles, 64 results a
    thread at 118 registers, 4 blocks per SM: at 1024^3 its kernel takes 95 us
    where v09's takes 139 us (64 tiles for 132 SMs: the grid is under half a
    wave). A v10 call at 1024^3 still costs more host time than that kernel
    (v09's launch path makes four reshaped views and checks the padding on
    every call), which v11 removes.

Measured:
    NVIDIA H200, size 4096: 42,419 GFLOP/s (3,240 us a call), 82.7% of cuBLAS, 212
    registers, occupancy bound 12%. Other sizes, % of cuBLAS: 1024: 64.2%, 2048: 83.5%,
    4095: 82.9%, 4097: 80.2%, 8192: 83.5%, 3000x5000x2000: 80.2%. From
    results/nvidia-h200.json.
"""
from zoo.kernels.sgemm import tune
from zoo.kernels.sgemm.v09_double_buffered import DEFAULT, build, launch_with, validate  # noqa: F401

TILES = tune.best_tiles("large") or DEFAULT  # the large class's shape: what the harness reports resources of
_kernels = {TILES: build(TILES)}
sgemm_kernel = _kernels[TILES]


def kernel_for(tiles):
    """v09's kernel built for ``tiles``: compiled on its first launch, then kept."""
    if tiles not in _kernels:
        _kernels[tiles] = build(tiles)
    return _kernels[tiles]


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    tiles = tune.tiles_for(A.shape[0], B.shape[1], A.shape[1]) or DEFAULT
    launch_with(kernel_for(tiles), tiles, A, B, C, out, alpha, beta)
