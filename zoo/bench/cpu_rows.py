"""The CPU beside the GPU: a family's host rows (NumPy, NumPy's BLAS, numba's parallel loops) timed on the same
inputs and checked like a library row."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import numpy as np

from zoo.bench.cases import stored_inputs, stored_reference
from zoo.bench.checking import compare
from zoo.bench.measurement import Measurement, rates
from zoo.registry import Family, Size

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
    host_inputs = stored_inputs(fam.name, size, seed, kind)
    params = {**fam.kind_params(kind), **params}
    start = time.perf_counter()
    result = fn(*host_inputs, **params)  # also compiles a numba row: a sample only for a NumPy row
    first_ms = (time.perf_counter() - start) * 1e3
    ok, err, _ = compare(np.asarray(result), stored_reference(fam.name, size, seed, kind), fam.tolerance(size, name))
    samples = [] if threads == "numba" else [first_ms]
    spent = sum(samples) / 1e3
    while not samples or not (spent >= budget_s and (len(samples) >= 3 or spent >= 2 * budget_s)):
        start = time.perf_counter()  # the budget's worth of calls, at least three unless they take twice the budget
        fn(*host_inputs, **params)
        samples.append((time.perf_counter() - start) * 1e3)
        spent += samples[-1] / 1e3
    ms = statistics.median(samples)
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
    gflops, gbps = rates(fam, size, ms, kind)
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
