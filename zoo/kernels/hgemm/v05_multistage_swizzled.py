"""A deeper pipeline in unpadded, swizzled tiles: three ``cp.async`` stages instead of two.

Changes:
    From v04, with 64 x 64 warp tiles (see ``Tiles``): the shared tiles lose
    v03's padding column and are *swizzled* instead: 16-byte chunk c of tile
    row r is stored at chunk c ^ f(r), with f chosen so that the eight rows
    one ``ldmatrix`` reads, and the rows a warp's ``cp.async`` copies write,
    fall in eight different 16-byte bank groups. The bytes saved pay for a
    third buffer of each tile, and the loop keeps two copies in flight: at
    step t it waits for step t's copies only (``cp.async.wait_group 1``: every
    group but the newest), then issues step t + 2's. The tiles live in one
    dynamic shared array, so a shape larger than 48 KiB only asks for more at
    launch (``zoo.device.jit`` opts the kernel in).

Why it is faster:
    With two buffers a copy has one step of ``mma`` (about 1 us) to arrive,
    and any copy that the L2 or DRAM serves late stalls the whole block at
    the next barrier. A third buffer gives every copy two steps, so the
    tensor cores wait less at the barrier. Padding would have cost
    3 x 3 KiB, which the 48 KiB that a block gets without opting in cannot
    hold; the swizzle keeps ``ldmatrix`` conflict-free at no cost in bytes.
    The registers it costs (207 a thread; v04's kernel with these warp tiles,
    166) change the waves too: see the comment at ``Tiles``.
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
    # 64 x 64 warp tiles, four warps (v04's are eight of 64 x 32): a warp's A fragment feeds eight mma
    # instead of four, for about 1.7 times the registers. v04's kernel built with them (once a step of its own)
    # gained a few percent at 4096 on the H200 and lost at 2048: they pay with the stages below.
    WM: int = 64
    WN: int = 64
    # Three stages were the fastest at 4096 on the H200, four the slowest; at 8192 two, three and four stages
    # were even (the figures: docs/hgemm-tuning-notes.md). With three, 207 registers a thread (v04's kernel with
    # these warp tiles: 166) leave room for two blocks an SM instead of three, so 4096^2 is 3.9 waves of 1024 tiles
    # over 264 slots (nearly four whole waves) instead of 2.6.
    STAGES: int = 3

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
    """True when the copies and warps divide evenly and each thread's copies share one swizzle."""
    if t.BM % t.WM or t.BN % t.WN or t.WM % 16 or t.WN % 32 or t.BK % 16 or t.STAGES < 2:
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
    A_TILE = BM * BK
    B_TILE = BK * BN
    B_BASE = STAGES * A_TILE  # the B buffers follow the A buffers in the one shared array
    A_PER_ROW = BK // CHUNK
    B_PER_ROW = BN // CHUNK
    A_CHUNKS = BM * A_PER_ROW // THREADS
    B_CHUNKS = BK * B_PER_ROW // THREADS
    A_DIV, A_MOD = swizzle(A_PER_ROW)
    B_DIV, B_MOD = swizzle(B_PER_ROW)
    IN_FLIGHT = STAGES - 2  # copy groups that may still be pending when a step starts

    @jit
    def hgemm_kernel(A, B, out, M, N, K):
        tiles = cuda.shared.array(0, A.dtype, alignment=SHARED_ALIGN)  # STAGES A tiles, then STAGES B tiles
        acc = cuda.local.array(ACC, float32)
        a_frag = cuda.local.array(A_FRAG, uint32)
        b_frag = cuda.local.array(B_FRAG, uint32)
        tid = uint32(cuda.threadIdx.x)
        lane = tid % uint32(32)
        warp = tid // uint32(32)
        g = lane // uint32(4)  # PTX's groupID: the C fragment's rows g and g + 8
        t = lane % uint32(4)  # threadID_in_group: its columns 2t and 2t + 1
        row0 = uint32(cuda.blockIdx.y) * uint32(BM)  # the block tile's top-left corner in out
        col0 = uint32(cuda.blockIdx.x) * uint32(BN)
        warp_row = warp // uint32(WARPS_N) * uint32(WM)  # the warp tile's corner inside the block tile
        warp_col = warp % uint32(WARPS_N) * uint32(WN)
        # ldmatrix: lanes 0-15 give rows 0-15 at chunk column c, lanes 16-31 the same rows at c + 1.
        # The rows' offsets within the swizzle period do not depend on warp_row, i or kk (all
        # multiples of 16), so each lane's XOR is fixed for the whole kernel.
        half = lane // uint32(16)
        a_swz = (lane % uint32(16)) // uint32(A_DIV) % uint32(A_MOD)
        b_swz = (lane % uint32(16)) // uint32(B_DIV) % uint32(B_MOD)
        a_row = (warp_row + lane % uint32(16)) * uint32(BK)
        b_row = (lane % uint32(16)) * uint32(BN)
        # this thread's copies: chunk `tid` of each pass, rows_per_pass rows apart (a multiple of the
        # swizzle period, so every pass lands at the same XORed chunk column)
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
        a_rows_per_pass = uint32(THREADS // A_PER_ROW)
        b_rows_per_pass = uint32(THREADS // B_PER_ROW)
        for i in range(ACC):
            acc[i] = float32(0.0)

        steps = K // uint32(BK)
        for s in range(STAGES - 1):  # prologue: steps 0 .. STAGES-2 into buffers 0 .. STAGES-2
            if uint32(s) < steps:
                k0 = uint32(s * BK)
                for p in range(A_CHUNKS):
                    cp_async16(
                        tiles,
                        a_dst + uint32(s * A_TILE) + uint32(p) * a_rows_per_pass * uint32(BK),
                        A,
                        a_src + k0 + uint32(p) * a_rows_per_pass * K,
                    )
                for p in range(B_CHUNKS):
                    cp_async16(
                        tiles,
                        b_dst + uint32(s * B_TILE) + uint32(p) * b_rows_per_pass * uint32(BN),
                        B,
                        b_src + k0 * N + uint32(p) * b_rows_per_pass * N,
                    )
            cp_async_commit()  # one group per stage, empty or not: the wait below counts groups

        read = uint32(0)  # the buffer step `step` is in
        write = uint32(STAGES - 1)  # the buffer step `step + STAGES - 1` goes to
        for step in range(steps):
            step = uint32(step)
            cp_async_wait_group(IN_FLIGHT)  # this thread's copies of `step` have landed (later ones may not)
            cuda.syncthreads()  # everyone's have; and everyone is done with buffer `write` (read at step - 1)
            k_next = (step + uint32(STAGES - 1)) * uint32(BK)
            if k_next < K:
                for p in range(A_CHUNKS):
                    cp_async16(
                        tiles,
                        a_dst + write * uint32(A_TILE) + uint32(p) * a_rows_per_pass * uint32(BK),
                        A,
                        a_src + k_next + uint32(p) * a_rows_per_pass * K,
                    )
                for p in range(B_CHUNKS):
                    cp_async16(
                        tiles,
                        b_dst + write * uint32(B_TILE) + uint32(p) * b_rows_per_pass * uint32(BN),
                        B,
                        b_src + k_next * N + uint32(p) * b_rows_per_pass * N,
                    )
            cp_async_commit()  # one group per step, empty or not, as in the prologue
            a_at = read * uint32(A_TILE) + a_row
            b_at = uint32(B_BASE) + read * uint32(B_TILE) + b_row
            for kk in range(0, BK, 16):
                a_col = ((uint32(kk // CHUNK) + half) ^ a_swz) * uint32(CHUNK)  # chunk kk/8 (+1), XORed
                for i in range(MT):
                    a_frag[4 * i], a_frag[4 * i + 1], a_frag[4 * i + 2], a_frag[4 * i + 3] = ldmatrix_x4(
                        tiles, a_at + uint32(i * 16 * BK) + a_col
                    )
                for j in range(NT // 2):
                    chunk = (warp_col + uint32(16 * j)) // uint32(CHUNK) + half
                    b_frag[4 * j], b_frag[4 * j + 1], b_frag[4 * j + 2], b_frag[4 * j + 3] = ldmatrix_x4_trans(
                        tiles, b_at + uint32(kk * BN) + (chunk ^ b_swz) * uint32(CHUNK)
                    )
                multiply_tile(A.dtype, acc, a_frag, 0, b_frag, 0)
            read = uint32(0) if read == uint32(STAGES - 1) else read + uint32(1)
            write = uint32(0) if write == uint32(STAGES - 1) else write + uint32(1)

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
