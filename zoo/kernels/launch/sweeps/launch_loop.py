"""The loop of STEPS tiny launches, each way: host microseconds per launch, time per loop, and the GPU's floor.

For each size n, each step of the family and the CuPy baseline run the same loop (STEPS dependent
updates of n floats) on CuPy arrays, as a CuPy program would call them, and each loop is timed:

- issue_us: host time until the call returns (the launches are queued, not finished);
  host_us_per_launch is that over the launches the host made (STEPS, or 1 for the graph
  replay and the fused kernel);
- loop_us: host time of a call and a synchronization: what a caller waits for one loop;
- device_us: the GPU's time for the loop between CUDA events, with the loop queued behind a
  kernel that holds the GPU (``zoo.bench.harness.hold_gpu``), so no host gap is in it: the floor.
  ``queued`` says whether the whole loop was issued before the hold ended; where it was not (numba
  waits on CuPy's stream at every launch of v01), device_us still holds the host's gaps.

Each figure is the fastest of ``repeats`` loops: other processes and the garbage collector only add.
"""

import time

import numpy as np
from numba import cuda

from zoo import SIMULATOR
from zoo.bench.sweeps import is_number
from zoo.kernels import launch as spec

COMMAND = "launch-loop"
HELP = "a loop of tiny dependent launches, each launch path: host us per launch, us per loop, GPU floor"
COLUMNS = ("series", "n", "steps", "launches", "issue_us", "host_us_per_launch", "loop_us", "device_us", "queued")
BASELINE_SERIES = "cupy ElementwiseKernel"
FINDINGS_N = spec.HEADLINE_SIZE
HOLD_TRIES = 3  # a longer hold each time, before giving up on queueing the whole loop behind it


def add_arguments(parser):
    parser.add_argument("--max-n", type=int, help="largest size (default 2^20; 64 in the simulator)")
    parser.add_argument("--repeats", type=int, help="loops timed per figure, the fastest kept (default 20; 1 in sim)")


def _sizes(top, simulator):
    if simulator:
        return [top]
    sizes = [1 << 10]
    while sizes[-1] * 4 <= top:
        sizes.append(sizes[-1] * 4)
    if sizes[-1] != top:
        sizes.append(top)
    return sizes


def _launches(name):
    """Launches the host makes for one loop."""
    if name.startswith("v05"):
        return 1  # the fused kernel
    if name.startswith("v04") and not SIMULATOR:
        return 1  # one graph launch replays the STEPS kernels
    return spec.STEPS


def _series(fam):
    """{name: launch(x, out)}: each step's own launch function, then the baseline on a GPU."""
    out = {v.name: v.module.launch for v in fam}
    if not SIMULATOR:
        out[BASELINE_SERIES] = spec.baseline
    return out


def _host_us(call, repeats):
    """(issue_us, loop_us), each the fastest of ``repeats`` loops started on an idle GPU."""
    issue, loop = float("inf"), float("inf")
    for _ in range(repeats):
        cuda.synchronize()
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        cuda.synchronize()
        t2 = time.perf_counter()
        issue, loop = min(issue, (t1 - t0) * 1e6), min(loop, (t2 - t0) * 1e6)
    return issue, loop


def _device_us(call, issue_us, repeats):
    """(GPU us of one loop between events, whether the loop was all queued before the GPU reached it)."""
    from zoo.bench.harness import hold_gpu

    start, stop = cuda.event(), cuda.event()
    best, all_queued = float("inf"), True
    for _ in range(repeats):
        hold_us = max(200.0, 2 * issue_us)  # the GPU sleeps while the loop is issued behind it
        for _ in range(HOLD_TRIES):
            hold_gpu(hold_us)
            t0 = time.perf_counter()
            start.record()
            call()
            stop.record()
            issued_us = (time.perf_counter() - t0) * 1e6
            stop.synchronize()
            queued = issued_us < 0.8 * hold_us  # the hold outlasted the issuing: no host gap between the events
            if queued:
                break
            hold_us *= 4
        best, all_queued = min(best, cuda.event_elapsed_time(start, stop) * 1e3), all_queued and queued
    return best, all_queued


def _arrays(host_x):
    """(x, out) on the device: CuPy arrays on a GPU (a CuPy program's loop), numba's simulated arrays otherwise."""
    if SIMULATOR:
        return cuda.to_device(host_x), cuda.device_array(host_x.shape, host_x.dtype)
    import cupy

    return cupy.asarray(host_x), cupy.empty(host_x.shape, host_x.dtype)


def _host(a):
    return a.copy_to_host() if SIMULATOR else a.get()


