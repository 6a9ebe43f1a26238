"""HGEMM and zoo.device.mma beyond the generic checks: the fragment layout, ldmatrix, padding, the SASS, and the
bfloat16 kind (uint16 bit patterns, the .bf16 form of mma chosen from the dtype).

The intrinsic tests run a one-warp kernel that places every element by the fragment table of
zoo.kernels.hgemm: in the simulator they check zoo.device.mma's emulation, on a GPU they check that the
hardware agrees with the table. On a GPU the whole file runs with

    ZOO_TARGET=gpu python -m pytest tests/kernels/test_hgemm.py -v

(the steps' large sizes, 4095 x 4097 x 1000 included, are the GPU-only tests at the end).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda, uint32
from numba.core.types import float16

import zoo
from tests.conftest import ROOT
from zoo.bench import harness
from zoo.device.jit import jit
from zoo.device.mma import (
    SHARED_ALIGN,
    ldmatrix_x4,
    ldmatrix_x4_trans,
    load_half2,
    mma_16bit_f32,
    mma_f16_f32,
    pack_half2,
)
from zoo.errors import OutOfRange
from zoo.kernels.hgemm import bfloat16_values, padding, to_bfloat16
from zoo.kernels.hgemm.v04_cp_async_double_buffered import DEFAULT, Tiles, build, launch_with, valid
from zoo.tools import machine_code

HGEMM = zoo.family("hgemm")
IRREGULAR = (17, 33, 41)  # K: two BK = 32 steps, the last one partial and not a multiple of 8


# -- the intrinsics, one warp ---------------------------------------------------------------------
@jit
def one_mma(A, B, C, D):
    """D = A @ B + C for one 16 x 16 x 8 tile, every element placed by the fragment table."""
    lane = cuda.threadIdx.x
    g, t = lane // 4, lane % 4
    a0 = pack_half2(A[g, 2 * t], A[g, 2 * t + 1])
    a1 = pack_half2(A[g + 8, 2 * t], A[g + 8, 2 * t + 1])
    a2 = pack_half2(A[g, 2 * t + 8], A[g, 2 * t + 9])
    a3 = pack_half2(A[g + 8, 2 * t + 8], A[g + 8, 2 * t + 9])
    b0 = pack_half2(B[2 * t, g], B[2 * t + 1, g])
    b1 = pack_half2(B[2 * t + 8, g], B[2 * t + 9, g])
    d0, d1, d2, d3 = mma_f16_f32(
        a0, a1, a2, a3, b0, b1, C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]
    )
    D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1] = d0, d1, d2, d3


def test_mma_follows_the_fragment_table():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((16, 16)).astype(np.float16)
    B = rng.standard_normal((16, 8)).astype(np.float16)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    D = np.full((16, 8), np.nan, np.float32)
    one_mma[1, 32](A, B, C, D)
    ref = A.astype(np.float64) @ B.astype(np.float64) + C
    np.testing.assert_allclose(D, ref, rtol=1e-5, atol=1e-5)


def test_mma_with_a_one_hot_a_picks_rows_of_b():
    """A = a single 1 at (i, k): D row i is B row k; a wrong lane or half shows up as the wrong row."""
    B = np.arange(128, dtype=np.float16).reshape(16, 8)
    C = np.zeros((16, 8), np.float32)
    for i, k in ((0, 0), (3, 9), (8, 1), (15, 15), (9, 8)):
        A = np.zeros((16, 16), np.float16)
        A[i, k] = 1
        D = np.full((16, 8), np.nan, np.float32)
        one_mma[1, 32](A, B, C, D)
        expected = np.zeros((16, 8), np.float32)
        expected[i] = B[k]
        np.testing.assert_array_equal(D, expected)


@jit
def pack_and_load(x, words):
    lane = cuda.threadIdx.x
    words[lane] = pack_half2(x[2 * lane], x[2 * lane + 1])
    words[32 + lane] = load_half2(x, 2 * lane)


def test_pack_and_load_put_the_lower_index_in_the_low_half():
    x = np.arange(64, dtype=np.float16) / np.float16(8)
    words = np.zeros(64, np.uint32)
    pack_and_load[1, 32](x, words)
    expected = x.view(np.uint32)  # little-endian: element 2i in bits 0-15
    np.testing.assert_array_equal(words[:32], expected)
    np.testing.assert_array_equal(words[32:], expected)


@jit
def one_16bit_mma(A, B, C, D):
    """one_mma through mma_16bit_f32: the form (.f16 or .bf16) comes from A's dtype."""
    lane = cuda.threadIdx.x
    g, t = lane // 4, lane % 4
    a0 = pack_half2(A[g, 2 * t], A[g, 2 * t + 1])
    a1 = pack_half2(A[g + 8, 2 * t], A[g + 8, 2 * t + 1])
    a2 = pack_half2(A[g, 2 * t + 8], A[g, 2 * t + 9])
    a3 = pack_half2(A[g + 8, 2 * t + 8], A[g + 8, 2 * t + 9])
    b0 = pack_half2(B[2 * t, g], B[2 * t + 1, g])
    b1 = pack_half2(B[2 * t + 8, g], B[2 * t + 9, g])
    d0, d1, d2, d3 = mma_16bit_f32(
        A.dtype, a0, a1, a2, a3, b0, b1, C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]
    )
    D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1] = d0, d1, d2, d3


