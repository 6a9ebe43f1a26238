"""Timing on a GPU: device time of back-to-back launches between CUDA events behind a kernel that holds the GPU
(``time_launches``), or the host's wall-clock time of a call and a synchronization (``time_wall``); and the seconds
spent compiling kernels."""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from zoo.bench.cases import settle
from zoo.device import jit as zoo_jit  # the module: kernels number their launches
from zoo.device import properties
from zoo.runtime import SIMULATOR


@dataclass
class Timing:
    median_ms: float
    q1_ms: float
    q3_ms: float
    samples: int
    launches_per_sample: int
    samples_ms: list = field(default_factory=list, repr=False)  # each sample's ms per launch
    host_us: float = math.nan  # host time of a launch call within a batch, median (time_launches; NaN elsewhere)

    @property
    def spread(self):
        """Interquartile range relative to the median."""
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms else 0.0

    @property
    def mean_ms(self):
        return statistics.fmean(self.samples_ms) if self.samples_ms else self.median_ms

    @property
    def rms_spread(self):
        """Root-mean-square deviation of the samples relative to their mean."""
        if len(self.samples_ms) < 2:
            return 0.0
        mean = self.mean_ms
        return math.sqrt(statistics.fmean((s - mean) ** 2 for s in self.samples_ms)) / mean


# The GPU is held busy before each timed sample, for this many times the host time of one launch
# call (at least HOLD_MIN_US, at most HOLD_MAX_US; the longest before any launch has been timed).
HOLD_FACTOR = 3
HOLD_MIN_US = 100
HOLD_MAX_US = 5000


@functools.lru_cache(maxsize=1)
def _hold_kernel():
    """A one-thread kernel that keeps the GPU busy until its global timer has advanced by ``ns``."""
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def globaltimer(typingctx):
        """PTX's %globaltimer: nanoseconds, the same on every SM (numba-cuda has no clock reads)."""

        def codegen(context, builder, sig, args):
            read = ir.InlineAsm(
                ir.FunctionType(ir.IntType(64), []), "mov.u64 $0, %globaltimer;", "=l", side_effect=True
            )  # volatile: read again on every trip
            return builder.call(read, [])

        return types.uint64(), codegen

    @cuda.jit  # numba's own jit, not zoo.device.jit: the hold must not count as a variant's launch (``resources``)
    def hold(ns):
        start = globaltimer()
        while globaltimer() - start < ns:
            cuda.nanosleep(1000)  # spin gently: one warp, mostly asleep

    with zoo_jit.quiet_occupancy():  # one thread on purpose
        return hold[1, 1]


def hold_gpu(us):
    """Queue a kernel that keeps the GPU busy for ``us`` microseconds, and return at once."""
    _hold_kernel()(np.uint64(us * 1000))


L2_FLUSH_FACTOR = 2  # a cold-L2 flush writes this many times the L2 cache's size
_flush_buffer: list[Any] = []  # the device buffer a flush writes, made once


def flush_l2():
    """Queue a write of L2_FLUSH_FACTOR times the L2 cache's size (a memset of a buffer kept for it) on the default
    stream: whatever a later call reads was evicted from L2 by it. nvbench's cold measurement writes one L2's size
    before each sample the same way."""
    from numba.cuda.cudadrv import driver

    if not _flush_buffer:
        nbytes = L2_FLUSH_FACTOR * (properties().get("l2_bytes") or 50 << 20)
        _flush_buffer.append(cuda.device_array(nbytes, np.uint8))
    buffer = _flush_buffer[0]
    driver.device_memset(buffer, 0, buffer.size)


# id of a step's stream -> (the stream, its numba form, an event recorded on it): made once
_stream_events: dict[int, Any] = {}


