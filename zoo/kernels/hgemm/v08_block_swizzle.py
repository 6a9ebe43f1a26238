"""Blocks ordered for the L2: v07's kernel with its tiles visited in groups of 16 block rows.

Changes:
    v07's kernel built with ``group=16``: the block that the hardware launches
    b-th no longer takes tile (b // tiles_n, b % tiles_n), row by row, but
    walks 16 block rows at a time, down each column of the group before moving
    right (the "thread-block swizzle" of CUTLASS and Triton's grouped
    ordering). It costs a few integer operations per block, at its start.

Why it is faster:
    Blocks that run at the same time share the tiles they read. In launch
    order, the 264 blocks resident on 132 SMs cover 8 block rows and all 32
    block columns of a 4096^2 output: 8 of A's 1 MiB row panels and all 32 of
    B's column panels (40 MiB) stream through the L2 together. Grouped, they
    cover 16 rows and 16.5 columns (33 MiB): fewer distinct bytes in flight,
    so more of each panel is still in the L2 when its next reader asks for
    it. The kernel is v07's, so the gain is only what the L2 hit rate buys:
    small at 4096, where most of A and B fit in the L2 either way, and more
    at 8192, where B alone is 128 MiB. Measured, it is a small gain at best:
    1.5 points of cuBLAS at 8192 in ``zoo run`` (1.7 in two exploration
    runs) and none at 4096, where two exploration runs disagreed by more
    than the difference.

Measured:
    NVIDIA H200, size 4096: 381,360 GFLOP/s (360 us a call), 55.8% of cuBLAS GemmEx, 236
    registers, occupancy bound 12%. Other sizes, % of cuBLAS GemmEx: 1024: 16.5%, 2048:
    33.2%, 8192: 56.1%. From results/nvidia-h200.json.
"""
from zoo.kernels.hgemm.padding import check_uint32
from zoo.kernels.hgemm.v06_multistage_swizzled import launch_with
from zoo.kernels.hgemm.v07_fragments_double_buffered import TILES, build

GROUP = 16  # block rows per group
hgemm_kernel = build(TILES, group=GROUP)


def validate(A, B):
    check_uint32(__name__, A, B, TILES.BM, TILES.BN, TILES.BK)


def launch(A, B, out):
    launch_with(hgemm_kernel, TILES, A, B, out)
