"""Autotuned: v09's kernel with the tile shape a sweep on this GPU measured fastest for the call's shape class.

Changes:
    No new kernel code: v09's kernel, launched with other tiles.
    ``python -m zoo tune sgemm`` (``sweeps/tune.py``) compiles v09's kernel for every
    valid tile shape and times each on one shape per class (``tiles.py``:
    small, skinny, large), writing results/tune/<gpu>-sgemm.json. Each call
    looks up its class from its own M, N, K (``tiles_for``) and launches the
    kernel built for that class's fastest shape (compiled on first use, then
    kept); on a GPU never tuned, the class's default (64 x 128 tiles for the
    small and skinny classes, v09's for the large one).

Why it is faster:
    The best tile shape depends on the chip (registers and shared memory per
    SM, how much latency the warps must hide) and on the problem: a large tile
    reuses each loaded value more, but a problem with few tiles leaves SMs idle
    for the whole call (wave quantization). Measuring beats reasoning about all
    of these at once. On the H200 the large class keeps v09's shape, and the
    small and skinny classes pick 64 x 128 tiles, which give 1024^3 twice
    v09's blocks (see the comments in ``launch``; the sweep's figures:
    ``sweeps/NOTES.md``).
"""

from zoo.kernels.sgemm.tiles import DEFAULT, tiles_for
from zoo.kernels.sgemm.v09_double_buffered import build_kernel, launch_with, sgemm_kernel, validate  # noqa: F401

BASE = "v09"  # launch only: v09's kernel with the tuned tiles

_kernels = {DEFAULT: sgemm_kernel}  # tiles -> v09's kernel built for them


def kernel_for(tiles):
    """v09's kernel built for ``tiles``: compiled on its first launch, then kept."""
    if tiles not in _kernels:
        _kernels[tiles] = build_kernel(tiles)
    return _kernels[tiles]


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    # On the H200 the sweep keeps v09's 128 x 128 x 16 tiles with 64 x 64 warp tiles for the large class
    # (2 blocks per SM). The small and skinny classes both pick 64 x 128 x 16 with
    # 64 x 32 warp tiles: 64 results a thread at 118 registers, 4 blocks per SM. At 1024^3 v09's tiles make
    # 64 blocks for 132 SMs (under half a wave); these make 128. A call at 1024^3 still costs more host time
    # than its kernel (the padding check and four reshaped views per call), which v11 removes.
    tiles = tiles_for(A.shape[0], B.shape[1], A.shape[1])
    launch_with(kernel_for(tiles), tiles, A, B, C, out, alpha, beta)
