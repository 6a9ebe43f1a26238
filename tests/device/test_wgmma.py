"""zoo.device.wgmma and the hgemm steps built on it (v08 on): layouts, the emulation's checks, TMA, sm_90a.

In the simulator these tests check zoo.device.wgmma's emulation (the descriptor decoding, the 128-byte
swizzle, the accumulator fragment, mbarrier phases, TMA boxes); on a Hopper GPU the same kernels check that
the hardware agrees. The machine-code tests compile for sm_90a offline (no GPU). On a GPU:

    ZOO_TARGET=gpu python -m pytest tests/device/test_wgmma.py -v
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda, float32, uint32

import zoo
from tests.conftest import ROOT, run_zoo
from zoo.bench import harness
from zoo.device.jit import jit
from zoo.device.mma import pack_half2
from zoo.device.wgmma import (
    ELEMENT,
    SWIZZLE_128B,
    SWIZZLE_ALIGN,
    TILE_ALIGN,
    commit_group,
    descriptor,
    fence,
    fence_mbarrier_init,
    fence_proxy_async,
    first_tile,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    mma_async,
    mma_async_a_regs,
    named_barrier_arrive,
    named_barrier_sync,
    shared_address,
    swizzle_128b,
    tensor_map_2d,
    tensormap_acquire,
    tma_load_2d,
    wait_group,
)
from zoo.kernels.hgemm import bfloat16_values, to_bfloat16
from zoo.runtime import launch as lean_launch
from zoo.simulator.hopper import E4M3
from zoo.tools import machine_code

HGEMM = zoo.family("hgemm")
WGMMA_STEPS = [v for v in HGEMM if v.name >= "v08"]
GPU = not zoo.SIMULATOR
A_BYTES = 64 * 128  # A: 64 rows of 64 float16 (K-major, 128-byte rows)
B_BYTES = 128 * 128  # B: 64 x 128, N-major as two 64-column blocks of 64 rows, or K-major as 128 rows of 64
TILE_HALVES = (TILE_ALIGN + A_BYTES + B_BYTES) // 2


SIZE = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1}  # bytes of an element of each kind


def one_stage_kernel(n_major=True, swizzled=True, a_stride=1024, aligned=True, kind="f16"):
    """A 64 x 128-byte x 128 product (K = 64 f16 or bf16, 32 tf32, 128 e4m3) through four m64n128 MMAs on one
    stage, every tile laid out as the descriptors say (or, with the other arguments, not): out[i, j] = (A @ B)[i, j]
    by the fragment table."""

    def place(offset):  # a byte offset inside a 1024-byte-aligned tile, as it is stored
        return swizzle_128b(offset) if swizzled else offset

    place = jit(device=True, forceinline=True)(place) if GPU else place
    b_lead, b_stride, b_trans = (8192, 1024, 1) if n_major else (16, 1024, 0)
    size = SIZE[kind]
    row_k = 128 // size  # K of the stage: one 128-byte row of A
    elements, a_elements = (TILE_ALIGN + A_BYTES + B_BYTES) // size, A_BYTES // size
    element = ELEMENT[kind]

    @jit(arch_specific=True)
    def kernel(A, B, out):
        tiles = cuda.shared.array(elements, element, alignment=SWIZZLE_ALIGN)
        acc = cuda.local.array(64, float32)
        tid = uint32(cuda.threadIdx.x)
        tile0, base = first_tile(tiles)
        if not aligned:  # the array's own start, wherever the pattern is
            tile0, base = uint32(0), shared_address(tiles, 0)
        for e in range(tid, 64 * row_k, 128):  # A[r, k]: row r at r * 128 bytes, k contiguous
            r, k = uint32(e) // uint32(row_k), uint32(e) % uint32(row_k)
            tiles[tile0 + place(r * uint32(128) + k * uint32(size)) // uint32(size)] = A[r, k]
        for e in range(tid, row_k * 128, 128):
            k, n = uint32(e) // uint32(128), uint32(e) % uint32(128)
            if n_major:  # column block n // 64 (8 KiB each), then row k of 128 bytes
                at = n // uint32(64) * uint32(8192) + k * uint32(128) + n % uint32(64) * uint32(2)
            else:  # B^T: row n at n * 128 bytes, k contiguous
                at = n * uint32(128) + k * uint32(size)
            tiles[tile0 + uint32(a_elements) + place(at) // uint32(size)] = B[k, n]
        fence_proxy_async()  # the stores above are visible to the tensor cores
        cuda.syncthreads()  # everyone's stores are
        for i in range(64):
            acc[i] = float32(0.0)
        a_desc = descriptor(base, uint32(16), uint32(a_stride), SWIZZLE_128B)
        b_desc = descriptor(base + uint32(A_BYTES), uint32(b_lead), uint32(b_stride), SWIZZLE_128B)
        fence(acc, 64)  # the zeros are written before the MMAs read them
        for kk in range(4):  # A: 32 bytes on; B: 16 rows (2048 bytes) on when N-major, 32 bytes when K-major
            b_step = 128 if n_major else 2
            mma_async(acc, 0, 128, a_desc + np.uint64(2 * kk), b_desc + np.uint64(b_step * kk), 1, 0, b_trans, kind)
        commit_group()
        wait_group(0, acc, 64)  # the MMAs have retired
        lane, warp = tid % uint32(32), tid // uint32(32)
        for j in range(16):
            for h in range(2):
                for c in range(2):
                    row = warp * uint32(16) + lane // uint32(4) + uint32(8 * h)
                    out[row, uint32(8 * j + c) + lane % uint32(4) * uint32(2)] = acc[4 * j + 2 * h + c]

    return kernel


def operands(kind, shape, rng):
    """(an operand of this kind as the kernels take it, its values as float64): tf32 without the 13 low mantissa
    bits (exact whether the tensor core truncates or rounds them), e4m3 any bit pattern but NaN."""
    x = rng.standard_normal(shape).astype(np.float32)
    if kind == "bf16":
        bits = to_bfloat16(x)
        return bits, bfloat16_values(bits).astype(np.float64)
    if kind == "tf32":
        x = (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        return x, x.astype(np.float64)
    if kind == "e4m3":
        bits = rng.integers(0, 256, shape).astype(np.uint8)
        bits[(bits & 0x7F) == 0x7F] = 0x38  # NaN -> 1.0
        return bits, E4M3[bits]
    return x.astype(np.float16), x.astype(np.float16).astype(np.float64)


def _one_stage(kernel, seed=0, kind="f16"):
    rng = np.random.default_rng(seed)
    (A, a), (B, b) = operands(kind, (64, 128 // SIZE[kind]), rng), operands(kind, (128 // SIZE[kind], 128), rng)
    out = cuda.to_device(np.full((64, 128), np.nan, np.float32))
    kernel[1, 128](cuda.to_device(A), cuda.to_device(B), out)
    return out.copy_to_host(), a @ b


@pytest.mark.parametrize("n_major", [True, False], ids=["B-n-major", "B-k-major"])
def test_wgmma_reads_the_swizzled_tiles_the_descriptors_name(n_major):
    out, ref = _one_stage(one_stage_kernel(n_major=n_major))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kind,n_major", [("bf16", True), ("tf32", False), ("e4m3", False)], ids=["bf16-n-major", "tf32", "e4m3"]
)
def test_each_kind_reads_its_own_elements(kind, n_major):
    """The .bf16, .tf32 and .e4m3 forms (K 16, 8, 32 an instruction: always 32 bytes of a row) on the same
    128-byte-swizzled bytes; tf32 and e4m3 read B K-major, the only layout they take. Read as another kind the
    bytes give another product."""
    out, ref = _one_stage(one_stage_kernel(n_major=n_major, kind=kind), seed=3, kind=kind)
    # bf16 and tf32: float32 sums of exact products. e4m3: the tensor core aligns each product to the largest and
    # cuts it at about 13 fraction bits (fp8gemm's spec), a walk over the K = 128 products: 2^-14 sqrt(128) = 6.9e-4
    # (an H100 gave 2.2e-4); a byte read as another kind is off by O(1)
    bound = 2.0**-14 * np.sqrt(128) if kind == "e4m3" else 1e-6
    assert np.linalg.norm(out - ref) <= bound * np.linalg.norm(ref)


def register_a_kernel(n_major=True):
    """One m64n64k16 with A (64 x 16 float16) from registers, each thread's four words packed from the rows and
    columns the register fragment names, and B (16 x 64) in shared memory, N-major (16 rows of 128 bytes) or
    K-major (64 rows of 32 bytes, each a 128-byte row's first quarter), 128-byte swizzled."""

    def place(offset):
        return swizzle_128b(offset)

    place = jit(device=True, forceinline=True)(place) if GPU else place
    halves = (TILE_ALIGN + 64 * 128) // 2

    @jit(arch_specific=True)
    def kernel(A, B, out):
        tiles = cuda.shared.array(halves, np.float16, alignment=SWIZZLE_ALIGN)
        acc = cuda.local.array(32, float32)
        tid = uint32(cuda.threadIdx.x)
        tile0, base = first_tile(tiles)
        for e in range(tid, 16 * 64, 128):
            k, n = uint32(e) // uint32(64), uint32(e) % uint32(64)
            at = k * uint32(128) + n * uint32(2) if n_major else n * uint32(128) + k * uint32(2)
            tiles[tile0 + place(at) // uint32(2)] = B[k, n]
        fence_proxy_async()  # the stores above are visible to the tensor cores
        cuda.syncthreads()  # everyone's stores are
        lane, warp = tid % uint32(32), tid // uint32(32)
        row, col = warp * uint32(16) + lane // uint32(4), lane % uint32(4) * uint32(2)
        a0 = pack_half2(A[row, col], A[row, col + uint32(1)])  # A[16 w + g, 2 q ..]
        a1 = pack_half2(A[row + uint32(8), col], A[row + uint32(8), col + uint32(1)])  # row + 8
        a2 = pack_half2(A[row, col + uint32(8)], A[row, col + uint32(9)])  # columns 8 + 2 q ..
        a3 = pack_half2(A[row + uint32(8), col + uint32(8)], A[row + uint32(8), col + uint32(9)])
        fence(acc, 32)  # A's words (and acc, dropped: accumulate 0) come before the MMA
        desc = descriptor(base, uint32(8192), uint32(1024), SWIZZLE_128B)  # N-major: 8 k rows 1024 B apart
        if not n_major:
            desc = descriptor(base, uint32(16), uint32(1024), SWIZZLE_128B)  # K-major: 8 n rows 1024 B apart
        mma_async_a_regs(acc, 0, 64, a0, a1, a2, a3, desc, 0, 1 if n_major else 0, "f16")
        commit_group()
        wait_group(0, acc, 32)
        for j in range(8):
            for h in range(2):
                for c in range(2):
                    out[row + uint32(8 * h), uint32(8 * j + c) + col] = acc[4 * j + 2 * h + c]

    return kernel


@pytest.mark.parametrize("n_major", [True, False], ids=["B-n-major", "B-k-major"])
def test_the_register_a_form_reads_a_from_the_threads_fragments(n_major):
    """mma_async_a_regs: the product of an A that only the 128 threads' words hold, B from shared memory."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((64, 16)).astype(np.float16)
    B = rng.standard_normal((16, 64)).astype(np.float16)
    out = cuda.to_device(np.full((64, 64), np.nan, np.float32))
    register_a_kernel(n_major)[1, 128](cuda.to_device(A), cuda.to_device(B), out)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-5, atol=1e-5)


@jit
def turns_kernel(out, rounds):
    """Two warpgroups take turns through named barriers 1 and 2, as attention v11's consumers do: each round,
    warpgroup w waits for its turn, appends its number to out (one thread), and hands the turn over."""
    turn = cuda.shared.array(1, uint32)
    tid = uint32(cuda.threadIdx.x)
    w = tid // uint32(128)
    if tid == uint32(0):
        turn[0] = uint32(0)
    cuda.syncthreads()  # the counter is set
    if w == uint32(1):
        named_barrier_arrive(1, 256)  # warpgroup 0 goes first
    for _ in range(rounds):
        named_barrier_sync(uint32(1) + w, 256)
        if tid % uint32(128) == uint32(0):
            out[turn[0]] = w
            turn[0] += uint32(1)
        named_barrier_arrive(uint32(2) - w, 256)
    if w == uint32(0):
        named_barrier_sync(1, 256)  # warpgroup 1's last hand-over


def test_named_barriers_make_two_warpgroups_alternate():
    out = cuda.to_device(np.full(8, 7, np.uint32))
    turns_kernel[1, 256](out, 4)
    np.testing.assert_array_equal(out.copy_to_host(), [0, 1] * 4)


@pytest.mark.skipif(GPU, reason="the simulator's checks")
def test_tf32_and_e4m3_refuse_an_mn_major_operand():
    with pytest.raises(Exception, match="K-major only"):
        _one_stage(one_stage_kernel(n_major=True, kind="tf32"), kind="tf32")


@pytest.mark.skipif(GPU, reason="checks the simulator's reading of the layout (wrong on a GPU too, but slowly)")
@pytest.mark.parametrize(
    "wrong",
    [dict(swizzled=False), dict(a_stride=2048), dict(aligned=False)],
    ids=["tiles-not-swizzled", "wrong-stride-byte-offset", "tiles-off-the-pattern"],
)
def test_a_layout_the_descriptors_do_not_name_gives_a_wrong_product(wrong):
    out, ref = _one_stage(one_stage_kernel(**wrong))
    assert not np.allclose(out, ref, rtol=1e-2, atol=1e-2)


# -- what the emulation refuses -------------------------------------------------------------------------------
if zoo.SIMULATOR:

    @jit
    def unfenced_or_refilled(tiles_in, refill, fenced):
        tiles = cuda.shared.array(TILE_HALVES, np.float16)
        acc = cuda.local.array(64, float32)
        tid = cuda.threadIdx.x
        for e in range(tid, TILE_HALVES, 128):
            tiles[e] = tiles_in[e]
        cuda.syncthreads()  # the tile is stored
        tile0, base = first_tile(tiles)
        for i in range(64):
            acc[i] = float32(0.0)
        if fenced:
            fence(acc, 64)  # the zeros come before the MMA
        mma_async(acc, 0, 128, descriptor(base, 16, 1024, 1), descriptor(base + A_BYTES, 8192, 1024, 1), 1, 0, 1, "f16")
        commit_group()
        cuda.syncthreads()  # every thread has issued
        if refill and tid == 0:
            tiles[tile0] = tiles[tile0] + np.float16(1)  # while the MMA may still read it
        cuda.syncthreads()  # the refill is done
        wait_group(0, acc, 64)  # retires the MMA: reads its operands again


@pytest.mark.skipif(GPU, reason="the simulator's checks")
def test_an_mma_without_a_fence_is_refused():
    tiles = np.ones(TILE_HALVES, np.float16)
    with pytest.raises(Exception, match="wgmma.fence"):
        unfenced_or_refilled[1, 128](tiles, False, False)


@pytest.mark.skipif(GPU, reason="the simulator's checks")
def test_a_tile_refilled_before_the_wait_is_caught():
    tiles = np.ones(TILE_HALVES, np.float16)
    unfenced_or_refilled[1, 128](tiles, False, True)  # the same kernel without the refill is fine
    with pytest.raises(Exception, match="changed before the wait_group"):
        unfenced_or_refilled[1, 128](tiles, True, True)


# -- TMA and mbarriers ----------------------------------------------------------------------------------------
BOX_ROWS, BOX_COLS = 64, 64
BOX_TILE_HALVES = (TILE_ALIGN + BOX_ROWS * BOX_COLS * 2) // 2  # a constant: numba sizes shared arrays by literals


@jit(arch_specific=True)
def tma_box(tmap, row, col, out):
    """One TMA box at (row, col) into swizzled shared memory, read back through swizzle_128b by every thread."""
    tiles = cuda.shared.array(BOX_TILE_HALVES, np.float16, alignment=SWIZZLE_ALIGN)
    bars = cuda.shared.array(1, np.uint64)
    tid = uint32(cuda.threadIdx.x)
    tile0, base = first_tile(tiles)
    if tid == uint32(0):
        mbarrier_init(bars, 0, 1)  # one arrival (with the byte count), then the box's bytes
        fence_mbarrier_init()  # visible to the copy engine too
    cuda.syncthreads()  # the barrier is set up
    if tid == uint32(0):
        tensormap_acquire(tmap)  # the map was copied from the host
        mbarrier_arrive_expect_tx(bars, 0, BOX_ROWS * BOX_COLS * 2)
        tma_load_2d(tiles, tile0, tmap, col, row, bars, 0)
    mbarrier_wait(bars, 0, 0)  # phase 0 completed: the box has landed
    for e in range(tid, BOX_ROWS * BOX_COLS, cuda.blockDim.x):
        r, c = uint32(e) // uint32(BOX_COLS), uint32(e) % uint32(BOX_COLS)
        out[r, c] = tiles[tile0 + swizzle_128b(r * uint32(128) + c * uint32(2)) // uint32(2)]


def _arrivals_kernel(arrivals, pause_s):
    """Thread 1 arrives ``arrivals`` times on a barrier of count 3, ``pause_s`` apart; thread 0 waits for phase 0."""
    import time  # the simulator runs the kernel as Python: a pause between arrivals

    @cuda.jit
    def kernel(out):
        bars = cuda.shared.array(1, np.uint64)
        if cuda.threadIdx.x == 0:
            mbarrier_init(bars, 0, 3)
        cuda.syncthreads()  # the barrier is set up
        if cuda.threadIdx.x == 1:
            for _ in range(arrivals):
                time.sleep(pause_s)
                mbarrier_arrive(bars, 0)
        else:
            mbarrier_wait(bars, 0, 0)
            out[0] = 1

    return kernel


@pytest.mark.skipif(GPU, reason="the simulator's deadlock timeout")
def test_an_mbarrier_wait_gives_up_only_when_no_arrival_comes(monkeypatch):
    """The wait's deadline (DEADLOCK_S, 0.5 s here) counts from the last arrival: three arrivals 0.3 s apart (0.9 s
    in all) complete the phase; two leave the waiter with no arrival for 0.5 s, and it raises."""
    monkeypatch.setattr(zoo.simulator.warps, "DEADLOCK_S", 0.5)
    out = np.zeros(1, np.int32)
    _arrivals_kernel(3, 0.3)[1, 2](out)
    assert out[0] == 1
    with pytest.raises(Exception, match="with no arrival for the phase of parity 0 \\(1 arrivals"):
        _arrivals_kernel(2, 0.1)[1, 2](np.zeros(1, np.int32))


@pytest.mark.parametrize("flat", [False, True])
def test_a_tma_box_lands_swizzled_with_zeros_outside_the_matrix(flat):
    """A 2-D matrix, or a flat view of it with its shape (as v13 and v14 pass run_tiled's flat arrays)."""
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((100, 72)).astype(np.float16)
    row, col = 60, 40  # the box reaches 24 rows and 32 columns past the matrix
    out = cuda.to_device(np.full((BOX_ROWS, BOX_COLS), np.nan, np.float16))
    if flat:
        tmap = tensor_map_2d(cuda.to_device(matrix.reshape(-1)), BOX_ROWS, BOX_COLS, shape=(100, 72))
    else:
        tmap = tensor_map_2d(cuda.to_device(matrix), BOX_ROWS, BOX_COLS)
    tma_box[1, 128](tmap, np.uint32(row), np.uint32(col), out)
    expected = np.zeros((BOX_ROWS, BOX_COLS), np.float16)
    expected[: 100 - row, : 72 - col] = matrix[row:, col:]
    np.testing.assert_array_equal(out.copy_to_host(), expected)


def test_tensor_maps_are_checked_before_encoding():
    with pytest.raises(ValueError, match="boxes of"):
        tensor_map_2d(np.zeros((64, 64), np.float16), 64, 128)  # 256 bytes wide: more than the 128-byte swizzle
    with pytest.raises(ValueError, match="multiple of 8"):
        tensor_map_2d(np.zeros((64, 60), np.float16), 64, 64)  # rows not 16-byte aligned
    with pytest.raises(ValueError, match="over an array of"):
        tensor_map_2d(np.zeros(64 * 64, np.float16), 64, 64, shape=(64, 72))  # a shape the array does not hold


# -- the steps' pipelines: more k steps than stages, several tiles a block ------------------------------------
@pytest.mark.parametrize(
    "step,size",
    [
        ("v08", (5, 7, 270)),  # 5 k steps through 4 stages
        ("v10", (100, 250, 330)),  # 6 k steps: two batches of MMAs in flight, each buffer refilled behind them
        ("v12", (100, 250, 270)),  # 5 k steps through 4 stages: the producer runs ahead, mbarriers hand over
        ("v13", (100, 250, 270)),  # the same through TMA boxes, the bytes counted on the full barriers
        ("v14", (130, 257, 130)),  # 4 tiles of 3 k steps in one persistent block: the stages run on across tiles
        # v15 walks v14's pipeline in another tile order: its order is checked below, its products by test_kernels
    ],
)
def test_the_pipelines_rotate_their_stages(step, size):
    result = harness.check(HGEMM[step], size, seed=11)
    assert result.ok, result.detail


def test_split_k_adds_its_splits_into_a_zeroed_out():
    """v16 with two splits forced (the simulator's one SM would plan one): each split's part added by atomics into
    an out that the launch zeroes, right on a second call over the first's sums and over a poisoned out."""
    module, fam = HGEMM["v16"].module, HGEMM
    size = (256, 256, 192)  # 2 whole tiles of 3 k steps, each in splits of 2 and 1: 4 items, the stages run on
    assert module.plan(*size, splits=2) == (2, 2)  # across them, and the parts go straight into out
    A, B = fam.inputs(size, seed=13)
    want = fam.reference(A, B)
    a, b = cuda.to_device(A), cuda.to_device(B)
    out = cuda.to_device(np.full(want.shape, np.nan, np.float32))  # poisoned: the zeroing must clear it
    for _ in range(2):  # the second call adds into the first's sums unless out is zeroed again
        module.run(a, b, out, splits=2)
        got = out.copy_to_host()
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < fam.tolerance(size)


@pytest.mark.skipif(GPU, reason="calls a device function from the host: the simulator's")
def test_grouped_order_walks_each_group_of_block_rows_column_by_column():
    """v15's tile_origin with groups of 3 block rows on a grid of 7 x 4 tiles: two full groups and a last group of
    one row, each walked down its columns in turn; every tile once."""
    tile_origin = HGEMM["v15"].module.grouped_order(3, 128, 256)
    got = [tuple(int(v) for v in tile_origin(np.uint32(t), np.uint32(7), np.uint32(4))) for t in range(28)]
    expected = [(128 * r, 256 * c) for first in (0, 3, 6) for c in range(4) for r in range(first, min(first + 3, 7))]
    assert got == expected


def test_a_last_group_of_fewer_block_rows_is_walked_too(monkeypatch):
    """v15 in groups of 2 block rows at 300 x 257 x 60: 3 x 2 tiles of one k step, a full group and a last one of one
    row."""
    module = HGEMM["v15"].module
    monkeypatch.setitem(module.hgemm_kernels, np.dtype(np.float16), module.build(module.TILES, "f16", 2))
    result = harness.check(HGEMM["v15"], (300, 257, 60), seed=12)
    assert result.ok, result.detail


def test_no_step_declares_an_alignment_its_dynamic_shared_memory_does_not_have():
    # A static shared array (the mbarriers) pushes dynamic shared memory off the 1024-byte boundary (measured:
    # 0x440 after 64 bytes at 0x400), and alignment=SWIZZLE_ALIGN would let the compiler fold first_tile's
    # skew to 0: wrong products with cp.async, a misaligned TMA. The simulator cannot see the fold.
    for v in WGMMA_STEPS:
        shared = re.findall(r"cuda\.shared\.array\(([^)]*)\)", v.source)
        static = [args for args in shared if not args.startswith("0,")]
        declared = [args for args in shared if args.startswith("0,") and "alignment=SWIZZLE_ALIGN" in args]
        assert not (static and declared), f"{v.name}: static shared arrays {static} beside an aligned dynamic one"


def test_every_wgmma_step_declares_hopper():
    for v in WGMMA_STEPS:
        assert getattr(v.module, "MIN_CC", None) == (9, 0), v.name
        assert "sm_90a" in v.source, v.name


# -- sm_90a, offline ------------------------------------------------------------------------------------------
def test_retarget_names_the_arch_specific_target():
    ptx = "//\n.version 8.8\n.target sm_90\n.address_size 64\n"
    assert lean_launch.retarget(ptx, "sm_90a") == ptx.replace("sm_90\n", "sm_90a\n")
    assert lean_launch.arch_specific((9, 0)) == (9, 0, "a")
    with pytest.raises(ValueError):
        lean_launch.retarget(".version 8.8\n", "sm_90a")


TOOLS = pytest.mark.skipif(
    machine_code._tool("ptxas") is None or machine_code._tool("nvdisasm") is None,
    reason="ptxas or nvdisasm missing: pip install -e '.[test]'",
)


@TOOLS
@pytest.mark.parametrize(
    "step,wanted",
    [
        ("v08", ("HGMMA.64x128x16.F32", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR", "LDGSTS", "FENCE.VIEW.ASYNC.S")),
        ("v09", ("HGMMA.64x256x16.F32", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR", "LDGSTS")),
        ("v10", ("HGMMA.64x256x16.F32", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE gsb0, 0x1", "LDGSTS")),
        ("v11", ("HGMMA.64x256x16.F32", "WARPGROUP.DEPBAR.LE gsb0, 0x1", "STG.E.64")),
        ("v12", ("HGMMA.64x256x16.F32", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "SYNCS.ARRIVE", "FENCE.VIEW.ASYNC.S")),
        ("v13", ("HGMMA.64x256x16.F32", "UTMALDG.2D", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT")),
        ("v14", ("HGMMA.64x256x16.F32", "UTMALDG.2D", "SYNCS.ARRIVE.TRANS64", "STG.E.64")),
    ],
)
def test_the_sass_for_sm90a_shows_hgmma(step, wanted):
    r = run_zoo("show", "hgemm", step, "--sass")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "SASS for sm_90a" in r.stdout
    for opcode in wanted:
        assert opcode in r.stdout, f"{step}: no {opcode} in the SASS"
    assert "LDL" not in r.stdout and "STL" not in r.stdout, f"{step}: local memory (spills or a local array)"


@TOOLS
def test_the_bfloat16_kind_compiles_to_hgmma_bf16():
    """v15 built for uint16 inputs issues wgmma's .bf16 form (HGMMA ... .BF16 in the SASS), from the same source."""
    r = run_zoo("show", "hgemm", "v15", "--sass", "--size", "128@bfloat16")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "HGMMA.64x256x16.F32.BF16" in r.stdout
    assert "LDL" not in r.stdout and "STL" not in r.stdout


PLAIN_SM90 = """
import subprocess, sys, tempfile
import zoo  # chooses the target (GPU mode: ZOO_TARGET=gpu) before numba.cuda is imported
from numba import cuda
from numba.cuda import types
import numba.cuda.dispatcher as dispatcher
from zoo.tools import machine_code
from zoo.runtime.launch import link_arch_specific

class Hopper:
    compute_capability = (9, 0)

dispatcher.get_current_device = lambda: Hopper()  # device functions ask for the GPU being compiled for
from zoo.kernels.hgemm import v08_wgmma as v08

sig = (types.float16[::1], types.float16[::1], types.float32[::1], types.uint32, types.uint32, types.uint32)
kernel = v08.hgemm_kernels[v08.np.dtype(v08.np.float16)]
ptx, _ = cuda.compile_ptx(kernel.dispatcher.py_func, sig, cc=(9, 0))  # what numba writes for sm_90
assert ".target sm_90\\n" in ptx
with tempfile.TemporaryDirectory() as tmp:
    with open(tmp + "/k.ptx", "w") as f:
        f.write(ptx)
    r = subprocess.run([machine_code._tool("ptxas"), "-arch=sm_90", tmp + "/k.ptx", "-o", tmp + "/k.cubin"],
                       capture_output=True, text=True)
    print("PTXAS", r.returncode, r.stderr.replace(chr(10), " "))
    with open(tmp + "/a.cubin", "wb") as f:
        f.write(link_arch_specific(ptx, (9, 0)).code)  # the launch's path: retargeted, linked by nvJitLink
    r = subprocess.run([machine_code._tool("nvdisasm"), "-c", tmp + "/a.cubin"], capture_output=True, text=True)
    print("HGMMA", r.stdout.count("HGMMA"))

def sixteen_words(t, out):  # what a CUtensorMap passed by value would have to be in numba: a 16-tuple
    out[0] = t[15]

ptx, _ = cuda.compile_ptx(sixteen_words, (types.UniTuple(types.uint64, 16), types.uint64[::1]), cc=(9, 0))
params = [line for line in ptx.splitlines() if ".param" in line and "_param_" in line]
print("PARAMS", sum(".param .u64" in line for line in params), sum("align 64" in line for line in params))
"""


@TOOLS
def test_plain_sm90_refuses_wgmma_and_the_arch_specific_link_takes_it():
    """The measured limits (ptxas's words; numba's parameters) and the way round them, offline."""
    r = subprocess.run(
        [sys.executable, "-c", PLAIN_SM90],
        cwd=ROOT,
        env={**os.environ, "ZOO_TARGET": "gpu"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.startswith(("PTXAS", "HGMMA", "PARAMS")))
    assert not lines["PTXAS"].startswith("0") and "not supported on .target 'sm_90'" in lines["PTXAS"]
    assert "wgmma" in lines["PTXAS"]
    assert int(lines["HGMMA"]) == 4  # four k slices of m64n128k16 a step
    # why the tensor maps go through global memory (zoo.device.wgmma): a 16-word tuple is 16 scalar parameters
    # (and an array 7 more), none of them the 64-byte-aligned .b8[128] a __grid_constant__ CUtensorMap is
    assert lines["PARAMS"].split() == ["23", "0"]


# -- on a GPU -------------------------------------------------------------------------------------------------
@pytest.mark.skipif(zoo.SIMULATOR, reason="needs a GPU")
def test_arch_specific_kernels_launch_from_their_own_sm90a_module():
    from zoo.kernels.hgemm import v08_wgmma as v08

    A, B = HGEMM.make_inputs((128, 256, 128), seed=2)
    assert harness.compare(HGEMM["v08"](A, B), HGEMM.reference(A, B), HGEMM.tolerance(128))[0]
    kernel = v08.hgemm_kernels[np.dtype(np.float16)]
    plans = [p for p in kernel.lean._plans.values() if p is not None]
    assert plans and kernel.arch_specific
    assert any(isinstance(f, lean_launch.ArchSpecificFunction) for f in lean_launch._arch_specific_functions.values())


def test_both_backends_check_an_instruction_form_with_the_same_rules():
    """zoo.device.wgmma (numba-cuda) and zoo.device.mlir_wgmma (numba-cuda-mlir) type mma_async through these checks:
    every kind at N 8 and 256 passes, transposes only for the 16-bit kinds, register A only for them."""
    from zoo.device.wgmma_forms import K_OF, TRANSPOSABLE, check_mma_form, check_register_a_form

    for form in K_OF:
        for n in (8, 256):
            check_mma_form(n, form, 0, 0)
    for form in TRANSPOSABLE:
        check_mma_form(64, form, 1, 1)
        check_register_a_form(64, form)
    for args, message in (
        ((64, "f32", 0, 0), "kind is one of f16, bf16, tf32, e4m3"),
        ((60, "f16", 0, 0), "m64nNk16 takes N = 8, 16, ..., 256, not 60"),
        ((264, "e4m3", 0, 0), "m64nNk32 takes N"),
        ((64, "tf32", 0, 1), "K-major only"),
    ):
        with pytest.raises(TypeError, match=message):
            check_mma_form(*args)
    with pytest.raises(TypeError, match="A as pairs of 16-bit elements"):
        check_register_a_form(64, "e4m3")
    with pytest.raises(TypeError, match="takes N = 8"):
        check_register_a_form(4, "f16")
