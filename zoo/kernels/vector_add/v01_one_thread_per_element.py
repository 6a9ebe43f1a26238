"""One thread per element, guarded by a bounds check.

Changes:
    The first kernel: thread ``i = blockIdx.x * blockDim.x + threadIdx.x`` adds
    element i; a grid of ceil(n / 256) blocks of 256 threads covers the vector
    and ``if i < n`` stops the threads of the last block that fall past its end.
    A thread's work is the spec's ``add_element``, the same Python that the
    family's ``cpu_numba`` row compiles for the CPU.

Why it is faster:
    It is the starting point. Consecutive threads of a warp touch consecutive
    4-byte elements, so each warp's loads and stores coalesce into full 128-byte
    transactions: the kernel is limited by memory bandwidth from the start.
"""

from zoo.device import cuda
from zoo.device.jit import jit
from zoo.kernels.vector_add import add_element

THREADS_PER_BLOCK = 256  # a multiple of the 32-thread warp; any of 128..1024 does as well here


add_one = jit(device=True)(add_element)  # the spec's c[i] = a[i] + b[i], compiled for the GPU (the CPU row runs it too)


@jit
def add_kernel(a, b, c):
    i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x
    if i < c.size:  # the last block sticks out past n
        add_one(a, b, c, i)


def launch(a, b, c):
    blocks = (c.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    add_kernel[blocks, THREADS_PER_BLOCK](a, b, c)
