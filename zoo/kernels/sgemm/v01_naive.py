"""Naive: one thread per element of C, consecutive threads walk down a column.

Changes:
    The first kernel, as in the textbook: thread (x, y) of the grid computes
    C[row, col] with ``row`` from the x index and ``col`` from the y index, as a
    K-long dot product of row ``row`` of A and column ``col`` of B read straight
    from global memory: the spec's ``sgemm_element``, the same Python that the
    family's ``cpu_numba`` row compiles for the CPU.

Why it is faster:
    It is the starting point, and it is slow on purpose. Threads with
    consecutive x (one warp) have consecutive rows: their loads of A[row, k]
    are K floats apart and their stores to C are N floats apart, so each warp
    access touches 32 different memory segments. Only the B[k, col] load is
    shared (one address for the whole warp).
"""

import numpy as np

from zoo.device import cuda
from zoo.device.jit import jit
from zoo.kernels.sgemm import sgemm_element

BLOCK = (32, 32)  # 1024 threads: x walks rows of C, y walks columns


# the spec's dot product of one element, compiled for the GPU (the CPU row cpu_numba runs the same Python)
sgemm_one = jit(device=True)(sgemm_element)


@jit
def sgemm_kernel(A, B, C, out, alpha, beta):
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # consecutive threads: consecutive rows
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < out.shape[0] and col < out.shape[1]:
        sgemm_one(A, B, C, out, alpha, beta, row, col)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    m, n = out.shape
    grid = ((m + BLOCK[0] - 1) // BLOCK[0], (n + BLOCK[1] - 1) // BLOCK[1])
    sgemm_kernel[grid, BLOCK](A, B, out if C is None else C, out, np.float32(alpha), np.float32(beta))
