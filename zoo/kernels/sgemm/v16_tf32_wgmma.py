"""TF32 on Hopper's wgmma: persistent warpgroups fed by TMA multiply float32 tiles as TF32 from shared memory.

Changes:
    A new unit again, so the diff against v15 is the whole kernel: it is hgemm
    v15 (a producer warpgroup whose thread 0 copies tiles with TMA into four
    128-byte-swizzled stages, two consumer warpgroups issuing wgmma from them,
    persistent blocks walking the tiles in groups of block rows) moved to float32:
    ``wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32``, a k slice of 8
    floats (32 bytes, as hgemm's 16 halves) and BK = 32 (one 128-byte row).
    wgmma reads tf32 K-major only, so B is packed once as B^T (``pack``), and
    both tiles are boxes of K-major rows. The epilogue scales by alpha and adds
    beta C as v15's does. ``TOLERANCE`` is this step's own (below).

Why it is faster:
    Hopper's tensor cores reach their TF32 rate through wgmma only, as for
    float16 (hgemm v08's lesson): v15's ``mma.sync`` spent its issue slots and
    shared-memory bandwidth on ``ldmatrix``, 32-bit B loads and ``cvt`` to feed
    fragments, which capped it near a third of cuBLAS TF32. Here the tensor cores
    read both tiles straight from shared memory, one thread's TMA copies fill
    them, and 128 accumulators a thread are the only registers the MMAs need.
    The price of packing B: a transpose once per B, outside the timed calls, as a
    model's weights are laid out once when it loads.
"""

from typing import NamedTuple

import numpy as np

