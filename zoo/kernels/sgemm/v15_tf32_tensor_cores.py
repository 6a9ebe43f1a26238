"""TF32 tensor cores: float32 in and out, the inputs rounded to TF32 and the products summed in float32 by ``mma.sync``.

Changes:
    A new unit, so the diff against v14 is the whole kernel: it is hgemm v07
    (multistage ``cp.async``, fragments double-buffered in registers, grouped
    block order) copied and moved to float32 operands. The FMA loop becomes
    ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`` (``mma_tf32_f32``,
    fragment table in the spec): A fragments come from ``ldmatrix``, B's from
    32-bit shared loads, each word rounded by ``to_tf32`` (``cvt.rna``). The
    tiles are padded instead of swizzled (see ``A_PAD``); k slices are 8 wide;
    the epilogue scales by alpha and adds beta C. Odd shapes are padded
    (``padding.run_tiled``, as in v06 to v10). ``TOLERANCE`` below is this
    step's own: TF32 keeps 10 mantissa bits, not 23.

Why it is faster:
    One ``mma`` does 2048 FLOPs for the warp where an FFMA does 64, and the
    H100's TF32 tensor cores peak at about 495 TFLOP/s against 67 for FFMA.
    The price is precision: each input is rounded to 11 significant bits, so
    the relative error against float64 is about 3e-4 instead of v14's 5e-6
    (the accumulation stays float32). Feeding them is the limit, as in hgemm:
    an ``mma`` here reads as many operand bytes as hgemm's for half the FLOPs,
    at half the peak rate, so shared memory caps both at the same fraction of
    their peaks (see ``Tiles``).
"""

from typing import NamedTuple

import numpy as np

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.device.mma import (
    SHARED_ALIGN,
    cp_async16,
    cp_async_commit,
    cp_async_wait_group,
    ldmatrix_x4,
    mma_tf32_f32,
    to_tf32,
)
from zoo.errors import OutOfRange
from zoo.kernels.sgemm.padding import round_up, run_tiled

MIN_CC = (8, 0)  # mma.sync .tf32 and cp.async: Ampere on (Volta and Turing have no TF32 tensor cores)

# Relative norm error accepted from this step instead of the family's 2e-5: rounding both inputs to TF32
# (2^-11 relative at most, uniform) gives about 2.9e-4 at any K for zero-mean data (NumPy model of the
# rounding), truncating them as the bare tensor core does 7.7e-4, bfloat16 inputs 2.3e-3.
TOLERANCE = 1e-3

CHUNK = 4  # float32 elements in 16 bytes: the unit of cp.async and of an ldmatrix row
A_PAD = 4  # floats after each A row (BK + 4 = 36 floats = 9 chunks): eight rows at one chunk column
# start in eight different 16-byte bank groups (9 r mod 8), so ldmatrix and the cp.async writes are
# conflict-free; unlike hgemm's swizzle, the offsets of every slice and fragment stay immediates.
B_PAD = 8  # floats after each B row (BN + 8): the 32-bit B loads of a warp read 4 rows (k = t) x 8
# columns (n = g); 8 extra floats put the 4 rows 8 banks apart, so the 32 lanes hit 32 banks.
LIMIT = 2**32  # elements per matrix addressable with uint32 indices
GROUP = 16  # block rows per group of the launch order: blocks running together share A's and B's panels in the L2


