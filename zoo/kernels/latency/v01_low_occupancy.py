"""One element per thread in blocks that reserve 48 KB of shared memory: 4 blocks per SM.

Changes:
    The first kernel: thread ``i = blockIdx.x * blockDim.x + threadIdx.x``
    writes out[i] = 2 x[i] + 1; ceil(n / 128) blocks of 128 threads cover the
    vector. Each launch reserves 48 KB of dynamic shared memory per block (the
    4th launch argument), which the kernel never touches: it stands in for a
    kernel whose tiles need that much. An SM has 228 KB of shared memory and
    keeps 1 KB per block for the system, so floor(228 / 49) = 4 blocks fit:
    512 resident threads of the 2048 an SM can hold (25% occupancy).

Why it is faster:
    It is the slow start. Each resident thread has one 4-byte load in flight,
    so an SM has 512 x 4 B = 2 KB of reads outstanding; Little's law gives
    2 KB x 132 SMs / ~700 ns ~ 0.4 TB/s of reads (0.8 TB/s read + write),
    a fifth of what the DRAM can deliver. Nothing else limits it: the SM
    waits on memory with 3/4 of its thread slots empty.
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit

THREADS_PER_BLOCK = 128
RESERVED_SHARED = 48 * 1024  # bytes per block: the most a launch may ask without an opt-in attribute


@jit
def axpb_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:  # the last block sticks out past n
        out[i] = float32(2) * x[i] + float32(1)


def launch(x, out):
    blocks = (x.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    axpb_kernel[blocks, THREADS_PER_BLOCK, 0, RESERVED_SHARED](x, out)  # stream 0, 48 KB shared each
