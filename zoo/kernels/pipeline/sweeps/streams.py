"""Time every pipeline step on one large host array; with --plot, draw each step's timeline.

Each step runs on the same n float32 elements, the serial pageable step on an
ordinary NumPy array and the others on arrays from ``pinned_empty`` (so no
staging copy is timed). A summary row per step gives its time (CUDA events
around whole calls, median), the speedup over the serial pageable step, and the
fraction of the ideal bound achieved. The ideal is the slowest stage's total
plus one chunk of the other two (fill and drain), from the stage times of the
one-stream step, where nothing overlaps. ``--work auto`` (the default on a GPU)
picks the FMAs per element that make the kernel as long as the copy in.

With ``--plot`` a timeline run of each step adds a row per copy or kernel
(start and end from CUDA events recorded on its stream, so a span includes any
wait for an engine busy with another stream) and the PNG is a Gantt chart: a
row per stream and engine. In the simulator streams run one after another and
events time nothing: the steps run for correctness only; overlap needs a GPU.
"""

import numpy as np
from numba import cuda

from zoo.kernels.pipeline import stages

COMMAND = "streams"
HELP = "copy/compute overlap of every pipeline step: speedup over serial, fraction of the ideal, Gantt chart"
COLUMNS = (
    "variant",
    "kind",
    "ms",
    "speedup",
    "of_ideal",
    "ideal_ms",
    "h2d_ms",
    "compute_ms",
    "d2h_ms",
    "stage",
    "chunk",
    "lane",
    "start_ms",
    "end_ms",
    "size",
    "work",
    "chunks",
    "streams",
    "correct",
)
STAGES = ("h2d", "compute", "d2h")


def add_arguments(parser):
    parser.add_argument("--size", type=int, help="elements (default 2^26 on a GPU, 1000 in the simulator)")
    parser.add_argument("--chunks", type=int, default=stages.CHUNKS)
    parser.add_argument("--streams", type=int, default=stages.STREAMS)
    parser.add_argument(
        "--work", default="auto", help="FMAs per element, or 'auto': the kernel as long as the copy in (default)"
    )
    parser.add_argument("--plot", action="store_true", help="add each step's timeline; the PNG is a Gantt chart")


def _ms(a, b):
    return cuda.event_elapsed_time(a, b)


def balanced_work(n):
    """FMAs per element that make the kernel take as long as the pinned copy in."""
    from zoo.bench.harness import time_launches

    d_x, d_y = stages.device_buffers(n)
    px = stages.pinned_empty(n)
    px[...] = 1.0
    copy = time_launches(lambda i: d_x.copy_to_device(px, stream=cuda.default_stream())).median_ms
    kernel = time_launches(lambda i: stages.compute(d_x, d_y, stages.WORK)).median_ms
    return max(4, int(round(stages.WORK * copy / kernel)))


def _timeline(run, x, out, params):
    """(spans, total ms) of one call: spans are (stage, chunk, lane, start ms, end ms) from an origin event."""
    origin = cuda.event()
    origin.record()  # on the legacy default stream: after all earlier work
    timeline = []
    run(x, out, timeline=timeline, **params)
    spans = [(stage, c, lane, _ms(origin, a), _ms(origin, b)) for stage, c, lane, a, b in timeline]
    return spans


def _stage_totals(spans):
    return {s: sum(e - b for st, _, _, b, e in spans if st == s) for s in STAGES}


def measure(args):
    import zoo

    fam = zoo.family("pipeline")
    n = args.size or (1000 if args.simulator else 1 << 26)
    if args.simulator:
        work = stages.WORK if args.work == "auto" else int(args.work)
    else:
        work = balanced_work(n) if args.work == "auto" else int(args.work)
    params = dict(work=work, chunks=args.chunks, streams=args.streams)
    x = fam.make_inputs(n, 0)[0]
    ref = fam.reference(x, work=work)
    pageable = (x, np.empty_like(x))
    px, pout = stages.pinned_empty(n), stages.pinned_empty(n)
    px[...] = x
    pinned = (px, pout)
    common = dict(size=n, **params)

    rows, summaries, spans_of = [], [], {}
    for v in fam:
        xin, out = pageable if v.number == 1 else pinned
        out[...] = np.nan
        v.module.run(xin, out, **params)
        ok = bool(np.isfinite(out).all()) and fam.tolerance(n) >= _rel(out, ref)
        row = dict(variant=v.name, kind="summary", correct=ok, **common)
        if not args.simulator:
            from zoo.bench.harness import time_launches

            row["ms"] = time_launches(
                lambda i, run=v.module.run, xin=xin, out=out: run(xin, out, **params), budget_s=2.0
            ).median_ms
            spans_of[v.name] = _timeline(v.module.run, xin, out, params)
            row.update({f"{s}_ms": t for s, t in _stage_totals(spans_of[v.name]).items()})
        summaries.append(row)

    if not args.simulator:
        serial = summaries[0]["ms"]
        totals = _stage_totals(spans_of[fam[3].name])  # one stream: stages measured without overlap
        slowest = max(totals.values())
        ideal = slowest + (sum(totals.values()) - slowest) / min(args.chunks, n)
        for row in summaries:
            row.update(speedup=serial / row["ms"], ideal_ms=ideal, of_ideal=ideal / row["ms"])
        _say(summaries, ideal)
    else:
        print(
            "simulator: every step ran once for correctness; streams run one after another here, "
            "so overlap (and any timeline) needs a GPU"
        )
    rows.extend(summaries)
    if args.plot and not args.simulator:
        for name, spans in spans_of.items():
            for stage, c, lane, start, end in spans:
                rows.append(
                    dict(
                        variant=name, kind="span", stage=stage, chunk=c, lane=lane, start_ms=start, end_ms=end, **common
                    )
                )
    return rows