class Tiles(NamedTuple):
    """Block tile BM x BN x BK, warp tile WM x WN, and STAGES buffers of each tile."""

    BM: int = 128
    BN: int = 128
    BK: int = 32
    WM: int = 64  # hgemm's 64 x 64 warp tiles: 128 accumulators and 2 x 32 fragment words a thread
    WN: int = 64
    # Three stages of 35 KiB (padded float32 tiles) let two blocks share an SM's 227 KiB, as two
    # blocks' registers do. Per k slice of 8 a warp reads 4 KiB of fragments for its 32 mma (32 cycles
    # of the 128-byte-wide shared memory) and its share of the copies writes 2 KiB (16 cycles): at the
    # peak of one m16n8k8 per cycle an SM would need 1.5 shared-memory cycles per mma, so shared
    # memory caps this kernel near two thirds of the TF32 peak.
    STAGES: int = 3

    @property
    def threads(self):
        return (self.BM // self.WM) * (self.BN // self.WN) * 32

    def shared_bytes(self):
        return 4 * self.STAGES * (self.BM * (self.BK + A_PAD) + self.BK * (self.BN + B_PAD))


def valid(t):
    """True when the copies and warps divide evenly, the padding keeps the loads conflict-free and a stage
    has an even number of 8-wide slices (each step starts on fragment set 0)."""
    if t.BM % t.WM or t.BN % t.WN or t.WM % 16 or t.WN % 8 or t.BN % 32 or t.BK % 16 or t.STAGES < 2:
        return False
    threads = t.threads
    if threads > 1024 or (t.BM * t.BK // CHUNK) % threads or (t.BK * t.BN // CHUNK) % threads:
        return False
    return t.shared_bytes() <= 227 * 1024


def build(tiles):
    """The kernel for one tile shape (closure variables are compile-time constants to numba)."""
    if not valid(tiles):
        raise ValueError(f"tile shape {tiles} is not valid for this kernel")
    BM, BN, BK, WM, WN, STAGES = tiles
    WARPS_N = BN // WN
    THREADS = tiles.threads
    MT = WM // 16  # mma tiles of 16 x 8 per warp tile: MT along M, NT along N
    NT = WN // 8
    ACC = MT * NT * 4
    A_FRAG = MT * 4  # words of one k slice's A fragments: four per 16 x 8 tile
    B_FRAG = NT * 2  # and of its B fragments: two per 8 x 8 tile
    SET = A_FRAG + B_FRAG  # words in one set of fragments: A's, then B's
    FRAGS = 2 * SET
    SLICES = BK // 8
    A_STRIDE = BK + A_PAD
    B_STRIDE = BN + B_PAD
    A_TILE = BM * A_STRIDE
    B_TILE = BK * B_STRIDE
    B_BASE = STAGES * A_TILE  # the B buffers follow the A buffers in the one shared array
    A_PER_ROW = BK // CHUNK
    B_PER_ROW = BN // CHUNK
    A_CHUNKS = BM * A_PER_ROW // THREADS
    B_CHUNKS = BK * B_PER_ROW // THREADS
    A_PASS = THREADS // A_PER_ROW  # rows between a thread's copies
    B_PASS = THREADS // B_PER_ROW
    IN_FLIGHT = STAGES - 2  # copy groups that may still be pending when a step starts

    @jit(device=True, forceinline=True)
    def copy_stage(tiles, A, B, buffer, k0, a_src, a_dst, b_src, b_dst, N, K):
        """This thread's ``cp.async`` of the A and B slices at k0 into ``buffer``."""
        for p in range(A_CHUNKS):
            cp_async16(
                tiles,
                a_dst + buffer * uint32(A_TILE) + uint32(p * A_PASS * A_STRIDE),
                A,
                a_src + k0 + uint32(p * A_PASS) * K,
            )
        for p in range(B_CHUNKS):
            cp_async16(
                tiles,
                b_dst + buffer * uint32(B_TILE) + uint32(p * B_PASS * B_STRIDE),
                B,
                b_src + (k0 + uint32(p * B_PASS)) * N,
            )

    @jit(device=True, forceinline=True)
    def load_slice(tiles, frag, s, buffer, kk, a_row, b_row):
        """The A and B fragments of k slice ``kk`` of ``buffer``, rounded to TF32, into set ``s``.

        ``cvt.rna`` is three integer instructions a word in SASS (an infinity test, half a TF32 ulp added, the
        low 13 bits cleared): a warp's 128 words a BK = 32 step cost 384 instructions beside its 128 mma, the
        price of rounding to nearest where the bare tensor core would truncate."""
        a_at = buffer * uint32(A_TILE) + a_row + uint32(kk)
        for i in range(MT):  # ldmatrix on float32: matrix j's word t of row g is A[g (+8), t (+4)], a0 .. a3
            f = s * SET + 4 * i
            a0, a1, a2, a3 = ldmatrix_x4(tiles, a_at + uint32(i * 16 * A_STRIDE))
            frag[f], frag[f + 1], frag[f + 2], frag[f + 3] = to_tf32(a0), to_tf32(a1), to_tf32(a2), to_tf32(a3)
        b_at = uint32(B_BASE) + buffer * uint32(B_TILE) + b_row + uint32(kk * B_STRIDE)
        for j in range(NT):  # b0 = B[k t, n g], b1 = B[k t + 4, n g] of the 8 x 8 tile j
            f = s * SET + A_FRAG + 2 * j
            frag[f] = to_tf32(tiles[b_at + uint32(j * 8)])
            frag[f + 1] = to_tf32(tiles[b_at + uint32(4 * B_STRIDE + j * 8)])

    @jit(device=True, forceinline=True)
    def multiply_set(acc, frag, s):
        """acc += the warp tile's MT x NT mma from fragment set ``s``."""
        for i in range(MT):
            a = s * SET + 4 * i
            for j in range(NT):
                b = s * SET + A_FRAG + 2 * j
                c = 4 * (i * NT + j)
                acc[c], acc[c + 1], acc[c + 2], acc[c + 3] = mma_tf32_f32(
                    frag[a],
                    frag[a + 1],
                    frag[a + 2],
                    frag[a + 3],
                    frag[b],
                    frag[b + 1],
                    acc[c],
                    acc[c + 1],
                    acc[c + 2],
                    acc[c + 3],
                )

    @jit(device=True, forceinline=True)
    def store_scaled2(C, out, at, alpha, beta, acc0, acc1):
        """out[at], out[at + 1] = alpha * acc + beta * C; C is only read when it contributes."""
        r0, r1 = alpha * acc0, alpha * acc1
        if beta != 0:
            r0, r1 = r0 + beta * C[at], r1 + beta * C[at + uint32(1)]
        out[at], out[at + uint32(1)] = r0, r1

    @jit
    def sgemm_kernel(A, B, C, out, M, N, K, alpha, beta):
        tiles = cuda.shared.array(0, float32, alignment=SHARED_ALIGN)  # STAGES A tiles, then STAGES B tiles
        acc = cuda.local.array(ACC, float32)
        frag = cuda.local.array(FRAGS, uint32)  # set 0, then set 1
        tid = uint32(cuda.threadIdx.x)
        lane = tid % uint32(32)
        warp = tid // uint32(32)
        g = lane // uint32(4)  # PTX's groupID: the C fragment's rows g and g + 8, B's column g
        t = lane % uint32(4)  # threadID_in_group: C's columns 2t and 2t + 1, B's rows t and t + 4
        # Block b of the launch order (row by row) takes tile (tile_m, tile_n) of the grouped order,
        # as in hgemm v07: groups of GROUP block rows, each walked column by column.
        tile_m, tile_n = uint32(cuda.blockIdx.y), uint32(cuda.blockIdx.x)
        b = tile_m * uint32(cuda.gridDim.x) + tile_n  # the block's place in the launch order
        per_group = uint32(GROUP) * uint32(cuda.gridDim.x)  # blocks in a whole group
        first_m = b // per_group * uint32(GROUP)  # the group's first block row
        rows = min(uint32(cuda.gridDim.y) - first_m, uint32(GROUP))  # the last group may be short
        tile_m = first_m + b % per_group % rows  # down the group's column first ...
        tile_n = b % per_group // rows  # ... then the next column
        row0 = tile_m * uint32(BM)  # the block tile's top-left corner in out
        col0 = tile_n * uint32(BN)
        warp_row = warp // uint32(WARPS_N) * uint32(WM)  # the warp tile's corner inside the block tile
        warp_col = warp % uint32(WARPS_N) * uint32(WN)
        # ldmatrix: lanes 0-15 give rows 0-15 of a 16-row tile at k 0-3, lanes 16-31 the same rows at k 4-7
        a_row = (warp_row + lane % uint32(16)) * uint32(A_STRIDE) + lane // uint32(16) * uint32(CHUNK)
        b_row = t * uint32(B_STRIDE) + warp_col + g  # B[k t, n g] of the warp's first 8 x 8 tile
        # this thread's copies: chunk `tid` of each pass, rows of 16 bytes into padded rows
        a_row_in_tile, a_chunk_in_row = tid // uint32(A_PER_ROW), tid % uint32(A_PER_ROW)  # A: BM rows of BK
        b_row_in_tile, b_chunk_in_row = tid // uint32(B_PER_ROW), tid % uint32(B_PER_ROW)  # B: BK rows of BN
        a_src = (row0 + a_row_in_tile) * K + a_chunk_in_row * uint32(CHUNK)
        a_dst = a_row_in_tile * uint32(A_STRIDE) + a_chunk_in_row * uint32(CHUNK)
        b_src = b_row_in_tile * N + col0 + b_chunk_in_row * uint32(CHUNK)
        b_dst = uint32(B_BASE) + b_row_in_tile * uint32(B_STRIDE) + b_chunk_in_row * uint32(CHUNK)
        for i in range(ACC):
            acc[i] = float32(0.0)

        steps = K // uint32(BK)
        for s in range(STAGES - 1):  # prologue: steps 0 .. STAGES-2 into buffers 0 .. STAGES-2
            if uint32(s) < steps:
                copy_stage(tiles, A, B, uint32(s), uint32(s * BK), a_src, a_dst, b_src, b_dst, N, K)
            cp_async_commit()  # one group per stage, empty or not: the waits count groups
        cp_async_wait_group(IN_FLIGHT)  # step 0 has landed, for this thread ...
        cuda.syncthreads()  # ... and for everyone
        load_slice(tiles, frag, 0, uint32(0), 0, a_row, b_row)

        read = uint32(0)  # the buffer of step `step`
        write = uint32(STAGES - 1)  # the buffer of step `step + STAGES - 1`: the one read at step - 1
        for step in range(steps):
            step = uint32(step)
            k_next = (step + uint32(STAGES - 1)) * uint32(BK)
            if k_next < K:  # every warp finished reading `write` before the last barrier
                copy_stage(tiles, A, B, write, k_next, a_src, a_dst, b_src, b_dst, N, K)
            cp_async_commit()  # one group per step, empty or not, as in the prologue
            for kk in range(SLICES - 1):  # set kk % 2 holds slice kk; load slice kk + 1 into the other
                load_slice(tiles, frag, (kk + 1) % 2, read, (kk + 1) * 8, a_row, b_row)
                multiply_set(acc, frag, kk % 2)
            # the last slice: first make the next step's stage ready and start loading its first slice
            cp_async_wait_group(IN_FLIGHT)  # this thread's copies of step + 1 have landed
            cuda.syncthreads()  # everyone's have; and everyone has loaded its last fragments of `read`
            read = uint32(0) if read == uint32(STAGES - 1) else read + uint32(1)
            write = uint32(0) if write == uint32(STAGES - 1) else write + uint32(1)
            if step + uint32(1) < steps:
                load_slice(tiles, frag, 0, read, 0, a_row, b_row)
            multiply_set(acc, frag, 1)  # SLICES is even: the last slice is in set 1

        # the epilogue: lane (g, t) holds rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 tile
        for i in range(MT):
            for j in range(NT):
                c = 4 * (i * NT + j)
                at = (row0 + warp_row + uint32(i * 16) + g) * N + col0 + warp_col + uint32(j * 8) + t * uint32(2)
                store_scaled2(C, out, at, alpha, beta, acc[c], acc[c + 1])
                store_scaled2(C, out, at + uint32(8) * N, alpha, beta, acc[c + 2], acc[c + 3])

    return sgemm_kernel


TILES = Tiles()
sgemm_kernel = build(TILES)


def validate(A, B, C=None, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    mp, np_, kp = round_up(m, TILES.BM), round_up(n, TILES.BN), round_up(k, TILES.BK)
    if max(mp * kp, kp * np_, mp * np_) >= LIMIT:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: each matrix must hold fewer "
            "than 2^32 elements after padding to whole tiles"
        )


def launch_with(kernel, tiles, A, B, C, out, alpha, beta):
    """Run ``kernel`` (built from ``tiles``) on any shape, its tiles in dynamic shared memory."""

    def launch_tiles(a, b, c, result, M, N, K, alpha, beta):
        grid = (N // tiles.BN, M // tiles.BM)
        kernel[grid, tiles.threads, 0, tiles.shared_bytes()](
            a, b, c, result, np.uint32(M), np.uint32(N), np.uint32(K), alpha, beta
        )

    run_tiled(launch_tiles, A, B, C, out, alpha, beta, tiles.BM, tiles.BN, tiles.BK)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    launch_with(sgemm_kernel, TILES, A, B, C, out, alpha, beta)
