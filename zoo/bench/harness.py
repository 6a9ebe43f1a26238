"""The one harness every variant goes through: check, time, report resources.

Nothing here is copied into a variant. ``check`` runs anywhere (the simulator
included); ``benchmark`` and ``resources`` need a GPU.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from zoo.device import jit as zoo_jit  # the module: kernels number their launches
from zoo.device import properties
from zoo.errors import OutOfRange, Unsupported
from zoo.registry import Family, Size, Variant, family
from zoo.runtime import SIMULATOR, arrays


# -- correctness --------------------------------------------------------------
@dataclass
class CheckResult:
    variant: str
    size: object
    ok: bool
    error: float  # relative norm error (0 for exact families when equal)
    detail: str = ""


SLICED_ELEMENTS = 1 << 22  # from this many elements a comparison or a reference runs in slices on every core


def host_cores():
    """How many cores this process may run on."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _by_slices(fn, arrays):
    """[fn(*slices)] over slices of the flattened ``arrays`` (same sizes, element i of each belonging together):
    one slice below SLICED_ELEMENTS, else a few a core, run on a thread per core (NumPy releases the GIL inside
    its loops)."""
    flat = [np.asarray(a).reshape(-1) for a in arrays]
    n = flat[0].size
    if n < SLICED_ELEMENTS:
        return [fn(*flat)]
    from concurrent.futures import ThreadPoolExecutor

    bounds = np.linspace(0, n, 4 * host_cores() + 1).astype(int)  # a few slices a core: uneven cores even out
    with ThreadPoolExecutor(host_cores(), thread_name_prefix="zoo-slices") as pool:
        return list(pool.map(lambda k: fn(*(a[bounds[k] : bounds[k + 1]] for a in flat)), range(len(bounds) - 1)))


def _sum_by_slices(fn, *arrays):
    """sum(fn(*slices)) over slices of ``arrays``: comparing 2^28 float32 elements with a float64 reference takes
    over a second on one core, and a family's run compares ten or more rows."""
    return sum(_by_slices(fn, arrays))


def _squares(result, ref):
    diff = result.astype(np.float64) - ref
    # (sum of squared errors, sum of squares); einsum's own loop, not BLAS's threads inside these threads
    return np.array([np.einsum("i,i->", diff, diff), np.einsum("i,i->", ref, ref)], np.float64)


def relative_error(result: Any, ref: Any) -> float:
    """||result - ref|| / ||ref|| in float64 (absolute norm when ref is all zero)."""
    ref = np.asarray(ref, np.float64)
    diff2, scale2 = _sum_by_slices(_squares, result, ref)
    diff, scale = math.sqrt(diff2), math.sqrt(scale2)
    return float(diff / scale) if scale > 0 else float(diff)


def compare(result: Any, ref: Any, tolerance: float) -> tuple[bool, float, str]:
    """(ok, error, detail) for a result against the float64 reference."""
    result = np.asarray(result)
    if result.shape != ref.shape:
        return False, math.inf, f"shape {result.shape}, expected {ref.shape}"
    if result.dtype.kind in "iub" or tolerance == 0:
        wrong = int(_sum_by_slices(lambda r, f: np.count_nonzero(r != f), result, ref))
        first = "" if not wrong else f" (first at {np.argwhere(result != ref)[0].tolist()})"
        return wrong == 0, float(wrong), f"{wrong} elements differ{first}" if wrong else "exact"
    unwritten = int(_sum_by_slices(lambda r, f: np.count_nonzero(np.isnan(r) & ~np.isnan(f)), result, ref))
    if unwritten:
        return False, math.inf, f"{unwritten} elements left unwritten (still NaN)"
    err = relative_error(result, ref)
    return err <= tolerance, err, f"rel. error {err:.2e} (tolerance {tolerance:.0e})"


def prepare(fam: Family, size: Size, seed: int = 0, kind: str | None = None) -> Any:
    """(inputs, float64 reference) of one check case, to check every step of a family on (``check``'s
    ``prepared``): the inputs and the reference are made once rather than once a step."""
    inputs = fam.inputs(size, seed, kind)
    return inputs, reference_of(fam, inputs, **fam.kind_params(kind))


