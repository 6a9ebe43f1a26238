"""Two kernels, as a framework runs the ops: the residual add, then a block per row for the norm.

Changes:
    The first step. ``add_residual`` adds x into the residual stream, one
    thread an element. ``rms_norm`` gives each row a block: pass 1 sums the
    squares of the row's elements (each thread a strided share, then a tree
    of halvings in shared memory), pass 2 reads the row again and writes
    h * rsqrt(mean + eps) * w as float16.
    Moves 24 bytes an element: x read, h read and written by the add, h read
    twice by the norm, y written.

Why it is faster:
    It is the starting point. Each kernel streams at close to copy
    bandwidth, but h goes out to DRAM in one kernel only to come back in the
    next, and the norm reads it twice: 24 bytes an element where 14 must
    move. At one row (a decode step) it is worse: two launches for 4096
    elements, each far too small to fill the GPU.
"""

import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.jit import jit
from zoo.kernels.rmsnorm import (
    BLOCK,  # threads per row, a power of two (the tree halves it)
    EPS,
    check_index_range,
)

validate = check_index_range  # the step's size limit: its indices are uint32

HALVINGS = BLOCK.bit_length() - 1  # tree rounds: log2(BLOCK)
ADD_THREADS = 256


@jit
def add_residual(x, residual):
    i = cuda.grid(1)
    if i < x.size:  # the last block sticks out past the end
        residual[i] += x[i]


@jit
def rms_norm(h, weight, out, cols):
    part = cuda.shared.array(BLOCK, float32)
    t = uint32(cuda.threadIdx.x)
    base = uint32(cuda.blockIdx.x) * cols  # one block per row
    # Pass 1: the sum of squares of the row.
    v = float32(0)
    c = t
    while c < cols:  # consecutive threads read consecutive columns: coalesced
        v += h[base + c] * h[base + c]
        c += uint32(BLOCK)
    part[t] = v
    cuda.syncthreads()  # every thread's partial sum is in shared memory
    half = uint32(BLOCK // 2)
    for _ in range(HALVINGS):  # fold the upper half onto the lower one
        if t < half:
            part[t] += part[t + half]
        cuda.syncthreads()  # this round's writes land before the next round reads them
        half >>= uint32(1)
    scale = float32(1) / math.sqrt(part[0] / float32(cols) + float32(EPS))
    # Pass 2: the output, h read again.
    c = t
    while c < cols:
        out[base + c] = float16(h[base + c] * scale * float32(weight[c]))
        c += uint32(BLOCK)


def launch(x, residual, weight, out):
    rows, cols = x.shape
    flat_x, flat_h = x.reshape(x.size), residual.reshape(residual.size)
    add_residual[(x.size + ADD_THREADS - 1) // ADD_THREADS, ADD_THREADS](flat_x, flat_h)
    rms_norm[rows, BLOCK](flat_h, weight, out.reshape(out.size), np.uint32(cols))
