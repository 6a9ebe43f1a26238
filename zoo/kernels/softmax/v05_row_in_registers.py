"""The row read once into registers, 128 bits at a time: x in, out out, nothing read twice.

Changes:
    From v04: when a row fits in 32 floats per thread, each thread loads its
    share of the row into a local array (constant indices after unrolling, so
    it lives in registers), all loads issued before the first is used. Both
    reductions then run on those registers: the max (five ``shfl_xor_sync``
    and, for a block, one barrier through shared memory), then exp(x - max)
    computed in place and summed the same way, then the scaled values stored.
    No online rescaling is needed: the max is known before any exp. A row of
    up to 1024 columns gets a warp (eight rows to a block of 256, as v03), up
    to 8192 a block of 256 (as v04); longer rows run v04 unchanged.
    When cols is a multiple of 4 and x and out start on a 16-byte boundary
    (so every row does), loads and stores are float4 (``zoo.device.memory``): load
    j of thread g covers columns 4 (j G + g) to 4 (j G + g) + 3 for a row of
    G threads, so a warp's load is 512 consecutive bytes; otherwise scalar,
    column j G + g. ``build(group, loads, wide)`` makes one kernel per choice,
    with loads per thread rounded up to a power of two so that few compile
    (at most six per layout); padding past the row holds -inf, whose exp is 0.
    Moves 8 bytes per element: x read once, out written once (the rows past
    8192 columns: v04's 12).

Why it is faster:
    Every byte crosses the memory bus once, the least any softmax can move, so
    the kernel is a copy with arithmetic on the side. Each thread has up to
    eight 16-byte loads in flight (128 bytes; 128 KB per SM at four blocks),
    enough to cover DRAM latency, and a warp instruction moves 512 bytes
    instead of 128. Nothing waits on the second and third read of v02-v04, and
    short rows no longer leave most of a 256-thread block idle.

Measured:
    NVIDIA H200, size 4096x8192: 2,360 GB/s (114 us a call), 495.3% of CuPy ops: max,
    exp(x - max), sum, divide, 64 registers, occupancy bound 50%. Other sizes, % of CuPy
    ops: max, exp(x - max), sum, divide: 262144x31: 266.2%, 262144x31@large: 186.3%,
    32768x1024: 651.3%, 32768x1024@large: 901.3%, 4096x8192@large: 560.9%. From
    results/nvidia-h200.json.
"""
import functools
import math

import numpy as np
from numba import cuda, float32, uint32

from zoo import SIMULATOR
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK
from zoo.kernels.softmax import check_index_range as validate  # noqa: F401 (the step's size limit)
from zoo.kernels.softmax import v04_online as online
from zoo.device.memory import aligned, load_float4, store_float4

BLOCK = 64 if SIMULATOR else 256  # threads per block, a multiple of 32
WARPS = BLOCK // 32
MAX_ELEMENTS = 32  # floats a thread keeps in registers: 8 float4
NEG_INF = np.float32(-np.inf)  # padding past the row: max ignores it, exp turns it into 0


def plan(cols, wide):
    """(threads per row, loads per thread) for a row of cols held in registers, or None if it does not fit."""
    width = 4 if wide else 1
    for group in (32, BLOCK):  # a warp for short rows, a block for long ones
        need = -(-cols // (group * width))  # loads per thread, rounded up
        if need * width <= MAX_ELEMENTS:
            return group, 1 << (need - 1).bit_length()  # a power of two: at most 6 kernels per width
    return None


@jit(device=True)
def read_flat(x, row, at, c):
    """Element c of the row: x is flat here, ``at`` is its index (row * cols + c)."""
    return x[at]


@jit(device=True)
def write_flat(out, row, at, c, value):
    out[at] = value


@functools.lru_cache(maxsize=None)
def row_softmax(group, loads, wide, read, write):
    """The device function softmax of one row layout, ``(x, out, rows, cols)``: the row its group of
    threads owns, read once into registers (closure constants: loops unroll, untaken branches compile
    away). Scalar elements go through ``read`` and ``write``, float4 ones by flat index."""
    width = 4 if wide else 1
    elements = loads * width  # floats per thread
    rows_per_block = BLOCK // group

    @jit(device=True)
    def softmax_row(x, out, rows, cols):
        vals = cuda.local.array(MAX_ELEMENTS, float32)  # constant indices only: registers
        max_part = cuda.shared.array(WARPS, float32)
        sum_part = cuda.shared.array(WARPS, float32)  # its own array: no barrier between the two reductions' reuse
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
        base = row * cols
        # Read the row once: every load goes out before any value is used.
        for j in range(loads):
            c = (uint32(j * group) + g) * uint32(width)  # a warp reads 32 * width consecutive floats
            if wide:
                if c < cols:  # cols % 4 == 0: a float4 is wholly inside the row or wholly past it
                    vals[4 * j], vals[4 * j + 1], vals[4 * j + 2], vals[4 * j + 3] = load_float4(x, base + c)
                else:
                    for k in range(4):
                        vals[4 * j + k] = NEG_INF
            else:
                vals[j] = read(x, row, base + c, c) if c < cols else NEG_INF
        # The row maximum: this thread's, the warp's (butterfly: every lane gets it), the block's.
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
            c = (uint32(j * group) + g) * uint32(width)
            if c < cols:
                if wide:
                    store_float4(out, base + c, vals[4 * j] * scale, vals[4 * j + 1] * scale,
                                 vals[4 * j + 2] * scale, vals[4 * j + 3] * scale)
                else:
                    write(out, row, base + c, c, vals[j] * scale)

    return softmax_row


@functools.lru_cache(maxsize=None)
def build(group, loads, wide):
    """The kernel for one row layout, on flat views of x and out."""
    softmax_row = row_softmax(group, loads, wide, read_flat, write_flat)

    @jit
    def softmax_registers(x, out, rows, cols):
        softmax_row(x, out, rows, cols)

    return softmax_registers


def launch(x, out):
    rows, cols = x.shape
    wide = cols % 4 == 0 and aligned(x) and aligned(out)  # then every row starts 16-byte aligned
    chosen = plan(cols, wide)
    if chosen is None:
        online.launch(x, out)  # longer than registers hold: v04's two reads of x
        return
    group, loads = chosen
    kernel = build(group, loads, wide)
    rows_per_block = BLOCK // group
    grid = (rows + rows_per_block - 1) // rows_per_block
    kernel[grid, BLOCK](x.reshape(x.size), out.reshape(out.size), np.uint32(rows), np.uint32(cols))