def check(
    variant: Variant, size: Size, seed: int = 0, kind: str | None = None, prepared: Any = None, **params: Any
) -> CheckResult:
    """Run ``variant`` on fresh seeded inputs with a poisoned output; compare with the reference.

    ``kind`` picks one of the family's INPUT_KINDS (its first when None). ``prepared`` is
    ``prepare(family, size, seed, kind)``, made once for many steps (and ignored with ``params``).
    """
    fam = variant.family
    if prepared is not None and not params:
        inputs, ref = prepared
    else:
        inputs = fam.inputs(size, seed, kind)
        ref = None
    params = {**fam.kind_params(kind), **params}  # a kind may change the computation (KIND_PARAMS)
    if ref is None:
        ref = reference_of(fam, inputs, **params)
    shape, dtype = fam.output_for(*inputs, **params)
    out = np.full(shape, arrays.poison_value(dtype), dtype=dtype)
    result = variant(*inputs, out=out, **params)
    ok, err, detail = compare(result, ref, variant.tolerance(size))
    return CheckResult(variant.name, size, ok, err, detail)


# -- timing (GPU) -------------------------------------------------------------
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
_flush_buffer = []  # the device buffer a flush writes, made once


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


_stream_events = {}  # id of a step's stream -> (the stream, its numba form, an event recorded on it): made once


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


def _timer(fam):
    """time_launches (device time behind a hold), or time_wall for a family that sets WALL_TIME."""
    return time_wall if getattr(fam.module, "WALL_TIME", False) else time_launches


def input_sets(host_inputs: Sequence[Any]) -> list[Any]:
    """Device copies of the inputs, as many sets as it takes to exceed twice the L2 cache.

    Timing one set over and over measures the L2 cache once the inputs fit in
    it; rotating through several sets makes each call read from DRAM.
    """
    footprint = sum(a.nbytes for a in host_inputs)
    l2 = properties().get("l2_bytes") or 0
    count = 1 if footprint >= 2 * l2 else min(16, math.ceil(2 * l2 / max(footprint, 1)))
    return [tuple(cuda.to_device(a) for a in host_inputs) for _ in range(count)]


@dataclass
class Measurement:
    name: str
    size: object
    ms: float
    spread: float
    gflops: float
    gbps: float
    ratio: float = math.nan  # throughput relative to the baseline in the same run
    over_cpu: float = math.nan  # times faster than the family's first CPU row in the same run
    correct: object = None  # True/False, or None when not checked (demonstrations)
    error: float = math.nan
    resources: dict = field(default_factory=dict)
    host_us: float = math.nan  # host time of a launch call: at 80% of ms or more, the host set the pace (host_paced)
    cold_l2: bool = False  # timed with the L2 cache flushed before every call (zoo run --cold-l2), not warm
    call_path: str = ""  # the arrays a step's launch was timed on (harness.call_path); '' for a library or CPU row
    user_loop: dict = field(default_factory=dict)  # the call in a user's loop (zoo.bench.user_loop), where recorded


def _rates(fam, size, ms, kind=None):
    """(GFLOP/s, GB/s) of a call that took ``ms``: the bytes this kind of input moves, with the keyword arguments
    a kind adds to every call (KIND_PARAMS) passed to flops and bytes_moved."""
    seconds, params = ms * 1e-3, fam.kind_params(kind)
    return fam.flops(size, **params) / seconds / 1e9, fam.bytes_moved(size, kind, **params) / seconds / 1e9


# -- the inputs and reference of a measured case, made once and possibly ahead of time --------------
# At a headline size (2^28 float32 elements, 1 GiB an array) the generator takes seconds and a float64
# reference tens of seconds on one core (fusion's four sines), while a family measures ten or more rows.
# So a case's inputs and reference are made once, and ``prepare_ahead`` makes the next family's in a
# background thread while the GPU times this one's steps (NumPy releases the GIL inside its loops).
# Every row reads the inputs (device copies are made from them) and none writes them: a row that did
# would fail the next row's check.
_cases: dict[tuple, Any] = {}  # (family name, size, seed, kind) -> Future of (inputs, reference)


def _make_case(family_name, size, seed, kind):
    fam = family(family_name)
    inputs = fam.inputs(size, seed, kind)
    return inputs, reference_of(fam, inputs, **fam.kind_params(kind))


def reference_of(fam, inputs, **params):
    """``fam.reference(*inputs, **params)`` as a float64 array; for a family whose spec sets ELEMENTWISE_REFERENCE,
    a large one is computed in slices on a thread per host core (NumPy releases the GIL inside its loops)."""
    if not getattr(fam.module, "ELEMENTWISE_REFERENCE", False) or inputs[0].size < SLICED_ELEMENTS:
        return np.asarray(fam.reference(*inputs, **params))
    pieces = _by_slices(lambda *part: np.asarray(fam.reference(*part, **params)), inputs)  # same shapes in and out
    return np.concatenate(pieces).reshape(inputs[0].shape)


