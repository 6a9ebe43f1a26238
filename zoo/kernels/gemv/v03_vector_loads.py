"""128-bit loads: each lane reads 16 bytes of its row at a time, 4 to 32 weights, and the x they meet.

Changes:
    From v02: lane l reads the row in 16-byte chunks l, l + 32, ... with one
    ``ld.global.v4`` each (``load_float4`` for fp32, ``load_words4`` for the
    others: 4, 8, 16 or 32 weights), loads the matching x the same way, and
    dequantizes in registers: fp16 halves by ``unpack_half2`` (cvt.f32.f16),
    int8 bytes and int4 nibbles by shifts (sign extension) and an int-to-float
    conversion. int4's scale multiplies each chunk's sum once (a chunk of 32
    lies in one group of 64 or 128), int8's row scale the row's sum once.
    Every row must start on a 16-byte boundary (in a multiple of 4, 8, 16 or
    32 weights): other shapes run v02's kernel, unchanged.

Why it is faster:
    A warp's load brings 512 bytes instead of 16 to 128: four to 32 times
    fewer load instructions, address computations and loop trips per byte,
    and 16 bytes in flight per lane instead of 1 to 4. For fp32 and fp16 that
    is most of the distance to the copy bandwidth. The quantized formats meet
    the next wall, instructions: compiled for sm_90, the int4 loop spends 178
    instructions on a chunk of 32 codes (a shift left, an arithmetic shift
    right, an I2FP and an FFMA a code, and x's conversions), 11 a byte read,
    where fp16's spends 61 on 16 weights, 2 a byte.
"""

import functools

from zoo.device import cuda, float32, int32, uint32
from zoo.device.bits import unpack_half2
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, load_words4
from zoo.device.warp import FULL_MASK
from zoo.kernels.gemv import WARP_ROW_THREADS, check_index_range, layout

validate = check_index_range  # the step's size limit: its indices are uint32

THREADS_PER_BLOCK = WARP_ROW_THREADS  # a multiple of 32: one row per warp
ROWS_PER_BLOCK = THREADS_PER_BLOCK // 32
CHUNK = {"fp32": 4, "fp16": 8, "int8": 16, "int4": 32}  # weights in 16 bytes of a row


# -- one 16-byte chunk of a row against x, added to ``total``: W[start ...] holds columns c .. c + CHUNK - 1 ---------
@jit(device=True)
def dot_fp32(W, start, x, c, scales, row, group, total):
    w0, w1, w2, w3 = load_float4(W, start)
    x0, x1, x2, x3 = load_float4(x, c)
    return total + w0 * x0 + w1 * x1 + w2 * x2 + w3 * x3  # a chain of FFMAs


@jit(device=True)
def dot_half2(w, v, total):
    """Two float16 weights times two float16 x values, added in float32 (both products are exact)."""
    w0, w1 = unpack_half2(w)
    x0, x1 = unpack_half2(v)
    return total + w0 * x0 + w1 * x1


@jit(device=True)
def dot_fp16(W, start, x, c, scales, row, group, total):
    w0, w1, w2, w3 = load_words4(W, start)  # 8 float16 weights
    v0, v1, v2, v3 = load_words4(x, c)  # the 8 float16 x they meet
    return dot_half2(w3, v3, dot_half2(w2, v2, dot_half2(w1, v1, dot_half2(w0, v0, total))))


@jit(device=True)
def dot_int8_word(w, va, vb, total):
    """Four int8 codes (bytes 0-3 of w) times four x (two words of float16), added to total."""
    x0, x1 = unpack_half2(va)
    x2, x3 = unpack_half2(vb)
    # sign extension: byte j moved to bits 24-31, an arithmetic shift right by 24; float32() is an I2F
    total += float32(int32(w << uint32(24)) >> 24) * x0
    total += float32(int32(w << uint32(16)) >> 24) * x1
    total += float32(int32(w << uint32(8)) >> 24) * x2
    return total + float32(int32(w) >> 24) * x3


@jit(device=True)
def dot_int8(W, start, x, c, scales, row, group, total):
    w0, w1, w2, w3 = load_words4(W, start)  # 16 codes; the row's scale multiplies the row's sum (kernel)
    v0, v1, v2, v3 = load_words4(x, c)  # x[c .. c + 7]
    v4, v5, v6, v7 = load_words4(x, c + uint32(8))  # x[c + 8 .. c + 15]
    total = dot_int8_word(w1, v2, v3, dot_int8_word(w0, v0, v1, total))
    return dot_int8_word(w3, v6, v7, dot_int8_word(w2, v4, v5, total))


@jit(device=True)
def dot_int4_word(w, va, vb, vc, vd, total):
    """Eight int4 codes (nibble j of w is column j: the low nibble of byte 0 first) times eight x (four words)."""
    x0, x1 = unpack_half2(va)
    x2, x3 = unpack_half2(vb)
    x4, x5 = unpack_half2(vc)
    x6, x7 = unpack_half2(vd)
    # sign extension: nibble j moved to bits 28-31, an arithmetic shift right by 28; float32() is an I2F
    total += float32(int32(w << uint32(28)) >> 28) * x0
    total += float32(int32(w << uint32(24)) >> 28) * x1
    total += float32(int32(w << uint32(20)) >> 28) * x2
    total += float32(int32(w << uint32(16)) >> 28) * x3
    total += float32(int32(w << uint32(12)) >> 28) * x4
    total += float32(int32(w << uint32(8)) >> 28) * x5
    total += float32(int32(w << uint32(4)) >> 28) * x6
    return total + float32(int32(w) >> 28) * x7


