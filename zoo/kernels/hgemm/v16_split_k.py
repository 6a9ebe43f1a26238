"""Split-K: when the output has fewer tiles than the GPU has SMs, blocks split a tile's K loop and add their parts.

Changes:
    From v15: a block's work item is a tile and a range of its k steps, a
    split: ``splits`` ranges of about equal length, chosen at launch so that
    tiles x splits reaches the SMs (``plan``), each long enough to keep the
    four stages full. The producer and the consumers walk the same items, so
    they agree on each item's k range; the stages rotate on across items as
    across tiles. With one split a tile's sums are stored as before; with more,
    ``out`` is zeroed first and each split adds its partial tile into it with
    float32 atomic adds (``red.global.add``: the L2 performs them). The order of
    the additions varies, so the last bits may differ from call to call.

Why it is faster:
    v15 gives a block a whole tile: M x N / (128 x 256) blocks. Where that is
    fewer than 132 (M = 128 rows at N = 4096: 16 tiles; a model's layers at a
    small batch; 1024^3: 32 tiles), the rest of the GPU idles while a few SMs
    walk K. Split in s ranges the same tile keeps s SMs busy, each reading its
    own part of A's rows and B's columns: s times the bandwidth and the tensor
    cores for the same bytes, bought with the atomic adds of s partial tiles
    (M x N x s float32 additions at the L2) and the zeroing of out. Where the
    tiles already fill the GPU the plan takes one split, and nothing changes.
"""

from typing import NamedTuple

import numpy as np

from zoo.device import cuda, float32, sm_count, uint32, uint64
from zoo.device.jit import jit
from zoo.device.memory import store_float2
from zoo.device.wgmma import (
    ELEMENT,
    SWIZZLE_128B,
    TILE_ALIGN,
    commit_group,
    descriptor,
    fence,
    fence_mbarrier_init,
    first_tile,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    mma_async,
    tensor_map_2d,
    tensormap_acquire,
    tma_load_2d,
    wait_group,
)
from zoo.kernels.hgemm import WGMMA_KIND
from zoo.kernels.hgemm.padding import check_uint32, run_tiled
from zoo.kernels.hgemm.tile_order import grouped_order

MIN_CC = (9, 0)  # wgmma.mma_async needs sm_90a, Hopper's arch-specific target (H100, H200)
MAX_CC = (9, 0)  # sm_90a code is arch-specific: it runs on 9.0 GPUs only, not on later ones

ROW_BYTES = 128  # a swizzled row: 64 16-bit elements, the width of the 128-byte swizzle pattern
GROUP_BYTES = 8 * ROW_BYTES  # 8 rows: one turn of the pattern, the descriptors' stride byte offset
PRODUCERS = 128  # warpgroup 0, of which thread 0 issues the copies (the consumers' warpgroups start at warp 4)
BOX = 64  # columns of a TMA box: 128 bytes, the widest row the 128-byte swizzle takes
MIN_SPLIT_STEPS = 4  # k steps a split takes at least: its four stages are filled before its first MMA waits
# Block rows per group of tiles (v07's GROUP, for its smaller tiles and two blocks an SM). 132 blocks work on 132
# consecutive tiles: in groups of 16 rows of 128 x 256 tiles, 16 A panels and 8 or 9 B panels at 8192^3.
GROUP = 16


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


