"""D_i = dO_i . O_i of every query row, the number the softmax's gradient subtracts, and dQ cleared: the first
kernel of every step's launch (the steps differ in the kernel after it).

One thread a query row of all the q heads: it reads the row of dO and of O once (d float16 each), sums their
products in float32, and zeroes that row of dQ in the output, since every block of keys then adds its share of dQ
into it. A few microseconds at 32 heads of 4096 positions: a read of O and dO, a write of dQ.
"""

import numpy as np

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.runtime.buffers import scratch

ROWS = 128  # threads a block, a query row each


@jit
def row_dot(O, dO, D, out, n, d):
    row = uint32(cuda.blockIdx.x) * uint32(ROWS) + uint32(cuda.threadIdx.x)  # a query row of all the q heads
    if row >= uint32(O.shape[0]) * n:
        return
    head, query = row // n, row % n
    acc = float32(0.0)
    for c in range(d):
        acc += float32(dO[head, query, c]) * float32(O[head, query, c])
        out[head, query, c] = float32(0.0)  # dQ's row starts at zero: every block of keys adds into it
    D[row] = acc


def row_dots(O, dO, out):
    """D (float32, a number per query row of every q head, kept between calls) after launching ``row_dot``, which
    also clears dQ, the first heads of ``out``."""
    bh, n, d = O.shape
    D = scratch("attention_backward_rowdot", bh * n, np.float32)
    row_dot[(bh * n + ROWS - 1) // ROWS, ROWS](O, dO, D, out, np.uint32(n), np.uint32(d))
    return D
