"""The launch family beyond the generic checks: what each step hoists, launches or falls back to, the sweep.

(tests/runtime/test_launch.py tests the lean launch itself, zoo.runtime.launch.) Correctness of every step at the
family's sizes is tests/kernels/test_kernels.py's; here: a second call, the closed-form reference, v02's kept
launcher, v03 launching v01's very dispatcher, v04's fallback in the simulator, v05's single launch,
clear errors for bad input, and the launch-loop sweep in the simulator.
"""

import argparse

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.bench import sweeps
from zoo.device import jit as zoo_jit
from zoo.kernels import launch as spec
from zoo.kernels.launch import v01_numba_dispatcher, v02_hoisted, v03_lean_launch, v04_graph_replay, v05_fused
from zoo.kernels.launch.sweeps import launch_loop as sweep

LAUNCH = zoo.family("launch")


def _right(result, x):
    want = spec.reference(x)
    return np.linalg.norm(np.asarray(result, np.float64) - want) <= spec.TOLERANCE * np.linalg.norm(want)


def test_the_reference_is_the_loop_in_float64():
    (x,) = spec.make_inputs(37, 0)
    y = x.astype(np.float64)
    for _ in range(spec.STEPS):
        y = float(spec.A) * y + float(spec.B)
    np.testing.assert_allclose(spec.reference(x), y, rtol=1e-12)
    assert _right(spec.cpu_numpy(x), x)


@pytest.mark.parametrize("variant", LAUNCH.variants, ids=lambda v: v.name)
def test_second_call_on_the_same_and_on_new_arrays(variant):
    (x,) = spec.make_inputs(37, 1)
    dx, dout = cuda.to_device(x), cuda.device_array(x.shape, np.float32)
    for _ in range(2):  # the second call on the same arrays (v04: the cached graph's turn on a GPU)
        variant(dx, out=dout)
        assert _right(dout.copy_to_host(), x)
    (y,) = spec.make_inputs(6, 2)
    assert _right(variant(y), y), "a new size after the first"


def test_v02_makes_its_launcher_once_and_reuses_it():
    (x,) = spec.make_inputs(33, 3)
    dx, dout = cuda.to_device(x), cuda.device_array(x.shape, np.float32)
    v02_hoisted.launch(dx, dout)
    blocks = (33 + v01_numba_dispatcher.THREADS_PER_BLOCK - 1) // v01_numba_dispatcher.THREADS_PER_BLOCK
    kept = v02_hoisted._LAUNCHERS[blocks]
    calls = []

    def spy(*args):
        calls.append(args)
        return kept(*args)

    v02_hoisted._LAUNCHERS[blocks] = spy
    try:
        v02_hoisted.launch(dx, dout)
    finally:
        v02_hoisted._LAUNCHERS[blocks] = kept
    assert len(calls) == spec.STEPS, "every launch of the loop goes through the kept launcher"
    assert all(a[1] is calls[0][1] for a in calls), "the same view of out for every launch: converted once a call"
    assert _right(dout.copy_to_host(), x)


def test_numba_array_keeps_a_numba_array():
    d = cuda.device_array(4, np.float32)
    assert v02_hoisted.numba_array(d) is d


def test_v03_launches_v01s_own_dispatcher():
    assert isinstance(v03_lean_launch.affine, zoo_jit.Kernel)
    assert v03_lean_launch.affine.dispatcher is v01_numba_dispatcher.affine, "the same compiled function, not a copy"


def test_v03_launches_steps_times_and_v05_once():
    (x,) = spec.make_inputs(40, 4)
    dx, dout = cuda.to_device(x), cuda.device_array(x.shape, np.float32)
    for step, launches in ((v03_lean_launch, spec.STEPS), (v05_fused, 1)):
        before = zoo_jit.launch_count()
        step.launch(dx, dout)
        assert zoo_jit.launch_count() - before == launches, step.__name__
        assert _right(dout.copy_to_host(), x)


