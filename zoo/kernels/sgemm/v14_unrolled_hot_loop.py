"""Unrolled hot loop: v12's kernel with the k slices of each tile pair as straight-line code, on v13's plan.

Changes:
    From v12's kernel, which v13 launches: the hot loop, the BK k slices that
    multiply one pair of shared tiles (``make_tile_multiply``), is unrolled
    with ``zoo.device.jit.unrolled``: BK inlined copies of one k slice, each
    with ``kk`` a constant. Both flavours get it; in the sliced one the K
    slices add four results with one 128-bit atomic on sm_90
    (``red_add_float4``: ``REDG.E.ADD.F32x4``; scalar atomics took four L2
    requests a float4, and a fifth longer on the H100: ``sweeps/NOTES.md``).
    ``launch`` is v13's: whole waves unsplit, the last wave split along K.

Why it is faster:
    numba has no ``#pragma unroll``, and LLVM leaves a loop whose body is 128
    FMAs rolled: a 64-bit counter, a test and a branch a k slice, addresses
    recomputed, and every slice waits about 30 cycles for its own shared
    loads. Unrolled, each address is the tile's base register plus a
    constant folded into the LDS, and the compiler schedules the whole tile
    at once: each slice's loads go out among the previous slice's FMAs.
    Every wave is shorter, so v13's plan still pays: at 4097^3 this kernel
    unsplit ran 81.5% of cuBLAS on the H200, split on the last wave 94.0%.
"""

import numpy as np

from zoo.device import compute_capability, cuda, float32, uint32
from zoo.device.jit import jit, unrolled
from zoo.device.memory import aligned, load_flat, load_float4, red_add_flat, red_add_float4, store_flat, store_float4
from zoo.errors import OutOfRange
from zoo.kernels.sgemm.plan import last_wave, slices
from zoo.kernels.sgemm.tiles import STEP_TILES, pick_tiles

LIMIT = 2**32  # elements per matrix addressable with uint32 indices
TILES = STEP_TILES  # the shape of the module-level kernels below (the simulator's are smaller: tiles.py)
SCALE_THREADS = 256
VECTOR_ATOMICS = True  # the K slices add four results with one red.global.add.v4.f32 (sm_90 on)