@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
def test_the_16_bit_mma_takes_its_form_from_the_dtype(kind):
    """The same kernel source compiled for float16 and for uint16 (bfloat16 bits): each multiplies its own format.
    1 + 2^-8 is exact in both, 1 + 2^-10 only in float16 (bfloat16 keeps 7 mantissa bits): a wrong form or a
    numeric cast of the bits gives another product."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((16, 16)).astype(np.float32)
    B = rng.standard_normal((16, 8)).astype(np.float32)
    A[0, 0], B[0, 0] = 1 + 2.0**-8, 1 + 2.0**-10
    C = rng.standard_normal((16, 8)).astype(np.float32)
    if kind == "bfloat16":
        A16, B16 = to_bfloat16(A), to_bfloat16(B)
        values = bfloat16_values
    else:
        A16, B16 = A.astype(np.float16), B.astype(np.float16)
        values = lambda x: x.astype(np.float32)  # noqa: E731
    D = np.full((16, 8), np.nan, np.float32)
    one_16bit_mma[1, 32](A16, B16, C, D)
    ref = values(A16).astype(np.float64) @ values(B16).astype(np.float64) + C
    np.testing.assert_allclose(D, ref, rtol=1e-6, atol=1e-6)
    assert (values(B16)[0, 0] == 1) == (kind == "bfloat16")  # B[0, 0] lost its 2^-10 in bfloat16 only


def test_bfloat16_bits_round_to_nearest_even():
    ulp = 2.0**-7  # of bfloat16 at 1: 7 mantissa bits
    x = np.array([1, 1 + ulp, 1 + ulp / 2, 1 + 1.5 * ulp, 1 + ulp / 4, -2.5, 3.0e38, 1e-30, 0], np.float32)
    bits = to_bfloat16(x)
    assert bits.dtype == np.uint16
    # exact, exact, a tie down to even, a tie up to even, below half an ulp, exact
    np.testing.assert_array_equal(bits[:6], [0x3F80, 0x3F81, 0x3F80, 0x3F82, 0x3F80, 0xC020])
    np.testing.assert_allclose(bfloat16_values(bits), x, rtol=2.0**-8)  # within half an ulp everywhere
    assert bfloat16_values(bits).dtype == np.float32


STRIDE = 24  # a padded row: 16 float16 + 8


@jit
def ldmatrix_both(X, words):
    """Load a 16 x 16 tile (rows STRIDE apart in shared memory) with ldmatrix and ldmatrix.trans."""
    tile = cuda.shared.array(384, float16, alignment=SHARED_ALIGN)  # 16 rows x STRIDE
    lane = cuda.threadIdx.x
    for e in range(lane, 256, 32):
        tile[e // 16 * STRIDE + e % 16] = X[e // 16, e % 16]
    cuda.syncthreads()
    at = uint32(lane % 16 * STRIDE + lane // 16 * 8)  # lane l names row l % 16, columns from 8 (l // 16)
    w0, w1, w2, w3 = ldmatrix_x4(tile, at)
    words[lane, 0], words[lane, 1], words[lane, 2], words[lane, 3] = w0, w1, w2, w3
    w0, w1, w2, w3 = ldmatrix_x4_trans(tile, at)
    words[lane, 4], words[lane, 5], words[lane, 6], words[lane, 7] = w0, w1, w2, w3


def _word(lo, hi):
    return int(np.array([lo, hi], np.float16).view(np.uint32)[0])


def test_ldmatrix_gives_the_a_and_b_fragments():
    X = (np.arange(256).reshape(16, 16) % 2003).astype(np.float16)  # every element distinct
    words = np.zeros((32, 8), np.uint32)
    ldmatrix_both[1, 32](X, words)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        # non-transposed: the A fragment of X (a0 a1 a2 a3)
        a = [
            _word(X[g, 2 * t], X[g, 2 * t + 1]),
            _word(X[g + 8, 2 * t], X[g + 8, 2 * t + 1]),
            _word(X[g, 2 * t + 8], X[g, 2 * t + 9]),
            _word(X[g + 8, 2 * t + 8], X[g + 8, 2 * t + 9]),
        ]
        assert list(words[lane, :4]) == a, f"lane {lane}"
        # transposed, X as a k x n tile of B: b0 b1 of columns 0-7, then b0 b1 of columns 8-15
        b = [
            _word(X[2 * t, g], X[2 * t + 1, g]),
            _word(X[2 * t + 8, g], X[2 * t + 9, g]),
            _word(X[2 * t, g + 8], X[2 * t + 1, g + 8]),
            _word(X[2 * t + 8, g + 8], X[2 * t + 9, g + 8]),
        ]
        assert list(words[lane, 4:]) == b, f"lane {lane}"


# -- the family ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad,error,message",
    [
        (lambda A, B: (A, B[:-1]), ValueError, "A's columns must equal B's rows"),
        (lambda A, B: (A.astype(np.float32), B.astype(np.float32)), TypeError, "must be float16"),
        (lambda A, B: (A, B.astype(np.float32)), TypeError, "must be float16"),
        (lambda A, B: (A, to_bfloat16(B.astype(np.float32))), TypeError, "share one dtype"),
        (lambda A, B: (A, B.T), ValueError, "not C-contiguous"),
        (lambda A, B: (A.ravel(), B), ValueError, "2 dimension"),
    ],
)
@pytest.mark.parametrize("variant", HGEMM.variants, ids=lambda v: v.name)
def test_bad_operands_are_refused(variant, bad, error, message):
    A, B = HGEMM.make_inputs(IRREGULAR, seed=0)
    with pytest.raises(error, match=message):
        variant(*bad(A, B))


@pytest.mark.parametrize("variant", HGEMM.variants, ids=lambda v: v.name)
def test_uint32_indexing_limit_is_enforced_before_launch(variant):
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (70_000, 70_000), (0, 0))
    with pytest.raises(OutOfRange, match="2\\^32"):
        variant.module.validate(huge, huge)


def test_tolerance_grows_with_k_and_stays_below_float16_rounding():
    assert HGEMM.tolerance(1) == 2e-6
    assert HGEMM.tolerance((8, 8, 4096)) == HGEMM.tolerance(4096) == pytest.approx(3.05e-5, rel=1e-2)
    assert HGEMM.tolerance(8192) < 1.4e-4  # a float16 output would be ~1.4e-4 off


def test_whole_tiles_skip_the_padding():
    # v01's tile (16 x 32 x 16) is the smallest: the padding logic (padding.run_tiled) is every step's
    padding.pad_kernel.last_launch = padding.crop_kernel.last_launch = None
    A, B = HGEMM.make_inputs((16, 32, 16), seed=1)
    assert harness.compare(HGEMM["v01"](A, B), HGEMM.reference(A, B), HGEMM.tolerance(16))[0]
    assert padding.pad_kernel.last_launch is None and padding.crop_kernel.last_launch is None
    A, B = HGEMM.make_inputs((16, 32, 15), seed=1)
    assert harness.compare(HGEMM["v01"](A, B), HGEMM.reference(A, B), HGEMM.tolerance(15))[0]
    assert padding.pad_kernel.last_launch is not None and padding.crop_kernel.last_launch is None


def test_launch_on_device_arrays():
    """What the timing harness and asv do: launch prepared device inputs."""
    A, B = HGEMM.make_inputs(IRREGULAR, seed=5)
    out = cuda.to_device(np.full((A.shape[0], B.shape[1]), np.nan, np.float32))
    HGEMM["v01"].launch((cuda.to_device(A), cuda.to_device(B)), out)  # the launch path is every step's
    assert harness.compare(out.copy_to_host(), HGEMM.reference(A, B), HGEMM.tolerance(IRREGULAR))[0]


def test_tile_shapes():
    assert valid(DEFAULT) and valid(Tiles(128, 128, 32, 64, 64)) and valid(Tiles(64, 64, 32, 32, 32))
    assert not valid(Tiles(128, 128, 32, 64, 24))  # warp tile not a multiple of 16
    assert not valid(Tiles(256, 128, 32, 64, 32))  # two buffers exceed 48 KB of static shared memory
    with pytest.raises(ValueError, match="not valid"):
        build(Tiles(128, 128, 24, 64, 32))


def test_a_smaller_tile_shape_is_correct():
    """A shape a later tuning step may pick (more warps along K-slices than the defaults)."""
    tiles = Tiles(64, 64, 32, 32, 32)
    A, B = HGEMM.make_inputs((33, 65, 40), seed=2)
    out = cuda.to_device(np.full((33, 65), np.nan, np.float32))
    launch_with(build(tiles), tiles, cuda.to_device(A), cuda.to_device(B), out)
    assert harness.compare(out.copy_to_host(), HGEMM.reference(A, B), HGEMM.tolerance(40))[0]


@pytest.mark.parametrize("step", ["v05_multistage_swizzled", "v06_fragments_double_buffered", "v07_block_swizzle"])
def test_the_multistage_pipeline_rotates_its_buffers(step):
    """One-warp tiles and more K steps than stages: every buffer is refilled while the others are read."""
    import importlib

    mod = importlib.import_module(f"zoo.kernels.hgemm.{step}")
    for stages, steps in ((2, 5), (3, 5), (3, 1), (4, 7)):
        tiles = mod.Tiles(BM=16, BN=32, BK=32, WM=16, WN=32, STAGES=stages)
        k = 32 * steps - 5  # a partial last step: padded with zeros
        A, B = HGEMM.make_inputs((16, 32, k), seed=stages)
        out = cuda.to_device(np.full((16, 32), np.nan, np.float32))
        mod.launch_with(mod.build(tiles), tiles, cuda.to_device(A), cuda.to_device(B), out)
        ok, err, detail = harness.compare(out.copy_to_host(), HGEMM.reference(A, B), HGEMM.tolerance(k))
        assert ok, f"{stages} stages, K = {k}: {detail}"


def test_grouped_block_order_covers_every_tile_once():
    """v07 with one-warp tiles on 18 x 2 blocks: a whole group of 16 block rows, then a short one of 2."""
    from zoo.kernels.hgemm import v07_block_swizzle as v07

    tiles = v07.Tiles(BM=16, BN=32, BK=32, WM=16, WN=32, STAGES=2)
    m, n, k = 16 * (v07.GROUP + 2), 64, 32
    A, B = HGEMM.make_inputs((m, n, k), seed=9)
    out = cuda.to_device(np.full((m, n), np.nan, np.float32))
    v07.launch_with(v07.build(tiles), tiles, cuda.to_device(A), cuda.to_device(B), out)
    ok, err, detail = harness.compare(out.copy_to_host(), HGEMM.reference(A, B), HGEMM.tolerance(k))
    assert ok, detail  # a tile taken twice leaves another NaN


def test_swizzle_spreads_eight_rows_over_eight_bank_groups():
    from zoo.kernels.hgemm.v05_multistage_swizzled import swizzle

    for chunks in (2, 4, 8, 16, 32):
        div, mod = swizzle(chunks)
        for c in range(chunks):
            for first in range(0, 32, 8):  # any 8 consecutive rows from a multiple of 8, as ldmatrix reads
                groups = {(r * chunks + (c ^ (r // div % mod))) % 8 for r in range(first, first + 8)}
                assert len(groups) == 8, (chunks, c, first)
    assert not v05_valid(dict(WN=16)) and not v05_valid(dict(STAGES=1)) and v05_valid(dict(BN=256, STAGES=4))


def v05_valid(changes):
    from zoo.kernels.hgemm import v05_multistage_swizzled as v05

    return v05.valid(v05.Tiles()._replace(**changes))


# -- what the compiler made of it (no GPU needed: compiled offline for sm_90) --------------------
SASS_WANTED = {
    "v01": ("HMMA.16816.F32",),
    "v03": ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDG.E.128", "STS.128"),
    "v04": ("HMMA.16816.F32", "LDSM.16.MT88.4", "LDGSTS.E.BYPASS.128", "DEPBAR"),
    "v05": ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS.E.BYPASS", "DEPBAR"),
    "v06": ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS.E.BYPASS", "DEPBAR"),
    "v07": ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "LDGSTS.E.BYPASS", "DEPBAR"),
}
# Every step's SASS for float16 and for bfloat16 (uint16 inputs, the same source), in one process in GPU mode:
# what `python -m zoo show hgemm STEP --sass [--size 128@bfloat16]` prints, without starting numba 14 times.
COMPILE_SASS = """
import json, sys
import zoo
from zoo.tools import machine_code
from zoo.cli import _cases
fam = zoo.family("hgemm")
out = {}
for step in sys.argv[1:]:
    for size, kind in ((None, None), _cases(fam, ["128@bfloat16"], None)[0]):
        kernels = machine_code.compile_step(fam[step], (9, 0), size, kind)
        for k in kernels:
            machine_code.assemble(k, (9, 0), want_sass=True)
        out[f"{step}@{kind}"] = chr(10).join(k.sass for k in kernels)
