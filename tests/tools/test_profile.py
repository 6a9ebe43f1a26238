"""Profiling: the simulator's memory and divergence counters teach what Nsight Compute measures, ncu's
output is read and saved right, the pages and the roofline show it, and counting costs nothing when off."""

import json
import os
import stat
import sys
import textwrap
import threading

import numpy as np
import pytest

import zoo
from zoo.bench import harness, results
from zoo.tools import profile, walkthrough
from zoo.tools.profile import counters, ncu, prose, simulated

sim_only = pytest.mark.skipif(not zoo.SIMULATOR, reason="the simulator's counters")


def _counted(family, step, size, memory=True, divergence=False):
    """The summary of one call counted in the simulator (with the GPU's constants)."""
    from zoo.tools.profile import sim_counters

    variant = zoo.family(family)[step]
    checks = []
    with simulated.gpu_constants(variant):
        launches = sim_counters.count(
            lambda: checks.append(harness.check(variant, size)), memory=memory, divergence=divergence
        )
    assert checks[-1].ok, f"{family} {step} gave a wrong result while counted: {checks[-1].detail}"
    return simulated.sim_summary(launches)


# -- the teaching facts, counted in the simulator -----------------------------------------------
@sim_only
def test_transpose_naive_writes_scatter_and_the_tile_coalesces_them():
    naive = _counted("transpose", "v01", (64, 64))
    tiled = _counted("transpose", "v02", (64, 64))
    assert naive["global_load_sectors_per_request"] == 4  # 32 lanes x 4 bytes along a row
    assert naive["global_store_sectors_per_request"] == 32  # 32 lanes down a column: a sector each
    assert tiled["global_store_sectors_per_request"] == 4
    assert tiled["global_load_sectors_per_request"] == 4


@sim_only
def test_transpose_tile_read_down_a_column_conflicts_and_the_padded_one_does_not():
    tiled = _counted("transpose", "v02", (64, 64))
    padded = _counted("transpose", "v03", (64, 64))
    assert tiled["shared_load_conflicts_per_request"] == 31  # 32 words 32 apart: one bank, 32 wavefronts
    assert tiled["shared_store_conflicts_per_request"] == 0
    assert padded["shared_load_conflicts_per_request"] == 0
    assert padded["shared_load_wavefronts_per_request"] == 1


@sim_only
def test_reduce_strided_tree_has_bank_conflicts_and_the_sequential_one_none():
    strided = _counted("reduce", "v02", 1024)
    sequential = _counted("reduce", "v03", 1024)
    assert strided["shared_load_conflicts_per_request"] > 1
    assert strided["shared_store_conflicts_per_request"] > 1
    assert sequential["shared_load_conflicts_per_request"] == 0
    assert sequential["shared_store_conflicts_per_request"] == 0


@sim_only
def test_counting_runs_over_the_exercise_checkers_shared_arrays_too():
    """One process may hold both patches of cuda.shared.array (a pytest worker that checked an exercise, then counts):
    the counter calls the checker's with caller_depth, which the checker must take as the simulator's does."""
    from zoo.exercise import observe

    observe.install()
    counted = _counted("reduce", "v03", 1024)
    assert counted["shared_load_conflicts_per_request"] == 0


@sim_only
def test_divergence_parity_branch_diverges_and_the_warp_uniform_one_does_not():
    parity = _counted("divergence", "v01", 256, memory=False, divergence=True)
    uniform = _counted("divergence", "v02", 256, memory=False, divergence=True)
    assert parity["divergent_branches"] > 0
    assert parity["threads_per_instruction"] < 31
    assert uniform["divergent_branches"] == 0
    assert uniform["threads_per_instruction"] == 32


