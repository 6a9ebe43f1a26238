"""divergence beyond the generic checks: trip counts at every boundary, tails of the warp-pair remap,
results that stay in their own place, identical bits across steps, the sweep's inputs, CSV and plot."""

import csv

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.bench import harness, sweeps
from zoo.kernels import divergence as spec
from zoo.kernels.divergence.sweeps import long_path_fraction as sweep

DIV = zoo.family("divergence")


def _run(variant, x):
    out = np.full_like(x, np.nan)  # poisoned: an element left unwritten fails
    return variant(x, out=out)


def _boundaries():
    """|x| at every k / N_CHUNKS, just below each, and beyond the last, with both signs."""
    edges = (np.arange(spec.N_CHUNKS + 3) / spec.N_CHUNKS).astype(np.float32)
    below = np.nextafter(edges, np.float32(0))
    extra = np.array([0.0, 1e-45, 1e-30, 3.0, 1e30, np.inf], np.float32)
    mags = np.concatenate([edges, below, extra])
    return np.concatenate([mags, -mags]).astype(np.float32)


def test_chunks_steps_at_each_multiple_of_one_over_n_chunks():
    k = np.arange(1, spec.N_CHUNKS)
    at = (k / spec.N_CHUNKS).astype(np.float32)
    assert np.array_equal(spec.chunks(at), k + 1)
    assert np.array_equal(spec.chunks(np.nextafter(at, np.float32(0))), k)
    assert np.array_equal(spec.chunks(np.float32([0, -0.5, 0.999, 1, 5, -np.inf])), [1, 17, 32, 32, 32, 32])