def _in_background(key):
    """A Future of ``_make_case(*key)``, made by a daemon thread (Ctrl-C does not wait for it)."""
    import threading
    from concurrent.futures import Future

    future = Future()

    def work():
        try:
            future.set_result(_make_case(*key))
        except BaseException as e:  # raised again where the case is used
            future.set_exception(e)

    threading.Thread(target=work, name="zoo-case", daemon=True).start()
    return future


def prepare_ahead(*cases):
    """Start making the inputs and reference of each ``(family, size, kind)`` (seed 0) in the background, and
    forget every other case: at most these are held in memory."""
    keys = [(fam.name, size, 0, kind) for fam, size, kind in cases]
    _forget_all_but(keys)
    for key in keys:
        if key not in _cases:
            _cases[key] = _in_background(key)


def _forget_all_but(keys):
    """Drop every case (its inputs, reference and device copies) but ``keys``."""
    for key in list(_cases):
        if key not in keys:
            del _cases[key]
            _device.pop(key, None)


HOST_BOUND = 0.5  # a launch call's host time over the kernel's device time from which the host sets the pace


def host_bound(host_us, device_ms):
    """Whether a kernel of ``device_ms`` launched by a call of ``host_us`` is timed at the host's pace: the
    batch of back-to-back launches keeps the GPU busy only while each call takes less than the kernel."""
    return host_us * 1e-3 > HOST_BOUND * device_ms


def settle():
    """Wait until no case is being made in the background (before host timings it would disturb)."""
    for future in list(_cases.values()):
        future.exception()  # waits; an error is raised where the case is used


def _case(family_name, size, seed, kind):
    key = (family_name, size, seed, kind)
    found = _cases.get(key)
    if found is None:
        from concurrent.futures import Future

        _forget_all_but([k for k in _cases if k != key][-1:])  # keep at most one other case (the one made ahead)
        found = _cases[key] = Future()
        found.set_result(_make_case(*key))
    return found.result()


_device: dict[tuple, Any] = {}  # case key -> device copies of its inputs: every row of a case times the same copies


def _device_input_sets(key):
    """``input_sets`` of one case's inputs, copied to the GPU once for all its rows (one case at a time)."""
    found = _device.get(key)
    if found is None:
        _device.clear()
        found = _device[key] = input_sets(_inputs(*key))
    return found


def case_inputs(fam: Family, size: Size, kind: str | None = None, seed: int = 0) -> Any:
    """The host inputs of a measured case (made now, or waited for if they are being made in the background)."""
    return _inputs(fam.name, size, seed, kind)


def case_reference(fam: Family, size: Size, kind: str | None = None, seed: int = 0) -> Any:
    """The float64 reference of a measured case's default call, made once with its inputs (``case_inputs``)."""
    return _reference(fam.name, size, seed, kind)


def _inputs(family_name, size, seed, kind):
    """The host inputs of one case, made once while its rows are measured."""
    return _case(family_name, size, seed, kind)[0]


def _reference(family_name, size, seed, kind):
    """The float64 reference of the default call, made once while one size is measured."""
    return _case(family_name, size, seed, kind)[1]


def host_copy(a, pinned):
    """``a`` in page-locked host memory when ``pinned``, else ``a`` itself (for HOST_INPUTS families)."""
    if not pinned:
        return a
    b = cuda.pinned_array(a.shape, a.dtype)
    b[...] = a
    return b


LEAN_CALL = "lean launch, CuPy arrays"  # Measurement.call_path of a step timed as a user's call on CuPy arrays runs
NUMBA_CALL = "numba device arrays"  # ... of one timed on numba's arrays (no CuPy, or ZOO_LAUNCH=numba)
HOST_CALL = "host arrays"  # ... of a step that takes host arrays and moves them itself (HOST_INPUTS)


def call_path(variant):
    """How a step's launch gets its arrays when timed: CuPy arrays as they are, the lean launch's cheapest path
    and the one a user's call on CuPy arrays takes (``zoo.runtime.arrays.CUPY_AS_IS``), where CuPy is installed;
    else numba device arrays; host arrays for a HOST_INPUTS family."""
    if variant.family.host_inputs:
        return HOST_CALL
    if not arrays.CUPY_AS_IS:
        return NUMBA_CALL
    try:
        import cupy  # noqa: F401
    except ImportError:
        return NUMBA_CALL
    return LEAN_CALL