from zoo.device import cuda, float32, sm_count, uint32, uint64
from zoo.device.jit import jit
from zoo.device.memory import flat_view, store_float2
from zoo.device.wgmma import (
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
from zoo.errors import OutOfRange
from zoo.kernels.sgemm.padding import crop_kernel, padded, round_up
from zoo.runtime import SIMULATOR

MIN_CC = (9, 0)  # wgmma.mma_async needs sm_90a, Hopper's arch-specific target (H100, H200)
MAX_CC = (9, 0)  # sm_90a code is arch-specific: it runs on 9.0 GPUs only, not on later ones

# Relative norm error accepted from this step instead of the family's 2e-5. wgmma reads the float32 words as they
# are and the tensor core ignores their 13 low mantissa bits (truncation, where v15 rounds with cvt.rna): a NumPy
# model of truncating both inputs gives 7.7e-4 at any K for zero-mean data (rounding gives 2.9e-4), float32
# accumulation adds ~1e-6. Twice the model leaves room without letting a float16-rounded operand (~4e-4 a matrix,
# but 1e-3 once a 16-bit exponent overflows) or a wrong layout (O(1)) through.
TOLERANCE = 1.5e-3

ROW_BYTES = 128  # a swizzled row: 32 float32, the width of the 128-byte swizzle pattern
GROUP_BYTES = 8 * ROW_BYTES  # 8 rows: one turn of the pattern, the descriptors' stride byte offset
PRODUCERS = 128  # warpgroup 0, of which thread 0 issues the copies (the consumers' warpgroups start at warp 4)
GROUP = 16  # block rows per group of tiles, hgemm v15's: the blocks working at once share panels in the L2
LIMIT = 2**32  # elements of out (padded) that uint32 indices reach


class Tiles(NamedTuple):
    """Block tile BM x BN x BK, 64 rows for each of BM / 64 warpgroups, STAGES buffers of each."""

    BM: int = 128  # two consumer warpgroups of one m64 MMA each
    BN: int = 256  # m64n256k8: 128 accumulators a thread; B^T's box is 256 rows, TMA's most
    BK: int = 32  # one 128-byte swizzled row of A and of B^T, four k8 slices
    STAGES: int = 4  # 48 KiB a stage, hgemm v15's bytes: 192 KiB, one block an SM

    @property
    def threads(self):
        return PRODUCERS + self.BM // 64 * 128  # the producer warpgroup, then a consumer for every 64 rows

    def shared_bytes(self):
        # dynamic: the stages, and 1 KiB to start them on a 1024-byte boundary (first_tile); the mbarriers are static
        return TILE_ALIGN + 4 * self.STAGES * (self.BM + self.BN) * self.BK


def build(tiles, group=GROUP):
    """The kernel for one tile shape and group of block rows (closure variables are compile-time constants)."""
    BM, BN, BK, STAGES = tiles
    if BK != 32 or BM % 64 or BN % 8 or not 8 <= BN <= 256 or STAGES < 2 or tiles.shared_bytes() > 227 * 1024:
        raise ValueError(f"tile shape {tiles} is not valid for this kernel")
    THREADS = tiles.threads
    CONSUMERS = THREADS - PRODUCERS
    FULL, EMPTY = 0, STAGES  # bars[FULL + s]: stage s has landed; bars[EMPTY + s]: stage s may be refilled
    BARS = 2 * STAGES
    ACC = BN // 2  # m64nBNk8: each of a warpgroup's 128 threads holds 64 x BN / 128 float32
    WARPGROUP_A_BYTES = 64 * ROW_BYTES  # the next warpgroup's 64 rows of A start 8 KiB further
    A_TILE = BM * BK  # elements
    B_TILE = BN * BK
    STAGE = A_TILE + B_TILE
    STAGE_BYTES = 4 * STAGE  # a multiple of 1024: every tile starts a swizzle pattern
    SLICES = BK // 8

    @jit(device=True, forceinline=True)
    def tile_origin(tile, tiles_m, tiles_n):
        """(row0, col0) of tile number ``tile``: groups of ``group`` block rows, each walked down its columns."""
        per_group = uint32(group) * tiles_n  # tiles in a full group
        first_row = tile // per_group * uint32(group)  # the group's first block row
        rows = min(uint32(group), tiles_m - first_row)  # block rows in this group: the last group may be short
        within = tile % per_group  # the tile's place in its group: column within // rows, row within % rows
        return (first_row + within % rows) * uint32(BM), within // rows * uint32(BN)

    @jit(device=True, forceinline=True)
    def copy_stage(tiles, tile0, tmap_a, tmap_b, bars, buffer, k0, row0, col0):
        """The producer thread's TMA copies of the A and B^T tiles at k0 into ``buffer``: each box lands swizzled on a
        1024-byte boundary and counts its bytes down on full[buffer]."""
        at = tile0 + buffer * uint32(STAGE)
        tma_load_2d(tiles, at, tmap_a, k0, row0, bars, FULL + buffer)  # A: BM rows x BK columns at (row0, k0)
        tma_load_2d(tiles, at + uint32(A_TILE), tmap_b, k0, col0, bars, FULL + buffer)  # B^T: BN rows at (col0, k0)

    @jit(device=True, forceinline=True)
    def store_scaled2(C, out, at, alpha, beta, acc0, acc1):
        """out[at], out[at + 1] = alpha * acc + beta * C as one 8-byte store; C is only read when it contributes."""
        r0, r1 = alpha * acc0, alpha * acc1
        if beta != 0:
            r0, r1 = r0 + beta * C[at], r1 + beta * C[at + uint32(1)]
        store_float2(out, at, r0, r1)  # at is even: 8-byte aligned

    @jit(arch_specific=True, launch_bounds=(THREADS, 1))  # 384 threads: at most 168 registers each
    def sgemm_kernel(tmap_a, tmap_b, C, out, M, N, K, alpha, beta):
        # the mbarriers are static, and dynamic shared memory starts after them, 16-byte aligned: no declared
        # alignment, so that first_tile measures the skew to the first 1024-byte boundary when the kernel runs
        tiles = cuda.shared.array(0, float32)  # STAGES x (A tile, B^T tile) from tiles[tile0]
        bars = cuda.shared.array(BARS, uint64)  # the mbarriers: full[STAGES], then empty[STAGES]
        tile0, base = first_tile(tiles)  # stage 0 starts at tiles[tile0], shared address base
        tid = uint32(cuda.threadIdx.x)
        warpgroup = tid // uint32(128)  # 0: the producer; w = 1, 2: the consumer of rows 64 (w - 1) ..
        tiles_m, tiles_n = M // uint32(BM), N // uint32(BN)  # tiles down a column and along a row of out
        count = tiles_m * tiles_n
        first, stride = uint32(cuda.blockIdx.x), uint32(cuda.gridDim.x)  # this block's tiles: first, first + stride ..
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
            for tile in range(first, count, stride):
                row0, col0 = tile_origin(uint32(tile), tiles_m, tiles_n)
                for step in range(steps):
                    # the consumers have released this stage (parity phase ^ 1: the first round passes at once)
                    mbarrier_wait(bars, EMPTY + stage, phase ^ uint32(1))
                    mbarrier_arrive_expect_tx(bars, FULL + stage, STAGE_BYTES)  # arrive; STAGE_BYTES are to land
                    copy_stage(tiles, tile0, tmap_a, tmap_b, bars, stage, uint32(step) * uint32(BK), row0, col0)
                    stage += uint32(1)
                    if stage == uint32(STAGES):
                        stage, phase = uint32(0), phase ^ uint32(1)
            return

        acc = cuda.local.array(ACC, float32)
        # descriptors of stage 0, slice 0 (the fields drop 4 bits: an offset of x bytes adds x >> 4); both K-major,
        # 8-row groups 1024 B apart, the leading byte offset unused with a 128-byte swizzle
        a_at = base + (warpgroup - uint32(1)) * uint32(WARPGROUP_A_BYTES)  # this warpgroup's first row of A
        a_desc = descriptor(a_at, uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        b_desc = descriptor(base + uint32(4 * A_TILE), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        # thread (warp w of its warpgroup, lane 4g + q) holds D[16 w + g + 8 h, 8 j + 2 q + c] in acc[4 j + 2 h + c]
        lane, warp = tid % uint32(32), tid % uint32(128) // uint32(32)
        row_in_tile = (warpgroup - uint32(1)) * uint32(64) + warp * uint32(16) + lane // uint32(4)
        col_in_tile = lane % uint32(4) * uint32(2)
        stage, phase = uint32(0), uint32(0)  # the stage of the next step, counted as the producer counts them
        for tile in range(first, count, stride):
            row0, col0 = tile_origin(uint32(tile), tiles_m, tiles_n)  # the producer's tile: the same function
            for i in range(ACC):
                acc[i] = float32(0.0)
            previous = uint32(0)  # the stage of step - 1, released once its MMAs have retired
            for step in range(steps):
                mbarrier_wait(bars, FULL + stage, phase)  # this step's bytes have landed (TMA writes as wgmma reads)
                fence(acc, ACC)  # wgmma.fence: the accumulators' last writes come before the MMAs read them
                offset = uint64(stage * uint32(STAGE_BYTES) >> uint32(4))
                for kk in range(SLICES):  # k slice kk: 8 floats, 32 bytes further along the rows of A and of B^T
                    a_slice, b_slice = a_desc + offset + uint64(kk * 2), b_desc + offset + uint64(kk * 2)
                    mma_async(acc, 0, BN, a_slice, b_slice, 1, 0, 0, "tf32")
                commit_group()
                wait_group(1, acc, ACC)  # the MMAs of step - 1 have retired (this step's may still run) ...
                if step > 0:
                    mbarrier_arrive(bars, EMPTY + previous)  # ... so their stage may be refilled
                previous = stage
                stage += uint32(1)
                if stage == uint32(STAGES):
                    stage, phase = uint32(0), phase ^ uint32(1)
            wait_group(0, acc, ACC)  # the tile's last MMAs have retired: acc holds its sums ...
            mbarrier_arrive(bars, EMPTY + previous)  # ... and their stage may take the next tile's copies

            row, col = row0 + row_in_tile, col0 + col_in_tile
            for j in range(BN // 8):
                for h in range(2):
                    at = (row + uint32(8 * h)) * N + col + uint32(8 * j)
                    store_scaled2(C, out, at, alpha, beta, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1])

    return sgemm_kernel


TILES = Tiles()
sgemm_kernel = build(TILES)


def _transposed(library, B, rows, cols):
    """B^T (N x K) zero-padded to rows x cols, C-contiguous, in ``library`` (numpy or cupy)."""
    packed = library.zeros((rows, cols), np.float32)
    packed[: B.shape[1], : B.shape[0]] = B.T
    return packed


def pack(A, B, *rest):
    """The inputs as this step's kernel reads them, made once per B: B^T, N x K, padded with zeros to whole tiles
    (wgmma reads tf32 K-major only). Any library in, the same out (NumPy on the host, CuPy or numba on the device:
    transposed by CuPy there, by NumPy in the simulator)."""
    rows, cols = round_up(B.shape[1], TILES.BN), round_up(B.shape[0], TILES.BK)
    if isinstance(B, np.ndarray):
        return (A, _transposed(np, B, rows, cols), *rest)
    if SIMULATOR:  # the simulator's device arrays: through the host
        return (A, cuda.to_device(_transposed(np, B.copy_to_host(), rows, cols)), *rest)
    import cupy

    packed = _transposed(cupy, cupy.asarray(B), rows, cols)
    return (A, cuda.as_cuda_array(packed) if hasattr(B, "copy_to_host") else packed, *rest)


def validate(A, B, C=None, alpha=1.0, beta=0.0):
    mp, np_ = round_up(A.shape[0], TILES.BM), round_up(B.shape[1], TILES.BN)
    if mp * np_ >= LIMIT:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} indexes out with uint32: it must hold fewer than 2^32 elements after "
            "padding to whole tiles"
        )


def launch(A, B_t, C, out, alpha=1.0, beta=0.0):
    """out = alpha A B + beta C from A and the packed B^T (``pack``): A and C padded to whole tiles where they are
    not (copies inside the timed call, none at the benchmark sizes), the result cropped."""
    m, n = out.shape
    mp, (np_, kp) = round_up(m, TILES.BM), B_t.shape
    a = padded(A, mp, kp)
    whole = (mp, np_) == (m, n)
    result = out if whole else cuda.device_array((mp, np_), np.float32)
    c = result if beta == 0 or C is None else padded(C, mp, np_)  # not read when beta == 0
    grid = min(np_ // TILES.BN * (mp // TILES.BM), sm_count())  # one block an SM, at most one a tile
    tmap_a = tensor_map_2d(a, TILES.BM, TILES.BK)  # boxes of BM rows and BK columns
    tmap_b = tensor_map_2d(B_t, TILES.BN, TILES.BK)  # boxes of BN rows (n) and BK columns (k)
    sgemm_kernel[grid, TILES.threads, 0, TILES.shared_bytes()](
        tmap_a,
        tmap_b,
        flat_view(c),
        flat_view(result),
        np.uint32(mp),
        np.uint32(np_),
        np.uint32(kp),
        np.float32(alpha),
        np.float32(beta),
    )
    if not whole:
        crop_kernel[((n + 31) // 32, (m + 7) // 8), (32, 8)](result, out)