print(json.dumps(out))
"""


@pytest.mark.skipif(
    machine_code._tool("ptxas") is None or machine_code._tool("nvdisasm") is None,
    reason="ptxas or nvdisasm missing: pip install -e '.[test]'",
)
def test_sass_shows_the_tensor_core_instructions():
    env = dict(os.environ, ZOO_TARGET="gpu")
    r = subprocess.run(
        [sys.executable, "-c", COMPILE_SASS, *SASS_WANTED], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    sass = json.loads(r.stdout.strip().splitlines()[-1])
    for step, wanted in SASS_WANTED.items():
        fp16, bf16 = sass[f"{step}@None"], sass[f"{step}@bfloat16"]
        for opcode in wanted:
            assert opcode in fp16, f"{step}: no {opcode} in the SASS"
        assert "LDL" not in fp16 and "STL" not in fp16, f"{step}: local memory (spills or a local array)"
        assert "HMMA.16816.F32.BF16" not in fp16
        assert "HMMA.16816.F32.BF16" in bf16, f"{step}: no bfloat16 mma for uint16 inputs"
        assert "LDL" not in bf16 and "STL" not in bf16


# -- on a GPU ---------------------------------------------------------------------------------------
@pytest.mark.skipif(zoo.SIMULATOR, reason="needs a GPU: large sizes")
@pytest.mark.parametrize("kind", HGEMM.kinds)
@pytest.mark.parametrize("size", [(1, 1, 1), IRREGULAR, (4095, 4097, 1000)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", HGEMM.variants, ids=lambda v: v.name)
def test_on_the_gpu(variant, size, kind):
    result = harness.check(variant, size, seed=3, kind=kind)  # every step takes both kinds, wgmma's too
    assert result.ok, result.detail


@pytest.mark.skipif(zoo.SIMULATOR, reason="needs a GPU: cuBLAS")
@pytest.mark.parametrize("kind", HGEMM.kinds)
def test_the_baseline_is_correct(kind):
    import cupy

    A, B = HGEMM.make_inputs((300, 200, 100), seed=4, kind=kind)
    out = cupy.full((300, 200), np.nan, np.float32)
    HGEMM.baseline(cupy.asarray(A), cupy.asarray(B), out)
    ok, err, detail = harness.compare(cupy.asnumpy(out), HGEMM.reference(A, B), HGEMM.tolerance(100))
    assert ok, detail
    A16, B16 = HGEMM.make_inputs((300, 200, 100), seed=4, kind="float16")  # the other format: another product
    assert not harness.compare(cupy.asnumpy(out), HGEMM.reference(A16, B16), 1e-3)[0] or kind == "float16"


def test_the_bfloat16_kind_is_bfloat16_throughout():
    """make_inputs rounds the same normals to bfloat16 bits; the reference and the CPU row read them as bfloat16;
    the float16-only ceiling is left out for them (OutOfRange) before touching CuPy."""
    A, B = HGEMM.make_inputs(IRREGULAR, seed=7, kind="bfloat16")
    A16, _ = HGEMM.make_inputs(IRREGULAR, seed=7)
    assert A.dtype == B.dtype == np.uint16
    np.testing.assert_allclose(bfloat16_values(A), A16.astype(np.float32), rtol=2.0**-7, atol=1e-3)
    ref = HGEMM.reference(A, B)
    np.testing.assert_allclose(ref, bfloat16_values(A).astype(np.float64) @ bfloat16_values(B).astype(np.float64))
    fn, _ = HGEMM.cpu_rows["cpu_numpy"]
    assert harness.compare(fn(A, B), ref, HGEMM.tolerance(IRREGULAR))[0]
    with pytest.raises(OutOfRange, match="no bfloat16"):
        HGEMM.CEILINGS["cupy.matmul fp16 out"](A, B, None)


def test_a_padded_shape_s_buffers_are_made_once_and_zeroed_again():
    """run_tiled keeps its padded copies (zoo.runtime.buffers.scratch): the second call at a shape allocates
    nothing, and a second product at the same shape is right though the buffers hold the first's numbers."""
    from zoo.runtime import buffers

    fam = zoo.family("hgemm")
    step = fam["v01"]
    first, second = fam.inputs((17, 33, 65), seed=1), fam.inputs((17, 33, 65), seed=2)
    step(*first)
    kept = {k for k in buffers._BUFFERS if k[0].startswith("hgemm padded")}
    names = {k[0] for k in kept}  # v01's tile is 16 x 32 x 16: M 17 -> 32, N 33 -> 64, K 65 -> 80
    assert {"hgemm padded A 32x80", "hgemm padded B 80x64", "hgemm padded result 32x64"} <= names
    out = step(*second)
    assert {k for k in buffers._BUFFERS if k[0].startswith("hgemm padded")} == kept
    want = fam.reference(*second)
    assert np.linalg.norm(out - want) / np.linalg.norm(want) < fam.tolerance((17, 33, 65))
