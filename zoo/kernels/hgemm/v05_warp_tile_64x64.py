"""Larger warp tiles: four warps of 64 x 64 instead of eight of 64 x 32, same kernel as v04.

Changes:
    Launch only (BASE v04): v04's kernel built from ``Tiles(BM=128, BN=128,
    BK=32, WM=64, WN=64)``. The 128 x 128 block tile is split among 2 x 2 warps
    instead of 2 x 4, so each warp holds 4 x 8 ``mma`` tiles (128 float32
    accumulators a lane) and each thread issues four 16-byte ``cp.async`` per
    tile instead of two. Nothing else changes: this file names the tile shape
    and launches v04's ``build`` of it.

Why it is faster:
    More ``mma`` per byte read from shared memory. Per 16 of k a warp now
    loads 4 A and 4 B fragments with ``ldmatrix`` for 32 ``mma`` (4 per
    ``ldmatrix``) where v04 loaded 4 + 2 for 16 (2.7 per ``ldmatrix``): each A
    fragment feeds eight ``mma`` instead of four, so the block reads its A tile
    from shared memory half as often. The price is registers (about 1.7 times
    v04's), so fewer warps per SM hide latency; whether the trade pays is what
    the measurement says.
"""

from zoo.kernels.hgemm.padding import check_uint32
from zoo.kernels.hgemm.v04_cp_async_double_buffered import Tiles, build, launch_with

BASE = "v04"  # launch only: v04's kernel with other tiles

TILES = Tiles(BM=128, BN=128, BK=32, WM=64, WN=64)
hgemm_kernel = build(TILES)


def validate(A, B):
    check_uint32(__name__, A, B, TILES.BM, TILES.BN, TILES.BK)


def launch(A, B, out):
    launch_with(hgemm_kernel, TILES, A, B, out)
