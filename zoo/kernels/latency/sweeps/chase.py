"""``zoo latency``: the latency of one load from DRAM, L2 and shared memory, by pointer chasing.

One thread follows a random cycle through an index array: ``node = table[node]``,
each load's address the previous load's value, so no two loads overlap and the
time per step is the latency of one load. The cycle is a random cyclic
permutation (a Sattolo cycle: every node on one loop), so no prefetcher can guess
the next address, and its nodes are one per 128-byte line, so every step touches
a new line.

* ``chase-dram``: a 1 GiB array, far above the 50-60 MB of L2; each timed launch
  starts at a fresh point of the cycle, so no launch finds the previous one's
  lines in L2. The figure includes TLB misses, as random accesses over 1 GiB do
  in any real kernel.
* ``chase-l2``: a 16 MB array (in L2, far above the 256 KB of L1), the same
  steps every launch so they stay cached.
* ``chase-shared``: a block copies a 32 KB cycle into shared memory, then one
  thread chases it.
* ``chase-dram-loaded`` (GPU only): the DRAM chase while device-to-device copies
  on another stream hold memory at the copy ceiling: the latency a load sees
  when every queue between the SM and DRAM is full, which is the latency a
  kernel at the ceiling lives with. Its ``gbps`` is the copies'.

Each chase is timed for S and 2S steps (CUDA events, median) and the difference
divided by S, which cancels the launch and, for shared memory, the copy-in.
Cycles = ns x the SM clock the driver reports (the boost clock; the clock during
the run may differ). ``zoo bytes-in-flight`` measures the DRAM rows again for
its Little's-law lines. In the simulator each chase runs 64 steps and is
checked, not timed.
"""

import itertools

import numpy as np
from numba import cuda, uint32

from zoo.bench import sweeps
from zoo.device.jit import jit
from zoo.kernels.latency.sweeps.littles_law import is_number, series_value

COMMAND = "latency"
HELP = "pointer-chase latency of one load: DRAM (idle and under a copy), L2, shared memory"
COLUMNS = ("series", "footprint_bytes", "steps", "ns_per_step", "cycles_per_step", "gbps", "correct")

LINE = 128  # bytes between chase nodes: one node per cache line
NODE_STRIDE = LINE // 4  # uint32 elements between nodes
SHARED_NODES = 8192  # uint32 in the shared-memory cycle: 32 KB, under the 48 KB static limit
SHARED_COPY_THREADS = 1024  # threads that copy the cycle into shared memory; one of them chases it
SIM_SHARED_COPY_THREADS = 32

GPU = dict(
    dram_bytes=1 << 30,
    l2_bytes=16 << 20,
    dram_steps=1 << 16,
    l2_steps=1 << 16,
    shared_steps=1 << 16,
    loaded_steps=1 << 10,
    loaded_copies=24,
    loaded_repeats=5,
)
SIM = dict(dram_bytes=1 << 17, l2_bytes=1 << 16, dram_steps=64, l2_steps=64, shared_steps=64)


# -- the cycle ----------------------------------------------------------------------
def cycle(nodes, seed=0):
    """A random cyclic permutation of ``nodes`` nodes: (successor of each node, the visiting order).

    Following a random ordering p and linking p[k] -> p[k + 1], p[-1] -> p[0]
    gives a single cycle through every node, uniformly among such cycles (what
    Sattolo's shuffle makes), without a Python loop over the nodes.
    """
    order = np.random.default_rng(seed).permutation(nodes).astype(np.uint32)
    successor = np.empty(nodes, np.uint32)
    successor[order] = np.roll(order, -1)
    return successor, order


def chase_array(footprint, seed=0):
    """uint32 array of ``footprint`` bytes: node k at element k x NODE_STRIDE holds its successor's element."""
    nodes = footprint // LINE
    successor, order = cycle(nodes, seed)
    table = np.zeros(nodes * NODE_STRIDE, np.uint32)
    table[::NODE_STRIDE] = successor * np.uint32(NODE_STRIDE)
    return table, order * np.uint32(NODE_STRIDE)


def follow(table, start, steps):
    """Where ``steps`` loads from ``start`` end, in NumPy: what the kernels must store."""
    node = int(start)
    for _ in range(steps):
        node = int(table[node])
    return node


# -- the kernels --------------------------------------------------------------------
@jit
def chase_kernel(table, steps, start, out):
    node = uint32(start)
    step = uint32(0)
    while step < steps:  # the counter is independent of node: it overlaps with the loads
        node = table[node]  # the next address is this load's value: no two loads overlap
        step = uint32(step + uint32(1))  # numba widens uint32 + uint32 to 64 bits: cast back
    out[0] = node  # stored, so the chain is not dead code


