"""Host array in, host array out: overlap host-to-device copies, a kernel and device-to-host copies.

A GPU has copy engines besides its SMs: one can move host memory to the device
while another moves results back and the SMs compute. They run at once only when
the copies are asynchronous, which needs page-locked (pinned) host memory and
non-default streams, and when the work is split into chunks so that chunk i+1
is copied in while chunk i computes and chunk i-1 is copied out. The steps go
from serial copies of pageable memory to several streams issued in two orders.

Every step computes the same elementwise result: each float32 element runs
``work`` dependent FMAs, v <- v * A + B (2 * work FLOPs an element), a knob that
makes the kernel as long as the copies, shorter or longer. Each call moves 4 n
bytes to the device and 4 n bytes back over PCIe/NVLink-C2C (bytes_moved: 8 n).

Inputs stay on the host here by nature: the family sets HOST_INPUTS, so each
step's ``launch`` receives the caller's NumPy arrays and returns when ``out``
holds the result, and ``zoo run`` times the whole host-to-host call, each step
on the host memory it is meant for (``PINNED`` in the step's file: v01 pageable,
the rest page-locked). The baseline is what a CuPy user writes: ``cupy.asarray``,
the same recurrence as an ElementwiseKernel, ``.get(out=...)``, on the default
stream from pageable memory. ``python -m zoo streams`` times the pipelines with
a per-chunk timeline; ``python -m zoo transfers`` measures pageable against
pinned copies; ``python -m zoo launch`` the cost of a launch.
"""

import numpy as np

from zoo.kernels.pipeline.stages import CHUNKS, STREAMS, WORK
from zoo.kernels.pipeline.stages import reference as _closed_form

ORDER = 100
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 1
TOLERANCE = 1e-5  # float32 rounding over `work` contracting steps stays near sqrt(work) ulps
TEST_SIZES = (1, 31, 33, 1000, 4099)
GPU_TEST_SIZES = (1, 31, 4099, 1_000_003, (1 << 26) + 7)
BENCH_SIZES = (1 << 20, 1 << 24, 1 << 26)
BASELINE = "CuPy: asarray, kernel, get"
STRONGEST = "baseline"  # CuPy's transfers and a kernel, as a user writes them
HOST_INPUTS = True  # steps take NumPy arrays and do their own copies


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(size), dtype=np.float32),)


def reference(x, work=WORK, chunks=CHUNKS, streams=STREAMS):
    return _closed_form(x, work)


def output_for(x, work=WORK, chunks=CHUNKS, streams=STREAMS):
    from zoo.kernels.pipeline.stages import check_params

    check_params(work, chunks, streams)
    return x.shape, np.float32


def flops(size):
    return 2 * WORK * int(size)


def bytes_moved(size):
    return 8 * int(size)  # 4 n bytes to the device, 4 n back


_baseline_kernel = None


def baseline(x, out, work=WORK):
    """What a CuPy user writes: copy in, the recurrence as an ElementwiseKernel, copy out (host arrays)."""
    global _baseline_kernel
    import cupy

    if _baseline_kernel is None:
        from zoo.kernels.pipeline.stages import A, B

        _baseline_kernel = cupy.ElementwiseKernel(
            "float32 x, int32 work",
            "float32 y",
            f"float v = x; for (int k = 0; k < work; ++k) v = fmaf(v, {float(A)!r}f, {float(B)!r}f); y = v;",
            "zoo_pipeline_fma_chain",
        )
    _baseline_kernel(cupy.asarray(x), np.int32(work)).get(out=out)


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
_CPU_LOOP = []


def cpu_numba(x, work=WORK, chunks=CHUNKS, streams=STREAMS):
    """The recurrence y = A y + B, ``work`` times per element, compiled by numba over every core (NumPy would pass
    over the whole array ``work`` times: about a minute at the headline size)."""
    if not _CPU_LOOP:
        from numba import njit, prange

        from zoo.kernels.pipeline.stages import A, B

        @njit(parallel=True, fastmath=False)
        def every_element(x, y, work):
            for i in prange(x.size):  # numba splits the elements over its threads
                v = x[i]
                for _ in range(work):
                    v = v * A + B
                y[i] = v

        _CPU_LOOP.append(every_element)
    y = np.empty_like(x)
    _CPU_LOOP[0](x, y, int(work))
    return y


CPU = {"cpu_numba": (cpu_numba, "numba")}
