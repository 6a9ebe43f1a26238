"""Four kernels, as a framework runs the ops: row max, exp(x - max) into a temporary, row sum, divide.

Changes:
    The first step: softmax as four launches, each one op. ``row_max`` gives a
    block to each row, every thread takes a strided share of the row, and the
    block folds the partial maxima in a shared-memory tree (halving the active
    threads each round, a barrier between rounds). ``exp_shifted`` maps every
    element to exp(x - max of its row) into a temporary t, grid-stride, one
    element at a time (the row is i // cols). ``row_sum`` is ``row_max`` with
    + for max, over t. ``divide`` writes t / sum of its row. The temporary
    (rows x cols) and the two per-row vectors are allocated on the first call
    of a shape and reused after it.
    Moves 24 bytes per element: x read twice, t written once and read twice,
    out written once; the per-row vectors are noise.

Why it is faster:
    It is the starting point, the shape of ``torch.softmax`` decomposed into
    eager ops and of the CuPy baseline (which also materializes x - max as a
    second temporary, 32 bytes per element). Every op is simple and correct,
    and safe: exp never sees a positive argument.
"""

import math

import numpy as np

from zoo.device import cuda, float32, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.memory import flat_view
from zoo.kernels.softmax import (
    BLOCK,  # threads per block, a power of two (the tree halves it)
    check_index_range,
)
from zoo.runtime.buffers import scratch

validate = check_index_range  # the step's size limit: its indices are uint32

HALVINGS = BLOCK.bit_length() - 1  # tree rounds: log2(BLOCK)
BLOCKS_PER_SM = 8  # the elementwise kernels' grid: enough resident threads, then grid-stride
NEG_INF = np.float32(-np.inf)  # max's identity: a thread past the end of the row contributes it


@jit
def row_max(x, cols, m):
    part = cuda.shared.array(BLOCK, float32)
    t = uint32(cuda.threadIdx.x)
    base = uint32(cuda.blockIdx.x) * cols  # one block per row
    v = NEG_INF
    c = t
    while c < cols:  # consecutive threads read consecutive columns: coalesced
        v = max(v, x[base + c])
        c += uint32(BLOCK)
    part[t] = v
    cuda.syncthreads()  # every thread's partial max is in shared memory
    half = uint32(BLOCK // 2)
    for _ in range(HALVINGS):  # fold the upper half onto the lower one
        if t < half:
            part[t] = max(part[t], part[t + half])
        cuda.syncthreads()  # this round's writes land before the next round reads them
        half >>= uint32(1)
    if t == 0:
        m[cuda.blockIdx.x] = part[0]


@jit
def exp_shifted(x, m, cols, t_out):
    n = uint32(x.size)
    i = uint32(cuda.grid(1))
    step = uint32(cuda.gridDim.x) * uint32(BLOCK)
    while i < n:
        t_out[i] = math.exp(x[i] - m[i // cols])  # i // cols: the element's row
        i += step


@jit
def row_sum(t_in, cols, s):
    part = cuda.shared.array(BLOCK, float32)
    t = uint32(cuda.threadIdx.x)
    base = uint32(cuda.blockIdx.x) * cols
    v = float32(0)
    c = t
    while c < cols:
        v += t_in[base + c]
        c += uint32(BLOCK)
    part[t] = v
    cuda.syncthreads()  # every thread's partial sum is in shared memory
    half = uint32(BLOCK // 2)
    for _ in range(HALVINGS):
        if t < half:
            part[t] += part[t + half]
        cuda.syncthreads()  # this round's writes land before the next round reads them
        half >>= uint32(1)
    if t == 0:
        s[cuda.blockIdx.x] = part[0]


@jit
def divide(t_in, s, cols, out):
    n = uint32(t_in.size)
    i = uint32(cuda.grid(1))
    step = uint32(cuda.gridDim.x) * uint32(BLOCK)
    while i < n:
        out[i] = t_in[i] / s[i // cols]
        i += step


def launch(x, out):
    rows, cols = x.shape
    n = rows * cols
    flat_x, flat_out = flat_view(x), flat_view(out)
    t = scratch("softmax_exp", n, np.float32)  # cached: the second call of a shape allocates nothing
    m = scratch("softmax_row_max", rows, np.float32)
    s = scratch("softmax_row_sum", rows, np.float32)
    grid = max(1, min((n + BLOCK - 1) // BLOCK, BLOCKS_PER_SM * sm_count()))
    row_max[rows, BLOCK](flat_x, np.uint32(cols), m)
    exp_shifted[grid, BLOCK](flat_x, m, np.uint32(cols), t)
    row_sum[rows, BLOCK](t, np.uint32(cols), s)
    divide[grid, BLOCK](t, s, np.uint32(cols), flat_out)
