"""Fusion beyond the generic checks: cached temporaries, repeated calls, misaligned views, large |x|, the sweep."""

import csv
import types

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.bench import harness, sweeps
from zoo.errors import OutOfRange
from zoo.kernels import fusion as spec
from zoo.kernels.fusion import ops
from zoo.kernels.fusion.sweeps import sin_chain as sweep
from zoo.runtime import buffers

FUSION = zoo.family("fusion")


def _close(variant, x):
    out = np.full_like(x, np.nan)
    ok, _, detail = harness.compare(variant(x, out=out), FUSION.reference(x), FUSION.tolerance(x.size))
    return ok, detail


@pytest.fixture
def allocations(monkeypatch):
    """Counts the device arrays ops.temporaries allocates (and only those)."""
    made = []

    def device_array(n, dtype):
        made.append(n)
        return cuda.device_array(n, dtype)

    ops.release()
    monkeypatch.setattr(
        buffers, "cuda", types.SimpleNamespace(device_array=device_array, get_current_device=cuda.get_current_device)
    )
    yield made
    ops.release()


def test_temporaries_are_allocated_once_per_size(allocations):
    (x,) = FUSION.make_inputs(37, 1)
    for name in ("v01", "v01", "v02"):  # v02 reuses what v01 allocated
        ok, detail = _close(FUSION[name], x)
        assert ok, f"{name}: {detail}"
    assert allocations == [37, 37]
    (y,) = FUSION.make_inputs(12, 2)
    assert _close(FUSION["v01"], y)[0]
    assert allocations == [37, 37, 12, 12]
    kept = [key for key in buffers._BUFFERS if key[0].startswith("fusion_temporary_")]
    assert len(kept) == 2 and {key[1] for key in kept} == {12}, "one size is kept at a time"


def test_fused_steps_allocate_nothing(allocations):
    (x,) = FUSION.make_inputs(37, 3)
    for name in ("v03", "v04"):
        assert _close(FUSION[name], x)[0]
    assert allocations == []


@pytest.mark.parametrize("variant", FUSION.variants, ids=lambda v: v.name)
def test_second_call_with_new_inputs(variant):
    for size, seed in ((37, 1), (6, 2), (37, 3)):
        (x,) = FUSION.make_inputs(size, seed)
        ok, detail = _close(variant, x)
        assert ok, f"{variant.name} at {size} (seed {seed}): {detail}"


@pytest.mark.parametrize("variant", FUSION.variants, ids=lambda v: v.name)
def test_large_magnitudes_and_special_values(variant):
    # sinf reduces large arguments exactly (no fastmath): 1e30 is as accurate as 1.0
    x = np.array(
        [0.0, -0.0, 1e-30, -1e-30, np.pi, -np.pi, 1e4, -1e4, 123456.7, 1e6, -3e7, 1e15, 1e30, -1e30, 3.4e38, -3.4e38],
        np.float32,
    )
    ok, detail = _close(variant, x)
    assert ok, detail
    assert np.array_equal(variant(np.array([np.nan], np.float32)), [np.nan], equal_nan=True)


def test_inputs_reach_both_clamp_bounds():
    (x,) = FUSION.make_inputs(4099, 0)
    y = FUSION.reference(x)
    assert (y == spec.LO).any() and (y == spec.HI).any()
    assert ((y > spec.LO) & (y < spec.HI)).mean() > 0.5


