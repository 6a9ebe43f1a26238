"""The roofline family beyond the generic checks: k as a parameter, repeated calls, the sweep, the ceilings."""

import numpy as np
import pytest

import zoo
from zoo.bench import ceilings, harness, results, sweeps
from zoo.errors import OutOfRange
from zoo.kernels import roofline as spec
from zoo.kernels.roofline.sweeps import arithmetic_intensity as sweep

ROOFLINE = zoo.family("roofline")
STEPS = ROOFLINE.variants
# 1 and 2: copy and one FMA; 3, 5, 9: leftovers of the four-chain split; 17: v05's UNROLL + 1;
# 130: every step's uint32 block loop runs at least once (v02 64, v03 16 x 4, v04 32 x 4, v05 16).
KS = (1, 2, 3, 5, 9, 17, 130)


def test_reference_is_the_sum_of_powers():
    a = np.array([-0.9, -0.3, 0.0, 0.5, 0.9], np.float32)
    x = a.astype(np.float64)
    for k in (1, 2, 7, 40):
        assert np.allclose(spec.reference(a, k), sum(x**j for j in range(1, k + 1)), rtol=1e-13, atol=0)


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
@pytest.mark.parametrize("k", KS)
def test_every_step_at_every_k(variant, k):
    r = harness.check(variant, 37, seed=k, k=k)  # 37: nine float4 groups and a tail of one for v05
    assert r.ok, r.detail


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_a_second_call_with_new_inputs_new_k_and_new_size(variant):
    for size, k, seed in ((1000, 6, 1), (41, 3, 2), (1000, 6, 3)):
        (a,) = ROOFLINE.make_inputs(size, seed)
        got = variant(a, k=k)
        ok, _, detail = harness.compare(got, spec.reference(a, k), spec.TOLERANCE)
        assert ok, f"size {size}, k {k}: {detail}"


@pytest.mark.parametrize("k", (0, -1, 1.5, True, spec.K_MAX + 1))
def test_bad_k_is_refused_before_launch(k):
    (a,) = ROOFLINE.make_inputs(8, 0)
    with pytest.raises(ValueError, match="k must be an integer"):
        ROOFLINE["v02"](a, k=k)


def test_compile_time_steps_build_one_kernel_per_k():
    for variant in STEPS[1:]:
        build = variant.module.kernel_for
        assert build(11) is build(11) and build(11) is not build(12)


def test_v05_refuses_sizes_its_uint32_indices_cannot_reach():
    v05 = ROOFLINE["v05"].module
    huge = np.broadcast_to(np.float32(0), (v05.LIMIT,))  # no memory behind it
    with pytest.raises(OutOfRange, match="uint32"):
        v05.validate(huge)
    v05.validate(huge[:-1])


def test_counts_are_the_seeds():
    assert spec.flops(1000, k=7) == 2 * 7 * 1000
    assert spec.flops(10) == 2 * spec.K_DEFAULT * 10
    assert spec.bytes_moved(1000) == 8000


# -- the ceilings ---------------------------------------------------------------------
@pytest.mark.skipif(not zoo.SIMULATOR, reason="the simulator has nothing to measure")
def test_ceilings_are_none_in_the_simulator():
    assert ceilings.copy_bandwidth() is None and ceilings.fp32_peak() is None
    m = ceilings.measured()
    assert m["copy_bandwidth_gbs"] is None and m["fp32_peak_gflops"] is None and m["ridge_ai"] is None
    assert set(m) == {
        "device",
        "copy_bandwidth_gbs",
        "fp32_peak_gflops",
        "datasheet_bandwidth_gbs",
        "datasheet_fp32_gflops",
        "ridge_ai",
    }


@pytest.mark.skipif(zoo.SIMULATOR, reason="needs a GPU")
def test_measured_ceilings_are_plausible_against_the_datasheet():
    m = ceilings.measured()
    assert m["copy_bandwidth_gbs"] > 0 and m["fp32_peak_gflops"] > 0
    assert m["ridge_ai"] == pytest.approx(m["fp32_peak_gflops"] / m["copy_bandwidth_gbs"])
    if m["datasheet_bandwidth_gbs"]:  # above the nominal figure means bytes or FLOPs are over-counted
        assert m["copy_bandwidth_gbs"] < 1.05 * m["datasheet_bandwidth_gbs"]
        assert m["fp32_peak_gflops"] < 1.05 * m["datasheet_fp32_gflops"]


def test_datasheet_takes_the_longest_matching_name():
    assert ceilings.datasheet("NVIDIA H100 PCIe")["bandwidth_gbs"] == 2000.0
    assert ceilings.datasheet("NVIDIA H100 80GB HBM3")["bandwidth_gbs"] == 3350.0
    assert ceilings.datasheet("NVIDIA H200")["fp32_gflops"] == 66900.0
    assert ceilings.datasheet("NVIDIA H200 NVL")["fp32_gflops"] == 60000.0
    assert ceilings.datasheet("numba CUDA simulator") is None


def test_the_peak_kernel_computes_what_its_flop_count_says():
    from numba import cuda

    threads, iterations = 4, 2
    out = cuda.device_array(threads, np.float32)
    ceilings._fma_peak[1, threads](out, np.uint32(iterations), np.float32(1.0))
    x = np.float32(1.0) + np.arange(threads, dtype=np.float32) * np.float32(1e-9)
    chains = [(x + np.float32(j / 10)).astype(np.float64) for j in range(ceilings.CHAINS)]
    for _ in range(iterations * ceilings.INNER):
        chains = [c * 0.9999 + 1e-4 for c in chains]
    assert np.allclose(out.copy_to_host(), sum(chains), rtol=1e-5)
    per_thread = 2 * ceilings.CHAINS * ceilings.INNER * iterations
    assert ceilings.peak_flops_per_launch(1, threads, iterations) == per_thread * threads