@jit
def shared_chase_kernel(table, steps, start, out):
    ring = cuda.shared.array(SHARED_NODES, uint32)
    i = cuda.threadIdx.x  # the block copies the cycle in, a block-width of nodes per pass
    while i < SHARED_NODES:
        ring[i] = table[i]
        i += cuda.blockDim.x
    cuda.syncthreads()  # the whole cycle is in shared memory before the chase reads other threads' nodes
    if cuda.threadIdx.x == 0:  # one thread chases: one load in flight at a time
        node = uint32(start)
        step = uint32(0)
        while step < steps:
            node = ring[node]
            step = uint32(step + uint32(1))
        out[0] = node


# -- the measurements ---------------------------------------------------------------
def per_step(launch_for, steps):
    """ns per step from the median times of S and 2S steps: launch and setup costs cancel."""
    from zoo.bench.harness import time_launches

    short = time_launches(lambda i: launch_for(steps, i)).median_ms
    long = time_launches(lambda i: launch_for(2 * steps, i)).median_ms
    return (long - short) * 1e6 / steps


def _timed(row, ns, clock_khz):
    row.update(ns_per_step=ns, cycles_per_step=ns * clock_khz / 1e6 if clock_khz else None)
    return row


def chase_global(series, footprint, steps, fresh_lines, simulator, clock_khz):
    """One row: ``steps`` dependent loads through a ``footprint``-byte cycle in global memory.

    ``fresh_lines``: each launch starts 2S nodes past the last one's start, on lines no recent
    launch touched (DRAM); otherwise every launch chases the same nodes, which stay cached (L2).
    """
    table, order = chase_array(footprint, seed=1)
    d_table = cuda.to_device(table)
    out = cuda.device_array(1, np.uint32)
    calls = itertools.count()  # over both timings: no two launches start on the same stretch

    def launch_for(steps, i):
        start = order[(next(calls) * 2 * steps) % len(order)] if fresh_lines else order[0]
        chase_kernel[1, 1](d_table, np.uint32(steps), np.uint32(start), out)

    launch_for(steps, 0)  # the first call starts at order[0]
    row = dict(
        series=series,
        footprint_bytes=footprint,
        steps=steps,
        correct=int(out.copy_to_host()[0]) == follow(table, order[0], steps),
    )
    return row if simulator else _timed(row, per_step(launch_for, steps), clock_khz)


def chase_shared(steps, simulator, clock_khz):
    """One row: ``steps`` dependent loads through a cycle of SHARED_NODES nodes in shared memory."""
    successor, order = cycle(SHARED_NODES, seed=2)
    d_ring = cuda.to_device(successor)
    out = cuda.device_array(1, np.uint32)
    threads = SIM_SHARED_COPY_THREADS if simulator else SHARED_COPY_THREADS

    def launch_for(steps, i):
        shared_chase_kernel[1, threads](d_ring, np.uint32(steps), np.uint32(order[0]), out)

    launch_for(steps, 0)
    row = dict(
        series="chase-shared",
        footprint_bytes=4 * SHARED_NODES,
        steps=steps,
        correct=int(out.copy_to_host()[0]) == follow(successor, order[0], steps),
    )
    return row if simulator else _timed(row, per_step(launch_for, steps), clock_khz)


