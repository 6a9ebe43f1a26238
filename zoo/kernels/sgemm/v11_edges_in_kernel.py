"""Edges in the kernel: v10's double-buffered warp tiling on any M, N, K with no padded copies.

Changes:
    ``padding.run_tiled`` is gone: the kernel takes the caller's matrices as
    they are and the grid rounds up to whole tiles. M and N edges: staging rows
    of A past M and columns of B past N are clamped to the last valid ones once,
    before the K loop, and the store skips what they produced. K edge: only a
    partial last step stages with guarded loads (zeros past K). Alignment:
    ``launch`` picks float4 or scalar loads for each side (K % 4, N % 4 and the
    base addresses), one of four kernels built from one source (``build_kernel``).
    beta != 0 reads C in the store. The tiles are v10's pick for the call's
    shape class, and the 2-D matrices go in without reshaped views.

Why it is faster:
    For shapes that are not whole tiles, v10 allocated padded buffers, copied
    A and B (and C) into them and cropped the result: three to four extra
    passes over memory plus allocations per call. Here those shapes cost what
    the kernel costs. Whole-tile shapes run v10's hot loop: the clamps are
    computed once before the K loop, and a compare and a branch per step (the
    K edge) are few next to 2048 FMAs. For small problems the host's share
    matters too: v10's four reshaped views cost about 30 us each per call.
"""

import numpy as np

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_flat, load_float4, store_flat, store_float4
from zoo.errors import OutOfRange
from zoo.kernels.sgemm.tiles import STEP_TILES, pick_tiles

LIMIT = 2**32  # elements per matrix addressable with uint32 indices
TILES = STEP_TILES  # the shape of the module-level kernels below (the simulator's are smaller: tiles.py)


