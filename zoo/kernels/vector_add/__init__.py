"""c = a + b on float32 vectors: the first kernel, one thread per element.

Vector addition does one FLOP per 12 bytes moved, so no kernel can be limited by
arithmetic: the only question is how close it comes to copy bandwidth. The
baseline is CuPy's own elementwise add.
"""

import numpy as np

ORDER = 10
INPUTS = ("a", "b")
DTYPE = np.float32
NDIM = 1
TOLERANCE = 1e-6
TEST_SIZES = (1, 31, 33, 1000, 2053)  # 2053 > one simulated SM of threads: the grid-stride loop turns
GPU_TEST_SIZES = (1, 1023, 1_000_003, 1 << 24)
BENCH_SIZES = (1 << 20, 1 << 24, 1 << 28)
BASELINE = "cupy.add"


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    n = int(size)
    return (rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32))


def reference(a, b):
    return a.astype(np.float64) + b


def output_for(a, b):
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    return a.shape, np.float32


def flops(size):
    return int(size)


def bytes_moved(size):
    return 3 * 4 * int(size)  # read a and b, write c


def baseline(a, b, out):
    import cupy

    cupy.add(a, b, out=out)
