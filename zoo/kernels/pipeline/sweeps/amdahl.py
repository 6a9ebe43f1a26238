"""Whole applications on the GPU against the CPU: Amdahl's bound beside the measured speedup, and strong scaling.

An application is more than its kernel: a host array comes in, goes to the GPU, the
kernel runs, the result comes back and the host does its own work with it. Two of
them, each run both ways in the same process:

- pipeline: y = the recurrence of ``stages.fma_chain`` on 2^24 float32 (the offloaded
  part; on the CPU the spec's numba row over every core), then a 64-bin histogram of y
  on the host (the part that stays);
- sgemm: C = A @ B at 2048^3 (offloaded: v14; on the CPU NumPy's BLAS over every core),
  then the host's row norms of C.

For each: p, the fraction of the all-CPU time that the offloaded part takes; s, how
much faster the GPU does that part *with its transfers*; Amdahl's bound on the whole
application, 1 / ((1 - p) + p / s), and its limit for an infinitely fast GPU, 1 / (1 - p);
and the speedup measured end to end. Then strong scaling of the pipeline's kernel: a
grid-stride copy of the chain on a fixed 2^24 elements, launched as one block of 1024
threads on 1 SM, then on 2, 4, ... SMs up to every SM (the hardware gives each block
an SM of its own while there are no more blocks than SMs; a grid of "one SM's worth
of blocks" would instead spread them over as many SMs): speedup over one SM, and the
efficiency, speedup divided by the SMs used.
"""

import time

import numpy as np
from numba import cuda, uint32

from zoo.bench import sweeps
from zoo.bench.harness import time_wall
from zoo.device import sm_count
from zoo.device.jit import jit
from zoo.kernels.pipeline import stages

COMMAND = "amdahl"
HELP = "whole applications (pipeline, sgemm) against the CPU: Amdahl's bound, the measured speedup, strong scaling"
COLUMNS = (
    "application",
    "row",
    "cpu_ms",
    "gpu_ms",
    "p",
    "part_speedup",
    "amdahl_bound",
    "amdahl_limit",
    "measured_speedup",
    "sms",
    "kernel_ms",
    "speedup_over_one_sm",
    "efficiency",
    "correct",
)
THREADS = 1024  # one block a SM: half of an SM's 2048 threads, 32 warps to hide the chain's FMA latency


