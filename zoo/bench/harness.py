"""The one harness every variant goes through: check, time, report resources.

Nothing here is copied into a variant. ``check`` runs anywhere (the simulator included); ``measure_*`` and
``resources`` need a GPU. This module measures a row (a step, a library row) on a case; what it builds on is a
module each, whose names it hands on: ``zoo.bench.checking`` (check, compare, check_library_row),
``zoo.bench.cases`` (a case's inputs and reference, made once, possibly ahead), ``zoo.bench.timing``
(time_launches, time_wall, hold_gpu, flush_l2), ``zoo.bench.measurement`` (Measurement) and ``zoo.bench.cpu_rows``
(measure_cpu).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda

from zoo.bench.cases import (
    case_device_sets,
    case_inputs,
    case_reference,
    input_sets,
    prepare_ahead,
    settle,
    stored_inputs,
    stored_reference,
)
from zoo.bench.checking import (
    SLICED_ELEMENTS,
    CheckResult,
    check,
    check_library_row,
    check_row,
    compare,
    host_cores,
    prepare,
    reference_of,
    relative_error,
    row_result,
)
from zoo.bench.cpu_rows import CPU_BUDGET_S, cpu_name, cpu_threads, measure_cpu
from zoo.bench.measurement import Measurement, rates
from zoo.bench.timing import (
    HOLD_FACTOR,
    HOLD_MAX_US,
    HOLD_MIN_US,
    HOST_BOUND,
    L2_FLUSH_FACTOR,
    Timing,
    compile_seconds,
    flush_l2,
    hold_gpu,
    host_bound,
    time_launches,
    time_wall,
    wait_for_side_streams,
)
from zoo.device import jit as zoo_jit  # the module: kernels number their launches
from zoo.device import properties
from zoo.errors import OutOfRange, Unsupported
from zoo.registry import Family, Size, Variant
from zoo.runtime import SIMULATOR, arrays

__all__ = [
    "BUDGET_S",
    "CPU_BUDGET_S",
    "HOLD_FACTOR",
    "HOLD_MAX_US",
    "HOLD_MIN_US",
    "HOST_BOUND",
    "L2_FLUSH_FACTOR",
    "HOST_CALL",
    "LEAN_CALL",
    "NUMBA_CALL",
    "SLICED_ELEMENTS",
    "CheckResult",
    "Measurement",
    "Timing",
    "benchmark_buffers",
    "call_path",
    "case_inputs",
    "case_reference",
    "check",
    "check_library_row",
    "check_row",
    "compare",
    "compile_seconds",
    "cpu_name",
    "cpu_threads",
    "flush_l2",
    "hold_gpu",
    "host_bound",
    "host_copy",
    "host_cores",
    "input_sets",
    "kernel_resources",
    "measure_baseline",
    "measure_cpu",
    "measure_variant",
    "prepare",
    "prepare_ahead",
    "rates",
    "reference_of",
    "relative_error",
    "resources",
    "row_result",
    "settle",
    "time_launches",
    "time_wall",
    "wait_for_side_streams",
]


def _timer(fam):
    """time_launches (device time behind a hold), or time_wall for a family that sets WALL_TIME."""
    return time_wall if getattr(fam.module, "WALL_TIME", False) else time_launches


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


def restore_updated_inputs(fam: Family, sets, host_inputs) -> None:
    """Copy the host values back into every set's inputs that a call of ``fam`` updates in place
    (``Family.updated_in_place``), whatever library holds them (NumPy, CuPy, numba); nothing for other families.
    Before a row's first call and before the call checked after its timing: both then see the case's inputs."""
    for arrays_of_a_set in sets:
        for i in fam.updated_in_place:
            target, values = arrays_of_a_set[i], host_inputs[i]
            library = arrays.library_of(target)
            if library == arrays.NUMPY:
                np.copyto(target, values)
            elif library == arrays.NUMBA:
                target.copy_to_device(values)
            else:  # CuPy's
                target.set(values)


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
    host_inputs = stored_inputs(*case)
    given, params = params, {**fam.kind_params(kind), **params}  # a kind may change the computation
    _, (shape, dtype) = variant.validate(*host_inputs, **params)  # OutOfRange before any copy
    device_sets = None if fam.host_inputs else case_device_sets(case)
    path = call_path(variant)
    sets, out = benchmark_buffers(variant, host_inputs, shape, dtype, sets=device_sets, path=path)
    restore_updated_inputs(fam, sets, host_inputs)  # an earlier row's calls updated them
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
        restore_updated_inputs(fam, sets, host_inputs)
        variant.launch(sets[0], out, **params)
    correct, err = None, math.nan
    if not variant.demonstration:
        ref = (
            stored_reference(fam.name, size, seed, kind)
            if not given
            else np.asarray(fam.reference(*host_inputs, **params))
        )
        ok, err, _ = compare(arrays.host(out), ref, variant.tolerance(size))
        correct = ok
    timing = _timer(fam)(
        lambda i: variant.launch(sets[i % len(sets)], out, **params), budget_s=budget_s, cold_l2=cold_l2
    )
    if not variant.demonstration:  # the output of the last timed call, against the same reference
        if fam.updated_in_place:  # its inputs are what the timed calls made of them: one more call on the case's
            restore_updated_inputs(fam, sets[:1], host_inputs)
            variant.launch(sets[0], out, **params)
        ok, err_last, _ = compare(arrays.host(out), ref, variant.tolerance(size))
        correct, err = correct and ok, max(err, err_last)
    gflops, gbps = rates(fam, size, timing.median_ms, kind)
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
    host_inputs = stored_inputs(*case)
    params = {**fam.kind_params(kind), **params}
    shape, dtype = fam.output_for(*host_inputs, **params)
    if fam.host_inputs:  # the library call moves the data too: host arrays in and out
        cupy_sets = [host_inputs]
        out = np.full(shape, arrays.poison_value(dtype), dtype)
    else:
        cupy_sets = [tuple(cupy.asarray(a) for a in s) for s in case_device_sets(case)]  # views, not copies
        out = cupy.full(shape, arrays.poison_value(dtype), dtype)
    restore_updated_inputs(fam, cupy_sets, host_inputs)  # an earlier row's calls updated them
    result = row_result(fam, name, cupy_sets[0], out, **params)  # a library the machine lacks: Unavailable here
    ok, err, _ = check_row(fam, name, size, host_inputs, result, stored_reference(*case), **params)
    last = [None]  # what the last timed call returned (a row whose result is not in out returns it)

    def timed_call(i):
        last[0] = call(*cupy_sets[i % len(cupy_sets)], out, **params)

    timing = _timer(fam)(timed_call, budget_s=budget_s, cold_l2=cold_l2)
    if ok is not None:  # the output of the last timed call
        if fam.updated_in_place:  # its inputs are what the timed calls made of them: one more call on the case's
            restore_updated_inputs(fam, cupy_sets[:1], host_inputs)
            timed_call(0)
        ok_last, err_last, _ = check_row(
            fam, name, size, host_inputs, out if last[0] is None else last[0], stored_reference(*case), **params
        )
        ok, err = ok and ok_last, max(err, err_last)
    gflops, gbps = rates(fam, size, timing.median_ms, kind)
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
