"""1D block tiling: each thread computes a column of TM = 8 results, reusing a B value from a register.

Changes:
    A block now covers a 64 x 64 tile of C with 512 threads, each owning 8
    vertically adjacent results in a local array (registers). The K loop takes
    tiles of BK = 8: a 64 x 8 slice of A and an 8 x 64 slice of B, one element
    per thread each. In the inner loop a thread loads one B value into a
    register and multiplies it by 8 A values, accumulating 8 results.

Why it is faster:
    On paper: one shared load of B now feeds 8 FMAs, so shared-memory loads
    per FMA drop from 2 to about 1.1, and each block reuses every global
    element 64 times. The results stay in registers because every index into
    the local array is a constant once NVVM unrolls the loops over TM (local
    memory per thread: 0 bytes). In numba it is slower than v03: the K loop is
    not unrolled, and each shared load of A carries 64-bit signed index
    arithmetic (see the comment in the hot loop), 9.8 PTX instructions per FMA
    against v03's 4.2. v05 amortises that over 4x more FMAs per load, and v09
    removes it with unsigned indices.
"""

import numpy as np

from zoo.device import cuda, float32
from zoo.device.jit import jit

BM = 64  # rows of C per block
BN = 64  # columns of C per block
BK = 8  # slice of K staged per step
TM = 8  # results per thread, stacked in a column
THREADS = BM * BN // TM  # 512
A_TILE = BM * BK
B_TILE = BK * BN


@jit
def sgemm_kernel(A, B, C, out, alpha, beta):
    a_tile = cuda.shared.array(A_TILE, float32)  # a_tile[r * BK + k]
    b_tile = cuda.shared.array(B_TILE, float32)  # b_tile[k * BN + c]
    m, k_total = A.shape
    n = B.shape[1]
    tid = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    thread_col = tid % BN  # warps run along a row of C: coalesced B loads and C stores
    thread_row = tid // BN  # this thread owns rows thread_row*TM .. +TM-1 of the tile
    a_row_in_tile, a_k_in_tile = tid // BK, tid % BK  # the one A element this thread stages
    b_k_in_tile, b_col_in_tile = tid // BN, tid % BN  # the one B element this thread stages

    acc = cuda.local.array(TM, float32)
    for i in range(TM):
        acc[i] = float32(0.0)

    for k0 in range(0, k_total, BK):
        r, k = row0 + a_row_in_tile, k0 + a_k_in_tile
        a_tile[a_row_in_tile * BK + a_k_in_tile] = A[r, k] if r < m and k < k_total else float32(0.0)
        k, c = k0 + b_k_in_tile, col0 + b_col_in_tile
        b_tile[b_k_in_tile * BN + b_col_in_tile] = B[k, c] if k < k_total and c < n else float32(0.0)
        cuda.syncthreads()  # the tiles are complete before any thread reads them
        for kk in range(BK):
            b = b_tile[kk * BN + thread_col]  # one shared load, reused TM times
            for i in range(TM):
                # numba indexes in signed 64 bits and checks for negative indices (Python's wraparound: and,
                # shift, add, 6 instructions a load), as NVVM cannot prove this index is non-negative: the hot
                # loop is 9.8 PTX (9.3 SASS) instructions per FMA (`python -m zoo show sgemm v04 --sass --summary`)
                acc[i] += a_tile[(thread_row * TM + i) * BK + kk] * b
        cuda.syncthreads()  # every thread is done reading the tiles before the next step overwrites them

    col = col0 + thread_col
    for i in range(TM):
        row = row0 + thread_row * TM + i
        if row < m and col < n:
            if beta != 0:
                out[row, col] = alpha * acc[i] + beta * C[row, col]
            else:
                out[row, col] = alpha * acc[i]


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    m, n = out.shape
    grid = ((n + BN - 1) // BN, (m + BM - 1) // BM)
    sgemm_kernel[grid, THREADS](A, B, out if C is None else C, out, np.float32(alpha), np.float32(beta))
