"""One warp, one 16 x 8 tile: fragments straight from global memory into ``mma.sync``.

Changes:
    The first tensor-core kernel. Each warp owns one 16 x 8 tile of the output
    and walks K in steps of 16: every lane loads its fragment of the 16 x 16
    slice of A (four 32-bit words, ``load_half2``) and of the 16 x 8 slice of B
    (four float16 packed into two words, ``pack_half2``: a B register holds two
    neighbours in k, which are N elements apart in row-major B), then the warp
    issues one ``mma_16bit_f32`` (``mma.sync.aligned.m16n8k16``, SASS
    ``HMMA.16816.F32``). Each lane stores its four float32 results. A block is
    four warps side by side along N. Shapes that are not whole 16 x 32 x 16
    tiles are zero-padded (``padding.run_tiled``).

Why it is faster:
    It is the tensor-core starting point, compared with the zoo's SGEMM: one
    instruction does 4096 FLOPs for the warp where an FFMA does 64. Nothing is
    reused: every element of A is fetched by N / 8 warps and every element of B
    by M / 16, straight from global memory (L2 and L1 catch much of it), and
    B's 16-bit loads are strided, so memory, not the tensor core, sets the pace.
"""

import numpy as np

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.device.mma import load_half2, mma_16bit_f32, pack_half2
from zoo.kernels.hgemm.padding import check_uint32, run_tiled

WARPS = 4  # warps per block, side by side along N
TILE_M = 16
TILE_N = 8 * WARPS
TILE_K = 16


@jit
def hgemm_kernel(A, B, out, M, N, K):
    lane = uint32(cuda.threadIdx.x) % uint32(32)
    warp = uint32(cuda.threadIdx.x) // uint32(32)
    g = lane // uint32(4)  # groupID: the row (of A, C) or column (of B) this lane holds
    t = lane % uint32(4)  # threadID_in_group: which pair of k (A, B) or of columns (C)
    row0 = uint32(cuda.blockIdx.y) * uint32(TILE_M)
    col0 = (uint32(cuda.blockIdx.x) * uint32(WARPS) + warp) * uint32(8)
    a_top = (row0 + g) * K + t * uint32(2)  # A[row0 + g, 2t]
    a_bottom = a_top + uint32(8) * K  # A[row0 + g + 8, 2t]
    b_at = t * uint32(2) * N + col0 + g  # B[2t, col0 + g]
    c0 = c1 = c2 = c3 = float32(0.0)
    for k0 in range(0, K, TILE_K):
        k0 = uint32(k0)
        a0 = load_half2(A, a_top + k0)
        a1 = load_half2(A, a_bottom + k0)
        a2 = load_half2(A, a_top + k0 + uint32(8))
        a3 = load_half2(A, a_bottom + k0 + uint32(8))
        b = b_at + k0 * N
        b0 = pack_half2(B[b], B[b + N])  # B[k0 + 2t, n], B[k0 + 2t + 1, n]
        b1 = pack_half2(B[b + uint32(8) * N], B[b + uint32(9) * N])  # k0 + 2t + 8, + 9
        c0, c1, c2, c3 = mma_16bit_f32(A.dtype, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)  # .f16 or .bf16, by dtype
    at = (row0 + g) * N + col0 + t * uint32(2)
    out[at], out[at + uint32(1)] = c0, c1
    at += uint32(8) * N
    out[at], out[at + uint32(1)] = c2, c3


def validate(A, B):
    check_uint32(__name__, A, B, TILE_M, TILE_N, TILE_K)


def launch(A, B, out):
    def launch_tiles(a, b, result, M, N, K):
        grid = (N // TILE_N, M // TILE_M)
        hgemm_kernel[grid, 32 * WARPS](a, b, result, np.uint32(M), np.uint32(N), np.uint32(K))

    run_tiled(launch_tiles, A, B, out, TILE_M, TILE_N, TILE_K)
