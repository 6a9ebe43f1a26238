"""``python -m zoo profile``: hardware counters on a GPU, memory-access counters in the simulator.

On a GPU, ``profile(fam, steps, size)`` runs Nsight Compute (``ncu``) over exactly
the kernels each step launches in one call at the size (``zoo.tools.profile.target``
is the program it profiles) with one curated set of metrics (``METRICS``), folds
the rows per step and kernel, and saves them with zoo's results machinery:
``results/profiles/<gpu>-<family>.json``. The walkthrough pages show them as a
table per step and a sentence computed from the counters (``sentence``).

In the simulator, ``simulate(variant, size)`` counts the same memory lessons
without a GPU (``zoo.tools.profile.sim_counters``): sectors per global request, shared-memory
wavefronts and bank conflicts per request, divergent branches, threads per
line. ``comparison`` sets the two side by side (``.ci/gpu-profile.sh``).

Both sides reduce to one *summary* dict per step with the same keys where the
two can count the same thing, so one sentence function speaks for either.
"""

import ast
import contextlib
import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

from zoo.bench import results
from zoo.runtime import SIMULATOR

# -- what Nsight Compute is asked for ----------------------------------------------------------
DURATION = "gpu__time_duration.sum"
STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"  # warps stalled for it per issued instruction
METRICS = (
    DURATION,
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "sm__maximum_warps_per_active_cycle_pct",  # theoretical occupancy, %
    "sm__warps_active.avg.pct_of_peak_sustained_active",  # achieved occupancy, %
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "smsp__thread_inst_executed_per_inst_executed.ratio",  # threads per executed instruction (32: no divergence)
    "smsp__sass_branch_targets_threads_divergent.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",  # bytes the threads asked for, per sector
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
    "smsp__sass_inst_executed_op_shared_ld.sum",  # shared-memory requests (warp instructions)
    "smsp__sass_inst_executed_op_shared_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "sm__inst_executed_pipe_tensor_op_hmma.sum",  # warp-level HMMA instructions
    *(STALL.format(reason) for reason in STALL_REASONS),
)
MMA_FLOPS = 16 * 8 * 16 * 2  # one HMMA.16816 (mma.sync m16n8k16): a 16x8 tile over k = 16, an FMA counting 2
MARKER = "zoo_profile_step_marker"  # the kernel zoo.tools.profile.target launches before each step's call
LAUNCHES_PER_STEP = 16  # launches profiled per step at most (a loop of launches keeps the first ones: same kernel)
TARGET_LINE = "ZOO-PROFILE "  # how zoo.tools.profile.target reports each step on its stdout


class ProfileError(RuntimeError):
    """Profiling cannot go on: one line for the user, no traceback."""


def default_size(fam):
    """The size a GPU profile runs at: the spec's PROFILE_SIZE, else its HEADLINE_SIZE, else its largest bench size."""
    for name in ("PROFILE_SIZE", "HEADLINE_SIZE"):
        size = getattr(fam.module, name, None)
        if size is not None:
            return size
    return max(fam.BENCH_SIZES, key=fam.bytes_moved)


def sim_size(fam):
    """The size the simulator counts at by default: the family's largest test size (small by design)."""
    return max(fam.TEST_SIZES, key=fam.bytes_moved)


