"""The seed's kernel: one thread per element, k read at run time, one dependent chain.

Changes:
    First step. Each thread loads a[i] once, then walks the terms: the running
    power p is multiplied by x and added into the sum s, k times. k is an
    ordinary kernel argument, so the compiler knows nothing about the trip count.

Why it is faster:
    It is the starting point. At k = 1 it is a copy and runs near memory
    bandwidth. At large k it is far from the FP32 peak: every term costs a
    multiply, an add and the loop's own bookkeeping (a 64-bit counter, a
    compare, a branch), each taking an issue slot an FMA could have used, and
    the next multiply waits for the previous one (one chain per thread).
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit
from zoo.kernels.roofline import K_DEFAULT

THREADS_PER_BLOCK = 256


@jit
def powers_kernel(a, b, k):
    i = cuda.grid(1)
    if i < b.size:
        x = a[i]
        p = x
        s = float32(0.0)  # typed: a bare 0.0 would make the sum float64
        for _ in range(k):  # run-time trip count: a real loop with a counter per term
            s += p
            p *= x
        b[i] = s


def launch(a, out, k=K_DEFAULT):
    blocks = (out.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    powers_kernel[blocks, THREADS_PER_BLOCK](a, out, k)