@sim_only
def test_sgemm_v06_transposed_stores_and_float4_reads_conflict_and_v07_removes_both():
    v06 = _counted("sgemm", "v06", (128, 128, 8))
    v07 = _counted("sgemm", "v07", (128, 128, 8))
    # v06: the two threads of an A row store 512 words apart (2-way); a quarter-warp's float4 reads of B
    # are 32 bytes apart, so each bank serves two words: 8 wavefronts where 4 would do
    assert v06["shared_store_conflicts_per_request"] > 0.5
    assert v06["shared_load_conflicts_per_request"] == 2  # (0 + 0 + 4 + 4) over the four float4 loads a kk
    assert v07["shared_store_conflicts_per_request"] == 0
    assert v07["shared_load_conflicts_per_request"] == 0
    assert v06["global_load_sectors_per_request"] == 16  # float4 loads: one 16-byte access a lane


@sim_only
def test_a_float4_load_counts_as_one_16_byte_access():
    from zoo.tools.profile import sim_counters

    fam = zoo.family("elementwise")
    launches = sim_counters.count(lambda: harness.check(fam["v04"], 1024), divergence=False)
    main = sim_counters.busiest(launches)
    assert main.global_load.requests == 1024 // 4 // 32  # a warp reads 32 float4: one request
    assert main.global_load.sectors_per_request == 16


@sim_only
def test_a_divergent_guard_is_seen_where_a_warp_straddles_the_end():
    vector = _counted("vector_add", "v01", 40, memory=False, divergence=True)
    assert vector["divergent_branches"] == 1  # warp 1: lanes 0-7 add, lanes 8-31 stop at the guard


# -- the GPU's rules, on their own ----------------------------------------------------------------
def test_sectors_and_wavefronts_follow_the_gpus_rules():
    from zoo.tools.profile.sim_counters import sectors_of, wavefronts_of

    row = [(lane, 4 * lane, 4) for lane in range(32)]
    column = [(lane, 4 * 32 * lane, 4) for lane in range(32)]
    assert sectors_of(row) == 4 and sectors_of(column) == 32
    assert wavefronts_of(row) == (1, 1)
    assert wavefronts_of(column) == (32, 1)  # every lane in bank 0, each a different word
    assert wavefronts_of([(lane, 0, 4) for lane in range(32)]) == (1, 1)  # one word: a broadcast
    assert wavefronts_of([(lane, 8 * lane, 8) for lane in range(32)]) == (2, 2)  # 64-bit: half-warps
    assert wavefronts_of([(lane, 16 * lane, 16) for lane in range(32)]) == (4, 4)  # 128-bit: 2 half-warps of 64 words
    # 128-bit broadcasts: half-warp phases (as ncu counts sgemm v06's and v07's loads on an H100), not quarter-warps
    assert wavefronts_of([(lane, 0, 16) for lane in range(32)]) == (2, 2)
    assert wavefronts_of([(lane, 16 * (lane % 8), 16) for lane in range(32)]) == (2, 2)
    strided = [(lane, 32 * lane, 16) for lane in range(32)]  # float4 32 bytes apart: two words a bank a phase
    assert wavefronts_of(strided) == (8, 4)
    bytes_ = [(lane, lane, 1) for lane in range(32)]  # 4 lanes a word: 8 words, no conflict
    assert wavefronts_of(bytes_) == (1, 1) and sectors_of(bytes_) == 1


@sim_only
def test_counting_swaps_everything_back_and_costs_nothing_when_off():
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    from zoo.tools.profile import sim_counters

    fake = devicearray.FakeCUDAArray
    before = (
        fake.__getitem__,
        fake.__setitem__,
        kernelapi.FakeCUDAShared.array,
        kernel.FakeCUDAKernel.__call__,
        threading.gettrace(),
    )
    with sim_counters.counting() as session:
        harness.check(zoo.family("reverse")["v01"], 40)
        assert fake.__getitem__ is not before[0]
    assert session.launches and session.launches[0].shared_load.requests > 0
    after = (
        fake.__getitem__,
        fake.__setitem__,
        kernelapi.FakeCUDAShared.array,
        kernel.FakeCUDAKernel.__call__,
        threading.gettrace(),
    )
    assert after == before
    assert sim_counters._session is None
    with pytest.raises(RuntimeError, match="already active"), sim_counters.counting(), sim_counters.counting():
        pass


