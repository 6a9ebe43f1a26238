"""v05's kernel launched for less host time: the 2-D arrays go in as they are, the shape is read inside.

Changes:
    The kernel takes x and out as the caller's 2-D arrays and reads rows and
    cols from x.shape inside the kernel. v05 passed flat views made with
    ``reshape`` on every call plus two uint32 scalars. The float4 loads and
    stores take the 2-D array with a flat element index (``zoo.vector``
    accepts any C-contiguous array), and the scalar path indexes x[row, c].
    The kernel body (registers, shuffles, the two barriers) is v05's.

Why it is faster:
    On the H200 v05's kernel alone takes 63 us at 4096 x 8192, which is the
    copy ceiling (ncu, gpu__time_duration), but a Python call of v05's
    launch took about 90 us of host time. Each ``reshape`` of a device array
    builds a new array object, and numba has to type and marshal each fresh
    object and each scalar argument again. The GPU then waited for the host:
    back-to-back calls ran at the host's pace (about 100 us), not the kernel's.
    Launching the caller's own two arrays costs about 27 us, less than the
    kernel, so calls queue up behind each other and the GPU never idles. The
    lesson applies to every kernel shorter than about 100 us: count the host
    work per launch, not only the bytes. ``python -m zoo launch`` measures
    that cost.

Measured:
    NVIDIA H200, size 4096x8192: 3,641 GB/s (73.7 us a call), 787.7% of CuPy ops: max,
    exp(x - max), sum, divide. Other sizes, % of CuPy ops: max, exp(x - max), sum,
    divide: 262144x31: 486.6%, 262144x31@large: 495.4%, 32768x1024: 923.5%,
    32768x1024@large: 924.5%, 4096x8192@large: 775.4%. From results/nvidia-h200.json.
"""
import functools
import math

import numpy as np
from numba import cuda, float32, uint32

from zoo.jit import jit
from zoo.kernels.softmax import aligned
from zoo.kernels.softmax import check_index_range as validate  # noqa: F401 (the step's size limit)
from zoo.kernels.softmax import v04_online as online
from zoo.kernels.softmax.v05_row_in_registers import BLOCK, MAX_ELEMENTS, plan
from zoo.vector import load_float4, store_float4

WARPS = BLOCK // 32
FULL_MASK = 0xFFFFFFFF
NEG_INF = np.float32(-np.inf)  # padding past the row: max ignores it, exp turns it into 0


@functools.lru_cache(maxsize=None)
def build(group, loads, wide):
    """The kernel for one row layout, as v05's, on 2-D arrays."""
    width = 4 if wide else 1
    elements = loads * width  # floats per thread
    rows_per_block = BLOCK // group

    @jit
    def softmax_lean(x, out):
        rows = uint32(x.shape[0])  # read here, not passed: fewer arguments for the host to marshal
        cols = uint32(x.shape[1])
        vals = cuda.local.array(MAX_ELEMENTS, float32)  # constant indices only: registers
        max_part = cuda.shared.array(WARPS, float32)
        sum_part = cuda.shared.array(WARPS, float32)
        t = uint32(cuda.threadIdx.x)
        lane = t % uint32(32)
        if group == 32:  # a warp per row
            row = uint32(cuda.blockIdx.x) * uint32(rows_per_block) + t // uint32(32)
            g = lane
        else:  # a block per row
            row = uint32(cuda.blockIdx.x)
            g = t
        if row >= rows:
            return  # only a warp row past the end: the whole warp leaves, no shuffle misses a lane
        base = row * cols  # the row's flat offset: float4 accesses index the C-contiguous array flat
        for j in range(loads):
            c = (uint32(j * group) + g) * uint32(width)
            if wide:
                if c < cols:
                    vals[4 * j], vals[4 * j + 1], vals[4 * j + 2], vals[4 * j + 3] = load_float4(x, base + c)
                else:
                    for k in range(4):
                        vals[4 * j + k] = NEG_INF
            else:
                vals[j] = x[row, c] if c < cols else NEG_INF
        m = NEG_INF
        for k in range(elements):
            m = max(m, vals[k])
        for k in range(5):
            m = max(m, cuda.shfl_xor_sync(FULL_MASK, m, 16 >> k))
        if group != 32:
            if lane == 0:
                max_part[t // uint32(32)] = m
            cuda.syncthreads()  # every warp's max is in shared memory
            m = max_part[0]
            for w in range(1, WARPS):
                m = max(m, max_part[w])
        d = float32(0)
        for k in range(elements):
            e = math.exp(vals[k] - m)
            vals[k] = e
            d += e
        for k in range(5):
            d += cuda.shfl_xor_sync(FULL_MASK, d, 16 >> k)
        if group != 32:
            if lane == 0:
                sum_part[t // uint32(32)] = d
            cuda.syncthreads()  # every warp's sum is in shared memory
            d = sum_part[0]
            for w in range(1, WARPS):
                d += sum_part[w]
        scale = float32(1) / d
        for j in range(loads):
            c = (uint32(j * group) + g) * uint32(width)
            if c < cols:
                if wide:
                    store_float4(out, base + c, vals[4 * j] * scale, vals[4 * j + 1] * scale,
                                 vals[4 * j + 2] * scale, vals[4 * j + 3] * scale)
                else:
                    out[row, c] = vals[j] * scale

    return softmax_lean


def launch(x, out):
    rows, cols = x.shape
    wide = cols % 4 == 0 and aligned(x) and aligned(out)
    chosen = plan(cols, wide)
    if chosen is None:
        online.launch(x, out)  # longer than registers hold: v04's two reads of x
        return
    group, loads = chosen
    rows_per_block = BLOCK // group
    build(group, loads, wide)[(rows + rows_per_block - 1) // rows_per_block, BLOCK](x, out)  # two arguments
