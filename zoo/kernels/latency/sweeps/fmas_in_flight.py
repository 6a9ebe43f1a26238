"""``zoo fmas-in-flight``: FP32 TFLOP/s against the FMAs in flight per SM, with Little's line.

Each thread runs ``chains`` independent chains a <- a m + c (1 chain: every FMA
waits for the previous one), FMA_INNER FMAs a chain per loop pass, unrolled.
FMAs in flight per SM = resident threads x chains. An SM retires 128 FP32 FMAs
per cycle and one takes about 4 cycles, so about 512 must be in flight (16 warp
instructions: one warp with 16 chains, or 16 warps with one). The
``fma-latency`` row times one warp, one chain: the latency of one FMA. Each
``fma`` row's ``little`` is then min(2 x fmas_in_flight_per_sm x SMs / latency,
peak), with the peak from ``zoo.bench.ceilings.fp32_peak()``.

In the simulator a few small kernels run and are checked against the closed
form, not timed.
"""

import functools

import numpy as np
from numba import cuda, float32, uint32

from zoo.device.jit import jit
from zoo.kernels.latency.sweeps.littles_law import (
    SATURATED,
    capped,
    is_number,
    little_knee,
    measured_knee,
    numbers,
    one_panel,
    series_value,
)

COMMAND = "fmas-in-flight"
HELP = "independent FMA chains: TFLOP/s against FMAs in flight per SM, with the FMA latency and Little's line"
COLUMNS = (
    "series",
    "threads_per_block",
    "blocks_per_sm",
    "resident_blocks_per_sm",
    "chains",
    "fmas_in_flight_per_sm",
    "steps",
    "ns_per_step",
    "cycles_per_step",
    "ms",
    "tflops",
    "little",
    "ceiling",
    "sms",
    "correct",
)

FMA_INNER = 16  # FMAs per chain per loop pass: unrolled
FMA_M, FMA_C = 0.99, 0.01  # a <- 0.99 a + 0.01: 1 - a shrinks by 0.99 a step
THREADS = 256
SIM_THREADS = 32
GPU = dict(chains="1,2,4,8", blocks="1,2,4,8", iterations=4096)
SIM = dict(chains="1,2", blocks="1", iterations=2)


def add_arguments(parser):
    parser.add_argument("--chains", help=f"independent FMA chains per thread (default {GPU['chains']})")


@functools.cache
def build_fma(chains):
    """A kernel with ``chains`` independent FMA chains per thread (a closure constant: the loops unroll)."""

    @jit
    def fma_kernel(out, iterations, x0):
        acc = cuda.local.array(chains, float32)  # constant indices only: registers
        i = cuda.grid(1)
        x = x0 + float32(i) * float32(1e-6)  # run-time start values: nothing folds at compile time
        for k in range(chains):
            acc[k] = x + float32(0.1) * float32(k)
        m = float32(FMA_M)
        c = float32(FMA_C)  # a <- a m + c tends to 1: no overflow, no denormals
        t = uint32(0)
        while t < iterations:
            for _ in range(FMA_INNER):
                for k in range(chains):  # chains are independent: they fill the pipe together
                    acc[k] = acc[k] * m + c
            t = uint32(t + uint32(1))  # numba widens uint32 + uint32 to 64 bits: cast back
        total = float32(0)
        for k in range(chains):
            total += acc[k]
        out[i] = total  # stored, so no chain is dead code

    return fma_kernel


def fma_expected(threads, chains, iterations, x0):
    """What every thread of ``build_fma(chains)`` must store, in float64: a_n = 1 + (a_0 - 1) m^n."""
    f32 = np.float32
    x = np.float64(f32(x0)) + np.arange(threads, dtype=np.float64) * np.float64(f32(1e-6))
    decay = np.float64(f32(FMA_M)) ** (FMA_INNER * iterations)
    fixed = np.float64(f32(FMA_C)) / (1 - np.float64(f32(FMA_M)))  # 1, give or take the rounding of m and c
    return sum(fixed + (x + np.float64(f32(0.1)) * k - fixed) * decay for k in range(chains))


