"""The pipeline family's host-level runs: every step against the reference on NumPy arrays,
chunk counts that do not divide n, n below the chunk count, pinned and pageable arrays,
repeated calls with new inputs, errors, the timeline, the sweep commands, and (GPU only)
that a thousand calls hold no more memory than one."""

import gc

import numpy as np
import pytest

import zoo
from zoo.bench import harness
from zoo.kernels.pipeline import stages

PIPE = zoo.family("pipeline")
STEPS = list(PIPE)


def _check(v, x, out, **params):
    ref = PIPE.reference(x, **params)
    out[...] = np.nan
    got = v.module.run(x, out, **params)
    assert got is out
    ok, err, detail = harness.compare(out, ref, PIPE.tolerance(x.size))
    assert ok, f"{v.name} n={x.size} {params}: {detail}"


@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
@pytest.mark.parametrize("n,chunks,streams", [(1, 8, 4), (5, 8, 3), (1000, 7, 3), (1003, 4, 4), (33, 1, 2)])
def test_run_matches_reference_on_host_arrays(v, n, chunks, streams):
    x = PIPE.make_inputs(n, n)[0]
    _check(v, x, np.empty_like(x), chunks=chunks, streams=streams, work=9)


@pytest.mark.parametrize("v", STEPS[1:], ids=lambda v: v.name)
def test_pinned_arrays_are_used_in_place_and_views_count_as_pinned(v):
    n = 301
    x, out = stages.pinned_empty(n), stages.pinned_empty(n)
    assert stages.is_pinned(x) and stages.is_pinned(out[7:]) and not stages.is_pinned(np.empty(n))
    x[...] = PIPE.make_inputs(n, 3)[0]
    _check(v, x, out, chunks=6, streams=4, work=3)


@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
def test_second_call_with_new_inputs_and_size(v):
    # Cached device buffers and staging follow the size; stale data would show.
    for n, seed in ((700, 1), (700, 2), (129, 3)):
        x = PIPE.make_inputs(n, seed)[0]
        _check(v, x, np.empty_like(x), chunks=5, streams=3, work=4)


@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
def test_launch_on_host_arrays_runs_the_pipeline(v):
    x = PIPE.make_inputs(77, 4)[0]
    out = np.full_like(x, np.nan)
    v.launch((x,), out, work=6, chunks=3, streams=2)
    assert harness.compare(out, PIPE.reference(x, work=6), PIPE.TOLERANCE)[0]


def test_work_changes_the_result():
    x = PIPE.make_inputs(64, 5)[0]
    a, b = PIPE[1](x, work=0), PIPE[1](x, work=40)
    assert np.array_equal(a, x) and not np.allclose(a, b)


def test_chunk_bounds_cover_n_once():
    for n in (1, 2, 7, 100, 4099):
        for chunks in (1, 3, 8, 5000):
            b = stages.chunk_bounds(n, chunks)
            assert b[0][0] == 0 and b[-1][1] == n and len(b) == min(n, chunks)
            assert all(p[1] == q[0] for p, q in zip(b, b[1:], strict=False))
            sizes = [hi - lo for lo, hi in b]
            assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("bad", [dict(work=-1), dict(chunks=0), dict(streams=0)])
def test_bad_parameters_are_refused_before_any_launch(bad):
    with pytest.raises(ValueError):
        PIPE[4](PIPE.make_inputs(10, 0)[0], **bad)


@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
def test_run_refuses_bad_arrays_and_stays_usable(v):
    x = PIPE.make_inputs(50, 6)[0]
    for bad_out in (np.empty(49, np.float32), np.empty(50, np.float64), np.empty((50, 2), np.float32)[:, 0]):
        with pytest.raises(ValueError):
            v.module.run(x, bad_out, chunks=3, streams=2)
    with pytest.raises(TypeError):
        v.module.run(list(x), np.empty(50, np.float32))
    _check(v, x, np.empty_like(x), chunks=3, streams=2, work=2)


