"""The timer's guards and options: the last timed output is checked, the stop event waits for a step's own streams,
a cold-L2 sample flushes before it starts, and the user's-loop figures become the page's sentences. Pure CPU: the
timer runs with fake events (the simulator times nothing); the GPU test at the end runs only on a GPU."""

import numpy as np
import pytest
from numba import cuda

import zoo
from tests import tmpfamily
from zoo import registry
from zoo.bench import harness, timing, user_loop
from zoo.device.jit import Kernel, take_side_streams

STEP = '''
"""{summary}

Changes:
    A test variant.

Why it is faster:
    It is not.
"""
from numba import cuda

from zoo.device.jit import jit

CALLS = [0]


@jit
def scale_kernel(x, out, factor):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = factor * x[i]


def launch(x, out):
    CALLS[0] += 1
    factor = 2.0 if CALLS[0] == 1 or {always_right} else 3.0  # right once, then wrong unless always_right
    scale_kernel[(x.size + 31) // 32, 32](x, out, factor)
'''


def _fake_timer(launch, budget_s=1.0, cold_l2=False):
    """time_launches without a GPU: three timed calls after the first, one 'ms' each."""
    for i in range(1, 4):
        launch(i)
    return harness.Timing(1.0, 1.0, 1.0, 3, 1, [1.0] * 3)


@pytest.mark.parametrize("always_right", [True, False])
def test_the_output_of_the_last_timed_call_is_checked(tmp_path, monkeypatch, always_right):
    """A step right on its first call and wrong on every later one is not correct: its first output passes the check
    before the timing, the output its last timed call left does not."""
    step = STEP.format(summary="Twice x, once.", always_right=always_right)
    fam = tmpfamily.load(tmp_path, "lastcall", {"v01_once.py": step}, monkeypatch)
    monkeypatch.setattr(registry, "_FAMILIES", None)  # the harness finds the family by its name
    monkeypatch.setattr(harness, "time_launches", _fake_timer)
    m = harness.measure_variant(fam["v01"], 33)
    assert m.correct is always_right, m


IN_PLACE_SPEC = tmpfamily.SPEC.replace('INPUTS = ("x",)', 'INPUTS = ("x", "h")\nUPDATED_IN_PLACE = ("h",)').replace(
    """def make_inputs(size, seed):
    return (np.random.default_rng(seed).standard_normal(int(size), dtype=np.float32),)


def reference(x):
    return 2.0 * x.astype(np.float64)


def output_for(x):
    return x.shape, np.float32""",
    """def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(int(size), dtype=np.float32) for _ in range(2))


def reference(x, h):
    return 2.0 * (x.astype(np.float64) + h)


def output_for(x, h):
    return x.shape, np.float32""",
)

IN_PLACE_STEP = '''
"""h += x, then twice h: a step that updates an input in place, as rmsnorm's residual stream.

Changes:
    A test variant.

Why it is faster:
    It is not.
"""
from numba import cuda

from zoo.device.jit import jit


@jit
def add_in_place_kernel(x, h, out):
    i = cuda.grid(1)
    if i < x.size:
        h[i] += x[i]
        out[i] = 2 * h[i]


def launch(x, h, out):
    add_in_place_kernel[(x.size + 31) // 32, 32](x, h, out)
'''


@pytest.mark.parametrize("declared", [True, False])
def test_inputs_updated_in_place_are_restored_before_each_checked_call(tmp_path, monkeypatch, declared):
    """A step that updates an input in place (h += x) is right on every call, each on the inputs it was given: with
    UPDATED_IN_PLACE the harness gives the first call and the one checked after the timing the case's inputs, and
    the row is correct; without, the check sees what the timed calls made of h, and the row is wrong."""
    spec = IN_PLACE_SPEC if declared else IN_PLACE_SPEC.replace('UPDATED_IN_PLACE = ("h",)', "")
    fam = tmpfamily.load(tmp_path, "inplace", {"v01_add.py": IN_PLACE_STEP}, monkeypatch, spec=spec)
    monkeypatch.setattr(registry, "_FAMILIES", None)
    monkeypatch.setattr(harness, "time_launches", _fake_timer)
    assert fam.updated_in_place == ((1,) if declared else ())
    first = harness.measure_variant(fam["v01"], 33)
    second = harness.measure_variant(fam["v01"], 33)  # the case's device inputs are shared by its rows
    assert (first.correct, second.correct) == (declared, declared)


def test_updated_in_place_names_an_input(tmp_path, monkeypatch):
    spec = IN_PLACE_SPEC.replace('UPDATED_IN_PLACE = ("h",)', 'UPDATED_IN_PLACE = ("residual",)')
    fam = tmpfamily.load(tmp_path, "inplacebad", {"v01_add.py": IN_PLACE_STEP}, monkeypatch, spec=spec)
    with pytest.raises(registry.RegistryError, match="residual"):
        _ = fam.updated_in_place


