"""Nsight Compute's counters: the metrics zoo asks for, ``ncu --csv`` read into rows, the rows cut into steps at
the markers and folded per kernel, and the summary a step's profile reduces to (the simulator's keys where the
two count the same thing).
"""

import csv
import io
import math

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


# -- ncu's CSV, folded ---------------------------------------------------------------------------
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


# -- a step's summary ----------------------------------------------------------------------------
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
