"""v13's plan over v14's kernels: whole waves and a split last wave, both with the unrolled hot loop.

Changes:
    No new kernel and no new plan: v13's ``plan`` cuts the grid at a tile row,
    the whole waves run v11's kernel and the leftover rows v12's split
    kernel, and here both kernels are built with v14's unrolled hot loop
    (``multiply_for``, passed down through ``v13.launch_plan``). Shapes the
    plan does not split run exactly as v14 runs them.

Why it is faster:
    The two lessons are independent, so they add up. v14 made every wave
    shorter (the hot loop as straight-line code); v13 removed most of a wave
    where the tile count is just past a multiple of the block slots. At
    4097^3 v14 still runs five waves of 128 x 128 tiles, the fifth holding 33
    tiles for 264 slots, and reached 81.5% of cuBLAS on the H200 against
    93.1% at 4096^3; v13 turned the fifth wave into an eighth of one with
    v11's slower loop (85.0%). The plan's time test (the wave time saved must
    exceed the host time a split adds) uses the rate ``zoo tune`` recorded
    for v11's loop, which v14's beats by about 13%: the test is a little
    generous, which matters only for calls near its threshold.

Measured:
    NVIDIA H200, size 4096: 47,590 GFLOP/s (2,888 us a call), 92.7% of cuBLAS, 242
    registers, occupancy bound 12%. Other sizes, % of cuBLAS: 1024: 98.6%, 2048: 91.1%,
    4095: 90.0%, 4097: 94.0%, 8192: 95.2%, 3000x5000x2000: 98.0%. From
    results/nvidia-h200.json.
"""
from zoo.kernels.sgemm import v11_edges_in_kernel as v11, v13_split_last_wave as v13
from zoo.kernels.sgemm.v11_edges_in_kernel import TILES, validate  # noqa: F401
from zoo.kernels.sgemm.v14_unrolled_k import multiply_for


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    tiles = v11.tiles_for(m, n, k)
    v13.launch_plan(v13.plan(m, n, k, tiles), tiles, A, B, C, out, alpha, beta, multiply_for)
