"""latency beyond the generic checks: the reservation, grid-stride passes, misaligned views, and the three sweeps
(the pointer chase, bytes in flight, FMAs in flight)."""

import csv

import numpy as np
import pytest
from numba import cuda, uint32

import zoo
from zoo.bench import results, sweeps
from zoo.errors import OutOfRange
from zoo.kernels.latency import v01_low_occupancy, v02_full_occupancy, v04_float4_in_flight
from zoo.kernels.latency.sweeps import bytes_in_flight as bytes_sweep
from zoo.kernels.latency.sweeps import chase, littles_law
from zoo.kernels.latency.sweeps import fmas_in_flight as fma_sweep

FAM = zoo.family("latency")


def _check(variant, x):
    out = np.full_like(x, np.nan)
    return np.array_equal(variant(x, out=out), np.float32(2) * x + np.float32(1))


@pytest.mark.parametrize("variant", FAM.variants, ids=lambda v: v.name)
def test_second_call_with_new_inputs(variant):
    for size, seed in ((37, 1), (6, 2), (37, 3)):
        (x,) = FAM.make_inputs(size, seed)
        assert _check(variant, x), f"{variant.name} at {size} (seed {seed})"


def test_v01_reserves_48_kb_and_v02_nothing():
    (x,) = FAM.make_inputs(300, 4)
    FAM["v01"](x)
    FAM["v02"](x)
    assert v01_low_occupancy.axpb_kernel.last_launch.shared_bytes == 48 * 1024
    assert v01_low_occupancy.axpb_kernel.last_launch.threads_per_block == 128
    assert v02_full_occupancy.axpb_kernel.last_launch.shared_bytes == 0


def test_v03_grid_stride_takes_several_passes_and_a_partial_one(monkeypatch):
    monkeypatch.setattr(FAM["v03"].module, "BLOCKS_PER_SM", 1)  # 256 threads, 1024 elements a pass
    (x,) = FAM.make_inputs(4099, 5)
    assert _check(FAM["v03"], x)


def test_v04_several_passes_and_the_tail():
    # one block of 256 threads x 1 float4 = 1024 elements a pass: 4 passes, then 3 tail elements
    (x,) = FAM.make_inputs(4099, 6)
    dx, out = cuda.to_device(x), cuda.to_device(np.full_like(x, np.nan))
    v04_float4_in_flight.build(1)[1, 256](dx, out, uint32(x.size))
    assert np.array_equal(out.copy_to_host(), np.float32(2) * x + np.float32(1))


def test_v04_falls_back_on_a_misaligned_view(monkeypatch):
    calls = {}
    kernel_type = type(v04_float4_in_flight.axpb4_kernel)
    original = kernel_type.__getitem__
    monkeypatch.setattr(
        kernel_type,
        "__getitem__",
        lambda self, config: calls.setdefault(self.__name__, []).append(config) or original(self, config),
    )
    (x,) = FAM.make_inputs(41, 7)
    backing = cuda.to_device(np.concatenate([np.zeros(1, np.float32), x]))
    out = cuda.device_array(41, np.float32)
    FAM["v04"](backing[1:], out=out)  # 4 bytes past a 16-byte boundary
    assert np.array_equal(out.copy_to_host(), np.float32(2) * x + np.float32(1))
    assert list(calls) == ["four_loads_kernel"]
    FAM["v04"](x)
    assert list(calls) == ["four_loads_kernel", "axpb4_kernel"]


@pytest.mark.parametrize("name", ["v03", "v04"])
def test_uint32_steps_refuse_2_to_the_31_elements(name):
    huge = np.broadcast_to(np.float32(0), (1 << 31,))  # no memory behind it
    with pytest.raises(OutOfRange, match="fewer than 2\\^31"):
        FAM[name].module.validate(huge)
    FAM[name].module.validate(huge[:-1])


