"""SGEMM beyond the generic checks: the BLAS form, the padding path, the tuning candidates and the tile lookups,
edges in the kernel (v11), split-K (v12), the split last wave (v13, and v14 with its unrolled hot loop),
and the TF32 tensor cores (v15: the m16n8k8 fragment table, the rounding, its own tolerance, the cuBLAS TF32 row)."""

import numpy as np
import pytest
from numba import cuda, uint32

import zoo
from tests.conftest import run_zoo, tune_with_sizes
from zoo.bench import harness
from zoo.device.bits import as_uint32
from zoo.device.jit import jit
from zoo.device.mma import SHARED_ALIGN, ldmatrix_x4, mma_tf32_f32, to_tf32
from zoo.errors import OutOfRange
from zoo.kernels.sgemm import padding, plan, tiles
from zoo.kernels.sgemm import v11_edges_in_kernel as v11
from zoo.kernels.sgemm import v12_split_k as v12
from zoo.kernels.sgemm import v13_split_last_wave as v13
from zoo.kernels.sgemm import v14_unrolled_hot_loop as v14
from zoo.kernels.sgemm import v15_tf32_tensor_cores as v15
from zoo.kernels.sgemm import v16_tf32_wgmma as v16
from zoo.kernels.sgemm.sweeps import tune
from zoo.kernels.sgemm.tiles import DEFAULT
from zoo.kernels.sgemm.v09_double_buffered import build_kernel, launch_with
from zoo.tools import machine_code

SGEMM = zoo.family("sgemm")
IRREGULAR = (33, 17, 21)  # K: three BK = 8 steps, the last one partial and not a multiple of 4
SMALL = (17, 9, 5)  # one partial tile in every dimension: enough for the epilogue (alpha, beta, C)


def operands(size, seed):
    A, B = SGEMM.make_inputs(size, seed)
    m, n = A.shape[0], B.shape[1]
    C = np.random.default_rng(seed + 1).standard_normal((m, n), dtype=np.float32)
    return A, B, C


@pytest.mark.parametrize("variant", SGEMM.variants, ids=lambda v: v.name)
def test_alpha_beta_and_c(variant):
    A, B, C = operands(SMALL, seed=7)
    out = np.full(C.shape, np.nan, np.float32)
    got = variant(A, B, C, out=out, alpha=-1.5, beta=0.25)
    ok, err, detail = harness.compare(got, SGEMM.reference(A, B, C, alpha=-1.5, beta=0.25), variant.tolerance(SMALL))
    assert ok, detail
    assert np.array_equal(C, operands(SMALL, seed=7)[2]), "C is an input: it must not change"


def test_c_given_with_beta_zero_is_ignored():
    A, B, C = operands(IRREGULAR, seed=3)
    C[0, 0] = np.nan  # beta == 0: C must not even be read
    got = SGEMM["v07"](A, B, C, alpha=2.0)
    assert np.isfinite(got).all()
    assert harness.compare(got, SGEMM.reference(A, B, alpha=2.0), SGEMM.TOLERANCE)[0]


@pytest.mark.parametrize(
    "bad,error,message",
    [
        (lambda A, B, C: (A, B[:-1]), ValueError, "A's columns must equal B's rows"),
        (lambda A, B, C: (A, B, C[:-1]), ValueError, "C must be"),
        (lambda A, B, C: (A, B.T), ValueError, "not C-contiguous"),
        (lambda A, B, C: (A.astype(np.float16), B), TypeError, "must be float32"),
        (lambda A, B, C: (A[:0], B[:, :0]), ValueError, "empty"),
        (lambda A, B, C: (A.ravel(), B), ValueError, "2 dimension"),
    ],
)
def test_bad_operands_are_refused(bad, error, message):
    A, B, C = operands(IRREGULAR, seed=0)
    with pytest.raises(error, match=message):
        SGEMM["v01"](*bad(A, B, C))


def test_beta_without_c_is_refused():
    A, B, _ = operands(IRREGULAR, seed=0)
    with pytest.raises(ValueError, match="beta != 0 needs C"):
        SGEMM["v06"](A, B, beta=1.0)


def test_uint32_indexing_limit_is_enforced_before_launch():
    from zoo.errors import OutOfRange

    v09 = SGEMM["v09"]
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (70_000, 70_000), (0, 0))
    with pytest.raises(OutOfRange, match="2\\^32"):
        v09.module.validate(huge, huge)


def test_whole_tiles_skip_the_padding():
    padding.pad_kernel.last_launch = padding.crop_kernel.last_launch = None
    A, B, _ = operands((128, 128, 16), seed=1)
    assert harness.compare(SGEMM["v06"](A, B), SGEMM.reference(A, B), SGEMM.TOLERANCE)[0]
    assert padding.pad_kernel.last_launch is None and padding.crop_kernel.last_launch is None
    A, B, _ = operands((127, 128, 16), seed=1)
    assert harness.compare(SGEMM["v06"](A, B), SGEMM.reference(A, B), SGEMM.TOLERANCE)[0]
    assert padding.pad_kernel.last_launch is not None and padding.crop_kernel.last_launch is not None


def test_tuning_candidates_include_v09s_shape():
    candidates = tune.candidates()
    assert DEFAULT in candidates and len(candidates) == len(set(candidates))
    assert all(tune.valid(t) for t in candidates)
    assert not tune.valid(DEFAULT._replace(WN_ITER=3))


def _covering(candidates):
    """Candidates until every value of every tile parameter has appeared once (the simulator's share)."""
    seen, chosen = set(), []
    for t in candidates:
        if not set(enumerate(t)) <= seen:
            seen |= set(enumerate(t))
            chosen.append(t)
    return chosen


TUNED = tune.candidates() if not zoo.SIMULATOR else _covering(tune.candidates())


def test_the_simulator_covers_every_tile_parameter_value():
    every = tune.candidates()
    assert {(i, v) for t in _covering(every) for i, v in enumerate(t)} == {
        (i, v) for t in every for i, v in enumerate(t)
    }