class _Events:
    """Fake cuda.event / synchronize / event_elapsed_time that log what the timer does, in order."""

    def __init__(self, log):
        self.log = log

    def event(self, timing=True):
        log = self.log

        class Event:
            def record(self, stream=0):
                log.append(("record", self))

            def synchronize(self):
                pass

        return Event()

    def synchronize(self):
        pass

    def event_elapsed_time(self, start, stop):
        return 1.0

    def __getattr__(self, name):
        return getattr(cuda, name)


def _timer_without_gpu(monkeypatch, log):
    """time_launches (zoo.bench.timing) made to run here: fake events, no hold, every wait for side streams and
    flush logged."""
    monkeypatch.setattr(timing, "SIMULATOR", False)
    monkeypatch.setattr(timing, "cuda", _Events(log))
    monkeypatch.setattr(timing, "hold_gpu", lambda us: log.append(("hold",)))
    monkeypatch.setattr(timing, "wait_for_side_streams", lambda streams: log.append(("wait", tuple(streams))))
    monkeypatch.setattr(timing, "flush_l2", lambda: log.append(("flush",)))


def test_the_stop_event_waits_for_every_stream_a_step_used(monkeypatch):
    """A step that launches a zoo kernel on a stream of its own: each sample's stop event is recorded after the
    default stream was made to wait for that stream (and a step that uses none waits for nothing)."""
    from zoo.kernels.vector_add import v01_one_thread_per_element as step

    side = cuda.stream()
    x = cuda.to_device(np.ones(33, np.float32))
    out = cuda.device_array(33, np.float32)
    kernel = Kernel(step.add_kernel.dispatcher)
    take_side_streams()
    log = []
    _timer_without_gpu(monkeypatch, log)
    harness.time_launches(lambda i: kernel[2, 32, side](x, x, out), min_samples=2, budget_s=0)
    samples = [k for k, entry in enumerate(log) if entry[0] == "hold"]
    assert len(samples) >= 3  # the estimate's sample and two timed ones
    for begin, end in zip(samples, samples[1:] + [len(log)], strict=True):
        sample = log[begin:end]
        waits = [k for k, e in enumerate(sample) if e[0] == "wait"]
        assert len(waits) == 1 and side in sample[waits[0]][1], sample
        assert [e[0] for e in sample[waits[0] :]] == ["wait", "record"], "the stop event comes right after the wait"
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.ones(33, np.float32))
    log.clear()
    harness.time_launches(lambda i: kernel[2, 32](x, x, out), min_samples=2, budget_s=0)
    assert all(e[1] == () for e in log if e[0] == "wait")


def test_a_cold_l2_sample_is_one_call_after_a_flush(monkeypatch):
    """With cold_l2 every sample flushes L2 before its hold and start event, and times one call."""
    log = []
    _timer_without_gpu(monkeypatch, log)
    timed = harness.time_launches(lambda i: log.append(("call",)), min_samples=3, budget_s=0, cold_l2=True)
    assert timed.launches_per_sample == 1
    kinds = [e[0] for e in log]
    starts = [k for k, kind in enumerate(kinds) if kind == "hold"]
    assert all(kinds[k - 1] == "flush" and kinds[k + 1 : k + 3] == ["record", "call"] for k in starts), kinds
    log.clear()
    harness.time_launches(lambda i: None, min_samples=3, budget_s=0)
    assert ("flush",) not in log


def _entry(ms, loop_ms, host_us, device_ms, **more):
    return {
        "ms": ms,
        "resources": {"kernel": "k"},
        "user_loop": dict(ms=loop_ms, host_us=host_us, device_ms=device_ms, calls=100, arrays="cupy", **more),
    }


def test_the_users_loop_gets_a_reason_only_where_it_differs_by_more_than_ten_percent():
    close = _entry(1.0, 1.05, 10, 1.0)
    assert user_loop.reason(close) == "" and "Why" not in user_loop.loop_line("v01", close)
    host = _entry(0.010, 0.030, 29, 0.009)
    assert "host's pace" in user_loop.reason(host) and "29.0 us" in user_loop.reason(host)
    cached = _entry(0.100, 0.070, 10, 0.070, footprint_bytes=8 << 20, l2_bytes=50 << 20)
    assert "L2 cache" in user_loop.reason(cached)
    other = _entry(1.0, 1.5, 10, 1.5, kernel="other")
    assert "launched other" in user_loop.reason(other)
    assert "Why they differ" in user_loop.loop_line("v01", other)


def test_a_calls_cost_is_held_to_the_librarys():
    step, library = {"user_loop": {"ms": 0.012}}, {"user_loop": {"ms": 0.010}}
    assert "within" in user_loop.call_cost_line("v02", step, library, "cupy.add")
    assert "**over**" in user_loop.call_cost_line("v02", {"user_loop": {"ms": 0.014}}, library, "cupy.add")
    assert user_loop.call_cost_line("v02", step, {}, "cupy.add") == ""