def warp_layout(tiles):
    """(WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N): sub-tiles per warp tile along M, the sub-tile
    sides, the padded k-row of the transposed A tile (see v07), and the A and B values a thread holds per k."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    wm_iter = WM * WN // (32 * TM * TN * WN_ITER)
    return wm_iter, WM // wm_iter, WN // WN_ITER, BM + 4, wm_iter * TM, WN_ITER * TN


def make_tile_multiply(tiles):
    """A device function ``multiply_tile(a_tiles, b_tiles, a_base, b_base, acc)`` for ``tiles``: the hot loop,
    one pair of shared tiles' BK k slices added into ``acc``, as straight-line code (v11's loop, unrolled)."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N = warp_layout(tiles)

    @jit(device=True, forceinline=True)
    def k_slice(kk, a_tiles, b_tiles, a_base, b_base, acc, a_reg, b_reg):
        """One k slice: the thread's A and B values (128-bit shared loads), then REG_M x REG_N FMAs.
        ``kk`` is a constant here, so each address is a base register plus a constant offset."""
        for wm in range(WM_ITER):
            for h in range(TM // 4):
                r = wm * TM + 4 * h
                a_reg[r], a_reg[r + 1], a_reg[r + 2], a_reg[r + 3] = load_float4(
                    a_tiles, a_base + kk * uint32(A_STRIDE) + uint32(wm * WSUB_M + 4 * h)
                )
        for wn in range(WN_ITER):
            r = wn * TN
            b_reg[r], b_reg[r + 1], b_reg[r + 2], b_reg[r + 3] = load_float4(
                b_tiles, b_base + kk * uint32(BN) + uint32(wn * WSUB_N)
            )
        for m in range(REG_M):
            for n in range(REG_N):
                acc[m * REG_N + n] += a_reg[m] * b_reg[n]

    all_slices = unrolled(BK, k_slice)  # k_slice(0, ...), ..., k_slice(BK - 1, ...) in straight-line code

    # Offline for sm_90 at 128 x 128 x 16 tiles (`python -m zoo show sgemm v14 --sass --summary --size 256x256x64`):
    # one loop per block tile, 2,363 SASS instructions for its 2,048 FMAs with the staging included (1.15 per FMA),
    # 242 registers (v11: 208), still two blocks per SM, no spills. Double-buffering the slices' registers by hand
    # compiled to the same SASS. What is left against cuBLAS is mostly outside the FMAs: the staging's integer,
    # move, load and store instructions.
    @jit(device=True, forceinline=True)
    def multiply_tile(a_tiles, b_tiles, a_base, b_base, acc):
        a_reg = cuda.local.array(REG_M, float32)
        b_reg = cuda.local.array(REG_N, float32)
        all_slices(a_tiles, b_tiles, a_base, b_base, acc, a_reg, b_reg)

    return multiply_tile


def build_kernel(tiles, vec_a, vec_b, sliced, vec_red=False):
    """The kernel for ``tiles``: float4 loads of A when ``vec_a``, of B and float4 stores when ``vec_b``; with
    ``sliced``, block z takes the z-th of ``gridDim.z`` slices of K and adds its results with atomics, four at a
    time (one 128-bit ``red``) when ``vec_red``."""
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

    @jit(device=True, forceinline=True)
    def add_results(out, acc, M, N, row1, col1, alpha):
        """out += alpha * acc, with float32 atomics by flat index, for this thread's rows from row1 and columns
        from col1 that lie inside M and N: the other slices of K add into the same elements."""
        for wm in range(WM_ITER):
            for i in range(TM):
                row = row1 + uint32(wm * WSUB_M + i)
                if row < M:  # rows past M hold the clamped loads' products: never stored
                    for wn in range(WN_ITER):
                        col = col1 + uint32(wn * WSUB_N)
                        at = row * N + col
                        base = (wm * TM + i) * REG_N + wn * TN
                        if vec_red and col + uint32(3) < N:  # four results in one atomic: at is a multiple of 4
                            red_add_float4(
                                out,
                                at,
                                alpha * acc[base],
                                alpha * acc[base + 1],
                                alpha * acc[base + 2],
                                alpha * acc[base + 3],
                            )
                            continue
                        if col < N:
                            red_add_flat(out, at, alpha * acc[base])
                        if col + uint32(1) < N:
                            red_add_flat(out, at + uint32(1), alpha * acc[base + 1])
                        if col + uint32(2) < N:
                            red_add_flat(out, at + uint32(2), alpha * acc[base + 2])
                        if col + uint32(3) < N:
                            red_add_flat(out, at + uint32(3), alpha * acc[base + 3])

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

        if sliced:  # this block's slice of K, [k_begin, k_end): ceil(steps / S) whole BK steps, S = gridDim.z
            slice_steps = ((K + uint32(BK - 1)) // uint32(BK) + uint32(cuda.gridDim.z - 1)) // uint32(cuda.gridDim.z)
            k_begin = uint32(cuda.blockIdx.z) * slice_steps * uint32(BK)  # a multiple of BK: float4 alignment kept
            k_end = min(K, k_begin + slice_steps * uint32(BK))  # the launch drops empty slices: k_begin < K
        else:  # all of K, as in v12's unsliced flavour
            k_begin = uint32(0)
            k_end = K
        steps = (k_end - k_begin + uint32(BK - 1)) // uint32(BK)
        whole = (k_end - k_begin) // uint32(BK)  # steps lying wholly inside the slice: these stage without guards
        if whole > uint32(0):
            stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, k_begin, N, k_end, False)
        else:
            stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, k_begin, N, k_end, True)
        commit(staged, a_tiles, b_tiles, uint32(0), a_row_in_tile, a_k_in_tile, b_k_in_tile, b_col_in_tile)
        cuda.syncthreads()  # buffer 0 is full before any thread reads it

        for step in range(steps):
            step = uint32(step)
            current = step % uint32(2)
            more = step + uint32(1) < steps
            if more:  # issue the next step's global loads now; they land while we compute
                k0 = k_begin + (step + uint32(1)) * uint32(BK)
                if step + uint32(1) < whole:  # uniform across the block: one branch per step
                    stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, k0, N, k_end, False)
                else:  # the slice's partial last step: zeros past k_end (the next slice's, or K)
                    stage(A, B, staged, a_at, b_cols, a_k_in_tile, b_k_in_tile, k0, N, k_end, True)
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
        if sliced:  # the other slices add into the same elements: out already holds beta * C
            add_results(out, acc, M, N, row1, col1, alpha)
        elif beta != 0:
            store_results(C, out, acc, M, N, row1, col1, alpha, beta, True)
        else:
            store_results(C, out, acc, M, N, row1, col1, alpha, beta, False)

    return sgemm_kernel


