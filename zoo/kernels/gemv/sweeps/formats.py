"""The issue's goals, measured: every weight format's last step against the copy ceiling and cuBLAS fp16.

For each shape (default: the family's BENCH_SIZES) and each kind of input, the sweep times the family's last
step, cuBLAS in float16 (``cupy.matmul`` on the weights held as float16: the spec's ``matmul_fp16``) and a
device-to-device copy of the same bytes (``copy_ceiling``), the step and the copy two ways: launched one after
another from Python (``eager``, what ``zoo run`` times) and as a CUDA graph of such calls replayed (``graph``;
cuBLAS is timed eager only: CuPy's cuBLAS refuses stream capture), which is how a
decode loop runs its kernels: at 8192 x 8192 an int4 GEMV reads 34 MB, about 8 us at the H200's copy
bandwidth, less than the host spends launching a zoo call (the launch sweep's figures), so eager timings of
the short kernels measure the host. Input sets rotate past the L2 as in ``zoo run``. Every row also has the
step's correctness on the first call and what quantizing cost: the relative error of the kind's exact product
against the float32 master product (``quantization_error``). In the simulator nothing is timed.

The findings state the goals: the fp16 kind at 90% or more of the copy bandwidth of its bytes and at least
cuBLAS fp16's weights per second; int4 at 3.5x the fp16 kind's weights per second (graph timings).
"""

import numpy as np

from zoo.bench import sweeps
from zoo.device.jit import launch_count, launched_since

COMMAND = "gemv-formats"
HELP = "GEMV (gemv's last step) in every weight format: weights/s, GB/s, % of copy, x cuBLAS fp16, quantization error"
COLUMNS = (
    "size",
    "kind",
    "step",
    "kernel",
    "correct",
    "quantization_error",
    "bytes",
    "eager_us",
    "graph_us",
    "gweights_per_s",
    "gbps",
    "copy_us",
    "of_copy",
    "cublas_fp16_us",
    "over_cublas_fp16",
)
SIM_SIZES = ((5, 64), (9, 320))
CALLS_PER_GRAPH = 32  # launches captured in one graph: its replay's launch cost spread over them


def add_arguments(parser):
    parser.add_argument(
        "--sizes", help="OUTxIN shapes joined by commas (default: the family's BENCH_SIZES; tiny in the simulator)"
    )


def _sizes(args, fam):
    if args.sizes:
        from zoo.bench import results

        return [results.parse_size(s) for s in args.sizes.split(",")]
    return list(SIM_SIZES if args.simulator else fam.BENCH_SIZES)


def graph_us(call, sets):
    """us per call of ``call(inputs)`` replayed from a CUDA graph of CALLS_PER_GRAPH calls over the rotating sets."""
    from zoo.bench import harness
    from zoo.runtime import graphs

    def calls():
        for i in range(CALLS_PER_GRAPH):
            call(sets[i % len(sets)])

    calls()  # eager first: compiles, allocates the held copies a row makes on its first call
    graph = graphs.capture(calls)
    return harness.time_launches(lambda i: graphs.replay(graph)).median_ms * 1e3 / CALLS_PER_GRAPH


def _eager_us(call, sets):
    """us per call of ``call(inputs)`` launched one after another over the rotating sets (device time; the host's
    launches hide behind the kernels where they are shorter). cuBLAS's row is timed so: CuPy's cuBLAS refuses
    stream capture ("calling cuBLAS API during stream capture is currently unsupported"), and its launch costs
    the host about 10 us, less than its fp16 GEMV takes on the device at the BENCH sizes."""
    from zoo.bench import harness

    return harness.time_launches(lambda i: call(sets[i % len(sets)])).median_ms * 1e3


def measure(args):
    import zoo
    from zoo.bench import harness

    fam = zoo.family("gemv")
    step = fam.variants[-1]
    spec = fam.module
    rows = []
    for size in _sizes(args, fam):
        for kind in fam.kinds:
            host = fam.inputs(size, 0, kind)
            nbytes = fam.bytes_moved(size, kind)
            row = dict(size="x".join(map(str, size)), kind=kind, step=step.name, bytes=nbytes)
            row["quantization_error"] = spec.quantization_error(size, 0, kind)
            ref = fam.reference(*host)
            if args.simulator:
                since = launch_count()
                got = step(*host)
                row["kernel"] = _kernel_name(since)
                row["correct"] = bool(harness.compare(got, ref, fam.tolerance(size))[0])
                rows.append(row)
                continue
            # the kernel: the step's launch picks one per format and shape (and GPU: v10's tuned ring)
            sets, step_sets, out, row["correct"], row["kernel"] = first_call(fam, step, size, host, ref)

            def gemv(inputs, out=out):
                step.launch(inputs, out)

            row["eager_us"] = _eager_us(gemv, step_sets)
            row["graph_us"] = graph_us(gemv, step_sets)
            row["copy_us"] = graph_us(lambda inputs, out=out: spec.copy_ceiling(*inputs, out), sets)
            row["cublas_fp16_us"] = _eager_us(lambda inputs, out=out: spec.matmul_fp16(*inputs, out), sets)
            weights = size[0] * size[1]
            row["gweights_per_s"] = weights / row["graph_us"] / 1e3
            row["gbps"] = nbytes / row["graph_us"] / 1e3
            row["of_copy"] = row["copy_us"] / row["graph_us"]  # the copy moves the same bytes: a ratio of times
            row["over_cublas_fp16"] = row["cublas_fp16_us"] / row["graph_us"]
            rows.append(row)
            spec._HELD.clear()  # the next kind's held copies start afresh
    return rows