@jit(device=True)
def dot_int4(W, start, x, c, scales, row, group, total):
    w0, w1, w2, w3 = load_words4(W, start)  # 16 bytes: 32 codes
    v0, v1, v2, v3 = load_words4(x, c)  # x[c .. c + 31], 8 at a time
    v4, v5, v6, v7 = load_words4(x, c + uint32(8))
    v8, v9, v10, v11 = load_words4(x, c + uint32(16))
    v12, v13, v14, v15 = load_words4(x, c + uint32(24))
    part = dot_int4_word(w1, v4, v5, v6, v7, dot_int4_word(w0, v0, v1, v2, v3, float32(0)))
    part = dot_int4_word(w3, v12, v13, v14, v15, dot_int4_word(w2, v8, v9, v10, v11, part))
    return total + part * float32(scales[row, c // uint32(group)])  # a chunk of 32 lies in one group of 64 or 128


# -- the row's scale (int8), applied to the row's sum; 1 for the formats without ------------------------------------
@jit(device=True)
def no_scale(scales, row):
    return float32(1)


@jit(device=True)
def row_scale(scales, row):
    return float32(scales[row, 0])


DOT = {"fp32": dot_fp32, "fp16": dot_fp16, "int8": dot_int8, "int4": dot_int4}
ROW_SCALE = {"fp32": no_scale, "fp16": no_scale, "int8": row_scale, "int4": no_scale}


@functools.cache
def build(fmt, group):
    """The 16-byte kernel for one format (and int4 group size): the format's functions are closure constants."""
    dot, scale_of_row = DOT[fmt], ROW_SCALE[fmt]
    chunk = CHUNK[fmt]
    per_byte = 2 if fmt == "int4" else 1  # weights per element of W: int4 indexes W by byte

    @jit(device=True)
    def dot_row(W, x, scales, out):
        lane = uint32(cuda.threadIdx.x) % uint32(32)  # the thread's lane in its warp
        row = uint32(cuda.grid(1)) // uint32(32)  # one row per warp: the warp's index in the grid
        if row >= uint32(out.size):  # uint32 on both sides: numba compares uint32 with int64 as float64
            return  # the whole warp leaves together: no shuffle below misses a lane
        chunks = uint32(x.size) // uint32(chunk)  # in is a multiple of the chunk (launch)
        start = row * uint32(W.shape[1])  # the row's first element: 16-byte aligned (launch)
        total = float32(0)
        k = lane
        while k < chunks:  # chunk k of the row: columns k chunk .. k chunk + chunk - 1
            c = k * uint32(chunk)
            total = dot(W, start + c // uint32(per_byte), x, c, scales, row, group, total)
            k += uint32(32)
        for k in range(5):  # butterfly, offsets 16, 8, 4, 2, 1: every lane ends with the warp's sum
            total += cuda.shfl_xor_sync(FULL_MASK, total, 16 >> k)
        if lane == 0:
            out[row] = total * scale_of_row(scales, row)

    return kernels(fmt, dot_row)


# -- v02's kernel, unchanged: it runs the shapes whose rows are not 16-byte aligned ----------------------------------
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
def build_scalar(fmt, group):
    """v02's kernel for one format (and int4 group size): one weight a lane a load."""
    weight = WEIGHT[fmt]

    @jit(device=True)
    def dot_row(W, x, scales, out):
        lane = uint32(cuda.threadIdx.x) % uint32(32)  # the thread's lane in its warp
        row = uint32(cuda.grid(1)) // uint32(32)  # one row per warp: the warp's index in the grid
        if row >= uint32(out.size):  # uint32 on both sides: numba compares uint32 with int64 as float64
            return  # the whole warp leaves together: no shuffle below misses a lane
        total = float32(0)
        c = lane
        while c < uint32(x.size):
            total += weight(W, scales, row, c, group) * float32(x[c])
            c += uint32(32)
        for k in range(5):  # butterfly, offsets 16, 8, 4, 2, 1: every lane ends with the warp's sum
            total += cuda.shfl_xor_sync(FULL_MASK, total, 16 >> k)
        if lane == 0:
            out[row] = total

    return kernels(fmt, dot_row)


def kernels(fmt, dot_row):
    """The kernel that runs ``dot_row``: with scales for the quantized formats, without for the float ones."""
    if fmt in ("fp32", "fp16"):

        @jit
        def gemv_float(W, x, out):
            dot_row(W, x, None, out)  # float weights have no scales: the format's functions never read them

        return gemv_float

    @jit
    def gemv_quantized(W, x, scales, out):
        dot_row(W, x, scales, out)

    return gemv_quantized


def launch(W, x, scales, out):
    fmt, n, group = layout(W, x, scales)
    wide = n % CHUNK[fmt] == 0 and aligned(W) and aligned(x)  # then every row starts 16-byte aligned
    kernel = build(fmt, group) if wide else build_scalar(fmt, group)
    blocks = (out.size + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK
    if scales is None:
        kernel[blocks, THREADS_PER_BLOCK](W, x, out)
    else:
        kernel[blocks, THREADS_PER_BLOCK](W, x, scales, out)
