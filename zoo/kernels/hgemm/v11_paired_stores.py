"""Epilogue stores that fill whole sectors: each thread writes its two neighbouring results with one 64-bit store.

Changes:
    From v10: the epilogue stores acc[4 j + 2 h] and acc[4 j + 2 h + 1],
    which are out[r, c] and out[r, c + 1] with c even, as one ``st.v2.f32``
    (``zoo.device.memory.store_float2``: SASS ``STG.E.64``) instead of two
    32-bit stores. Nothing else changes: the main loop is v10's.

Why it is faster:
    A 128 x 256 float32 tile is 128 KiB of results, written at the end of
    the block while its SM runs nothing else (one block an SM), and every
    SM of a wave writes at the same moment: 16.5 MiB a wave at 4096^3. v10
    wrote it with 128 32-bit stores a thread; in each warp store the four
    lanes of a row wrote 4 bytes every 8, so a store half-filled 8 sectors
    and two stores completed them. Paired, one warp store fills its 8
    sectors whole and a thread issues 64 stores, half as many: at 4096^3
    the call went from 270 to 248 us on the H100.
"""

from typing import NamedTuple

import numpy as np

from zoo.device import cuda, float32, uint32, uint64
from zoo.device.jit import jit
from zoo.device.memory import store_float2
from zoo.device.mma import cp_async16, cp_async_commit, cp_async_wait_group
from zoo.device.wgmma import (
    ELEMENT,
    SWIZZLE_128B,
    SWIZZLE_ALIGN,
    TILE_ALIGN,
    commit_group,
    descriptor,
    fence,
    fence_proxy_async,
    first_tile,
    mma_async,
    swizzle_128b,
    wait_group,
)
from zoo.kernels.hgemm import WGMMA_KIND
from zoo.kernels.hgemm.padding import check_uint32, run_tiled

MIN_CC = (9, 0)  # wgmma.mma_async needs sm_90a, Hopper's arch-specific target (H100, H200)
MAX_CC = (9, 0)  # sm_90a code is arch-specific: it runs on 9.0 GPUs only, not on later ones

CHUNK = 8  # 16-bit elements in 16 bytes: one cp.async
ROW_BYTES = 128  # a swizzled row: 64 16-bit elements, the width of the 128-byte swizzle pattern
GROUP_BYTES = 8 * ROW_BYTES  # 8 rows: one turn of the pattern, the descriptors' stride byte offset


class Tiles(NamedTuple):
    """Block tile BM x BN x BK, 64 rows for each of BM / 64 warpgroups, STAGES buffers of each."""

    BM: int = 128  # two warpgroups of one m64 MMA each
    BN: int = 256  # m64n256k16: 128 accumulators a thread
    BK: int = 64  # one 128-byte swizzled row of A, four k16 slices
    STAGES: int = 4  # 48 KiB a stage: 192 KiB, one block an SM

    @property
    def threads(self):
        return self.BM // 64 * 128  # a warpgroup for every 64 rows

    def shared_bytes(self):
        # the stages, and 1 KiB to start them on a 1024-byte boundary (first_tile)
        return TILE_ALIGN + 2 * self.STAGES * (self.BM * self.BK + self.BK * self.BN)