def first_call(fam, step, size, host, ref):
    """The step's first call on device copies of ``host`` (``harness.input_sets``: sets rotating past the L2), into
    an output poisoned with NaN: (the sets, the same in the step's layout (``Variant.packed``), the output, whether it
    matches ``ref``, the kernel it launched)."""
    import cupy

    from zoo.bench import harness

    shape, dtype = fam.output_for(*host)
    sets = [tuple(cupy.asarray(a) for a in s) for s in harness.input_sets(host)]
    step_sets = [step.packed(s) for s in sets]  # in the step's own layout, where it has one (Variant.packed)
    out = cupy.full(shape, np.nan, dtype)
    since = launch_count()
    step.launch(step_sets[0], out)
    correct = bool(harness.compare(cupy.asnumpy(out), ref, fam.tolerance(size))[0])
    return sets, step_sets, out, correct, _kernel_name(since)


def _kernel_name(since):
    """The name of the kernel launched last since ``launch_count()`` was ``since`` ('-' if none was)."""
    kernel = launched_since(since)
    return kernel.__name__ if kernel is not None else "-"


def findings(rows):
    timed = [r for r in rows if sweeps.is_number(r.get("graph_us"))]
    out = []
    for size in dict.fromkeys(r["size"] for r in rows):
        mine = {r["kind"]: r for r in rows if r["size"] == size}
        errors = ", ".join(f"{k} {r['quantization_error']:.1e}" for k, r in mine.items() if k != "fp32")
        out.append(f"{size}: error of each format's product against the float32 product: {errors}")
        fp16, int4 = mine.get("fp16"), mine.get("int4")
        if not (fp16 in timed and int4 in timed):
            continue
        goal = "met" if fp16["of_copy"] >= 0.9 and fp16["over_cublas_fp16"] >= 1 else "not met"
        out.append(
            f"{size}: fp16 at {100 * fp16['of_copy']:.0f}% of the copy bandwidth of its bytes and "
            f"{fp16['over_cublas_fp16']:.2f}x cuBLAS fp16 (goal: 90% and 1x, {goal}); "
            f"int4 {int4['gweights_per_s'] / fp16['gweights_per_s']:.2f}x the fp16 weights per second "
            f"(goal 3.5x, {'met' if int4['gweights_per_s'] >= 3.5 * fp16['gweights_per_s'] else 'not met'}; "
            f"a kernel that only copied int4's bytes would reach {fp16['graph_us'] / int4['copy_us']:.2f}x); "
            f"eager launches: fp16 {fp16['eager_us']:.1f} us against {fp16['graph_us']:.1f} in a graph, "
            f"int4 {int4['eager_us']:.1f} against {int4['graph_us']:.1f}"
        )
    return out


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    timed = [r for r in rows if sweeps.is_number(r.get("graph_us"))]
    if not timed:
        sweeps.no_timings(ax)  # the simulator: an empty panel that says why
    else:
        sizes = list(dict.fromkeys(r["size"] for r in timed))
        kinds = list(dict.fromkeys(r["kind"] for r in timed))
        width = 0.8 / (len(kinds) + 1)
        for j, kind in enumerate(kinds):
            values = [
                next((r["gweights_per_s"] for r in timed if r["size"] == s and r["kind"] == kind), 0) for s in sizes
            ]
            ax.bar([i + j * width for i in range(len(sizes))], values, width, label=kind)
        fp16 = [next((r for r in timed if r["size"] == s and r["kind"] == "fp16"), None) for s in sizes]
        values = [r["gweights_per_s"] / r["over_cublas_fp16"] if r else 0 for r in fp16]  # cuBLAS's own rate
        ax.bar([i + len(kinds) * width for i in range(len(sizes))], values, width, label="cuBLAS fp16", color="grey")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(sizes))], sizes)
        ax.set_xlabel("OUT x IN")
        ax.set_ylabel("billions of weights per second (CUDA graph)")
        ax.legend(fontsize=8)
    ax.set_title(f"GEMV in every weight format on {device_name}")
    fig.tight_layout()
    return fig
