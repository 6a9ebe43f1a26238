"""Transpose beyond the generic checks: tall grids, the float4 path and its fallbacks, the uint32 limit."""

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.errors import OutOfRange
from zoo.kernels.transpose import v05_float4, v06_any_shape

TRANSPOSE = zoo.family("transpose")


def _check(variant, a):
    out = np.full((a.shape[1], a.shape[0]), np.nan, np.float32)
    got = variant(a, out=out)
    return np.array_equal(got, TRANSPOSE.reference(a))


@pytest.mark.parametrize("variant", TRANSPOSE.variants, ids=lambda v: v.name)
def test_second_call_with_new_inputs_and_shape(variant):
    for size, seed in (((5, 40), 1), ((40, 5), 2), ((8, 12), 3)):
        (a,) = TRANSPOSE.make_inputs(size, seed)
        assert _check(variant, a), f"{variant.name} at {size} (seed {seed})"


@pytest.mark.parametrize("variant", TRANSPOSE.variants, ids=lambda v: v.name)
def test_more_row_tiles_than_grid_y_holds(variant, monkeypatch):
    # One block row in the grid: every block must stride down over all the row tiles.
    monkeypatch.setattr(variant.module, "MAX_GRID_Y", 1)
    for size in ((70, 33), (72, 8)):  # the scalar path and (v05) the float4 path
        (a,) = TRANSPOSE.make_inputs(size, 5)
        assert _check(variant, a), f"{variant.name} at {size}"


def test_float4_path_runs_for_aligned_multiples_of_four(launch_configs):
    calls = launch_configs(v05_float4.transpose4_kernel)
    (a,) = TRANSPOSE.make_inputs((36, 68), 4)
    assert _check(TRANSPOSE["v05"], a)
    assert calls, "a 36 x 68 matrix should take the float4 kernel"


@pytest.mark.parametrize("size", [(36, 66), (34, 68), (1, 70)])
def test_float4_path_falls_back_when_a_float4_would_straddle_rows(size, launch_configs):
    calls = launch_configs(v05_float4.transpose4_kernel)
    scalar_calls = launch_configs(v05_float4.transpose_kernel)
    (a,) = TRANSPOSE.make_inputs(size, 6)
    assert _check(TRANSPOSE["v05"], a)
    assert not calls and scalar_calls


def test_float4_path_falls_back_on_a_misaligned_view(launch_configs):
    calls = launch_configs(v05_float4.transpose4_kernel)
    rows, cols = 8, 12
    (a,) = TRANSPOSE.make_inputs((rows, cols), 7)
    backing = cuda.to_device(np.concatenate([np.zeros(1, np.float32), a.ravel()]))
    view = backing[1:].reshape(rows, cols)  # 4 bytes past a 16-byte boundary
    out = cuda.device_array((cols, rows), np.float32)
    TRANSPOSE["v05"](view, out=out)
    assert np.array_equal(out.copy_to_host(), a.T)
    assert not calls


@pytest.mark.parametrize(
    "size,wide",
    [((36, 68), (True, True)), ((36, 66), (False, True)), ((34, 68), (True, False)), ((33, 65), (False, False))],
)
def test_any_shape_picks_each_side_width_alone(size, wide, launch_configs):
    calls = {
        w: launch_configs(v06_any_shape.build(*w)) for w in ((False, False), (False, True), (True, False), (True, True))
    }
    (a,) = TRANSPOSE.make_inputs(size, 8)
    assert _check(TRANSPOSE["v06"], a)
    assert [w for w, c in calls.items() if c] == [wide]


def test_any_shape_reads_scalars_from_a_misaligned_view():
    rows, cols = 8, 12
    (a,) = TRANSPOSE.make_inputs((rows, cols), 9)
    backing = cuda.to_device(np.concatenate([np.zeros(1, np.float32), a.ravel()]))
    view = backing[1:].reshape(rows, cols)
    out = cuda.device_array((cols, rows), np.float32)
    assert v06_any_shape.widths(view, out) == (False, True)
    TRANSPOSE["v06"](view, out=out)
    assert np.array_equal(out.copy_to_host(), a.T)


@pytest.mark.parametrize("variant", ["v04", "v05", "v06", "v07"])
def test_uint32_steps_refuse_2_to_the_31_elements(variant):
    huge = np.broadcast_to(np.float32(0), (1 << 16, 1 << 15))  # 2^31 elements, no memory behind them
    with pytest.raises(OutOfRange, match="fewer than 2\\^31"):
        TRANSPOSE[variant].module.validate(huge)
    TRANSPOSE[variant].module.validate(huge[:, :-1])  # one column fewer is fine


def test_copy_ceiling_moves_the_same_bytes():
    assert TRANSPOSE.bytes_moved((10000, 7777)) == 8 * 10000 * 7777
    assert TRANSPOSE.bytes_moved(16384) == 8 * 16384**2
    assert "copy_ceiling" in TRANSPOSE.baselines
