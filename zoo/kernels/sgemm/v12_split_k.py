"""Split-K: small and skinny problems fill the GPU by giving each output tile several blocks along K.

Changes:
    v11's kernel, with two edits: block (x, y, z) computes tile (x, y) over the
    z-th slice of K, ``[z * k_slice, min(K, (z + 1) * k_slice))`` (the guarded
    last step now stops at the slice's end), and it adds ``alpha * acc`` to the
    output with float32 atomics instead of storing it. ``launch`` first writes
    ``out = beta * C`` (or zeros) with a one-thread-per-element kernel, then
    launches S slices per tile. ``plan`` picks S from M, N, K and the SM count:

        tiles = ceil(M / BM) * ceil(N / BN)
        slots = SMs * BLOCKS_PER_SM   (blocks resident at once: one wave)
        S     = min(slots // tiles, ceil(K / BK) // MIN_SLICE_STEPS, MAX_SPLIT)

    and S = 1 (plain v11, no atomics, no extra pass) when that is below 2. On
    an H200 (132 SMs, 2 blocks of 128 threads at about 212 registers per SM:
    264 slots): 1024^3 has 64 tiles, 24% of one wave; S = 4 makes 256 blocks,
    97%. 512 x 512 x 4096: 16 tiles, S = 16, 256 blocks. 128 x 128 x 65536: one
    tile, S = 32 (the cap), where v11 runs one block on one SM. 2048^2 (256
    tiles) and larger stay with v11. Combining: atomics into the pre-scaled
    output, not a second reduction pass, because a pass needs an S x M x N
    workspace (an allocation per call, the kind of cost v11 removed, and S M N
    more floats written and read); the price is that the order of the S
    additions to an element changes from run to run, so results are not
    bitwise reproducible. Each slice's sum is as accurate as v11's and S adds
    at most S - 1 roundings more, inside the family's tolerance.

Why it is faster:
    Wave quantization: a grid of fewer blocks than slots leaves SMs idle for
    the whole call, however fast each block is. Splitting K multiplies the
    blocks by S and divides each block's K loop by S, so the same FMAs spread
    over up to S times more SMs. What it costs: the ``out = beta * C`` pass
    (4 M N bytes written, plus 4 M N read when beta != 0), and S M N scalar
    atomics, which the L2 resolves but which also replace v11's 128-bit stores.
    The tiles are v10's pick for the call's shape class (``tune.tiles_for``);
    the plan assumes 2 blocks per SM, true for the large class's shape on the
    H200, and smaller tiles (more blocks per SM) shift the break-even. With
    the small class's 64 x 128 tiles, 1024^3 makes 128 tiles and the plan
    takes S = 2: on the H200 that call took 212 us against v11's 116 us,
    so with tiles sized to the problem the extra pass and the atomics cost
    more than the split gains there; split-K pays where even small tiles
    leave SMs idle (a few tiles, a long K). Offline for sm_90 (``python -m
    zoo show sgemm v12 --sass --summary --size 256x256x1024``): the split kernel has 216
    registers (222 scalar), no spills, v11's hot loop (1.2 instructions per
    FMA), and 128 ``REDG.E.ADD.F32.FTZ`` per thread where v11 has 32 128-bit
    stores; the float atomics flush subnormal results to zero.

Measured:
    NVIDIA H200, size 4096: 42,219 GFLOP/s (3,255 us a call), 82.3% of cuBLAS, 208
    registers, occupancy bound 12%. Other sizes, % of cuBLAS: 1024: 51.4%, 2048: 83.3%,
    4095: 80.4%, 4097: 71.9%, 8192: 82.9%, 3000x5000x2000: 86.3%. From
    results/nvidia-h200.json.
"""
import numpy as np
from numba import cuda, float32, uint32

from zoo.device import sm_count
from zoo.device.jit import jit
from zoo.kernels.sgemm import tune, v11_edges_in_kernel as v11
from zoo.kernels.sgemm.v11_edges_in_kernel import TILES, aligned, validate  # noqa: F401
from zoo.device.memory import load_float4, store_float4

# v10's tile shape on sm_90: 128 threads at 208 to 222 registers (allocated as 224: 28,672 of an SM's
# 65,536) and 33 KB of shared memory: registers allow 2 blocks per SM.
BLOCKS_PER_SM = 2
MIN_SLICE_STEPS = 4  # BK steps per slice at least: the prologue, the barrier and the atomics amortise
MAX_SPLIT = 32  # atomics per output element at most
SCALE_THREADS = 256


