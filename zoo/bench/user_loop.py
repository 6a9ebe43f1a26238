"""The figure a user sees in their own loop: a step called as a user calls it, back to back between two events.

The benchmark (``harness.time_launches``) times a step's launch on prepared inputs rotated past the L2 cache,
behind a kernel that holds the GPU while the host queues the calls: the device's time a call. A user calls the
step itself, ``step(x, y, out=z)`` on CuPy arrays, the same arrays every call (validation and the lean launch each
time), and nothing holds the GPU. ``time_user_loop`` times that: a Python loop of calls between two events on the
default stream, ms a call; beside it the host's time a call (the loop's wall time on the host, before the wait)
and the same call's device time behind a hold (``harness.time_launches`` on the user's call), which tell the host's
pace from the call's own device time. ``zoo run`` records it for each family's best step at its headline size
(``Measurement.user_loop``), and at its smallest BENCH size for the best step and the library's call; ``reason``
turns the figures into the sentence a family's page gives where the loop and the benchmark differ by more than
DIFFERS.
"""

import math
import statistics
import time

import numpy as np

LOOP_MS = 30.0  # a loop of calls lasts about this long on the GPU
MIN_CALLS, MAX_CALLS = 3, 2000
LOOPS = 3  # loops timed; the figure is their median
DIFFERS = 0.10  # a loop this much slower or faster than the benchmark's figure gets a reason on the page
CALL_GOAL = 1.3  # a step's call at the smallest BENCH size costs at most this many times the library's call
HOST_PACED = 0.9  # a loop whose host time a call is this much of its time a call ran at the host's pace


def user_arrays(fam, host_inputs, shape, dtype):
    """(inputs, out) as a user passes them: CuPy copies and a CuPy output on a GPU, for a family whose steps take
    host arrays (HOST_INPUTS) the NumPy arrays themselves and a NumPy output."""
    if fam.host_inputs:
        return tuple(host_inputs), np.empty(shape, dtype)
    import cupy

    return tuple(None if a is None else cupy.asarray(a) for a in host_inputs), cupy.empty(shape, dtype)


def time_user_loop(call, *, loop_ms=LOOP_MS, loops=LOOPS, device_budget_s=0.15):
    """{ms, host_us, device_ms, calls}: ``call()`` run back to back in a Python loop between two events on the
    default stream (ms a call, the median of ``loops`` loops), the host's time a call in those loops, and the same
    call's device time behind a hold (``harness.time_launches``). The first call compiles and warms up."""
    from numba import cuda

    from zoo.bench import harness

    call()
    cuda.synchronize()
    began = time.perf_counter()
    call()
    cuda.synchronize()
    estimate_ms = max((time.perf_counter() - began) * 1e3, 1e-3)
    calls = int(min(MAX_CALLS, max(MIN_CALLS, math.ceil(loop_ms / estimate_ms))))
    start, stop = cuda.event(), cuda.event()
    per_call, host_us = [], []
    for _ in range(loops):
        cuda.synchronize()
        start.record()
        began = time.perf_counter()
        for _ in range(calls):
            call()
        host_us.append((time.perf_counter() - began) * 1e6 / calls)
        stop.record()
        stop.synchronize()
        per_call.append(cuda.event_elapsed_time(start, stop) / calls)
    device = harness.time_launches(lambda i: call(), budget_s=device_budget_s)
    return {
        "ms": statistics.median(per_call),
        "host_us": statistics.median(host_us),
        "device_ms": device.median_ms,
        "calls": calls,
    }


def step_loop(variant, size, kind=None):
    """The user's loop of ``variant`` at ``size`` (``time_user_loop``), with what the page's reason reads: whether
    the output the loop left is right, the kernel its calls launched last, the bytes of its arrays and the GPU's L2
    size. The inputs are the measured case's (``harness.case_inputs``)."""
    from zoo.bench import harness
    from zoo.device import jit as zoo_jit
    from zoo.device import properties
    from zoo.runtime import arrays

    fam = variant.family
    host = harness.case_inputs(fam, size, kind)
    params = fam.kind_params(kind)
    shape, dtype = fam.output_for(*host, **params)
    inputs, out = user_arrays(fam, host, shape, dtype)
    before = zoo_jit.launch_count()
    found = time_user_loop(lambda: variant(*inputs, out=out, **params))
    kernel = zoo_jit.launched_since(before)
    if fam.updated_in_place:  # the loop's calls updated some inputs: one more call on the case's own, checked
        harness.restore_updated_inputs(fam, [inputs], host)
        variant(*inputs, out=out, **params)
    ok, _, _ = harness.compare(arrays.host(out), harness.case_reference(fam, size, kind), variant.tolerance(size))
    return dict(
        found,
        correct=bool(ok),
        kernel=kernel.__name__ if kernel is not None else None,
        arrays="numpy" if fam.host_inputs else "cupy",
        footprint_bytes=int(sum(a.nbytes for a in host if a is not None) + np.dtype(dtype).itemsize * math.prod(shape)),
        l2_bytes=properties().get("l2_bytes"),
    )


