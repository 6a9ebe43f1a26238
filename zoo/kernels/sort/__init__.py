"""Sort float32 or uint32 keys, alone or with int32 values: from a sorting network in one block to onesweep.

out = the keys in ascending order (``numpy.sort``), or, given int32 values, the values in
the keys' stable order (``values[numpy.argsort(keys, kind="stable")]``: with values = 0, 1, 2 ...
the permutation itself). The first two steps are a bitonic network: compare-exchange in
shared memory inside one block, then across blocks with one launch per merge stride, O(n
log^2 n) work. The rest are an LSD radix sort, O(n) work in a few passes, one per digit of
the key, each pass a histogram of the digits (the histogram family), an exclusive scan of
the counts (the scan family) and a stable scatter: three kernels per digit, then a block-local
ranking that writes each digit's keys as one coalesced run, then fewer, wider digits with the
scan of the counts fused into the upsweep, and finally onesweep (Adinets and Merrill 2022),
one kernel per digit whose tiles learn their offsets by the scan family's decoupled look-back.

The order of float keys (stated, and what every step does): a radix sort compares unsigned
32-bit words, so a float32's bits are first mapped to a word whose unsigned order is the
float's order, ``order.float_word``: a positive float gets its sign bit set (it sorts above
every negative one), a negative float has all its bits flipped (a larger magnitude sorts
lower). Two values more are made equal first: -0.0 sorts as +0.0 (IEEE calls them equal, so
zeros keep their input order), and every NaN, of either sign and any payload, sorts as the
largest word, after +inf, in input order. The keys themselves are moved unchanged: only the
digits are read through the map. (CUB maps -0.0 to +0.0 the same way but sorts a NaN by its
bits, a negative NaN first; the inputs here hold positive NaNs only, so CUB's rows are checked
on the same data.) uint32 keys are their own word. The bitonic steps compare (word, index)
pairs, which makes them stable too.

Inputs: ``keys`` (float32 or uint32), and for the ``pairs`` kind ``values`` (int32, as many).
Three kinds are checked and timed: ``float32`` keys, ``uint32`` keys, ``pairs`` (float32 keys,
int32 values). Float keys are normal-distributed with a sixteenth drawn from a pool of 64
values (duplicates), and a few of each of -0.0, +0.0, +inf, -inf and NaN (NumPy's, as
``numpy.sort`` writes it back); uint32 keys are uniform over all 2^32 words with the same
share of duplicates. Results must be exact: keys compare by value and a NaN by its bits,
values exactly. The checks poison an output with NumPy's NaN, so a keys-only check cannot
see an unwritten slot where a NaN belongs: the pairs kind (int32 out) and the edge keys of
tests/kernels/test_sort.py (NaNs with payloads, compared bit for bit) see every slot.

Bytes moved: the fewest one call must read and write, 8 n for keys (read once, written
once) and 16 n for pairs. A radix pass moves that much by itself, so a sort of d digits
moves about d times the fewest bytes (plus a read of the keys per histogram): the page's
GB/s is against the fewest (keys per second: GB/s / 8, or / 16 for pairs). The copy
ceiling copies the fewest bytes once: a pass cannot beat it. Strongest row: CUB's radix sort through
``cuda.compute`` (``cub::DeviceRadixSort``, onesweep on this GPU); ``cupy.sort`` (CUB under
the hood, with a gather for pairs) is the baseline.
"""

import numpy as np

from zoo import SIMULATOR

ORDER = 65  # after histogram (60) and scan (50): a radix sort is both, pass after pass
INPUTS = ("keys", "values?")
DTYPE = {"keys": (np.float32, np.uint32), "values": np.int32}
NDIM = 1
INPUT_KINDS = ("float32", "uint32", "pairs")
TOLERANCE = 0  # a permutation: exact
TEST_SIZES = (1, 33, 300)
# The simulator's seconds: the same kernels on each kind (tests/kernels/test_sort.py adds 40 edge keys per step); the
# GPU checks every kind at every size.
KIND_TEST_SIZES = {"float32": (1, 300), "uint32": (33,), "pairs": (300,)}
GPU_TEST_SIZES = (1, 31, 33, 1000, 4099, 1_000_003, 1 << 24)
BENCH_SIZES = (2048, 1 << 24, 1 << 28)  # 2048: one bitonic block (v01) has a figure too
HEADLINE_SIZE = 1 << 28
BASELINE = "cupy.sort"

# Sizes the steps share; the simulator runs every CUDA thread in Python, so its blocks are smaller (same code paths).
BITONIC_THREADS = 64 if SIMULATOR else 1024  # threads of a bitonic block; each holds two keys
TILE_THREADS = 64 if SIMULATOR else 256  # threads of a radix tile
TILE_ITEMS = 2 if SIMULATOR else 16  # keys per thread of a radix tile
CHUNKS_PER_SM = 2 if SIMULATOR else 4  # v05: blocks a multiprocessor, each walking a chunk of tiles
SPECIALS = (-0.0, 0.0, np.inf, -np.inf, np.nan)


