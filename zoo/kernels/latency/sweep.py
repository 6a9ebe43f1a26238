"""``zoo latency``: memory latency by pointer chasing, then bandwidth and FLOP/s against work in flight.

Three experiments, one CSV (the ``series`` column tells them apart):

1. Latency (series ``chase-dram``, ``chase-l2``, ``chase-shared``). One thread
   follows a random cycle through an index array: ``j = next[j]``, each load's
   address the previous load's value, so no two loads overlap and the time per
   step is the latency of one load. The cycle is a random cyclic permutation
   (a Sattolo cycle: every node on one loop), so no prefetcher can guess the
   next address, and its nodes are one per 128-byte line, so every step
   touches a new line. DRAM: a 1 GiB array, far above the 50-60 MB of L2; each
   timed launch starts at a fresh point of the cycle, so no launch finds the
   previous one's lines in L2. L2: a 16 MB array (in L2, far above the 256 KB
   of L1), the same steps every launch so they stay cached. Shared memory: a
   block copies a 32 KB cycle into shared memory, then one thread chases it.
   Each chase is timed for S and 2S steps (CUDA events, median) and the
   difference divided by S, which cancels the launch and, for shared memory,
   the copy-in. Cycles = ns x the SM clock the driver reports (the boost
   clock; the clock during the run may differ). The DRAM figure includes TLB
   misses, as random accesses over 1 GiB do in any real kernel.
   ``chase-dram-loaded`` (GPU only) chases the same way while device-to-device
   copies on another stream hold memory at the copy ceiling: the latency a
   load sees when every queue between the SM and DRAM is full, which is the
   latency a kernel at the ceiling lives with. Its ``gbps`` is the copies'.
2. Bytes in flight (series ``bandwidth``). The latency family's v04 kernel
   (out = 2x + 1 with ``loads_per_thread`` float4 issued before any use), on
   2^28 floats, for each threads per block x blocks per SM x loads per thread.
   The grid is blocks_per_sm x SMs blocks (grid-stride), and each block also
   reserves shared memory through the launch's 4th argument so that no more
   than blocks_per_sm blocks fit on an SM (opted in above 48 KB through the
   kernel attribute MAX_DYNAMIC_SHARED_SIZE_BYTES). Residency is read back
   from the driver's occupancy calculator
   (``get_active_blocks_per_multiprocessor`` for the compiled kernel, block
   size and reservation), so a kernel that runs out of registers first is
   counted right. bytes in flight per SM = resident threads per SM x loads per
   thread x 16 bytes; these are reads, and the kernel writes as many bytes as
   it reads, so Little's law predicts a read + write bandwidth of
   ``little = min(2 x bytes_in_flight_per_sm x SMs / DRAM latency, copy)``,
   with the DRAM latency from experiment 1 and ``copy`` the measured
   device-to-device copy bandwidth (``zoo.ceilings``).
3. FMAs in flight (series ``fma`` and ``fma-latency``). Each thread runs
   ``chains`` independent chains a <- a m + c (1 chain: every FMA waits for
   the previous one), 16 FMAs a chain per loop pass, unrolled. FMAs in flight
   per SM = resident threads x chains. An SM retires 128 FP32 FMAs per cycle
   and one takes about 4 cycles, so about 512 must be in flight (16 warp
   instructions: one warp with 16 chains, or 16 warps with one). The
   ``fma-latency`` row times one warp, one chain, for the latency; ``little``
   is then min(2 x fmas_in_flight_per_sm x SMs / latency, peak) with the peak
   from ``zoo.ceilings.fp32_peak()``.

``findings`` (printed under the table, and under the plot in the README)
puts the knees side by side: where Little's line meets the ceiling, with the
unloaded and with the loaded latency, and where the measured points first
reach 90% of their highest value. On the H200 the unloaded line bends too
early: at 4 KB per SM the points reach only 59% of it, because latency grows
with the traffic (bytes in flight / read bandwidth, the latency the points
imply, is about 0.5 us at 1 KB per SM and 1.2 us at 16 KB). The loaded
latency is the one to plan with. Its line's corner is where it meets the
copy ceiling, a bandwidth this kernel never reaches (its points top out near
90% of the copy), so the corner and the measured 90% point answer questions
at two different bandwidths. The last finding asks the same one of both:
how many bytes in flight Little's line with the loaded latency needs for the
bandwidth where the measured knee is read (90% of the highest point), against
the bytes the measured points needed for it.

What occupancy is for: hiding latency. A warp that waits on a load or an FMA
result leaves its scheduler idle unless another warp (occupancy) or another
independent instruction of the same warp (ILP) is ready. Both only fill the
pipe; once the work in flight covers throughput x latency, the unit is busy
and more warps or more loads only lengthen the queues: the points flatten at
the ceiling, where the Little's-law line bends.

In the simulator every experiment runs tiny (a 64-step chase, a few sweep
points on a small array, a few FMA kernels) and is checked, not timed.
"""
import functools
import itertools

