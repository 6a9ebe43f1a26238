"""Softmax beyond the generic checks: safety at large magnitudes, rows summing to 1, the online merge rule,
cached temporaries, and the register steps' choice of layout, width and fallback."""

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.errors import OutOfRange
from zoo.kernels.softmax import v01_four_kernels, v04_online

SOFTMAX = zoo.family("softmax")
REAL = [v for v in SOFTMAX.variants if not v.demonstration]


def _run(variant, x):
    out = np.full(x.shape, np.nan, np.float32)  # poisoned: an unwritten element stays NaN
    return variant(x, out=out)


@pytest.mark.parametrize("variant", REAL, ids=lambda v: v.name)
def test_large_magnitudes_give_finite_rows_that_sum_to_one(variant):
    x = np.array(
        [
            [1e4, 0.0, -1e4, 1e4, 5.0],  # the max twice: half the mass each
            [-1e4, -1e4, -1e4, -1e4, -1e4],  # all equal and very negative: uniform, not 0 / 0
            [-1e4, 3.0, 2.0, -1e4, 1.0],
            [88.0, 89.0, 90.0, 0.0, -88.0],
        ],
        np.float32,
    )  # expf(89) alone overflows float32
    y = _run(variant, x)
    assert np.isfinite(y).all(), f"{variant.name}: inf or NaN at large magnitudes"
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(y, SOFTMAX.reference(x), rtol=1e-5, atol=1e-7)
    assert y[0, 0] == y[0, 3] == pytest.approx(0.5) and y[0, 2] == 0.0
    assert (y[1] == np.float32(0.2)).all()


@pytest.mark.parametrize("variant", REAL, ids=lambda v: v.name)
def test_one_column_is_all_ones(variant):
    x = np.array([[1e4], [-1e4], [0.5]], np.float32)
    assert (_run(variant, x) == 1.0).all()


@pytest.mark.parametrize("variant", REAL, ids=lambda v: v.name)
def test_second_call_with_new_shapes_and_inputs(variant):
    # v01's temporaries are cached by element count: 2 x 12 then 3 x 8 share a buffer, then 1 x 41.
    for size, seed in (((2, 12), 1), ((3, 8), 2), ((1, 41), 3), ((2, 12), 4)):
        (x,) = SOFTMAX.make_inputs(size, seed, kind="large")
        y = _run(variant, x)
        np.testing.assert_allclose(
            y, SOFTMAX.reference(x), rtol=1e-5, atol=1e-7, err_msg=f"{variant.name} at {size} (seed {seed})"
        )


def test_four_kernels_reuse_their_temporaries():
    (x,) = SOFTMAX.make_inputs((1, 20), 5)
    SOFTMAX["v01"](x)
    from zoo.runtime.buffers import _BUFFERS

    before = {k: id(v) for k, v in _BUFFERS.items() if k[0].startswith("softmax_")}
    SOFTMAX["v01"](x)
    after = {k: id(v) for k, v in _BUFFERS.items() if k[0].startswith("softmax_")}
    assert before and before == after
    assert v01_four_kernels.BLOCK & (v01_four_kernels.BLOCK - 1) == 0  # the tree halves it


def _merge(*args):
    fn = getattr(v04_online.merge, "py_func", v04_online.merge)  # on a GPU, the Python function
    return fn(*(np.float32(a) for a in args))


def _state(values):
    """(max, sum of exp(v - max)) in float64: what the online pass computes for a run of values."""
    values = np.asarray(values, np.float64)
    return values.max(), np.exp(values - values.max()).sum()


def test_online_merge_rule_joins_two_halves():
    rng = np.random.default_rng(0)
    values = rng.standard_normal(40) * 10
    left, right = _state(values[:15]), _state(values[15:])
    m, d = _merge(*left, *right)
    want = _state(values)
    assert m == np.float32(want[0]) and d == pytest.approx(want[1], rel=1e-6)
    m2, d2 = _merge(*right, *left)
    assert m2 == m and d2 == pytest.approx(d, rel=1e-6)  # commutative up to rounding: any tree order


def test_an_empty_online_state_merges_away_without_nan():
    empty = (v04_online.LOWEST, 0.0)  # what a thread that read nothing holds
    assert _merge(*empty, 1e4, 1.0) == (np.float32(1e4), np.float32(1.0))
    assert _merge(-1e4, 2.0, *empty) == (np.float32(-1e4), np.float32(2.0))
    m, d = _merge(*empty, *empty)
    assert m == v04_online.LOWEST and d == 0.0  # (-inf, 0) here would give -inf - -inf = NaN


