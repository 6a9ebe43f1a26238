"""256-bin histogram of uint8 data, exact: the atomic-contention lesson.

Every byte adds one to one of 256 counters. The work is trivial; what costs is
many threads updating the same few addresses. Each atomic on one address is
serialized where it is resolved (the L2 slice for global memory, the SM's
shared-memory unit for shared), so the time depends on the data: uniform bytes
spread 2^28 updates over 256 addresses, while skewed bytes (one value 90% of
the time) send nine updates in ten to a single address. The steps fight that
contention in turn: global atomics (every update meets every other SM's at one
L2 address), a private shared-memory histogram per block merged once (the
contention stays inside a block), a copy per warp (it stays inside a warp),
32-bit and then 128-bit loads unpacked in registers (fewer, wider memory
instructions), and finally warp-aggregated updates with ``match_any_sync``
(the lanes holding the same byte do one atomic for all of them).

Bytes moved: n (each byte read once) + 256 x 4 (the counts written); no
floating-point work, so the report shows GB/s. Counts are exact (TOLERANCE 0)
and int32: n up to 2^31 - 1 fits. Every step first zeroes ``out`` with a tiny
kernel in the same stream, so a second call starts from zero too.

Inputs come in two kinds, both checked and timed: ``uniform`` bytes, and
``skewed`` bytes where one value (random per seed) takes 90% of the elements
and the rest are uniform. The baseline is ``cupy.bincount`` (its int64 counts
written into the int32 output).
"""

import numpy as np

from zoo import SIMULATOR

ORDER = 60
INPUTS = ("data",)
DTYPE = np.uint8
NDIM = 1
INPUT_KINDS = ("uniform", "skewed")
TOLERANCE = 0  # counts are integers: exact
BINS = 256
SKEW = 0.9  # share of the elements holding the hot value in the skewed kind

# Sizes the steps take from here: the simulator runs every CUDA thread in Python, so it gets smaller ones (the
# same code paths); the GPU gets the ones the steps are written and measured for (zoo.profile counts with those).
BLOCK = 64 if SIMULATOR else 256  # threads per block in every step

TEST_SIZES = (1, 31, 33, 1000, 4099)
GPU_TEST_SIZES = (1, 31, 33, 1000, 4099, 1_000_003, 1 << 24, (1 << 28) + 7)
BENCH_SIZES = (1 << 24, 1 << 28)
HEADLINE_SIZE = 1 << 28
BASELINE = "cupy.bincount"


def make_inputs(size, seed, kind="uniform"):
    rng = np.random.default_rng(seed)
    n = int(size)
    data = rng.integers(0, BINS, n, dtype=np.uint8)
    if kind == "skewed":
        hot = rng.integers(0, BINS)
        data[rng.random(n) < SKEW] = hot  # the rest stay uniform, hot value included
    elif kind != "uniform":
        raise ValueError(f"unknown input kind {kind!r}: expected one of {INPUT_KINDS}")
    return (data,)


def reference(data):
    return np.bincount(data, minlength=BINS).astype(np.float64)


def output_for(data):
    if data.size >= 2**31:
        raise ValueError(f"histogram: {data.size} elements could overflow an int32 count (at most 2**31 - 1)")
    return (BINS,), np.int32


def flops(size):
    return 0


def bytes_moved(size):
    return int(size) + BINS * 4  # read every byte once, write 256 int32 counts


def baseline(data, out):
    import cupy

    out[...] = cupy.bincount(data, minlength=BINS)  # int64 counts, cast into the int32 out


def cub_histogram_even(data, out):
    """CUB's device-wide histogram (``cub::DeviceHistogram::HistogramEven``, 256 bins of width one, int32 counts)
    through cuda.compute: what a practitioner calls (``pip install "zoo[baselines]"``; without it the row says so)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.cub_histogram_even(data, out, BINS)


EXTRA_BASELINES = {"cub histogram_even": cub_histogram_even}
STRONGEST = "cub histogram_even"


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(data):
    """numpy.bincount into int32 counts (one core)."""
    return np.bincount(data, minlength=BINS).astype(np.int32)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