@jit
def scale_c(C, out, size, beta, with_c):
    """out = beta * C (or zeros): where the K slices' atomics start from. One thread an element, by flat index."""
    i = uint32(cuda.grid(1))
    if i < size:
        store_flat(out, i, beta * load_flat(C, i) if with_c else float32(0.0))


_kernels = {}


def kernel_for(tiles, vec_a, vec_b, sliced, vec_red=False):
    """The compiled-on-first-launch kernel for one tile shape, alignment case and flavour, built once."""
    key = (tiles, vec_a, vec_b, sliced, vec_red)
    if key not in _kernels:
        _kernels[key] = build_kernel(tiles, vec_a, vec_b, sliced, vec_red)
    return _kernels[key]


sgemm_kernel = kernel_for(TILES, True, True, True)  # module-level, so the harness can list them
sgemm_kernel_scalar = kernel_for(TILES, False, False, True)


def validate(A, B, C=None, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    if max(m * k, k * n, m * n) >= LIMIT:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: each matrix must hold fewer than 2^32 elements"
        )


def launch_split(tiles, split, A, B, C, out, alpha, beta):
    """K in at most ``split`` slices: S = 1 is one launch of the unsliced flavour; more write out = beta * C (or 0),
    then S blocks per tile add into it."""
    m, k = A.shape
    n = B.shape[1]
    split = slices(k, tiles.BK, split)[1]  # empty slices dropped
    grid = ((n + tiles.BN - 1) // tiles.BN, (m + tiles.BM - 1) // tiles.BM, split)  # z: which slice of K
    vec_a = k % 4 == 0 and aligned(A)  # every row of A starts on 16 bytes
    if split == 1:  # the unsliced flavour: no atomics, no extra pass
        source = C if (beta != 0 and C is not None) else out  # not read when beta == 0
        vec_b = n % 4 == 0 and aligned(B) and aligned(out) and (beta == 0 or aligned(source))
        kernel = kernel_for(tiles, vec_a, vec_b, False)
        # the matrices go in as they are: the kernel indexes them by flat index, so no reshaped view is made
        # per call (numba builds each one on the host, about 30 us apiece)
        kernel[grid[:2], tiles.threads](
            A, B, source, out, np.uint32(m), np.uint32(n), np.uint32(k), np.float32(alpha), np.float32(beta)
        )
        return
    with_c = beta != 0 and C is not None
    # 2-D arrays indexed by flat index (load_flat, red_add_flat): a reshaped view costs about 30 us of host time
    scale_c[-(-(m * n) // SCALE_THREADS), SCALE_THREADS](
        C if with_c else out, out, np.uint32(m * n), np.float32(beta), with_c
    )
    vec_b = n % 4 == 0 and aligned(B)
    kernel = kernel_for(tiles, vec_a, vec_b, True, vector_atomics(n, out))
    # C and beta are the unsliced flavour's: beta * C is already in out
    kernel[grid, tiles.threads](
        A, B, out, out, np.uint32(m), np.uint32(n), np.uint32(k), np.float32(alpha), np.float32(0.0)
    )


def launch_plan(p, tiles, A, B, C, out, alpha, beta):
    """Run plan ``p``: the first ``p['rows']`` tile rows unsplit, the rows below in ``p['split']`` slices of K."""
    m = A.shape[0]
    cut = min(m, p["rows"] * tiles.BM)  # the first output row of the leftover
    with_c = C is not None and beta != 0
    if cut == m or cut == 0:  # one launch on the whole matrices: no views (numba builds each one on the host, ~30 us)
        launch_split(tiles, 1 if cut else p["split"], A, B, C, out, alpha, beta)
        return
    # whole waves: the top rows, as if they were the whole problem; then the rows below
    launch_split(tiles, 1, A[:cut], B, C[:cut] if with_c else None, out[:cut], alpha, beta)
    launch_split(tiles, p["split"], A[cut:], B, C[cut:] if with_c else None, out[cut:], alpha, beta)


def vector_atomics(n, out):
    """Whether the K slices add with 128-bit atomics: sm_90 on (the simulator runs them as four scalar ones),
    and rows of whole float4s from a 16-byte aligned start."""
    return VECTOR_ATOMICS and (compute_capability() or (9, 0)) >= (9, 0) and n % 4 == 0 and aligned(out)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    tiles = pick_tiles(m, n, k)
    launch_plan(last_wave(m, n, k, tiles), tiles, A, B, C, out, alpha, beta)