def benchmark_buffers(variant, host_inputs, shape, dtype, sets=None, path=None):
    """(input sets, poisoned output) a variant is timed on: device copies rotated past the L2 (``sets`` when
    given), each in the variant's layout (``Variant.packed``), or, for a family whose steps take host arrays, the
    host arrays (page-locked if the step sets PINNED). On the lean call path (``path``, default ``call_path``) the
    device arrays are CuPy views of the copies, as a user's call passes them: the small sizes, where a call's host
    time is the figure, are timed on the path a user's call takes."""
    poison = np.full(shape, arrays.poison_value(dtype), dtype=dtype)
    if variant.family.host_inputs:
        pinned = bool(getattr(variant.module, "PINNED", False))
        return [tuple(host_copy(a, pinned) for a in host_inputs)], host_copy(poison, pinned)
    out = cuda.device_array(shape, dtype)
    out.copy_to_device(poison)
    sets = sets if sets is not None else input_sets(host_inputs)
    if (path or call_path(variant)) == LEAN_CALL:
        import cupy

        sets = [tuple(None if a is None else cupy.asarray(a) for a in s) for s in sets]  # views: no copies
        out = cupy.asarray(out)
    return [variant.packed(s) for s in sets], out


BUDGET_S = 1.0  # seconds of samples a row is timed for by default (at least min_samples of them)


def measure_variant(
    variant: Variant,
    size: Size,
    seed: int = 0,
    baseline_ms: float | None = None,
    kind: str | None = None,
    budget_s: float = BUDGET_S,
    cold_l2: bool = False,
    **params: Any,
) -> Measurement:
    """Check on the benchmark inputs, then time for about ``budget_s`` seconds (each call after an L2 flush with
    ``cold_l2``); returns a Measurement. The output is checked twice: after the first call, and as the last timed
    call left it (``correct`` is False unless both are right), so a step that is right once and wrong when called
    again (a counter it does not reset, an output it accumulates into, inputs it overwrites) fails."""
    fam = variant.family
    case = (fam.name, size, seed, kind)
    host_inputs = _inputs(*case)
    given, params = params, {**fam.kind_params(kind), **params}  # a kind may change the computation
    _, (shape, dtype) = variant.validate(*host_inputs, **params)  # OutOfRange before any copy
    device_sets = None if fam.host_inputs else _device_input_sets(case)
    path = call_path(variant)
    sets, out = benchmark_buffers(variant, host_inputs, shape, dtype, sets=device_sets, path=path)
    launches_before = zoo_jit.launch_count()
    try:
        variant.launch(sets[0], out, **params)
    except (OutOfRange, Unsupported):
        raise
    except Exception as e:  # a step that breaks on CuPy arrays: timed on numba's, and the results say why
        if path != LEAN_CALL:
            raise
        path = f"{NUMBA_CALL} (its launch raised {type(e).__name__} on CuPy arrays: {e})"[:240]
        sets, out = benchmark_buffers(variant, host_inputs, shape, dtype, sets=device_sets, path=NUMBA_CALL)
        variant.launch(sets[0], out, **params)
    correct, err = None, math.nan
    if not variant.demonstration:
        ref = _reference(fam.name, size, seed, kind) if not given else np.asarray(fam.reference(*host_inputs, **params))
        ok, err, _ = compare(arrays.host(out), ref, variant.tolerance(size))
        correct = ok
    timing = _timer(fam)(
        lambda i: variant.launch(sets[i % len(sets)], out, **params), budget_s=budget_s, cold_l2=cold_l2
    )
    if not variant.demonstration:  # the output of the last timed call, against the same reference
        ok, err_last, _ = compare(arrays.host(out), ref, variant.tolerance(size))
        correct, err = correct and ok, max(err, err_last)
    gflops, gbps = _rates(fam, size, timing.median_ms, kind)
    m = Measurement(
        variant.name,
        size,
        timing.median_ms,
        timing.spread,
        gflops,
        gbps,
        correct=correct,
        error=err,
        resources=resources(variant, since=launches_before),
        host_us=timing.host_us,
        cold_l2=cold_l2,
        call_path=path,
    )
    if baseline_ms:
        m.ratio = baseline_ms / timing.median_ms
    return m


