"""The CPU beside the GPU: every family names how a user computes its result on the host (its CPU rows),
each row agrees with the float64 reference, and the naive steps of vector_add and sgemm run the very
Python function that the numba CPU row compiles for the host."""

import numpy as np
import pytest

import zoo
from zoo.bench import cases, checking, harness, results
from zoo.errors import OutOfRange
from zoo.tools import report

ROWS = [(fam, name) for fam in zoo.families() for name in fam.cpu_rows]


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_every_family_has_a_cpu_row(fam):
    assert fam.cpu_rows, f"{fam.name}: add CPU = {{'cpu_numpy': (fn, threads)}} to its spec"
    for name, (fn, threads) in fam.cpu_rows.items():
        assert name.startswith("cpu_") and callable(fn) and threads in ("one", "blas", "numba")
        assert name not in fam.baselines and all(name != v.name for v in fam)


@pytest.mark.parametrize("fam,name", ROWS, ids=[f"{f.name}-{n}" for f, n in ROWS])
def test_each_cpu_row_agrees_with_the_reference(fam, name):
    size, kind = fam.test_cases()[-1]
    # a budget of 0.01 s: the loop's rule still times at least three calls, and the test checks answers, not times
    m = harness.measure_cpu(fam, size, kind=kind, name=name, budget_s=0.01)
    assert m.correct, f"{fam.name} {name}: relative error {m.error}"
    assert m.ms > 0 and m.resources["threads"] >= 1 and m.resources["cpu"]
    first = harness.measure_cpu(fam, size, seed=1, kind=kind, name=name, budget_s=0.01)  # other inputs: a fresh call
    assert first.correct


def test_the_naive_steps_and_the_numba_cpu_rows_share_one_element_function():
    vector_add, sgemm = zoo.family("vector_add"), zoo.family("sgemm")
    assert vector_add["v01"].module.add_one.py_func is vector_add.module.add_element
    assert sgemm["v01"].module.sgemm_one.py_func is sgemm.module.sgemm_element
    assert sgemm["v02"].module.sgemm_one.py_func is sgemm.module.sgemm_element


def test_a_cpu_row_too_slow_for_a_size_says_so():
    sgemm = zoo.family("sgemm")
    big = np.zeros((4096, 4096), np.float32)
    with pytest.raises(OutOfRange, match="naive loop"):
        sgemm.cpu_rows["cpu_numba"][0](big, big)


def test_a_case_made_ahead_in_the_background_is_the_case_made_in_place():
    fam = zoo.family("reduce")
    size, kind = 1000, "float32"
    harness.prepare_ahead((fam, size, kind), (fam, 33, kind))  # two cases, made by background threads
    harness.settle()
    ahead_inputs, ahead_ref = cases.case_and_reference(fam.name, size, 0, kind)
    inputs = fam.inputs(size, 0, kind)
    assert all(np.array_equal(a, b) for a, b in zip(ahead_inputs, inputs, strict=True))
    assert np.array_equal(ahead_ref, fam.reference(*inputs))
    assert harness.measure_cpu(fam, size, kind=kind, name=next(iter(fam.cpu_rows))).correct
    harness.prepare_ahead((fam, 33, kind))  # the others are forgotten: memory holds what is named
    assert list(cases._cases) == [(fam.name, 33, 0, kind)]


def test_a_kernel_is_host_bound_once_its_launch_call_takes_half_its_time():
    assert harness.host_bound(host_us=10.0, device_ms=0.016)  # a 16 us kernel behind 10 us calls
    assert not harness.host_bound(host_us=20.0, device_ms=0.2)  # a 200 us kernel hides 20 us calls
    assert harness.host_bound(host_us=101.0, device_ms=0.2) and not harness.host_bound(100.0, 0.2)  # the edge


def test_a_figure_is_the_hosts_pace_once_a_launch_call_takes_most_of_it():
    """zoo.bench.results.host_paced: a 19.7 us figure behind 17 us calls is the host's; a 94 us kernel behind 12 us
    calls is the kernel's; 80% is the edge; an unknown host time (a wall-clock row, an old row) marks nothing."""
    assert results.host_paced(host_us=17.0, ms=0.0197) and not results.host_paced(host_us=12.0, ms=0.094)
    assert results.host_paced(host_us=80.1, ms=0.1) and not results.host_paced(host_us=79.9, ms=0.1)
    assert not results.host_paced(None, 0.01) and not results.host_paced(float("nan"), 0.01)


def test_the_readme_table_marks_a_host_paced_figure_and_says_why():
    fam = zoo.family("gemv")
    row = dict(ms=0.0197, gflops=3000.0, gbps=1500.0, ratio=4.0, correct=True)
    entries = {
        "v09_dependent_launch": dict(row, name="v09_dependent_launch", host_us=12.0, ms=0.094),  # the kernel's pace
        "v10_prepacked_weights": dict(row, name="v10_prepacked_weights", host_us=17.0),  # the host's pace
    }
    table = report.family_table(fam, "H100", "4096x14336@int4", entries)
    assert "| v10_prepacked_weights | 0.0197 \N{DAGGER} |" in table and "| v09_dependent_launch | 0.0940 |" in table
    assert table.endswith(report.HOST_NOTE) and "host_paced" in report.HOST_NOTE
    del entries["v10_prepacked_weights"]
    assert "\N{DAGGER}" not in report.family_table(fam, "H100", "4096x14336@int4", entries)  # no mark, no note


def test_an_error_made_in_the_background_is_raised_where_the_case_is_used():
    fam = zoo.family("reduce")
    harness.prepare_ahead((fam, 1000, "no such kind"))
    harness.settle()
    with pytest.raises(ValueError, match="no input kind"):
        cases.stored_inputs(fam.name, 1000, 0, "no such kind")
    harness.prepare_ahead()


@pytest.mark.parametrize(
    "fam", [f for f in zoo.families() if getattr(f.module, "ELEMENTWISE_REFERENCE", False)], ids=lambda f: f.name
)
def test_a_reference_made_in_slices_is_the_reference_made_whole(fam, monkeypatch):
    monkeypatch.setattr(checking, "SLICED_ELEMENTS", 1)  # slice even this small case
    size, kind = fam.test_cases()[-1]
    inputs, params = fam.inputs(size, 3, kind), fam.kind_params(kind)
    assert np.array_equal(harness.reference_of(fam, inputs, **params), fam.reference(*inputs, **params))


def test_a_comparison_made_in_slices_is_the_comparison_made_whole(monkeypatch):
    rng = np.random.default_rng(5)
    ref = rng.standard_normal(10_001)
    close, ints = (ref * (1 + 1e-7)).astype(np.float32), rng.integers(0, 9, 10_001)
    unwritten, wrong = close.copy(), ints.copy()
    unwritten[[3, 9_999]] = np.nan
    wrong[[0, 7_000]] += 1
    whole = [harness.compare(*case) for case in ((close, ref, 1e-5), (unwritten, ref, 1e-5), (wrong, ints, 0))]
    monkeypatch.setattr(checking, "SLICED_ELEMENTS", 1)  # slice even these small arrays
    sliced = [harness.compare(*case) for case in ((close, ref, 1e-5), (unwritten, ref, 1e-5), (wrong, ints, 0))]
    assert [s[0] for s in sliced] == [True, False, False]
    assert sliced[1][2] == "2 elements left unwritten (still NaN)" and sliced[2][2].startswith("2 elements differ")
    assert sliced[0][1] == pytest.approx(whole[0][1], rel=1e-9) and sliced[0][1] == pytest.approx(
        np.linalg.norm(close - ref) / np.linalg.norm(ref), rel=1e-6
    )