# -- zoo latency: the pointer chase -------------------------------------------------
def test_cycle_is_one_loop_through_every_node():
    successor, order = chase.cycle(1000, seed=3)
    seen, j = set(), int(order[0])
    for _ in range(1000):
        seen.add(j)
        j = int(successor[j])
    assert j == order[0] and len(seen) == 1000
    assert np.array_equal(successor[order[:-1]], order[1:])


def test_chase_array_puts_one_node_per_line():
    table, starts = chase.chase_array(64 * chase.LINE, seed=4)
    assert table.nbytes == 64 * chase.LINE
    assert np.all(starts % chase.NODE_STRIDE == 0)
    nodes = table[:: chase.NODE_STRIDE]
    assert sorted(nodes // chase.NODE_STRIDE) == list(range(64))  # a permutation of the line-aligned nodes
    assert not table[np.arange(table.size) % chase.NODE_STRIDE != 0].any()


@pytest.mark.parametrize("kernel,threads", [(chase.chase_kernel, 1), (chase.shared_chase_kernel, 32)])
def test_chase_kernels_end_where_numpy_does(kernel, threads):
    if kernel is chase.shared_chase_kernel:
        successor, order = chase.cycle(chase.SHARED_NODES, seed=5)
        table = successor
    else:
        table, order = chase.chase_array(256 * chase.LINE, seed=5)
    out = cuda.device_array(1, np.uint32)
    for start, steps in ((order[3], 50), (order[7], 17)):  # a second call, other start and length
        kernel[1, threads](cuda.to_device(table), uint32(steps), uint32(start), out)
        assert int(out.copy_to_host()[0]) == chase.follow(table, start, steps)


def _chase_rows():
    return [
        dict(series=s, footprint_bytes=b, steps=1 << 16, ns_per_step=ns, cycles_per_step=ns * 1.98)
        for s, b, ns in (("chase-dram", 1 << 30, 700.0), ("chase-l2", 16 << 20, 260.0), ("chase-shared", 32768, 15.0))
    ]


def test_chase_plot_draws_a_bar_per_memory_and_findings_need_the_loaded_latency():
    rows = _chase_rows()
    assert len(chase.plot(rows, "NVIDIA H200").axes[0].patches) == 3
    assert chase.findings(rows) == []  # no loaded latency: nothing to compare
    rows.append(dict(series="chase-dram-loaded", footprint_bytes=1 << 30, steps=1024, ns_per_step=2100.0, gbps=3900.0))
    assert len(chase.plot(rows, "NVIDIA H200").axes[0].patches) == 4
    (line,) = chase.findings(rows)
    assert "700 ns unloaded; 2,100 ns (3.0x) while copies stream at 3,900 GB/s" in line


# -- zoo bytes-in-flight ------------------------------------------------------------
@pytest.mark.parametrize("per_sm", [1, 2, 3, 4, 5, 8, 16, 32])
def test_reservation_fits_exactly_that_many_blocks(per_sm):
    smem, system = 233472, 1024  # Hopper: 228 KB a SM, 1 KB a block kept by the system
    r = bytes_sweep.reservation(per_sm, smem, system)
    assert r >= 0 and r <= 232448  # at most the 227 KB a block may opt in to
    assert per_sm * (r + system) <= smem < (per_sm + 1) * (r + system)


def _bandwidth_rows(loaded=True):
    rows = [dict(series="chase-dram", footprint_bytes=1 << 30, steps=1 << 16, ns_per_step=700.0)]
    if loaded:
        rows.append(
            dict(series="chase-dram-loaded", footprint_bytes=1 << 30, steps=1024, ns_per_step=2100.0, gbps=3900.0)
        )
    for kb in (1, 4, 16, 64, 256):
        rows.append(
            dict(
                series="bandwidth",
                threads_per_block=256,
                blocks_per_sm=1,
                resident_blocks_per_sm=1,
                loads_per_thread=1,
                bytes_in_flight_per_sm=kb * 1024,
                gbps=min(400.0 * kb, 4000.0),
                little=1.0,
                ceiling=4100.0,
                sms=132,
                correct="True",
            )
        )
    return rows


def test_bandwidth_plot_draws_the_littles_law_lines():
    fig = bytes_sweep.plot(_bandwidth_rows(loaded=False), "NVIDIA H200")
    (ax,) = fig.axes
    little = next(line for line in ax.lines if line.get_label().startswith("Little"))
    assert max(little.get_ydata()) == pytest.approx(4100.0)  # capped at the copy bandwidth
    assert not any(line.get_label().startswith("Little with the loaded") for line in ax.lines)


def test_bandwidth_findings_compare_the_knees_with_the_loaded_latency():
    rows = _bandwidth_rows()
    text = "\n".join(bytes_sweep.findings(rows))
    unloaded, loaded = (f"{littles_law.little_knee(ns, 4100.0, 132) / 1024:.1f} KB" for ns in (700.0, 2100.0))
    assert f"{unloaded} with the unloaded latency (700 ns), {loaded} with the loaded one (2,100 ns)" in text
    points = [r for r in rows if r["series"] == "bandwidth"]
    knee, top = littles_law.measured_knee(points, "bytes_in_flight_per_sm", "gbps")
    assert f"at {knee / 1024:.1f} KB per SM" in text
    needed = 2100.0 * 0.9 * top / (2 * 132)  # ns x GB/s = bytes, for 90% of the highest point
    assert f"needs {needed / 1024:.1f} KB per SM for {0.9 * top:,.0f} GB/s" in text
    assert f"with {knee / needed:.2f}x that" in text
    labels = [line.get_label() for line in bytes_sweep.plot(rows, "NVIDIA H200").axes[0].lines]
    assert any(label.startswith("Little with the loaded latency, 2,100 ns") for label in labels)
    assert any(label.startswith("measured: 90%") for label in labels)


# -- zoo fmas-in-flight -------------------------------------------------------------
def test_fma_kernel_matches_the_closed_form():
    out = cuda.device_array(64, np.float32)
    fma_sweep.build_fma(3)[2, 32](out, uint32(2), np.float32(1.0))
    want = fma_sweep.fma_expected(64, 3, 2, 1.0)
    assert np.allclose(out.copy_to_host(), want, rtol=1e-4)
    assert not np.allclose(fma_sweep.fma_expected(64, 3, 1, 1.0), want, rtol=1e-4)  # the check sees a missing pass


def _fma_rows():
    rows = [dict(series="fma-latency", chains=1, ns_per_step=2.0, sms=132, correct="True")]
    for chains in (1, 8):
        rows.append(
            dict(
                series="fma",
                chains=chains,
                fmas_in_flight_per_sm=256 * chains,
                tflops=8.0 * chains,
                little=1.0,
                ceiling=60.0,
                sms=132,
                correct="True",
            )
        )
    return rows


def test_fma_plot_and_findings_use_the_fma_latency():
    (ax,) = fma_sweep.plot(_fma_rows(), "NVIDIA H200").axes
    assert any(line.get_label().startswith("Little: FMA latency 2.00 ns") for line in ax.lines)
    (line,) = fma_sweep.findings(_fma_rows())
    knee = littles_law.little_knee(2.0, 60.0 * 1e3, 132)
    assert line.startswith(f"FMA (latency 2.00 ns, peak 60.0 TFLOP/s): below Little's knee of {knee:,.0f} FMAs")


# -- all three ----------------------------------------------------------------------
SWEEPS = {  # command: (module, options, the series of the rows it writes in the simulator)
    "latency": (chase, [], ["chase-dram", "chase-l2", "chase-shared"]),
    "bytes-in-flight": (
        bytes_sweep,
        ["--size", "517", "--threads", "32", "--blocks-per-sm", "1,2", "--loads", "2"],
        ["chase-dram", "bandwidth", "bandwidth"],
    ),
    "fmas-in-flight": (fma_sweep, ["--chains", "1,4"], ["fma-latency", "fma", "fma"]),
}


@pytest.mark.skipif(not zoo.SIMULATOR, reason="on a GPU, .ci/gpu-session runs the sweeps at full size")
@pytest.mark.parametrize("command", list(SWEEPS))
def test_sweep_writes_csv_and_png(zoo_cli, tmp_path, command):
    module, options, series = SWEEPS[command]
    r = zoo_cli(command, "--out", str(tmp_path), *options)
    assert r.returncode == 0, r.stdout + r.stderr
    (table,) = tmp_path.glob(f"*-{command}.csv")
    (png,) = tmp_path.glob(f"*-{command}.png")
    assert png.stat().st_size > 0
    with open(table, newline="") as f:
        assert tuple(next(csv.reader(f))) == module.COLUMNS
    rows = sweeps.read_csv(table)
    assert [r["series"] for r in rows] == series
    assert all(r["correct"] == "True" for r in rows)
    if command == "bytes-in-flight":
        assert [r["blocks_per_sm"] for r in rows if r["series"] == "bandwidth"] == [1, 2]
    if command == "fmas-in-flight":
        assert [r["chains"] for r in rows if r["series"] == "fma"] == [1, 4]


@pytest.mark.parametrize("module", [chase, bytes_sweep, fma_sweep], ids=lambda m: m.COMMAND)
def test_sweep_plot_says_when_nothing_was_timed(module):
    rows = [dict(series="chase-dram", footprint_bytes=1, steps=64, correct="True")]
    fig = module.plot(rows, "numba CUDA simulator")
    assert "no timings" in fig.axes[0].texts[0].get_text()


def test_sweeps_are_commands_of_their_own():
    found = sweeps.modules()
    for command, (module, _, _) in SWEEPS.items():
        assert found[command] is module


def test_sweep_refuses_bad_lists():
    with pytest.raises(ValueError, match="positive integers"):
        littles_law.numbers("1,x")


def test_measured_knee_interpolates_where_the_best_point_reaches_90_percent():
    rows = [dict(x=1, y=10.0), dict(x=2, y=50.0), dict(x=2, y=20.0), dict(x=4, y=100.0), dict(x=8, y=95.0)]
    knee, top = littles_law.measured_knee(rows, "x", "y")
    assert top == 100.0
    assert knee == pytest.approx(2 * 2 ** ((90 - 50) / (100 - 50)))  # between 2 (best 50) and 4 (100), in log x
    assert littles_law.measured_knee([dict(x=3, y=5.0)], "x", "y") == (3.0, 5.0)  # saturated from the first point
    assert littles_law.little_knee(500.0, 4000.0, 100) == pytest.approx(4000.0 * 500.0 / 200)  # GB/s x ns = bytes


def test_sweeps_ask_a_module_for_findings_only_if_it_has_them():
    assert sweeps.findings(object(), []) == []  # a sweep module without findings: nothing to add
    assert sweeps.findings(fma_sweep, _fma_rows()) == fma_sweep.findings(_fma_rows())


def test_report_puts_the_findings_under_the_sweep_plot(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from zoo.tools import report

    table = sweeps.write_csv(tmp_path / "nvidia-h200-bytes-in-flight.csv", bytes_sweep.COLUMNS, _bandwidth_rows())
    monkeypatch.setattr(sweeps, "saved", lambda: [("nvidia-h200", "bytes-in-flight", table)])
    monkeypatch.setattr(sweeps, "png_path", lambda slug, command, root=None: tmp_path / f"{slug}-{command}.png")
    monkeypatch.setattr(results, "ROOT", tmp_path)
    list(report._redraw({}, None))  # draws the sweep's chart from its CSV
    sections = report.sweep_sections({})
    (text,) = [s for s in sections if s.startswith("### `python -m zoo bytes-in-flight`")]
    assert "nvidia-h200-bytes-in-flight.png)" in text  # the chart just drawn, then the findings under it
    found = bytes_sweep.findings(sweeps.read_csv(table))
    assert found and text.endswith("\n".join(f"- {line}" for line in found))
