"""``python -m zoo roofline``: every step swept over k, the measured ceilings, and the roofline plot.

For each step (and the CuPy baseline) and each k, the kernel runs on 2^26
elements: warm-up, then at least 10 timed samples with CUDA events
(``zoo.bench.harness.time_launches``); a row reports the mean, the RMS spread of the
samples (a warning is printed above 5%) and the seed's columns:

    k             the power
    ai            arithmetic intensity, 2k FLOPs / 8 bytes = k/4 FLOP/byte
    gflops        2k * n / mean time: the seed's FLOP count for every step (the
                  Horner steps execute k FMAs, also 2k FLOPs)
    bandwidth     8n bytes / mean time, GB/s
    percent_peak  gflops as a percentage of the measured roof at this ai:
                  min(FP32 peak, copy bandwidth * ai)

Each row's output is checked against the float64 reference on a sample of the
elements (every element in the simulator). Two more rows (series "ceiling")
hold the measured and the datasheet roofs, so the plot is redrawn from the CSV
alone. The plot also places every measurement of this device's results file
(results/<gpu>.json, read at plot time) by its own FLOPs and bytes, labelled by
family, the labels set apart so that crowded points stay readable
(``place_labels``); families that count no FLOPs (pure data movement) cannot sit
on a FLOP/s axis and are named in a note instead. Steps that compute on the
tensor cores (those that reach mma.sync or wgmma, and the library rows of a
family made of them: hgemm) sit under a roof of their own, the FP16 tensor-core
roof: cuBLAS's rate from the same results file where it was measured, else the
datasheet's.
"""

import math
import sys

import numpy as np

from zoo.bench.sweeps import is_number
from zoo.kernels import roofline as spec

COMMAND = "roofline"
HELP = "sweep k of b = a + a^2 + ... + a^k for every roofline step; measured ceilings; roofline PNG"
# the picture also places every family's measured steps, from results/<gpu>.json: `zoo report` redraws it whenever
# it redraws any family's, so a results refresh never leaves it stale
READS_RESULTS = True
COLUMNS = ("series", "variant", "k", "ai", "gflops", "bandwidth", "percent_peak", "mean_ms", "rms_spread", "correct")
SIZE = 1 << 26
SIM_SIZE = 33
SIM_K = (1, 2, 5)
SPREAD_WARNING = 0.05
CHECK_SAMPLES = 1 << 16  # elements checked at each k on the GPU: a float64 reference of 2^26 at k = 1000 takes minutes


def add_arguments(parser):
    parser.add_argument(
        "--size", type=int, default=SIZE, help=f"elements (default {SIZE}; {SIM_SIZE} in the simulator)"
    )
    parser.add_argument(
        "--k",
        default=",".join(map(str, spec.K_SWEEP)),
        help="powers to sweep, comma-separated (default: the seed's list; 1,2,5 in the simulator)",
    )
    parser.add_argument("--steps", default="", help="steps to run, e.g. v01,v05 (default: all and the baseline)")


def _steps(fam, text):
    if not text:
        return list(fam.variants)
    return [fam[name.strip()] for name in text.split(",") if name.strip()]


