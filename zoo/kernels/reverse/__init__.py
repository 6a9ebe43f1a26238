"""Reverse a float32 array through shared memory: the classic syncthreads lesson.

Each thread writes one element into a block's shared buffer and then reads an
element that a *different* thread wrote: without ``cuda.syncthreads()`` between
the two, the read may happen before the write. The steps go from NVIDIA's
64-element static example to any length over many blocks, and end with the
missing-barrier demonstration, which ``compute-sanitizer --tool racecheck``
flags on a GPU. The baseline is a CuPy copy of the reversed view.
"""

import numpy as np

ORDER = 20
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 1
TOLERANCE = 0.0  # pure data movement: every element must match exactly
TEST_SIZES = (1, 31, 33, 64, 1000, 1023)
GPU_TEST_SIZES = (1, 33, 64, 1000, 1024, 1_000_003, 1 << 24)
BENCH_SIZES = (64, 1024, 1 << 24, 1 << 28)  # the small sizes show the one-block steps
BASELINE = "cupy.copyto(out, x[::-1])"


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(size), dtype=np.float32),)


def reference(x):
    return x[::-1].astype(np.float64)


def output_for(x):
    return x.shape, np.float32


def flops(size):
    return 0


def bytes_moved(size):
    return 2 * 4 * int(size)  # read x once, write out once


def baseline(x, out):
    import cupy

    cupy.copyto(out, x[::-1])


def copy_ceiling(x, out):
    """x's bytes copied in their own order (the driver's device copy into a scratch buffer): the 8 n bytes a reversal
    moves with nothing reordered, the bar every step is held to. Checked against x's bytes (ROW_REFERENCE)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((x,), x.nbytes)


CEILINGS = {"copy_ceiling": copy_ceiling}  # a copy, not a reversal
ROW_REFERENCE = {"copy_ceiling": lambda x: x.view(np.uint8)}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """A reversed copy in NumPy, x[::-1].copy() (one core)."""
    return x[::-1].copy()


CPU = {"cpu_numpy": (cpu_numpy, "one")}
