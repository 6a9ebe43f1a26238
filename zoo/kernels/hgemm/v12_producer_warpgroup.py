"""A producer warpgroup: one warpgroup copies, two multiply, and mbarriers hand the stages over.

Changes:
    From v11: a third warpgroup (threads 0-127) only copies; the two others
    only multiply. Each stage has two mbarriers: ``full`` (128 arrivals, one
    per producer thread once its copies of the stage have landed and been
    fenced for the async proxy) and ``empty`` (256, one per consumer thread
    once the MMAs that read the stage have retired). The producer waits on
    ``empty``, copies, and signals ``full`` LAG steps later, when those
    copies have landed; a consumer waits on ``full``, issues its MMAs, and
    after ``wait_group(1)`` releases the previous stage. No block barrier
    after the set-up. The stages' dynamic array declares no alignment: the
    static mbarriers now come before it (the spec says why that matters).

Why it is faster:
    In v11 every thread of both warpgroups stopped at a barrier each step,
    and the 12 cp.async a thread issued sat between two batches of MMAs in
    the consumers' own instruction stream. Here the consumers only wait on
    the stage they need, so one slow warp no longer holds the block, and the
    producer runs up to STAGES - 1 steps ahead where v11 ran 2: copies of
    three steps are in flight while the tensor cores work on the fourth.
    Measured, that is not yet a gain: within 4 points of v11 either way at
    4096^3 and 8192^3 on both GPUs, since one warpgroup's 24 copies a thread
    and their swizzles now pace the stage. v13 hands that work to TMA.
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
    TILE_ALIGN,
    commit_group,
    descriptor,
    fence,
    fence_proxy_async,
    first_tile,
    mbarrier_arrive,
    mbarrier_init,
    mbarrier_wait,
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
PRODUCERS = 128  # warpgroup 0 copies
LAG = 2  # steps a producer thread's copies may still be in flight before it signals their stage full


class Tiles(NamedTuple):
    """Block tile BM x BN x BK, 64 rows for each of BM / 64 warpgroups, STAGES buffers of each."""

    BM: int = 128  # two consumer warpgroups of one m64 MMA each
    BN: int = 256  # m64n256k16: 128 accumulators a thread
    BK: int = 64  # one 128-byte swizzled row of A, four k16 slices
    STAGES: int = 4  # 48 KiB a stage: 192 KiB, one block an SM

    @property
    def threads(self):
        return PRODUCERS + self.BM // 64 * 128  # the producer warpgroup, then a consumer for every 64 rows

    def shared_bytes(self):
        # dynamic: the stages, and 1 KiB to start them on a 1024-byte boundary (first_tile); the mbarriers are static
        return TILE_ALIGN + 2 * self.STAGES * (self.BM * self.BK + self.BK * self.BN)


def build(tiles, kind):
    """The kernel for one tile shape and kind of input, "f16" or "bf16" (WGMMA_KIND; closure variables are
    compile-time constants to numba)."""
    BM, BN, BK, STAGES = tiles
    if BK != 64 or BM % 64 or BN % 64 or not 64 <= BN <= 256 or STAGES < 2 or tiles.shared_bytes() > 227 * 1024:
        raise ValueError(f"tile shape {tiles} is not valid for this kernel")
    THREADS = tiles.threads
    element = ELEMENT[kind]  # the shared tiles' dtype: float16, or uint16 holding bfloat16
    CONSUMERS = THREADS - PRODUCERS
    FULL, EMPTY = 0, STAGES  # bars[FULL + s]: stage s has landed; bars[EMPTY + s]: stage s may be refilled
    BARS = 2 * STAGES
    ACC = BN // 2  # m64nBNk16: each of a warpgroup's 128 threads holds 64 x BN / 128 float32
    WARPGROUP_A_BYTES = 64 * ROW_BYTES  # the next warpgroup's 64 rows of A start 8 KiB further
    A_TILE = BM * BK  # elements
    B_TILE = BK * BN
    STAGE = A_TILE + B_TILE
    STAGE_BYTES = 2 * STAGE  # a multiple of 1024: every tile starts a swizzle pattern
    B_ATOM_BYTES = BK * ROW_BYTES  # B is stored as BN / 64 column blocks of BK rows of 128 bytes
    A_CHUNKS = A_TILE // CHUNK // PRODUCERS
    B_CHUNKS = B_TILE // CHUNK // PRODUCERS
    A_PASS = PRODUCERS // (BK // CHUNK)  # A rows between a thread's copies (8 chunks a row)
    B_PASS = PRODUCERS // (BN // CHUNK)  # B rows between a thread's copies
    SLICES = BK // 16
    if STAGES < LAG + 2:  # the producer signals step t - LAG before it waits for step t - STAGES to be released
        raise ValueError(f"tile shape {tiles}: {STAGES} stages cannot keep {LAG} steps of copies in flight")
    if A_PASS % 8:  # B rows are B_PASS = 4 apart: each B copy swizzles its own offset (copy_stage)
        raise ValueError(f"tile shape {tiles}: a thread's A copies would land on rows of different swizzles")

    @jit(device=True, forceinline=True)
    def copy_stage(tiles, tile0, A, B, buffer, k0, a_src, a_dst, b_row, b_chunk, col0, N, K):
        """This producer thread's ``cp.async`` of the A and B tiles at k0 into ``buffer``. Its A rows are A_PASS =
        16 apart (one swizzle, as in v11); its B rows B_PASS = 4 apart, so each B copy swizzles its own offset."""
        at = buffer * uint32(STAGE)
        for p in range(A_CHUNKS):
            cp_async16(tiles, at + a_dst + uint32(p * A_PASS * BK), A, a_src + k0 + uint32(p * A_PASS) * K)
        for p in range(B_CHUNKS):
            k = b_row + uint32(p * B_PASS)  # B, N-major: column block j of 64, then row k at k * 128 bytes
            in_block = swizzle_128b(k * uint32(ROW_BYTES) + b_chunk % uint32(8) * uint32(16))
            dst = tile0 + uint32(A_TILE) + (b_chunk // uint32(8) * uint32(B_ATOM_BYTES) + in_block) // uint32(2)
            cp_async16(tiles, at + dst, B, (k0 + k) * N + col0 + b_chunk * uint32(CHUNK))

    @jit(device=True, forceinline=True)
    def signal_full(bars, stage):
        """This producer thread's copies up to the stage just signalled have landed (the caller waited for them):
        fence them for the tensor cores, which read through the async proxy, then arrive (a release)."""
        fence_proxy_async()
        mbarrier_arrive(bars, FULL + stage)

    @jit(arch_specific=True, launch_bounds=(THREADS, 1))  # 384 threads: at most 168 registers each
    def hgemm_kernel(A, B, out, M, N, K):
        # the mbarriers are static, and dynamic shared memory starts after them, 16-byte aligned: no declared
        # alignment, so that first_tile measures the skew to the first 1024-byte boundary when the kernel runs
        tiles = cuda.shared.array(0, element)  # STAGES x (A tile, B tile) from tiles[tile0]
        bars = cuda.shared.array(BARS, uint64)  # the mbarriers: full[STAGES], then empty[STAGES]
        tile0, base = first_tile(tiles)  # stage 0 starts at tiles[tile0], shared address base
        tid = uint32(cuda.threadIdx.x)
        warpgroup = tid // uint32(128)  # 0: the producer; w = 1, 2: the consumer of rows 64 (w - 1) ..
        row0 = uint32(cuda.blockIdx.y) * uint32(BM)  # the block tile's top-left corner in out
        col0 = uint32(cuda.blockIdx.x) * uint32(BN)
        if tid == uint32(0):
            for s in range(STAGES):
                mbarrier_init(bars, FULL + s, PRODUCERS)  # every producer thread arrives once its copies landed
                mbarrier_init(bars, EMPTY + s, CONSUMERS)  # every consumer thread, once its MMAs have retired
        cuda.syncthreads()  # the barriers are set up before anyone uses them (the block's only barrier)
        steps = K // uint32(BK)

        if warpgroup == uint32(0):  # the producer: each step into the stage the consumers released
            # A, K-major: row r of the tile is 128 bytes at r * 128, its 16-byte chunk c at chunk c ^ (r % 8)
            a_row, a_chunk = tid // uint32(BK // CHUNK), tid % uint32(BK // CHUNK)
            a_src = (row0 + a_row) * K + a_chunk * uint32(CHUNK)
            a_dst = tile0 + swizzle_128b(a_row * uint32(ROW_BYTES) + a_chunk * uint32(16)) // uint32(2)
            b_row, b_chunk = tid // uint32(BN // CHUNK), tid % uint32(BN // CHUNK)  # a row of BN has BN / 8 chunks
            stage, phase = uint32(0), uint32(0)  # the stage of `step`, and the parity of its round
            signalled = uint32(0)  # the stage to signal full next
            for step in range(steps):
                # the consumers have released this stage (parity phase ^ 1: the first round passes at once)
                mbarrier_wait(bars, EMPTY + stage, phase ^ uint32(1))
                copy_stage(
                    tiles, tile0, A, B, stage, uint32(step) * uint32(BK), a_src, a_dst, b_row, b_chunk, col0, N, K
                )
                cp_async_commit()  # one group a step
                if uint32(step) >= uint32(LAG):  # the copies of step - LAG have landed: their stage is full
                    cp_async_wait_group(LAG)  # this thread's copies of step - LAG have landed (LAG groups may run on)
                    signal_full(bars, signalled)
                    signalled = uint32(0) if signalled == uint32(STAGES - 1) else signalled + uint32(1)
                stage += uint32(1)
                if stage == uint32(STAGES):
                    stage, phase = uint32(0), phase ^ uint32(1)
            cp_async_wait_group(0)  # the last LAG steps' copies have landed
            for s in range(LAG):
                if uint32(s) < steps:  # (fewer steps than LAG: only those)
                    signal_full(bars, signalled)
                    signalled = uint32(0) if signalled == uint32(STAGES - 1) else signalled + uint32(1)
            return

        acc = cuda.local.array(ACC, float32)
        # descriptors of stage 0, slice 0 (the fields drop 4 bits: an offset of x bytes adds x >> 4)
        a_at = base + (warpgroup - uint32(1)) * uint32(WARPGROUP_A_BYTES)  # this warpgroup's first row of A
        a_desc = descriptor(a_at, uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)  # 8-row groups 1024 B apart
        # N-major: the next 64 columns are B_ATOM_BYTES on (leading), the next 8 k rows 1024 B (stride)
        b_desc = descriptor(base + uint32(2 * A_TILE), uint32(B_ATOM_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        for i in range(ACC):
            acc[i] = float32(0.0)
        stage, phase = uint32(0), uint32(0)
        previous = uint32(0)  # the stage of step - 1, released once its MMAs have retired
        for step in range(steps):
            mbarrier_wait(bars, FULL + stage, phase)  # the producer's copies of this step have landed (an acquire)
            fence(acc, ACC)  # wgmma.fence: the accumulators' last writes come before the MMAs read them
            offset = uint64(stage * uint32(STAGE_BYTES) >> uint32(4))
            for kk in range(SLICES):  # k slice kk: A 32 bytes further along its rows, B 16 rows (2048 B) down
                mma_async(
                    acc, 0, BN, a_desc + offset + uint64(kk * 2), b_desc + offset + uint64(kk * 128), 1, 0, 1, kind
                )
            commit_group()
            wait_group(1, acc, ACC)  # the MMAs of step - 1 have retired (this step's may still run) ...
            if step > 0:
                mbarrier_arrive(bars, EMPTY + previous)  # ... so their stage may be refilled
            previous = stage
            stage += uint32(1)
            if stage == uint32(STAGES):
                stage, phase = uint32(0), phase ^ uint32(1)
        wait_group(0, acc, ACC)  # the last MMAs have retired: acc holds the block's sums

        # thread (warp w of its warpgroup, lane 4g + q) holds D[16 w + g + 8 h, 8 j + 2 q + c] in acc[4 j + 2 h + c]
        lane, warp = tid % uint32(32), tid % uint32(128) // uint32(32)
        row = row0 + (warpgroup - uint32(1)) * uint32(64) + warp * uint32(16) + lane // uint32(4)
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
