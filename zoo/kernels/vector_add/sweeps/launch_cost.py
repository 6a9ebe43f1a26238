"""Launch overhead: host microseconds per launch against the kernel's own time, by size.

The kernel is vector_add v02 (c = a + b, 12 bytes an element). For each size n,
each series is one way of getting that work done, and one call of it is timed
two ways:

- host_us: wall-clock time per call on the host (time.perf_counter around
  ``repeats`` calls, then one synchronization; the fastest of HOST_BATCHES
  such batches), what a Python loop pays;
- device_us: the GPU's time per call between CUDA events, measured behind a
  kernel that holds the GPU (``zoo.bench.harness.hold_gpu``) so that every launch
  is already queued when the GPU reaches it: the kernel's own time, with no
  host cost in it.

A size is launch-bound where host_us exceeds device_us: the GPU finishes
before the host can issue the next launch. The series: numba's own launch
(``dispatcher[grid, block](...)``, what ``ZOO_LAUNCH=numba`` uses) on numba and
on CuPy arrays, zoo's lean launch of the same kernel (``zoo.runtime.launch``: the
driver's ``cuLaunchKernel`` with hand-packed parameters), ``Variant.launch``
(the step's own launch function), the zoo's ``Variant.__call__`` on numba and on
CuPy arrays (input validation, output checks or allocation, then the launch),
``cupy.add``, a CUDA graph replaying 100 zoo calls (``zoo.graph``; host_us is
per replay of all 100), and the same n elements done by many launches of 1024
elements.
"""

import time

import numpy as np
from numba import cuda

from zoo import SIMULATOR
from zoo.bench.harness import hold_gpu
from zoo.device import sm_count
from zoo.kernels.vector_add import v02_grid_stride as step

COMMAND = "launch"
HELP = "host cost of a launch against the kernel's time, by size: where kernels become launch-bound"
COLUMNS = ("series", "n", "launches", "host_us", "device_us", "launch_bound")
TINY = 1024  # elements per launch in the many-launches series
GRAPH_CALLS = 100  # zoo calls captured in the graph series
HOST_BATCHES = 5  # host_us is the fastest of this many batches


def add_arguments(parser):
    parser.add_argument("--max-n", type=int, help="largest size (default 2^24; 2048 in the simulator)")
    parser.add_argument("--repeats", type=int, help="calls per measurement (default 200; 1 in the simulator)")