# -- the simulator side -------------------------------------------------------------------------
def simulator_constants(module):
    """[(name, GPU value as an expression)] of the module's ``NAME = a if SIMULATOR else b`` lines where b is a
    literal, followed by the module-level lines computed from them (``WARPS = BLOCK // 32``), in file order.
    None when a line computed from them calls something (it may build a kernel): such a module is counted as
    the simulator runs it."""
    changed, found = set(), []
    for node in ast.parse(open(module.__file__).read()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if (
            isinstance(value, ast.IfExp)
            and isinstance(value.test, ast.Name)
            and value.test.id == "SIMULATOR"
            and isinstance(value.orelse, ast.Constant)
        ):
            changed.add(name)
            found.append((name, value.orelse))
        elif any(isinstance(n, ast.Name) and n.id in changed for n in ast.walk(value)):
            if any(isinstance(n, ast.Call) for n in ast.walk(value)):
                return None
            changed.add(name)
            found.append((name, value))
    return found


@contextlib.contextmanager
def gpu_constants(variant):
    """Run a step with the values its file gives the GPU where it picks smaller ones for the simulator
    (``BLOCK = 64 if SIMULATOR else 256``, and what is computed from them), so the counts describe the kernel
    the GPU runs. The kernel and the launch read them when they run, in the simulator. Yields
    {name: GPU value} of what was swapped (the step's file and its base's); everything is put back after."""
    modules = [variant.module] + ([variant.base.module] if variant.base is not None else [])
    swapped = []
    try:
        for module in modules:
            for name, expression in simulator_constants(module) or []:
                value = eval(compile(ast.Expression(expression), module.__file__, "eval"), vars(module))
                swapped.append((module, name, getattr(module, name)))
                setattr(module, name, value)
        yield {name: getattr(module, name) for module, name, _ in swapped}
    finally:
        for module, name, value in reversed(swapped):
            setattr(module, name, value)


class SimProfile:
    """One step counted in the simulator: its launches' counts and whether its output was right."""

    def __init__(self, variant, size, launches, check, constants):
        self.variant = variant
        self.size = size
        self.launches = launches
        self.check = check
        self.constants = constants

    @property
    def summary(self):
        return sim_summary(self.launches)


def simulate(variant, size, kind=None, divergence=True, as_on_gpu=True):
    """Count one call of ``variant`` at ``size`` in the simulator (``sim_counters``); returns a SimProfile.

    ``as_on_gpu`` runs it with the GPU's values of the constants it shrinks for the simulator."""
    from zoo.bench import harness
    from zoo.tools.profile import sim_counters

    if not SIMULATOR:
        raise ProfileError("the simulator's counters need the simulator: ZOO_TARGET=sim")
    checks = []
    with gpu_constants(variant) if as_on_gpu else contextlib.nullcontext({}) as constants:
        launches = sim_counters.count(
            lambda: checks.append(harness.check(variant, size, seed=0, kind=kind)), divergence=divergence
        )
    return SimProfile(variant, size, launches, checks[-1], constants)


def simulate_or_say(variant, size, kind=None, divergence=True, as_on_gpu=True):
    """(SimProfile or None, notes): ``simulate``, again with the simulator's own constants if the GPU's made
    the step fail, and a one-line note instead of a traceback if it fails even so."""
    from zoo.errors import OutOfRange

    notes = []
    for gpu in (True, False) if as_on_gpu else (False,):
        try:
            return simulate(variant, size, kind, divergence, gpu), notes
        except OutOfRange as e:
            return None, [f"{variant.name}: skipped, {e}"]
        except Exception as e:  # the step broke in the simulator: say so, go on with the others
            what = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            notes.append(
                f"{variant.name}: failed with the GPU's constants ({what}); counted with the simulator's"
                if gpu
                else f"{variant.name}: the count failed ({what})"
            )
    return None, notes


def sim_summary(launches):
    """The summary of a step counted in the simulator: its busiest launch's memory figures (a multi-pass
    step's first pass: what a large size spends its time on), divergence over every launch."""
    from zoo.tools.profile import sim_counters

    if not launches:
        return {}
    main = sim_counters.busiest(launches)
    every = sim_counters.total(launches)
    out = {
        "kernel": main.kernel,
        "launches": len(launches),
        "global_load_sectors_per_request": main.global_load.sectors_per_request,
        "global_store_sectors_per_request": main.global_store.sectors_per_request,
        "global_load_bytes_per_sector": main.global_load.bytes_per_sector,
        "global_store_bytes_per_sector": main.global_store.bytes_per_sector,
        "shared_load_wavefronts_per_request": main.shared_load.wavefronts_per_request,
        "shared_store_wavefronts_per_request": main.shared_store.wavefronts_per_request,
        "shared_load_conflicts_per_request": main.shared_load.conflicts_per_request,
        "shared_store_conflicts_per_request": main.shared_store.conflicts_per_request,
        "atomic_requests": every.global_atomic.requests + every.shared_atomic.requests,
    }
    if every.traced:
        out["divergent_branches"] = every.divergent_branches
        out["threads_per_instruction"] = every.threads_per_instruction
    return out


SIM_COLUMNS = (  # summary key, column (global: sectors per request; shared: wavefronts and conflicts per request)
    ("kernel", "kernel"),
    ("global_load_sectors_per_request", "ld sect"),
    ("global_store_sectors_per_request", "st sect"),
    ("shared_load_wavefronts_per_request", "sh ld wf"),
    ("shared_load_conflicts_per_request", "sh ld confl"),
    ("shared_store_wavefronts_per_request", "sh st wf"),
    ("shared_store_conflicts_per_request", "sh st confl"),
    ("atomic_requests", "atomics"),
    ("divergent_branches", "diverg."),
    ("threads_per_instruction", "thr/line"),
)


# -- the GPU side: Nsight Compute ----------------------------------------------------------------
def ncu_executable():
    """The ncu on the PATH (or $ZOO_NCU), or a ProfileError saying it is missing."""
    exe = os.environ.get("ZOO_NCU") or shutil.which("ncu")
    if not exe:
        raise ProfileError(
            "profiling on a GPU needs Nsight Compute's `ncu` on the PATH (not found; ZOO_NCU may name it)"
        )
    return exe


def ncu_command(exe, fam, size_key, steps, metrics, log):
    """The ncu command line that profiles each step's call (and only that) through zoo.tools.profile.target."""
    cap = (LAUNCHES_PER_STEP + 1) * len(steps) + 256  # a CUDA graph's kernels are not capped by the target
    return [
        exe,
        "--profile-from-start",
        "off",  # zoo.tools.profile.target opens the profiler around each step's call only
        "--target-processes",
        "all",
        "--replay-mode",
        "kernel",
        "--launch-count",
        str(cap),
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--log-file",
        str(log),
        "--metrics",
        ",".join(metrics),
        sys.executable,
        "-m",
        "zoo.tools.profile.target",
        fam.name,
        size_key,
        *steps,
    ]


def _number(text):
    text = (text or "").strip().replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


TIME_UNITS_NS = {
    "nsecond": 1.0,
    "ns": 1.0,
    "usecond": 1e3,
    "us": 1e3,
    "msecond": 1e6,
    "ms": 1e6,
    "second": 1e9,
    "s": 1e9,
}


def parse_ncu_csv(text):
    """The kernel rows of ``ncu --csv`` output: [{'name', 'kernel', 'metrics': {name: float}}], in launch order.

    Both of ncu's CSV shapes are read: the raw page (one row a kernel, a column a metric, a row of units
    under the header) and the long one (one row a metric: "Metric Name", "Metric Unit", "Metric Value",
    the kernel's rows sharing an "ID"). Lines that are not CSV (ncu's ==PROF== messages) are skipped,
    thousands separators dropped, and the duration converted to nanoseconds from whatever unit it has."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if not lines:
        return []
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = table[0], table[1:]
    name_column = next((c for c in ("Kernel Name", "Function Name", "Name") if c in header), None)
    if "Metric Name" in header and "Metric Value" in header:
        return _long_rows(header, body, name_column)
    units = {}
    if body and not body[0][0].strip():  # the units row: no ID
        units = dict(zip(header, body[0], strict=False))
        body = body[1:]
    rows = []
    for values in body:
        cells = dict(zip(header, values, strict=False))
        metrics = {c: _value(c, v, units.get(c, "")) for c, v in cells.items() if "__" in c}
        demangled = cells.get(name_column, "") if name_column else ""
        rows.append({"name": demangled, "kernel": short_name(demangled), "metrics": metrics})
    return rows


def _long_rows(header, body, name_column):
    by_id = {}
    for values in body:
        cells = dict(zip(header, values, strict=False))
        key = cells.get("ID", "")
        demangled = cells.get(name_column, "") if name_column else ""
        row = by_id.setdefault(key, {"name": demangled, "kernel": short_name(demangled), "metrics": {}})
        metric = cells.get("Metric Name", "")
        if "__" in metric:
            row["metrics"][metric] = _value(metric, cells.get("Metric Value", ""), cells.get("Metric Unit", ""))
    return list(by_id.values())


def _value(metric, text, unit):
    value = _number(text)
    if value is not None and metric == DURATION:
        value *= TIME_UNITS_NS.get(unit.strip(), 1.0)
    return value


def short_name(demangled):
    """'zoo::kernels::transpose::v01_naive::transpose_kernel[abi:v1,...](Array<...>)' -> 'transpose_kernel'."""
    name = demangled.split("(", 1)[0]
    while name.endswith("]") and "[" in name:
        name = name[: name.rindex("[")]
    return name.rsplit("::", 1)[-1].replace("void ", "").strip() or demangled


def split_steps(rows, steps):
    """{step: its rows}: each step's rows follow the marker kernel the target launched before its call."""
    by_step, current, markers = {}, None, iter(steps)
    for row in rows:
        if MARKER in row["name"]:
            current = next(markers, None)
            if current is not None:
                by_step[current] = []
        elif current is not None:
            by_step[current].append(row)
    return by_step


def _is_count(metric):
    return metric == DURATION or metric.endswith(".sum")


def fold(rows):
    """One metrics dict for several kernel rows: counts and durations add up, percentages and ratios are
    averaged weighted by duration, launch figures (grid, block, registers) are the longest launch's."""
    if not rows:
        return {}
    weights = [r["metrics"].get(DURATION) or 0.0 for r in rows]
    total_weight = sum(weights) or float(len(rows))
    weights = weights if sum(weights) else [1.0] * len(rows)
    longest = rows[max(range(len(rows)), key=lambda i: weights[i])]["metrics"]
    out = {}
    for metric in {m for r in rows for m in r["metrics"]}:
        values = [(r["metrics"].get(metric), w) for r, w in zip(rows, weights, strict=True)]
        known = [(v, w) for v, w in values if v is not None]
        if not known:
            out[metric] = None
        elif metric.startswith("launch__"):
            out[metric] = longest.get(metric)
        elif _is_count(metric):
            out[metric] = sum(v for v, _ in known)
        else:
            out[metric] = sum(v * w for v, w in known) / (sum(w for _, w in known) or total_weight)
    return out


def step_entry(fam, size, rows, zoo_launches=None):
    """What the profile file keeps for one step: its kernels (rows folded per kernel name) and the step's total."""
    kernels = {}
    for row in rows:
        kernels.setdefault(row["kernel"], []).append(row)
    entry = {
        "kernels": [{"name": k, "launches": len(rs), "metrics": fold(rs)} for k, rs in kernels.items()],
        "total": fold(rows),
        "launches_profiled": len(rows),
        "modelled_flops": fam.flops(size),
    }
    if zoo_launches is not None:
        entry["zoo_launches"] = zoo_launches
    return entry


def run_ncu(fam, steps, size, kind=None, echo=None):
    """Profile ``steps`` (Variants) of ``fam`` at ``size`` under ncu; returns (entries by step name, info dict).

    A metric this GPU or this ncu does not offer is dropped (and named in info['unavailable']) and the
    run repeated; any other failure is a ProfileError with ncu's own first error line."""
    exe = ncu_executable()
    key = results.size_key(size, kind, fam.kinds)
    names = [v.name for v in steps]
    metrics, unavailable = list(METRICS), []
    env = dict(os.environ, ZOO_TARGET="gpu", PYTHONUNBUFFERED="1")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="zoo-ncu-") as tmp:
        log = os.path.join(tmp, "ncu.csv")
        for _ in range(4):
            if os.path.exists(log):
                os.remove(log)
            proc = subprocess.run(
                ncu_command(exe, fam, key, names, metrics, log), capture_output=True, text=True, env=env
            )
            text = open(log).read() if os.path.exists(log) else ""
            errors = [line for line in (text + "\n" + proc.stdout + "\n" + proc.stderr).splitlines() if "ERROR" in line]
            missing = [m for m in metrics if any(m.split(".")[0] in e for e in errors)]
            if missing and len(missing) < len(metrics):
                unavailable += missing
                metrics = [m for m in metrics if m not in missing]
                if echo:
                    echo(f"ncu does not offer {', '.join(missing)} here: profiling without them")
                continue
            break
        rows = parse_ncu_csv(text)
    seconds = time.perf_counter() - started
    reported = [
        json.loads(line[len(TARGET_LINE) :]) for line in proc.stdout.splitlines() if line.startswith(TARGET_LINE)
    ]
    if proc.returncode != 0 or not rows:
        raise ProfileError(_ncu_failure(proc, errors, rows))
    by_step = split_steps(rows, [r["step"] for r in reported if r.get("marked", not r.get("skipped"))])
    entries = {}
    for r in reported:
        if r.get("skipped"):
            entries[r["step"]] = {"skipped": r["skipped"]}
        elif by_step.get(r["step"]):
            entries[r["step"]] = step_entry(fam, size, by_step[r["step"]], r.get("zoo_launches"))
        else:  # its call ran no kernel here (an all-reduce of one rank, on a one-GPU machine, exchanges nothing)
            entries[r["step"]] = {"skipped": "its call launched no kernel at this size on this machine"}
    silent = sorted({m for m in metrics if all(row["metrics"].get(m) is None for row in rows)})
    info = {
        "unavailable": sorted(set(unavailable)),
        "no_value": silent,
        "seconds": seconds,
        "kernels_profiled": sum(1 for row in rows if MARKER not in row["name"]),
        "ncu": _ncu_version(exe),
        "metrics": metrics,
    }
    return entries, info