def _sample(n):
    """Indices checked at each k: a strided sample plus the last elements (the tail paths)."""
    step = max(1, n // CHECK_SAMPLES)
    return np.unique(np.r_[np.arange(0, n, step), np.arange(max(0, n - 9), n)])


def _correct(result, a, k, idx):
    from zoo.bench.harness import compare

    ref = spec.reference(a[idx], k)
    return bool(compare(result[idx], ref, spec.TOLERANCE)[0])


def _row(variant, k, n, timing, correct, ceilings):
    ai = 2 * k / 8
    row = {
        "series": "sweep",
        "variant": variant,
        "k": k,
        "ai": ai,
        "correct": correct,
        "gflops": None,
        "bandwidth": None,
        "percent_peak": None,
        "mean_ms": None,
        "rms_spread": None,
    }
    if timing is None:
        return row
    seconds = timing.mean_ms * 1e-3
    row.update(
        gflops=spec.flops(n, k) / seconds / 1e9,
        bandwidth=spec.bytes_moved(n) / seconds / 1e9,
        mean_ms=timing.mean_ms,
        rms_spread=timing.rms_spread,
    )
    peak, bw = ceilings["fp32_peak_gflops"], ceilings["copy_bandwidth_gbs"]
    if peak and bw:
        row["percent_peak"] = 100 * row["gflops"] / min(peak, bw * ai)
    if timing.rms_spread > SPREAD_WARNING:
        print(
            f"warning: {variant} at k={k}: RMS spread {100 * timing.rms_spread:.1f}% of the mean "
            f"(over {100 * SPREAD_WARNING:.0f}%): this row is noisy",
            file=sys.stderr,
        )
    return row


def _ceiling_rows(ceilings):
    rows = []
    for name, peak, bw in (
        ("measured", ceilings["fp32_peak_gflops"], ceilings["copy_bandwidth_gbs"]),
        ("datasheet", ceilings["datasheet_fp32_gflops"], ceilings["datasheet_bandwidth_gbs"]),
    ):
        rows.append(
            {
                "series": "ceiling",
                "variant": name,
                "k": None,
                "ai": peak / bw if peak and bw else None,  # the ridge point
                "gflops": peak,
                "bandwidth": bw,
                "percent_peak": None,
                "mean_ms": None,
                "rms_spread": None,
                "correct": None,
            }
        )
    return rows


def measure(args):
    from numba import cuda

    import zoo
    from zoo.bench import ceilings

    fam = zoo.family("roofline")
    simulator = getattr(args, "simulator", zoo.SIMULATOR)
    n = SIM_SIZE if simulator else args.size
    ks = SIM_K if simulator else tuple(int(k) for k in str(args.k).split(",") if k.strip())
    for k in ks:
        spec.check_k(k)
    steps = _steps(fam, args.steps)
    ceiling = ceilings.measured()  # before the sweep: copies and FMAs on an idle GPU
    (a,) = spec.make_inputs(n, seed=0)
    idx = np.arange(n) if simulator else _sample(n)
    a_dev = cuda.to_device(a)
    out = cuda.device_array(n, np.float32)
    rows = []
    for variant in steps:
        variant.validate(a, k=ks[0])  # OutOfRange before any launch
        for k in ks:
            out.copy_to_device(np.full(n, np.nan, np.float32))  # poisoned: an unwritten element fails the check
            variant.launch((a_dev,), out, k=k)
            correct = _correct(out.copy_to_host(), a, k, idx)
            timing = None
            if not simulator:
                from zoo.bench.harness import time_launches

                timing = time_launches(lambda i, variant=variant, k=k: variant.launch((a_dev,), out, k=k), budget_s=0.5)
            rows.append(_row(variant.name, k, n, timing, correct, ceiling))
    if not simulator and not args.steps:
        rows += _baseline_rows(a, ks, idx, ceiling)
    return rows + _ceiling_rows(ceiling)


def _baseline_rows(a, ks, idx, ceiling):
    """The CuPy elementwise kernel of the spec (the seed's loop in CUDA C++), where CuPy is installed."""
    try:
        import cupy
    except ImportError:
        return []
    from zoo.bench.harness import time_launches

    a_cp = cupy.asarray(a)
    out = cupy.empty_like(a_cp)
    rows = []
    for k in ks:
        spec.baseline(a_cp, out, k=k)
        correct = _correct(out.get(), a, k, idx)
        timing = time_launches(lambda i, k=k: spec.baseline(a_cp, out, k=k), budget_s=0.5)
        rows.append(_row("baseline", k, a.size, timing, correct, ceiling))
    return rows


# -- the plot -----------------------------------------------------------------------
def _number(value):
    return value if is_number(value) else None


def _results_points(device_name):
    """[(family, label, ai, gflops)] from this device's results file; and the families with no FLOPs."""
    points, no_flops = [], set()
    for data in _device_results(device_name):
        for fam_name, by_size in data.get("families", {}).items():
            for key in _plotted_sizes(fam_name, by_size):
                for name, m in by_size[key].items():
                    gflops, gbps = _number(m.get("gflops")), _number(m.get("gbps"))
                    if not gbps:
                        continue
                    if not gflops:
                        no_flops.add(fam_name)
                        continue
                    label = "lib" if name == "baseline" else name.split("_")[0]
                    points.append((fam_name, label, gflops / gbps, gflops, name))  # ai = flops / bytes
    return points, sorted(no_flops)


def _device_results(device_name):
    from zoo.bench import results

    return [data for data in results.load_all().values() if data.get("device", {}).get("name") == device_name]


def _calls_mma(variant):
    """Whether the step's kernels can reach the tensor cores: its file, or a module of its family it imports
    from (hgemm's warp_tile, a base step), holds one of zoo.device.mma's ``mma_*`` (mma.sync) or
    zoo.device.wgmma's ``mma_async``."""
    import sys
    import types

    from zoo.device import mma, wgmma

    wanted = {id(getattr(mma, name)) for name in dir(mma) if name.startswith("mma_")} | {id(wgmma.mma_async)}
    package = variant.family.module.__name__ + "."
    seen, todo = set(), [variant.module]
    while todo:  # the step's module and the family modules it reaches (a base step, a helper module)
        module = todo.pop()
        if module.__name__ in seen:
            continue
        seen.add(module.__name__)
        for value in vars(module).values():
            if id(value) in wanted:
                return True
            home = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            if isinstance(home, str) and home.startswith(package) and home in sys.modules:
                todo.append(sys.modules[home])
    return False


def tensor_rows():
    """{family: None for every row, or the set of its steps} whose points sit under the tensor-core roof: a
    step that reaches mma.sync or wgmma; in a family whose every step does (hgemm), its library rows too
    (cuBLAS's half-precision GEMM runs on the tensor cores)."""
    import zoo

    found = {}
    for fam in zoo.families():
        steps = {v.name for v in fam if _calls_mma(v)}
        if steps:
            found[fam.name] = None if len(steps) == len(fam) else steps
    return found


def is_tensor(rows, family, name):
    if family not in rows:
        return False
    return rows[family] is None or name in rows[family]


def tensor_roof(device_name, families):
    """(GFLOP/s, what it is) of the FP16 tensor-core roof: the fastest library row a family of tensor-core
    steps measured on this device (cuBLAS), else the datasheet's dense FP16 figure, else (None, None)."""
    best = None
    for data in _device_results(device_name):
        for fam_name in families:
            for key, rows in data.get("families", {}).get(fam_name, {}).items():
                for name, m in rows.items():
                    if name.startswith("v") and name[1:3].isdigit():
                        continue  # a step, not a library
                    gflops = _number(m.get("gflops"))
                    if gflops and (best is None or gflops > best[0]):
                        best = (gflops, f"measured: {fam_name} {name} at {key}")
    if best:
        return best
    from zoo.bench import ceilings

    sheet = ceilings.datasheet(device_name) or {}
    if sheet.get("tensor_fp16_gflops"):
        return sheet["tensor_fp16_gflops"], "datasheet, dense FP16"
    return None, None


LABEL_OFFSETS = [(dx, dy) for dy in (3, -10, 12, -19, 21, -28) for dx in (3, -1)]  # points; dx -1: left of the point


def place_labels(ax, items, fontsize=6):
    """Annotate [(x, y, text)] so that labels do not overlap each other or the points: for each label
    (in order of x, then y) the first of LABEL_OFFSETS whose box is free, else the least crowded one.
    Deterministic; the axes' limits and the figure's layout must be final."""
    fig = ax.figure
    scale = fig.dpi / 72.0
    char_w, line_h = 0.55 * fontsize * scale, 1.25 * fontsize * scale
    points = [tuple(ax.transData.transform((x, y))) for x, y, _ in items]
    taken = [(px - 2 * scale, py - 2 * scale, px + 2 * scale, py + 2 * scale) for px, py in points]

    def overlap(a, b):
        w = min(a[2], b[2]) - max(a[0], b[0])
        h = min(a[3], b[3]) - max(a[1], b[1])
        return w * h if w > 0 and h > 0 else 0.0

    for (px, py), (x, y, text) in sorted(zip(points, items, strict=True), key=lambda p: (p[1][0], p[1][1])):
        width = char_w * len(text)
        best = None
        for dx, dy in LABEL_OFFSETS:
            left = px + dx * scale if dx >= 0 else px - width + dx * scale
            box = (left, py + dy * scale, left + width, py + dy * scale + line_h)
            crowd = sum(overlap(box, other) for other in taken)
            if best is None or crowd < best[0]:
                best = (crowd, dx, dy, box)
            if crowd == 0:
                break
        _, dx, dy, box = best
        taken.append(box)
        ax.annotate(
            text,
            (x, y),
            textcoords="offset points",
            xytext=(dx, dy),
            ha="left" if dx >= 0 else "right",
            fontsize=fontsize,
            arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "0.5"} if abs(dy) > 10 else None,
        )


