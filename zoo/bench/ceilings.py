"""The machine's two ceilings, measured: copy bandwidth and FP32 FMA peak.

A roofline needs two numbers: how many bytes a second the memory delivers and
how many floating-point operations a second the arithmetic units retire. The
datasheet gives nominal figures; what a kernel can reach is lower, so both are
measured here on the device itself and the datasheet figures kept beside them.

* ``copy_bandwidth()``: GB/s counting bytes read plus bytes written, from a
  1 GiB device-to-device copy (the driver's copy, no kernel of ours).
* ``fp32_peak()``: GFLOP/s (an FMA counts 2) from ``_fma_peak`` below, a numba
  kernel built to keep every FP32 lane busy.
* ``DATASHEET``: nominal figures by device name; ``datasheet()`` looks one up.
* ``measured()``: all of the above in one dict.

Both measurements run once per process (cached) and return None in the
simulator, where there is nothing to measure. ``measured()`` always returns its
dict; its measured entries are None in the simulator.
"""

import functools

import numpy as np
from numba import cuda, float32, uint32

from zoo.bench.harness import time_launches
from zoo.device import properties, sm_count
from zoo.device.jit import jit
from zoo.runtime import SIMULATOR

COPY_BYTES = 1 << 30  # size of the copied buffer: far beyond any L2 cache

# Nominal figures (SXM parts unless named): HBM bandwidth in GB/s, FP32 (non-tensor) GFLOP/s, and where
# known the dense FP16 tensor-core GFLOP/s (no sparsity; the datasheets print twice that "with sparsity").
DATASHEET = {
    "NVIDIA H200": {"bandwidth_gbs": 4800.0, "fp32_gflops": 66900.0, "tensor_fp16_gflops": 989400.0},  # H200 SXM
    "NVIDIA H200 NVL": {"bandwidth_gbs": 4800.0, "fp32_gflops": 60000.0},
    "NVIDIA H100 NVL": {"bandwidth_gbs": 3900.0, "fp32_gflops": 60000.0},
    "NVIDIA H100 PCIe": {"bandwidth_gbs": 2000.0, "fp32_gflops": 51200.0, "tensor_fp16_gflops": 756000.0},
    # H100 SXM5 (80GB HBM3)
    "NVIDIA H100": {"bandwidth_gbs": 3350.0, "fp32_gflops": 66900.0, "tensor_fp16_gflops": 989400.0},
    "NVIDIA A100-SXM4-80GB": {"bandwidth_gbs": 2039.0, "fp32_gflops": 19500.0, "tensor_fp16_gflops": 312000.0},
    "NVIDIA A100-SXM4-40GB": {"bandwidth_gbs": 1555.0, "fp32_gflops": 19500.0, "tensor_fp16_gflops": 312000.0},
    "NVIDIA L40S": {"bandwidth_gbs": 864.0, "fp32_gflops": 91600.0},
}


def datasheet(name=None):
    """Nominal figures of the device called ``name`` (the current one when None), or None.

    The longest DATASHEET key that starts the name wins, so 'NVIDIA H100 PCIe'
    is not taken for the SXM part.
    """
    if name is None:
        name = properties()["name"]
    keys = [k for k in DATASHEET if str(name).startswith(k)]
    return dict(DATASHEET[max(keys, key=len)]) if keys else None


# -- copy bandwidth -------------------------------------------------------------
def device_copy(src, dst):
    """Copy src's bytes into dst (CuPy arrays) with the driver's device-to-device copy, queued on the
    current stream: the copy ceiling every family times beside its steps, and what copy_bandwidth() times.

    The copy is asynchronous, so back-to-back copies queue like kernel launches. numba's
    ``dst.copy_to_device(src)`` makes the host wait for each copy before the next is issued: on an H200 it
    measured 3,408 GB/s where this measures 4,222, and a ceiling 20% low flatters every kernel held to it.
    """
    dst.data.copy_from_device_async(src.data, src.nbytes)