@jit
def chain_strided(x, y, work):
    """stages.fma_chain with a grid-stride loop: any grid covers every element, so the grid can shrink."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)  # every thread of the grid: the grid walks the array in strides of itself
    for i in range(start, x.size, stride):
        v = x[i]
        for _ in range(work):
            v = v * stages.A + stages.B
        y[i] = v


def add_arguments(parser):
    parser.add_argument("--n", type=int, help="elements of the pipeline application (default 2^24)")
    parser.add_argument("--m", type=int, help="the sgemm application's M = N = K (default 2048)")


def _median_ms(fn, repeats=3):
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1e3)
    return float(np.median(samples))


def _amdahl_row(name, cpu_part, host_work, gpu_part, whole_gpu, timed):
    """The row of one application, from its four timed functions (None timings in the simulator)."""
    cpu_part()  # compile and warm up each path once
    gpu_part()
    if not timed:
        return dict(application=name, row="amdahl", correct=True)
    part_ms, host_ms = _median_ms(cpu_part), _median_ms(host_work)
    # the wall time the application waits: a call and a synchronization, median of three (harness.time_wall)
    gpu_part_ms, gpu_app_ms = (
        time_wall(lambda i, f=f: f(), min_samples=3, budget_s=0).median_ms for f in (gpu_part, whole_gpu)
    )
    cpu_ms = part_ms + host_ms
    p = part_ms / cpu_ms  # the share of the all-CPU time that the GPU takes over
    s = part_ms / gpu_part_ms  # that share's speedup, transfers included
    return dict(
        application=name,
        row="amdahl",
        cpu_ms=cpu_ms,
        gpu_ms=gpu_app_ms,
        p=p,
        part_speedup=s,
        amdahl_bound=1 / ((1 - p) + p / s),
        amdahl_limit=1 / (1 - p),
        measured_speedup=cpu_ms / gpu_app_ms,
        correct=True,
    )


def _pipeline_application(n, work, timed):
    from zoo.kernels.pipeline import cpu_numba

    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    y_gpu = np.empty_like(x)
    d_x, d_y = cuda.device_array_like(x), cuda.device_array_like(x)
    blocks = stages.blocks_for(n)

    def gpu_part():  # a host array in, the result back on the host
        d_x.copy_to_device(x)
        stages.fma_chain[blocks, stages.THREADS](d_x, d_y, work)
        d_y.copy_to_host(y_gpu)

    def host_work(y=y_gpu):
        return np.histogram(y, bins=64)

    gpu_part()
    expected = stages.reference(x, work)
    if not np.allclose(y_gpu, expected, rtol=1e-4, atol=1e-5):
        raise AssertionError("amdahl: the pipeline application's GPU result is wrong")
    if not np.allclose(cpu_numba(x, work), expected, rtol=1e-4, atol=1e-5):
        raise AssertionError("amdahl: the pipeline application's CPU result is wrong")
    return _amdahl_row(
        "pipeline", lambda: cpu_numba(x, work), host_work, gpu_part, lambda: (gpu_part(), host_work()), timed
    )


def _sgemm_application(m, timed):
    import zoo

    sgemm = zoo.family("sgemm")
    # the last step that computes in float32 (a step with its own TOLERANCE, such as v15's TF32, trades accuracy)
    step = next(v for v in reversed(sgemm.variants) if getattr(v.module, "TOLERANCE", None) is None)
    A, B = sgemm.inputs(m, 0)
    C = np.empty((m, m), np.float32)
    d_C = cuda.device_array((m, m), np.float32)

    def gpu_part():  # host arrays in (copied by the call), the product back on the host
        d_A, d_B = cuda.to_device(A), cuda.to_device(B)
        step.launch((d_A, d_B), d_C)
        d_C.copy_to_host(C)

    def host_work():
        return np.linalg.norm(C, axis=1)

    gpu_part()
    if not np.allclose(C, A.astype(np.float64) @ B, rtol=1e-3, atol=1e-3):
        raise AssertionError("amdahl: the sgemm application's GPU result is wrong")
    return _amdahl_row("sgemm", lambda: A @ B, host_work, gpu_part, lambda: (gpu_part(), host_work()), timed)


def _strong_scaling(n, work, timed):
    """Rows of the grid-stride chain on k SMs (k blocks, one each), k = 1, 2, 4, ... up to every SM."""
    x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    d_x, d_y = cuda.to_device(x), cuda.device_array_like(x)
    expected = stages.reference(x, work)
    sms = sm_count()
    counts = sorted({min(sms, 1 << k) for k in range(16) if (1 << k) <= sms} | {sms})
    rows, one_sm = [], None
    for k in counts:
        launch = chain_strided[k, THREADS]  # k blocks: while k <= SMs, each runs alone on its own SM
        launch(d_x, d_y, uint32(work))
        if not np.allclose(d_y.copy_to_host(), expected, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"amdahl: the strided chain is wrong on {k} SMs")
        row = dict(application="pipeline kernel", row="strong_scaling", sms=k, correct=True)
        if timed:
            start, stop = cuda.event(), cuda.event()
            samples = []
            for _ in range(5):
                start.record()
                launch(d_x, d_y, uint32(work))
                stop.record()
                stop.synchronize()
                samples.append(cuda.event_elapsed_time(start, stop))
            row["kernel_ms"] = float(np.median(samples))
            one_sm = one_sm or row["kernel_ms"]
            row["speedup_over_one_sm"] = one_sm / row["kernel_ms"]
            row["efficiency"] = row["speedup_over_one_sm"] / k
        rows.append(row)
    return rows


def measure(args):
    timed = not args.simulator
    n = args.n or (4099 if args.simulator else 1 << 24)
    m = args.m or (33 if args.simulator else 2048)
    work = stages.WORK
    rows = [_pipeline_application(n, work, timed), _sgemm_application(m, timed)]
    rows += _strong_scaling(n, work, timed)
    for r in rows:
        r.setdefault("application", "")
    return rows


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    apps = [r for r in rows if r.get("row") == "amdahl" and sweeps.is_number(r.get("measured_speedup"))]
    scaling = [r for r in rows if r.get("row") == "strong_scaling" and sweeps.is_number(r.get("efficiency"))]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    fig.suptitle(f"Whole applications against the CPU on {device_name}")
    if not apps:
        sweeps.no_timings(left)
        sweeps.no_timings(right)
        return fig
    names = [r["application"] for r in apps]
    xs = np.arange(len(apps))
    left.bar(xs - 0.2, [r["amdahl_bound"] for r in apps], 0.4, label="Amdahl's bound 1/((1-p)+p/s)")
    left.bar(xs + 0.2, [r["measured_speedup"] for r in apps], 0.4, label="measured, end to end")
    for x, r in zip(xs, apps, strict=True):
        left.text(x, max(r["amdahl_bound"], r["measured_speedup"]) * 1.03, f"p = {r['p']:.2f}", ha="center", fontsize=8)
    left.set_xticks(xs, names)
    left.set_ylabel("speedup over the CPU")
    left.legend(fontsize=8)
    if scaling:
        right.plot([r["sms"] for r in scaling], [r["efficiency"] for r in scaling], marker="o")
        right.set_xscale("log", base=2)
        right.set_ylim(0, 1.15)
        right.axhline(1, color="grey", linestyle="--", linewidth=1)
        right.set_xlabel("SMs (one block of 1024 threads each)")
        right.set_ylabel("strong-scaling efficiency (speedup / SMs)")
        right.set_title("the pipeline's kernel, fixed 2^24 elements", fontsize=9)
    fig.tight_layout()
    return fig


def findings(rows):
    lines = []
    for r in rows:
        if r.get("row") == "amdahl" and sweeps.is_number(r.get("measured_speedup")):
            lines.append(
                f"{r['application']}: the offloaded part is {r['p']:.0%} of the CPU's {r['cpu_ms']:,.1f} ms and runs "
                f"{r['part_speedup']:,.1f}x faster on the GPU with its transfers; Amdahl bounds the application at "
                f"{r['amdahl_bound']:,.2f}x (at most {r['amdahl_limit']:,.1f}x for any GPU); measured "
                f"{r['measured_speedup']:,.2f}x, {r['measured_speedup'] / r['amdahl_bound']:.0%} of the bound"
            )
    scaling = [r for r in rows if r.get("row") == "strong_scaling" and sweeps.is_number(r.get("efficiency"))]
    if scaling:
        last = max(scaling, key=lambda r: r["sms"])
        lines.append(
            f"strong scaling of the pipeline's kernel: {last['speedup_over_one_sm']:,.1f}x over one SM on "
            f"{last['sms']} SMs, an efficiency of {last['efficiency']:.0%}"
        )
    return lines
