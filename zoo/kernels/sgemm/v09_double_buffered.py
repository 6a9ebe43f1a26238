"""Double-buffered with 32-bit indices: the next tiles load while the current ones are multiplied.

Changes:
    From v08: (1) two shared buffers for each tile. At the top of each K step a
    thread issues the global loads of the *next* step into registers, multiplies
    out of the current buffer, then stores the registers into the other buffer;
    one barrier per step instead of two. (2) Every index is computed in unsigned
    32-bit arithmetic (``uint32``), and M, N, K arrive as ``uint32``. (3) The
    tile sizes come from a ``Tiles`` shape (``tiles.py``) that ``build_kernel``
    turns into the kernel's constants; v09 builds it for v08's shape.

Why it is faster:
    (1) Latency hiding: the ~500-cycle global loads of step t+1 are in flight
    during step t's 2048 FMAs instead of stalling the warp right before the
    barrier, and half the barriers go. (2) numba computes indices in signed
    64-bit, a multiply-add of two or more instructions plus a check for negative
    indices (Python's wraparound); unsigned 32-bit indices cannot be negative,
    so the check goes and the arithmetic is one instruction (numba-cuda #801).
    It caps each matrix at 2^32 elements, which ``validate`` enforces.
"""

import numpy as np

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.device.memory import load_float4, store_float4
from zoo.errors import OutOfRange
from zoo.kernels.sgemm.epilogue import store_scaled4
from zoo.kernels.sgemm.padding import run_tiled
from zoo.kernels.sgemm.tiles import DEFAULT

LIMIT = 2**32  # elements per matrix addressable with uint32 indices