def _ncu_failure(proc, errors, rows):
    text = "\n".join(errors) + proc.stderr
    if "ERR_NVGPUCTRPERM" in text or "permission" in text.lower():
        return (
            "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or let every "
            "user profile (the driver's NVreg_RestrictProfilingToAdminUsers=0)"
        )
    for line in errors + proc.stderr.splitlines()[::-1]:
        if line.strip():
            return f"ncu failed: {line.strip()[:300]}"
    if not rows:
        return f"ncu profiled no kernel (exit status {proc.returncode})"
    return f"ncu exited with status {proc.returncode}"


def _ncu_version(exe):
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else "?"


def gpu_summary(entry, metrics=None):
    """The summary of one step's profile entry (or of one kernel's ``metrics``), as zoo shows it."""
    m = metrics if metrics is not None else entry.get("total", {})

    def get(name):
        return m.get(name)

    def ratio(a, b):
        a, b = get(a), get(b)
        return a / b if a is not None and b else None

    ffma, fadd, fmul = (get(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum") for op in ("ffma", "fadd", "fmul"))
    hfma, hadd, hmul = (get(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum") for op in ("hfma", "hadd", "hmul"))
    hmma = get("sm__inst_executed_pipe_tensor_op_hmma.sum")
    fp32 = None if ffma is None else 2 * ffma + (fadd or 0) + (fmul or 0)
    fp16 = None if hfma is None else 2 * hfma + (hadd or 0) + (hmul or 0)
    tensor = None if hmma is None else MMA_FLOPS * hmma
    counted = (
        sum(x for x in (fp32, fp16, tensor) if x is not None)
        if any(x is not None for x in (fp32, fp16, tensor))
        else None
    )
    stalls = sorted(
        ((reason, get(STALL.format(reason))) for reason in STALL_REASONS if get(STALL.format(reason))),
        key=lambda p: -p[1],
    )
    duration = get(DURATION)
    out = {
        "duration_ms": duration / 1e6 if duration is not None else None,
        "theoretical_occupancy": get("sm__maximum_warps_per_active_cycle_pct"),
        "achieved_occupancy": get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        "dram_pct": get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        "l2_pct": get("lts__throughput.avg.pct_of_peak_sustained_elapsed"),
        "threads_per_instruction": get("smsp__thread_inst_executed_per_inst_executed.ratio"),
        "divergent_branches": get("smsp__sass_branch_targets_threads_divergent.sum"),
        "stalls": stalls[:3],
        "global_load_sectors_per_request": ratio(
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
        ),
        "global_store_sectors_per_request": ratio(
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
        ),
        "global_load_bytes_per_sector": get("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"),
        "global_store_bytes_per_sector": get("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"),
        "shared_load_wavefronts_per_request": ratio(
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "smsp__sass_inst_executed_op_shared_ld.sum"
        ),
        "shared_store_wavefronts_per_request": ratio(
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "smsp__sass_inst_executed_op_shared_st.sum"
        ),
        "shared_load_conflicts_per_request": ratio(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "smsp__sass_inst_executed_op_shared_ld.sum"
        ),
        "shared_store_conflicts_per_request": ratio(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "smsp__sass_inst_executed_op_shared_st.sum"
        ),
        "fp32_instructions": None if ffma is None else ffma + (fadd or 0) + (fmul or 0),
        "fp16_instructions": None if hfma is None else hfma + (hadd or 0) + (hmul or 0),
        "tensor_instructions": hmma,
        "flops_counted": counted,
        "flops_modelled": entry.get("modelled_flops") if metrics is None else None,
    }
    return out


# -- the profile files ----------------------------------------------------------------------------
def run_setting(fam):
    """The spec's ``setting()``, what a run depended on besides its size and GPU (collectives: how many ranks on
    how many GPUs), or None for a family without one."""
    setting = getattr(fam.module, "setting", None)
    return setting() if setting is not None else None


def save(fam, size_key, entries, info, device, commit=None):
    """Merge one run's step entries into results/profiles/<gpu>-<family>.json; returns its path."""
    from zoo.device import slug

    path = results.profile_path(slug(), fam.name)
    data = results.load(path) if path.exists() else {"family": fam.name, "sizes": {}}
    data["device"] = device
    data["family"] = fam.name
    data["updated"] = results.now()
    at = data["sizes"].setdefault(size_key, {"steps": {}})
    at["steps"].update(entries)
    at.update(
        ncu=info.get("ncu"),
        metrics=info.get("metrics"),
        unavailable=info.get("unavailable", []),
        commit=commit,
        updated=data["updated"],
    )
    setting = run_setting(fam)
    if setting:
        at["setting"] = setting
    results.write(path, data)
    return path


def headline_profile(fam, data):
    """(size key, {step: entry}) a page shows: the family's default size if profiled, else the largest profiled."""
    sizes = data.get("sizes", {})
    if not sizes:
        return None, {}
    wanted = results.size_key(default_size(fam))
    key = wanted if wanted in sizes else max(sizes, key=lambda k: fam.bytes_moved(results.parse_case(k)[0]))
    return key, sizes[key].get("steps", {})


# -- sentences and tables -------------------------------------------------------------------------
def num(value, digits=3):
    """A counter's value for prose: thousands apart when large, ``digits`` significant digits otherwise."""
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == int(value):
        return f"{int(value)}"
    return f"{value:.{digits}g}"


def _changed(a, b, rel=0.2, absolute=0.05):
    return a is not None and b is not None and abs(a - b) > max(absolute, rel * max(abs(a), abs(b)))


FULL_SECTOR = 28  # useful bytes per 32-byte sector from which an access counts as coalesced


def _coalescing(sectors_before, sectors, used_before, used):
    """The verdict on a change of sectors per request, from the useful bytes per sector where known
    (a float4 access touches 4x the sectors of a float access and is no less coalesced)."""
    if used_before and used:
        if used >= FULL_SECTOR > used_before:
            return "coalesced"
        if used > 1.1 * used_before:
            return "better coalesced"
        if used < used_before / 1.1:
            return "less coalesced"
        return "as coalesced, wider accesses" if sectors > sectors_before else "as coalesced, narrower accesses"
    return "fewer sectors" if sectors < sectors_before else "more sectors"


def sentence(before_name, before, name, summary):
    """One sentence of what the counters say changed from ``before`` to ``summary`` (two summaries of the same
    kind), or '' when nothing they count moved."""
    short, prev = name[:3], before_name[:3]
    clauses = []
    for op, what in (("load", "reads"), ("store", "writes")):
        a, b = before.get(f"global_{op}_sectors_per_request"), summary.get(f"global_{op}_sectors_per_request")
        if _changed(a, b):
            used = before.get(f"global_{op}_bytes_per_sector"), summary.get(f"global_{op}_bytes_per_sector")
            clauses.append(f"{prev} {what} {num(a)} sectors per request, {short} {num(b)}: {_coalescing(a, b, *used)}")
    for key, what in (
        ("shared_load_conflicts_per_request", "shared loads"),
        ("shared_store_conflicts_per_request", "shared stores"),
    ):
        a, b = before.get(key), summary.get(key)
        if _changed(a, b, absolute=0.1):
            verdict = "no bank conflicts" if b < 0.05 else ("fewer bank conflicts" if b < a else "more bank conflicts")
            clauses.append(f"{what} have {num(a)} bank conflicts per request in {prev}, {num(b)} in {short}: {verdict}")
        elif a is None and b is not None and b >= 0.1:
            clauses.append(f"{short}'s {what} have {num(b)} bank conflicts per request")
    a, b = before.get("divergent_branches"), summary.get("divergent_branches")
    if a is not None and b is not None and (a > 0) != (b > 0):
        clauses.append(
            f"{prev} diverges on {num(a)} branches, {short} on {num(b)}: "
            + ("its warps take one path" if b == 0 else "its warps now split")
        )
    a, b = before.get("threads_per_instruction"), summary.get("threads_per_instruction")
    if _changed(a, b, rel=0.1, absolute=1.0):
        clauses.append(f"threads per instruction {num(a)} in {prev}, {num(b)} in {short}")
    a, b = before.get("duration_ms"), summary.get("duration_ms")
    if a and b:
        clauses.append(f"{num(a)} ms under ncu in {prev}, {num(b)} in {short} ({num(a / b)}x)")
    a, b = before.get("achieved_occupancy"), summary.get("achieved_occupancy")
    if _changed(a, b, rel=0.0, absolute=10.0):
        clauses.append(f"achieved occupancy {a:.0f}% in {prev}, {b:.0f}% in {short}")
    a, b = (before.get("stalls") or [(None,)])[0][0], (summary.get("stalls") or [(None,)])[0][0]
    if a and b and a != b:
        clauses.append(f"the top stall moves from {a} to {b}")
    if not clauses:
        return ""
    return "; ".join(clauses) + "."


def flops_note(summary):
    """'1.37e+11 FLOPs counted (FP32 ...), 100% of the 1.37e+11 modelled', or ''."""
    counted, modelled = summary.get("flops_counted"), summary.get("flops_modelled")
    if not counted:
        return ""
    parts = []
    for key, label in (("fp32_instructions", "FP32"), ("fp16_instructions", "FP16"), ("tensor_instructions", "HMMA")):
        if summary.get(key):
            parts.append(f"{label} {summary[key]:.3g}")
    text = f"{counted:.3g} FLOPs counted ({', '.join(parts)} instructions)"
    if modelled:
        text += f", {100 * counted / modelled:.0f}% of the {modelled:.3g} the family models"
    return text


def _pct(value):
    return "-" if value is None else f"{value:.0f}%"


def _pair(a, b, fmt=num):
    return f"{fmt(a)} / {fmt(b)}"


def markdown_table(fam, entry):
    """The walkthrough's table of one step's profile: a row per kernel (and the step's total when it has several)."""
    lines = [
        "| kernel | launches | ms | occupancy theor. / achieved | DRAM | L2 | threads/inst | top stalls "
        "| sectors/req ld / st | bank conflicts/req ld / st |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    kernels = entry.get("kernels", [])
    rows = [(k["name"], k["launches"], gpu_summary(entry, k["metrics"])) for k in kernels]
    if len(kernels) > 1:
        rows.append(("**step**", entry.get("launches_profiled", "-"), gpu_summary(entry)))
    for name, launches, s in rows:
        stalls = ", ".join(f"{reason} {num(v, 2)}" for reason, v in s["stalls"]) or "-"
        lines.append(
            f"| {name} | {launches} | {num(s['duration_ms'])} | "
            f"{_pair(s['theoretical_occupancy'], s['achieved_occupancy'], _pct)} | {_pct(s['dram_pct'])} | "
            f"{_pct(s['l2_pct'])} | {num(s['threads_per_instruction'])} | {stalls} | "
            f"{_pair(s['global_load_sectors_per_request'], s['global_store_sectors_per_request'])} | "
            f"{_pair(s['shared_load_conflicts_per_request'], s['shared_store_conflicts_per_request'])} |"
        )
    return "\n".join(lines)


# -- side by side ----------------------------------------------------------------------------------
COMPARED = (
    ("global_load_sectors_per_request", "global ld sectors/req"),
    ("global_store_sectors_per_request", "global st sectors/req"),
    ("shared_load_wavefronts_per_request", "shared ld wavefronts/req"),
    ("shared_load_conflicts_per_request", "shared ld conflicts/req"),
    ("shared_store_wavefronts_per_request", "shared st wavefronts/req"),
    ("shared_store_conflicts_per_request", "shared st conflicts/req"),
)
AGREEMENT = 0.10  # the simulator agrees with ncu within 10%
ABSOLUTE = 0.1  # ... or within 0.1 of it where the figure is near zero (conflicts)


def agrees(sim, gpu):
    if sim is None or gpu is None:
        return None
    return abs(sim - gpu) <= max(ABSOLUTE, AGREEMENT * abs(gpu))


def comparison(sim_summaries, gpu_entries):
    """Rows (step, figure, simulator, ncu, agrees) for the steps both sides have."""
    rows = []
    for step, sim in sim_summaries.items():
        entry = gpu_entries.get(step)
        if not entry or "total" not in entry:
            continue
        gpu = gpu_summary(entry)
        for key, label in COMPARED:
            a, b = sim.get(key), gpu.get(key)
            if a is None and b is None:
                continue
            rows.append((step, label, a, b, agrees(a, b)))
    return rows


# -- the command ------------------------------------------------------------------------------------
def add_arguments(parser):
    parser.add_argument("family")
    parser.add_argument("steps", nargs="*", help="steps to profile (default: all), e.g. v01 v03")
    parser.add_argument(
        "--size",
        help="size, or SIZE@KIND (default: the headline size on a GPU, the largest test size in the simulator)",
    )
    parser.add_argument("--sim", action="store_true", help="count in the simulator even on a GPU machine")
    parser.add_argument(
        "--no-divergence", action="store_true", help="simulator: skip line tracing (divergence), about 2x faster"
    )
    parser.add_argument(
        "--sim-constants",
        action="store_true",
        help="simulator: keep the smaller constants a step picks for the simulator (BLOCK = 64 if SIMULATOR else 256)",
    )
    parser.add_argument("--no-save", action="store_true", help="GPU: print the profile without saving it")
    parser.add_argument(
        "--compare",
        metavar="SIM_SIZE",
        help="GPU: set the saved profile (at --size, default the headline size) beside the simulator's counts at "
        "SIM_SIZE (sectors and bank conflicts); profile at --size SIM_SIZE first to compare the same launch",
    )
    parser.add_argument("--json", help="simulator: also write the step summaries to this JSON file")


def _steps(fam, names):
    return [fam[n] for n in names] if names else list(fam)


def _case(fam, text, default):
    if not text:
        return default, None
    size, kind = results.parse_case(text)
    fam.check_size(size)
    if kind is not None and kind not in fam.kinds:
        raise ValueError(f"{fam.name} has no input kind {kind!r}")
    return size, kind


def command(args, console):
    """``zoo profile``: returns the exit status; raises ProfileError, ValueError or KeyError on bad input."""
    import zoo

    fam = zoo.family(args.family)
    steps = _steps(fam, args.steps)
    if args.compare:
        return _compare(fam, steps, args, console)
    if SIMULATOR or args.sim:
        if not SIMULATOR:  # numba.cuda is the GPU's in this process: count in a fresh one
            env = dict(os.environ, ZOO_TARGET="sim")
            return subprocess.run([sys.executable, "-m", "zoo", "profile", *_argv(args, sim=True)], env=env).returncode
        return _simulate_command(fam, steps, args, console)
    return _gpu_command(fam, steps, args, console)


def _argv(args, sim=False, size=None, json_path=None):
    out = [args.family, *args.steps]
    if size or args.size:
        out += ["--size", str(size or args.size)]
    if args.no_divergence:
        out.append("--no-divergence")
    if args.sim_constants:
        out.append("--sim-constants")
    if json_path or args.json:
        out += ["--json", str(json_path or args.json)]
    if sim:
        out.append("--sim")
    return out


def _simulate_command(fam, steps, args, console):
    from rich.table import Table

    size, kind = _case(fam, args.size, sim_size(fam))
    key = results.size_key(size, kind, fam.kinds)
    table = Table(
        title=f"{fam.name} at {key} in the simulator, one call: sectors per global request, wavefronts and bank "
        "conflicts per shared request, divergent branches, threads per line"
    )
    table.add_column("step")
    for _, label in SIM_COLUMNS:
        table.add_column(label, justify="left" if label == "kernel" else "right")
    summaries, notes, constants = {}, [], {}
    for v in steps:
        counted, said = simulate_or_say(
            v, size, kind, divergence=not args.no_divergence, as_on_gpu=not args.sim_constants
        )
        notes += said
        if counted is None:
            continue
        summaries[v.name] = counted.summary
        for launch_counts in counted.launches:
            row = sim_summary([launch_counts])
            table.add_row(v.name[:3], *(_cell(row.get(k)) for k, _ in SIM_COLUMNS))
        if counted.constants:
            text = ", ".join(f"{k} = {val}" for k, val in counted.constants.items())
            constants.setdefault(text, []).append(v.name[:3])
        if not counted.check.ok and not v.demonstration:
            notes.append(f"{v.name}: WRONG OUTPUT while counted ({counted.check.detail})")
        before = v.compared_with
        if before is not None and before.name in summaries:
            said = sentence(before.name, summaries[before.name], v.name, summaries[v.name])
            if said:
                notes.append(said)
    console.print(table)
    for text, names in constants.items():
        notes.append(f"counted with the GPU's {text} (smaller in the simulator's own runs): {' '.join(names)}")
    for note in notes:
        console.print(f"- {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"family": fam.name, "size": key, "steps": summaries}, f, indent=1)
    return 0


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return num(value)
    return str(value)


def _gpu_command(fam, steps, args, console):
    from rich.table import Table

    from zoo.device import properties

    size, kind = _case(fam, args.size, default_size(fam))
    key = results.size_key(size, kind, fam.kinds)
    console.print(f"profiling {len(steps)} step(s) of {fam.name} at {key} under Nsight Compute ...")
    entries, info = run_ncu(fam, steps, size, kind, echo=console.print)
    setting = run_setting(fam)
    world = f", {setting}" if setting else ""  # collectives: how many ranks on how many GPUs
    table = Table(
        title=f"{fam.name} at {key}{world} on {properties()['name']} (Nsight Compute; times at its locked clocks)"
    )
    for col in (
        "step",
        "kernel",
        "launches",
        "ms",
        "occupancy th/ach",
        "DRAM",
        "L2",
        "thr/inst",
        "top stall",
        "sectors/req ld/st",
        "conflicts/req ld/st",
        "FLOPs counted/modelled",
    ):
        table.add_column(col, justify="left" if col in ("step", "kernel", "top stall") else "right")
    notes = []
    for v in steps:
        entry = entries.get(v.name)
        if entry is None or "skipped" in entry:
            notes.append(f"{v.name}: {entry['skipped'] if entry else 'no kernel profiled'}")
            continue
        step_total = gpu_summary(entry)
        for k in entry["kernels"]:
            s = gpu_summary(entry, k["metrics"])
            flops = step_total["flops_counted"], step_total["flops_modelled"]
            table.add_row(
                v.name,
                k["name"],
                str(k["launches"]),
                num(s["duration_ms"]),
                _pair(s["theoretical_occupancy"], s["achieved_occupancy"], _pct),
                _pct(s["dram_pct"]),
                _pct(s["l2_pct"]),
                num(s["threads_per_instruction"]),
                ", ".join(f"{r} {num(x, 2)}" for r, x in s["stalls"][:1]) or "-",
                _pair(s["global_load_sectors_per_request"], s["global_store_sectors_per_request"]),
                _pair(s["shared_load_conflicts_per_request"], s["shared_store_conflicts_per_request"]),
                f"{_sci(flops[0])} / {_sci(flops[1])}",
            )
        if entry.get("zoo_launches", 0) > entry["launches_profiled"]:
            notes.append(
                f"{v.name}: profiled the first {entry['launches_profiled']} of {entry['zoo_launches']} launches"
            )
        before = v.compared_with
        if before is not None and "total" in entries.get(before.name, {}):
            said = sentence(before.name, gpu_summary(entries[before.name]), v.name, step_total)
            if said:
                notes.append(said)
    console.print(table)
    for note in notes:
        console.print(f"- {note}")
    if info["unavailable"]:
        console.print(f"- not offered by ncu on this GPU: {', '.join(info['unavailable'])}")
    if info["no_value"]:
        console.print(f"- ncu gave no value for: {', '.join(info['no_value'])}")
    profiled = f"{info['kernels_profiled']} kernels of {len(entries)} steps"
    console.print(f"- {profiled} profiled in {info['seconds']:.0f} s ({info['ncu']})")
    if not args.no_save:
        path = save(fam, key, entries, info, properties(), commit=results.git_commit())
        console.print(f"saved to {path.relative_to(results.ROOT)}; `python -m zoo report` puts it on the pages")
    return 0


def _sci(value):
    return "-" if not value else f"{value:.3g}"


def _compare(fam, steps, args, console):
    """The saved GPU profile beside the simulator's counts (run in a fresh simulator process)."""
    from rich.table import Table

    from zoo.device import slug

    if SIMULATOR:
        raise ProfileError("--compare sets a GPU profile beside the simulator's counts: run it on the GPU")
    path = results.profile_path(slug(), fam.name)
    if not path.exists():
        raise ProfileError(f"no saved profile of {fam.name} here ({path.name}): run `zoo profile {fam.name}` first")
    data = results.load(path)
    size, kind = _case(fam, args.size, default_size(fam))
    key = results.size_key(size, kind, fam.kinds)
    gpu_entries = data["sizes"].get(key, {}).get("steps", {})
    if not gpu_entries:
        raise ProfileError(f"{path.name} has no profile at {key}: run `zoo profile {fam.name} --size {key}`")
    with tempfile.TemporaryDirectory(prefix="zoo-sim-") as tmp:
        out = os.path.join(tmp, "sim.json")
        argv = [fam.name, *args.steps, "--size", args.compare, "--no-divergence", "--json", out]
        if args.sim_constants:
            argv.append("--sim-constants")
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "zoo", "profile", *argv],
            env=dict(os.environ, ZOO_TARGET="sim"),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not os.path.exists(out):
            last = ((proc.stderr or proc.stdout).strip().splitlines() or ["?"])[-1]
            raise ProfileError(f"the simulator's count failed: {last}")
        sim = json.load(open(out))
    seconds = time.perf_counter() - started
    rows = comparison({v.name: sim["steps"][v.name] for v in steps if v.name in sim["steps"]}, gpu_entries)
    table = Table(title=f"{fam.name}: the simulator at {args.compare} against Nsight Compute at {key}")
    for col in ("step", "figure", "simulator", "ncu", "agree (10%)"):
        table.add_column(col, justify="left" if col in ("step", "figure") else "right")
    for step, label, a, b, ok in rows:
        table.add_row(step, label, num(a), num(b), {True: "yes", False: "[red]NO[/]", None: "-"}[ok])
    console.print(table)
    console.print(f"- simulator counted in {seconds:.0f} s")
    return 0
