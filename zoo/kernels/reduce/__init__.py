"""Sum of a 1-D float32 or int32 array: Harris's reductions, shuffles, one pass, 128-bit loads.

A reduction reads every element once and writes one number, so it is purely
memory-bound: the lesson is how to keep the whole GPU busy on a problem whose
parallelism halves at every level of the tree. Steps 1-6 follow Mark Harris's
"Optimizing parallel reduction in CUDA": a divergent interleaved tree, a
strided index that trades divergence for shared-memory bank conflicts,
sequential addressing, the first addition folded into the load, the last warp
unrolled (with ``syncwarp``: the old ``volatile`` trick is unsafe since Volta),
and a tree unrolled completely for a block size fixed at compile time. Each of
those writes one partial per block and is launched again on the partials until
one value is left. Step 7 makes each thread sum many elements (grid-stride) so
the second launch is tiny; step 8 reduces with warp shuffles; step 9 needs one
launch: the last block to finish sums the block partials; step 10 reads 128
bits per load in that single pass.

Bytes moved: 4 n + 4 (read x, write the sum); additions: n - 1, counted as n.
The baseline is ``cupy.sum`` (CUB's device reduction) into ``out``; numba's
own ``cuda.reduce`` is timed as a second baseline row.

Tolerance (float32): relative error ``1e-6 + 2**-22 * sqrt(n)``. The data is
uniform [0, 1) (mean 1/2), so the sum is about n/2 and a relative error is
meaningful. Each float32 addition rounds with relative error at most 2**-24,
and independent roundings add like a random walk; the longest serial chain of
additions any step makes is below n, and tree levels only shorten it, so
2**-24 * sqrt(n) is the typical error and four times that leaves ample room
(7e-5 at n = 1000, 4e-3 at 2**28). Dropping one element of mean 1/2 from a sum
of n/2 is a relative error of about 1/n, which is 30-1000 times the tolerance at
the simulator sizes (n <= 4099), so a lost element fails there; at large n the
int32 kind catches it. int32 results must be exact: values in [-3, 3] keep
|sum| <= 3 (2**28 + 7), far inside int32.
"""

import math

import numpy as np

from zoo import SIMULATOR

ORDER = 40
INPUTS = ("x",)
DTYPE = (np.float32, np.int32)
INPUT_KINDS = ("float32", "int32")
NDIM = 1

# Sizes the steps take from here: the simulator runs every CUDA thread in Python, so it gets smaller ones (the
# same code paths); the GPU gets the ones the steps are written and measured for (zoo.profile counts with those).
BLOCK = 64 if SIMULATOR else 256  # threads per block in every step

TEST_SIZES = (1, 31, 33, 1000, 4099)
KIND_TEST_SIZES = {"int32": (1, 33, 1000)}  # the same kernels on other data: the GPU checks every size
GPU_TEST_SIZES = (1, 31, 33, 1000, 4099, 1_000_003, 1 << 24, (1 << 28) + 7)
BENCH_SIZES = (1 << 24, 1 << 28)
HEADLINE_SIZE = 1 << 28
MAPPING = {"v01": 300}  # the picture of the first pass: two blocks of 256, each summed into one partial
BASELINE = "cupy.sum (CUB)"


def TOLERANCE(size):
    """Relative error accepted for float32 at n = size (int32 is compared exactly)."""
    return 1e-6 + 2.0**-22 * math.sqrt(int(size))


def make_inputs(size, seed, kind="float32"):
    rng = np.random.default_rng(seed)
    n = int(size)
    if kind == "int32":
        return (rng.integers(-3, 4, n, dtype=np.int32),)  # |sum| <= 3 n: no overflow
    return (rng.random(n, dtype=np.float32),)  # uniform [0, 1): nonzero mean


def reference(x):
    return np.array([x.astype(np.float64).sum()])


def output_for(x):
    return (1,), x.dtype


def flops(size):
    return int(size)  # one addition per element


def bytes_moved(size):
    return 4 * int(size) + 4  # read x, write the sum


def baseline(x, out):
    import cupy

    cupy.sum(x, dtype=x.dtype, out=out.reshape(()))  # dtype kept: int32 accumulates in int32


_NUMBA_REDUCE = []


def _numba_reduce(x, out):
    from numba import cuda

    if not _NUMBA_REDUCE:  # built once, on first use
        _NUMBA_REDUCE.append(cuda.Reduce(lambda a, b: a + b))
    _NUMBA_REDUCE[0](cuda.as_cuda_array(x), res=cuda.as_cuda_array(out))


def cub_reduce(x, out):
    """CUB's device-wide reduction (``cub::DeviceReduce``) through cuda.compute, in x's dtype: what a practitioner
    calls (``pip install "zoo[baselines]"``; without it the row says so)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.cub_reduce(x, out)


EXTRA_BASELINES = {"numba cuda.reduce": _numba_reduce, "cub reduce_into": cub_reduce}
STRONGEST = "cub reduce_into"  # what a practitioner calls: CUB's device-wide reduction


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """numpy.sum in the input's dtype (pairwise summation, one core)."""
    return np.array([x.sum(dtype=x.dtype)])


_PARALLEL_SUM = []


def cpu_numba(x):
    """The same sum compiled for the CPU by numba: a prange loop whose partial sums numba gives each thread."""
    if not _PARALLEL_SUM:
        from numba import njit, prange

        @njit(parallel=True, cache=False)
        def parallel_sum(values, zero):
            total = zero
            for i in prange(values.size):  # numba splits the range over its threads and adds their totals
                total += values[i]
            return total

        _PARALLEL_SUM.append(parallel_sum)
    return np.array([_PARALLEL_SUM[0](x, x.dtype.type(0))])


CPU = {"cpu_numpy": (cpu_numpy, "one"), "cpu_numba": (cpu_numba, "numba")}