def _series(n, a, b, c):
    """{name: (call(), launches per call)} for size n on numba device buffers a, b, c of at least n."""
    import zoo

    v = zoo.family("vector_add")["v02"]
    da, db, dc = a[:n], b[:n], c[:n]
    blocks = min((n + step.THREADS_PER_BLOCK - 1) // step.THREADS_PER_BLOCK, step.BLOCKS_PER_SM * sm_count())
    raw = step.add_kernel.dispatcher[blocks, step.THREADS_PER_BLOCK]  # numba's own launch, not zoo's lean one
    lean = step.add_kernel[blocks, step.THREADS_PER_BLOCK]
    out = {
        "numba launch, numba arrays": (lambda: raw(da, db, dc), 1),
        "Variant.launch, numba arrays": (lambda: v.launch((da, db), dc), 1),
        "Variant.__call__, numba arrays, out given": (lambda: v(da, db, out=dc), 1),
        "Variant.__call__, numba arrays, allocates out": (lambda: v(da, db), 1),
    }
    if not SIMULATOR:
        import cupy

        ca, cb, cc = cupy.asarray(da), cupy.asarray(db), cupy.asarray(dc)
        out["numba launch, cupy arrays"] = (lambda: raw(ca, cb, cc), 1)
        out["lean launch, cupy arrays"] = (lambda: lean(ca, cb, cc), 1)
        out["Variant.__call__, cupy arrays, out given"] = (lambda: v(ca, cb, out=cc), 1)
        out["cupy.add, out given"] = (lambda: cupy.add(ca, cb, out=cc), 1)
        graph = zoo.graph(lambda x, y, o: [v(x, y, out=o) for _ in range(GRAPH_CALLS)], ca, cb, cc)
        out[f"graph of {GRAPH_CALLS} calls"] = (graph, GRAPH_CALLS)
    if n >= TINY and n // TINY <= 256:  # a few hundred launches stay within the driver's launch queue
        pieces = [(da[i : i + TINY], db[i : i + TINY], dc[i : i + TINY]) for i in range(0, n - n % TINY, TINY)]
        tiny = step.add_kernel[TINY // step.THREADS_PER_BLOCK, step.THREADS_PER_BLOCK]

        def many():
            for pa, pb, pc in pieces:
                tiny(pa, pb, pc)

        out[f"{n // TINY} launches of {TINY}"] = (many, len(pieces))
    return out


def _host_us(call, repeats, batches=HOST_BATCHES):
    """Host time per call: the fastest of ``batches`` batches of ``repeats`` calls, each batch ended by one
    synchronization. The fastest, as timeit reports it: other processes, clock changes and the garbage
    collector's passes over numba's many objects only ever add time, and they vary from run to run."""
    best = float("inf")
    for _ in range(batches):
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(repeats):
            call()
        cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / repeats * 1e6)
    return best


def _device_us(call, repeats):
    """GPU time per call with every launch queued before the GPU gets to it."""
    start, stop = cuda.event(), cuda.event()
    rounds = 1
    while True:
        hold_gpu(rounds * 1000)  # the GPU sleeps while the calls are queued
        t0 = time.perf_counter()
        start.record()
        for _ in range(repeats):
            call()
        stop.record()
        issued_ms = (time.perf_counter() - t0) * 1e3
        stop.synchronize()
        if issued_ms < rounds * 0.8 or rounds >= 512:  # the hold outlasted the issuing: nothing waited on the host
            return cuda.event_elapsed_time(start, stop) / repeats * 1e3
        rounds *= 4


def measure(args):
    top = args.max_n or (2048 if args.simulator else 1 << 24)
    repeats = args.repeats or (1 if args.simulator else 200)
    sizes = [1]
    while sizes[-1] * 16 <= top:
        sizes.append(sizes[-1] * 16)
    if sizes[-1] != top:
        sizes.append(top)
    rng = np.random.default_rng(0)
    ha, hb = rng.standard_normal(top, dtype=np.float32), rng.standard_normal(top, dtype=np.float32)
    a, b, c = cuda.to_device(ha), cuda.to_device(hb), cuda.device_array(top, np.float32)
    rows = []
    for n in sizes:
        for name, (call, launches) in _series(n, a, b, c).items():
            call()  # compile and warm up
            row = dict(series=name, n=n, launches=launches, host_us=_host_us(call, repeats))
            if not args.simulator:
                row["device_us"] = _device_us(call, max(1, min(repeats, 256 // launches)))
                row["launch_bound"] = row["host_us"] > row["device_us"]
            rows.append(row)
        if not np.array_equal(c[:n].copy_to_host(), ha[:n] + hb[:n]):
            raise AssertionError(f"launch sweep: vector_add was wrong at n={n}")
    raw = [r for r in rows if r["series"] == "numba launch, numba arrays" and r.get("launch_bound") is not None]
    if raw:
        free = [r["n"] for r in raw if not r["launch_bound"]]
        rows.append(dict(series="launch-bound below n", n=min(free) if free else None, host_us=None, device_us=None))
    return rows


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    names = [s for s in dict.fromkeys(r["series"] for r in rows) if s != "launch-bound below n"]
    many = [s for s in names if "launches of" in s]
    for name in [s for s in names if s not in many]:
        mine = sorted((r for r in rows if r["series"] == name), key=lambda r: r["n"])
        (line,) = ax.plot([r["n"] for r in mine], [r["host_us"] for r in mine], marker="o", label=f"{name}: host")
        if any(isinstance(r.get("device_us"), (int, float)) for r in mine):
            ax.plot(
                [r["n"] for r in mine],
                [r["device_us"] for r in mine],
                marker="x",
                ls=":",
                color=line.get_color(),
                label=f"{name}: GPU",
            )
    mine = sorted((r for r in rows if r["series"] in many), key=lambda r: r["n"])
    if mine:
        ax.plot(
            [r["n"] for r in mine],
            [r["host_us"] for r in mine],
            marker="s",
            color="black",
            label=f"launches of {TINY} elements: host",
        )
    threshold = [r["n"] for r in rows if r["series"] == "launch-bound below n" and isinstance(r.get("n"), int)]
    if threshold:
        ax.axvline(threshold[0], color="grey", ls="--")
        ax.text(threshold[0], ax.get_ylim()[1], f" launch-bound below n={threshold[0]:,}", va="top", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("elements per call (float32 copy kernel)")
    ax.set_ylabel("microseconds per call")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"launch overhead on {device_name}" + ("" if threshold else " (host times only: no GPU)"))
    fig.tight_layout()
    return fig


FINDINGS_N = 4096  # the size the findings quote: a kernel of about 2 us, so every call is launch-bound
BARE = "numba launch, numba arrays"


def findings(rows):
    """Host time per call of each series at FINDINGS_N, against a bare numba launch, and where launches stop binding."""
    at = {
        r["series"]: r["host_us"]
        for r in rows
        if r.get("n") == FINDINGS_N and isinstance(r.get("host_us"), (int, float)) and "launches of" not in r["series"]
    }
    lines = []
    graph = at.pop(f"graph of {GRAPH_CALLS} calls", None)
    call, library = at.get("Variant.__call__, cupy arrays, out given"), at.get("cupy.add, out given")
    if call is not None and library is not None:
        lines.append(
            f"a zoo call on CuPy arrays with out given costs the host {call:,.1f} us at n = {FINDINGS_N:,}, "
            f"{call / library:.2f}x cupy.add's {library:,.1f} us in the same run"
        )
    if graph is not None:
        lines.append(f"replaying a CUDA graph of {GRAPH_CALLS} zoo calls costs {graph / GRAPH_CALLS:,.2f} us a kernel")
    if BARE in at:
        bare = at.pop(BARE)
        lines.append(
            f"host time per call at n = {FINDINGS_N:,}, against a bare numba launch on numba arrays "
            f"({bare:,.1f} us): " + "; ".join(f"{name} {us:,.1f} us ({us - bare:+,.1f})" for name, us in at.items())
        )
    threshold = [r["n"] for r in rows if r.get("series") == "launch-bound below n" and isinstance(r.get("n"), int)]
    if threshold:
        lines.append(
            f"a single bare launch is launch-bound (the host takes longer to issue it than the GPU to "
            f"run it) below n = {threshold[0]:,}"
        )
    return lines