def measure(args):
    from zoo.bench import ceilings
    from zoo.bench.harness import time_launches
    from zoo.device import properties, sm_count

    simulator = args.simulator
    cfg = SIM if simulator else GPU
    iterations = cfg["iterations"]
    clock_khz = properties().get("clock_khz")
    sms = sm_count()
    peak = ceilings.fp32_peak()
    peak = peak / 1e3 if peak else None  # TFLOP/s
    threads = SIM_THREADS if simulator else THREADS

    def run(kernel, blocks, block_threads, chains, series, per_sm):
        out = cuda.device_array(blocks * block_threads, np.float32)

        def launch(i):  # a start value that changes from call to call
            kernel[blocks, block_threads](out, np.uint32(iterations), np.float32(1.0 + 1e-3 * (i % 7)))

        launch(0)
        got = out.copy_to_host()
        want = fma_expected(blocks * block_threads, chains, iterations, 1.0)
        row = dict(
            series=series,
            threads_per_block=block_threads,
            blocks_per_sm=per_sm,
            chains=chains,
            steps=FMA_INNER * iterations,
            sms=sms,
            correct=bool(np.allclose(got, want, rtol=1e-4, atol=0)),
        )  # float32 stalls ~6e-6 from 1
        if not simulator:
            ms = time_launches(launch).median_ms
            row.update(
                ms=ms, tflops=2 * chains * FMA_INNER * iterations * blocks * block_threads / ms / 1e9, ceiling=peak
            )
        return row

    # one warp, one chain: every FMA waits for the one before; the time per FMA is its latency
    latency = run(build_fma(1), 1, 32, 1, "fma-latency", None)
    latency.update(resident_blocks_per_sm=1, fmas_in_flight_per_sm=1)
    if not simulator:
        ns = latency["ms"] * 1e6 / (FMA_INNER * iterations)
        latency.update(ns_per_step=ns, cycles_per_step=ns * clock_khz / 1e6 if clock_khz else None)
    rows = [latency]
    fma_ns = latency.get("ns_per_step")
    for chains in numbers(args.chains or cfg["chains"]):
        kernel = build_fma(chains)
        for per_sm in numbers(cfg["blocks"]):
            row = run(kernel, per_sm * sms, threads, chains, "fma", per_sm)
            if not simulator:
                resident = min(per_sm, kernel.resident_blocks(threads, 0))
                in_flight = resident * threads * chains
                row.update(
                    resident_blocks_per_sm=resident,
                    fmas_in_flight_per_sm=in_flight,
                    little=capped(2 * in_flight * sms / fma_ns / 1e3, peak) if fma_ns else None,
                )
            rows.append(row)
    return rows


def _points(rows):
    return [
        r
        for r in rows
        if r.get("series") == "fma" and is_number(r.get("tflops")) and is_number(r.get("fmas_in_flight_per_sm"))
    ]


def findings(rows):
    """Where the points leave Little's line and where they saturate."""
    fma_ns = series_value(rows, "fma-latency")
    points = _points(rows)
    peak = next((r["ceiling"] for r in points if is_number(r.get("ceiling"))), None)
    sms = next((r["sms"] for r in points if is_number(r.get("sms"))), None)
    knee, top = measured_knee(points, "fmas_in_flight_per_sm", "tflops")
    if not (fma_ns and peak and sms and knee):
        return []
    predicted = little_knee(fma_ns, peak * 1e3, sms)  # TFLOP/s x ns = thousands of FLOPs
    low = min(points, key=lambda r: r["fmas_in_flight_per_sm"])
    line = capped(2 * low["fmas_in_flight_per_sm"] * sms / fma_ns / 1e3, peak)
    return [
        f"FMA (latency {fma_ns:.2f} ns, peak {peak:.1f} TFLOP/s): below Little's knee of "
        f"{predicted:,.0f} FMAs in flight per SM the points follow the line ({low['tflops']:.1f} of "
        f"{line:.1f} TFLOP/s at {low['fmas_in_flight_per_sm']:,}); they reach {SATURATED:.0%} of the "
        f"highest ({top:.1f}) only at {knee:,.0f}, where more chains per thread have amortised each "
        "loop pass's counter and branch"
    ]


def draw(ax, rows):
    """The measured points per chains per thread, Little's line with the FMA latency, the FP32 peak."""
    points = _points(rows)
    for chains in sorted({r["chains"] for r in points}):
        mine = [r for r in points if r["chains"] == chains]
        ax.scatter(
            [r["fmas_in_flight_per_sm"] for r in mine],
            [r["tflops"] for r in mine],
            s=18,
            label=f"{chains} chain{'s' if chains > 1 else ''} per thread",
        )
    fma_ns = series_value(rows, "fma-latency")
    peak = next((r["ceiling"] for r in points if is_number(r.get("ceiling"))), None)
    sms = next((r["sms"] for r in points if is_number(r.get("sms"))), None)
    if points and fma_ns and sms:
        xs = np.geomspace(
            min(r["fmas_in_flight_per_sm"] for r in points), max(r["fmas_in_flight_per_sm"] for r in points), 200
        )
        ax.plot(
            xs,
            [capped(2 * f * sms / fma_ns / 1e3, peak) for f in xs],
            color="black",
            linewidth=1,
            label=f"Little: FMA latency {fma_ns:.2f} ns, capped at peak",
        )
    if peak:
        ax.axhline(peak, color="grey", linestyle="--", linewidth=1, label=f"FP32 peak {peak:.1f} TFLOP/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("independent FMAs in flight per SM (resident threads x chains)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("FMA chains: TFLOP/s against FMAs in flight")
    ax.legend(fontsize=7, loc="lower right")


def plot(rows, device_name):
    return one_panel(f"FMAs in flight on {device_name}", rows, bool(_points(rows)), draw)