import numpy as np
from numba import cuda, float32, uint32

from zoo.device.jit import jit
from zoo.kernels.latency import v04_float4_in_flight as v04

COMMAND = "latency"
HELP = "pointer-chase latency (DRAM, L2, shared), GB/s against bytes in flight, TFLOP/s against FMAs in flight"
COLUMNS = ("series", "footprint_bytes", "steps", "ns_per_step", "cycles_per_step", "threads_per_block",
           "blocks_per_sm", "resident_blocks_per_sm", "shared_reserved", "loads_per_thread",
           "bytes_in_flight_per_sm", "chains", "fmas_in_flight_per_sm", "ms", "gbps", "tflops", "little",
           "ceiling", "sms", "correct")

LINE = 128  # bytes between chase nodes: one node per cache line
NODE_STRIDE = LINE // 4  # uint32 elements between nodes
SHARED_NODES = 8192  # uint32 in the shared-memory cycle: 32 KB, under the 48 KB static limit
FMA_INNER = 16  # FMAs per chain per loop pass: unrolled
FMA_THREADS = 256
FMA_M, FMA_C = 0.99, 0.01  # a <- 0.99 a + 0.01: 1 - a shrinks by 0.99 a step
SIM_SHARED_THREADS = 32

GPU = dict(dram_bytes=1 << 30, l2_bytes=16 << 20, dram_steps=1 << 16, l2_steps=1 << 16, shared_steps=1 << 16,
           size=1 << 28, threads="64,256,1024", blocks="1,2,4,8,16,32", loads="1,2,4,8",
           chains="1,2,4,8", fma_blocks="1,2,4,8", iterations=4096,
           loaded_steps=1 << 10, loaded_copies=24, loaded_repeats=5)
SIM = dict(dram_bytes=1 << 17, l2_bytes=1 << 16, dram_steps=64, l2_steps=64, shared_steps=64,
           size=1031, threads="32,64", blocks="1,2", loads="1,2",
           chains="1,2", fma_blocks="1", iterations=2)


def add_arguments(parser):
    parser.add_argument("--size", type=int, help="floats in the bandwidth sweep (default 2^28; 1031 in the simulator)")
    parser.add_argument("--threads", help=f"threads per block, comma-separated (default {GPU['threads']})")
    parser.add_argument("--blocks-per-sm", help=f"blocks per SM (default {GPU['blocks']}; points above "
                                                "2048 threads or 32 blocks per SM are skipped)")
    parser.add_argument("--loads", help=f"float4 loads per thread (default {GPU['loads']})")
    parser.add_argument("--chains", help=f"independent FMA chains per thread (default {GPU['chains']})")


def _numbers(text):
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if not (item.isdigit() and int(item) > 0):
            raise ValueError(f"expected positive integers joined by commas, got {text!r}")
        out.append(int(item))
    return out


# -- 1. pointer chase ---------------------------------------------------------------
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
    j = int(start)
    for _ in range(steps):
        j = int(table[j])
    return j


@jit
def chase_kernel(table, steps, start, out):
    j = uint32(start)
    s = uint32(0)
    while s < steps:  # the counter is independent of j: it overlaps with the loads
        j = table[j]  # the next address is this load's value: no two loads overlap
        s = uint32(s + uint32(1))
    out[0] = j  # stored, so the chain is not dead code


@jit
def shared_chase_kernel(table, steps, start, out):
    ring = cuda.shared.array(SHARED_NODES, uint32)
    t = cuda.threadIdx.x
    while t < SHARED_NODES:
        ring[t] = table[t]
        t += cuda.blockDim.x
    cuda.syncthreads()  # the whole cycle is in shared memory before the chase starts
    if cuda.threadIdx.x == 0:
        j = uint32(start)
        s = uint32(0)
        while s < steps:
            j = ring[j]
            s = uint32(s + uint32(1))
        out[0] = j