@functools.cache
def copy_bandwidth():
    """GB/s of a 1 GiB device-to-device copy (``device_copy``), bytes read + written; None in the simulator."""
    if SIMULATOR:
        return None
    import cupy

    n = COPY_BYTES // 4
    src = cupy.empty(n, cupy.float32)
    dst = cupy.empty(n, cupy.float32)
    timing = time_launches(lambda i: device_copy(src, dst))
    src = dst = None  # free the 2 GiB before the kernels are timed
    return 2 * COPY_BYTES / (timing.median_ms * 1e-3) / 1e9


# -- FP32 FMA peak ----------------------------------------------------------------
CHAINS = 8  # independent accumulators per thread: 8 FMAs in flight hide the 4-cycle latency
INNER = 16  # FMAs per chain per outer iteration: NVVM unrolls 16 x 8 = 128 FMAs fully (64 it unrolls only 8-fold)
PEAK_THREADS = 256
PEAK_BLOCKS_PER_SM = 8  # 8 x 256 = 2048 threads: a full SM, if registers stay at 32 or fewer
PEAK_ITERATIONS = 4096  # about 4 ms per launch on an H200: long against the launch, short in total


@jit(launch_bounds=(PEAK_THREADS, PEAK_BLOCKS_PER_SM))
def _fma_peak(out, iterations, x0):
    i = cuda.grid(1)
    x = x0 + float32(i) * float32(1e-9)  # run-time start values: nothing folds at compile time
    a0 = x
    a1 = x + float32(0.1)
    a2 = x + float32(0.2)
    a3 = x + float32(0.3)
    a4 = x + float32(0.4)
    a5 = x + float32(0.5)
    a6 = x + float32(0.6)
    a7 = x + float32(0.7)
    m = float32(0.9999)
    c = float32(1e-4)  # a <- a*m + c converges to 1: no overflow, no denormals
    t = uint32(0)
    while t < iterations:  # 32-bit counter: one add, one compare, one branch per 128 FMAs
        for _ in range(INNER):  # constant trip count: NVVM unrolls it into straight-line FMAs
            a0 = a0 * m + c
            a1 = a1 * m + c
            a2 = a2 * m + c
            a3 = a3 * m + c
            a4 = a4 * m + c
            a5 = a5 * m + c
            a6 = a6 * m + c
            a7 = a7 * m + c
        t = uint32(t + uint32(1))  # uint32 + uint32 types as 64-bit in numba: cast back
    if i < out.size:  # the sum is stored so no chain is dead code
        out[i] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


def peak_flops_per_launch(blocks, threads=PEAK_THREADS, iterations=PEAK_ITERATIONS):
    """FLOPs one launch of ``_fma_peak`` executes, counting an FMA as 2."""
    return 2 * CHAINS * INNER * iterations * blocks * threads


@functools.cache
def fp32_peak():
    """GFLOP/s of ``_fma_peak`` on the whole device; None in the simulator."""
    if SIMULATOR:
        return None

    blocks = sm_count() * PEAK_BLOCKS_PER_SM
    out = cuda.device_array(blocks * PEAK_THREADS, np.float32)
    iterations = np.uint32(PEAK_ITERATIONS)
    timing = time_launches(lambda i: _fma_peak[blocks, PEAK_THREADS](out, iterations, np.float32(1.0 + 1e-3 * (i % 7))))
    return peak_flops_per_launch(blocks) / (timing.median_ms * 1e-3) / 1e9


def measured():
    """Measured and nominal ceilings of the current device, in one dict.

    Keys: device, copy_bandwidth_gbs, fp32_peak_gflops (None in the simulator),
    datasheet_bandwidth_gbs, datasheet_fp32_gflops (None for a device not in
    DATASHEET), ridge_ai (FLOP/byte where the two measured roofs meet, or None).
    """
    name = properties()["name"]
    sheet = datasheet(name) or {}
    bw, peak = copy_bandwidth(), fp32_peak()
    return {
        "device": name,
        "copy_bandwidth_gbs": bw,
        "fp32_peak_gflops": peak,
        "datasheet_bandwidth_gbs": sheet.get("bandwidth_gbs"),
        "datasheet_fp32_gflops": sheet.get("fp32_gflops"),
        "ridge_ai": peak / bw if bw and peak else None,
    }
