"""Inclusive prefix sum (scan) of a 1-D float32 or int32 array: from one block to one pass.

out[i] = x[0] + x[1] + ... + x[i]. Every output depends on every earlier input,
so a scan cannot be split into independent pieces the way an elementwise kernel
can: the steps show how parallel hardware gets around that. Inside one block:
Hillis-Steele (log n rounds, n log n additions), Blelloch's work-efficient
up-sweep/down-sweep with padding against bank conflicts, and a warp-shuffle scan
that keeps values in registers. Across blocks: the classic three kernels (scan
each tile, scan the tile sums, add them back: 4 n words of traffic), then the
single-pass chained scan with decoupled look-back of Merrill and Garland (2016),
where each tile learns its prefix from its predecessors through flags in global
memory and the data is read and written once.

Bytes moved: 8 n (read x, write out); additions: n - 1, counted as n FLOPs.
The baseline is ``cupy.cumsum`` into ``out`` (the dtype is kept).

Tolerance (float32): relative norm error ``1e-6 + 2**-23 * sqrt(n)``. The
uniform [0, 1) data has a nonzero mean, so prefix sums grow like i/2 and the
relative error is meaningful. Each float32 addition rounds with relative error
at most 2**-24; a prefix is formed by a chain of additions (serial within a
thread, then across tiles), and independent roundings add up like a random walk,
about 2**-24 * sqrt(chain length) relative. The longest chain any step or cupy
uses is below n, so sqrt(n) times twice the unit roundoff bounds it with room
(2e-3 at 2**28; the tree steps sit far below). int32 results must be exact: the
data is drawn from [-3, 3], so no prefix can pass 3 * (2**28 + 7), far inside
int32.
"""

import math

import numpy as np

from zoo import SIMULATOR

ORDER = 50
INPUTS = ("x",)
DTYPE = (np.float32, np.int32)
INPUT_KINDS = ("float32", "int32")
NDIM = 1
TEST_SIZES = (1, 31, 33, 1000, 4099)
KIND_TEST_SIZES = {"int32": (1, 33, 1000)}  # the same kernels on other data: the GPU checks every size
GPU_TEST_SIZES = (1, 31, 33, 1000, 4099, 1_000_003, 1 << 24, (1 << 28) + 7)
BENCH_SIZES = (1024, 1 << 24, 1 << 28)  # 1024: the one-block steps (v01-v03) have a figure too
HEADLINE_SIZE = 1 << 28
BASELINE = "cupy.cumsum(x, out=out)"
# v03's block: its one block walks the array in chunks of this many elements. The simulator runs every thread in
# Python, and a block of 1024 made v03 at 4099 the slowest simulator check of all: 128 there, so every test size past
# 128 crosses chunks (1000 too, not only 4099), with the same code.
WARP_SCAN_THREADS = 128 if SIMULATOR else 1024


def TOLERANCE(size):
    """Relative norm error accepted for float32 at n = size (int32 is compared exactly)."""
    return 1e-6 + 2.0**-23 * math.sqrt(int(size))


def make_inputs(size, seed, kind="float32"):
    rng = np.random.default_rng(seed)
    n = int(size)
    if kind == "int32":
        return (rng.integers(-3, 4, n, dtype=np.int32),)  # |prefix| <= 3 n: no overflow
    return (rng.random(n, dtype=np.float32),)  # uniform [0, 1): nonzero mean


def reference(x):
    return np.cumsum(x.astype(np.float64))


def output_for(x):
    return x.shape, x.dtype


def flops(size):
    return int(size)  # one addition per element


def bytes_moved(size):
    return 2 * 4 * int(size)  # read x, write out


def baseline(x, out):
    import cupy

    cupy.cumsum(x, out=out)


def cub_inclusive_scan(x, out):
    """CUB's device-wide scan (``cub::DeviceScan``, decoupled look-back) through cuda.compute, in x's dtype: what a
    practitioner calls (``pip install "zoo[baselines]"``; without it the row says so)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.cub_inclusive_scan(x, out)


EXTRA_BASELINES = {"cub inclusive_scan": cub_inclusive_scan}
STRONGEST = "cub inclusive_scan"


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """numpy.cumsum on one core, one running sum from the first element to the last: in float64 for float32 input,
    as a careful user writes it (a float32 running sum of 2^28 elements kept no correct digit: relative error 0.82
    on the H100's host), then back to the input's dtype; integers in their own dtype, exact."""
    if x.dtype.kind == "f":
        return np.cumsum(x, dtype=np.float64).astype(x.dtype)
    return np.cumsum(x, dtype=x.dtype)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