def _per_step(launch_for, steps):
    """ns per step from the median times of S and 2S steps: launch and setup costs cancel."""
    from zoo.harness import time_launches

    short = time_launches(lambda i: launch_for(steps, i)).median_ms
    long = time_launches(lambda i: launch_for(2 * steps, i)).median_ms
    return (long - short) * 1e6 / steps, long


def _chases(cfg, simulator, clock_khz):
    rows = []
    out = cuda.device_array(1, np.uint32)
    for series, footprint, steps, rotate in (("chase-dram", cfg["dram_bytes"], cfg["dram_steps"], True),
                                             ("chase-l2", cfg["l2_bytes"], cfg["l2_steps"], False)):
        table, order = chase_array(footprint, seed=1)
        d_table = cuda.to_device(table)
        nodes = len(order)

        calls = itertools.count()  # over both timings: no two launches start on the same stretch

        def start(steps, order=order, nodes=nodes, rotate=rotate, calls=calls):
            # DRAM: each launch begins 2S nodes past the last one's start, on lines no recent launch touched
            return order[(next(calls) * 2 * steps) % nodes] if rotate else order[0]

        def launch_for(steps, i, d_table=d_table, start=start):
            chase_kernel[1, 1](d_table, np.uint32(steps), np.uint32(start(steps)), out)

        launch_for(steps, 0)
        row = dict(series=series, footprint_bytes=footprint, steps=steps,
                   correct=int(out.copy_to_host()[0]) == follow(table, order[0], steps))
        if not simulator:
            ns, _ = _per_step(launch_for, steps)
            row.update(ns_per_step=ns, cycles_per_step=ns * clock_khz / 1e6 if clock_khz else None)
        rows.append(row)
        del d_table

    successor, order = cycle(SHARED_NODES, seed=2)
    d_ring = cuda.to_device(successor)
    steps = cfg["shared_steps"]
    threads = SIM_SHARED_THREADS if simulator else 1024  # 1024 threads copy the cycle in; one chases

    def launch_shared(steps, i):
        shared_chase_kernel[1, threads](d_ring, np.uint32(steps), np.uint32(order[0]), out)

    launch_shared(steps, 0)
    row = dict(series="chase-shared", footprint_bytes=4 * SHARED_NODES, steps=steps,
               correct=int(out.copy_to_host()[0]) == follow(successor, order[0], steps))
    if not simulator:
        ns, _ = _per_step(launch_shared, steps)
        row.update(ns_per_step=ns, cycles_per_step=ns * clock_khz / 1e6 if clock_khz else None)
    rows.append(row)
    return rows


