"""``zoo bytes-in-flight``: bandwidth against the bytes of loads in flight per SM, with Little's line.

The kernel is the latency family's v04 (out = 2x + 1, ``loads_per_thread``
float4 issued before any use: ``v04.build(loads)``), on 2^28 floats, for each
threads per block x blocks per SM x loads per thread. The grid is blocks_per_sm
x SMs blocks (grid-stride), and each block also reserves dynamic shared memory
(the launch's 4th argument) so that no more than blocks_per_sm blocks fit on an
SM. Residency is read back from the driver's occupancy calculator for the
compiled kernel, block size and reservation, so a kernel that runs out of
registers first is counted right. Bytes in flight per SM = resident threads x
loads per thread x 16 bytes. These are reads, and the kernel writes as many
bytes as it reads, so Little's law predicts a read + write bandwidth of
``little = min(2 x bytes_in_flight_per_sm x SMs / DRAM latency, copy)``. The
sweep measures that latency first, idle and under a copy (the ``chase-dram``
rows of ``zoo latency``); ``copy`` is the measured device-to-device copy
(``zoo.bench.ceilings``).

``findings`` puts the knees side by side: where Little's line meets the copy
ceiling, with the idle and with the loaded latency, and where the measured
points first reach 90% of their highest value. On the H200 the idle line bends
too early: at 4 KB per SM the points reach only 59% of it, because latency grows
with the traffic (bytes in flight / read bandwidth, the latency the points
imply, is about 0.5 us at 1 KB per SM and 1.2 us at 16 KB). The loaded latency
is the one to plan with. Its line's corner is where it meets the copy ceiling, a
bandwidth this kernel never reaches (its points top out near 90% of the copy),
so the last finding asks the same question of both at one bandwidth: how many
bytes in flight Little's line needs for the measured knee's bandwidth (90% of
the highest point), against the bytes the measured points needed for it.

In the simulator a few points run on a small array and are checked, not timed.
"""

import numpy as np
from numba import cuda

from zoo.device.jit import DEFAULT_SHARED_LIMIT
from zoo.kernels.latency import v04_float4_in_flight as v04
from zoo.kernels.latency.sweeps import chase as sweep_chase
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

COMMAND = "bytes-in-flight"
HELP = "out = 2x + 1 (latency v04): GB/s against bytes of loads in flight per SM, with Little's-law lines"
COLUMNS = (
    "series",
    "footprint_bytes",
    "steps",
    "ns_per_step",
    "cycles_per_step",
    "threads_per_block",
    "blocks_per_sm",
    "resident_blocks_per_sm",
    "shared_reserved",
    "loads_per_thread",
    "bytes_in_flight_per_sm",
    "ms",
    "gbps",
    "little",
    "ceiling",
    "sms",
    "correct",
)

GPU = dict(size=1 << 28, threads="64,256,1024", blocks="1,2,4,8,16,32", loads="1,2,4,8")
SIM = dict(size=1031, threads="32,64", blocks="1,2", loads="1,2")
MAX_BLOCKS_PER_SM = 32  # Hopper's limit on resident blocks per SM
HOPPER_SHARED_PER_SM = 233472  # bytes (228 KB), where the driver does not say
SYSTEM_SHARED_PER_BLOCK = 1024  # bytes the system keeps on the SM for each resident block (Hopper)
FLOAT4_BYTES = 16


def add_arguments(parser):
    parser.add_argument("--size", type=int, help="floats (default 2^28; 1031 in the simulator)")
    parser.add_argument("--threads", help=f"threads per block, comma-separated (default {GPU['threads']})")
    parser.add_argument(
        "--blocks-per-sm",
        help=f"blocks per SM (default {GPU['blocks']}; points above 2048 threads or 32 blocks per SM are skipped)",
    )
    parser.add_argument("--loads", help=f"float4 loads per thread (default {GPU['loads']})")