class SecondLaunchFails:
    """Stands in for a step's kernel: launches it, except the second launch, which raises."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, config):
        self.launches += 1
        if self.launches == 2:
            raise RuntimeError("launch failed")
        return self.kernel[config]


def test_an_error_half_way_leaves_out_alone_and_the_next_call_right(monkeypatch):
    x = PIPE.make_inputs(60, 9)[0]
    out = np.full_like(x, 7.0)
    step = PIPE[4].module
    monkeypatch.setattr(step, "fma_chain", SecondLaunchFails(step.fma_chain))
    with pytest.raises(RuntimeError):
        step.run(x, out, chunks=4, streams=2, work=3)
    assert (out == 7.0).all()  # staged output is copied back only after a complete run
    assert step.fma_chain.launches == 2
    monkeypatch.undo()
    _check(PIPE[4], x, out, chunks=4, streams=2, work=3)


@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
def test_timeline_has_three_spans_per_chunk(v):
    x = PIPE.make_inputs(40, 7)[0]
    timeline = []
    v.module.run(x, np.empty_like(x), work=2, chunks=6, streams=4, timeline=timeline)
    assert sorted((s, c) for s, c, *_ in timeline) == sorted(
        (s, c) for s in ("h2d", "compute", "d2h") for c in range(6)
    )
    lanes = {lane for _, _, lane, _, _ in timeline}
    assert lanes == ({0} if v.number <= 3 else {0, 1, 2, 3})


@pytest.mark.skipif(zoo.SIMULATOR, reason="large sizes need a GPU")
@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
def test_run_at_a_large_irregular_size_on_the_gpu(v):
    n = (1 << 24) + 7
    x = PIPE.make_inputs(n, 10)[0]
    _check(v, x, np.empty_like(x), chunks=8, streams=4)  # pageable: staged through pinned buffers
    px, pout = stages.pinned_empty(n), stages.pinned_empty(n)
    px[...] = x
    _check(v, px, pout, chunks=13, streams=3)  # pinned: used in place


@pytest.mark.skipif(zoo.SIMULATOR, reason="pinned and device memory are only real on a GPU")
def test_no_leak_after_a_thousand_calls():
    from numba import cuda

    x = stages.pinned_empty(1 << 16)
    x[...] = PIPE.make_inputs(1 << 16, 8)[0]
    out = stages.pinned_empty(1 << 16)
    pageable = np.array(x)
    manager = cuda.current_context().memory_manager

    def calls(count):
        for i in range(count):
            v = STEPS[i % len(STEPS)]
            v.module.run(
                pageable if i % 2 else x,
                np.empty_like(pageable) if i % 2 else out,
                chunks=8,
                streams=4,
                timeline=[] if i % 3 == 0 else None,
            )
            if i % 10 == 0:
                with pytest.raises(ValueError):
                    v.module.run(x, np.empty(5, np.float32))
        cuda.synchronize()
        gc.collect()

    def live_bytes():
        # this process's own device and pinned allocations, as numba tracks them: the
        # GPU's free memory would also move with the other pytest workers sharing it
        return sum(mem.size for mem in list(manager.allocations.values()))

    calls(2 * len(STEPS) * 3)  # every step on every path, timeline and error included
    live_before, rss_before = live_bytes(), _rss()
    calls(1000)
    assert live_bytes() <= live_before
    assert _rss() - rss_before < 64 << 20  # pinned staging lives in host memory too


def _rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


@pytest.mark.skipif(not zoo.SIMULATOR, reason="on a GPU, .ci/gpu-session runs the sweeps at full size")
@pytest.mark.parametrize("command", ["streams", "transfers", "launch"])
def test_sweep_command_writes_csv_and_png(command, tmp_path, zoo_cli):
    from zoo.bench import sweeps

    module = sweeps.modules()[command]
    r = zoo_cli(command, "--out", str(tmp_path), env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stdout + r.stderr
    slug = sweeps.SIMULATOR_SLUG
    rows = sweeps.read_csv(sweeps.csv_path(slug, command, tmp_path))
    assert rows and list(rows[0]) == list(module.COLUMNS)
    assert sweeps.png_path(slug, command, tmp_path).stat().st_size > 1000
    if command == "streams":
        assert [r["variant"] for r in rows] == [v.name for v in STEPS]
        assert all(r["correct"] == "True" for r in rows)


def test_amdahl_sweep_checks_both_applications_and_its_arithmetic(tmp_path):
    import argparse

    from zoo.kernels.pipeline.sweeps import amdahl as sweep_amdahl

    rows = sweep_amdahl.measure(argparse.Namespace(simulator=True, n=None, m=None))
    assert [(r["application"], r["row"]) for r in rows][:2] == [("pipeline", "amdahl"), ("sgemm", "amdahl")]
    assert all(r["correct"] for r in rows) and rows[-1]["row"] == "strong_scaling"
    # the bound from timings: half the CPU time offloaded at 4x gives 1 / (0.5 + 0.5 / 4) = 1.6x
    row = sweep_amdahl._amdahl_row("toy", lambda: None, lambda: None, lambda: None, lambda: None, timed=False)
    assert row == {"application": "toy", "row": "amdahl", "correct": True}
    gpu_rows = [
        dict(
            application="toy",
            row="amdahl",
            cpu_ms=10.0,
            gpu_ms=7.0,
            p=0.5,
            part_speedup=4.0,
            amdahl_bound=1.6,
            amdahl_limit=2.0,
            measured_speedup=10 / 7,
        ),
        dict(
            application="pipeline kernel",
            row="strong_scaling",
            sms=1,
            kernel_ms=8.0,
            speedup_over_one_sm=1.0,
            efficiency=1.0,
        ),
        dict(
            application="pipeline kernel",
            row="strong_scaling",
            sms=8,
            kernel_ms=1.25,
            speedup_over_one_sm=6.4,
            efficiency=0.8,
        ),
    ]
    lines = sweep_amdahl.findings(gpu_rows)
    assert "bounds the application at 1.60x" in lines[0] and "89% of the bound" in lines[0]
    assert "6.4x over one SM on 8 SMs, an efficiency of 80%" in lines[1]
    pytest.importorskip("matplotlib")
    sweep_amdahl.plot(gpu_rows, "a GPU").savefig(tmp_path / "amdahl.png")