def build(tiles, kind):
    """The kernel for one tile shape and kind of input, "f16" or "bf16" (WGMMA_KIND; closure variables are
    compile-time constants to numba)."""
    BM, BN, BK, STAGES = tiles
    if BK != 64 or BM % 64 or BN % 64 or not 64 <= BN <= 256 or STAGES < 2 or tiles.shared_bytes() > 227 * 1024:
        raise ValueError(f"tile shape {tiles} is not valid for this kernel")
    THREADS = tiles.threads
    element = ELEMENT[kind]  # the shared tiles' dtype: float16, or uint16 holding bfloat16
    ACC = BN // 2  # m64nBNk16: each of a warpgroup's 128 threads holds 64 x BN / 128 float32
    WARPGROUP_A_BYTES = 64 * ROW_BYTES  # the next warpgroup's 64 rows of A start 8 KiB further
    A_TILE = BM * BK  # elements
    B_TILE = BK * BN
    STAGE = A_TILE + B_TILE
    STAGE_BYTES = 2 * STAGE  # a multiple of 1024: every tile starts a swizzle pattern
    B_ATOM_BYTES = BK * ROW_BYTES  # B is stored as BN / 64 column blocks of BK rows of 128 bytes
    A_CHUNKS = A_TILE // CHUNK // THREADS
    B_CHUNKS = B_TILE // CHUNK // THREADS
    A_PASS = THREADS // (BK // CHUNK)  # A rows between a thread's copies (8 chunks a row)
    B_PASS = THREADS // (BN // CHUNK)  # B rows between a thread's copies
    SLICES = BK // 16
    if STAGES < 3:
        raise ValueError(f"tile shape {tiles}: the MMAs of two steps and at least one copy need three stages")
    if A_PASS % 8 or B_PASS % 8:  # copy_stage keeps each thread's swizzle: its rows must share row % 8
        raise ValueError(f"tile shape {tiles}: a thread's copies would land on rows of different swizzles")
    AHEAD = STAGES - 2  # steps whose copies are in flight: the two buffers left are under the running MMAs
    IN_FLIGHT = AHEAD - 1  # copy groups that may still be pending when a step starts

    @jit(device=True, forceinline=True)
    def copy_stage(tiles, A, B, buffer, k0, a_src, a_dst, b_src, b_dst, N, K):
        """This thread's ``cp.async`` of the A and B tiles at k0 into ``buffer``; each of its rows has the same
        row % 8, hence the same swizzle, as its first (A_PASS and B_PASS are multiples of 8)."""
        at = buffer * uint32(STAGE)
        for p in range(A_CHUNKS):
            cp_async16(tiles, at + a_dst + uint32(p * A_PASS * BK), A, a_src + k0 + uint32(p * A_PASS) * K)
        for p in range(B_CHUNKS):
            cp_async16(tiles, at + b_dst + uint32(p * B_PASS * 64), B, b_src + (k0 + uint32(p * B_PASS)) * N)

    @jit(arch_specific=True)
    def hgemm_kernel(A, B, out, M, N, K):
        tiles = cuda.shared.array(0, element, alignment=SWIZZLE_ALIGN)  # STAGES x (A tile, B tile) from tiles[tile0]
        tile0, base = first_tile(tiles)  # stage 0 starts at tiles[tile0], shared address base
        acc = cuda.local.array(ACC, float32)
        tid = uint32(cuda.threadIdx.x)
        warpgroup = tid // uint32(128)  # rows 64 w .. 64 w + 63 of the block tile
        row0 = uint32(cuda.blockIdx.y) * uint32(BM)  # the block tile's top-left corner in out
        col0 = uint32(cuda.blockIdx.x) * uint32(BN)
        # A, K-major: row r of the tile is 128 bytes at r * 128, its 16-byte chunk c at chunk c ^ (r % 8)
        a_row, a_chunk = tid // uint32(BK // CHUNK), tid % uint32(BK // CHUNK)  # chunk `tid` of the first pass
        a_src = (row0 + a_row) * K + a_chunk * uint32(CHUNK)
        a_dst = tile0 + swizzle_128b(a_row * uint32(ROW_BYTES) + a_chunk * uint32(16)) // uint32(2)
        # B, N-major: column block j (64 columns) holds BK rows of 128 bytes; row k's chunk c at c ^ (k % 8)
        b_row, b_chunk = tid // uint32(BN // CHUNK), tid % uint32(BN // CHUNK)  # a row of BN has BN / 8 chunks
        b_src = b_row * N + col0 + b_chunk * uint32(CHUNK)
        b_in_block = b_row * uint32(ROW_BYTES) + b_chunk % uint32(8) * uint32(16)
        b_dst = (
            tile0
            + uint32(A_TILE)
            + (b_chunk // uint32(8) * uint32(B_ATOM_BYTES) + swizzle_128b(b_in_block)) // uint32(2)
        )
        # descriptors of stage 0, slice 0 (the fields drop 4 bits: an offset of x bytes adds x >> 4)
        a_at = base + warpgroup * uint32(WARPGROUP_A_BYTES)  # this warpgroup's first row of A
        a_desc = descriptor(a_at, uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)  # 8-row groups 1024 B apart
        # N-major: the next 64 columns are B_ATOM_BYTES on (leading), the next 8 k rows 1024 B (stride)
        b_desc = descriptor(base + uint32(2 * A_TILE), uint32(B_ATOM_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        for i in range(ACC):
            acc[i] = float32(0.0)

        steps = K // uint32(BK)
        for s in range(AHEAD):  # prologue: steps 0 .. AHEAD-1 into buffers 0 .. AHEAD-1
            if uint32(s) < steps:
                copy_stage(tiles, A, B, uint32(s), uint32(s * BK), a_src, a_dst, b_src, b_dst, N, K)
            cp_async_commit()  # one group per stage, empty or not: the waits count groups

        read = uint32(0)  # the buffer of step `step`
        for step in range(steps):
            step = uint32(step)
            cp_async_wait_group(IN_FLIGHT)  # this thread's copies of `step` have landed ...
            fence_proxy_async()  # ... and are visible to the tensor cores, which read through the async proxy
            # everyone's copies of `step` have landed; and everyone has passed the wait_group(1) of step - 1, so
            # the MMAs of step - 2 have retired in both warpgroups
            cuda.syncthreads()
            fence(acc, ACC)  # wgmma.fence: the accumulators' last writes come before the MMAs read them
            stage = uint64(read * uint32(STAGE_BYTES) >> uint32(4))
            for kk in range(SLICES):  # k slice kk: A 32 bytes further along its rows, B 16 rows (2048 B) down
                mma_async(acc, 0, BN, a_desc + stage + uint64(kk * 2), b_desc + stage + uint64(kk * 128), 1, 0, 1, kind)
            commit_group()
            # the refill of step + AHEAD goes to the buffer of step + AHEAD - STAGES: step - 2 with AHEAD = STAGES - 2,
            # whose MMAs retired before the barrier above
            k_next = (step + uint32(AHEAD)) * uint32(BK)
            write = (read + uint32(AHEAD)) % uint32(STAGES)
            if k_next < K:
                copy_stage(tiles, A, B, write, k_next, a_src, a_dst, b_src, b_dst, N, K)
            cp_async_commit()  # one group per step, empty or not, as in the prologue
            wait_group(1, acc, ACC)  # the MMAs of step - 1 have retired; this step's run on while the next starts
            read = uint32(0) if read == uint32(STAGES - 1) else read + uint32(1)
        wait_group(0, acc, ACC)  # the last step's MMAs have retired: acc holds the block's sums

        # thread (warp w of its warpgroup, lane 4g + q) holds D[16 w + g + 8 h, 8 j + 2 q + c] in acc[4 j + 2 h + c]
        lane, warp = tid % uint32(32), tid % uint32(128) // uint32(32)
        row = row0 + warpgroup * uint32(64) + warp * uint32(16) + lane // uint32(4)
        col = col0 + lane % uint32(4) * uint32(2)
        for j in range(BN // 8):
            for h in range(2):
                at = (row + uint32(8 * h)) * N + col + uint32(8 * j)
                store_float2(out, at, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1])  # at is even: 8-byte aligned

    return hgemm_kernel


TILES = Tiles()
hgemm_kernels = {dtype: build(TILES, kind) for dtype, kind in WGMMA_KIND.items()}  # one compiled kernel a kind


def validate(A, B):
    check_uint32(__name__, A, B, TILES.BM, TILES.BN, TILES.BK)


def launch(A, B, out):
    def launch_tiles(a, b, result, M, N, K):
        grid = (N // TILES.BN, M // TILES.BM)
        hgemm_kernels[a.dtype][grid, TILES.threads, 0, TILES.shared_bytes()](
            a, b, result, np.uint32(M), np.uint32(N), np.uint32(K)
        )

    run_tiled(launch_tiles, A, B, out, TILES.BM, TILES.BN, TILES.BK)
