"""One thread per output row: the dot product of a row of W and x, one weight at a time.

Changes:
    The first step. Thread ``row = cuda.grid(1)`` walks its row of W from
    column 0 to in - 1, turns each weight into a float32 (``weight``: as
    stored for fp32 and fp16, code times scale for int8 and int4, whose
    nibble is sign-extended with two shifts) and adds weight times x[c] into
    a float32 sum, which it writes to out[row]. One kernel per format (and
    int4 group size), built once: the format's ``weight`` is a closure
    constant, so each kernel holds only its own format's code.

Why it is faster:
    It is the starting point, and slow in the way GEMV kernels are slow: the
    32 threads of a warp read 32 different rows, in bytes (4 an fp32 weight,
    half a byte an int4 one) apart, so each load instruction of the warp
    touches 32 cache lines to use 32 weights from them. The caches keep the
    lines between iterations, but only while they fit; and out / 32 warps is
    all the parallelism there is: 256 warps for 8192 rows, two per SM.
"""

import functools

from zoo.device import cuda, float32, int32, uint32
from zoo.device.jit import jit
from zoo.kernels.gemv import ROW_THREADS, check_index_range, layout

validate = check_index_range  # the step's size limit: its indices are uint32

THREADS_PER_BLOCK = ROW_THREADS  # one thread per row


@jit(device=True)
def weight_float(W, scales, row, c, group):
    return float32(W[row, c])  # fp32 as it is, fp16 converted (cvt.f32.f16)


@jit(device=True)
def weight_int8(W, scales, row, c, group):
    return float32(W[row, c]) * float32(scales[row, 0])  # one scale per row


@jit(device=True)
def weight_int4(W, scales, row, c, group):
    byte = uint32(W[row, c // uint32(2)])  # weight c of the row is in byte c // 2: c even the low nibble, odd the high
    # sign extension: the nibble's bit 3 moved to bit 31, then an arithmetic shift right by 28
    code = int32(byte << (uint32(28) - uint32(4) * (c % uint32(2)))) >> 28
    return float32(code) * float32(scales[row, c // uint32(group)])  # the scale of the weight's group


WEIGHT = {"fp32": weight_float, "fp16": weight_float, "int8": weight_int8, "int4": weight_int4}


@functools.cache
def build(fmt, group):
    """The kernel for one format (and int4 group size): ``weight`` and ``group`` are closure constants."""
    weight = WEIGHT[fmt]

    @jit(device=True)
    def dot_row(W, x, scales, out):
        row = uint32(cuda.grid(1))  # this thread's output row
        if row >= uint32(out.size):  # uint32 on both sides: numba compares uint32 with int64 as float64
            return
        total = float32(0)
        for c in range(uint32(x.size)):
            total += weight(W, scales, row, uint32(c), group) * float32(x[c])
        out[row] = total

    if fmt in ("fp32", "fp16"):

        @jit
        def gemv_float(W, x, out):
            dot_row(W, x, None, out)  # float weights have no scales: the format's weight never reads them

        return gemv_float

    @jit
    def gemv_quantized(W, x, scales, out):
        dot_row(W, x, scales, out)

    return gemv_quantized


def launch(W, x, scales, out):
    fmt, _, group = layout(W, x, scales)
    kernel = build(fmt, group)
    blocks = (out.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    if scales is None:
        kernel[blocks, THREADS_PER_BLOCK](W, x, out)
    else:
        kernel[blocks, THREADS_PER_BLOCK](W, x, scales, out)
