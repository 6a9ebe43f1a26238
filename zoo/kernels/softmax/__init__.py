"""Row-wise softmax of a float32 matrix: two reductions and a map per row, fused into one read.

For each row x of length n, softmax(x)_j = exp(x_j) / sum_k exp(x_k). Written
that way it overflows: expf(89) is already inf in float32, and a row holding
1e4 gives inf / inf = NaN. The *safe* softmax subtracts the row maximum m
first, which changes nothing mathematically (the factor exp(-m) cancels) and
keeps every exponent at or below 0:

    m = max_k x_k,   d = sum_k exp(x_k - m),   y_j = exp(x_j - m) / d

Now each term lies in (0, 1], the largest is exactly 1, so d lies in [1, n]:
no overflow, no division by zero, and a -1e4 simply underflows to 0. The cost
is a second reduction: max, then sum, then the output - three passes over the
row, or, as frameworks run it, four kernels (max, subtract-and-exp into a
temporary, sum, divide), each a full trip through DRAM.

The *online normalizer* (Milakov and Gimelshein, 2018) folds the max and the
sum into one pass. Keep a running max m and a running sum d of exp(x - m); when
a new element v exceeds m, the sum so far was taken relative to the old max and
is rescaled:

    if v > m:  d = d * exp(m - v) + 1;  m = v       else:  d = d + exp(v - m)

Two partial states (m1, d1) and (m2, d2), from two threads that each read part
of the row, merge by the same rule, which is associative and commutative, so
any reduction tree (shuffles, shared memory) may combine them:

    m = max(m1, m2),   d = d1 * exp(m1 - m) + d2 * exp(m2 - m)

A thread that has read nothing holds (-FLT_MAX, 0), not (-inf, 0): -inf - -inf
is NaN, while exp(-FLT_MAX - m) is 0 and exp(0) * 0 is 0, so an idle thread
merges away without a special case (inputs are assumed finite). With the row
held in registers the online trick is unnecessary: both reductions run on
values already read, and the input is read exactly once.

Sizes are n (n x n) or rows x cols; any shape is accepted. Bytes moved:
8 rows cols (read x once, write out once), what the last step moves; each
step's docstring states what it moves. FLOPs: 5 per element (compare, subtract,
exp, add, multiply; exp counted as one). The baseline runs the same computation
as separate CuPy ops; the ``copy_ceiling`` row is a device-to-device copy of
the same bytes.

Input kinds: ``normal`` (standard normal) and ``large``, normal rows in which
about one element in eight, and at least one per row, is +1e4 or -1e4: a row
of 1 x 1 holding -1e4 must give 1.0, a row whose maximum appears twice splits
its mass in halves, and an unsafe exp gives inf or NaN.

Tolerance (relative norm error against float64): ``2e-6 + 2**-23 sqrt(cols)``.
expf is accurate to about 2 ulp (2**-23 relative), x - m and the final
multiply round once each, and the sum of a row adds cols roundings of at most
2**-24 that grow like a random walk (sqrt(cols)); twice that covers the online
rescales, each one more rounded exp. That is 1.3e-5 at 8193 columns (the steps
measure about 1e-7 in the simulator), while dropping one element of a row of
n, or normalizing by the wrong sum, is an error of order 1/n: about 1.2e-4 at
8193 columns and far more at the other test sizes.
"""

import math

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange

ORDER = 170
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 2
INPUT_KINDS = ("normal", "large")
SIZE_DIMS = (1, 2)  # n (square) or rows x cols

# Sizes the steps take from here: the simulator runs every CUDA thread in Python, so it gets smaller ones (the
# same code paths); the GPU gets the ones the steps are written and measured for (zoo.profile counts with those).
BLOCK = 64 if SIMULATOR else 256  # threads per block (per row: v02, v04) in every step

