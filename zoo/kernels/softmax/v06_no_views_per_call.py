"""No views per call: v05's kernels take the caller's 2-D arrays as they are and read the shape inside.

Changes:
    From v05: the register kernel takes x and out as the caller's 2-D arrays
    and reads rows and cols from x.shape inside the kernel, where v05 passed
    flat views made with ``reshape`` on every call plus two uint32 scalars.
    The float4 loads and stores take the 2-D array with a flat element index
    (``zoo.device.memory`` accepts any C-contiguous array), and the scalar
    path indexes x[row, c]. The row's computation (registers, shuffles, the
    two barriers) and the long-row fallback (v04's kernel) are v05's.

Why it is faster:
    Host time. v05's kernel alone runs at the copy ceiling, but a Python call
    of v05's launch took longer than the kernel: each ``reshape`` of a device
    array builds a new array object, and numba types and marshals each fresh
    object and each scalar argument again. The GPU then waited for the host.
    Launching the caller's own two arrays costs less than the kernel, so calls
    queue up behind each other and the GPU never idles (figures at
    ``launch``). The lesson applies to every kernel shorter than about 100 us:
    count the host work per launch, not only the bytes. ``python -m zoo
    launch`` measures that cost.
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, store_float4
from zoo.device.warp import FULL_MASK
from zoo.kernels.softmax import (
    BLOCK,  # threads per block, a multiple of 32
    check_index_range,
)

validate = check_index_range  # the step's size limit: its indices are uint32

WARPS = BLOCK // 32
LOWEST = np.float32(np.finfo(np.float32).min)  # -FLT_MAX: the max of an empty share, finite so that merges give no NaN
# Floats a thread keeps in registers: 8 float4, so up to eight 16-byte loads in flight per thread
# (128 bytes; 128 KB per SM at four blocks), enough to cover DRAM latency.
MAX_ELEMENTS = 32
NEG_INF = np.float32(-np.inf)  # padding past the row: max ignores it, exp turns it into 0


@jit(device=True)
def merge(m1, d1, m2, d2):
    """Two (running max, running sum) states as one: each sum rescaled to the larger max.

    m = max(m1, m2),  d = d1 exp(m1 - m) + d2 exp(m2 - m): associative and commutative, so any tree
    of merges (shuffles, shared memory) gives the row's (max, sum of exp(x - max)).
    """
    m = max(m1, m2)
    return m, d1 * math.exp(m1 - m) + d2 * math.exp(m2 - m)


# v04's kernel, unchanged: it runs the rows too long for registers.
@jit
def softmax_online(x, out, cols):
    warp_m = cuda.shared.array(WARPS, float32)
    warp_d = cuda.shared.array(WARPS, float32)
    t = uint32(cuda.threadIdx.x)
    lane = t % uint32(32)  # the thread's lane in its warp; its warp is t // 32
    base = uint32(cuda.blockIdx.x) * cols  # one block per row
    # One pass: running max and running sum of exp(x - max). A thread that reads nothing keeps
    # (-FLT_MAX, 0), which merges away without a NaN (see the family docstring).
    m = LOWEST
    d = float32(0)
    c = t
    while c < cols:
        v = x[base + c]
        # The running max grows (a rescale, one extra exp) H_k ~ ln k + 0.6 times among k values in
        # random order: about 4 times for the 32 elements a thread sees at 8192 columns.
        if v > m:
            d = d * math.exp(m - v) + float32(1)  # the old sum, rescaled to the new max, plus exp(0)
            m = v
        else:
            d += math.exp(v - m)
        c += uint32(BLOCK)
    for k in range(5):  # butterfly, offsets 16, 8, 4, 2, 1: both lanes of a pair swap m and d; all end merged
        m2 = cuda.shfl_xor_sync(FULL_MASK, m, 16 >> k)
        d2 = cuda.shfl_xor_sync(FULL_MASK, d, 16 >> k)
        m, d = merge(m, d, m2, d2)
    if lane == 0:
        warp_m[t // uint32(32)] = m
        warp_d[t // uint32(32)] = d
    cuda.syncthreads()  # every warp's (m, d) is in shared memory
    m = warp_m[0]
    d = warp_d[0]
    for w in range(1, WARPS):  # every thread merges the few warp states itself: no second barrier
        m, d = merge(m, d, warp_m[w], warp_d[w])
    scale = float32(1) / d  # d counts the max's own exp(0) = 1: at least 1
    # The output pass.
    c = t
    while c < cols:
        out[base + c] = math.exp(x[base + c] - m) * scale
        c += uint32(BLOCK)


def plan(cols, wide):
    """(threads per row, loads per thread) for a row of cols held in registers, or None if it does not fit."""
    width = 4 if wide else 1
    for group in (32, BLOCK):  # a warp for short rows, a block for long ones
        need = -(-cols // (group * width))  # loads per thread, rounded up
        if need * width <= MAX_ELEMENTS:
            return group, 1 << (need - 1).bit_length()  # a power of two: at most 6 kernels per width
    return None


@functools.cache
def build(group, loads, wide):
    """The kernel for one row layout, on the caller's 2-D x and out: the row its group of threads owns, read
    once into registers (closure constants: loops unroll, untaken branches compile away)."""
    width = 4 if wide else 1
    elements = loads * width  # floats per thread
    rows_per_block = BLOCK // group

    @jit
    def softmax_lean(x, out):
        # the shape is read here, not passed: fewer arguments for the host to marshal
        rows, cols = uint32(x.shape[0]), uint32(x.shape[1])
        vals = cuda.local.array(MAX_ELEMENTS, float32)  # constant indices only: registers
        max_part = cuda.shared.array(WARPS, float32)
        sum_part = cuda.shared.array(WARPS, float32)  # its own array: no barrier between the two reductions' reuse
        t = uint32(cuda.threadIdx.x)
        lane = t % uint32(32)  # the thread's lane in its warp; its warp is t // 32
        if group == 32:  # a warp per row: warp t // 32 of the block takes the block's row of that number
            row = uint32(cuda.blockIdx.x) * uint32(rows_per_block) + t // uint32(32)
            g = lane  # the thread's place among its row's threads
        else:  # a block per row
            row = uint32(cuda.blockIdx.x)
            g = t
        if row >= rows:
            return  # only a warp row past the end: the whole warp leaves, no shuffle misses a lane
        base = row * cols
        # Read the row once: every load goes out before any value is used.
        for j in range(loads):
            # Load j of thread g: float4 columns 4 (j G + g) .. 4 (j G + g) + 3 for a row of G = group
            # threads (a warp's load is 512 consecutive bytes), or the scalar column j G + g.
            c = (uint32(j * group) + g) * uint32(width)
            if wide:
                if c < cols:  # cols % 4 == 0: a float4 is wholly inside the row or wholly past it
                    vals[4 * j], vals[4 * j + 1], vals[4 * j + 2], vals[4 * j + 3] = load_float4(x, base + c)
                else:
                    for k in range(4):
                        vals[4 * j + k] = NEG_INF
            else:
                vals[j] = x[row, c] if c < cols else NEG_INF
        # The row maximum: this thread's, the warp's (butterfly: every lane gets it), the block's.
        m = NEG_INF
        for k in range(elements):
            m = max(m, vals[k])
        for k in range(5):  # butterfly, offsets 16, 8, 4, 2, 1
            m = max(m, cuda.shfl_xor_sync(FULL_MASK, m, 16 >> k))
        if group != 32:
            if lane == 0:
                max_part[t // uint32(32)] = m
            cuda.syncthreads()  # every warp's max is in shared memory
            m = max_part[0]
            for w in range(1, WARPS):  # every thread folds the few warp maxima itself
                m = max(m, max_part[w])
        # exp(x - max) in place, and its sum, reduced the same way.
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
        scale = float32(1) / d  # at least 1: the max's own exp(0)
        # Write the row once.
        for j in range(loads):
            c = (uint32(j * group) + g) * uint32(width)  # the columns load j read
            if c < cols:
                if wide:
                    store_float4(
                        out,
                        base + c,
                        vals[4 * j] * scale,
                        vals[4 * j + 1] * scale,
                        vals[4 * j + 2] * scale,
                        vals[4 * j + 3] * scale,
                    )
                else:
                    out[row, c] = vals[j] * scale

    return softmax_lean


def launch(x, out):
    rows, cols = x.shape
    wide = cols % 4 == 0 and aligned(x) and aligned(out)  # then every row starts 16-byte aligned
    chosen = plan(cols, wide)
    if chosen is None:  # longer than registers hold: v04's two reads of x
        softmax_online[rows, BLOCK](x.reshape(x.size), out.reshape(out.size), np.uint32(cols))
        return
    group, loads = chosen
    kernel = build(group, loads, wide)
    rows_per_block = BLOCK // group
    grid = (rows + rows_per_block - 1) // rows_per_block
    # Two arguments, the caller's own arrays. On the H200 at 4096 x 8192 a Python call of v05's launch took
    # more host time than its kernel (about 90 us against 63), so back-to-back calls ran at the host's pace; this
    # launch costs well under the kernel (docs/softmax-tuning-notes.md).
    kernel[grid, BLOCK](x, out)
