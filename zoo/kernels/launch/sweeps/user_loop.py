"""A user's loop of zoo calls against the step's own figure and the library's loop.

``zoo run`` reports a step's device time: the GPU's time per call with every launch already
queued. A user calls the step in a Python loop, ``step(a, b, out=c)`` on CuPy arrays, and waits
for the host as well: if the host takes longer to issue a call than the GPU to run it, the loop
runs at the host's pace. For each case this sweep times, on the same arrays:

- loop_us: the wall time of LOOP_CALLS calls of the step in a Python loop, then one
  synchronization, per call (the fastest of ``repeats`` loops): what the user's loop gets;
- device_us: the same call's device time, as ``zoo run`` measures it (``harness.time_launches``);
- the same two for the family's library baseline, called the way a CuPy program would.

``of_device`` is device_us over loop_us: 100% when the loop runs at the GPU's pace. The cases are
the issue's: the last SGEMM step at 1024^3 (about 60 us of GPU time a call) and the one-block scan
steps at 1,024 elements, a few microseconds of GPU work where the host cost is everything.
"""

import time

import numpy as np

COMMAND = "user-loop"
HELP = "a Python loop of zoo calls on CuPy arrays against the step's device time and the library's loop"
COLUMNS = ("family", "size", "series", "loop_us", "device_us", "of_device")
LOOP_CALLS = 200
SIMULATOR_LOOP_CALLS = 2  # the simulator checks the loop, it does not time it
CASES = (("sgemm", (1024, 1024, 1024), ("v14",)), ("scan", 1024, ("v01", "v02", "v03")))
SIMULATOR_CASES = (("scan", 33, ("v01", "v02", "v03")),)


def add_arguments(parser):
    parser.add_argument("--repeats", type=int, help="loops timed per figure, the fastest kept (default 5; 1 in sim)")


def _loop_us(call, repeats, sync, calls=LOOP_CALLS):
    """Wall time per call of ``calls`` calls and one synchronization: the fastest of ``repeats`` loops."""
    best = float("inf")
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def _call(fn, inputs, out=None):
    """fn(*inputs, out=out), or fn(*inputs) when out is None, with everything bound now."""
    if out is None:
        return lambda: fn(*inputs)
    return lambda: fn(*inputs, out=out)


def measure(args):
    import zoo

    repeats = args.repeats or (1 if args.simulator else 5)
    rows = []
    for name, size, steps in SIMULATOR_CASES if args.simulator else CASES:
        fam = zoo.family(name)
        host = fam.inputs(size, 0)
        shape, dtype = fam.output_for(*host)
        if args.simulator:  # correctness of the loop only: NumPy in and out, nothing timed that means anything
            inputs, out, sync = host, np.empty(shape, dtype), lambda: None
        else:
            import cupy

            inputs, out = tuple(cupy.asarray(a) for a in host), cupy.empty(shape, dtype)
            sync = cupy.cuda.Device().synchronize
        key = "x".join(map(str, size)) if isinstance(size, tuple) else str(size)
        calls = {fam[s].name: _call(fam[s], inputs, out) for s in steps}
        if not args.simulator:
            calls[f"{fam.BASELINE} (baseline)"] = _call(fam.baseline, (*inputs, out))
        for series, call in calls.items():
            call()  # compile and warm up
            calls_in_loop = SIMULATOR_LOOP_CALLS if args.simulator else LOOP_CALLS
            row = dict(family=name, size=key, series=series, loop_us=_loop_us(call, repeats, sync, calls_in_loop))
            if not args.simulator:
                from zoo.bench import harness

                row["device_us"] = harness.time_launches(lambda i, call=call: call(), budget_s=0.3).median_ms * 1e3
                row["of_device"] = row["device_us"] / row["loop_us"]
            rows.append(row)
            ok = np.allclose(zoo.runtime.arrays.host(out), fam.reference(*host), rtol=1e-4, atol=1e-3)
            if not ok:
                raise AssertionError(f"user-loop: {series} was wrong at {key}")
    return rows


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    labels = [f"{r['family']} {r['size']}: {r['series']}" for r in rows]
    loop = [r["loop_us"] for r in rows]
    device = [r.get("device_us") or 0 for r in rows]
    ypos = np.arange(len(rows))[::-1]
    ax.barh(ypos + 0.2, loop, height=0.4, color="#4c72b0", label="user's loop: us a call (host and GPU)")
    ax.barh(ypos - 0.2, device, height=0.4, color="#dd8452", label="device time a call (zoo run)")
    ax.set_yticks(ypos, labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("microseconds a call")
    ax.legend(fontsize=8)
    ax.set_title(f"a user's loop against the device figure on {device_name}", fontsize=10)
    fig.tight_layout()
    return fig


def findings(rows):
    lines = []
    by = {(r["family"], r["series"]): r for r in rows if isinstance(r.get("loop_us"), (int, float))}
    for (family, series), r in by.items():
        if "baseline" in series or not isinstance(r.get("device_us"), (int, float)):
            continue
        library = next((b for (f, s), b in by.items() if f == family and "baseline" in s), None)
        text = (
            f"{family} {series} at {r['size']}: a loop of {LOOP_CALLS} calls runs at {r['loop_us']:,.1f} us a call, "
            f"{100 * r['of_device']:.0f}% of its device figure ({r['device_us']:,.1f} us)"
        )
        if library is not None:
            text += (
                f"; the library's loop {library['loop_us']:,.1f} us a call ({library['loop_us'] / r['loop_us']:.2f}x)"
            )
        lines.append(text)
    return lines