def reservation(blocks_per_sm, shared_per_sm, reserved_per_block=SYSTEM_SHARED_PER_BLOCK):
    """Dynamic shared bytes per block so that blocks_per_sm blocks fit on an SM and one more does not.

    Each block also costs the SM ``reserved_per_block`` bytes the system keeps
    (1 KB on Hopper); the result is rounded down to whole KB.
    """
    return (shared_per_sm // blocks_per_sm - reserved_per_block) // 1024 * 1024


def bandwidth_rows(cfg, args, simulator, sms, props, dram_ns, copy):
    """One row per (loads per thread, threads per block, blocks per SM) that fits on an SM."""
    from zoo.bench.harness import time_launches

    n = args.size or cfg["size"]
    x = np.random.default_rng(3).standard_normal(n, dtype=np.float32)
    expected = np.float32(2) * x + np.float32(1)  # 2x is exact, so this is rounded once, as the FMA is
    d_x = cuda.to_device(x)
    out = cuda.device_array(n, np.float32)
    poison = cuda.to_device(np.full(n, np.nan, np.float32))  # an element the kernel skips fails the check
    shared_per_sm = props.get("shared_bytes_per_sm") or HOPPER_SHARED_PER_SM
    max_threads = props.get("max_threads_per_sm") or 2048
    rows = []
    for loads in numbers(args.loads or cfg["loads"]):
        kernel = v04.build(loads)
        for threads in numbers(args.threads or cfg["threads"]):
            for per_sm in numbers(args.blocks_per_sm or cfg["blocks"]):
                if per_sm * threads > max_threads or per_sm > MAX_BLOCKS_PER_SM:
                    continue  # more than an SM holds
                blocks = per_sm * sms
                shared = 0 if simulator else reservation(per_sm, shared_per_sm)
                kernel[blocks, threads](d_x, out, np.uint32(n))  # compiles; no reservation yet
                if shared > DEFAULT_SHARED_LIMIT and not kernel.allow_shared(shared):
                    shared = DEFAULT_SHARED_LIMIT  # the driver binding cannot opt in: fewer blocks are held off
                out.copy_to_device(poison)

                def launch(i, kernel=kernel, blocks=blocks, threads=threads, shared=shared):
                    kernel[blocks, threads, 0, shared](d_x, out, np.uint32(n))  # stream 0, `shared` bytes

                launch(0)
                row = dict(
                    series="bandwidth",
                    footprint_bytes=8 * n,
                    threads_per_block=threads,
                    blocks_per_sm=per_sm,
                    shared_reserved=shared,
                    loads_per_thread=loads,
                    sms=sms,
                    correct=bool(np.array_equal(out.copy_to_host(), expected)),
                )
                if not simulator:
                    resident = min(per_sm, kernel.resident_blocks(threads, shared))
                    in_flight = resident * threads * loads * FLOAT4_BYTES
                    ms = time_launches(launch).median_ms
                    row.update(
                        resident_blocks_per_sm=resident,
                        bytes_in_flight_per_sm=in_flight,
                        ms=ms,
                        gbps=8 * n / ms / 1e6,
                        ceiling=copy,
                        little=capped(2 * in_flight * sms / dram_ns, copy) if dram_ns else None,
                    )
                rows.append(row)
    return rows


def measure(args):
    from zoo.bench import ceilings
    from zoo.device import properties, sm_count

    simulator = args.simulator
    props = properties()
    rows = sweep_chase.dram_rows(simulator, props.get("clock_khz"))  # chase-dram, then chase-dram-loaded on a GPU
    dram_ns = rows[0].get("ns_per_step")
    copy = ceilings.copy_bandwidth()  # None in the simulator
    return rows + bandwidth_rows(SIM if simulator else GPU, args, simulator, sm_count(), props, dram_ns, copy)


def _points(rows):
    return [
        r
        for r in rows
        if r.get("series") == "bandwidth" and is_number(r.get("gbps")) and is_number(r.get("bytes_in_flight_per_sm"))
    ]


def findings(rows):
    """Where Little's law (idle and loaded latency) and the measurements put the knee."""
    unloaded, loaded = series_value(rows, "chase-dram"), series_value(rows, "chase-dram-loaded")
    points = _points(rows)
    copy = next((r["ceiling"] for r in points if is_number(r.get("ceiling"))), None)
    sms = next((r["sms"] for r in points if is_number(r.get("sms"))), None)
    knee, top = measured_knee(points, "bytes_in_flight_per_sm", "gbps")
    if not (unloaded and copy and sms and knee):
        return []
    predicted = [("unloaded", little_knee(unloaded, copy, sms))]
    said = [f"{predicted[0][1] / 1024:.1f} KB with the unloaded latency ({unloaded:,.0f} ns)"]
    if loaded:
        predicted.append(("loaded", little_knee(loaded, copy, sms)))
        said.append(f"{predicted[1][1] / 1024:.1f} KB with the loaded one ({loaded:,.0f} ns)")
    lines = [
        "Little's law knee (reads in flight per SM where the line meets the copy ceiling, "
        f"{copy:,.0f} GB/s): " + ", ".join(said),
        f"measured: the best point first reaches {SATURATED:.0%} of the highest bandwidth "
        f"({top:,.0f} GB/s) at {knee / 1024:.1f} KB per SM, "
        + ", ".join(f"{knee / k:.2f}x the {name} prediction" for name, k in predicted),
    ]
    if loaded:  # the same question at the same bandwidth: the line's corner sits at the ceiling, not there
        needed = little_knee(loaded, SATURATED * top, sms)
        lines.append(
            f"at equal bandwidth: Little's line with the loaded latency needs {needed / 1024:.1f} KB "
            f"per SM for {SATURATED * top:,.0f} GB/s ({SATURATED:.0%} of the highest); the "
            f"measured points got there with {knee / needed:.2f}x that"
        )
    return lines


def draw(ax, rows):
    """The measured points per loads per thread, Little's lines (idle and loaded latency), the copy ceiling."""
    points = _points(rows)
    for loads in sorted({r["loads_per_thread"] for r in points}):
        mine = [r for r in points if r["loads_per_thread"] == loads]
        ax.scatter(
            [r["bytes_in_flight_per_sm"] / 1024 for r in mine],
            [r["gbps"] for r in mine],
            s=18,
            label=f"{loads} float4 per thread",
        )
    dram = series_value(rows, "chase-dram")
    copy = next((r["ceiling"] for r in points if is_number(r.get("ceiling"))), None)
    sms = next((r["sms"] for r in points if is_number(r.get("sms"))), None)
    if points and dram and sms:
        xs = np.geomspace(
            min(r["bytes_in_flight_per_sm"] for r in points), max(r["bytes_in_flight_per_sm"] for r in points), 200
        )
        ax.plot(
            xs / 1024,
            [capped(2 * b * sms / dram, copy) for b in xs],
            color="black",
            linewidth=1,
            label=f"Little: 2 x bytes x {sms} SMs / {dram:.0f} ns, capped at copy",
        )
        loaded = series_value(rows, "chase-dram-loaded")
        if loaded:
            ax.plot(
                xs / 1024,
                [capped(2 * b * sms / loaded, copy) for b in xs],
                color="tab:red",
                linewidth=1,
                linestyle="-.",
                label=f"Little with the loaded latency, {loaded:,.0f} ns",
            )
        knee, top = measured_knee(points, "bytes_in_flight_per_sm", "gbps")
        if knee:
            ax.axvline(
                knee / 1024,
                color="tab:purple",
                linestyle=":",
                linewidth=1,
                label=f"measured: {SATURATED:.0%} of {top:,.0f} GB/s at {knee / 1024:.1f} KB",
            )
    if copy:
        ax.axhline(copy, color="grey", linestyle="--", linewidth=1, label=f"copy {copy:,.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes of reads in flight per SM (KB)")
    ax.set_ylabel("GB/s (read + write)")
    ax.set_title("out = 2x + 1: bandwidth against bytes in flight")
    ax.legend(fontsize=7, loc="lower right")


def plot(rows, device_name):
    return one_panel(f"Bytes in flight on {device_name}", rows, bool(_points(rows)), draw)