@pytest.mark.skipif(not zoo.SIMULATOR, reason="the fallback of the simulator")
def test_v04_runs_the_eager_loop_in_the_simulator():
    (x,) = spec.make_inputs(35, 5)
    dx, dout = cuda.to_device(x), cuda.device_array(x.shape, np.float32)
    before = zoo_jit.launch_count()
    v04_graph_replay.launch(dx, dout)
    v04_graph_replay.launch(dx, dout)
    assert zoo_jit.launch_count() - before == 2 * spec.STEPS, "v03's loop, launched eagerly both times"
    assert v04_graph_replay._GRAPHS == {}, "no graph captured in the simulator"
    assert _right(dout.copy_to_host(), x)


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (np.ones(8, np.float64), TypeError, "float32"),
        (np.ones((2, 4), np.float32), ValueError, "dimension"),
        (np.ones(0, np.float32), ValueError, "empty"),
        (np.ones(16, np.float32)[::2], ValueError, "contiguous"),
    ],
    ids=["float64", "2-D", "empty", "strided"],
)
def test_bad_input_is_a_clear_error(bad, error, words):
    for variant in (LAUNCH["v01"], LAUNCH["v04"]):
        with pytest.raises(error, match=words):
            variant(bad)


def test_an_out_of_another_shape_is_refused():
    (x,) = spec.make_inputs(8, 6)
    with pytest.raises(ValueError, match="shape"):
        LAUNCH["v03"](x, out=np.empty(9, np.float32))


@pytest.mark.skipif(not zoo.SIMULATOR, reason="the simulator's tiny run (on a GPU the sweep times real loops)")
def test_sweep_runs_in_the_simulator_and_writes_its_columns(tmp_path):
    rows = sweep.measure(argparse.Namespace(simulator=True, max_n=None, repeats=None))
    assert [r["series"] for r in rows] == [v.name for v in LAUNCH]
    for r in rows:
        assert set(sweep.COLUMNS) <= set(r), r
        assert r["steps"] == spec.STEPS and r["loop_us"] >= r["issue_us"] > 0
    assert {r["series"]: r["launches"] for r in rows}["v05_fused"] == 1
    path = sweeps.write_csv(tmp_path / "sim-launch-loop.csv", sweep.COLUMNS, rows)
    back = sweeps.read_csv(path)
    assert list(back[0]) == list(sweep.COLUMNS) and len(back) == len(rows)
    lines = sweep.findings(back)
    assert lines and "a loop of" in lines[0]


def test_sweep_plot_and_findings_with_gpu_rows():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    rows = []
    for n in (1024, 4096):
        for name, per_launch, launches, device in (
            ("v01_numba_dispatcher", 40.0, 256, 700.0),
            ("v03_lean_launch", 7.0, 256, 600.0),
            ("v04_graph_replay", 20.0, 1, 500.0),
            ("v05_fused", 8.0, 1, 3.0),
            ("cupy ElementwiseKernel", 9.0, 256, 600.0),
        ):
            issue = per_launch * launches
            rows.append(
                dict(series=name, n=n, steps=256, launches=launches, issue_us=issue, host_us_per_launch=per_launch)
            )
            rows[-1].update(loop_us=issue + 10, device_us=device, queued=name != "v01_numba_dispatcher")
    fig = sweep.plot(rows, "a GPU")
    assert fig.axes
    text = " ".join(sweep.findings(rows))
    assert "5.7x less" in text and "v03_lean_launch" in text and "bound by the host" in text


@pytest.mark.skipif(not zoo.SIMULATOR, reason="the simulator's tiny run (on a GPU the sweep times real loops)")
def test_user_loop_sweep_checks_every_loop_in_the_simulator():
    from zoo.kernels.launch.sweeps import user_loop as sweep_user_loop

    rows = sweep_user_loop.measure(argparse.Namespace(simulator=True, repeats=None))
    assert [r["series"] for r in rows] == ["v01_hillis_steele", "v02_blelloch", "v03_warp_shuffle"]
    assert all(r["loop_us"] > 0 and "device_us" not in r for r in rows)
    assert sweep_user_loop.findings(rows) == []  # nothing was timed on a GPU: nothing to say


def test_user_loop_findings_compare_with_the_device_figure_and_the_library():
    from zoo.kernels.launch.sweeps import user_loop as sweep_user_loop

    rows = [
        dict(family="sgemm", size="1024", series="v14_unrolled_hot_loop", loop_us=64.0, device_us=61.0),
        dict(family="sgemm", size="1024", series="cuBLAS (baseline)", loop_us=62.0, device_us=57.0),
    ]
    for r in rows:
        r["of_device"] = r["device_us"] / r["loop_us"]
    (line,) = sweep_user_loop.findings(rows)
    assert "runs at 64.0 us a call, 95% of its device figure (61.0 us)" in line and "(0.97x)" in line