def test_cupy_baselines_compute_the_reference():
    # the CuPy rows' expression, run by NumPy in float64: same ops, same order as the reference
    (x,) = FUSION.make_inputs(1000, 4)
    g = spec._gelu_chain(x.astype(np.float64), np)
    assert np.allclose(np.clip(g, spec.LO, spec.HI), FUSION.reference(x), rtol=1e-14, atol=1e-15)
    assert np.allclose(np.minimum(np.maximum(g, spec.LO), spec.HI), FUSION.reference(x), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", ["v04", "v05"])
def test_float4_grid_stride_takes_several_passes(name, monkeypatch):
    monkeypatch.setattr(FUSION[name].module, "BLOCKS_PER_SM", 1)  # few blocks: each thread loops
    monkeypatch.setattr(zoo.runtime.gpu, "_sm_count", lambda: 1)
    (x,) = FUSION.make_inputs(4099, 5)  # 1024 float4 for 256 threads, and a tail of 3
    ok, detail = _close(FUSION[name], x)
    assert ok, detail


@pytest.mark.parametrize("name", ["v04", "v05"])
def test_float4_step_falls_back_on_a_misaligned_view(name, launch_configs):
    step = FUSION[name].module
    wide, one_per_thread = launch_configs(step.fused4_kernel), launch_configs(step.fused_kernel)
    (x,) = FUSION.make_inputs(41, 6)
    backing = cuda.to_device(np.concatenate([np.zeros(1, np.float32), x]))
    view = backing[1:]  # 4 bytes past a 16-byte boundary
    out = cuda.device_array(41, np.float32)
    FUSION[name](view, out=out)
    assert harness.compare(out.copy_to_host(), FUSION.reference(x), FUSION.TOLERANCE)[0]
    assert not wide and one_per_thread
    FUSION[name](x)  # and an aligned array does take the float4 kernel
    assert wide


@pytest.mark.parametrize("name", ["v04", "v05"])
def test_float4_step_refuses_2_to_the_31_elements(name):
    huge = np.broadcast_to(np.float32(0), (1 << 31,))  # no memory behind it
    with pytest.raises(OutOfRange, match="fewer than 2\\^31"):
        FUSION[name].module.validate(huge)


def test_every_step_states_its_launches_and_bytes():
    for v in FUSION:
        assert "launch" in v.doc.split("Changes:")[0] and "bytes moved" in v.doc.split("Changes:")[0], v.name


# -- the sin x4 sweep ---------------------------------------------------------------------------
@pytest.mark.skipif(not zoo.SIMULATOR, reason="on a GPU, .ci/gpu-session runs the sweep at full size")
def test_sweep_writes_csv_and_png(zoo_cli, tmp_path):
    r = zoo_cli("fusion-sweep", "--out", str(tmp_path), "--sizes", "97,5")
    assert r.returncode == 0, r.stdout + r.stderr
    (table,) = tmp_path.glob("*-fusion-sweep.csv")
    (png,) = tmp_path.glob("*-fusion-sweep.png")
    assert png.stat().st_size > 0
    with open(table, newline="") as f:
        assert tuple(next(csv.reader(f))) == sweep.COLUMNS
    rows = sweeps.read_csv(table)
    numba_rows = ("four_launches", "fused", "fused_float4", "fused_bounded", "fused_fastmath")  # no CuPy here
    assert [(r["size"], r["method"], r["launches"], r["bytes"]) for r in rows] == [
        (n, m, sweep.METHODS[m][0], sweep.METHODS[m][1] * n) for n in (97, 5) for m in numba_rows
    ]
    assert all(r["correct"] == "True" for r in rows)


def test_sweep_plot_draws_gpu_rows():
    rows = [
        dict(
            size=n,
            method=m,
            launches=sweep.METHODS[m][0],
            bytes=sweep.METHODS[m][1] * n,
            ms=ms,
            gbps=1.0,
            speedup=2.0 / ms,
            correct="True",
        )
        for n in (1 << 24, 1 << 28)
        for m, ms in zip(sweep.METHODS, (2.0, 0.55, 0.5, 0.35, 0.5, 2.2, 0.6), strict=True)
    ]
    fig = sweep.plot(rows, "NVIDIA H200")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(sweep.METHODS)
    assert len(ax.patches) == len(sweep.METHODS)  # the largest size only


def test_sweep_refuses_bad_sizes():
    with pytest.raises(ValueError, match="positive integers"):
        sweep._sizes("8,0")