def build_kernel(tiles):
    """Compile-time constants from ``tiles`` (closure variables are constants to numba), then the kernel."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    THREADS = tiles.threads
    WM_ITER = WM * WN // (32 * TM * TN * WN_ITER)  # sub-tiles per warp tile, along M
    WSUB_M = WM // WM_ITER
    WSUB_N = WN // WN_ITER
    A_STRIDE = BM + 4  # padded k-row of the transposed A tile (see v07)
    A_TILE = BK * A_STRIDE
    B_TILE = BK * BN
    A_BUFFERS = 2 * A_TILE  # two of each: one being read, one being filled
    B_BUFFERS = 2 * B_TILE
    REG_M = WM_ITER * TM
    REG_N = WN_ITER * TN
    ACC = REG_M * REG_N
    A_ROWS_PER_PASS = THREADS // (BK // 4)
    B_ROWS_PER_PASS = THREADS // (BN // 4)
    A_PASSES = BM // A_ROWS_PER_PASS  # float4 of A staged per thread per step
    B_PASSES = BK // B_ROWS_PER_PASS  # float4 of B
    STAGED = 4 * (A_PASSES + B_PASSES)  # floats held in registers between load and store

    @jit
    def sgemm_kernel(A, B, C, out, M, N, K, alpha, beta):
        a_tiles = cuda.shared.array(A_BUFFERS, float32)
        b_tiles = cuda.shared.array(B_BUFFERS, float32)
        staged = cuda.local.array(STAGED, float32)  # the next step's tiles, in registers
        tid = uint32(cuda.threadIdx.x)
        row0 = uint32(cuda.blockIdx.y) * uint32(BM)
        col0 = uint32(cuda.blockIdx.x) * uint32(BN)
        warp = tid // uint32(32)
        warp_row = warp // uint32(BN // WN)  # which warp tile of the block tile this warp computes
        warp_col = warp % uint32(BN // WN)
        lane = tid % uint32(32)
        t_row = lane // uint32(WSUB_N // TN)  # where the lane sits in its warp's grid of threads per sub-tile
        t_col = lane % uint32(WSUB_N // TN)
        a_row_in_tile = tid // uint32(BK // 4)  # the row of the A slice this thread stages (plus a pass's rows)
        a_k_in_tile = tid % uint32(BK // 4) * uint32(4)  # and which 4 of its k's
        b_k_in_tile = tid // uint32(BN // 4)  # the row of the B slice this thread stages (plus a pass's rows)
        b_col_in_tile = tid % uint32(BN // 4) * uint32(4)  # and which 4 of its columns
        a_src = (row0 + a_row_in_tile) * K + a_k_in_tile  # where this thread's A float4s start, for k0 = 0
        b_src = b_k_in_tile * N + col0 + b_col_in_tile
        a_row_step = uint32(A_ROWS_PER_PASS) * K
        b_row_step = uint32(B_ROWS_PER_PASS) * N

        acc = cuda.local.array(ACC, float32)
        a_reg = cuda.local.array(REG_M, float32)
        b_reg = cuda.local.array(REG_N, float32)
        for i in range(ACC):
            acc[i] = float32(0.0)

        steps = K // uint32(BK)
        # prologue: step 0's tiles go straight into buffer 0
        for p in range(A_PASSES):
            staged[4 * p], staged[4 * p + 1], staged[4 * p + 2], staged[4 * p + 3] = load_float4(
                A, a_src + uint32(p) * a_row_step
            )
        for p in range(B_PASSES):
            q = 4 * (A_PASSES + p)
            staged[q], staged[q + 1], staged[q + 2], staged[q + 3] = load_float4(B, b_src + uint32(p) * b_row_step)
        for p in range(A_PASSES):
            for j in range(4):
                a_tiles[(a_k_in_tile + uint32(j)) * uint32(A_STRIDE) + a_row_in_tile + uint32(p * A_ROWS_PER_PASS)] = (
                    staged[4 * p + j]
                )
        for p in range(B_PASSES):
            q = 4 * (A_PASSES + p)
            store_float4(
                b_tiles,
                (b_k_in_tile + uint32(p * B_ROWS_PER_PASS)) * uint32(BN) + b_col_in_tile,
                staged[q],
                staged[q + 1],
                staged[q + 2],
                staged[q + 3],
            )
        cuda.syncthreads()  # buffer 0 is full before any thread reads it

        for step in range(steps):
            step = uint32(step)
            current = step % uint32(2)
            more = step + uint32(1) < steps
            if more:  # issue the next step's global loads now; they land while we compute
                a_next = a_src + (step + uint32(1)) * uint32(BK)
                b_next = b_src + (step + uint32(1)) * uint32(BK) * N
                for p in range(A_PASSES):
                    staged[4 * p], staged[4 * p + 1], staged[4 * p + 2], staged[4 * p + 3] = load_float4(
                        A, a_next + uint32(p) * a_row_step
                    )
                for p in range(B_PASSES):
                    q = 4 * (A_PASSES + p)
                    staged[q], staged[q + 1], staged[q + 2], staged[q + 3] = load_float4(
                        B, b_next + uint32(p) * b_row_step
                    )
            a_base = current * uint32(A_TILE) + warp_row * uint32(WM) + t_row * uint32(TM)
            b_base = current * uint32(B_TILE) + warp_col * uint32(WN) + t_col * uint32(TN)
            for kk in range(BK):
                for wm in range(WM_ITER):
                    at = a_base + uint32(kk * A_STRIDE + wm * WSUB_M)
                    a_reg[wm * TM + 0], a_reg[wm * TM + 1], a_reg[wm * TM + 2], a_reg[wm * TM + 3] = load_float4(
                        a_tiles, at
                    )
                    a_reg[wm * TM + 4], a_reg[wm * TM + 5], a_reg[wm * TM + 6], a_reg[wm * TM + 7] = load_float4(
                        a_tiles, at + uint32(4)
                    )
                for wn in range(WN_ITER):
                    at = b_base + uint32(kk * BN + wn * WSUB_N)
                    b_reg[wn * TN + 0], b_reg[wn * TN + 1], b_reg[wn * TN + 2], b_reg[wn * TN + 3] = load_float4(
                        b_tiles, at
                    )
                for m in range(REG_M):
                    for n in range(REG_N):
                        acc[m * REG_N + n] += a_reg[m] * b_reg[n]
            if more:  # fill the other buffer: its readers finished before the last barrier
                other = current ^ uint32(1)
                for p in range(A_PASSES):
                    for j in range(4):
                        a_tiles[
                            other * uint32(A_TILE)
                            + (a_k_in_tile + uint32(j)) * uint32(A_STRIDE)
                            + a_row_in_tile
                            + uint32(p * A_ROWS_PER_PASS)
                        ] = staged[4 * p + j]
                for p in range(B_PASSES):
                    q = 4 * (A_PASSES + p)
                    store_float4(
                        b_tiles,
                        other * uint32(B_TILE)
                        + (b_k_in_tile + uint32(p * B_ROWS_PER_PASS)) * uint32(BN)
                        + b_col_in_tile,
                        staged[q],
                        staged[q + 1],
                        staged[q + 2],
                        staged[q + 3],
                    )
            cuda.syncthreads()  # one barrier per step: the new buffer is full and the old one is free

        for wm in range(WM_ITER):
            for i in range(TM):
                row = row0 + warp_row * uint32(WM) + uint32(wm * WSUB_M) + t_row * uint32(TM) + uint32(i)
                for wn in range(WN_ITER):
                    at = row * N + col0 + warp_col * uint32(WN) + uint32(wn * WSUB_N) + t_col * uint32(TN)
                    base = (wm * TM + i) * REG_N + wn * TN
                    store_scaled4(C, out, at, alpha, beta, acc[base], acc[base + 1], acc[base + 2], acc[base + 3])

    return sgemm_kernel


sgemm_kernel = build_kernel(DEFAULT)


def validate(A, B, C=None, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    t = DEFAULT
    padded = [(m + t.BM) * (k + t.BK), (k + t.BK) * (n + t.BN), (m + t.BM) * (n + t.BN)]
    if max(padded) >= LIMIT:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: each matrix must hold fewer "
            f"than 2^32 elements after padding to whole tiles"
        )


def launch_with(kernel, tiles, A, B, C, out, alpha, beta):
    """Run ``kernel`` (built from ``tiles``) on any shape: whole tiles as they are, others padded."""

    def launch_tiles(a, b, c, result, M, N, K, alpha, beta):
        grid = (N // tiles.BN, M // tiles.BM)
        kernel[grid, tiles.threads](a, b, c, result, np.uint32(M), np.uint32(N), np.uint32(K), alpha, beta)

    run_tiled(launch_tiles, A, B, C, out, alpha, beta, tiles.BM, tiles.BN, tiles.BK)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    launch_with(sgemm_kernel, DEFAULT, A, B, C, out, alpha, beta)
