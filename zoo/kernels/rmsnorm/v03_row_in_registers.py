"""The row in registers: 128-bit loads, h read once, the sum of squares by warp shuffles and one barrier.

Changes:
    From v02: each thread holds its share of the row in registers, VECTORS
    float4 vectors (16 columns at a block of 256, rows up to 4096 columns),
    so pass 2 rereads nothing: it scales the values it already holds. x and
    h come in 16 bytes at a time (``load_float4``), the weight 8 bytes (four
    float16), and y goes out as two words of two float16. The reduction is a
    butterfly of five ``shfl_xor_sync`` in each warp, one value a warp into
    shared memory, one barrier, and every thread adds the warps' values: one
    barrier where v02 has nine. Rows that are not whole float4 vectors, or
    longer than the registers hold, run v02's kernel.
    Moves 14 bytes an element, the floor: x and h read once, h and y written.

Why it is faster:
    v02 reread h (from L2, mostly) and waited at nine barriers while its
    loads stood still. Here every byte crosses the memory bus once, four
    elements an instruction, and the row's one reduction costs a few
    register exchanges and one barrier. At one row (decode) the kernel is a
    single block: what remains there is its launch and the latency of one
    round of loads.
"""

import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.bits import unpack_half2
from zoo.device.jit import jit
from zoo.device.memory import aligned, flat_view, load_float4, load_words2, store_float4, store_word
from zoo.device.mma import pack_half2
from zoo.device.warp import FULL_MASK
from zoo.kernels.rmsnorm import (
    BLOCK,  # threads per row, a multiple of 32
    EPS,
    VECTORS,  # float4 vectors a thread holds
    check_index_range,
)
from zoo.kernels.rmsnorm import v02_fused_add as v02

BASE = "v02"  # rows not of whole float4 vectors, or longer than the registers hold: v02's kernel

validate = check_index_range  # the step's size limit: its indices are uint32

WARPS = BLOCK // 32
HELD = 4 * VECTORS  # floats of the row a thread holds
MAX_COLS = BLOCK * HELD  # the longest row the registers hold


@jit
def add_rms_norm_registers(x, residual, weight, out, cols):
    held = cuda.local.array(HELD, float32)  # constant indices only (the loops unroll): registers
    warp_sums = cuda.shared.array(WARPS, float32)
    t = uint32(cuda.threadIdx.x)
    base = uint32(cuda.blockIdx.x) * cols  # one block per row; cols % 4 == 0, so every row starts 16-byte aligned
    v = float32(0)
    for k in range(VECTORS):
        c = (uint32(k * BLOCK) + t) * uint32(4)  # vector k of the thread: consecutive threads, consecutive vectors
        if c < cols:
            x0, x1, x2, x3 = load_float4(x, base + c)
            h0, h1, h2, h3 = load_float4(residual, base + c)
            h0, h1, h2, h3 = h0 + x0, h1 + x1, h2 + x2, h3 + x3
            store_float4(residual, base + c, h0, h1, h2, h3)  # the stream's new value
            v += h0 * h0 + h1 * h1 + h2 * h2 + h3 * h3
        else:
            h0 = h1 = h2 = h3 = float32(0)
        held[4 * k], held[4 * k + 1], held[4 * k + 2], held[4 * k + 3] = h0, h1, h2, h3
    for k in range(5):  # butterfly, offsets 16, 8, 4, 2, 1: every lane ends with its warp's sum
        v += cuda.shfl_xor_sync(FULL_MASK, v, 16 >> k)
    if t % uint32(32) == uint32(0):
        warp_sums[t // uint32(32)] = v
    cuda.syncthreads()  # every warp's sum is in shared memory
    total = float32(0)
    for w in range(WARPS):  # every thread adds them, in the same order: the same scale everywhere
        total += warp_sums[w]
    scale = float32(1) / math.sqrt(total / float32(cols) + float32(EPS))
    for k in range(VECTORS):
        c = (uint32(k * BLOCK) + t) * uint32(4)
        if c < cols:
            w01, w23 = load_words2(weight, c)  # four float16 weights, 8 bytes
            w0, w1 = unpack_half2(w01)
            w2, w3 = unpack_half2(w23)
            y0 = float16(held[4 * k] * scale * w0)
            y1 = float16(held[4 * k + 1] * scale * w1)
            y2 = float16(held[4 * k + 2] * scale * w2)
            y3 = float16(held[4 * k + 3] * scale * w3)
            store_word(out, base + c, pack_half2(y0, y1))
            store_word(out, base + c + uint32(2), pack_half2(y2, y3))


def takes(x, residual, weight, out):
    """Whether the registers hold the call's rows: whole float4 vectors, at most MAX_COLS, 16-byte aligned arrays
    (the weight and y 8-byte: four float16 a load or two words a store)."""
    cols = x.shape[1]
    return (
        cols % 4 == 0
        and cols <= MAX_COLS
        and aligned(x)
        and aligned(residual)
        and aligned(weight, 8)
        and aligned(out, 8)
    )


def launch(x, residual, weight, out):
    if not takes(x, residual, weight, out):
        return v02.launch(x, residual, weight, out)
    rows, cols = x.shape
    add_rms_norm_registers[rows, BLOCK](flat_view(x), flat_view(residual), weight, flat_view(out), np.uint32(cols))