@pytest.mark.parametrize("shape", TUNED, ids=lambda t: "-".join(map(str, t)))
def test_every_tuning_candidate_is_correct(shape):
    """v10 may pick any of them on some GPU (all are tried there; in the simulator, enough of them that
    every value of every parameter is): each must compute the right product."""
    from numba import cuda

    A, B, C = operands(IRREGULAR, seed=11)
    out = cuda.to_device(np.full(C.shape, np.nan, np.float32))
    launch_with(build_kernel(shape), shape, cuda.to_device(A), cuda.to_device(B), cuda.to_device(C), out, 0.5, -2.0)
    ref = SGEMM.reference(A, B, C, alpha=0.5, beta=-2.0)
    ok, err, detail = harness.compare(out.copy_to_host(), ref, SGEMM.TOLERANCE)
    assert ok, detail


def test_launch_on_device_arrays_without_the_optional_c():
    """What the timing harness and asv do: launch prepared device inputs, C left out."""
    from numba import cuda

    A, B, _ = operands(IRREGULAR, seed=5)
    out = cuda.to_device(np.full((A.shape[0], B.shape[1]), np.nan, np.float32))
    SGEMM["v06"].launch((cuda.to_device(A), cuda.to_device(B)), out)
    assert harness.compare(out.copy_to_host(), SGEMM.reference(A, B), SGEMM.TOLERANCE)[0]


# -- v11 and v12: edges in the kernel, split-K ------------------------------------------------------

# 1 and primes on every axis, shapes that are no multiple of a tile or of 4, and the whole-tile case;
# in the simulator the steps run 32 x 32 x 8 tiles, so these cross several tile edges.
EDGE_SHAPES = ((1, 1, 1), (1, 37, 5), (37, 1, 3), (13, 7, 1), (31, 29, 37), (33, 65, 17), (64, 36, 20), (32, 32, 8))


def _device_operands(size, seed):
    from numba import cuda

    A, B, C = operands(size, seed)
    out = cuda.to_device(np.full(C.shape, np.nan, np.float32))
    return A, B, C, cuda.to_device(A), cuda.to_device(B), cuda.to_device(C), out


def _check(out, A, B, C, alpha, beta):
    ok, err, detail = harness.compare(
        out.copy_to_host(), SGEMM.reference(A, B, C, alpha=alpha, beta=beta), SGEMM.TOLERANCE
    )
    assert ok, detail


@pytest.fixture
def no_copies(monkeypatch):
    """Any padded copy or device allocation inside a launch fails the test."""
    from numba import cuda

    def refuse(*args, **kwargs):
        raise AssertionError("a launch allocated or padded: v11 and v12 must not copy")

    for name in ("padded", "run_tiled"):
        monkeypatch.setattr(padding, name, refuse)
    for name in ("device_array", "device_array_like", "to_device"):
        monkeypatch.setattr(cuda, name, refuse)