REGISTER_STEPS = pytest.mark.parametrize("step", ["v05", "v06"])  # v06: v05's kernels on 2-D arrays


@REGISTER_STEPS
def test_registers_plan_picks_a_warp_then_a_block_then_nothing(step):
    plan, block = SOFTMAX[step].module.plan, SOFTMAX[step].module.BLOCK
    assert plan(1, False) == (32, 1)
    assert plan(31, False) == (32, 1)
    assert plan(65, False) == (32, 4)  # 3 loads per lane, rounded up to a power of two
    assert plan(1000, True) == (32, 8)  # 250 float4 over 32 lanes
    assert plan(32 * 32, False) == (32, 32)
    assert plan(32 * 32 + 4, True) == (block, 1 << (-(-(32 * 32 + 4) // (4 * block)) - 1).bit_length())
    assert plan(block * 32, True) == (block, 8)
    assert plan(block * 32 + 1, False) is None  # past the registers: v04's path


@REGISTER_STEPS
@pytest.mark.parametrize("size,wide", [((3, 1000), True), ((3, 31), False), ((2, 2044), True), ((2, 1030), False)])
def test_registers_step_reads_float4_when_rows_allow(step, size, wide, launch_configs):
    cols = size[1]
    group, loads = SOFTMAX[step].module.plan(cols, wide)
    calls = launch_configs(SOFTMAX[step].module.build(group, loads, wide))
    (x,) = SOFTMAX.make_inputs(size, 6)
    np.testing.assert_allclose(_run(SOFTMAX[step], x), SOFTMAX.reference(x), rtol=1e-5, atol=1e-7)
    assert calls, f"{size} should run the ({group}, {loads}, wide={wide}) kernel"


@REGISTER_STEPS
def test_registers_step_reads_scalars_from_a_misaligned_view(step, launch_configs):
    rows, cols = 3, 40
    (x,) = SOFTMAX.make_inputs((rows, cols), 7)
    module = SOFTMAX[step].module
    scalar = launch_configs(module.build(*module.plan(cols, False), False))
    backing = cuda.to_device(np.concatenate([np.zeros(1, np.float32), x.ravel()]))
    view = backing[1:].reshape(rows, cols)  # 4 bytes past a 16-byte boundary
    out = cuda.device_array((rows, cols), np.float32)
    SOFTMAX[step](view, out=out)
    np.testing.assert_allclose(out.copy_to_host(), SOFTMAX.reference(x), rtol=1e-5, atol=1e-7)
    assert scalar, "a misaligned view must take the scalar kernel"


@pytest.mark.skipif(not zoo.SIMULATOR, reason="the launch spy sees the simulator's kernels only")
@REGISTER_STEPS
def test_registers_step_falls_back_to_online_past_its_registers(step, monkeypatch, launch_configs):
    module = SOFTMAX[step].module
    monkeypatch.setattr(module, "MAX_ELEMENTS", 1)  # 65 columns no longer fit
    calls = launch_configs(module.softmax_online)  # v04's kernel, copied into the step
    (x,) = SOFTMAX.make_inputs((3, 65), 8, kind="large")
    np.testing.assert_allclose(_run(SOFTMAX[step], x), SOFTMAX.reference(x), rtol=1e-5, atol=1e-7)
    assert calls == [(3, module.BLOCK)]


@pytest.mark.parametrize("variant", REAL, ids=lambda v: v.name)
def test_uint32_steps_refuse_2_to_the_31_elements(variant):
    huge = np.broadcast_to(np.float32(0), (1 << 16, 1 << 15))  # 2^31 elements, no memory behind them
    with pytest.raises(OutOfRange, match="fewer than 2\\^31"):
        variant.module.validate(huge)
    variant.module.validate(huge[:, :-1])


def test_large_kind_plants_magnitudes_in_every_row():
    (x,) = SOFTMAX.make_inputs((40, 7), 3, kind="large")
    assert (np.abs(x) == 1e4).any(axis=1).all()
    assert (x == 1e4).any() and (x == -1e4).any()
    (y,) = SOFTMAX.make_inputs((40, 7), 3)
    assert np.abs(y).max() < 10


def test_copy_ceiling_moves_the_same_bytes():
    assert SOFTMAX.bytes_moved((4096, 8192)) == 8 * 4096 * 8192
    assert SOFTMAX.bytes_moved(100) == 8 * 100 * 100
    assert "copy_ceiling" in SOFTMAX.baselines
    assert SOFTMAX.HEADLINE_SIZE in SOFTMAX.BENCH_SIZES