def _with_duplicates(rng, keys, pool):
    """A sixteenth of the keys replaced by draws from ``pool``: equal keys, whose order the stable sort keeps."""
    picked = rng.random(keys.size) < 1 / 16
    keys[picked] = rng.choice(pool, int(picked.sum()))
    return keys


def _float_keys(rng, n):
    keys = _with_duplicates(rng, rng.standard_normal(n, dtype=np.float32) * 100, rng.standard_normal(64) * 100)
    specials = np.array(SPECIALS, np.float32)
    each = max(1, n // 256)  # a few of each special value (n >= 5: at least one of each)
    places = rng.choice(n, min(n, each * specials.size), replace=False)
    keys[places] = np.resize(specials, places.size)
    return keys


def make_inputs(size, seed, kind="float32"):
    rng = np.random.default_rng(seed)
    n = int(size)
    if kind == "uint32":
        pool = rng.integers(0, 1 << 32, 64, dtype=np.uint32)
        pool[:2] = 0, 0xFFFFFFFF  # the smallest and largest words
        return (_with_duplicates(rng, rng.integers(0, 1 << 32, n, dtype=np.uint32), pool),)
    keys = _float_keys(rng, n)
    if kind == "pairs":
        odd = np.uint32(2 * rng.integers(1 << 30) + 1)  # times an odd number is a one-to-one map of 32-bit words
        return keys, (np.arange(n, dtype=np.uint32) * odd).view(np.int32)  # distinct values: an unstable swap shows
    return (keys,)


def stable_order(keys):
    """``numpy.argsort(keys, kind="stable")`` (NaN last, -0.0 equal to +0.0, ties in input order), computed as
    NumPy's sort of unique 64-bit (sort word, index) pairs: seconds at 2^28 where the stable argsort of float32
    takes minutes. tests/kernels/test_sort.py checks the two agree."""
    bits = keys.view(np.uint32)
    word = bits
    if keys.dtype == np.float32:
        word = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x80000000))  # the spec's map
        word[bits == np.uint32(0x80000000)] = np.uint32(0x80000000)  # -0.0 as +0.0
        word[np.isnan(keys)] = np.uint32(0xFFFFFFFF)  # every NaN last
    pairs = (word.astype(np.uint64) << np.uint64(32)) | np.arange(keys.size, dtype=np.uint64)
    pairs.sort()  # unique pairs: any sort gives the one order
    return (pairs & np.uint64(0xFFFFFFFF)).astype(np.intp)


def reference(keys, values=None):
    order = stable_order(keys)
    return keys[order] if values is None else values[order]


def output_for(keys, values=None):
    if keys.size >= 1 << 31:
        raise ValueError(f"sort: at most 2**31 - 1 keys (int32 positions), got {keys.size}")
    if values is None:
        return keys.shape, keys.dtype
    if values.shape != keys.shape:
        raise ValueError(f"values must match keys: keys {tuple(keys.shape)}, values {tuple(values.shape)}")
    return values.shape, np.int32


def flops(size):
    return 0  # no arithmetic: the page shows GB/s


def bytes_moved(size, kind="float32"):
    return (16 if kind == "pairs" else 8) * int(size)  # read keys (and values) once, write them once


def baseline(keys, *rest):
    """cupy.sort of the keys (CUB's radix sort), or for pairs the values gathered by cupy.argsort (stable)."""
    import cupy

    out = rest[-1]
    if len(rest) == 1:
        cupy.copyto(out, cupy.sort(keys))
    else:
        cupy.take(rest[0], cupy.argsort(keys), out=out)


def cub_radix_sort(keys, *rest):
    """CUB's device-wide radix sort (``cub::DeviceRadixSort``, onesweep) through cuda.compute: keys into out, or
    the pairs' values into out and their keys into a scratch buffer (``pip install "zoo[baselines]"``)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.cub_radix_sort(keys, rest[0] if len(rest) == 2 else None, rest[-1])


def copy_ceiling(keys, *rest):
    """The fewest bytes a sort moves (keys, and values, read once and written once) as one copy: a radix pass
    moves at least this much, so a sort of d passes takes at least d times its time. Checked as a copy."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    inputs = (keys,) if len(rest) == 1 else (keys, rest[0])
    return libraries.copy_leading_bytes(inputs, sum(a.nbytes for a in inputs))


def _copied(keys, values=None):
    return np.concatenate([a.view(np.uint8) for a in (keys, values) if a is not None])


EXTRA_BASELINES = {"cub radix_sort": cub_radix_sort}
CEILINGS = {"copy_ceiling": copy_ceiling}
ROW_REFERENCE = {"copy_ceiling": _copied}
STRONGEST = "cub radix_sort"


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(keys, values=None):
    """numpy.sort of the keys (one core), or for pairs the values gathered by numpy.argsort(kind="stable")."""
    return np.sort(keys) if values is None else values[np.argsort(keys, kind="stable")]


CPU = {"cpu_numpy": (cpu_numpy, "one")}
