"""ReLU beyond the generic checks: grid-stride passes, the n % 4 tail, misaligned views, special values, the sweep."""

import csv

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.bench import sweeps
from zoo.errors import OutOfRange
from zoo.kernels.elementwise import v04_float4, v05_unrolled
from zoo.kernels.elementwise.sweeps import float4_per_thread as sweep

RELU = zoo.family("elementwise")


def _check(variant, x):
    out = np.full_like(x, np.nan)
    return np.array_equal(variant(x, out=out), RELU.reference(x), equal_nan=True)


@pytest.mark.parametrize("variant", RELU.variants, ids=lambda v: v.name)
def test_second_call_with_new_inputs(variant):
    for size, seed in ((37, 1), (6, 2), (37, 3)):
        (x,) = RELU.make_inputs(size, seed)
        assert _check(variant, x), f"{variant.name} at {size} (seed {seed})"


@pytest.mark.parametrize("variant", RELU.variants, ids=lambda v: v.name)
def test_nan_inf_and_signed_zero_follow_np_maximum(variant):
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -1e-45, 1e-45, -3.0, 3.0], np.float32)
    out = variant(x)
    expected = np.maximum(x, np.float32(0))
    assert np.array_equal(out, expected, equal_nan=True)
    assert np.array_equal(np.signbit(out), np.signbit(expected)), "ReLU(-0.0) is +0.0, as np.maximum gives"


@pytest.mark.parametrize("name", ["v03", "v04"])
def test_grid_stride_loop_takes_several_passes(name, monkeypatch):
    monkeypatch.setattr(RELU[name].module, "BLOCKS_PER_SM", 1)  # one block: 256 threads walk 4099 elements
    (x,) = RELU.make_inputs(4099, 4)
    assert _check(RELU[name], x)


@pytest.mark.parametrize("unroll", [1, 3])
def test_unrolled_passes_with_a_partial_last_pass(unroll):
    # 1 block of 256 threads x 3 float4 = 768 float4 a pass: 1024 float4 need a second, partial pass
    (x,) = RELU.make_inputs(4099, 5)
    dx, out = cuda.to_device(x), cuda.to_device(np.full_like(x, np.nan))
    v05_unrolled.launch_with(v05_unrolled.build(unroll), unroll, 1, dx, out)
    assert np.array_equal(out.copy_to_host(), RELU.reference(x))


@pytest.mark.parametrize("step", [v04_float4, v05_unrolled], ids=["v04", "v05"])
def test_float4_steps_fall_back_on_a_misaligned_view(step, launch_configs):
    calls, scalar_calls = launch_configs(step.relu4_kernel), launch_configs(step.relu_kernel)
    name = step.__name__.rsplit(".", 1)[-1][:3]
    (x,) = RELU.make_inputs(41, 6)
    backing = cuda.to_device(np.concatenate([np.zeros(1, np.float32), x]))
    view = backing[1:]  # 4 bytes past a 16-byte boundary
    out = cuda.device_array(41, np.float32)
    RELU[name](view, out=out)
    assert np.array_equal(out.copy_to_host(), RELU.reference(x))
    assert not calls and scalar_calls, "the scalar grid-stride kernel runs instead"
    RELU[name](x)  # and an aligned array does take the float4 kernel
    assert calls


@pytest.mark.parametrize("name", ["v03", "v04", "v05"])
def test_uint32_steps_refuse_2_to_the_31_elements(name):
    huge = np.broadcast_to(np.float32(0), (1 << 31,))  # no memory behind it
    with pytest.raises(OutOfRange, match="fewer than 2\\^31"):
        RELU[name].module.validate(huge)


def test_grid_blocks():
    per_block = v05_unrolled.THREADS_PER_BLOCK * 4 * 4
    assert v05_unrolled.grid_blocks(1, 4, None) == 1
    assert v05_unrolled.grid_blocks(per_block + 1, 4, None) == 2
    many = 100 * zoo.device.sm_count() * per_block  # more than two blocks per SM's worth
    assert v05_unrolled.grid_blocks(many, 4, 2) == 2 * zoo.device.sm_count()
    assert v05_unrolled.grid_blocks(many, 4, None) == 100 * zoo.device.sm_count()


def test_sweep_writes_csv_and_png(zoo_cli, tmp_path):
    r = zoo_cli(
        "elementwise-sweep", "--out", str(tmp_path), "--size", "1031", "--unrolls", "1,2", "--blocks-per-sm", "1,all"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (table,) = tmp_path.glob("*-elementwise-sweep.csv")
    (png,) = tmp_path.glob("*-elementwise-sweep.png")
    assert png.stat().st_size > 0
    with open(table, newline="") as f:
        assert tuple(next(csv.reader(f))) == sweep.COLUMNS
    rows = sweeps.read_csv(table)
    assert [(r["unroll"], r["blocks_per_sm"]) for r in rows] == [(1, 1), (1, "all"), (2, 1), (2, "all")]
    assert all(r["correct"] == "True" for r in rows)


def test_sweep_plot_draws_gpu_rows():
    # rows as read back from a committed CSV: numbers, and 'all' as text
    rows = [
        dict(
            size=1 << 28,
            unroll=u,
            elements_per_thread=4 * u,
            blocks_per_sm=b,
            blocks=1,
            threads_per_block=256,
            ms=1.0,
            gbps=3000.0 + 100 * u,
            of_copy=0.8,
            copy_gbps=4100.0,
            correct="True",
        )
        for u in (1, 4)
        for b in (1, 8, "all")
    ]
    fig = sweep.plot(rows, "NVIDIA H200")
    ax = fig.axes[0]
    assert len(ax.lines) == 4  # two unrolls, the copy line and the 90% line
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "8", "all"]


def test_sweep_refuses_bad_lists():
    with pytest.raises(ValueError, match="positive integers"):
        sweep._numbers("1,0")
    with pytest.raises(ValueError, match="or all"):
        sweep._numbers("2,x", allow_all=True)
