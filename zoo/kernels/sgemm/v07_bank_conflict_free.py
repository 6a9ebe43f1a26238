"""Bank-conflict-free shared memory: a padded A tile and B columns read in two contiguous halves.

Changes:
    Two layout changes to v06, nothing else. (1) Each k-row of the transposed
    A tile is padded from 128 to 132 floats (``A_STRIDE``). (2) A thread's 8
    columns of B are no longer 8 adjacent ones but 4 at ``thread_col * 4`` and
    4 at ``BN / 2 + thread_col * 4``; its results move to the matching columns
    of C.

Why it is faster:
    Shared memory has 32 banks of 4 bytes; a warp's accesses that fall in the
    same bank (at different addresses) are serialized. In v06 the transposed
    store ``a_tile[k * 128 + r]`` put the two threads staging row r with
    different k in the same bank (128 is a multiple of 32): a 2-way conflict,
    which the 132-float stride (4 banks of shift per row, 16-byte aligned still)
    removes. The 128-bit B loads of v06 started 8 floats apart, so threads 0 and
    4 of every 8-thread phase hit the same banks; read as two halves, 8
    consecutive threads read 128 contiguous bytes, one per bank.
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit
from zoo.device.memory import load_float4, store_float4
from zoo.kernels.sgemm.epilogue import store_scaled4
from zoo.kernels.sgemm.padding import run_tiled

BM = 128
BN = 128
BK = 8
TM = 8
TN = 8
THREADS = (BM // TM) * (BN // TN)  # 256
A_STRIDE = BM + 4  # padded k-row of the transposed A tile: shifts each row by 4 banks
A_TILE = BK * A_STRIDE
B_TILE = BK * BN
ACC = TM * TN
HALF = BN // 2  # a thread's second group of 4 columns


@jit
def sgemm_kernel(A, B, C, out, M, N, K, alpha, beta):
    a_tile = cuda.shared.array(A_TILE, float32)  # a_tile[k * A_STRIDE + r]
    b_tile = cuda.shared.array(B_TILE, float32)
    tid = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    thread_row = tid // (BN // TN)  # which TM x TN piece of the block tile this thread computes
    thread_col = tid % (BN // TN)
    a_row_in_tile = tid // (BK // 4)  # which row of the A slice, and which 4 of its k's, this thread stages
    a_k_in_tile = tid % (BK // 4) * 4
    b_k_in_tile = tid // (BN // 4)  # which row of the B slice, and which 4 of its columns
    b_col_in_tile = tid % (BN // 4) * 4

    acc = cuda.local.array(ACC, float32)
    a_reg = cuda.local.array(TM, float32)
    b_reg = cuda.local.array(TN, float32)
    for i in range(ACC):
        acc[i] = float32(0.0)

    for k0 in range(0, K, BK):
        a0, a1, a2, a3 = load_float4(A, (row0 + a_row_in_tile) * K + k0 + a_k_in_tile)
        a_tile[(a_k_in_tile + 0) * A_STRIDE + a_row_in_tile] = a0  # the two threads of one A row now hit banks 16 apart
        a_tile[(a_k_in_tile + 1) * A_STRIDE + a_row_in_tile] = a1
        a_tile[(a_k_in_tile + 2) * A_STRIDE + a_row_in_tile] = a2
        a_tile[(a_k_in_tile + 3) * A_STRIDE + a_row_in_tile] = a3
        b0, b1, b2, b3 = load_float4(B, (k0 + b_k_in_tile) * N + col0 + b_col_in_tile)
        store_float4(b_tile, b_k_in_tile * BN + b_col_in_tile, b0, b1, b2, b3)
        cuda.syncthreads()  # the tiles are complete before any thread reads them
        for kk in range(BK):
            a_reg[0], a_reg[1], a_reg[2], a_reg[3] = load_float4(a_tile, kk * A_STRIDE + thread_row * TM)
            a_reg[4], a_reg[5], a_reg[6], a_reg[7] = load_float4(a_tile, kk * A_STRIDE + thread_row * TM + 4)
            # consecutive threads read consecutive 16-byte chunks: every bank once per 8 threads
            b_reg[0], b_reg[1], b_reg[2], b_reg[3] = load_float4(b_tile, kk * BN + thread_col * 4)
            b_reg[4], b_reg[5], b_reg[6], b_reg[7] = load_float4(b_tile, kk * BN + HALF + thread_col * 4)
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += a_reg[i] * b_reg[j]
        cuda.syncthreads()  # every thread is done reading the tiles before the next step overwrites them

    for i in range(TM):
        for half in range(2):
            at = (row0 + thread_row * TM + i) * N + col0 + half * HALF + thread_col * 4
            base = i * TN + half * 4
            store_scaled4(C, out, at, alpha, beta, acc[base], acc[base + 1], acc[base + 2], acc[base + 3])


def launch_tiles(A, B, C, out, M, N, K, alpha, beta):
    sgemm_kernel[(N // BN, M // BM), THREADS](A, B, C, out, M, N, K, alpha, beta)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    run_tiled(launch_tiles, A, B, C, out, alpha, beta, BM, BN, BK)