def warp_layout(tiles):
    """(WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N): sub-tiles per warp tile along M, the sub-tile
    sides, the padded k-row of the transposed A tile (see v07), and the A and B values a thread holds per k."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    wm_iter = WM * WN // (32 * TM * TN * WN_ITER)
    return wm_iter, WM // wm_iter, WN // WN_ITER, BM + 4, wm_iter * TM, WN_ITER * TN


def make_tile_multiply(tiles):
    """A device function ``multiply_tile(a_tiles, b_tiles, a_base, b_base, acc)`` for ``tiles``: the hot loop,
    one pair of shared tiles' BK k slices added into ``acc`` (v09's loop, unchanged)."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N = warp_layout(tiles)

    # Offline for sm_90 (`python -m zoo show sgemm v11 --sass --summary --size 256x256x64`): 151 SASS instructions
    # for 128 FMAs per k slice (1.2 per FMA: 6 LDS.128, 16 integer), as in v10; 208 registers, no spills
    @jit(device=True, forceinline=True)
    def multiply_tile(a_tiles, b_tiles, a_base, b_base, acc):
        a_reg = cuda.local.array(REG_M, float32)
        b_reg = cuda.local.array(REG_N, float32)
        for kk in range(BK):
            for wm in range(WM_ITER):
                for h in range(TM // 4):
                    at = a_base + uint32(kk * A_STRIDE + wm * WSUB_M + 4 * h)
                    r = wm * TM + 4 * h
                    a_reg[r], a_reg[r + 1], a_reg[r + 2], a_reg[r + 3] = load_float4(a_tiles, at)
            for wn in range(WN_ITER):
                at = b_base + uint32(kk * BN + wn * WSUB_N)
                b_reg[wn * TN + 0], b_reg[wn * TN + 1], b_reg[wn * TN + 2], b_reg[wn * TN + 3] = load_float4(
                    b_tiles, at
                )
            for m in range(REG_M):
                for n in range(REG_N):
                    acc[m * REG_N + n] += a_reg[m] * b_reg[n]

    return multiply_tile


def build_kernel(tiles, vec_a, vec_b):
    """The kernel for ``tiles``: float4 loads of A when ``vec_a``, of B and float4 stores when ``vec_b``."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    assert TN == 4 and TM % 4 == 0, "B values and results move as float4, A values in groups of four"
    THREADS = tiles.threads
    WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N = warp_layout(tiles)
    A_TILE = BK * A_STRIDE
    B_TILE = BK * BN
    A_BUFFERS = 2 * A_TILE
    B_BUFFERS = 2 * B_TILE
    ACC = REG_M * REG_N
    A_ROWS_PER_PASS = THREADS // (BK // 4)
    B_ROWS_PER_PASS = THREADS // (BN // 4)
    A_PASSES = BM // A_ROWS_PER_PASS
    B_PASSES = BK // B_ROWS_PER_PASS
    STAGED = 4 * (A_PASSES + B_PASSES)

    @jit(device=True, forceinline=True)
    def stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, k0, N, K, guard):
        """Global loads of the tiles at k0 into ``staged``; with ``guard``, zeros wherever k >= K.

        ``guard`` is a constant at each call site, so inlining leaves one of the two paths."""
        zero = float32(0.0)
        for p in range(A_PASSES):
            k = k0 + a_k_in_tile
            at = a_at[p] + k0
            if vec_a:  # K % 4 == 0 and k % 4 == 0: the four k's are all below K or all past it
                if guard and k >= K:
                    v = (zero, zero, zero, zero)
                else:
                    v = load_float4(A, at)
            else:
                v = (
                    load_flat(A, at) if not guard or k < K else zero,
                    load_flat(A, at + uint32(1)) if not guard or k + uint32(1) < K else zero,
                    load_flat(A, at + uint32(2)) if not guard or k + uint32(2) < K else zero,
                    load_flat(A, at + uint32(3)) if not guard or k + uint32(3) < K else zero,
                )
            staged[4 * p], staged[4 * p + 1], staged[4 * p + 2], staged[4 * p + 3] = v
        for p in range(B_PASSES):
            k = k0 + b_k_in_tile + uint32(p * B_ROWS_PER_PASS)
            q = 4 * (A_PASSES + p)
            if guard and k >= K:
                v = (zero, zero, zero, zero)
            elif vec_b:
                v = load_float4(B, k * N + b_cols[0])
            else:
                v = (
                    load_flat(B, k * N + b_cols[0]),
                    load_flat(B, k * N + b_cols[1]),
                    load_flat(B, k * N + b_cols[2]),
                    load_flat(B, k * N + b_cols[3]),
                )
            staged[q], staged[q + 1], staged[q + 2], staged[q + 3] = v

    @jit(device=True, forceinline=True)
    def commit(staged, a_tiles, b_tiles, buffer, a_row_in_tile, a_k_in_tile, b_k_in_tile, b_col_in_tile):
        """Registers to shared buffer ``buffer`` (0 or 1); A goes in transposed, as in v07."""
        for p in range(A_PASSES):
            for j in range(4):
                a_tiles[
                    buffer * uint32(A_TILE)
                    + (a_k_in_tile + uint32(j)) * uint32(A_STRIDE)
                    + a_row_in_tile
                    + uint32(p * A_ROWS_PER_PASS)
                ] = staged[4 * p + j]
        for p in range(B_PASSES):
            q = 4 * (A_PASSES + p)
            store_float4(
                b_tiles,
                buffer * uint32(B_TILE) + (b_k_in_tile + uint32(p * B_ROWS_PER_PASS)) * uint32(BN) + b_col_in_tile,
                staged[q],
                staged[q + 1],
                staged[q + 2],
                staged[q + 3],
            )

    @jit(device=True, forceinline=True)
    def store_results(C, out, acc, M, N, row1, col1, alpha, beta, with_c):
        """alpha * acc (+ beta * C when ``with_c``) into this thread's rows from row1 and columns from
        col1, those inside M and N. Reads of C past N move back to column N - 1: in bounds, and their
        values go to elements the store skips, so the reads need no branch."""
        for wm in range(WM_ITER):
            for i in range(TM):
                row = row1 + uint32(wm * WSUB_M + i)
                if row < M:  # rows past M hold the clamped loads' products: never stored
                    for wn in range(WN_ITER):
                        col = col1 + uint32(wn * WSUB_N)
                        at = row * N + col
                        base = (wm * TM + i) * REG_N + wn * TN
                        r0, r1, r2, r3 = (
                            alpha * acc[base],
                            alpha * acc[base + 1],
                            alpha * acc[base + 2],
                            alpha * acc[base + 3],
                        )
                        if vec_b:
                            if col < N:  # N % 4 == 0: the four columns are all inside or all past N
                                if with_c:
                                    c0, c1, c2, c3 = load_float4(C, at)
                                    r0, r1, r2, r3 = r0 + beta * c0, r1 + beta * c1, r2 + beta * c2, r3 + beta * c3
                                store_float4(out, at, r0, r1, r2, r3)
                        elif col < N:  # any row start: 32-bit stores, cut at column N
                            if with_c:
                                last = row * N + N - uint32(1)
                                r0 += beta * load_flat(C, at)
                                r1 += beta * load_flat(C, min(at + uint32(1), last))
                                r2 += beta * load_flat(C, min(at + uint32(2), last))
                                r3 += beta * load_flat(C, min(at + uint32(3), last))
                            store_flat(out, at, r0)
                            if col + uint32(1) < N:
                                store_flat(out, at + uint32(1), r1)
                            if col + uint32(2) < N:
                                store_flat(out, at + uint32(2), r2)
                            if col + uint32(3) < N:
                                store_flat(out, at + uint32(3), r3)

    multiply_tile = make_tile_multiply(tiles)

    @jit
    def sgemm_kernel(A, B, C, out, M, N, K, alpha, beta):
        a_tiles = cuda.shared.array(A_BUFFERS, float32)
        b_tiles = cuda.shared.array(B_BUFFERS, float32)
        staged = cuda.local.array(STAGED, float32)
        a_at = cuda.local.array(A_PASSES, uint32)  # flat index of each staged A row at k = 0
        b_cols = cuda.local.array(4, uint32)  # the columns of B this thread stages
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
        # M and N edges, once: rows past M read row M - 1 and columns past N read the last valid ones.
        # Their products fill only tile rows and columns the store below skips, so no load needs a guard.
        for p in range(A_PASSES):
            a_at[p] = min(row0 + a_row_in_tile + uint32(p * A_ROWS_PER_PASS), M - uint32(1)) * K + a_k_in_tile
        for j in range(4):
            if vec_b:  # N % 4 == 0: a float4 past the edge moves back to the last four columns, still aligned
                b_cols[j] = min(col0 + b_col_in_tile, N - uint32(4)) + uint32(j)
            else:
                b_cols[j] = min(col0 + b_col_in_tile + uint32(j), N - uint32(1))

        acc = cuda.local.array(ACC, float32)
        for i in range(ACC):
            acc[i] = float32(0.0)

        steps = (K + uint32(BK - 1)) // uint32(BK)
        whole = K // uint32(BK)  # steps lying wholly inside K: these stage without guards
        if whole > uint32(0):
            stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, uint32(0), N, K, False)
        else:
            stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, uint32(0), N, K, True)
        commit(staged, a_tiles, b_tiles, uint32(0), a_row_in_tile, a_k_in_tile, b_k_in_tile, b_col_in_tile)
        cuda.syncthreads()  # buffer 0 is full before any thread reads it

        for step in range(steps):
            step = uint32(step)
            current = step % uint32(2)
            more = step + uint32(1) < steps
            if more:  # issue the next step's global loads now; they land while we compute
                k0 = (step + uint32(1)) * uint32(BK)
                if step + uint32(1) < whole:  # uniform across the block: one branch per step
                    stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, k0, N, K, False)
                else:  # the partial last step: zeros past K, so they add nothing to the dot products
                    stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, k0, N, K, True)
            a_base = current * uint32(A_TILE) + warp_row * uint32(WM) + t_row * uint32(TM)
            b_base = current * uint32(B_TILE) + warp_col * uint32(WN) + t_col * uint32(TN)
            multiply_tile(a_tiles, b_tiles, a_base, b_base, acc)
            if more:  # fill the other buffer: its readers finished before the last barrier
                commit(
                    staged,
                    a_tiles,
                    b_tiles,
                    current ^ uint32(1),
                    a_row_in_tile,
                    a_k_in_tile,
                    b_k_in_tile,
                    b_col_in_tile,
                )
            cuda.syncthreads()  # one barrier per step: the new buffer is full and the old one is free

        row1 = row0 + warp_row * uint32(WM) + t_row * uint32(TM)  # this thread's first row and column
        col1 = col0 + warp_col * uint32(WN) + t_col * uint32(TN)
        # C is read only when it contributes. Two copies of the store loops, each small enough for NVVM to unroll:
        # one copy with a branch per element was not unrolled and sent the 128 accumulators to a 512-byte stack
        if beta != 0:
            store_results(C, out, acc, M, N, row1, col1, alpha, beta, True)
        else:
            store_results(C, out, acc, M, N, row1, col1, alpha, beta, False)

    return sgemm_kernel


_kernels = {}


def kernel_for(tiles, vec_a, vec_b):
    """The compiled-on-first-launch kernel for one tile shape and alignment case, built once."""
    key = (tiles, vec_a, vec_b)
    if key not in _kernels:
        _kernels[key] = build_kernel(tiles, vec_a, vec_b)
    return _kernels[key]


sgemm_kernel = kernel_for(TILES, True, True)  # module-level, so the harness can list them
sgemm_kernel_scalar = kernel_for(TILES, False, False)


def validate(A, B, C=None, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    if max(m * k, k * n, m * n) >= LIMIT:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: each matrix must hold fewer than 2^32 elements"
        )


def launch_with(tiles, A, B, C, out, alpha, beta):
    """Run the kernel built from ``tiles`` on any shape."""
    m, k = A.shape
    n = B.shape[1]
    source = C if (beta != 0 and C is not None) else out  # not read when beta == 0
    vec_a = k % 4 == 0 and aligned(A)  # every row of A starts on 16 bytes
    vec_b = n % 4 == 0 and aligned(B) and aligned(out) and (beta == 0 or aligned(source))
    kernel = kernel_for(tiles, vec_a, vec_b)
    grid = ((n + tiles.BN - 1) // tiles.BN, (m + tiles.BM - 1) // tiles.BM)
    # the matrices go in as they are: the kernel indexes them by flat index (zoo.device.memory), so no
    # reshaped view is made per call (numba builds each one on the host, about 30 us apiece); the scalars
    # are NumPy's: numba's uint32(m) works on the host too but costs about 5 us a call, NumPy's under 1
    kernel[grid, tiles.threads](
        A, B, source, out, np.uint32(m), np.uint32(n), np.uint32(k), np.float32(alpha), np.float32(beta)
    )


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    launch_with(pick_tiles(A.shape[0], B.shape[1], A.shape[1]), A, B, C, out, alpha, beta)
