"""A private histogram per block in shared memory, merged into global memory once.

Changes:
    From v01: each block zeroes 256 int32 counters in shared memory, counts its
    part of the grid-stride walk there with shared-memory atomics, and after a
    barrier adds each nonzero counter to ``out`` with one global atomic.

Why it is faster:
    A shared-memory atomic is resolved in the SM, a few tens of cycles away,
    instead of a round trip to L2. Contention is privatized: threads now
    compete only with their own block (256 threads) rather than with the whole
    GPU, and the 2^28 global updates become at most 256 per block (about
    270,000 in all). On skewed data the hot counter still serializes, but one
    copy per block spreads that over the 132 SMs working in parallel.
"""

from zoo.device import cuda, int32
from zoo.device.jit import jit
from zoo.kernels.histogram import BLOCK, bins

BINS = 256
BLOCKS_PER_SM = 8


@jit
def histogram_shared(data, out):
    hist = cuda.shared.array(BINS, int32)
    t = cuda.threadIdx.x
    for b in range(t, BINS, BLOCK):
        hist[b] = 0
    cuda.syncthreads()  # all counters zero before any thread counts
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(hist, data[i], 1)  # serialized only against this block
    cuda.syncthreads()  # the block's counts are complete
    for b in range(t, BINS, BLOCK):
        count = hist[b]
        if count != 0:  # skip empty bins: fewer global atomics
            cuda.atomic.add(out, b, count)


def launch(data, out):
    bins.zero(out)
    histogram_shared[bins.grid_for(data.size, BLOCK, BLOCKS_PER_SM), BLOCK](data, out)
