"""Stencil beyond the generic checks: the zero boundary at every edge, filter shapes from 1 x 1 to rectangular,
a second call with another filter (the constant-memory steps must copy the new one in, not recompile), bad
filters refused before any launch, the separable steps' contract, the float4 path and its fallbacks."""

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.device import constant
from zoo.errors import OutOfRange
from zoo.kernels.stencil import separable_factors, v02_constant_filter, v06_float4

STENCIL = zoo.family("stencil")
STEPS = [v for v in STENCIL if not v.demonstration]
SEPARABLE = ("v05", "v06")  # the steps that run two 1-D passes


def _run(variant, image, weights):
    out = np.full(image.shape, np.nan, np.float32)
    return variant(image, weights, out=out)


def _close(got, image, weights):
    ref = STENCIL.reference(image, weights)
    return np.linalg.norm(got - ref) <= STENCIL.TOLERANCE * max(np.linalg.norm(ref), 1e-30)


def _separable(taps_y, taps_x, seed):
    rng = np.random.default_rng(seed)
    return np.outer(rng.standard_normal(taps_y), rng.standard_normal(taps_x)).astype(np.float32)


def _image(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def test_the_reference_is_the_definition_tap_by_tap():
    image, weights = _image((7, 9), 1), np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    expected = np.zeros(image.shape)
    for y in range(7):
        for x in range(9):
            for i in range(3):
                for j in range(5):
                    r, c = y + i - 1, x + j - 2
                    if 0 <= r < 7 and 0 <= c < 9:
                        expected[y, x] += float(weights[i, j]) * float(image[r, c])
    np.testing.assert_allclose(STENCIL.reference(image, weights), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
@pytest.mark.parametrize("shape", [(9, 70), (9, 68)], ids=["scalar-width", "float4-width"])
def test_zero_boundary_at_every_edge(variant, shape):
    # Ones through a 5 x 5 filter of ones: each output counts the taps inside the image, an exact integer.
    image, weights = np.ones(shape, np.float32), np.ones((5, 5), np.float32)
    got = _run(variant, image, weights)
    rows_in = np.minimum(np.arange(shape[0]) + 2, shape[0] - 1) - np.maximum(np.arange(shape[0]) - 2, 0) + 1
    cols_in = np.minimum(np.arange(shape[1]) + 2, shape[1] - 1) - np.maximum(np.arange(shape[1]) - 2, 0) + 1
    assert np.array_equal(got, np.outer(rows_in, cols_in).astype(np.float32))
    assert got[0, 0] == 9 and got[4, 4] == 25 and got[-1, -1] == 9 and got[0, 30] == 15


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
@pytest.mark.parametrize("taps", [(1, 1), (1, 5), (5, 1), (3, 7), (7, 3)], ids=lambda t: f"{t[0]}x{t[1]}")
def test_filter_shapes_from_one_tap_to_rectangles(variant, taps):
    image, weights = _image((11, 37), 3), _separable(*taps, seed=4)
    assert _close(_run(variant, image, weights), image, weights), f"{variant.name} with a {taps} filter"


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_a_1d_correlation_is_a_single_row(variant):
    signal, weights = _image((1, 50), 5), _separable(1, 7, seed=6)
    got = _run(variant, signal, weights)
    expected = np.correlate(np.pad(signal[0].astype(np.float64), 3), weights[0].astype(np.float64), mode="valid")
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_second_call_with_another_image_and_filter(variant):
    for shape, seed in (((6, 40), 1), ((13, 9), 2), ((6, 33), 3)):
        image, weights = _image(shape, seed), _separable(5, 5, seed=10 + seed)
        assert _close(_run(variant, image, weights), image, weights), f"{variant.name} at {shape} (seed {seed})"


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_more_row_tiles_than_grid_y_holds(variant, monkeypatch):
    monkeypatch.setattr(variant.module, "MAX_GRID_Y", 1)  # one block row: every block strides down all tile rows
    image, weights = _image((70, 9), 7), _separable(5, 5, seed=8)
    assert _close(_run(variant, image, weights), image, weights)


@pytest.mark.parametrize("width", [260, 258])
def test_several_float4_tiles_across(width):
    # v06's tiles are 128 columns wide: the other steps' 32-column tiles are cut by the test sizes already
    image, weights = _image((5, width), 9), _separable(5, 5, seed=10)
    assert _close(_run(STENCIL["v06"], image, weights), image, weights)


# -- constant memory -----------------------------------------------------------------------------------------------
def test_a_new_filter_is_copied_in_not_compiled(monkeypatch):
    copies = []
    original = constant.copy_to_symbol

    def spy(kernel, args, name, source):
        copies.append((name, source.copy_to_host() if hasattr(source, "copy_to_host") else np.asarray(source)))
        return original(kernel, args, name, source)

    monkeypatch.setattr(constant, "copy_to_symbol", spy)
    step, image = STENCIL["v02"], _image((6, 33), 11)
    _run(step, image, _separable(5, 5, seed=12))  # builds the 5 x 5 kernel if no test did yet
    built = v02_constant_filter.build.cache_info().misses
    for seed in (13, 14):  # new values, same shape: the same kernel, the new filter copied in before the launch
        weights = _separable(5, 5, seed=seed)
        assert _close(_run(step, image, weights), image, weights)
        assert copies[-1][0] == v02_constant_filter.FILTER and np.array_equal(copies[-1][1], weights)
    assert v02_constant_filter.build.cache_info().misses == built
    weights = _separable(3, 3, seed=15)  # a new shape is a new kernel, with a constant array of its own size
    assert _close(_run(step, image, weights), image, weights)
    assert v02_constant_filter.build.cache_info().misses in (built, built + 1)  # +1 unless a test built 3 x 3 first
    assert v02_constant_filter.build(1, 1) is not v02_constant_filter.build(2, 2)


def test_a_constant_array_refuses_a_source_of_another_size():
    kernel = v02_constant_filter.build(1, 1)  # its constant filter is 3 x 3
    args = (cuda.to_device(_image((4, 4), 0)), cuda.device_array((4, 4), np.float32))
    with pytest.raises(ValueError, match="constant array"):
        constant.copy_to_symbol(kernel, args, v02_constant_filter.FILTER, cuda.to_device(np.ones((2, 2), np.float32)))


@pytest.mark.skipif(not zoo.SIMULATOR, reason="on the GPU the array lives in each kernel's module")
def test_a_constant_array_in_the_simulator_is_filled_by_the_copy_and_read_only():
    read = constant.declare("test_stencil_constant", (2, 3), np.float32)
    constant.copy_to_symbol(None, (), "test_stencil_constant", cuda.to_device(np.full((2, 3), 7, np.float32)))
    assert (read() == 7).all() and not read().flags.writeable


# -- bad filters ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
@pytest.mark.parametrize(
    "weights,error,match",
    [
        (np.ones((4, 4), np.float32), ValueError, "odd sides"),
        (np.ones((5, 2), np.float32), ValueError, "odd sides"),
        (np.ones((19, 19), np.float32), ValueError, "at most 8"),
        (np.ones(5, np.float32), ValueError, "dimension"),
        (np.ones((5, 5), np.float64), TypeError, "float32"),
    ],
    ids=["4x4", "5x2", "19x19", "1-D", "float64"],
)
def test_bad_filters_are_refused_before_any_launch(variant, weights, error, match, no_launch):
    with pytest.raises(error, match=match):
        variant(_image((8, 8), 16), weights)


# -- the separable steps -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SEPARABLE)
def test_separable_steps_refuse_a_filter_of_rank_two(name, no_launch):
    weights = (np.outer([1, 2, 1], [1, 0, -1]) + np.outer([0, 1, 0], [0, 1, 0])).astype(np.float32)
    with pytest.raises(OutOfRange, match="separable"):
        STENCIL[name](_image((8, 8), 17), weights)
    with pytest.raises(OutOfRange, match="separable"):  # a device array is read back for the check
        STENCIL[name](cuda.to_device(_image((8, 8), 17)), cuda.to_device(weights))


def test_the_other_steps_take_a_filter_of_rank_two():
    weights = np.random.default_rng(18).standard_normal((5, 5)).astype(np.float32)
    image = _image((9, 20), 19)
    for variant in STEPS:
        if variant.name[:3] not in SEPARABLE:
            assert _close(_run(variant, image, weights), image, weights), variant.name


@pytest.mark.parametrize("name", SEPARABLE)
@pytest.mark.parametrize(
    "weights",
    [
        np.outer([1, 2, 1], [1, 0, -1]),  # Sobel: a zero column and a zero tap in v
        np.full((5, 5), 1 / 25),  # box
        np.outer(np.exp(-(np.arange(-3, 4) ** 2) / 4), np.exp(-(np.arange(-2, 3) ** 2) / 2)),  # 7 x 5 Gaussian
        np.zeros((3, 3)),  # zero factors, zero output
        np.outer([0, 0, 1e-3], [-2, 0, 0, 0, 1]),  # the largest tap in a corner
    ],
    ids=["sobel", "box", "gaussian", "zero", "corner"],
)
def test_separable_steps_take_known_separable_filters(name, weights):
    weights, image = weights.astype(np.float32), _image((9, 36), 20)
    got = _run(STENCIL[name], image, weights)
    if not weights.any():
        assert np.array_equal(got, np.zeros_like(got))
    else:
        assert _close(got, image, weights)


def test_separable_factors_rebuild_the_filter():
    weights = _separable(5, 7, seed=21)
    u, v = separable_factors(weights)
    np.testing.assert_allclose(np.outer(u, v), weights, rtol=1e-6, atol=1e-7)
    p, q = np.unravel_index(np.argmax(np.abs(weights)), weights.shape)
    assert v[q] == 1 and np.array_equal(u, weights[:, q])


# -- the float4 path ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("width,wide", [(68, True), (70, False), (33, False)])
def test_float4_step_picks_the_width_of_its_accesses(width, wide, launch_configs):
    calls = {w: launch_configs(v06_float4.build(2, 2, w)) for w in (False, True)}
    image, weights = _image((9, width), 22), _separable(5, 5, seed=23)
    assert _close(_run(STENCIL["v06"], image, weights), image, weights)
    assert [w for w, c in calls.items() if c] == [wide]


def test_float4_step_reads_scalars_from_a_misaligned_view():
    rows, cols = 9, 68
    image, weights = _image((rows, cols), 24), _separable(5, 5, seed=25)
    backing = cuda.to_device(np.concatenate([np.zeros(1, np.float32), image.ravel()]))
    view = backing[1:].reshape(rows, cols)  # 4 bytes past a 16-byte boundary
    out = cuda.device_array((rows, cols), np.float32)
    assert not v06_float4.aligned(view)
    STENCIL["v06"](view, cuda.to_device(weights), out=out)
    assert _close(out.copy_to_host(), image, weights)


# -- limits and figures ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", STEPS[2:], ids=lambda v: v.name)
def test_uint32_steps_refuse_2_to_the_31_pixels(variant):
    huge = np.broadcast_to(np.float32(0), (1 << 16, 1 << 15))  # 2^31 pixels, no memory behind them
    weights = np.ones((5, 5), np.float32)
    with pytest.raises(OutOfRange, match="fewer than 2\\^31"):
        variant.module.validate(huge, weights)
    variant.module.validate(huge[:, :-1], weights)  # one column fewer is fine


def test_figures_count_the_direct_sum_and_one_pass_of_bytes():
    assert STENCIL.flops((10000, 7777)) == 50 * 10000 * 7777
    assert STENCIL.bytes_moved(16384) == 8 * 16384**2
    assert {"baseline", "cupyx_correlate1d_twice", "copy_ceiling"} <= set(STENCIL.baselines)