def build(tiles, kind, group=GROUP):
    """The kernel for one tile shape, kind of input ("f16" or "bf16": WGMMA_KIND) and group of block rows (closure
    variables are compile-time constants)."""
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
    B_BOXES = BN // BOX  # B's column blocks, one box each
    SLICES = BK // 16

    tile_origin = grouped_order(group, BM, BN)

    @jit(device=True, forceinline=True)
    def copy_stage(tiles, tile0, tmap_a, tmap_b, bars, buffer, k0, row0, col0):
        """The producer thread's TMA copies of the A and B tiles at k0 into ``buffer``: each box lands swizzled on
        a 1024-byte boundary and counts its bytes down on full[buffer]."""
        at = tile0 + buffer * uint32(STAGE)
        tma_load_2d(tiles, at, tmap_a, k0, row0, bars, FULL + buffer)  # A: BM rows x BK columns at (row0, k0)
        for j in range(B_BOXES):  # B: BK rows x 64 columns at (k0, col0 + 64 j), column block j, 8 KiB apart
            dst = at + uint32(A_TILE + j * B_ATOM_BYTES // 2)
            tma_load_2d(tiles, dst, tmap_b, col0 + uint32(j * BOX), k0, bars, FULL + buffer)

    @jit(arch_specific=True, launch_bounds=(THREADS, 1))  # 384 threads: at most 168 registers each
    def hgemm_kernel(tmap_a, tmap_b, out, M, N, K, splits, split_steps):
        # the mbarriers are static, and dynamic shared memory starts after them, 16-byte aligned: no declared
        # alignment, so that first_tile measures the skew to the first 1024-byte boundary when the kernel runs
        tiles = cuda.shared.array(0, element)  # STAGES x (A tile, B tile) from tiles[tile0]
        bars = cuda.shared.array(BARS, uint64)  # the mbarriers: full[STAGES], then empty[STAGES]
        tile0, base = first_tile(tiles)  # stage 0 starts at tiles[tile0], shared address base
        tid = uint32(cuda.threadIdx.x)
        warpgroup = tid // uint32(128)  # 0: the producer; w = 1, 2: the consumer of rows 64 (w - 1) ..
        tiles_m, tiles_n = M // uint32(BM), N // uint32(BN)  # tiles down a column and along a row of out
        count = tiles_m * tiles_n * splits  # work items: each tile's splits, one after another
        first, stride = uint32(cuda.blockIdx.x), uint32(cuda.gridDim.x)  # this block's items: first, first + stride ..
        if tid == uint32(0):
            for s in range(STAGES):
                mbarrier_init(bars, FULL + s, 1)  # the producer thread's arrival, then STAGE_BYTES from TMA
                mbarrier_init(bars, EMPTY + s, CONSUMERS)  # every consumer thread, once its MMAs have retired
            fence_mbarrier_init()  # the copy engine, which counts bytes down on them, sees them set up too
        cuda.syncthreads()  # the barriers are set up before anyone uses them (the block's only barrier)
        steps = K // uint32(BK)

        if warpgroup == uint32(0):  # the producer: thread 0 copies each step into the stage the consumers released
            if tid != uint32(0):
                return
            tensormap_acquire(tmap_a)  # the maps were written by a copy from the host: fetch them afresh
            tensormap_acquire(tmap_b)
            stage, phase = uint32(0), uint32(0)  # the next stage to fill, and the parity of its round: on across tiles
            for item in range(first, count, stride):
                row0, col0 = tile_origin(uint32(item) // splits, tiles_m, tiles_n)
                k_first = uint32(item) % splits * split_steps  # this split's k steps: k_first .. k_last - 1
                k_last = min(steps, k_first + split_steps)
                for step in range(k_first, k_last):
                    # the consumers have released this stage (parity phase ^ 1: the first round passes at once)
                    mbarrier_wait(bars, EMPTY + stage, phase ^ uint32(1))
                    mbarrier_arrive_expect_tx(bars, FULL + stage, STAGE_BYTES)  # arrive; STAGE_BYTES are to land
                    copy_stage(tiles, tile0, tmap_a, tmap_b, bars, stage, uint32(step) * uint32(BK), row0, col0)
                    stage += uint32(1)
                    if stage == uint32(STAGES):
                        stage, phase = uint32(0), phase ^ uint32(1)
            return

        acc = cuda.local.array(ACC, float32)
        # descriptors of stage 0, slice 0 (the fields drop 4 bits: an offset of x bytes adds x >> 4)
        a_at = base + (warpgroup - uint32(1)) * uint32(WARPGROUP_A_BYTES)  # this warpgroup's first row of A
        a_desc = descriptor(a_at, uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)  # 8-row groups 1024 B apart
        # N-major: the next 64 columns are B_ATOM_BYTES on (leading), the next 8 k rows 1024 B (stride)
        b_desc = descriptor(base + uint32(2 * A_TILE), uint32(B_ATOM_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        # thread (warp w of its warpgroup, lane 4g + q) holds D[16 w + g + 8 h, 8 j + 2 q + c] in acc[4 j + 2 h + c]
        lane, warp = tid % uint32(32), tid % uint32(128) // uint32(32)
        row_in_tile = (warpgroup - uint32(1)) * uint32(64) + warp * uint32(16) + lane // uint32(4)
        col_in_tile = lane % uint32(4) * uint32(2)
        stage, phase = uint32(0), uint32(0)  # the stage of the next step, counted as the producer counts them
        for item in range(first, count, stride):
            tile = uint32(item) // splits
            row0, col0 = tile_origin(tile, tiles_m, tiles_n)  # the producer's item: the same split
            k_first = (uint32(item) - tile * splits) * split_steps
            for i in range(ACC):
                acc[i] = float32(0.0)
            previous = uint32(STAGES)  # the stage of step - 1, released once its MMAs have retired (none yet)
            for _ in range(k_first, min(steps, k_first + split_steps)):  # this split's k steps
                mbarrier_wait(bars, FULL + stage, phase)  # this step's bytes have landed (TMA writes as wgmma reads)
                fence(acc, ACC)  # wgmma.fence: the accumulators' last writes come before the MMAs read them
                offset = uint64(stage * uint32(STAGE_BYTES) >> uint32(4))
                for kk in range(SLICES):  # k slice kk: A 32 bytes further along its rows, B 16 rows (2048 B) down
                    a_slice, b_slice = a_desc + offset + uint64(kk * 2), b_desc + offset + uint64(kk * 128)
                    mma_async(acc, 0, BN, a_slice, b_slice, 1, 0, 1, kind)
                commit_group()
                wait_group(1, acc, ACC)  # the MMAs of step - 1 have retired (this step's may still run) ...
                if previous != uint32(STAGES):  # not the split's first step
                    mbarrier_arrive(bars, EMPTY + previous)  # ... so their stage may be refilled
                previous = stage
                stage += uint32(1)
                if stage == uint32(STAGES):
                    stage, phase = uint32(0), phase ^ uint32(1)
            wait_group(0, acc, ACC)  # the tile's last MMAs have retired: acc holds its sums ...
            mbarrier_arrive(bars, EMPTY + previous)  # ... and their stage may take the next tile's copies

            row, col = row0 + row_in_tile, col0 + col_in_tile
            if splits == uint32(1):  # the whole sum: stored
                for j in range(BN // 8):
                    for h in range(2):
                        at = (row + uint32(8 * h)) * N + col + uint32(8 * j)
                        store_float2(out, at, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1])  # at is even: 8-byte aligned
            else:  # a split's part: added into out, which the launch zeroed (red.global.add.f32, done at the L2)
                for j in range(BN // 8):
                    for h in range(2):
                        at = (row + uint32(8 * h)) * N + col + uint32(8 * j)
                        cuda.atomic.add(out, at, acc[4 * j + 2 * h])
                        cuda.atomic.add(out, at + uint32(1), acc[4 * j + 2 * h + 1])

    return hgemm_kernel


TILES = Tiles()


@jit
def zero(out, count):
    """out[:count] = 0 before the splits add into it: a grid-stride loop."""
    i = uint32(cuda.grid(1))
    while i < count:
        out[i] = float32(0.0)
        i = uint32(i + uint32(cuda.gridsize(1)))  # kept 32-bit: numba widens a sum of two uint32


def plan(M, N, K, splits=None, tiles=TILES):
    """(splits, k steps a split) for an M x N x K product in whole tiles: as many splits as the SMs left idle by the
    tiles, each at least MIN_SPLIT_STEPS long (one split where the tiles fill the GPU), or about ``splits`` where
    given; every split gets a step."""
    count, steps = (M // tiles.BM) * (N // tiles.BN), K // tiles.BK
    if splits is None:
        splits = max(1, min(sm_count() // count, steps // MIN_SPLIT_STEPS))
    split_steps = -(-steps // splits)  # rounded up ...
    return -(-steps // split_steps), split_steps  # ... so the last split is the one that may be shorter


hgemm_kernels = {dtype: build(TILES, kind) for dtype, kind in WGMMA_KIND.items()}  # one compiled kernel a kind


def validate(A, B):
    check_uint32(__name__, A, B, TILES.BM, TILES.BN, TILES.BK)


def launch(A, B, out):
    run(A, B, out)


def run(A, B, out, splits=None):
    """launch with the splits of ``plan`` (about ``splits`` where given: the tests choose them)."""

    def launch_tiles(a, b, result, M, N, K):
        parts, split_steps = plan(M, N, K, splits)
        if parts > 1:  # the splits add into out: it starts at zero
            zero[min(sm_count() * 4, (M * N + 255) // 256), 256](result, np.uint32(M * N))
        grid = min(N // TILES.BN * (M // TILES.BM) * parts, sm_count())  # one block an SM, at most one an item
        tmap_a = tensor_map_2d(a, TILES.BM, TILES.BK, shape=(M, K))  # boxes of BM rows and BK columns
        tmap_b = tensor_map_2d(b, TILES.BK, BOX, shape=(K, N))  # boxes of BK rows and 64 columns
        hgemm_kernels[a.dtype][grid, TILES.threads, 0, TILES.shared_bytes()](
            tmap_a, tmap_b, result, np.uint32(M), np.uint32(N), np.uint32(K), np.uint32(parts), np.uint32(split_steps)
        )

    run_tiled(launch_tiles, A, B, out, TILES.BM, TILES.BN, TILES.BK)