def build(tiles, vec_a, vec_b, multiply_for=v11.multiply_for):
    """The split kernel for ``tiles``: float4 loads of A when ``vec_a``, of B when ``vec_b``; the hot loop
    is ``multiply_for(tiles)``'s (v11's, or v14's for v15)."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    assert TN == 4 and TM % 4 == 0, "B values and results move as float4, A values in groups of four"
    THREADS = tiles.threads
    WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N = v11.warp_layout(tiles)
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
                v = (A[at] if not guard or k < K else zero,
                     A[at + uint32(1)] if not guard or k + uint32(1) < K else zero,
                     A[at + uint32(2)] if not guard or k + uint32(2) < K else zero,
                     A[at + uint32(3)] if not guard or k + uint32(3) < K else zero)
            staged[4 * p], staged[4 * p + 1], staged[4 * p + 2], staged[4 * p + 3] = v
        for p in range(B_PASSES):
            k = k0 + b_k + uint32(p * B_ROWS_PER_PASS)
            q = 4 * (A_PASSES + p)
            if guard and k >= K:
                v = (zero, zero, zero, zero)
            elif vec_b:
                v = load_float4(B, k * N + b_cols[0])
            else:
                v = (B[k * N + b_cols[0]], B[k * N + b_cols[1]], B[k * N + b_cols[2]], B[k * N + b_cols[3]])
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
    def add_results(out, acc, M, N, row1, col1, alpha):
        """out += alpha * acc, with float32 atomics, for this thread's rows from row1 and columns from col1
        that lie inside M and N: the other slices of K add into the same elements."""
        for wm in range(WM_ITER):
            for i in range(TM):
                row = row1 + uint32(wm * WSUB_M + i)
                if row < M:  # rows past M hold the clamped loads' products: never stored
                    for wn in range(WN_ITER):
                        col = col1 + uint32(wn * WSUB_N)
                        at = row * N + col
                        base = (wm * TM + i) * REG_N + wn * TN
                        if col < N:
                            cuda.atomic.add(out, at, alpha * acc[base])
                        if col + uint32(1) < N:
                            cuda.atomic.add(out, at + uint32(1), alpha * acc[base + 1])
                        if col + uint32(2) < N:
                            cuda.atomic.add(out, at + uint32(2), alpha * acc[base + 2])
                        if col + uint32(3) < N:
                            cuda.atomic.add(out, at + uint32(3), alpha * acc[base + 3])

    multiply_tile = multiply_for(tiles)

    @jit
    def sgemm_kernel(A, B, out, M, N, K, k_slice, alpha):
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

        k_begin = uint32(cuda.blockIdx.z) * k_slice  # this block's slice of K: [k_begin, k_end)
        k_end = min(K, k_begin + k_slice)  # k_slice is a multiple of BK, so k_begin keeps float4 alignment
        steps = (k_end - k_begin + uint32(BK - 1)) // uint32(BK)
        whole = (k_end - k_begin) // uint32(BK)  # steps lying wholly inside the slice: no guards
        if whole > uint32(0):
            stage(A, B, staged, a_at, b_cols, a_k, b_k, k_begin, N, k_end, False)
        else:
            stage(A, B, staged, a_at, b_cols, a_k, b_k, k_begin, N, k_end, True)
        commit(staged, a_tiles, b_tiles, uint32(0), a_r, a_k, b_k, b_c)
        cuda.syncthreads()  # buffer 0 is full

        for step in range(steps):
            step = uint32(step)
            current = step % uint32(2)
            more = step + uint32(1) < steps
            if more:  # issue the next step's global loads now; they land while we compute
                k0 = k_begin + (step + uint32(1)) * uint32(BK)
                if step + uint32(1) < whole:  # uniform across the block: one branch per step
                    stage(A, B, staged, a_at, b_cols, a_k, b_k, k0, N, k_end, False)
                else:  # the slice's partial last step: zeros past k_end (the next slice's, or K)
                    stage(A, B, staged, a_at, b_cols, a_k, b_k, k0, N, k_end, True)
            a_base = current * uint32(A_TILE) + warp_row * uint32(WM) + t_row * uint32(TM)
            b_base = current * uint32(B_TILE) + warp_col * uint32(WN) + t_col * uint32(TN)
            multiply_tile(a_tiles, b_tiles, a_base, b_base, acc)  # v11's hot loop, or v14's for v15
            if more:  # fill the other buffer: its readers finished before the last barrier
                commit(staged, a_tiles, b_tiles, current ^ uint32(1), a_r, a_k, b_k, b_c)
            cuda.syncthreads()  # one barrier per step: the new buffer is full and the old one is free

        row1 = row0 + warp_row * uint32(WM) + t_row * uint32(TM)  # this thread's first row and column
        col1 = col0 + warp_col * uint32(WN) + t_col * uint32(TN)
        add_results(out, acc, M, N, row1, col1, alpha)

    return sgemm_kernel


@jit
def scale_c(C, out, beta, with_c):
    """out = beta * C (or zeros): where the K slices' atomics start from. Flat arrays, one thread each."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = beta * C[i] if with_c else float32(0.0)