def _loaded_chase(cfg, clock_khz):
    """DRAM latency while device-to-device copies keep memory at the copy ceiling (GPU only).

    Each repeat queues ``loaded_copies`` copies of a 1 GiB buffer on one stream,
    then chases S and 2S steps on another; the chase is one thread, so it finds
    room on an SM beside the copies and runs while they do. Its loads wait in
    the same queues as the copy's: the difference per step is the latency a
    request sees at full load. The row's gbps is the copies' bandwidth in the
    meantime; a repeat whose chase outlasted the copies is not counted.
    """
    import cupy

    from zoo import ceilings

    table, order = chase_array(cfg["dram_bytes"], seed=4)
    d_table = cuda.to_device(table)
    src = cupy.zeros(cfg["dram_bytes"] // 4, np.float32)
    dst = cupy.empty_like(src)
    out = cuda.device_array(1, np.uint32)
    steps, copies = cfg["loaded_steps"], cfg["loaded_copies"]
    background, chasing = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    numba_chasing = cuda.external_stream(chasing.ptr)
    per_step, gbps, correct = [], [], True
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
        per_step.append((long - short) * 1e6 / steps)
        gbps.append(copies * 2 * src.nbytes / cupy.cuda.get_elapsed_time(marks[0], marks[1]) / 1e6)
    row = dict(series="chase-dram-loaded", footprint_bytes=cfg["dram_bytes"], steps=steps, correct=correct)
    if per_step:
        ns = float(np.median(per_step))
        row.update(ns_per_step=ns, cycles_per_step=ns * clock_khz / 1e6 if clock_khz else None,
                   gbps=float(np.median(gbps)))
    return row


# -- 2. bandwidth against bytes in flight ---------------------------------------------
def reservation(blocks_per_sm, shared_per_sm, reserved_per_block=1024):
    """Dynamic shared bytes per block so that blocks_per_sm blocks fit on an SM and one more does not.

    Each block also costs the SM ``reserved_per_block`` bytes the system keeps
    (1 KB on Hopper); the result is rounded down to whole KB.
    """
    return (shared_per_sm // blocks_per_sm - reserved_per_block) // 1024 * 1024


def _allow_shared(kernel, nbytes):
    """Let ``kernel`` (compiled already) launch with ``nbytes`` of dynamic shared memory; False if refused."""
    from numba.cuda.cudadrv import driver as drv

    cufunc = kernel.compiled()._codelibrary.get_cufunc()
    attr = drv.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    try:
        drv.driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle, cufunc.device.id)
    except Exception:  # a driver binding without kernel attributes: stay within 48 KB
        return False
    return True


def _resident_blocks(kernel, threads, shared):
    cufunc = kernel.compiled()._codelibrary.get_cufunc()
    return cuda.current_context().get_active_blocks_per_multiprocessor(cufunc, threads, shared)


def _bandwidth(cfg, args, simulator, sms, props, dram_ns, copy):
    from zoo.harness import time_launches

    n = args.size or cfg["size"]
    threads_list = _numbers(args.threads or cfg["threads"])
    blocks_list = _numbers(args.blocks_per_sm or cfg["blocks"])
    loads_list = _numbers(args.loads or cfg["loads"])
    x = np.random.default_rng(3).standard_normal(n, dtype=np.float32)
    expected = np.float32(2) * x + np.float32(1)  # 2x is exact, so this is rounded once, as the FMA is
    d_x = cuda.to_device(x)
    out = cuda.device_array(n, np.float32)
    poison = cuda.to_device(np.full(n, np.nan, np.float32))
    shared_per_sm = props.get("shared_bytes_per_sm") or 233472
    max_threads = props.get("max_threads_per_sm") or 2048
    rows = []
    for loads in loads_list:
        kernel = v04.build(loads)
        for threads in threads_list:
            for per_sm in blocks_list:
                if per_sm * threads > max_threads or per_sm > 32:
                    continue  # more than an SM holds
                blocks = per_sm * sms
                shared = 0 if simulator else reservation(per_sm, shared_per_sm)
                out.copy_to_device(poison)
                kernel[blocks, threads](d_x, out, np.uint32(n))  # compiles; no reservation yet
                if shared > 48 * 1024 and not _allow_shared(kernel, shared):
                    shared = 48 * 1024
                out.copy_to_device(poison)

                def launch(i, kernel=kernel, blocks=blocks, threads=threads, shared=shared):
                    kernel[blocks, threads, 0, shared](d_x, out, np.uint32(n))

                launch(0)
                row = dict(series="bandwidth", footprint_bytes=8 * n, threads_per_block=threads,
                           blocks_per_sm=per_sm, shared_reserved=shared, loads_per_thread=loads, sms=sms,
                           correct=bool(np.array_equal(out.copy_to_host(), expected)))
                if not simulator:
                    resident = min(per_sm, _resident_blocks(kernel, threads, shared))
                    in_flight = resident * threads * loads * 16
                    ms = time_launches(launch).median_ms
                    row.update(resident_blocks_per_sm=resident, bytes_in_flight_per_sm=in_flight, ms=ms,
                               gbps=8 * n / ms / 1e6, ceiling=copy,
                               little=_little(2 * in_flight * sms / dram_ns, copy) if dram_ns else None)
                rows.append(row)
    return rows


def _little(rate, ceiling):
    return min(rate, ceiling) if ceiling else rate


# -- 3. FMAs in flight ------------------------------------------------------------
@functools.lru_cache(maxsize=None)
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
            t = uint32(t + uint32(1))
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


def _fma(cfg, args, simulator, sms, clock_khz, peak):
    from zoo.harness import time_launches

    iterations = cfg["iterations"]
    chains_list = _numbers(args.chains or cfg["chains"])
    blocks_list = _numbers(cfg["fma_blocks"])
    threads = 32 if simulator else FMA_THREADS
    rows = []

    def run(kernel, blocks, block_threads, chains, series, per_sm):
        out = cuda.device_array(blocks * block_threads, np.float32)

        def launch(i):
            kernel[blocks, block_threads](out, np.uint32(iterations), np.float32(1.0 + 1e-3 * (i % 7)))

        launch(0)
        got = out.copy_to_host()
        want = fma_expected(blocks * block_threads, chains, iterations, 1.0)
        row = dict(series=series, threads_per_block=block_threads, blocks_per_sm=per_sm, chains=chains,
                   steps=FMA_INNER * iterations, sms=sms,
                   correct=bool(np.allclose(got, want, rtol=1e-4, atol=0)))  # float32 stalls ~6e-6 from 1
        if not simulator:
            ms = time_launches(launch).median_ms
            row.update(ms=ms, tflops=2 * chains * FMA_INNER * iterations * blocks * block_threads / ms / 1e9,
                       ceiling=peak)
        return row

    # one warp, one chain: every FMA waits for the one before; the time per FMA is its latency
    latency = run(build_fma(1), 1, 32, 1, "fma-latency", None)
    latency.update(resident_blocks_per_sm=1, fmas_in_flight_per_sm=1)
    if not simulator:
        ns = latency["ms"] * 1e6 / (FMA_INNER * iterations)
        latency.update(ns_per_step=ns, cycles_per_step=ns * clock_khz / 1e6 if clock_khz else None)
    rows.append(latency)
    fma_ns = latency.get("ns_per_step")
    for chains in chains_list:
        kernel = build_fma(chains)
        for per_sm in blocks_list:
            row = run(kernel, per_sm * sms, threads, chains, "fma", per_sm)
            if not simulator:
                resident = min(per_sm, _resident_blocks(kernel, threads, 0))
                in_flight = resident * threads * chains
                row.update(resident_blocks_per_sm=resident, fmas_in_flight_per_sm=in_flight,
                           little=_little(2 * in_flight * sms / fma_ns / 1e3, peak) if fma_ns else None)
            rows.append(row)
    return rows


# -- the command ------------------------------------------------------------------
def measure(args):
    from zoo import ceilings
    from zoo.device import properties, sm_count

    simulator = args.simulator
    cfg = SIM if simulator else GPU
    props = properties()
    clock_khz = props.get("clock_khz")
    sms = sm_count()
    rows = _chases(cfg, simulator, clock_khz)
    dram_ns = rows[0].get("ns_per_step")
    if not simulator:
        rows.append(_loaded_chase(cfg, clock_khz))
    copy = ceilings.copy_bandwidth()  # None in the simulator
    rows += _bandwidth(cfg, args, simulator, sms, props, dram_ns, copy)
    peak = ceilings.fp32_peak()
    rows += _fma(cfg, args, simulator, sms, clock_khz, peak / 1e3 if peak else None)
    return rows


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


SATURATED = 0.9  # a measured curve saturates where its best point first reaches 90% of its highest


def _series(rows, name, key="ns_per_step"):
    return next((r[key] for r in rows if r.get("series") == name and _num(r.get(key))), None)


def measured_knee(points, x_key, y_key):
    """(x where the best y per x first reaches SATURATED of the highest y, interpolated in log x; that highest y)."""
    best = {}
    for r in points:
        best[r[x_key]] = max(best.get(r[x_key], 0.0), r[y_key])
    xs = sorted(best)
    if not xs:
        return None, None
    top = max(best.values())
    goal = SATURATED * top
    for lo, hi in zip([None] + xs, xs):
        if best[hi] >= goal:
            if lo is None or best[hi] == best[lo]:
                return float(hi), top
            frac = (goal - best[lo]) / (best[hi] - best[lo])
            return float(lo * (hi / lo) ** frac), top
    return None, top


def little_knee(latency_ns, ceiling, sms, per_unit=2):
    """Work in flight per SM where Little's line per_unit x work x SMs / latency meets the ceiling."""
    return ceiling * latency_ns / (per_unit * sms)


def findings(rows):
    """Latency unloaded and loaded, and where Little's law and the measurements put the knees."""
    lines = []
    unloaded, loaded = _series(rows, "chase-dram"), _series(rows, "chase-dram-loaded")
    load_gbps = _series(rows, "chase-dram-loaded", "gbps")
    if unloaded and loaded:
        lines.append(f"DRAM latency {unloaded:,.0f} ns unloaded; {loaded:,.0f} ns ({loaded / unloaded:.1f}x) while "
                     f"copies stream at {load_gbps:,.0f} GB/s: requests queue behind the copy's")
    points = [r for r in rows if r.get("series") == "bandwidth" and _num(r.get("gbps"))
              and _num(r.get("bytes_in_flight_per_sm"))]
    copy = next((r["ceiling"] for r in points if _num(r.get("ceiling"))), None)
    sms = next((r["sms"] for r in points if _num(r.get("sms"))), None)
    knee, top = measured_knee(points, "bytes_in_flight_per_sm", "gbps")
    if unloaded and copy and sms and knee:
        predicted = [("unloaded", little_knee(unloaded, copy, sms))]
        said = [f"{predicted[0][1] / 1024:.1f} KB with the unloaded latency"]
        if loaded:
            predicted.append(("loaded", little_knee(loaded, copy, sms)))
            said.append(f"{predicted[1][1] / 1024:.1f} KB with the loaded one")
        lines.append("Little's law knee (reads in flight per SM where the line meets the copy ceiling, "
                     f"{copy:,.0f} GB/s): " + ", ".join(said))
        lines.append(f"measured: the best point first reaches {SATURATED:.0%} of the highest bandwidth "
                     f"({top:,.0f} GB/s) at {knee / 1024:.1f} KB per SM, "
                     + ", ".join(f"{knee / k:.2f}x the {name} prediction" for name, k in predicted))
        if loaded:  # the same question at the same bandwidth: the line's corner sits at the ceiling, not there
            needed = little_knee(loaded, SATURATED * top, sms)
            lines.append(f"at equal bandwidth: Little's line with the loaded latency needs {needed / 1024:.1f} KB "
                         f"per SM for {SATURATED * top:,.0f} GB/s ({SATURATED:.0%} of the highest); the "
                         f"measured points got there with {knee / needed:.2f}x that")
    fma_ns = _series(rows, "fma-latency")
    fmas = [r for r in rows if r.get("series") == "fma" and _num(r.get("tflops")) and _num(r.get("fmas_in_flight_per_sm"))]
    peak = next((r["ceiling"] for r in fmas if _num(r.get("ceiling"))), None)
    knee, top = measured_knee(fmas, "fmas_in_flight_per_sm", "tflops")
    if fma_ns and peak and sms and knee:
        predicted = little_knee(fma_ns, peak * 1e3, sms)  # TFLOP/s x ns = thousands of FLOPs
        low = min(fmas, key=lambda r: r["fmas_in_flight_per_sm"])
        line = _little(2 * low["fmas_in_flight_per_sm"] * sms / fma_ns / 1e3, peak)
        lines.append(f"FMA (latency {fma_ns:.2f} ns, peak {peak:.1f} TFLOP/s): below Little's knee of "
                     f"{predicted:,.0f} FMAs in flight per SM the points follow the line ({low['tflops']:.1f} of "
                     f"{line:.1f} TFLOP/s at {low['fmas_in_flight_per_sm']:,}); they reach {SATURATED:.0%} of the "
                     f"highest ({top:.1f}) only at {knee:,.0f}, where more chains per thread have amortised each "
                     "loop pass's counter and branch")
    return lines


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, (ax_lat, ax_bw, ax_fma) = plt.subplots(1, 3, figsize=(16, 5))
    fig.suptitle(f"Latency and work in flight on {device_name}")
    timed = [r for r in rows if _num(r.get("ns_per_step")) or _num(r.get("gbps")) or _num(r.get("tflops"))]
    if not timed:
        for ax in (ax_lat, ax_bw, ax_fma):
            ax.text(0.5, 0.5, "no timings: the simulator checks correctness only", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_axis_off()
        return fig

    chases = [r for r in rows if str(r.get("series")).startswith("chase") and _num(r.get("ns_per_step"))]
    labels = {"chase-dram": "DRAM", "chase-dram-loaded": "DRAM under\na copy", "chase-l2": "L2",
              "chase-shared": "shared"}
    colors = {"chase-dram": "tab:red", "chase-dram-loaded": "darkred", "chase-l2": "tab:orange",
              "chase-shared": "tab:green"}
    chases.sort(key=lambda r: list(labels).index(r["series"]) if r["series"] in labels else len(labels))
    bars = ax_lat.bar([labels.get(r["series"], r["series"]) for r in chases], [r["ns_per_step"] for r in chases],
                      color=[colors.get(r["series"], "grey") for r in chases])
    for bar, r in zip(bars, chases):
        cycles = f"\n{r['cycles_per_step']:.0f} cycles" if _num(r.get("cycles_per_step")) else ""
        ax_lat.annotate(f"{r['ns_per_step']:.0f} ns{cycles}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
    ax_lat.set_yscale("log")
    if chases:
        ax_lat.set_ylim(top=3 * max(r["ns_per_step"] for r in chases))  # room above the tallest bar's label
    ax_lat.set_ylabel("ns per dependent load")
    ax_lat.set_title("pointer-chase latency")

    dram = _series(rows, "chase-dram")
    points = [r for r in rows if r.get("series") == "bandwidth" and _num(r.get("gbps"))
              and _num(r.get("bytes_in_flight_per_sm"))]
    for loads in sorted({r["loads_per_thread"] for r in points}):
        mine = [r for r in points if r["loads_per_thread"] == loads]
        ax_bw.scatter([r["bytes_in_flight_per_sm"] / 1024 for r in mine], [r["gbps"] for r in mine], s=18,
                      label=f"{loads} float4 per thread")
    copy = next((r["ceiling"] for r in points if _num(r.get("ceiling"))), None)
    sms = next((r["sms"] for r in points if _num(r.get("sms"))), None)
    if points and dram and sms:
        xs = np.geomspace(min(r["bytes_in_flight_per_sm"] for r in points),
                          max(r["bytes_in_flight_per_sm"] for r in points), 200)
        ax_bw.plot(xs / 1024, [_little(2 * b * sms / dram, copy) for b in xs], color="black", linewidth=1,
                   label=f"Little: 2 x bytes x {sms} SMs / {dram:.0f} ns, capped at copy")
        loaded = _series(rows, "chase-dram-loaded")
        if loaded:
            ax_bw.plot(xs / 1024, [_little(2 * b * sms / loaded, copy) for b in xs], color="tab:red",
                       linewidth=1, linestyle="-.", label=f"Little with the loaded latency, {loaded:,.0f} ns")
        knee, top = measured_knee(points, "bytes_in_flight_per_sm", "gbps")
        if knee:
            ax_bw.axvline(knee / 1024, color="tab:purple", linestyle=":", linewidth=1,
                          label=f"measured: {SATURATED:.0%} of {top:,.0f} GB/s at {knee / 1024:.1f} KB")
    if copy:
        ax_bw.axhline(copy, color="grey", linestyle="--", linewidth=1, label=f"copy {copy:,.0f} GB/s")
    ax_bw.set_xscale("log", base=2)
    ax_bw.set_xlabel("bytes of reads in flight per SM (KB)")
    ax_bw.set_ylabel("GB/s (read + write)")
    ax_bw.set_title("out = 2x + 1: bandwidth against bytes in flight")
    ax_bw.legend(fontsize=7, loc="lower right")

    fma = next((r for r in rows if r.get("series") == "fma-latency" and _num(r.get("ns_per_step"))), None)
    points = [r for r in rows if r.get("series") == "fma" and _num(r.get("tflops"))
              and _num(r.get("fmas_in_flight_per_sm"))]
    for chains in sorted({r["chains"] for r in points}):
        mine = [r for r in points if r["chains"] == chains]
        ax_fma.scatter([r["fmas_in_flight_per_sm"] for r in mine], [r["tflops"] for r in mine], s=18,
                       label=f"{chains} chain{'s' if chains > 1 else ''} per thread")
    peak = next((r["ceiling"] for r in points if _num(r.get("ceiling"))), None)
    if points and fma and sms:
        xs = np.geomspace(min(r["fmas_in_flight_per_sm"] for r in points),
                          max(r["fmas_in_flight_per_sm"] for r in points), 200)
        ax_fma.plot(xs, [_little(2 * f * sms / fma["ns_per_step"] / 1e3, peak) for f in xs], color="black",
                    linewidth=1, label=f"Little: FMA latency {fma['ns_per_step']:.2f} ns, capped at peak")
    if peak:
        ax_fma.axhline(peak, color="grey", linestyle="--", linewidth=1, label=f"FP32 peak {peak:.1f} TFLOP/s")
    ax_fma.set_xscale("log", base=2)
    ax_fma.set_xlabel("independent FMAs in flight per SM (resident threads x chains)")
    ax_fma.set_ylabel("TFLOP/s")
    ax_fma.set_title("FMA chains: TFLOP/s against FMAs in flight")
    ax_fma.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig
