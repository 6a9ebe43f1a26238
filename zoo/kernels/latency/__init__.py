"""Latency and bytes in flight: out = 2 x + 1 on float32, from low occupancy to 128-bit loads in flight.

A load from DRAM takes several hundred nanoseconds to come back, and the memory
system delivers bandwidth only to requests that are already waiting. Little's
law ties the two: to sustain a bandwidth B through a latency L, B x L bytes must
be in flight at every moment. On an H200 that is about 4.3 TB/s x ~700 ns ~ 3
MB across the GPU, ~23 KB per SM (132 SMs), or ~11 KB of loads per SM for a
kernel that writes as many bytes as it reads. A kernel gets bytes in flight in
two ways: occupancy (more resident threads, each with a load outstanding) and
instruction-level parallelism (more independent loads per thread, issued before
the first is used). Occupancy is a means, not a goal: once the bytes in flight
cover bandwidth x latency, the DRAM is busy and more warps or more loads only
queue up; latency then grows with the queue and the bandwidth stays flat.

The steps compute the same elementwise out = 2 x + 1 and raise the bytes in
flight per SM: v01 holds a 48 KB shared array per block, so only 4 blocks of 128
threads fit on an SM (2 KB of loads in flight); v02 drops it (2048 threads, 8 KB);
v03 issues 4 independent loads per thread (32 KB); v04 makes them 128-bit (a
quarter of the instructions for the same bytes).

Three sweeps measure the pieces of the law, one experiment each:
``python -m zoo latency`` the DRAM, L2 and shared-memory latency by pointer
chasing (``sweeps/chase.py``); ``python -m zoo bytes-in-flight`` the achieved
bandwidth against bytes in flight per SM, with the Little's-law line over the
points (``sweeps/bytes_in_flight.py``); ``python -m zoo fmas-in-flight`` the same
for arithmetic, FMA chains in flight against the FP32 peak
(``sweeps/fmas_in_flight.py``).

Bytes moved: 8 n (read x, write out); FLOPs: 2 n (one FMA). The baseline is a
CuPy ElementwiseKernel computing the same expression in one pass.
"""

import functools

import numpy as np

ORDER = 80
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 1
TOLERANCE = 1e-6  # 2x + 1 in float32 is the float64 result rounded once
TEST_SIZES = (1, 31, 33, 1000, 4099)
GPU_TEST_SIZES = (1, 3, 31, 33, 1000, 4099, (1 << 20) + 3, 1 << 24, (1 << 28) + 7)
BENCH_SIZES = (1 << 20, 1 << 24, 1 << 28)
HEADLINE_SIZE = 1 << 28
BASELINE = "cupy.ElementwiseKernel('float32 x', 'float32 y', 'y = 2.0f * x + 1.0f')"

SCALE = 2.0
SHIFT = 1.0


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(size), dtype=np.float32),)


ELEMENTWISE_REFERENCE = True  # element i of the result needs element i of each input only


def reference(x):
    return SCALE * x.astype(np.float64) + SHIFT


def output_for(x):
    return x.shape, np.float32


def flops(size):
    return 2 * int(size)  # one multiply-add per element


def bytes_moved(size):
    return 2 * 4 * int(size)  # read x, write out


@functools.cache
def _axpb():
    import cupy

    return cupy.ElementwiseKernel("float32 x", "float32 y", "y = 2.0f * x + 1.0f", "zoo_latency_axpb")


def baseline(x, out):
    _axpb()(x, out)


def copy_ceiling(x, out):
    """A device copy of x's 4 n bytes into a scratch buffer: it reads and writes the 8 n bytes a call moves, with no
    arithmetic: the ceiling of a memory-bound call. Checked against the bytes it copied (ROW_REFERENCE)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((x,), x.nbytes)


CEILINGS = {"copy_ceiling": copy_ceiling}
ROW_REFERENCE = {"copy_ceiling": lambda x: x.view(np.uint8)}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """SCALE * x + SHIFT as NumPy float32 ufuncs (one core)."""
    return np.float32(SCALE) * x + np.float32(SHIFT)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