def row_result(fam, name, inputs, out, **params):
    """Call the library row ``name`` once on ``inputs`` and ``out``; return the array that holds its result: what the
    row returned (a copy into a scratch buffer, a float16 product), else ``out``. A library this machine lacks raises
    zoo.errors.Unavailable here."""
    returned = fam.baselines[name](*inputs, out, **params)
    return out if returned is None else returned


def check_row(fam, name, size, host_inputs, result, reference=None, **params):
    """(ok, error, detail) of a library row's result: against the row's own ROW_REFERENCE where the spec gives one
    (a copy: the bytes it copied), else against the family's ``reference`` (computed when None), with the row's
    tolerance. (None, NaN, why) for a ceiling that declares nothing it could be checked against."""
    own = fam.row_references.get(name)
    if own is not None:
        reference = np.asarray(own(*host_inputs, **params))
    elif not fam.checked(name):
        return None, math.nan, "a ceiling: timed, not checked (no ROW_REFERENCE)"
    elif reference is None:
        reference = reference_of(fam, host_inputs, **params)
    return compare(arrays.host(result), reference, fam.tolerance(size, name))


def check_library_row(
    fam: Family, name: str, size: Size, seed: int = 0, kind: str | None = None, **params: Any
) -> CheckResult:
    """Run the library row ``name`` once on fresh seeded inputs with a poisoned output and check it like a step
    (``check_row``): the check a row gets before it is timed, callable on its own. On a GPU the row gets CuPy arrays
    (host arrays for a HOST_INPUTS family); in the simulator NumPy ones, which a row written for NumPy runs on (the
    tests' throwaway families' rows). Returns a CheckResult (ok None: never checked)."""
    inputs = fam.inputs(size, seed, kind)
    params = {**fam.kind_params(kind), **params}
    shape, dtype = fam.output_for(*inputs, **params)
    out = np.full(shape, arrays.poison_value(dtype), dtype=dtype)
    given = inputs
    if not SIMULATOR and not fam.host_inputs:
        import cupy

        given, out = tuple(cupy.asarray(a) for a in inputs), cupy.asarray(out)
    result = row_result(fam, name, given, out, **params)
    ok, err, detail = check_row(fam, name, size, inputs, result, **params)
    return CheckResult(name, size, ok, err, detail)


def measure_baseline(
    fam: Family,
    size: Size,
    seed: int = 0,
    kind: str | None = None,
    name: str = "baseline",
    baseline_ms: float | None = None,
    budget_s: float = BUDGET_S,
    cold_l2: bool = False,
    **params: Any,
) -> Measurement:
    """Time one of the family's library rows (``fam.baselines[name]``) on the same inputs.

    Its first call and its last timed call are checked like a variant's (``check_row``: a ceiling such as a copy of
    the same bytes against what it must produce, its ROW_REFERENCE); ``ratio`` is relative to ``baseline_ms`` (the
    family's main baseline) when given.
    """
    import cupy

    call = fam.baselines[name]
    case = (fam.name, size, seed, kind)
    host_inputs = _inputs(*case)
    params = {**fam.kind_params(kind), **params}
    shape, dtype = fam.output_for(*host_inputs, **params)
    if fam.host_inputs:  # the library call moves the data too: host arrays in and out
        cupy_sets = [host_inputs]
        out = np.full(shape, arrays.poison_value(dtype), dtype)
    else:
        cupy_sets = [tuple(cupy.asarray(a) for a in s) for s in _device_input_sets(case)]  # views, not copies
        out = cupy.full(shape, arrays.poison_value(dtype), dtype)
    result = row_result(fam, name, cupy_sets[0], out, **params)  # a library the machine lacks: Unavailable here
    ok, err, _ = check_row(fam, name, size, host_inputs, result, _reference(*case), **params)
    last = [None]  # what the last timed call returned (a row whose result is not in out returns it)

    def timed_call(i):
        last[0] = call(*cupy_sets[i % len(cupy_sets)], out, **params)

    timing = _timer(fam)(timed_call, budget_s=budget_s, cold_l2=cold_l2)
    if ok is not None:  # the output of the last timed call
        ok_last, err_last, _ = check_row(
            fam, name, size, host_inputs, out if last[0] is None else last[0], _reference(*case), **params
        )
        ok, err = ok and ok_last, max(err, err_last)
    gflops, gbps = _rates(fam, size, timing.median_ms, kind)
    ratio = baseline_ms / timing.median_ms if baseline_ms else 1.0
    return Measurement(
        name,
        size,
        timing.median_ms,
        timing.spread,
        gflops,
        gbps,
        ratio=ratio,
        correct=ok,
        error=err,
        host_us=timing.host_us,
        cold_l2=cold_l2,
    )


