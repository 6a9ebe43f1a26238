"""Edges in the kernel: v10's double-buffered warp tiling on any M, N, K with no padded copies.

Changes:
    ``padding.run_tiled`` is gone from the launch: the kernel takes the caller's
    matrices as they are and the grid rounds up to whole tiles. (1) M and N
    edges: before the K loop, each staging row of A past M is clamped to row
    M - 1 and each staging column of B past N to the last valid one. Those
    loads read real memory, and their products land only in rows and columns of
    the block tile that the final store skips (``row < M``, ``col < N``).
    (2) K edge: the loop runs over ``ceil(K / BK)`` steps; every step but a
    partial last one stages with v09's unguarded loads, the last one with
    loads that put zeros past K (one uniform branch per step picks which).
    (3) Alignment: 16-byte loads and stores need every row start on 16 bytes.
    ``launch`` checks the base addresses and K % 4 (rows of A) and N % 4 (rows
    of B, C and the output) and launches one of four kernels compiled from the
    same source: float4 or scalar for the A side, float4 or scalar for the B
    and output side. (4) With beta != 0 the store reads C the same way: a
    read past N moves back to column N - 1, so it needs no branch, and the
    store loops exist twice (with C and without), each small enough for NVVM
    to unroll; one copy with a branch per element was not unrolled and sent
    the 128 accumulators to a 512-byte stack. (5) The tile shape is v10's
    pick for the call's shape class (``tune.tiles_for``). (6) The launch
    passes the 2-D matrices themselves: the kernel indexes them by flat index
    through ``zoo.device.memory`` (``load_flat``, ``load_float4``), where v10 made
    four reshaped views per call, host work of about 30 us each.

Why it is faster:
    For shapes that are not whole tiles, where v10 allocated padded
    buffers, copied A and B (and C) into them and cropped the result: three
    to four extra passes over memory plus allocations per call. Here those
    shapes cost what the kernel costs. For small problems, where the kernel
    takes about 100 us, the host's share of a call matters too: on the H200 at
    1024^3 v11's call cost 159 us of host time with the reshapes, more than
    its kernel, so back-to-back calls ran at the host's pace. Whole-tile
    shapes run v10's hot loop: the clamps are computed once before the K
    loop, and the added instructions per step (a compare and a branch for
    the K edge) are few next to 2048 FMAs. Offline for sm_90 (``python -m
    zoo show sgemm v11 --sass --summary --size 256x256x64`` for the float4 kernel, the default size 70x129x31 for
    the scalar one): 208 and 214 registers (v10: 212), no spills, no stack;
    the same hot loop as v10, 151 SASS instructions for 128 FMAs (1.2 per
    FMA: 6 LDS.128, 16 integer). The float4 kernel stages with LDG.E.128,
    the scalar one with four LDG.E each.

Measured:
    NVIDIA H200, size 4096: 42,228 GFLOP/s (3,255 us a call), 82.3% of cuBLAS, 208
    registers, occupancy bound 12%. Other sizes, % of cuBLAS: 1024: 68.4%, 2048: 82.9%,
    4095: 80.4%, 4097: 71.9%, 8192: 82.9%, 3000x5000x2000: 86.3%. From
    results/nvidia-h200.json.
"""
import numpy as np
from numba import cuda, float32, uint32

from zoo import SIMULATOR
from zoo.errors import OutOfRange
from zoo.device.jit import jit
from zoo.kernels.sgemm import tune
from zoo.kernels.sgemm.v09_double_buffered import DEFAULT, LIMIT, Tiles
from zoo.device.memory import aligned, load_flat, load_float4, store_flat, store_float4

# One warp per 32 x 32 block tile: the simulator runs every thread in Python, and its cost grows with
# the block tile, not with the matrix. The GPU runs v10's tuned shape (checked at GPU_TEST_SIZES).
SIMULATOR_TILES = Tiles(BM=32, BN=32, BK=8, WM=32, WN=32, WN_ITER=1, TM=8, TN=4)
TILES = SIMULATOR_TILES if SIMULATOR else (tune.best_tiles() or DEFAULT)


def warp_layout(tiles):
    """(WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N): sub-tiles per warp tile along M, the sub-tile
    sides, the padded k-row of the transposed A tile (see v07), and the A and B values a thread holds per k."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    wm_iter = WM * WN // (32 * TM * TN * WN_ITER)
    return wm_iter, WM // wm_iter, WN // WN_ITER, BM + 4, wm_iter * TM, WN_ITER * TN


def multiply_for(tiles):
    """``multiply_tile(a_tiles, b_tiles, a_base, b_base, acc)``: one block tile's BK k slices into ``acc``."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N = warp_layout(tiles)

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
                    b_tiles, at)
            for m in range(REG_M):
                for n in range(REG_N):
                    acc[m * REG_N + n] += a_reg[m] * b_reg[n]

    return multiply_tile