def measure(args):
    import zoo

    fam = zoo.family("launch")
    top = args.max_n or (64 if args.simulator else 1 << 20)
    repeats = args.repeats or (1 if args.simulator else 20)
    rows = []
    for n in _sizes(top, args.simulator):
        (host_x,) = spec.make_inputs(n, 0)
        want = spec.reference(host_x)
        x, out = _arrays(host_x)
        for name, fn in _series(fam).items():

            def call(fn=fn, x=x, out=out):
                fn(x, out)

            call()  # compiles; v04 captures its graph here
            call()  # v04's first replay
            issue, loop = _host_us(call, repeats)
            launches = _launches(name)
            row = dict(series=name, n=n, steps=spec.STEPS, launches=launches, issue_us=issue)
            row.update(host_us_per_launch=issue / launches, loop_us=loop, device_us=None, queued=None)
            if not args.simulator:
                row["device_us"], row["queued"] = _device_us(call, issue, max(1, min(repeats, 5)))
            got = _host(out)
            if np.linalg.norm(got - want) > spec.TOLERANCE * max(np.linalg.norm(want), 1e-30):
                raise AssertionError(f"launch-loop: {name} was wrong at n={n}")
            rows.append(row)
    return rows


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, (loops, per_launch) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw=dict(width_ratios=(3, 2)))
    names = list(dict.fromkeys(r["series"] for r in rows))
    has_floor = False
    for name in names:
        mine = sorted((r for r in rows if r["series"] == name), key=lambda r: r["n"])
        (line,) = loops.plot([r["n"] for r in mine], [r["loop_us"] for r in mine], marker="o", label=f"{name}: host")
        floor = [r for r in mine if is_number(r.get("device_us"))]
        if floor:
            has_floor = True
            loops.plot(
                [r["n"] for r in floor],
                [r["device_us"] for r in floor],
                ls=":",
                marker="x",
                color=line.get_color(),
                label=f"{name}: GPU (floor)",
            )
    loops.set_xscale("log", base=2)
    loops.set_yscale("log")
    loops.set_xlabel("elements n")
    loops.set_ylabel(f"microseconds per loop of {rows[0]['steps'] if rows else '?'} steps")
    loops.grid(True, which="both", alpha=0.3)
    loops.legend(fontsize=6)
    sizes = sorted({r["n"] for r in rows})
    at = min(sizes, key=lambda n: abs(n - FINDINGS_N)) if sizes else None
    bars = [r for r in rows if r["n"] == at and is_number(r.get("host_us_per_launch"))]
    per_launch.barh([r["series"] for r in bars], [r["host_us_per_launch"] for r in bars], color="tab:blue")
    per_launch.invert_yaxis()
    per_launch.set_xscale("log")
    per_launch.set_xlabel(f"host microseconds per launch at n = {at:,}" if at else "host microseconds per launch")
    per_launch.grid(True, axis="x", which="both", alpha=0.3)
    per_launch.tick_params(axis="y", labelsize=7)
    fig.suptitle(f"a loop of tiny dependent launches on {device_name}" + ("" if has_floor else " (host only: no GPU)"))
    fig.tight_layout()
    return fig


def findings(rows):
    """Host us per launch and us per loop of each series at the size nearest FINDINGS_N, against the GPU's floor."""
    sizes = {r["n"] for r in rows if is_number(r.get("n")) and is_number(r.get("loop_us"))}
    if not sizes:
        return []
    n = min(sizes, key=lambda size: abs(size - FINDINGS_N))
    at = {r["series"]: r for r in rows if r.get("n") == n and is_number(r.get("loop_us"))}
    lines = []
    names = list(at)
    steps = at[names[0]]["steps"]
    lines.append(
        f"at n = {n:,}, a loop of {steps} steps: "
        + "; ".join(
            f"{name} {r['host_us_per_launch']:,.1f} us a launch, {r['loop_us']:,.0f} us a loop"
            for name, r in at.items()
        )
    )
    first, lean = at.get(names[0]), next((r for name, r in at.items() if name.startswith("v03")), None)
    if first is not None and lean is not None:
        lines.append(
            f"the lean driver launch costs the host {lean['host_us_per_launch']:,.1f} us a launch against "
            f"{first['host_us_per_launch']:,.1f} for numba's dispatcher (v01) "
            f"({first['host_us_per_launch'] / lean['host_us_per_launch']:,.1f}x less)"
        )
    graph = next((r for name, r in at.items() if name.startswith("v04")), None)
    if graph is not None and lean is not None and is_number(lean.get("device_us")):
        lines.append(
            f"the graph replays the {steps} kernels in {graph['loop_us']:,.0f} us a loop "
            f"({graph['loop_us'] / steps:,.2f} us a kernel); the same kernels launched one by one take "
            f"{lean['device_us']:,.0f} us on the GPU alone, when all are queued"
        )
    fused = next((r for name, r in at.items() if name.startswith("v05")), None)
    if fused is not None and first is not None:
        lines.append(
            f"fused into one kernel the loop takes {fused['loop_us']:,.0f} us, "
            f"{first['loop_us'] / fused['loop_us']:,.0f}x less than numba's dispatcher's {first['loop_us']:,.0f}"
        )
    bound = [
        name
        for name, r in at.items()
        if is_number(r.get("device_us")) and r.get("queued") and r["loop_us"] > 1.5 * r["device_us"]
    ]
    if bound:
        lines.append(f"bound by the host (a loop takes over 1.5x the GPU's time for it): {', '.join(bound)}")
    return lines