def _say(summaries, ideal):
    """Print the speedups, the fraction of the ideal, and whether issue order mattered."""
    for r in summaries:
        print(
            f"{r['variant']:28s} {r['ms']:9.3f} ms  {r['speedup']:5.2f}x serial  "
            f"{100 * r['of_ideal']:5.1f}% of the ideal {ideal:.3f} ms"
        )
    depth, breadth = (next(r["ms"] for r in summaries if r["variant"].startswith(p)) for p in ("v04", "v05"))
    change = breadth / depth - 1
    if abs(change) < 0.05:
        print(
            f"issue order: breadth-first is within 5% of depth-first ({100 * change:+.1f}%): it does not "
            "matter here; each stream has its own hardware queue (Hyper-Q), so one stream's D2H cannot "
            "block another's H2D"
        )
    else:
        print(
            f"issue order: breadth-first is {100 * change:+.1f}% against depth-first: it still matters "
            "here (see the Gantt chart for which copy waited)"
        )


def _rel(out, ref):
    from zoo.bench.harness import relative_error

    return relative_error(out, ref) if np.isfinite(out).all() else np.inf


COLOURS = {"h2d": "tab:blue", "compute": "tab:orange", "d2h": "tab:green"}


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    summary = [r for r in rows if r.get("kind") == "summary"]
    spans = [r for r in rows if r.get("kind") == "span"]
    timed = [r for r in summary if isinstance(r.get("ms"), (int, float))]
    first = summary[0] if summary else {}
    setup = (
        f"n={first.get('size')}, work={first.get('work')}, chunks={first.get('chunks')}, streams={first.get('streams')}"
    )
    if not spans:
        fig, ax = plt.subplots(figsize=(8, 4))
        if timed:
            names = [r["variant"] for r in timed]
            ax.barh(names, [r["speedup"] for r in timed], color="tab:blue")
            for i, r in enumerate(timed):
                ax.text(r["speedup"], i, f" {r['speedup']:.2f}x, {100 * r['of_ideal']:.0f}% of ideal", va="center")
            ax.invert_yaxis()
            ax.set_xlabel("speedup over the serial pageable step")
        else:
            ax.text(
                0.5,
                0.5,
                "no timings: the simulator runs streams one after another;\noverlap needs a GPU",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
            ax.set_axis_off()
        ax.set_title(f"pipeline steps on {device_name}\n{setup}")
        fig.tight_layout()
        return fig

    names = list(dict.fromkeys(r["variant"] for r in spans))
    heights = [1 + len({r["lane"] for r in spans if r["variant"] == nm}) for nm in names]
    fig, axes = plt.subplots(
        len(names),
        1,
        figsize=(11, 1.0 + 0.9 * sum(heights)),
        sharex=True,
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    by_name = {r["variant"]: r for r in summary}
    for ax, nm in zip(axes[:, 0], names, strict=True):
        mine = [r for r in spans if r["variant"] == nm]
        lanes = sorted({r["lane"] for r in mine})
        labels = [
            f"stream {lane} {stage.upper() if stage != 'compute' else 'kernel'}" for lane in lanes for stage in STAGES
        ]
        for r in mine:
            y = lanes.index(r["lane"]) * len(STAGES) + STAGES.index(r["stage"])
            ax.barh(
                y,
                r["end_ms"] - r["start_ms"],
                left=r["start_ms"],
                color=COLOURS[r["stage"]],
                edgecolor="black",
                linewidth=0.3,
            )
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.invert_yaxis()
        s = by_name.get(nm, {})
        extra = (
            f": {s['ms']:.2f} ms, {s['speedup']:.2f}x serial, {100 * s['of_ideal']:.0f}% of ideal"
            if isinstance(s.get("ms"), (int, float))
            else ""
        )
        ax.set_title(nm + extra, fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("ms from the start of the call (one call, CUDA events)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    fig.legend(handles, ["host to device copy", "kernel", "device to host copy"], loc="upper right", fontsize=8)
    fig.suptitle(f"pipeline timelines on {device_name} ({setup})", fontsize=10)
    fig.tight_layout()
    return fig