@pytest.mark.parametrize("variant", DIV.variants, ids=lambda v: v.name)
def test_trips_on_the_device_is_chunks(variant):
    trips = variant.module.trips

    @cuda.jit
    def trips_kernel(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = trips(x[i])

    x = _boundaries()
    out = cuda.to_device(np.zeros(x.size, np.int64))
    trips_kernel[1, x.size](cuda.to_device(x), out)
    got = out.copy_to_host()
    want = spec.chunks(x)
    assert np.array_equal(got, want), f"first mismatch at x = {x[np.argmax(got != want)]!r}"


@pytest.mark.parametrize("variant", DIV.variants, ids=lambda v: v.name)
def test_boundary_values_in_both_arms(variant):
    # each value at an even and at an odd index; in the odd arm one chunk more or less changes
    # z = x (1 - B^T) / (1 - B) by far more than the tolerance for T up to ~100 steps
    x = np.repeat(_boundaries()[np.isfinite(_boundaries())], 2)
    x = x[np.abs(x) <= 1]  # the spec makes |x| < 1: beyond, the even arm grows like x^512
    got = _run(variant, x)
    np.testing.assert_allclose(got, spec.reference(x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("variant", DIV.variants, ids=lambda v: v.name)
def test_second_call_with_new_inputs(variant):
    for size, seed, kind in ((37, 1, "uniform"), (6, 2, "skewed"), (70, 3, "skewed")):
        (x,) = DIV.inputs(size, seed, kind)
        ok, err, detail = harness.compare(_run(variant, x), spec.reference(x), DIV.tolerance(size))
        assert ok, f"{variant.name} at {size} {kind} (seed {seed}): {detail}"


@pytest.mark.parametrize("size", [2, 63, 64, 65, 129, 300])
@pytest.mark.parametrize("name", ["v02", "v05"])
def test_tails_of_warp_pairs_and_blocks(name, size):
    # v02: a last warp pair with fewer than 64 elements, its odd warp shorter (or idle);
    # v05: a last block with fewer than 256 elements to sort
    (x,) = DIV.inputs(size, 40 + size, "skewed")
    ok, err, detail = harness.compare(_run(DIV[name], x), spec.reference(x), DIV.tolerance(size))
    assert ok, f"{name} at {size}: {detail}"


def _parity_keeping_shuffle(n, seed):
    """A permutation of 0 .. n-1 that sends even indices to even ones and odd to odd."""
    rng = np.random.default_rng(seed)
    p = np.arange(n)
    for parity in (0, 1):
        p[parity::2] = rng.permutation(p[parity::2])
    return p


@pytest.mark.parametrize("variant", DIV.variants, ids=lambda v: v.name)
def test_each_result_lands_at_its_own_index(variant):
    # An element's result depends on its x and its index's parity only. Shuffling the input
    # (keeping parities) must shuffle the output the same way, bit for bit: v05, which
    # computes elements in sorted order, has to write each one back where it came from.
    n = 300  # a full block of v05 and a partial one
    mags = np.linspace(0.999, 0.0, n)  # counts fall with the index: v05's sort moves almost every element
    x = (mags * np.where(np.arange(n) % 3 == 0, -1.0, 1.0)).astype(np.float32)
    p = _parity_keeping_shuffle(n, 7)
    plain = _run(variant, x)
    shuffled = _run(variant, x[p])
    assert np.array_equal(shuffled, plain[p])
    np.testing.assert_allclose(plain, spec.reference(x), rtol=1e-5, atol=1e-7)


def test_steps_of_one_form_give_the_same_bits():
    # the same FMAs in the same order for every element, whatever the mapping, the branch or the
    # order of work: v01 and v02 run z <- z m + c; v03 to v05 run w <- w m + 1 and scale by c
    # (v03's chunks after a lane's count are computed and dropped, never mixed in)
    (x,) = DIV.inputs(200, 9, "skewed")
    forms = {"z": ("v01", "v02"), "w": ("v03", "v04", "v05")}
    for form, names in forms.items():
        first = _run(DIV[names[0]], x)
        for name in names[1:]:
            assert np.array_equal(_run(DIV[name], x), first), (form, name)
    assert {v.name[:3] for v in DIV.variants} == {n for names in forms.values() for n in names}
    # the two forms round differently, and both stay within the spec's tolerance of float64
    np.testing.assert_allclose(_run(DIV["v01"], x), _run(DIV["v03"], x), rtol=2e-6, atol=1e-7)


def test_reference_at_a_sample_is_the_reference():
    (x,) = DIV.inputs(500, 10, "skewed")
    idx = np.array([0, 1, 2, 77, 78, 301, 499])
    assert np.array_equal(spec.reference_at(x[idx], idx), spec.reference(x)[idx])


# -- the sweep ---------------------------------------------------------------------
@pytest.mark.parametrize("long_lanes", [0, 1, 5, 32])
def test_sweep_inputs_put_exactly_that_many_long_lanes_in_each_warp(long_lanes):
    n = 32 * 7 + 13  # and a partial last group
    trips = spec.chunks(sweep.inputs(n, long_lanes, seed=3))
    assert set(np.unique(trips)) <= {1, spec.N_CHUNKS}
    groups = np.add.reduceat(trips == spec.N_CHUNKS, np.arange(0, n, 32))
    assert (groups[:-1] == long_lanes).all() and groups[-1] <= long_lanes
    if 0 < long_lanes < 32:  # random lanes, not the same ones in every warp
        assert len({tuple(np.flatnonzero(trips[g : g + 32] == spec.N_CHUNKS)) for g in range(0, n - 32, 32)}) > 1


def test_sweep_work_fraction():
    assert sweep.work(0) == pytest.approx(1 / 32)
    assert sweep.work(32) == 1.0
    assert sweep.work(1) == pytest.approx((32 + 31) / (32 * 32))


def test_sweep_writes_csv_and_png(zoo_cli, tmp_path):
    r = zoo_cli("divergence", "--out", str(tmp_path), "--size", "70", "--long-lanes", "0,1,32", "--steps", "v02,v05")
    assert r.returncode == 0, r.stdout + r.stderr
    (table,) = tmp_path.glob("*-divergence.csv")
    (png,) = tmp_path.glob("*-divergence.png")
    assert png.stat().st_size > 0
    with open(table, newline="") as f:
        assert tuple(next(csv.reader(f))) == sweep.COLUMNS
    rows = sweeps.read_csv(table)
    assert [(r["long_lanes"], r["variant"]) for r in rows] == [
        (c, v) for c in (0, 1, 32) for v in ("v02_warp_uniform", "v05_regrouped")
    ]
    assert all(r["correct"] == "True" for r in rows)


def _gpu_rows():
    rows = []
    for c in (0, 1, 2, 4, 8, 16, 32):
        f = sweep.work(c)
        for name, ms in (
            ("v03_branch_free", 1.0),
            ("v04_data_dependent_loop", 0.05 if c == 0 else 0.95),
            ("v05_regrouped", 0.1 + f),
            ("baseline", 0.05 if c == 0 else 0.9),
        ):
            rows.append(
                dict(
                    size=1 << 24, long_lanes=c, fraction=c / 32, variant=name, work=f, ms=ms, gflops=1.0, correct="True"
                )
            )
    return rows


def test_sweep_plot_draws_one_line_per_step_and_the_work_line():
    fig = sweep.plot(_gpu_rows(), "NVIDIA H200")
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines]
    assert labels[:3] == ["v03_branch_free", "v04_data_dependent_loop", "v05_regrouped"]
    assert any(label.startswith("baseline") for label in labels)
    assert any("work" in label for label in labels)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0/32", "1/32", "2/32", "4/32", "8/32", "16/32", "32/32"]


def test_sweep_plot_says_when_nothing_was_timed():
    rows = [dict(size=70, long_lanes=0, fraction=0.0, variant="v03_branch_free", work=1 / 32, correct="True")]
    fig = sweep.plot(rows, "numba CUDA simulator")
    assert "no timings" in fig.axes[0].texts[0].get_text()


def test_sweep_refuses_bad_lists():
    with pytest.raises(ValueError, match="from 0 to 32"):
        sweep._numbers("1,33")
    with pytest.raises(ValueError, match="from 0 to 32"):
        sweep._numbers("x")


@pytest.mark.parametrize("kind", spec.INPUT_KINDS)
def test_the_closed_form_reference_is_the_recurrence_stepped(kind):
    (x,) = spec.make_inputs(4099, 7, kind)
    x[:4] = [1.0, -1.0, np.nextafter(np.float32(1), np.float32(0)), 0.0]  # m = 1, m = -1, m just below 1, zero
    idx = np.arange(x.size)
    np.testing.assert_allclose(
        spec.reference_at(x, idx), spec.recurrence_at(x, idx), rtol=1e-10, atol=1e-12
    )  # 1 - m^T near m = 1