def _plotted_sizes(fam_name, by_size):
    """The family's headline size where the file has it, else its largest size."""
    from zoo import registry
    from zoo.bench import results

    try:
        fam = registry.family(fam_name)
        headline = getattr(fam.module, "HEADLINE_SIZE", None) or max(fam.BENCH_SIZES, key=fam.bytes_moved)
        key = results.size_key(headline)
        if key in by_size:
            return [key]
    except Exception:  # a family that is gone or renamed: fall back on the file alone
        pass
    return (
        [max(by_size, key=lambda k: max((m.get("gbps") or 0) * (m.get("ms") or 0) for m in by_size[k].values()))]
        if by_size
        else []
    )


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(14, 7))
    ceilings = {r["variant"]: r for r in rows if r.get("series") == "ceiling"}
    sweep = [r for r in rows if r.get("series") == "sweep" and _number(r.get("gflops"))]
    points, no_flops = _results_points(device_name)
    ais = [r["ai"] for r in sweep] + [p[2] for p in points] or [0.25, 250.0]
    lo, hi = min(min(ais) / 4, 0.05), max(max(ais) * 4, 1000.0)
    x = np.logspace(math.log10(lo), math.log10(hi), 200)
    for name, style in (("measured", "-"), ("datasheet", ":")):
        c = ceilings.get(name, {})
        peak, bw = _number(c.get("gflops")), _number(c.get("bandwidth"))
        if not (peak and bw):
            continue
        ax.plot(
            x,
            np.minimum(peak, bw * x),
            style,
            color="black",
            lw=2 if name == "measured" else 1,
            label=f"{name} roofs: {bw:,.0f} GB/s, {peak / 1e3:,.1f} TFLOP/s",
        )
        ridge = peak / bw
        ax.plot([ridge], [peak], "o" if name == "measured" else "s", color="black", mfc="white", ms=8)
        ax.annotate(
            f"ridge ({name}) {ridge:.1f} FLOP/B",
            (ridge, peak),
            textcoords="offset points",
            xytext=(8, -14 if name == "measured" else 6),
            fontsize=8,
        )
    variants = sorted({r["variant"] for r in sweep})
    for name in variants:
        pts = sorted((r["ai"], r["gflops"]) for r in sweep if r["variant"] == name)
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            "-o" if name != "baseline" else "--^",
            ms=4,
            label=f"roofline {name} (k sweep)",
        )
    rows = tensor_rows()
    tensor = sorted({p[0] for p in points if is_tensor(rows, p[0], p[4])})
    whole = [f for f, steps in rows.items() if steps is None]  # families whose library rows are tensor-core GEMMs
    tensor_peak, tensor_source = tensor_roof(device_name, whole) if tensor else (None, None)
    measured_bw = _number(ceilings.get("measured", {}).get("bandwidth")) or _number(
        ceilings.get("datasheet", {}).get("bandwidth")
    )
    if tensor_peak and measured_bw:
        ax.plot(
            x,
            np.minimum(tensor_peak, measured_bw * x),
            "--",
            color="#b03a2e",
            lw=1.5,
            label=f"FP16 tensor-core roof: {tensor_peak / 1e3:,.0f} TFLOP/s ({tensor_source}); "
            f"for the tensor-core steps of {', '.join(tensor)}",
        )
    markers = "DvP*Xhp<>"
    colors = plt.get_cmap("Dark2").colors  # apart from the sweep lines' default colours
    for i, fam_name in enumerate(sorted({p[0] for p in points})):
        mine = [p for p in points if p[0] == fam_name]
        under = " (red edge: tensor cores, under the tensor-core roof)" if fam_name in tensor else ""
        ax.scatter(
            [p[2] for p in mine],
            [p[3] for p in mine],
            marker=markers[i % len(markers)],
            s=36,
            color=colors[i % len(colors)],
            edgecolors=["#b03a2e" if is_tensor(rows, fam_name, p[4]) else "none" for p in mine],
            label=f"{fam_name} (results file){under}",
            zorder=3,
        )
    notes = []
    if not sweep:
        notes.append("no timings in these rows (simulator run: correctness only)")
    if no_flops:
        notes.append("not shown, no FLOPs counted: " + ", ".join(no_flops))
    if notes:
        ax.text(0.01, 0.01, "\n".join(notes), transform=ax.transAxes, fontsize=8, va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (FP32 unless under the tensor-core roof; an FMA counts 2)")
    ax.set_title(f"Roofline, {device_name}: b = a + a^2 + ... + a^k, k/4 FLOP/byte")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # beside the axes: over them it would hide points
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    else:
        ax.set_ylim(1, 1e5)
    fig.tight_layout()
    ax.set_ylim(*ax.get_ylim())  # fixed before the labels are placed in display coordinates
    place_labels(ax, [(ai, gflops, label) for _, label, ai, gflops, _ in points])
    return fig