# -- the sweep command ------------------------------------------------------------------
def test_the_sweep_command_writes_csv_and_png(tmp_path, zoo_cli):
    r = zoo_cli("roofline", "--k", "1,2,5", "--size", "4099", "--out", str(tmp_path))  # the simulator's own k and size
    assert r.returncode == 0, r.stderr
    slug = sweeps.SIMULATOR_SLUG if zoo.SIMULATOR else None
    csv_file = next(tmp_path.glob(f"{slug or '*'}-roofline.csv"))
    assert next(tmp_path.glob(f"{slug or '*'}-roofline.png")).stat().st_size > 0
    rows = sweeps.read_csv(csv_file)
    assert tuple(rows[0]) == sweep.COLUMNS
    assert {"k", "ai", "gflops", "bandwidth", "percent_peak"} <= set(rows[0])
    swept = [row for row in rows if row["series"] == "sweep"]
    ks = (1, 2, 5)
    assert {(row["variant"], row["k"]) for row in swept} >= {(v.name, k) for v in STEPS for k in ks}
    assert all(row["correct"] == "True" for row in swept)
    assert all(row["ai"] == row["k"] / 4 for row in swept)
    assert {row["variant"] for row in rows if row["series"] == "ceiling"} == {"measured", "datasheet"}


def test_the_plot_draws_both_roofs_the_ridge_and_each_sweep_from_csv_rows(tmp_path):
    rows = []
    for name, share in (("v01_seed_loop", 0.1), ("v05_eight_per_thread", 0.9)):
        for k in spec.K_SWEEP:
            ai = k / 4
            gflops = share * min(60000.0, 4000.0 * ai)
            rows.append(
                {
                    "series": "sweep",
                    "variant": name,
                    "k": k,
                    "ai": ai,
                    "gflops": gflops,
                    "bandwidth": gflops / ai,
                    "percent_peak": 100 * share,
                    "mean_ms": 1.0,
                    "rms_spread": 0.01,
                    "correct": "True",
                }
            )
    rows += [
        {"series": "ceiling", "variant": "measured", "ai": 15.0, "gflops": 60000.0, "bandwidth": 4000.0},
        {"series": "ceiling", "variant": "datasheet", "ai": 13.9375, "gflops": 66900.0, "bandwidth": 4800.0},
    ]
    path = sweeps.write_csv(tmp_path / "r.csv", sweep.COLUMNS, rows)
    fig = sweep.plot(sweeps.read_csv(path), "a GPU with no results file")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert sum(label.startswith(("measured roofs", "datasheet roofs")) for label in labels) == 2
    assert sum("(k sweep)" in label for label in labels) == 2
    ridge = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("ridge (measured)")]
    assert ridge == ["ridge (measured) 15.0 FLOP/B"]


def test_crowded_roofline_labels_do_not_overlap():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    fig, ax = plt.subplots(figsize=(6, 4))
    items = [(700 * (1 + 0.01 * i), 40000 * (1 + 0.02 * i), f"v{i:02d}") for i in range(12)]
    ax.scatter([x for x, _, _ in items], [y for _, y, _ in items])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(100, 5000)
    ax.set_ylim(1e4, 1e5)
    fig.tight_layout()
    sweep.place_labels(ax, items)
    fig.canvas.draw()
    boxes = [Text.get_window_extent(t) for t in ax.texts]  # the text alone, not its leader line
    assert len(boxes) == 12
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    naive = [ax.annotate(text, (x, y), textcoords="offset points", xytext=(3, 3)) for x, y, text in items]
    fig.canvas.draw()
    crowded = [Text.get_window_extent(t) for t in naive]  # what one fixed offset did: labels on labels
    assert sum(a.overlaps(b) for i, a in enumerate(crowded) for b in crowded[i + 1 :]) > 5
    plt.close(fig)


def test_tensor_core_points_get_their_own_roof(monkeypatch):
    rows = [
        {"series": "ceiling", "variant": "measured", "ai": 15.0, "gflops": 60000.0, "bandwidth": 4000.0},
        {"series": "ceiling", "variant": "datasheet", "ai": 13.9, "gflops": 66900.0, "bandwidth": 4800.0},
    ]
    data = {
        "device": {"name": "NVIDIA H200"},
        "families": {
            "hgemm": {
                "4096": {
                    "baseline": {"gflops": 680000.0, "gbps": 680.0},
                    "v07_block_swizzle": {"gflops": 380000.0, "gbps": 380.0},
                }
            }
        },
    }
    monkeypatch.setattr(results, "load_all", lambda: {"nvidia-h200": data})
    fig = sweep.plot(rows, "NVIDIA H200")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    roof = [label for label in labels if label.startswith("FP16 tensor-core roof")]
    assert roof == [
        "FP16 tensor-core roof: 680 TFLOP/s (measured: hgemm baseline at 4096); for the tensor-core steps of hgemm"
    ]
    assert sweep.tensor_rows()["hgemm"] is None  # every hgemm step calls mma.sync: its library rows count too
    monkeypatch.setattr(
        results,
        "load_all",
        lambda: {
            "nvidia-h200": {
                **data,
                "families": {"hgemm": {"4096": {"v07_block_swizzle": {"gflops": 380000.0, "gbps": 380.0}}}},
            }
        },
    )
    assert sweep.tensor_roof("NVIDIA H200", {"hgemm"}) == (989400.0, "datasheet, dense FP16")