# Simulator sizes: one element; rows shorter than a warp; a 4-aligned row that fits a warp's
# registers (float4); a row longer than any register path (8193: the fallback); a row just over two
# warps' width, 5 rows cut across blocks (the simulator's blocks hold 2 warp rows); and a 4-aligned
# row past a warp's registers (the block-per-row register kernel). Few rows: the simulator spends
# about 0.1-0.2 s on each block.
TEST_SIZES = ((1, 1), (3, 31), (2, 1000), (2, 8193), (5, 65), (2, 2044))
# GPU sizes add the headline, a long-row fallback, many short rows, and one very long row.
GPU_TEST_SIZES = (
    (1, 1),
    (3, 31),
    (5, 1000),
    (2, 8193),
    (33, 65),
    (3, 2044),
    (4096, 8192),
    (1000, 8193),
    (100000, 31),
    (32768, 1024),
    (2, 1_000_003),
)
BENCH_SIZES = ((4096, 8192), (32768, 1024), (262144, 31))
HEADLINE_SIZE = (4096, 8192)
BASELINE = "CuPy ops: max, exp(x - max), sum, divide"
LARGE = 1e4  # the magnitude of the large kind's planted values
LIMIT = 2**31  # elements: every uint32 index sum in the steps stays below 2^32


def shape(size):
    """(rows, cols) of a size: n means n x n."""
    if isinstance(size, (tuple, list)):
        rows, cols = size
        return int(rows), int(cols)
    return int(size), int(size)


def TOLERANCE(size):
    """Relative norm error accepted for rows of this length (see the module docstring)."""
    return 2e-6 + 2.0**-23 * math.sqrt(shape(size)[1])


def make_inputs(size, seed, kind="normal"):
    rows, cols = shape(size)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    if kind == "large":
        planted = rng.random((rows, cols)) < 0.125
        planted[np.arange(rows), rng.integers(0, cols, rows)] = True  # at least one per row
        signs = np.where(rng.random((rows, cols)) < 0.5, -LARGE, LARGE).astype(np.float32)
        x = np.where(planted, signs, x)
    return (x,)


def reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def output_for(x):
    return x.shape, np.float32


def flops(size):
    rows, cols = shape(size)
    return 5 * rows * cols  # compare, subtract, exp, add, multiply per element


def bytes_moved(size):
    rows, cols = shape(size)
    return 2 * 4 * rows * cols  # read x once, write out once


def check_index_range(x):
    """OutOfRange for a matrix too large for the steps' uint32 indices (every step's validate)."""
    if x.size >= LIMIT:
        raise OutOfRange(f"softmax indexes with uint32: the matrix must have fewer than 2^31 elements, got {x.size}")


def baseline(x, out):
    import cupy

    m = x.max(axis=1, keepdims=True)  # what a framework runs: one kernel per op, temporaries in DRAM
    e = cupy.exp(x - m)
    cupy.divide(e, e.sum(axis=1, keepdims=True), out=out)


def triton_softmax(x, out):
    """The fused softmax as a Triton kernel (``zoo.bench.triton_rows``): a program a row, the row held in registers,
    read once and written once. Needs Triton and PyTorch (the row says so where they are missing)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.triton_rows().softmax(x, out)


def torch_softmax(x):
    """What a PyTorch user calls: ``torch.softmax`` along the rows."""
    import torch

    return torch.softmax(x, dim=1)


def torch_eager(x, out):
    """``torch.softmax``, eager: PyTorch's own fused softmax kernel (``zoo.bench.torch_rows``); its result is
    returned. Needs PyTorch (the row says so where it is missing)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.torch_rows().call(torch_softmax, x)


def torch_compiled(x, out):
    """``torch.softmax`` under ``torch.compile``: TorchInductor's generated reduction kernel; its result is returned.
    Needs PyTorch."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.torch_rows().call_compiled(torch_softmax, x)


EXTRA_BASELINES = {"triton": triton_softmax, "torch eager": torch_eager, "torch.compile": torch_compiled}
ROW_CODE = {"triton": "zoo.bench.triton_rows.softmax"}  # the Triton kernel and its launch: the row's lines


def copy_ceiling(x, out):
    """A device-to-device copy of x into out: the bandwidth a one-read softmax aims at.

    Its result is x itself, and it is checked as such (ROW_REFERENCE).
    """
    from zoo.bench import ceilings  # host tooling: loaded when the row runs, not with the spec

    ceilings.device_copy(x, out)


CEILINGS = {"copy_ceiling": copy_ceiling}  # a copy of the same bytes
ROW_REFERENCE = {"copy_ceiling": lambda x: x}  # what the copy must hold: x
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """The same four ops in NumPy, float32 (one core): max, exp(x - max), sum, divide."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


CPU = {"cpu_numpy": (cpu_numpy, "one")}