@sim_only
def test_gpu_constants_are_swapped_in_for_the_count_and_back():
    variant = zoo.family("reduce")["v02"]
    assert variant.module.BLOCK == 64
    with simulated.gpu_constants(variant) as swapped:
        assert swapped == {"BLOCK": 256} and variant.module.BLOCK == 256
    assert variant.module.BLOCK == 64


@sim_only
def test_the_simulator_command_prints_counts_and_the_sentence(zoo_cli, tmp_path):
    out = tmp_path / "sim.json"
    r = zoo_cli("profile", "transpose", "v01", "v02", "--size", "64x64", "--no-divergence", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "v01 writes 32 sectors per request, v02 4: coalesced" in " ".join(r.stdout.split())
    steps = json.loads(out.read_text())["steps"]
    assert steps["v02_shared_tile"]["shared_load_conflicts_per_request"] == 31


def test_bad_arguments_are_one_line(zoo_cli):
    r = zoo_cli("profile", "no_such_family")
    assert r.returncode == 2 and "no family" in r.stderr and "Traceback" not in r.stderr
    r = zoo_cli("profile", "transpose", "v99")
    assert r.returncode == 2 and "no variant" in r.stderr and "Traceback" not in r.stderr


# -- Nsight Compute's side, without a GPU ----------------------------------------------------------
MARKER_NAME = "zoo::tools::profile::target::zoo_profile_step_marker[abi:v1,cw51](Array<int, 1, C, mutable, aligned>)"
NAIVE = "zoo::kernels::transpose::v01_naive::transpose_kernel[abi:v1,cw51](Array<float, 2, C, mutable, aligned>)"
TILED = "zoo::kernels::transpose::v02_shared_tile::transpose_kernel[abi:v1,cw51](Array<float, 2, C, mutable, aligned>)"
COLUMNS = [
    "gpu__time_duration.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
]


def _ncu_csv(rows):
    """Text shaped like `ncu --csv --page raw --print-units base`: messages, header, units, one row a kernel.
    The figures are made up for the test (a 2 ms naive transpose, a 1 ms tiled one)."""
    head = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Block Size", "Grid Size", *COLUMNS]
    units = ["", "", "", "", "", "", "", "usecond", "", "", "", "", "", "", "%", "", "", "byte/sector"]
    lines = ["==PROF== Connected to process 1 (python3)", ",".join(f'"{h}"' for h in head)]
    lines.append(",".join(f'"{u}"' for u in units))
    for i, (name, values) in enumerate(rows):
        cells = [str(i), "1", "python3", "gpu", name, "(32, 8, 1)", "(512, 2048, 1)", *values]
        lines.append(",".join(f'"{c}"' for c in cells))
    lines.append("==PROF== Disconnected from process 1")
    return "\n".join(lines) + "\n"


ROWS = [
    (MARKER_NAME, ["1.5", "1", "1", "0", "0", "0", "0", "1", "0", "0", "4"]),
    (NAIVE, ["2,000", "1000", "32000", "1000", "4000", "0", "0", "80", "12.5", "0.5", "4"]),
    (MARKER_NAME, ["1.5", "1", "1", "0", "0", "0", "0", "1", "0", "0", "4"]),
    (TILED, ["1,000", "1000", "4000", "1000", "4000", "1000", "31000", "90", "3.0", "6.0", "32"]),
]


def test_ncu_rows_are_split_at_the_markers_and_folded_into_summaries():
    rows = counters.parse_ncu_csv(_ncu_csv(ROWS))
    assert [r["kernel"] for r in rows] == ["zoo_profile_step_marker", "transpose_kernel"] * 2
    assert rows[1]["metrics"]["gpu__time_duration.sum"] == 2e6  # 2,000 us in nanoseconds
    by_step = counters.split_steps(rows, ["v01_naive", "v02_shared_tile"])
    assert [len(v) for v in by_step.values()] == [1, 1]
    fam = zoo.family("transpose")
    naive = counters.gpu_summary(counters.step_entry(fam, (1024, 1024), by_step["v01_naive"]))
    tiled = counters.gpu_summary(counters.step_entry(fam, (1024, 1024), by_step["v02_shared_tile"]))
    assert naive["global_store_sectors_per_request"] == 32 and tiled["global_store_sectors_per_request"] == 4
    assert tiled["shared_load_conflicts_per_request"] == 31
    assert naive["duration_ms"] == 2.0 and naive["stalls"][0] == ("long_scoreboard", 12.5)
    said = prose.sentence("v01_naive", naive, "v02_shared_tile", tiled)
    assert "v01 writes 32 sectors per request, v02 4: coalesced" in said
    assert "2 ms under ncu in v01, 1 in v02 (2x)" in said
    assert "the top stall moves from long_scoreboard to barrier" in said


def test_ncu_long_csv_reads_the_same_as_the_raw_page():
    long_form = ['"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"']
    for i, (name, values) in enumerate(ROWS):
        for metric, value in zip(COLUMNS, values, strict=True):
            unit = "msecond" if metric == "gpu__time_duration.sum" else ""
            value = str(float(value.replace(",", "")) / 1000) if unit else value  # the same time, in ms
            long_form.append(f'"{i}","1","{name}","Command line profiler metrics","{metric}","{unit}","{value}"')
    assert counters.parse_ncu_csv("==PROF== hello\n" + "\n".join(long_form)) == counters.parse_ncu_csv(_ncu_csv(ROWS))


def test_a_step_that_failed_after_its_marker_keeps_the_next_steps_rows_in_place():
    marker = {"name": MARKER_NAME, "kernel": "zoo_profile_step_marker", "metrics": {}}
    rows = [marker, {"name": "a", "metrics": {}}, marker, marker, {"name": "c", "metrics": {}}]
    by_step = counters.split_steps(rows, ["v01", "v02", "v03"])  # v02 launched its marker, then failed
    assert [r["name"] for r in by_step["v03"]] == ["c"] and by_step["v02"] == []


def test_folding_adds_counts_and_weights_ratios_by_duration():
    rows = [
        {"kernel": "k", "metrics": {"gpu__time_duration.sum": 3.0, "x.sum": 2.0, "y.ratio": 10.0}},
        {"kernel": "k", "metrics": {"gpu__time_duration.sum": 1.0, "x.sum": 5.0, "y.ratio": 30.0}},
    ]
    folded = counters.fold(rows)
    assert folded == {"gpu__time_duration.sum": 4.0, "x.sum": 7.0, "y.ratio": 15.0}


FAKE_NCU = """\
    #!{python}
    # a stand-in for ncu: writes a fixed CSV to --log-file and the target's report lines to stdout;
    # it refuses the tensor metric the way an ncu without it would, and a marker file asks for a
    # permission error
    import json, os, sys
    args = sys.argv[1:]
    if args == ["--version"]:
        print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2099.1 (fake)")
        sys.exit(0)
    if os.path.exists({deny!r}):
        print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access the counters")
        sys.exit(1)
    log = args[args.index("--log-file") + 1]
    metrics = args[args.index("--metrics") + 1].split(",")
    if "sm__inst_executed_pipe_tensor_op_hmma.sum" in metrics:
        print("==ERROR== Failed to find metric sm__inst_executed_pipe_tensor_op_hmma")
        sys.exit(1)
    open(log, "w").write(open({csv!r}).read())
    for step in args[args.index("zoo.tools.profile.target") + 3 :]:
        print("ZOO-PROFILE " + json.dumps({{"step": step, "zoo_launches": 1}}))
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text(_ncu_csv(ROWS))
    exe = tmp_path / "ncu"
    deny = tmp_path / "deny"
    exe.write_text(textwrap.dedent(FAKE_NCU).format(python=sys.executable, csv=str(csv_path), deny=str(deny)))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("ZOO_NCU", str(exe))
    return deny


def test_the_profile_cap_counts_numbas_launches_and_the_zoos_once_each(monkeypatch):
    """launch v01 and v02 launch through numba's dispatcher, not the zoo's launcher: they are capped too, and a zoo
    launch that falls back to numba's launch is one launch, not two."""
    from zoo.device import jit as zoo_jit
    from zoo.tools.profile import target as profile_target

    stops, calls = [], []

    class Configured:  # numba's configured kernel, ``dispatcher[grid, block]``
        def __call__(self, *args):
            calls.append(args)

    def zoo_getitem(kernel, config):
        return lambda *args: Configured()(*args)  # the zoo's launcher falling back to numba's launch

    monkeypatch.setattr(profile_target.numba_dispatcher, "_LaunchConfiguration", Configured, raising=False)
    monkeypatch.setattr(zoo_jit.Kernel, "__getitem__", zoo_getitem)
    monkeypatch.setattr(profile_target.cuda, "profile_stop", lambda: stops.append(len(calls)), raising=False)
    numba_call = Configured.__call__
    with profile_target._Cap(3) as cap:
        for _ in range(2):
            Configured()(1)  # numba's own launches
        zoo_jit.Kernel.__getitem__(None, (1, 1))(2)  # a zoo launch
        assert cap.count == 3 and not stops
        Configured()(3)  # the fourth launch: the profiler stops before it
        zoo_jit.Kernel.__getitem__(None, (1, 1))(4)
    assert stops == [3] and len(calls) == 5  # every launch still ran
    assert zoo_jit.Kernel.__getitem__ is zoo_getitem and Configured.__call__ is numba_call  # both put back


def test_run_ncu_drops_a_metric_the_gpu_lacks_and_reads_each_step(fake_ncu):
    fam = zoo.family("transpose")
    messages = []
    entries, info = ncu.run_ncu(fam, [fam["v01"], fam["v02"]], (1024, 1024), echo=messages.append)
    assert info["unavailable"] == ["sm__inst_executed_pipe_tensor_op_hmma.sum"]
    assert len(messages) == 1 and "does not offer sm__inst_executed_pipe_tensor_op_hmma.sum" in messages[0]
    assert info["ncu"] == "Version 2099.1 (fake)" and info["kernels_profiled"] == 2
    assert entries["v01_naive"]["kernels"][0]["name"] == "transpose_kernel"
    assert counters.gpu_summary(entries["v02_shared_tile"])["global_store_sectors_per_request"] == 4


def test_run_ncu_without_counter_permission_is_one_clear_line(fake_ncu):
    fake_ncu.write_text("")
    fam = zoo.family("transpose")
    with pytest.raises(profile.ProfileError, match="ERR_NVGPUCTRPERM") as err:
        ncu.run_ncu(fam, [fam["v01"]], (1024, 1024))
    assert "\n" not in str(err.value)


def test_a_missing_ncu_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.delenv("ZOO_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(profile.ProfileError, match="needs Nsight Compute's `ncu` on the PATH"):
        ncu.ncu_executable()


def test_saved_profiles_merge_by_step_and_reach_the_page(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "PROFILES_DIR", tmp_path)
    monkeypatch.setattr("zoo.tools.profile.ncu.slug", lambda: "a-gpu")
    fam = zoo.family("transpose")
    rows = counters.parse_ncu_csv(_ncu_csv(ROWS))
    by_step = counters.split_steps(rows, ["v01_naive", "v02_shared_tile"])
    device = {"name": "A GPU"}
    info = {"ncu": "2099.1", "metrics": COLUMNS}
    key = results.size_key(profile.default_size(fam))
    size = profile.default_size(fam)
    ncu.save(fam, key, {"v01_naive": counters.step_entry(fam, size, by_step["v01_naive"])}, info, device, "abc")
    path = ncu.save(
        fam, key, {"v02_shared_tile": counters.step_entry(fam, size, by_step["v02_shared_tile"])}, info, device, "abc"
    )
    data = json.loads(path.read_text())
    assert set(data["sizes"][key]["steps"]) == {"v01_naive", "v02_shared_tile"}
    text = walkthrough.page(fam, all_results={}, profiles=results.load_profiles("transpose"))
    section = text[text.index("## v02_shared_tile") :]
    assert "**Profile** on A GPU" in section
    assert "| transpose_kernel | 1 | 1 |" in section
    assert "v01 writes 32 sectors per request, v02 4: coalesced" in section
    assert "setting" not in data["sizes"][key]  # transpose's runs depend on nothing but size and GPU


def test_a_family_setting_is_saved_with_its_profile_and_shown(tmp_path, monkeypatch):
    """collectives' setting(): the ranks a profile ran with and the GPUs they shared, on the page beside it."""
    monkeypatch.setattr(results, "PROFILES_DIR", tmp_path)
    monkeypatch.setattr("zoo.tools.profile.ncu.slug", lambda: "a-gpu")
    monkeypatch.setenv("ZOO_RANKS", "2")
    fam = zoo.family("collectives")
    entry = {"kernels": [], "total": {}, "zoo_launches": 1}
    path = ncu.save(fam, "4194304", {"v02_reduce_broadcast": entry}, {"ncu": "2099.1"}, {"name": "A GPU"}, "abc")
    setting = json.loads(path.read_text())["sizes"]["4194304"]["setting"]
    assert setting == fam.module.setting() and setting.startswith("2 ranks on ")
    text = walkthrough.page(fam, all_results={}, profiles=results.load_profiles("collectives"))
    assert f"**Profile** on A GPU, size 4194304, {setting} (" in text


# -- the pictures ------------------------------------------------------------------
@sim_only
def test_the_mapping_of_the_naive_transpose_boxes_a_row_read_and_a_column_written():
    from zoo.tools import mapping

    fam = zoo.family("transpose")
    launch = mapping.trace(fam["v01"], (8, 40))
    found = {title: (shape, first, boxed) for title, shape, first, boxed, _ in mapping.panels(launch)}
    (shape_a, first_a, boxed_a), (shape_out, _, boxed_out) = found["a (read)"], found["out (written)"]
    assert shape_a == (8, 40) and shape_out == (40, 8)
    assert sorted(boxed_a) == list(range(32))  # warp 0's first read: 32 neighbours of row 0
    assert sorted(boxed_out) == [8 * r for r in range(32)]  # its write: 32 rows of column 0
    assert first_a[33] == (1, 0, 1)  # element (0, 33) is read by block 1, warp 0, lane 1


def test_every_mapping_names_a_step_and_the_page_links_its_picture():
    from zoo.tools import mapping

    planned = mapping.planned()
    assert {fam.name for fam, _, _ in planned} >= {"vector_add", "transpose", "reduce", "sgemm"}
    for fam, step, _ in planned:
        assert f"(plots/{mapping.path_for(fam, step).name})" in walkthrough.page(fam, all_results={}, profiles={})


# -- on a GPU with Nsight Compute ---------------------------------------------------------------------
@pytest.mark.skipif(
    zoo.SIMULATOR or not (os.environ.get("ZOO_NCU") or __import__("shutil").which("ncu")), reason="needs a GPU and ncu"
)
def test_ncu_sees_the_naive_transpose_scatter_its_writes(tmp_path):
    fam = zoo.family("transpose")
    entries, info = ncu.run_ncu(fam, [fam["v01"], fam["v03"]], (2048, 2048))
    naive, padded = (counters.gpu_summary(entries[v.name]) for v in (fam["v01"], fam["v03"]))
    assert naive["global_store_sectors_per_request"] > 28
    assert padded["global_store_sectors_per_request"] < 5
    assert padded["shared_load_conflicts_per_request"] < 0.1
    assert np.isfinite(naive["duration_ms"])