def wait_for_side_streams(streams):
    """Make the default stream wait for the work queued so far on each of ``streams`` (numba or CuPy streams, or
    raw handles: ``zoo.device.jit.take_side_streams``), so that an event recorded next on it marks the end of all of
    it. The legacy default stream waits for blocking streams by itself, but not for a non-blocking one (CuPy's
    ``Stream(non_blocking=True)``), nor in a process built with per-thread default streams: a step's work there would
    still run after the stop event. Nothing to do, and nothing done, for a step that used none."""
    for s in streams:
        found = _stream_events.get(id(s))
        if found is None or found[0] is not s:
            if isinstance(s, int):
                numba_stream = cuda.external_stream(s)
            elif hasattr(s, "ptr") and not hasattr(s, "handle"):  # a CuPy stream
                numba_stream = cuda.external_stream(s.ptr)
            else:
                numba_stream = s
            found = _stream_events[id(s)] = (s, numba_stream, cuda.event(timing=False))
        _, numba_stream, event = found
        event.record(numba_stream)
        event.wait()  # the default stream: what is queued on it from now on starts after the event


def time_launches(
    launch: Callable[..., Any],
    *,
    warmup: int = 3,
    min_samples: int = 10,
    max_samples: int = 200,
    budget_s: float = 1.0,
    sample_ms: float = 1.0,
    cold_l2: bool = False,
) -> Timing:
    """Median device time of ``launch(i)`` in ms, measured with CUDA events.

    ``launch(i)`` enqueues one call (``i`` counts calls, for rotating inputs). The
    first call compiles and warms up; a second, timed alone, estimates the
    cost. Each sample then times a batch of back-to-back launches between two
    events, so the host's launch overhead overlaps with the previous kernel
    instead of being counted; the batch is sized so a sample lasts about
    ``sample_ms``. Samples are taken until ``min_samples`` and ``budget_s`` are
    both reached. A kernel slower than a tenth of the budget gets 3 samples and
    no further warm-up: a naive 8192^3 SGEMM takes seconds per call.

    A kernel shorter than about twice the host time of its launch call is timed at the host's pace, so
    the case being made in the background for the next row (``prepare_ahead``: a float64 reference on
    every core) is waited for first (``host_bound``): the host's pace must not depend on what else it
    runs. (This was suspected, not shown, of hgemm v14's slow small sizes: they stayed slow with it.)

    The first launch of a batch has no kernel before it to hide behind: the
    device would record the start event, then wait while the host prepares
    the launch (30-90 us for a zoo variant, against 10-20 for a CuPy call) and
    count that wait. So each sample first queues a kernel that holds the GPU
    for HOLD_FACTOR times the host time of a launch call (``hold_gpu``), and
    the start event and the first launch are queued behind it, as
    nvbench's blocking kernel does. Before this, a 370 us kernel timed in
    batches of one read 393 us and in batches of two 372 us.

    The stop event waits for every stream the launches used besides the default one (``wait_for_side_streams``):
    a step that queues work on a stream of its own is timed to the end of that work, not to the end of its
    default-stream part. With ``cold_l2`` each sample is one launch after a write of twice the L2 cache's size
    (``flush_l2``, untimed, as nvbench's cold measurement does): no byte of the inputs or the output is in L2 when
    the call begins.
    """
    if SIMULATOR:
        raise RuntimeError("timings need a GPU: the simulator measures nothing")
    start, stop = cuda.event(), cuda.event()
    calls = 0
    host_us: list[float] = []  # host time of each sample's first launch call
    call_us = []  # each sample's host time of its launch calls, per call: the host's pace within a batch

    def timed(batch):
        nonlocal calls
        recent = host_us[-8:]
        if cold_l2:
            flush_l2()  # before the hold and the start event: not timed
        zoo_jit.take_side_streams()  # what earlier calls used was waited for by their own stop event
        hold_gpu(
            min(HOLD_MAX_US, max(HOLD_MIN_US, HOLD_FACTOR * statistics.median(recent))) if recent else HOLD_MAX_US
        )  # the device waits here while the host queues what follows
        start.record()
        first = time.perf_counter()
        for k in range(batch):
            began = time.perf_counter()
            launch(calls)
            if k == 0:
                host_us.append((time.perf_counter() - began) * 1e6)
            calls += 1
        call_us.append((time.perf_counter() - first) * 1e6 / batch)  # the first call is often slower than the rest
        wait_for_side_streams(zoo_jit.take_side_streams())
        stop.record()
        stop.synchronize()
        return cuda.event_elapsed_time(start, stop) / batch

    launch(calls)  # compile, load the module, touch the inputs
    calls += 1
    cuda.synchronize()
    estimate = max(timed(1), 1e-3)
    if host_bound(host_us[-1], estimate):  # the host's pace is the figure: nothing else may run on it meanwhile
        settle()
    slow = estimate > budget_s * 1e3 / 10
    if slow:
        min_samples = 3
    else:
        for _ in range(warmup - 1):
            launch(calls)
            calls += 1
    batch = 1 if cold_l2 else max(1, int(sample_ms / estimate))  # cold: every timed call after a flush
    samples: list[float] = []
    while len(samples) < max_samples and (len(samples) < min_samples or sum(samples) * batch < budget_s * 1e3):
        samples.append(timed(batch))
        if slow and len(samples) >= min_samples:
            break
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
    paced = call_us[-len(samples) :]  # the samples' batches, not the estimate's call
    return Timing(statistics.median(samples), q[0], q[2], len(samples), batch, samples, statistics.median(paced))