# -- the CPU beside the GPU ------------------------------------------------------
CPU_BUDGET_S = 1.0  # host seconds a CPU row is timed for (at least 3 calls, or 1 when a call takes longer)


def cpu_threads(threads):
    """How many threads a CPU row runs on: 'one', 'blas' (NumPy's BLAS pool) or 'numba' (numba's pool)."""
    import os

    if threads == "numba":
        import numba

        return numba.get_num_threads()
    if threads == "blas":
        try:
            from threadpoolctl import threadpool_info

            pools = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
            if pools:
                return max(pools)
        except ImportError:  # threadpoolctl is optional: OpenBLAS and MKL default to every core
            pass
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 1


def cpu_name():
    """The host processor's model name, as /proc/cpuinfo gives it (or the platform's word for it)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure_cpu(
    fam: Family,
    size: Size,
    seed: int = 0,
    kind: str | None = None,
    name: Any = None,
    baseline_ms: float | None = None,
    budget_s: float = CPU_BUDGET_S,
    **params: Any,
) -> Measurement:
    """Time one of the family's CPU rows (``fam.cpu_rows[name]``) on the host inputs; checked like a baseline."""
    fn, threads = fam.cpu_rows[name]
    host_inputs = _inputs(fam.name, size, seed, kind)
    params = {**fam.kind_params(kind), **params}
    start = time.perf_counter()
    result = fn(*host_inputs, **params)  # also compiles a numba row: a sample only for a NumPy row
    first_ms = (time.perf_counter() - start) * 1e3
    ok, err, _ = compare(np.asarray(result), _reference(fam.name, size, seed, kind), fam.tolerance(size, name))
    samples = [] if threads == "numba" else [first_ms]
    spent = sum(samples) / 1e3
    while not samples or not (spent >= budget_s and (len(samples) >= 3 or spent >= 2 * budget_s)):
        start = time.perf_counter()  # the budget's worth of calls, at least three unless they take twice the budget
        fn(*host_inputs, **params)
        samples.append((time.perf_counter() - start) * 1e3)
        spent += samples[-1] / 1e3
    ms = statistics.median(samples)
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
    gflops, gbps = _rates(fam, size, ms, kind)
    ratio = baseline_ms / ms if baseline_ms else math.nan
    return Measurement(
        name,
        size,
        ms,
        (q[2] - q[0]) / ms if ms else 0.0,
        gflops,
        gbps,
        ratio=ratio,
        correct=ok,
        error=err,
        resources={"threads": cpu_threads(threads), "cpu": cpu_name()},
    )


# -- resources (GPU) ----------------------------------------------------------
def resources(variant: Variant, since: int | None = None) -> dict[str, Any]:
    """Registers, shared and local memory, and occupancy of the variant's last launched kernel.

    With ``since`` (a ``zoo.device.jit.launch_count()`` taken before the variant ran), that is
    whichever kernel was launched last after it, even one the step built at run
    time and cached; without, the last launched of the kernels its file names.
    """
    if SIMULATOR:
        return {}
    kernel = zoo_jit.launched_since(since) if since is not None else None
    if kernel is None:
        launched = [k for k in variant.kernels if k.last_launch is not None]
        if not launched:
            return {}
        kernel = launched[-1]
    return kernel_resources(kernel)


def kernel_resources(kernel):
    """Registers, shared and local memory, and occupancy of ``kernel`` (a zoo.device.jit.Kernel) as last launched."""
    compiled = kernel.compiled()
    launch = kernel.last_launch
    threads = launch.threads_per_block
    blocks_per_sm = kernel.resident_blocks(threads, launch.shared_bytes)
    max_threads = properties().get("max_threads_per_sm") or 2048
    return {
        "kernel": kernel.__name__,
        "threads_per_block": threads,
        "registers": compiled.regs_per_thread,
        "shared_bytes": compiled.shared_mem_per_block + launch.shared_bytes,
        "local_bytes": compiled.local_mem_per_thread,
        "blocks_per_sm": blocks_per_sm,
        "occupancy": blocks_per_sm * threads / max_threads,
    }
