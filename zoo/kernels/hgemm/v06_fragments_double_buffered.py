"""Fragments double-buffered in registers: the next ``ldmatrix`` is in flight while the tensor cores work.

Changes:
    From v05: two sets of fragment registers. While a warp's 32 ``mma`` of
    one 16-wide k slice run on one set, the ``ldmatrix`` of the next slice
    fill the other. The stage's barrier moves from the top of a step to just
    before its last slice: there the warp waits for the next stage's copies,
    meets the block, loads the next stage's first fragments, and only then
    multiplies the last slice of this stage. The copies of a stage are issued
    at the top of the step, into the buffer every warp finished reading
    before the previous barrier. Same tiles, stages and swizzle as v05; the
    kernel's pieces (issue a stage's copies, load a slice's fragments) are
    small inlined device functions. BK must now be a multiple of 32.

Why it is faster:
    In v05 every slice began with eight ``ldmatrix`` whose results the first
    ``mma`` needed at once (a shared-memory round trip, about 30 cycles), and
    every step began at a barrier with nothing else to do. Here both waits
    overlap 32 ``mma`` that do not depend on them, so a warp keeps its tensor
    core busy across slices and stages. The price is a second set of
    fragments (24 more registers a thread).
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
    ldmatrix_x4_trans,
)
from zoo.kernels.hgemm import warp_tile
from zoo.kernels.hgemm.padding import check_uint32, run_tiled

CHUNK = 8  # float16 elements in 16 bytes: the unit of cp.async and of an ldmatrix row


class Tiles(NamedTuple):
    """Block tile BM x BN x BK, warp tile WM x WN, and STAGES buffers of each tile."""

    BM: int = 128
    BN: int = 128
    BK: int = 32
    WM: int = 64  # v05's 64 x 64 warp tiles
    WN: int = 64
    STAGES: int = 3  # v05's three stages (its Tiles says why three)

    @property
    def threads(self):
        return (self.BM // self.WM) * (self.BN // self.WN) * 32

    def shared_bytes(self):
        return 2 * self.STAGES * (self.BM * self.BK + self.BK * self.BN)


def swizzle(chunks_per_row):
    """(divisor, modulus) of the XOR pattern f(r) = (r // divisor) % modulus for rows of that many chunks.

    A bank group is 16 bytes and there are eight of them in 128 bytes. Eight
    consecutive rows read at one chunk column c then sit in groups
    (r x chunks_per_row + (c ^ f(r))) % 8, which this f makes all different:
    with 8 or more chunks a row, f(r) = r % 8 spreads them directly; with 4
    (BK = 32), rows r and r + 2 start in the same group, so f(r) = (r // 2) % 4.
    """
    if chunks_per_row >= 8:
        return 1, 8
    return 8 // chunks_per_row, chunks_per_row


def valid(t):
    """True when the copies and warps divide evenly, each thread's copies share one swizzle, and a stage
    has an even number of 16-wide slices (each step starts on fragment set 0)."""
    if t.BM % t.WM or t.BN % t.WN or t.WM % 16 or t.WN % 32 or t.BK % 32 or t.STAGES < 2:
        return False
    threads = t.threads
    if threads > 1024 or (t.BM * t.BK // CHUNK) % threads or (t.BK * t.BN // CHUNK) % threads:
        return False
    for rows, width in ((t.BM, t.BK), (t.BK, t.BN)):  # A tile, B tile
        chunks = width // CHUNK
        rows_per_pass = threads // chunks
        div, mod = swizzle(chunks)
        if rows > rows_per_pass and rows_per_pass % (div * mod):  # a thread's rows must share f(r)
            return False
    return t.shared_bytes() <= 227 * 1024


def build(tiles):
    """The kernel for one tile shape (closure variables are compile-time constants to numba)."""
    if not valid(tiles):
        raise ValueError(f"tile shape {tiles} is not valid for this kernel")
    BM, BN, BK, WM, WN, STAGES = tiles
    WARPS_N = BN // WN
    THREADS = tiles.threads
    MT = WM // 16
    NT = WN // 8
    multiply_tile = warp_tile.multiply(MT, NT)  # acc += a warp tile of mma
    store_tile = warp_tile.store(MT, NT)
    ACC = MT * NT * 4
    A_FRAG = MT * 4
    B_FRAG = NT * 2
    SET = A_FRAG + B_FRAG  # words in one set of fragments: A's, then B's
    FRAGS = 2 * SET
    SLICES = BK // 16
    A_TILE = BM * BK
    B_TILE = BK * BN
    B_BASE = STAGES * A_TILE  # the B buffers follow the A buffers in the one shared array
    A_PER_ROW = BK // CHUNK
    B_PER_ROW = BN // CHUNK
    A_CHUNKS = BM * A_PER_ROW // THREADS
    B_CHUNKS = BK * B_PER_ROW // THREADS
    A_PASS = THREADS // A_PER_ROW  # rows between a thread's copies
    B_PASS = THREADS // B_PER_ROW
    A_DIV, A_MOD = swizzle(A_PER_ROW)
    B_DIV, B_MOD = swizzle(B_PER_ROW)
    IN_FLIGHT = STAGES - 2  # copy groups that may still be pending when a step starts

    @jit(device=True, forceinline=True)
    def copy_stage(tiles, A, B, buffer, k0, a_src, a_dst, b_src, b_dst, N, K):
        """This thread's ``cp.async`` of the A and B slices at k0 into ``buffer``."""
        for p in range(A_CHUNKS):
            cp_async16(
                tiles, a_dst + buffer * uint32(A_TILE) + uint32(p * A_PASS * BK), A, a_src + k0 + uint32(p * A_PASS) * K
            )
        for p in range(B_CHUNKS):
            cp_async16(
                tiles,
                b_dst + buffer * uint32(B_TILE) + uint32(p * B_PASS * BN),
                B,
                b_src + (k0 + uint32(p * B_PASS)) * N,
            )

    @jit(device=True, forceinline=True)
    def load_slice(tiles, frag, s, buffer, kk, half, a_row, a_swz, b_row, b_swz, b_chunk0):
        """ldmatrix the A and B fragments of k slice ``kk`` of ``buffer`` into set ``s`` (swizzled as v05)."""
        a_at = buffer * uint32(A_TILE) + a_row + ((uint32(kk // CHUNK) + half) ^ a_swz) * uint32(CHUNK)
        for i in range(MT):
            f = s * SET + 4 * i
            frag[f], frag[f + 1], frag[f + 2], frag[f + 3] = ldmatrix_x4(tiles, a_at + uint32(i * 16 * BK))
        b_at = uint32(B_BASE) + buffer * uint32(B_TILE) + b_row + uint32(kk * BN)
        for j in range(NT // 2):
            f = s * SET + A_FRAG + 4 * j
            frag[f], frag[f + 1], frag[f + 2], frag[f + 3] = ldmatrix_x4_trans(
                tiles, b_at + ((b_chunk0 + uint32(2 * j)) ^ b_swz) * uint32(CHUNK)
            )

    @jit
    def hgemm_kernel(A, B, out, M, N, K):
        tiles = cuda.shared.array(0, A.dtype, alignment=SHARED_ALIGN)  # STAGES A tiles, then STAGES B tiles
        acc = cuda.local.array(ACC, float32)
        frag = cuda.local.array(FRAGS, uint32)  # set 0, then set 1
        tid = uint32(cuda.threadIdx.x)
        lane = tid % uint32(32)
        warp = tid // uint32(32)
        g = lane // uint32(4)  # PTX's groupID: the C fragment's rows g and g + 8
        t = lane % uint32(4)  # threadID_in_group: its columns 2t and 2t + 1
        row0 = uint32(cuda.blockIdx.y) * uint32(BM)  # the block tile's top-left corner in out
        col0 = uint32(cuda.blockIdx.x) * uint32(BN)
        warp_row = warp // uint32(WARPS_N) * uint32(WM)  # the warp tile's corner inside the block tile
        warp_col = warp % uint32(WARPS_N) * uint32(WN)
        # ldmatrix rows as in v05: lanes 16-31 read the chunk after lanes 0-15's; XORs fixed per lane
        half = lane // uint32(16)
        a_swz = (lane % uint32(16)) // uint32(A_DIV) % uint32(A_MOD)
        b_swz = (lane % uint32(16)) // uint32(B_DIV) % uint32(B_MOD)
        a_row = (warp_row + lane % uint32(16)) * uint32(BK)
        b_row = (lane % uint32(16)) * uint32(BN)
        b_chunk0 = warp_col // uint32(CHUNK) + half  # B: the chunk of this lane's first ldmatrix row
        # this thread's copies, as in v05: chunk `tid` of each pass, swizzled
        a_row_in_tile, a_chunk_in_row = tid // uint32(A_PER_ROW), tid % uint32(A_PER_ROW)  # A: BM rows of BK
        b_row_in_tile, b_chunk_in_row = tid // uint32(B_PER_ROW), tid % uint32(B_PER_ROW)  # B: BK rows of BN
        a_src = (row0 + a_row_in_tile) * K + a_chunk_in_row * uint32(CHUNK)
        a_dst = a_row_in_tile * uint32(BK) + (
            a_chunk_in_row ^ (a_row_in_tile // uint32(A_DIV) % uint32(A_MOD))
        ) * uint32(CHUNK)
        b_src = b_row_in_tile * N + col0 + b_chunk_in_row * uint32(CHUNK)
        b_dst = (
            uint32(B_BASE)
            + b_row_in_tile * uint32(BN)
            + (b_chunk_in_row ^ (b_row_in_tile // uint32(B_DIV) % uint32(B_MOD))) * uint32(CHUNK)
        )
        for i in range(ACC):
            acc[i] = float32(0.0)

        steps = K // uint32(BK)
        for s in range(STAGES - 1):  # prologue: steps 0 .. STAGES-2 into buffers 0 .. STAGES-2
            if uint32(s) < steps:
                copy_stage(tiles, A, B, uint32(s), uint32(s * BK), a_src, a_dst, b_src, b_dst, N, K)
            cp_async_commit()  # one group per stage, empty or not: the waits count groups
        cp_async_wait_group(IN_FLIGHT)  # step 0 has landed, for this thread ...
        cuda.syncthreads()  # ... and for everyone
        load_slice(tiles, frag, 0, uint32(0), 0, half, a_row, a_swz, b_row, b_swz, b_chunk0)

        read = uint32(0)  # the buffer of step `step`
        write = uint32(STAGES - 1)  # the buffer of step `step + STAGES - 1`: the one read at step - 1
        for step in range(steps):
            step = uint32(step)
            k_next = (step + uint32(STAGES - 1)) * uint32(BK)
            if k_next < K:  # every warp finished reading `write` before the last barrier
                copy_stage(tiles, A, B, write, k_next, a_src, a_dst, b_src, b_dst, N, K)
            cp_async_commit()  # one group per step, empty or not, as in the prologue
            for kk in range(SLICES - 1):  # set kk % 2 holds slice kk; load slice kk + 1 into the other
                load_slice(tiles, frag, (kk + 1) % 2, read, (kk + 1) * 16, half, a_row, a_swz, b_row, b_swz, b_chunk0)
                multiply_tile(A.dtype, acc, frag, kk % 2 * SET, frag, kk % 2 * SET + A_FRAG)
            # the last slice: first make the next step's stage ready and start loading its first slice
            cp_async_wait_group(IN_FLIGHT)  # this thread's copies of step + 1 have landed
            cuda.syncthreads()  # everyone's have; and everyone has loaded its last fragments of `read`
            read = uint32(0) if read == uint32(STAGES - 1) else read + uint32(1)
            write = uint32(0) if write == uint32(STAGES - 1) else write + uint32(1)
            if step + uint32(1) < steps:
                load_slice(tiles, frag, 0, read, 0, half, a_row, a_swz, b_row, b_swz, b_chunk0)
            multiply_tile(A.dtype, acc, frag, SET, frag, SET + A_FRAG)  # SLICES is even: the last slice is in set 1

        store_tile(out, acc, row0 + warp_row, col0 + warp_col, N, g, t)

    return hgemm_kernel


TILES = Tiles()
hgemm_kernel = build(TILES)


def validate(A, B):
    check_uint32(__name__, A, B, TILES.BM, TILES.BN, TILES.BK)


def launch_with(kernel, tiles, A, B, out):
    """Run ``kernel`` (built from ``tiles``) on any shape, its tiles in dynamic shared memory."""

    def launch_tiles(a, b, result, M, N, K):
        grid = (N // tiles.BN, M // tiles.BM)
        kernel[grid, tiles.threads, 0, tiles.shared_bytes()](a, b, result, np.uint32(M), np.uint32(N), np.uint32(K))

    run_tiled(launch_tiles, A, B, out, tiles.BM, tiles.BN, tiles.BK)


def launch(A, B, out):
    launch_with(hgemm_kernel, TILES, A, B, out)