def time_wall(
    launch: Callable[..., Any],
    *,
    min_samples: int = 10,
    max_samples: int = 200,
    budget_s: float = 1.0,
    cold_l2: bool = False,
) -> Timing:
    """Median wall-clock time of ``launch(i)`` in ms as the host sees it: each sample is one call and a
    synchronization, between two ``time.perf_counter`` readings.

    For a family whose lesson is the host's cost (WALL_TIME in its spec: a loop of launches too small to
    keep the GPU busy), device time behind a hold would hide exactly what is taught. One call compiles
    and warms up first. With ``cold_l2`` each call follows a write of twice the L2 cache's size, finished first.
    """
    if SIMULATOR:
        raise RuntimeError("timings need a GPU: the simulator measures nothing")
    launch(0)
    cuda.synchronize()
    samples: list[float] = []
    calls = 1
    while len(samples) < max_samples and (len(samples) < min_samples or sum(samples) < budget_s * 1e3):
        if cold_l2:
            flush_l2()
            cuda.synchronize()
        began = time.perf_counter()
        launch(calls)
        cuda.synchronize()
        samples.append((time.perf_counter() - began) * 1e3)
        calls += 1
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
    return Timing(statistics.median(samples), q[0], q[2], len(samples), 1, samples)


_compiling = {"seconds": 0.0, "depth": 0}


def compile_seconds():
    """Seconds this process has spent compiling kernels so far: numba's typing and lowering, NVVM and the link
    to a cubin (every ``compile`` of a kernel dispatcher; 0 in the simulator, which compiles nothing).
    ``zoo run`` prints each family's share, the part of a first run that a warm process would not pay."""
    if SIMULATOR:
        return 0.0
    from numba.cuda.dispatcher import CUDADispatcher

    if not getattr(CUDADispatcher.compile, "_zoo_timed", False):
        compile_once = CUDADispatcher.compile

        @functools.wraps(compile_once)
        def timed_compile(self, sig):
            _compiling["depth"] += 1  # a kernel compiled while another compiles is counted once, in the outer
            began = time.perf_counter()
            try:
                return compile_once(self, sig)
            finally:
                _compiling["depth"] -= 1
                if not _compiling["depth"]:
                    _compiling["seconds"] += time.perf_counter() - began

        timed_compile._zoo_timed = True
        CUDADispatcher.compile = timed_compile
    return _compiling["seconds"]


HOST_BOUND = 0.5  # a launch call's host time over the kernel's device time from which the host sets the pace


def host_bound(host_us, device_ms):
    """Whether a kernel of ``device_ms`` launched by a call of ``host_us`` is timed at the host's pace: the
    batch of back-to-back launches keeps the GPU busy only while each call takes less than the kernel."""
    return host_us * 1e-3 > HOST_BOUND * device_ms