def build(tiles, vec_a, vec_b, multiply_for=multiply_for):
    """The kernel for ``tiles``: float4 loads of A when ``vec_a``, of B and float4 stores when ``vec_b``;
    ``multiply_for(tiles)`` makes the hot loop (v14 passes its own)."""
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
    def stage(A, B, staged, a_at, b_cols, a_k, b_k, k0, N, K, guard):
        """Global loads of the tiles at k0 into ``staged``; with ``guard``, zeros wherever k >= K.

        ``guard`` is a constant at each call site, so inlining leaves one of the two paths."""
        zero = float32(0.0)
        for p in range(A_PASSES):
            k = k0 + a_k
            at = a_at[p] + k0
            if vec_a:  # K % 4 == 0 and k % 4 == 0: the four k's are all below K or all past it
                if guard and k >= K:
                    v = (zero, zero, zero, zero)
                else:
                    v = load_float4(A, at)
            else:
                v = (load_flat(A, at) if not guard or k < K else zero,
                     load_flat(A, at + uint32(1)) if not guard or k + uint32(1) < K else zero,
                     load_flat(A, at + uint32(2)) if not guard or k + uint32(2) < K else zero,
                     load_flat(A, at + uint32(3)) if not guard or k + uint32(3) < K else zero)
            staged[4 * p], staged[4 * p + 1], staged[4 * p + 2], staged[4 * p + 3] = v
        for p in range(B_PASSES):
            k = k0 + b_k + uint32(p * B_ROWS_PER_PASS)
            q = 4 * (A_PASSES + p)
            if guard and k >= K:
                v = (zero, zero, zero, zero)
            elif vec_b:
                v = load_float4(B, k * N + b_cols[0])
            else:
                v = (load_flat(B, k * N + b_cols[0]), load_flat(B, k * N + b_cols[1]),
                     load_flat(B, k * N + b_cols[2]), load_flat(B, k * N + b_cols[3]))
            staged[q], staged[q + 1], staged[q + 2], staged[q + 3] = v

    @jit(device=True, forceinline=True)
    def commit(staged, a_tiles, b_tiles, buffer, a_r, a_k, b_k, b_c):
        """Registers to shared buffer ``buffer`` (0 or 1); A goes in transposed, as in v07."""
        for p in range(A_PASSES):
            for j in range(4):
                a_tiles[buffer * uint32(A_TILE) + (a_k + uint32(j)) * uint32(A_STRIDE) + a_r
                        + uint32(p * A_ROWS_PER_PASS)] = staged[4 * p + j]
        for p in range(B_PASSES):
            q = 4 * (A_PASSES + p)
            store_float4(b_tiles, buffer * uint32(B_TILE) + (b_k + uint32(p * B_ROWS_PER_PASS)) * uint32(BN) + b_c,
                         staged[q], staged[q + 1], staged[q + 2], staged[q + 3])

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
                        r0, r1, r2, r3 = (alpha * acc[base], alpha * acc[base + 1], alpha * acc[base + 2],
                                          alpha * acc[base + 3])
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

    multiply_tile = multiply_for(tiles)

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
        warp_row = warp // uint32(BN // WN)
        warp_col = warp % uint32(BN // WN)
        lane = tid % uint32(32)
        t_row = lane // uint32(WSUB_N // TN)
        t_col = lane % uint32(WSUB_N // TN)
        a_r = tid // uint32(BK // 4)
        a_k = tid % uint32(BK // 4) * uint32(4)
        b_k = tid // uint32(BN // 4)
        b_c = tid % uint32(BN // 4) * uint32(4)
        # M and N edges, once: rows past M read row M - 1 and columns past N read the last valid ones.
        # Their products fill only tile rows and columns the store below skips, so no load needs a guard.
        for p in range(A_PASSES):
            a_at[p] = min(row0 + a_r + uint32(p * A_ROWS_PER_PASS), M - uint32(1)) * K + a_k
        for j in range(4):
            if vec_b:  # N % 4 == 0: a float4 past the edge moves back to the last four columns, still aligned
                b_cols[j] = min(col0 + b_c, N - uint32(4)) + uint32(j)
            else:
                b_cols[j] = min(col0 + b_c + uint32(j), N - uint32(1))

        acc = cuda.local.array(ACC, float32)
        for i in range(ACC):
            acc[i] = float32(0.0)

        steps = (K + uint32(BK - 1)) // uint32(BK)
        whole = K // uint32(BK)  # steps lying wholly inside K: these stage without guards
        if whole > uint32(0):
            stage(A, B, staged, a_at, b_cols, a_k, b_k, uint32(0), N, K, False)
        else:
            stage(A, B, staged, a_at, b_cols, a_k, b_k, uint32(0), N, K, True)
        commit(staged, a_tiles, b_tiles, uint32(0), a_r, a_k, b_k, b_c)
        cuda.syncthreads()  # buffer 0 is full

        for step in range(steps):
            step = uint32(step)
            current = step % uint32(2)
            more = step + uint32(1) < steps
            if more:  # issue the next step's global loads now; they land while we compute
                k0 = (step + uint32(1)) * uint32(BK)
                if step + uint32(1) < whole:  # uniform across the block: one branch per step
                    stage(A, B, staged, a_at, b_cols, a_k, b_k, k0, N, K, False)
                else:  # the partial last step: zeros past K, so they add nothing to the dot products
                    stage(A, B, staged, a_at, b_cols, a_k, b_k, k0, N, K, True)
            a_base = current * uint32(A_TILE) + warp_row * uint32(WM) + t_row * uint32(TM)
            b_base = current * uint32(B_TILE) + warp_col * uint32(WN) + t_col * uint32(TN)
            multiply_tile(a_tiles, b_tiles, a_base, b_base, acc)
            if more:  # fill the other buffer: its readers finished before the last barrier
                commit(staged, a_tiles, b_tiles, current ^ uint32(1), a_r, a_k, b_k, b_c)
            cuda.syncthreads()  # one barrier per step: the new buffer is full and the old one is free

        row1 = row0 + warp_row * uint32(WM) + t_row * uint32(TM)  # this thread's first row and column
        col1 = col0 + warp_col * uint32(WN) + t_col * uint32(TN)
        if beta != 0:  # C is read only when it contributes; two copies of the loops, each small enough to unroll
            store_results(C, out, acc, M, N, row1, col1, alpha, beta, True)
        else:
            store_results(C, out, acc, M, N, row1, col1, alpha, beta, False)

    return sgemm_kernel


_kernels = {}


def kernel_for(tiles, vec_a, vec_b, multiply_for=multiply_for):
    """The compiled-on-first-launch kernel for one tile shape, alignment case and hot loop, built once."""
    key = (tiles, vec_a, vec_b, multiply_for)
    if key not in _kernels:
        _kernels[key] = build(tiles, vec_a, vec_b, multiply_for)
    return _kernels[key]


sgemm_kernel = kernel_for(TILES, True, True)  # module-level, so the harness reports their resources
sgemm_kernel_scalar = kernel_for(TILES, False, False)


def validate(A, B, C=None, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    if max(m * k, k * n, m * n) >= LIMIT:
        raise OutOfRange(f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: each matrix must hold fewer "
                         f"than 2^32 elements")


def launch_with(tiles, A, B, C, out, alpha, beta, multiply_for=multiply_for):
    """Run the kernel built from ``tiles`` (and ``multiply_for``'s hot loop) on any shape; v12 calls this for
    shapes it does not split, v14 with its own hot loop."""
    m, k = A.shape
    n = B.shape[1]
    source = C if (beta != 0 and C is not None) else out  # not read when beta == 0
    vec_a = k % 4 == 0 and aligned(A)  # every row of A starts on 16 bytes
    vec_b = n % 4 == 0 and aligned(B) and aligned(out) and (beta == 0 or aligned(source))
    kernel = kernel_for(tiles, vec_a, vec_b, multiply_for)
    grid = ((n + tiles.BN - 1) // tiles.BN, (m + tiles.BM - 1) // tiles.BM)
    # the matrices go in as they are: the kernel indexes them by flat index (zoo.device.memory), so no
    # reshaped view is made per call (numba builds each one on the host, about 30 us apiece); the scalars
    # are NumPy's: numba's uint32(m) works on the host too but costs about 5 us a call, NumPy's under 1
    kernel[grid, tiles.threads](A, B, source, out, np.uint32(m), np.uint32(n), np.uint32(k),
                                np.float32(alpha), np.float32(beta))


def tiles_for(m, n, k):
    """The tiles a call of this shape launches with: v10's pick for its class (v12 asks here too)."""
    return SIMULATOR_TILES if SIMULATOR else (tune.tiles_for(m, n, k) or DEFAULT)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    launch_with(tiles_for(A.shape[0], B.shape[1], A.shape[1]), A, B, C, out, alpha, beta)