_kernels = {}


def kernel_for(tiles, vec_a, vec_b, multiply_for=v11.multiply_for):
    """The compiled-on-first-launch split kernel for one tile shape, alignment case and hot loop, built once."""
    key = (tiles, vec_a, vec_b, multiply_for)
    if key not in _kernels:
        _kernels[key] = build(tiles, vec_a, vec_b, multiply_for)
    return _kernels[key]


sgemm_kernel = kernel_for(TILES, True, True)  # module-level, so the harness reports their resources
sgemm_kernel_scalar = kernel_for(TILES, False, False)


def slices(k, bk, split):
    """(k_slice, S): K cut into at most ``split`` slices of whole BK steps (so every slice starts 16-byte
    aligned); rounding the slice up may leave the last ones empty, and those are dropped."""
    steps = -(-k // bk)
    k_slice = -(-steps // split) * bk
    return k_slice, -(-k // k_slice)


def plan(m, n, k, tiles=TILES, sms=None):
    """How a call is launched: a dict with the tile count, the block slots of one wave, the split S,
    the K slice each block takes, the blocks launched and the waves they make (see the docstring)."""
    sms = sm_count() if sms is None else sms
    tile_count = tune.output_tiles(m, n, tiles.BM, tiles.BN)
    slots = sms * BLOCKS_PER_SM
    steps = -(-k // tiles.BK)
    split = max(1, min(slots // tile_count, steps // MIN_SLICE_STEPS, MAX_SPLIT))
    k_slice, split = slices(k, tiles.BK, split)
    blocks = tile_count * split
    return {"tiles": tile_count, "slots": slots, "split": split, "k_slice": k_slice, "blocks": blocks,
            "waves": blocks / slots}


def launch_split(tiles, split, A, B, C, out, alpha, beta, multiply_for=v11.multiply_for):
    """S = ``split`` slices of K (S = 1 included): out = beta * C (or 0), then S blocks per tile add."""
    m, k = A.shape
    n = B.shape[1]
    k_slice, split = slices(k, tiles.BK, split)
    flat_out = out.reshape(m * n)
    with_c = beta != 0 and C is not None
    scale_c[-(-(m * n) // SCALE_THREADS), SCALE_THREADS](C.reshape(m * n) if with_c else flat_out, flat_out,
                                                        np.float32(beta), with_c)
    vec_a = k % 4 == 0 and aligned(A)  # every row of A starts on 16 bytes
    vec_b = n % 4 == 0 and aligned(B)  # the output is written with 32-bit atomics: no condition on it
    kernel = kernel_for(tiles, vec_a, vec_b, multiply_for)
    grid = (-(-n // tiles.BN), -(-m // tiles.BM), split)  # z: which slice of K
    kernel[grid, tiles.threads](A.reshape(m * k), B.reshape(k * n), flat_out, np.uint32(m), np.uint32(n), np.uint32(k),
                                np.uint32(k_slice), np.float32(alpha))


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    tiles = v11.tiles_for(m, n, k)  # v10's pick for this shape class
    split = plan(m, n, k, tiles)["split"]
    if split == 1:  # enough tiles to fill the GPU: v11, no atomics, no extra pass
        v11.launch_with(tiles, A, B, C, out, alpha, beta)
    else:
        launch_split(tiles, split, A, B, C, out, alpha, beta)