def chase_dram_loaded(cfg, clock_khz):
    """DRAM latency while device-to-device copies keep memory at the copy ceiling (GPU only).

    Each repeat queues ``loaded_copies`` copies of a 1 GiB buffer on one stream,
    then chases S and 2S steps on another; the chase is one thread, so it finds
    room on an SM beside the copies and runs while they do. Its loads wait in
    the same queues as the copy's: the difference per step is the latency a
    request sees at full load. The row's gbps is the copies' bandwidth in the
    meantime; a repeat whose chase outlasted the copies is not counted.
    """
    import cupy

    from zoo.bench import ceilings

    table, order = chase_array(cfg["dram_bytes"], seed=4)
    d_table = cuda.to_device(table)
    src = cupy.zeros(cfg["dram_bytes"] // 4, np.float32)
    dst = cupy.empty_like(src)
    out = cuda.device_array(1, np.uint32)
    steps, copies = cfg["loaded_steps"], cfg["loaded_copies"]
    background, chasing = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    numba_chasing = cuda.external_stream(chasing.ptr)
    ns_per_step, gbps, correct = [], [], True
    for rep in range(cfg["loaded_repeats"]):
        # S steps from one node, 2S from S nodes further on: neither chase finds the other's lines in L2
        first, second = (order[(rep * 3 * steps + k * steps) % len(order)] for k in (0, 1))
        marks = [cupy.cuda.Event() for _ in range(5)]
        marks[0].record(background)
        with background:
            for _ in range(copies):
                ceilings.device_copy(src, dst)
        marks[1].record(background)
        marks[2].record(chasing)
        chase_kernel[1, 1, numba_chasing](d_table, np.uint32(steps), np.uint32(first), out)
        marks[3].record(chasing)
        chase_kernel[1, 1, numba_chasing](d_table, np.uint32(2 * steps), np.uint32(second), out)
        marks[4].record(chasing)
        marks[4].synchronize()
        marks[1].synchronize()
        correct &= int(out.copy_to_host()[0]) == follow(table, second, 2 * steps)
        if cupy.cuda.get_elapsed_time(marks[4], marks[1]) <= 0:
            continue  # the copies ended before the chase did: part of it ran unloaded
        short = cupy.cuda.get_elapsed_time(marks[2], marks[3])
        long = cupy.cuda.get_elapsed_time(marks[3], marks[4])
        ns_per_step.append((long - short) * 1e6 / steps)
        gbps.append(copies * 2 * src.nbytes / cupy.cuda.get_elapsed_time(marks[0], marks[1]) / 1e6)
    row = dict(series="chase-dram-loaded", footprint_bytes=cfg["dram_bytes"], steps=steps, correct=correct)
    if ns_per_step:
        _timed(row, float(np.median(ns_per_step)), clock_khz)
        row["gbps"] = float(np.median(gbps))
    return row


def dram_rows(simulator, clock_khz):
    """The DRAM latency idle and (GPU only) under a copy: the rows a Little's-law line needs."""
    cfg = SIM if simulator else GPU
    rows = [chase_global("chase-dram", cfg["dram_bytes"], cfg["dram_steps"], True, simulator, clock_khz)]
    if not simulator:
        rows.append(chase_dram_loaded(cfg, clock_khz))
    return rows


# -- the command --------------------------------------------------------------------
def measure(args):
    from zoo.device import properties

    simulator = args.simulator
    cfg = SIM if simulator else GPU
    clock_khz = properties().get("clock_khz")
    rows = [
        chase_global("chase-dram", cfg["dram_bytes"], cfg["dram_steps"], True, simulator, clock_khz),
        chase_global("chase-l2", cfg["l2_bytes"], cfg["l2_steps"], False, simulator, clock_khz),
        chase_shared(cfg["shared_steps"], simulator, clock_khz),
    ]
    if not simulator:
        rows.append(chase_dram_loaded(cfg, clock_khz))
    return rows


def findings(rows):
    """The DRAM latency idle and under a copy."""
    unloaded, loaded = series_value(rows, "chase-dram"), series_value(rows, "chase-dram-loaded")
    load_gbps = series_value(rows, "chase-dram-loaded", "gbps")
    if not (unloaded and loaded):
        return []
    return [
        f"DRAM latency {unloaded:,.0f} ns unloaded; {loaded:,.0f} ns ({loaded / unloaded:.1f}x) while "
        f"copies stream at {load_gbps:,.0f} GB/s: requests queue behind the copy's"
    ]


LABELS = {"chase-dram": "DRAM", "chase-dram-loaded": "DRAM under\na copy", "chase-l2": "L2", "chase-shared": "shared"}
COLOURS = {
    "chase-dram": "tab:red",
    "chase-dram-loaded": "darkred",
    "chase-l2": "tab:orange",
    "chase-shared": "tab:green",
}


def draw(ax, rows):
    """Bars of ns per dependent load, one per chase series, on ``ax``."""
    chases = [r for r in rows if str(r.get("series")).startswith("chase") and is_number(r.get("ns_per_step"))]
    chases.sort(key=lambda r: list(LABELS).index(r["series"]) if r["series"] in LABELS else len(LABELS))
    bars = ax.bar(
        [LABELS.get(r["series"], r["series"]) for r in chases],
        [r["ns_per_step"] for r in chases],
        color=[COLOURS.get(r["series"], "grey") for r in chases],
    )
    for bar, r in zip(bars, chases, strict=True):
        cycles = f"\n{r['cycles_per_step']:.0f} cycles" if is_number(r.get("cycles_per_step")) else ""
        ax.annotate(
            f"{r['ns_per_step']:.0f} ns{cycles}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_yscale("log")
    if chases:
        ax.set_ylim(top=3 * max(r["ns_per_step"] for r in chases))  # room above the tallest bar's label
    ax.set_ylabel("ns per dependent load")
    ax.set_title("pointer-chase latency")


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    fig.suptitle(f"Latency of one load on {device_name}")
    if not any(is_number(r.get("ns_per_step")) for r in rows):
        sweeps.no_timings(ax)  # the simulator: an empty panel that says why
        return fig
    draw(ax, rows)
    fig.tight_layout()
    return fig