@pytest.mark.skipif(zoo.SIMULATOR, reason="timings need a GPU")
def test_a_step_on_a_non_blocking_stream_is_timed_to_its_end():
    """A 2 ms kernel launched on a non-blocking CuPy stream (not ordered with the default stream) times at 2 ms:
    without the wait, the stop event on the default stream would be recorded as soon as the launch was queued."""
    import cupy

    side = cupy.cuda.Stream(non_blocking=True)
    spin = Kernel(timing._hold_kernel().dispatcher)
    timed = harness.time_launches(lambda i: spin[1, 1, side](np.uint64(2_000_000)), budget_s=0.05)
    assert timed.median_ms > 1.8, timed
    flushed = harness.time_launches(lambda i: spin[1, 1](np.uint64(200_000)), budget_s=0.02, cold_l2=True)
    assert flushed.launches_per_sample == 1 and 0.15 < flushed.median_ms < 0.5, flushed


def test_the_smallest_bench_size_is_the_one_that_moves_least():
    from zoo.bench.run import smallest_size

    assert smallest_size(zoo.family("launch")) == 4096


def test_call_path_of_a_host_inputs_family_is_the_host():
    pipeline = next(f for f in zoo.families() if f.host_inputs)
    assert harness.call_path(pipeline[1]) == harness.HOST_CALL


def test_nvbench_json_gives_each_benchmarks_cold_and_batch_seconds():
    """NVBench's JSON (values as strings, a summary's value under data's 'value'): the median where given, else the
    mean; a missing batch measurement is NaN and does not agree."""
    from zoo.bench import crosscheck

    def summary(tag, value):
        return {"tag": tag, "data": [{"name": "value", "type": "float64", "value": str(value)}]}

    data = {
        "benchmarks": [
            {
                "name": "a/v01",
                "states": [
                    {
                        "summaries": [
                            summary("nv/cold/time/gpu/mean", 2e-3),
                            summary("nv/batch/time/gpu/mean", 1.01e-3),
                            summary("nv/batch/time/gpu/median", 1.02e-3),
                        ]
                    }
                ],
            },
            {"name": "b/baseline", "states": [{"summaries": [summary("nv/cold/time/gpu/mean", 5e-4)]}]},
        ]
    }
    found = crosscheck.parse_nvbench(data)
    assert found["a/v01"] == (2e-3, 1.02e-3)
    assert found["b/baseline"][0] == 5e-4 and found["b/baseline"][1] != found["b/baseline"][1]
    assert crosscheck.agree(1.0, 1.02) and not crosscheck.agree(1.0, 1.06) and not crosscheck.agree(1.0, float("nan"))


def test_zoo_run_times_the_best_step_in_a_users_loop_and_the_librarys_call_at_the_smallest_size(monkeypatch):
    """``run.user_loops`` (what ``zoo run`` calls after a case's rows): the best correct step by its ratio gets the
    user's loop, the library's row too where the size is also the smallest BENCH size (launch: 4096 is both), and
    a loop whose output was wrong fails the run."""
    import io

    from rich.console import Console

    from zoo.bench import run

    fam = zoo.family("launch")
    monkeypatch.setattr(user_loop, "step_loop", lambda v, size, kind: {"ms": 0.6, "host_us": 5.0, "correct": True})
    monkeypatch.setattr(user_loop, "library_loop", lambda f, size, kind: {"ms": 1.0})

    def rows():
        return [
            harness.Measurement("baseline", 4096, 1.0, 0, 0, 0, ratio=1.0, correct=True),
            harness.Measurement("v03_lean_launch", 4096, 0.8, 0, 0, 0, ratio=1.25, correct=True),
            harness.Measurement("v05_fused", 4096, 0.5, 0, 0, 0, ratio=2.0, correct=True),
        ]

    measured, text = rows(), io.StringIO()
    assert run.user_loops(fam, 4096, None, measured, Console(file=text)) is False
    baseline, lean, fused = measured
    assert fused.user_loop["ms"] == 0.6 and baseline.user_loop["ms"] == 1.0 and not lean.user_loop
    assert "v05_fused" in text.getvalue() and "within the goal" in text.getvalue()
    measured = rows()
    assert run.user_loops(fam, 1 << 20, None, measured, Console(file=io.StringIO())) is False
    assert not any(m.user_loop for m in measured)  # neither the headline nor the smallest size
    monkeypatch.setattr(user_loop, "step_loop", lambda v, size, kind: {"ms": 0.6, "correct": False})
    assert run.user_loops(fam, 4096, None, rows(), Console(file=io.StringIO())) is True
