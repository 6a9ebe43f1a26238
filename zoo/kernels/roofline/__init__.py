"""The roofline: one kernel, b[i] = a[i] + a[i]^2 + ... + a[i]^k, swept from memory-bound to compute-bound.

Each element costs 8 bytes (read a[i], write b[i]) whatever k is, and 2k
floating-point operations as the seed counts them (one multiply for the next
power, one add into the sum, per term). So the arithmetic intensity is
2k / 8 = k/4 FLOP/byte: k = 1 is a copy, bound by memory bandwidth; k = 1000 is
250 FLOP/byte, far right of the ridge point where the FP32 peak takes over. The
family's steps take the seed's loop (k read at run time, one dependent chain:
about a tenth of the FP32 peak on an H200) up to both roofs: k compiled in and
the loop unrolled, independent chains, Horner's form on FMAs, several elements
per thread with 128-bit loads.

FLOPs are always counted the seed's way, 2k per element, for every step: the
Horner steps execute about k fused multiply-adds instead of 2k separate
instructions, and an FMA counts as 2 FLOPs, so the count stays honest while the
instruction count halves. ``python -m zoo roofline`` sweeps k for every step
and draws the roofline with the measured ceilings of ``zoo.bench.ceilings``.

The benchmark case (``zoo run``, asv) uses k = K_DEFAULT; the sweep varies k.
In the simulator every multiply runs in Python, so K_DEFAULT is small there.
"""

import numpy as np

from zoo import SIMULATOR

ORDER = 90
INPUTS = ("a",)
DTYPE = np.float32
NDIM = 1
K_DEFAULT = 7 if SIMULATOR else 100  # 7 = 4 + 3: the four-chain steps' leftover terms are exercised
K_SWEEP = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
K_MAX = 4096  # compile-time k unrolls: far larger k would only bloat the kernel
TEST_SIZES = (1, 31, 33, 1000, 4099)
GPU_TEST_SIZES = (1, 31, 1000, 4099, 1_000_003, (1 << 26) + 7, (1 << 28) + 7)
BENCH_SIZES = (1 << 20, 1 << 26)
HEADLINE_SIZE = 1 << 26
BASELINE = "CuPy elementwise kernel, the seed's loop with k at run time"
STRONGEST = "baseline"  # the same loop compiled by NVRTC: no library does this computation
BOUND = 0.9  # inputs uniform in (-0.9, 0.9): |a|^k shrinks, the sum stays below 9 in magnitude


# float32 error grows slowly with k (the terms shrink like 0.9^j). Emulated in float32 NumPy on
# 200,000 inputs, the relative norm error of every step's form stays below 3e-7 up to k = 1000.
TOLERANCE = 2e-6


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-BOUND, BOUND, int(size)).astype(np.float32),)


ELEMENTWISE_REFERENCE = True  # element i of the result needs element i of each input only


def reference(a, k=K_DEFAULT):
    x = a.astype(np.float64)
    q = np.zeros_like(x)
    for _ in range(int(k)):  # Horner in float64: q = 1 + x + ... + x^(k-1)
        q = q * x + 1.0
    return q * x


def check_k(k):
    """k must be a whole number from 1 to K_MAX (the steps compile one kernel per k)."""
    if isinstance(k, bool) or int(k) != k or not 1 <= k <= K_MAX:
        raise ValueError(f"k must be an integer from 1 to {K_MAX}, got {k!r}")
    return int(k)


def output_for(a, k=K_DEFAULT):
    check_k(k)
    return a.shape, np.float32


def flops(size, k=K_DEFAULT):
    return 2 * int(k) * int(size)  # the seed's count: a multiply and an add per term


def bytes_moved(size):
    return 2 * 4 * int(size)  # read a once, write b once


_CUPY_KERNEL = None


def baseline(a, out, k=K_DEFAULT):
    import cupy

    global _CUPY_KERNEL
    if _CUPY_KERNEL is None:
        _CUPY_KERNEL = cupy.ElementwiseKernel(
            "float32 x, int32 k",
            "float32 b",
            "float p = x, s = 0.0f; for (int j = 0; j < k; ++j) { s += p; p *= x; } b = s;",
            "zoo_roofline_powers",
        )
    _CUPY_KERNEL(a, np.int32(k), out)


def cuda_c(a, out, k=K_DEFAULT):
    """v05's arithmetic in CUDA C (Horner's FMA chains, eight elements a thread as two float4, k a template
    argument), compiled by NVRTC through CuPy's RawModule (``zoo.bench.cuda_c_rows``). Needs CuPy."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.cuda_c_rows().roofline(a, out, check_k(k))


EXTRA_BASELINES = {"cuda_c": cuda_c}
ROW_CODE = {"cuda_c": "zoo.bench.cuda_c_rows.roofline"}  # the kernel and its launch: the row's lines


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(a, k=K_DEFAULT):
    """The same polynomial by Horner's rule in NumPy float32, k ufunc passes over the array (one core)."""
    q = np.zeros_like(a)
    for _ in range(int(k)):
        q *= a
        q += np.float32(1)
    return q * a


CPU = {"cpu_numpy": (cpu_numpy, "one")}
