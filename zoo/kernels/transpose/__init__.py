"""Transpose a float32 matrix, out = a.T: coalescing, shared-memory tiles and bank conflicts.

A transpose does no arithmetic: it reads rows * cols floats and writes as many,
8 bytes per element, so its only yardstick is copy bandwidth for the same
bytes. What makes it hard is that a row of the input is a column of the output:
a warp that reads 32 neighbours of one row must write them 4 * rows bytes apart,
one memory transaction each. The steps move the reordering into shared memory
so that both the reads and the writes are whole rows, then remove what the tile
costs: bank conflicts, barriers per element, index arithmetic, narrow accesses.

Sizes are n (square) or rows x cols; any shape is accepted. The baseline is
CuPy's transpose copy (the kernel behind ``cupy.ascontiguousarray(a.T)``), and
the ``copy_ceiling`` row times a device-to-device copy of the same bytes: what a
transpose would reach if reordering were free.

Earlier timings of the fast steps on the H200 moved by up to 10 points of
copy bandwidth from one allocation of a and out to the next (72-82% for one
kernel at 16384^2, over eight allocations in one process), while the copy of
the same buffers stayed within 4,081-4,223 GB/s. They were taken before the
harness held the GPU behind each sample's first launch (docs/results.md,
"How a figure is timed"): at 16384^2 a sample is one launch, so each also counted
the host's preparation of that launch, tens of microseconds that vary from
call to call, against a kernel of about 530 us; the copy, a driver call, has
little host work to count. With the hold, v05 and v06 read 95% of copy at
16384^2 (the tables below). Whether placement in DRAM still moves the figures
by a point or two has not been measured since: compare steps within one run.
"""

import numpy as np

ORDER = 110
INPUTS = ("a",)
DTYPE = np.float32
NDIM = 2
TOLERANCE = 0.0  # pure data movement: every element must match exactly
# Simulator sizes: 1 x 1, a single row and a single column, tiles cut on both edges,
# and a 4-aligned shape with partial tiles (the float4 path of the last step).
TEST_SIZES = ((1, 1), (1, 70), (70, 1), (33, 65), (36, 68))
# GPU sizes add the issue's shapes, both goals' shapes, 1 x (2^28 + 7), and a column so tall
# ((2^22 + 7) rows: 131073 tile rows of 32) that every step's blocks stride down past grid y's 65535.
GPU_TEST_SIZES = (
    (1, 1),
    (1, 1000),
    (1000, 1),
    (33, 65),
    (1000, 777),
    (1024, 1024),
    (4099, 4100),
    (10000, 7777),
    (16384, 16384),
    (1, (1 << 28) + 7),
    ((1 << 22) + 7, 3),
)
BENCH_SIZES = ((16384, 16384), (10000, 7777))
HEADLINE_SIZE = (16384, 16384)
MAPPING = {"v01": (24, 40)}  # the picture: 32 x 8 blocks, a warp reads a row of a and writes a column of out
BASELINE = "cupy.copyto(out, a.T)"
SIZE_DIMS = (1, 2)  # n (square) or rows x cols


def shape(size):
    """(rows, cols) of a size: n means n x n."""
    if isinstance(size, (tuple, list)):
        rows, cols = size
        return int(rows), int(cols)
    return int(size), int(size)


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape(size), dtype=np.float32),)


def reference(a):
    return np.ascontiguousarray(a.T, dtype=np.float64)


def output_for(a):
    return (a.shape[1], a.shape[0]), np.float32


def flops(size):
    return 0


def bytes_moved(size):
    rows, cols = shape(size)
    return 2 * 4 * rows * cols  # read a once, write out once


def baseline(a, out):
    import cupy

    cupy.copyto(out, a.T)  # the same strided copy kernel as cupy.ascontiguousarray(a.T), into out


def copy_ceiling(a, out):
    """A device-to-device copy of a's bytes into out: the bandwidth a transpose aims at.

    Its result is a's bytes in a's order, not the transpose, and it is checked as
    such (ROW_REFERENCE).
    """
    from zoo.bench import ceilings  # host tooling: loaded when the row runs, not with the spec

    ceilings.device_copy(a, out)


CEILINGS = {"copy_ceiling": copy_ceiling}  # a copy, not a transpose
ROW_REFERENCE = {"copy_ceiling": lambda a: a.reshape(a.shape[1], a.shape[0])}  # a's bytes in out's shape
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(a):
    """numpy.ascontiguousarray(a.T): NumPy's strided copy (one core)."""
    return np.ascontiguousarray(a.T)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