def library_loop(fam, size, kind=None, name="baseline"):
    """The user's loop of the library row ``name`` (the family's baseline: the call a CuPy program makes) at
    ``size``, on arrays of its own: ``time_user_loop``'s figures."""
    from zoo.bench import harness

    host = harness.case_inputs(fam, size, kind)
    params = fam.kind_params(kind)
    shape, dtype = fam.output_for(*host, **params)
    inputs, out = user_arrays(fam, host, shape, dtype)
    row = fam.baselines[name]
    return dict(time_user_loop(lambda: row(*inputs, out, **params)), arrays="numpy" if fam.host_inputs else "cupy")


def _us(ms):
    return f"{ms * 1e3:,.1f} us" if ms < 1 else f"{ms:,.3f} ms"


def reason(entry):
    """Why a step's user's loop (``entry['user_loop']``) and its benchmark figure (``entry['ms']``) differ, from the
    measured figures; '' where they are within DIFFERS of each other or no loop was recorded."""
    loop = entry.get("user_loop") or {}
    if not loop.get("ms") or not entry.get("ms"):
        return ""
    bench, ms = entry["ms"], loop["ms"]
    if abs(ms / bench - 1) <= DIFFERS:
        return ""
    host_ms, device_ms = loop.get("host_us", math.nan) * 1e-3, loop.get("device_ms") or math.nan
    if ms > bench and host_ms >= HOST_PACED * ms:
        return (
            f"the host's pace: a call takes the host {_us(host_ms)} (validation, the arrays' checks, the launch), "
            f"longer than its {_us(device_ms)} on the GPU, which waits between calls"
        )
    if abs(device_ms / bench - 1) > DIFFERS:  # the call itself runs another time on the GPU than the benchmark's
        why = f"the call's own device time, behind a hold as the benchmark's, is {_us(device_ms)}, not {_us(bench)}"
        kernel = (entry.get("resources") or {}).get("kernel")
        if loop.get("kernel") and kernel and loop["kernel"] != kernel:
            why += f": it launched {loop['kernel']} where the benchmark's launch ended with {kernel}"
        elif ms < bench and loop.get("l2_bytes") and loop.get("footprint_bytes", math.inf) < loop["l2_bytes"]:
            why += (
                f": its one set of arrays ({loop['footprint_bytes'] / 2**20:,.1f} MiB) stays in the L2 cache "
                f"({loop['l2_bytes'] / 2**20:,.0f} MiB), where the benchmark rotates copies past it"
            )
        return why
    return (
        f"gaps between the calls: {_us(ms)} a call in the loop against {_us(device_ms)} of device time, while the "
        f"host issues a call in {_us(host_ms)}"
    )


def loop_line(step, entry):
    """The page's line on a step's user's loop beside its benchmark figure ('' where none was recorded)."""
    loop = entry.get("user_loop") or {}
    if not loop.get("ms"):
        return ""
    arrays = "CuPy arrays" if loop.get("arrays") == "cupy" else "NumPy arrays"
    line = (
        f"In a user's loop ({loop.get('calls', '?')} calls of `{step}` on {arrays}, `out=` given, back to back between "
        f"two events) a call takes {_us(loop['ms'])}, against the benchmark's {_us(entry['ms'])} "
        f"({100 * entry['ms'] / loop['ms']:.0f}% of the benchmark's speed)"
    )
    if loop.get("correct") is False:
        line += "; the output the loop left was **wrong**"
    why = reason(entry)
    return line + (f". Why they differ: {why}." if why else ".")


def call_cost_line(step, entry, library, library_name):
    """The page's line on a step's call against the library's call at the smallest BENCH size (CALL_GOAL), from the
    user's loops recorded on both rows; '' where either is missing."""
    mine, theirs = (entry.get("user_loop") or {}).get("ms"), (library.get("user_loop") or {}).get("ms")
    if not mine or not theirs:
        return ""
    times = mine / theirs
    verdict = "within" if times <= CALL_GOAL else "**over**"
    return (
        f"A call of `{step}` in a user's loop takes {_us(mine)}, {times:.2f}x the library's call ({library_name}, "
        f"{_us(theirs)}): {verdict} the goal of {CALL_GOAL}x."
    )