@pytest.mark.parametrize("step", [v11, v12, v13, v14], ids=["v11", "v12", "v13", "v14"])
@pytest.mark.parametrize("size", EDGE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_edges_in_the_kernel_without_copies(step, size, request):
    A, B, C, dA, dB, dC, out = _device_operands(size, seed=sum(size))
    request.getfixturevalue("no_copies")
    step.launch(dA, dB, dC, out, alpha=0.75, beta=-0.5)
    _check(out, A, B, C, 0.75, -0.5)


@pytest.mark.parametrize("step", [v11, v14], ids=["v11", "v14"])
def test_alignment_picks_the_kernel(step):
    """float4 where K % 4 and N % 4 and the bases allow it; scalar loads for a view starting 4 bytes in."""
    from numba import cuda

    def kernel(t, vec_a, vec_b):
        return step.kernel_for(t, vec_a, vec_b) if step is v11 else step.kernel_for(t, vec_a, vec_b, False)

    t = step.pick_tiles(20, 12, 16)  # on a GPU, the tuned pick for this shape's class
    A, B, C, dA, dB, dC, out = _device_operands((20, 12, 16), seed=2)
    kernel(t, True, True).last_launch = None
    step.launch(dA, dB, None, out)
    assert kernel(t, True, True).last_launch is not None
    _check(out, A, B, None, 1.0, 0.0)

    flat = cuda.to_device(np.concatenate([np.zeros(1, np.float32), A.ravel()]))
    shifted = flat[1:].reshape(A.shape)  # C-contiguous, K % 4 == 0, but its rows start 4 bytes off 16
    assert not step.aligned(shifted) and step.aligned(dA)
    kernel(t, False, True).last_launch = None
    step.launch(shifted, dB, dC, out, alpha=2.0, beta=1.0)
    assert kernel(t, False, True).last_launch is not None
    _check(out, A, B, C, 2.0, 1.0)

    A, B, C, dA, dB, dC, out = _device_operands((9, 13, 7), seed=3)  # K and N odd: scalar on both sides
    t = step.pick_tiles(9, 13, 7)
    kernel(t, False, False).last_launch = None
    step.launch(dA, dB, dC, out, alpha=1.0, beta=2.0)
    assert kernel(t, False, False).last_launch is not None
    _check(out, A, B, C, 1.0, 2.0)


@pytest.mark.parametrize(
    "size,split",
    [((33, 17, 65), 3), ((5, 7, 40), 4), ((31, 36, 9), 2), ((1, 1, 1), 1), ((20, 12, 64), 8)],
    ids=lambda p: "x".join(map(str, p)) if isinstance(p, tuple) else f"S{p}",
)
def test_split_k_slices_add_up(size, split):
    """Forced splits (the simulator's one SM would never choose them): slices end inside a BK step,
    some slices get dropped when rounded up, and beta * C is added once, not once per slice."""
    A, B, C, dA, dB, dC, out = _device_operands(size, seed=split)
    for kernel in v12._kernels.values():
        kernel.last_launch = None
    v12.launch_split(v12.TILES, split, dA, dB, dC, out, -1.25, 0.5)
    _check(out, A, B, C, -1.25, 0.5)
    launched = [(key[-1], k.last_launch) for key, k in v12._kernels.items() if k.last_launch is not None]
    slices = plan.slices(size[2], v12.TILES.BK, split)[1]
    assert [(sliced, launch.grid[2]) for sliced, launch in launched] == [(slices > 1, slices)]


def test_split_plan_fills_one_wave():
    """The docstring's arithmetic for an H200: 132 SMs, 2 blocks each, v10's 128 x 128 x 16 tiles."""

    def split_k(*mnk):
        p = plan.split_k(*mnk, tiles=DEFAULT, sms=132)
        return p["tiles"], p["split"], p["blocks"]

    assert split_k(1024, 1024, 1024) == (64, 4, 256)
    assert split_k(512, 512, 4096) == (16, 16, 256)
    assert split_k(128, 128, 65536) == (1, plan.MAX_SPLIT, plan.MAX_SPLIT)
    assert split_k(2048, 2048, 2048)[1] == split_k(4096, 4096, 4096)[1] == split_k(1, 1, 1)[1] == 1
    assert split_k(100, 100, 40)[1] == 1  # 3 steps of K: too few to share
    for m, n, k in ((1000, 777, 333), (4097, 1, 4097), (1, 1, 10**6)):
        p = plan.split_k(m, n, k, tiles=DEFAULT, sms=132)
        assert p["blocks"] <= p["slots"] or p["split"] == 1
        assert (p["split"] - 1) * p["k_slice"] < k <= p["split"] * p["k_slice"]  # no empty slice


GPU_EDGE_SHAPES = (
    (1, 1, 1),
    (4095, 4095, 4095),
    (4097, 4097, 4097),
    (3000, 5000, 2000),
    (1009, 1013, 1019),
    (127, 4099, 131),
    (4099, 3, 8191),
    (1024, 1024, 1024),
    (509, 509, 4093),
    (64, 64, 65537),
)


@pytest.mark.skipif(zoo.SIMULATOR, reason="large shapes need the GPU")
@pytest.mark.parametrize("step", [v11, v12, v13, v14], ids=["v11", "v12", "v13", "v14"])
@pytest.mark.parametrize("size", GPU_EDGE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_large_irregular_shapes_on_the_gpu(step, size, request):
    A, B, C, dA, dB, dC, out = _device_operands(size, seed=sum(size) % 1000)
    request.getfixturevalue("no_copies")
    step.launch(dA, dB, dC, out, alpha=1.0, beta=0.5)
    _check(out, A, B, C, 1.0, 0.5)


def test_shape_classes_follow_the_tile_count_and_the_narrow_side():
    assert tiles.SHAPE_CLASSES.of(1024, 1024, 1024, sms=132) == "small"  # 64 tiles of 128 x 128 for 132 SMs
    assert tiles.SHAPE_CLASSES.of(2048, 2048, 2048, sms=132) == "large"  # 256 tiles
    assert tiles.SHAPE_CLASSES.of(4097, 4097, 4097, sms=132) == "large"
    assert tiles.SHAPE_CLASSES.of(256, 4096, 4096, sms=132) == "skinny"
    assert tiles.SHAPE_CLASSES.of(4096, 200, 64, sms=132) == "skinny"
    assert {tiles.SHAPE_CLASSES.of(*shape, sms=132) for shape in tiles.SHAPE_CLASSES.values()} == set(
        tiles.SHAPE_CLASSES
    )
    assert tiles.SHAPE_CLASSES.of(*tiles.SHAPE_CLASSES["small"], sms=132) == "small"
    # what `zoo tune` reads from the sweep's module: the same classes
    assert tune.SHAPE_CLASSES is tiles.SHAPE_CLASSES


def test_waves_count_tiles_against_resident_blocks():
    count = 33 * 33  # 4097^2 in 128 x 128 tiles
    assert tiles.waves(4097, 4097, DEFAULT, 2, sms=132) == (count, count / 264, (count / 264) / 5)
    assert tiles.waves(1024, 1024, DEFAULT, 2, sms=132)[0] == 64


def test_tiles_for_reads_each_class_and_the_old_single_shape_table(tmp_path, monkeypatch):
    import json

    table = tmp_path / "sgemm.json"
    monkeypatch.setattr(tiles, "path", lambda: table)
    monkeypatch.setattr(tiles, "cache_path", lambda: tmp_path / "no-cache.json")
    monkeypatch.setattr(tiles, "sm_count", lambda: 132)  # an H200's: the simulator's own count is smaller
    small = DEFAULT._replace(BM=64, BN=64, WM=32, WN=32, WN_ITER=1)
    row = lambda t: {"tiles": t._asdict(), "ms": 1.0}  # noqa: E731
    table.write_text(json.dumps({"classes": {"small": {"best": row(small)}, "large": {"best": row(DEFAULT)}}}))
    tiles.table.cache_clear()
    try:
        assert tiles.tiles_for(1024, 1024, 1024) == small and tiles.tiles_for(4096, 4096, 4096) == DEFAULT
        assert tiles.best_tiles("small") == small and tiles.best_tiles("large") == DEFAULT
        assert tiles.best_tiles("skinny") is None and tiles.tiles_for(256, 4096, 4096) == tiles.SMALL  # the default
        table.write_text(json.dumps({"size": 4096, "best": row(small)}))  # before classes: the large class's
        tiles.table.cache_clear()
        assert tiles.best_tiles("large") == small and tiles.best_tiles("small") is None
    finally:
        tiles.table.cache_clear()


def test_steps_read_the_tune_table_on_first_use_only():
    """Loading the steps reads no tune table and loads no host tooling (zoo.bench.results finds the table for the
    sweep)."""
    import subprocess
    import sys

    code = (
        "import sys, zoo\n"
        "[v.module for v in zoo.family('sgemm')]\n"
        "from zoo.kernels.sgemm import tiles\n"
        "print(tiles.table.cache_info().misses, 'zoo.bench.results' in sys.modules,"
        " 'zoo.bench.harness' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["0", "False", "False"]


def test_v11_takes_the_matrices_unreshaped(monkeypatch):
    """v11's launch passes the 2-D arrays themselves (no reshaped views, which cost host time per call)."""
    from numba import cuda

    A, B, C = operands(IRREGULAR, seed=3)
    seen = []
    kernel = v11.kernel_for(v11.TILES, False, False)
    real = type(kernel).__getitem__

    def spy(self, config):
        launcher = real(self, config)
        return lambda *args: (seen.append([getattr(a, "ndim", None) for a in args[:4]]), launcher(*args))[1]

    monkeypatch.setattr(type(kernel), "__getitem__", spy)
    out = cuda.to_device(np.full(C.shape, np.nan, np.float32))
    v11.launch(cuda.to_device(A), cuda.to_device(B), cuda.to_device(C), out, 0.5, -2.0)
    assert seen == [[2, 2, 2, 2]]
    ok, _, detail = harness.compare(out.copy_to_host(), SGEMM.reference(A, B, C, alpha=0.5, beta=-2.0), SGEMM.TOLERANCE)
    assert ok, detail


SMALL_CLASS_TILES = (
    DEFAULT._replace(BM=64, BN=128, WM=64, WN=32, WN_ITER=2),  # the H200's small/skinny pick
    DEFAULT._replace(BM=64, BN=64, BK=32, WM=32, WN=32, WN_ITER=1),
)


@pytest.mark.parametrize("shape", SMALL_CLASS_TILES, ids=lambda t: "-".join(map(str, t)))
@pytest.mark.parametrize("run", ["v11", "v12-split2", "v14", "v14-split2"])
def test_edge_steps_take_the_small_class_tiles(shape, run):
    """v11, v12 and v14 launch whatever tiles the tune table picks for a shape class: each must be right."""
    from numba import cuda

    A, B, C = operands(IRREGULAR, seed=13)
    out = cuda.to_device(np.full(C.shape, np.nan, np.float32))
    dA, dB, dC = (cuda.to_device(x) for x in (A, B, C))
    if run == "v11":
        v11.launch_with(shape, dA, dB, dC, out, 0.5, -2.0)
    elif run == "v14":
        v14.launch_split(shape, 1, dA, dB, dC, out, 0.5, -2.0)
    else:
        (v12 if run == "v12-split2" else v14).launch_split(shape, 2, dA, dB, dC, out, 0.5, -2.0)
    ok, err, detail = harness.compare(
        out.copy_to_host(), SGEMM.reference(A, B, C, alpha=0.5, beta=-2.0), SGEMM.TOLERANCE
    )
    assert ok, detail


def test_zoo_tune_with_a_size_tunes_that_sizes_class_at_that_size(monkeypatch):
    """The GPU path of ``zoo tune sgemm --size``, with the timing replaced: which shapes reach the sweep."""
    from zoo import cli

    monkeypatch.setattr(tiles, "sm_count", lambda: 132)  # product_class's
    asked = tune_with_sizes(monkeypatch, tune, "sgemm", ["1024", "2000x5000x64", "200x4096x4096"])
    assert asked == {"small": (1024, 1024, 1024), "large": (2000, 5000, 64), "skinny": (200, 4096, 4096)}
    with pytest.raises(cli.UsageError, match="both of class small"):
        tune_with_sizes(monkeypatch, tune, "sgemm", ["1024", "300x5000x64"])  # 120 tiles: small


# -- v13: whole waves unsplit, the leftover tile rows split along K -------------------------------------


def test_last_wave_plan_on_an_h200():
    """The docstring's arithmetic: 132 SMs, 2 blocks each, 128 x 128 x 16 tiles."""

    def last_wave(*mnk, gflops=41_476):  # the large class's rate in the H200's tune table
        p = plan.last_wave(*mnk, tiles=DEFAULT, sms=132, gflops=gflops)
        return p["rows"], p["split"], p["waves"], p["v11_waves"]

    assert last_wave(4097, 4097, 4097) == (32, 8, 4.125, 5)  # four whole waves, then one tile row split 8 ways
    assert plan.last_wave(4097, 4097, 4097, DEFAULT, 132, 41_476)["saved_us"] == pytest.approx(0.875 * 854, rel=1e-3)
    assert last_wave(4096, 4096, 4096) == (32, 1, 4, 4)  # whole waves already: v11 as it is
    assert last_wave(8192, 8192, 8192) == (64, 1, 16, 16)
    assert last_wave(3000, 5000, 2000)[:2] == (24, 1)  # 200 leftover tiles: no room to split them
    # the same waves saved, but worth less kernel time than the split costs the host: v11
    assert last_wave(1025, 4097, 256) == (9, 1, 2, 2) and last_wave(1025, 4097, 256, gflops=0) == (8, 4, 1.25, 2)
    assert last_wave(1024, 1024, 1024) == (8, 1, 1, 1)
    assert last_wave(1024, 1024, 1024, gflops=0) == (0, 4, 0.25, 1)  # no rate: by waves, v12's split of every tile
    assert last_wave(512, 512, 65536) == (0, 16, 0.0625, 1)  # a long K: the split is worth its host time
    for m, n, k in ((4097, 4097, 4097), (5000, 3000, 100), (1, 1, 1), (4225, 128, 4096), (8193, 8193, 64)):
        p = plan.last_wave(m, n, k, tiles=DEFAULT, sms=132, gflops=41_476)
        assert not p["sub_wave"]
        assert p["waves"] <= p["v11_waves"]
        assert p["split"] == 1 or p["waves"] <= p["v11_waves"] - plan.WORTH
        assert p["rows"] * -(-n // DEFAULT.BN) <= p["v11_waves"] * p["slots"]


def test_a_grid_of_one_block_an_sm_splits_into_long_slices():
    """SUBWAVE_MIN_STEPS: the skinny shape's 128 tiles of 64 x 128 on 132 SMs split in two slices of 128 steps, though
    the waves promise less than SPLIT_HOST_US; 1024^3 (64 steps) and grids of more blocks than SMs stay whole."""

    def last_wave(*mnk, gflops=47_000):
        p = plan.last_wave(*mnk, tiles=tiles.SMALL, sms=132, gflops=gflops)
        return p["rows"], p["split"], p["sub_wave"]

    assert plan.last_wave(256, 4096, 4096, tiles.SMALL, 132, 47_000)["saved_us"] < plan.SPLIT_HOST_US
    assert last_wave(256, 4096, 4096) == (0, 2, True)
    assert last_wave(512, 512, 4096) == (0, 2, True)  # 32 tiles: S = 8 by slots, 2 by the slices' length
    assert last_wave(1024, 1024, 1024) == (16, 1, False)  # slices of 32 steps: too short
    assert last_wave(512, 4096, 4096) == (8, 1, False)  # 256 tiles: more blocks than SMs
    assert last_wave(256, 4096, 4096, gflops=0) == (0, 2, False)  # by waves alone the split is taken anyway


@pytest.mark.parametrize(
    "size,rows,split",
    [
        ((70, 45, 40), 1, 3),
        ((70, 45, 40), 0, 2),
        ((97, 33, 17), 2, 4),
        ((65, 1, 9), 2, 2),
        ((33, 7, 64), 1, 8),
        ((41, 36, 24), 1, 3),  # N a multiple of 4: v14's slices add four results with one 128-bit atomic
    ],
    ids=lambda p: "x".join(map(str, p)) if isinstance(p, tuple) else str(p),
)
@pytest.mark.parametrize("step", [v13, v14], ids=["v13", "v14"])
def test_last_wave_split_adds_up(size, rows, split, step, request):
    """Forced plans (the simulator's SM count would never make them): the cut lands inside the matrices,
    at their last tile row, or at row 0; beta * C is counted once on each side of the cut; a second call
    into the same output gives the same result. v13 runs v12's kernel in both flavours, v14 its own
    (the unrolled hot loop), and only those."""
    own, other = (v12, v14) if step is v13 else (v14, v12)
    A, B, C, dA, dB, dC, out = _device_operands(size, seed=rows + 7 * split)
    request.getfixturevalue("no_copies")
    for kernel in [*own._kernels.values(), *other._kernels.values(), *v11._kernels.values()]:
        kernel.last_launch = None
    for _ in range(2):
        step.launch_plan({"rows": rows, "split": split}, step.TILES, dA, dB, dC, out, 0.75, -1.5)
        _check(out, A, B, C, 0.75, -1.5)
    step.launch_plan({"rows": rows, "split": split}, step.TILES, dA, dB, None, out, 2.0, 0.0)
    _check(out, A, B, None, 2.0, 0.0)
    sliced = {
        key[3] for key, kernel in own._kernels.items() if kernel.last_launch is not None
    }  # (tiles, vec_a, vec_b, sliced, ...)
    tile_rows = -(-size[0] // step.TILES.BM)  # the GPU's tiles can hold the whole matrix in the whole waves
    expected = ({False} if rows > 0 else set()) | ({True} if rows < tile_rows else set())
    assert sliced == expected  # the whole waves unsplit, the leftover sliced
    others = [*other._kernels.values(), *v11._kernels.values()]
    assert all(kernel.last_launch is None for kernel in others)


def test_tuned_gflops_is_the_best_agreeing_rate_of_those_tiles(monkeypatch):
    row = lambda shape, gflops, agrees=True: {"tiles": shape._asdict(), "gflops": gflops, "agrees": agrees}
    other = DEFAULT._replace(BK=8)
    data = {
        "classes": {
            "large": {"rows": [row(DEFAULT, 40_000.0), row(other, 45_000.0)]},
            "small": {"rows": [row(DEFAULT, 41_000.0), row(DEFAULT, 90_000.0, agrees=False)]},
        }
    }
    monkeypatch.setattr(tiles, "table", lambda: (data, {}))
    tiles.tuned_gflops.cache_clear()
    try:
        assert tiles.tuned_gflops(DEFAULT) == 41_000.0  # the wrong answer's rate does not count
        assert tiles.tuned_gflops(DEFAULT._replace(BM=64)) is None
    finally:
        tiles.tuned_gflops.cache_clear()


def test_without_a_table_each_class_gets_its_default_and_the_cache_comes_first(tmp_path, monkeypatch):
    import json

    monkeypatch.setattr(tiles, "path", lambda: tmp_path / "repo.json")
    monkeypatch.setattr(tiles, "cache_path", lambda: tmp_path / "cache.json")
    monkeypatch.setattr(tiles, "sm_count", lambda: 132)
    tiles.table.cache_clear()
    try:
        assert tiles.tiles_for(1024, 1024, 1024) == tiles.SMALL  # 64 tiles of 128 x 128 for 132 SMs: small
        assert tiles.tiles_for(256, 4096, 4096) == tiles.SMALL  # skinny
        assert tiles.tiles_for(4096, 4096, 4096) == tiles.tiles_for(2048, 2048, 2048) == DEFAULT  # large
        monkeypatch.setattr(tiles, "sm_count", lambda: 40)  # a T4: 64 tiles of 128 x 128 fill its 40 SMs
        assert tiles.tiles_for(1024, 1024, 1024) == DEFAULT
        row = lambda t: {"tiles": t._asdict(), "ms": 1.0}  # noqa: E731
        (tmp_path / "repo.json").write_text(json.dumps({"classes": {"large": {"best": row(tiles.SMALL)}}}))
        (tmp_path / "cache.json").write_text(json.dumps({"classes": {"large": {"best": row(DEFAULT)}}}))
        tiles.table.cache_clear()
        assert tiles.best_tiles("large") == DEFAULT  # the user's own sweep wins over the repository's table
        (tmp_path / "cache.json").unlink()
        tiles.table.cache_clear()
        assert tiles.best_tiles("large") == tiles.SMALL
    finally:
        tiles.table.cache_clear()


def test_a_table_names_its_kernel_and_one_from_before_reads_the_same(tmp_path, monkeypatch):
    """Rows name the kernel they timed (tiles.KERNEL), not a step: .ci/sgemm-tune-names adds the name to a table
    written before, changing no figure, and both forms give the same tiles. A row of another kernel is not taken."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    old = {"classes": {"large": {"shape": [4096, 4096, 4096], "best": {"tiles": tiles.SMALL._asdict(), "ms": 1.0}}}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    script = Path(__file__).resolve().parents[2] / ".ci" / "sgemm-tune-names"
    subprocess.run([sys.executable, str(script), str(tmp_path / "old.json")], check=True, capture_output=True)
    new = json.loads((tmp_path / "old.json").read_text())
    assert new["classes"]["large"]["best"] == {"kernel": tiles.KERNEL, **old["classes"]["large"]["best"]}
    monkeypatch.setattr(tiles, "cache_path", lambda: tmp_path / "none.json")
    monkeypatch.setattr(tiles, "sm_count", lambda: 132)
    try:
        for table, expected in ((old, tiles.SMALL), (new, tiles.SMALL)):
            (tmp_path / "repo.json").write_text(json.dumps(table))
            monkeypatch.setattr(tiles, "path", lambda: tmp_path / "repo.json")
            tiles.table.cache_clear()
            assert tiles.best_tiles("large") == expected
        new["classes"]["large"]["best"]["kernel"] = "some_other_kernel"
        (tmp_path / "repo.json").write_text(json.dumps(new))
        tiles.table.cache_clear()
        assert tiles.best_tiles("large") is None
    finally:
        tiles.table.cache_clear()


def test_class_defaults_are_valid_tiles_that_fit_any_supported_gpu():
    for t in tiles.CLASS_DEFAULTS.values():
        assert tune.valid(t)
        shared = 4 * 2 * (t.BK * (t.BM + 4) + t.BK * t.BN)  # v09's two stages of A (padded) and B, in bytes
        assert shared <= 48 * 1024 and t.threads <= 1024


def test_expected_rate_comes_from_the_sms_the_clock_and_the_fp32_lanes(monkeypatch):
    import zoo.device

    monkeypatch.setattr(zoo.device, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(zoo.device, "properties", lambda: {"multiprocessors": 132, "clock_khz": 1_980_000})
    h100 = tiles.expected_gflops()
    assert h100 == pytest.approx(0.7 * 132 * 128 * 2 * 1.98e9 / 1e9)  # 46.8 TFLOP/s of a 66.9 peak
    monkeypatch.setattr(zoo.device, "compute_capability", lambda: (7, 5))
    monkeypatch.setattr(zoo.device, "properties", lambda: {"multiprocessors": 40, "clock_khz": 1_590_000})
    assert tiles.expected_gflops() == pytest.approx(0.7 * 40 * 64 * 2 * 1.59e9 / 1e9)  # a T4: 64 lanes an SM
    monkeypatch.setattr(zoo.device, "compute_capability", lambda: None)
    assert tiles.expected_gflops() is None  # the simulator: the plans go by waves alone


def test_the_last_wave_plan_splits_only_where_the_time_it_saves_exceeds_the_host_cost():
    h100 = 0.7 * 132 * 128 * 2 * 1.98  # GFLOP/s a tuned step reaches on an H100 without a table (46,835)
    assert plan.last_wave(4097, 4097, 4097, DEFAULT, sms=132, gflops=h100)["split"] > 1  # a fifth wave of 12%
    assert plan.last_wave(4096, 4096, 4096, DEFAULT, sms=132, gflops=h100)["split"] == 1  # whole waves
    assert plan.last_wave(1024, 1024, 1024, tiles.SMALL, sms=132, gflops=h100)["split"] == 1  # saves too little


# -- v15: TF32 tensor cores -------------------------------------------------------------------------


def tf32_rna(x):
    """x rounded to TF32, to nearest with ties away from zero (cvt.rna), by NumPy on the bits."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    finite = (bits & 0x7F800000) != 0x7F800000
    return np.where(finite, (bits + 0x1000) & 0xFFFFE000, bits).astype(np.uint32).view(np.float32)


@jit(device=True)
def tf32_word(x, rounded):
    return to_tf32(x) if rounded else as_uint32(x)  # rounded by cvt.rna, or the float32's bits as they are


@jit
def one_tf32_mma(A, B, C, D, rounded):
    """D = A @ B + C for one 16 x 8 x 8 tile, every element placed by the spec's fragment table."""
    lane = cuda.threadIdx.x
    g, t = lane // 4, lane % 4
    d0, d1, d2, d3 = mma_tf32_f32(
        tf32_word(A[g, t], rounded),
        tf32_word(A[g + 8, t], rounded),
        tf32_word(A[g, t + 4], rounded),
        tf32_word(A[g + 8, t + 4], rounded),
        tf32_word(B[t, g], rounded),
        tf32_word(B[t + 4, g], rounded),
        C[g, 2 * t],
        C[g, 2 * t + 1],
        C[g + 8, 2 * t],
        C[g + 8, 2 * t + 1],
    )
    D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1] = d0, d1, d2, d3


def _one_tf32_mma(A, B, C, rounded=True):
    D = np.full((16, 8), np.nan, np.float32)
    one_tf32_mma[1, 32](A, B, C, D, rounded)
    return D


def test_tf32_mma_follows_the_fragment_table():
    rng = np.random.default_rng(0)
    A, B = tf32_rna(rng.standard_normal((16, 8))), tf32_rna(rng.standard_normal((8, 8)))  # exact in TF32
    C = rng.standard_normal((16, 8)).astype(np.float32)
    ref = A.astype(np.float64) @ B.astype(np.float64) + C
    np.testing.assert_allclose(_one_tf32_mma(A, B, C), ref, rtol=1e-5, atol=1e-5)


def test_tf32_mma_with_a_one_hot_a_picks_rows_of_b():
    """A = a single 1 at (i, k): D row i is B row k; a wrong lane or register shows up as the wrong row."""
    B = np.arange(64, dtype=np.float32).reshape(8, 8)
    C = np.zeros((16, 8), np.float32)
    for i, k in ((0, 0), (3, 5), (8, 1), (15, 7), (9, 4)):
        A = np.zeros((16, 8), np.float32)
        A[i, k] = 1
        expected = np.zeros((16, 8), np.float32)
        expected[i] = B[k]
        np.testing.assert_array_equal(_one_tf32_mma(A, B, C), expected)


def test_the_tensor_core_reads_19_bits_and_to_tf32_rounds_to_nearest():
    """1 + 0.75 ulp(TF32) enters the tensor core as 1 (its low 13 bits dropped), and as 1 + ulp once rounded;
    on a GPU this checks the hardware, in the simulator the emulation."""
    ulp = 2.0**-10
    A = np.zeros((16, 8), np.float32)
    A[:, 0] = np.float32(1 + 0.75 * ulp)
    B = np.zeros((8, 8), np.float32)
    B[0] = 1
    C = np.zeros((16, 8), np.float32)
    assert (_one_tf32_mma(A, B, C, rounded=False) == 1).all()
    assert (_one_tf32_mma(A, B, C, rounded=True) == np.float32(1 + ulp)).all()


@jit
def tf32_words(x, words):
    i = cuda.grid(1)
    if i < x.size:
        words[i] = to_tf32(x[i])


def test_to_tf32_is_cvt_rna():
    ulp = 2.0**-10
    x = np.array(
        [
            1,
            1 + 0.5 * ulp,
            -(1 + 0.5 * ulp),
            1 + 0.49 * ulp,
            1 + 1.5 * ulp,
            np.finfo(np.float32).max,
            np.inf,
            -np.inf,
            np.nan,
            1e-40,
            0,
        ],
        np.float32,
    )
    words = np.zeros(x.size, np.uint32)
    tf32_words[1, 32](x, words)
    got = words.view(np.float32)
    np.testing.assert_array_equal(got[:5], [1, 1 + ulp, -(1 + ulp), 1, 1 + 2 * ulp])  # ties away from zero
    assert np.isposinf(got[5])  # the largest float32 is nearer 2^128 than the largest TF32: it rounds up to inf
    assert np.isposinf(got[6]) and np.isneginf(got[7]) and np.isnan(got[8])  # inf and NaN pass
    np.testing.assert_array_equal(words, tf32_rna(x).view(np.uint32))
    assert not (words & 0x1FFF).any(), "a TF32 word has its low 13 bits clear"


@jit
def ldmatrix_float32(X, words):
    """ldmatrix.x4 on a 16 x 8 float32 tile (rows 12 floats apart): the A fragment of mma.m16n8k8.tf32."""
    tile = cuda.shared.array(192, np.float32, alignment=SHARED_ALIGN)  # 16 rows x 12
    lane = cuda.threadIdx.x
    for e in range(lane, 128, 32):
        tile[e // 8 * 12 + e % 8] = X[e // 8, e % 8]
    cuda.syncthreads()  # the tile is complete
    w0, w1, w2, w3 = ldmatrix_x4(tile, uint32(lane % 16 * 12 + lane // 16 * 4))  # rows 0-15, k 0-3 then 4-7
    words[lane, 0], words[lane, 1], words[lane, 2], words[lane, 3] = w0, w1, w2, w3


def test_ldmatrix_on_float32_gives_the_tf32_a_fragment():
    X = np.arange(128, dtype=np.float32).reshape(16, 8) + np.float32(0.25)
    words = np.zeros((32, 4), np.uint32)
    ldmatrix_float32[1, 32](X, words)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        expected = [X[g, t], X[g + 8, t], X[g, t + 4], X[g + 8, t + 4]]
        assert list(words[lane].view(np.float32)) == expected, f"lane {lane}"


def test_v15_has_its_own_tolerance_and_the_others_keep_the_familys():
    assert SGEMM["v15"].tolerance(4096) == v15.TOLERANCE == 1e-3
    assert SGEMM["v14"].tolerance(4096) == SGEMM.tolerance(4096) == SGEMM.TOLERANCE
    assert SGEMM.tolerance(4096, "cublas_tf32") == 1e-3 and SGEMM.tolerance(4096, "baseline") == SGEMM.TOLERANCE


@pytest.mark.parametrize("size", [SMALL], ids=lambda s: "x".join(map(str, s)))  # 70x129x31: test_kernels
def test_v15_is_the_product_of_the_rounded_inputs(size):
    """Against float64 v15 is off by TF32's rounding (about 3e-4); against the float64 product of the inputs
    rounded as cvt.rna rounds them it is off by float32 accumulation only. Truncated inputs (no to_tf32)
    would be 1e-4 off that model."""
    A, B, C = operands(size, seed=21)
    got = SGEMM["v15"](A, B, C, alpha=0.5, beta=-1.0)
    rounded = 0.5 * (tf32_rna(A).astype(np.float64) @ tf32_rna(B).astype(np.float64)) - C
    ok, err, detail = harness.compare(got, rounded, 1e-5)
    assert ok, detail
    exact_err = harness.relative_error(got, SGEMM.reference(A, B, C, alpha=0.5, beta=-1.0))
    assert 5e-5 < exact_err < 5e-4  # TF32's error, not float32's, and within v15's tolerance


def test_v15_tile_shapes():
    assert v15.valid(v15.Tiles()) and v15.Tiles().shared_bytes() == 107_520  # two blocks fit an SM's 227 KiB
    assert v15.valid(v15.Tiles(64, 64, 32, 32, 32, 4))
    assert not v15.valid(v15.Tiles(128, 80, 32, 64, 40))  # BN not a multiple of 32: B loads would conflict
    assert not v15.valid(v15.Tiles(128, 128, 24, 64, 64))  # an odd number of 8-wide slices
    assert not v15.valid(v15.Tiles(256, 256, 32, 64, 64, 4))  # beyond 227 KiB
    with pytest.raises(ValueError, match="not valid"):
        v15.build(v15.Tiles(128, 128, 8, 64, 64))


def _run_v15(tiles, size, seed, alpha=1.0, beta=0.0):
    A, B, C = operands(size, seed)
    out = cuda.to_device(np.full(C.shape, np.nan, np.float32))
    v15.launch_with(v15.build(tiles), tiles, cuda.to_device(A), cuda.to_device(B), cuda.to_device(C), out, alpha, beta)
    ref = SGEMM.reference(A, B, C, alpha=alpha, beta=beta)
    return harness.compare(out.copy_to_host(), ref, v15.TOLERANCE)


def test_v15_pipeline_rotates_its_buffers():
    """One-warp tiles and more K steps than stages: every buffer is refilled while the others are read."""
    for stages, steps in ((2, 5), (3, 5), (3, 1), (4, 7)):
        tiles = v15.Tiles(BM=16, BN=32, BK=16, WM=16, WN=32, STAGES=stages)
        ok, err, detail = _run_v15(tiles, (16, 32, 16 * steps - 5), seed=stages, alpha=2.0, beta=0.5)
        assert ok, f"{stages} stages, {steps} steps: {detail}"


def test_v15_grouped_block_order_covers_every_tile_once():
    """One-warp tiles on 18 x 2 blocks: a whole group of 16 block rows, then a short one of 2."""
    tiles = v15.Tiles(BM=16, BN=32, BK=16, WM=16, WN=32, STAGES=2)
    ok, err, detail = _run_v15(tiles, (16 * (v15.GROUP + 2), 64, 16), seed=9)
    assert ok, detail  # a tile taken twice leaves another NaN


@pytest.mark.skipif(
    machine_code._tool("ptxas") is None or machine_code._tool("nvdisasm") is None,
    reason="ptxas or nvdisasm missing: pip install -e '.[test]'",
)
def test_v15_sass_has_the_tf32_tensor_core_and_no_local_memory():
    r = run_zoo("show", "sgemm", "v15", "--sass", "--summary")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "HMMA 128" in r.stdout and "LDSM 32 16" in r.stdout, r.stdout  # per BK = 32 step: 4 x 32 mma, 4 x 4 ldmatrix
    assert "0 B spill stores, 0 B spill loads, 0 B stack" in r.stdout, r.stdout
    sass = run_zoo("show", "sgemm", "v15", "--sass").stdout
    for opcode in ("HMMA.1688.F32.TF32", "LDSM.16.M88.4", "LDGSTS.E.BYPASS", "DEPBAR"):
        assert opcode in sass, f"no {opcode} in v15's SASS"
    assert "LDL" not in sass and "STL" not in sass


@pytest.mark.skipif(zoo.SIMULATOR, reason="large shapes need the GPU")
@pytest.mark.parametrize("size", [(1, 1, 1), (4095, 4097, 1000), (1009, 1013, 1019), (4096, 4096, 4096)])
def test_v15_at_large_irregular_shapes_on_the_gpu(size):
    A, B, C = operands(size, seed=sum(size) % 1000)
    got = SGEMM["v15"](A, B, C, alpha=1.0, beta=0.5)
    ok, err, detail = harness.compare(got, SGEMM.reference(A, B, C, alpha=1.0, beta=0.5), v15.TOLERANCE)
    assert ok, detail


# -- v16: TF32 on wgmma ------------------------------------------------------------------------------------------
def test_v16_packs_b_transposed_into_whole_tiles_once():
    """pack: B^T (N x K) zero-padded to whole BN x BK tiles, A and C as they are; a plain call's inputs are packed on
    its first call with a B and the copy reused after (Variant.prepared, asked directly: no kernel runs)."""
    A, B, C = operands((33, 40, 50), seed=5)
    a, b_t, c = v16.pack(A, B, C)
    assert a is A and c is C and b_t.shape == (256, 64) and b_t.flags.c_contiguous
    np.testing.assert_array_equal(b_t[:40, :50], B.T)
    assert not b_t[40:].any() and not b_t[:, 50:].any()
    prepared = SGEMM["v16"].prepared
    prepared.clear()
    misses, hits = prepared.misses, prepared.hits
    first, again = prepared((A, B)), prepared((A, B))
    assert (prepared.misses - misses, prepared.hits - hits) == (1, 1) and again[1] is first[1]


def test_v16_truncates_to_tf32_where_v15_rounds():
    """wgmma reads float32 words and ignores their 13 low bits: v16 is the product of the truncated inputs, to float32
    accumulation, where v15 (cvt.rna) is that of the rounded ones; both are TF32's error off float64, under v16's
    own tolerance."""
    A, B, C = operands(SMALL, seed=22)
    got = SGEMM["v16"](A, B, C, alpha=0.5, beta=-1.0)

    def truncated(x):
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)

    ok, err, detail = harness.compare(got, 0.5 * (truncated(A) @ truncated(B)) - C, 1e-5)
    assert ok, detail
    exact_err = harness.relative_error(got, SGEMM.reference(A, B, C, alpha=0.5, beta=-1.0))
    assert 5e-5 < exact_err < v16.TOLERANCE == SGEMM["v16"].tolerance(4096)


def test_v16_refuses_what_its_uint32_indices_cannot_reach():
    A, B = np.empty((65536, 1), np.float32), np.empty((1, 65536), np.float32)  # out: 2^32 elements
    with pytest.raises(OutOfRange, match="2\\^32"):
        SGEMM["v16"].validate(A, B)


@pytest.mark.skipif(zoo.SIMULATOR, reason="large shapes need the GPU")
@pytest.mark.parametrize("size", [(1, 1, 1), (1025, 2047, 1029), (129, 4099, 257), (4096, 4096, 4096)])
def test_v16_at_large_irregular_shapes_on_the_gpu(size):
    A, B, C = operands(size, seed=sum(size) % 1000)
    got = SGEMM["v16"](A, B, C, alpha=1.0, beta=0.5)
    ref = SGEMM.reference(A, B, C, alpha=1.0, beta=0.5)
    # Each element within the worst case of truncated operands: a product off by under 2^-9 of itself (10 mantissa
    # bits kept of each factor), float32 sums by K 2^-24 of |A||B|, beta C and the store by 2^-23 of themselves
    k = size[2]
    magnitude = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
    bound = (2.0**-9 + k * 2.0**-24) * magnitude + 2.0**-23 * (0.5 * np.abs(C) + np.abs(ref))
    assert np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) / bound)
    if min(size) > 1:  # the norm-wise tolerance models a sum over many elements; one element has no such average
        ok, err, detail = harness.compare(got, ref, v16.TOLERANCE)
        assert ok, detail


@pytest.mark.skipif(zoo.SIMULATOR, reason="needs a GPU: cuBLAS")
def test_the_cublas_tf32_row_is_tf32_and_leaves_float32_alone():
    import cupy
    from cupy._core import _routines_linalg as linalg

    A, B = SGEMM.make_inputs(1024, seed=4)
    ref = SGEMM.reference(A, B)
    before = linalg.get_compute_type(np.float32)
    out = cupy.full((1024, 1024), np.nan, np.float32)
    SGEMM.EXTRA_BASELINES["cublas_tf32"](cupy.asarray(A), cupy.asarray(B), out)
    assert 1e-4 < harness.relative_error(cupy.asnumpy(out), ref) < SGEMM.tolerance(1024, "cublas_tf32")
    assert linalg.get_compute_type(np.float32) == before
    SGEMM.baseline(cupy.asarray(A), cupy.asarray(B), out)  # the float32 baseline stays float32
    assert harness.relative_error(cupy.asnumpy(out), ref) < 1e-5
