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
MAPPING = {"v01": 300}  # the picture of who adds what: two blocks of 256 threads, the second mostly idle
BASELINE = "cupy.add"


def add_element(a, b, c, i):
    """The work of one element: v01 runs it on one GPU thread per element, ``cpu_numba`` on the CPU's threads."""
    c[i] = a[i] + b[i]


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    n = int(size)
    return (rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32))


ELEMENTWISE_REFERENCE = True  # element i of the result needs element i of each input only


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


def triton_add(a, b, out):
    """The same add as a Triton kernel (``zoo.bench.triton_rows``): a program of 1024 elements, Triton's own tiling
    where v01 names a thread per element. Needs Triton and PyTorch (the row says so where they are missing)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.triton_rows().vector_add(a, b, out)


def cuda_c(a, b, out):
    """v01's kernel in CUDA C, compiled by NVRTC through CuPy's RawModule (``zoo.bench.cuda_c_rows``): the seeds'
    entry path. Needs CuPy."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.cuda_c_rows().vector_add(a, b, out)


EXTRA_BASELINES = {"triton": triton_add, "cuda_c": cuda_c}
ROW_CODE = {  # the kernel and its launch: the row's lines
    "triton": "zoo.bench.triton_rows.vector_add",
    "cuda_c": "zoo.bench.cuda_c_rows.vector_add",
}


def copy_ceiling(a, b, out):
    """A device copy of 6 n bytes (a, then the first half of b) into a scratch buffer: it reads and writes the 12 n
    bytes a call moves, with no arithmetic: the ceiling of a memory-bound call. Checked against the bytes it copied
    (ROW_REFERENCE)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((a, b), a.nbytes + b.nbytes // 2)


CEILINGS = {"copy_ceiling": copy_ceiling}
ROW_REFERENCE = {"copy_ceiling": lambda a, b: np.concatenate([a.view(np.uint8), b.view(np.uint8)[: b.nbytes // 2]])}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU: NumPy, and the same Python as v01 compiled for the CPU -------------------------------
def cpu_numpy(a, b):
    """numpy.add (one core)."""
    return np.add(a, b)


_CPU_LOOP = []


def cpu_numba(a, b):
    """v01's element function compiled by numba for the CPU, over every element in a prange loop."""
    if not _CPU_LOOP:
        from numba import njit, prange

        element = njit(add_element)  # the very function v01's kernel calls, compiled for the host

        @njit(parallel=True)
        def every_element(a, b, c):
            for i in prange(c.size):  # numba splits i over its threads: the GPU's grid, on a few cores
                element(a, b, c, i)

        _CPU_LOOP.append(every_element)
    c = np.empty_like(a)
    _CPU_LOOP[0](a, b, c)
    return c


CPU = {"cpu_numpy": (cpu_numpy, "one"), "cpu_numba": (cpu_numba, "numba")}
