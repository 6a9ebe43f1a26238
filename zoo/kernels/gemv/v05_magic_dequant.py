"""Dequantize by bit placement: one LOP3 turns two codes into two float16 subnormals, no int-to-float conversion.

Changes:
    From v04: the int8 and int4 dot functions. ``(w >> 4k) & 0x000F000F ^
    0x00080008``, one LOP3 (``lop3``), puts codes k and k + 4 of a word, sign
    bit flipped (u = q + 8), in the mantissas of two float16 with exponent 0:
    the subnormals u 2^-24 (int8: bytes, u = q + 128). ``unpack_half2``
    converts them exactly, and P = sum u 2^-24 x follows. The offset leaves
    once per chunk: sum q x = 2^24 (P - 8 2^-24 sum x), sum x taken once per
    chunk for the warp's rows (``offset_of``), and 2^24 joins the scale
    (int8: the row's). fp32 and fp16 are v04's.

Why it is faster:
    Issue slots. v04 spends four instructions on each int4 code (a shift
    left, an arithmetic shift right, I2FP, FFMA); at 3.5x fp16's rate an H200
    needs about 25 codes per SM per clock, so four a code is 100 of its 128
    issue slots. Here a code costs an FFMA, a conversion (HADD2.F32) and half
    of a LOP3 and of a shift. Compiled for sm_90, the loop over a chunk of
    four rows (128 codes) is 491 instructions where v04's is 579, and the
    integer ones drop from about 390 to 120. The price is a cancellation,
    P - offset: sum u x is about 4x sum q x, so float32 rounding is about
    four times v04's, far inside the tolerance.
"""

import functools

from zoo.device import cuda, float32, int32, uint32
from zoo.device.bits import lop3, unpack_half2
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, load_words4
from zoo.device.warp import FULL_MASK
from zoo.kernels.gemv import WARP_ROW_THREADS, check_index_range, layout

validate = check_index_range  # the step's size limit: its indices are uint32

THREADS_PER_BLOCK = WARP_ROW_THREADS  # a multiple of 32: one row per warp
ROWS_PER_WARP = 4  # rows a warp owns: four 16-byte loads of W in flight per lane
WARPS_PER_BLOCK = THREADS_PER_BLOCK // 32
ROWS_PER_BLOCK = ROWS_PER_WARP * WARPS_PER_BLOCK  # the scalar kernel (v02's) takes one row a warp
AND_XOR = (0xF0 & 0xCC) ^ 0xAA  # lop3's table of (a & b) ^ c
CHUNK = {"fp32": 4, "fp16": 8, "int8": 16, "int4": 32}  # weights in 16 bytes of a row


# -- the x of one 16-byte chunk of a row, as float32 (``load_x``), and the chunk's weights against it ----------------
@jit(device=True)
def x_float4(x, c):
    return load_float4(x, c)  # x[c .. c + 3]


@jit(device=True)
def x_half8(x, c):
    """x[c .. c + 7] (float16) as eight float32."""
    v0, v1, v2, v3 = load_words4(x, c)
    x0, x1 = unpack_half2(v0)
    x2, x3 = unpack_half2(v1)
    x4, x5 = unpack_half2(v2)
    x6, x7 = unpack_half2(v3)
    return x0, x1, x2, x3, x4, x5, x6, x7


@jit(device=True)
def x_half16(x, c):
    return x_half8(x, c) + x_half8(x, c + uint32(8))  # x[c .. c + 15]


@jit(device=True)
def x_half32(x, c):
    return x_half16(x, c) + x_half16(x, c + uint32(16))  # x[c .. c + 31]


@jit(device=True)
def no_offset(xs):
    return float32(0)


@jit(device=True)
def sum8(x0, x1, x2, x3, x4, x5, x6, x7):
    return ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))  # a tree: three adds deep, not seven


@jit(device=True)
def offset_int8(xs):
    """128 2^-24 sum x over the chunk: what the codes' +128 adds to P (sum u 2^-24 x), taken out once a chunk."""
    low = sum8(xs[0], xs[1], xs[2], xs[3], xs[4], xs[5], xs[6], xs[7])
    high = sum8(xs[8], xs[9], xs[10], xs[11], xs[12], xs[13], xs[14], xs[15])
    return (low + high) * float32(2.0**-17)


@jit(device=True)
def offset_int4(xs):
    """8 2^-24 sum x over the chunk: what the codes' +8 adds to P, taken out once a chunk."""
    s0 = sum8(xs[0], xs[1], xs[2], xs[3], xs[4], xs[5], xs[6], xs[7])
    s1 = sum8(xs[8], xs[9], xs[10], xs[11], xs[12], xs[13], xs[14], xs[15])
    s2 = sum8(xs[16], xs[17], xs[18], xs[19], xs[20], xs[21], xs[22], xs[23])
    s3 = sum8(xs[24], xs[25], xs[26], xs[27], xs[28], xs[29], xs[30], xs[31])
    return ((s0 + s1) + (s2 + s3)) * float32(2.0**-21)


@jit(device=True)
def dot_fp32(W, start, xs, offset, scales, row, c, group, total):
    w0, w1, w2, w3 = load_float4(W, start)
    return total + w0 * xs[0] + w1 * xs[1] + w2 * xs[2] + w3 * xs[3]  # a chain of FFMAs


@jit(device=True)
def dot_half2(w, x0, x1, total):
    """Two float16 (a word) times two x, added in float32 (products of float16 values are exact)."""
    w0, w1 = unpack_half2(w)
    return total + w0 * x0 + w1 * x1


@jit(device=True)
def dot_fp16(W, start, xs, offset, scales, row, c, group, total):
    w0, w1, w2, w3 = load_words4(W, start)  # 8 float16 weights
    total = dot_half2(w1, xs[2], xs[3], dot_half2(w0, xs[0], xs[1], total))
    return dot_half2(w3, xs[6], xs[7], dot_half2(w2, xs[4], xs[5], total))


@jit(device=True)
def dot_int8_word(w, x0, x1, x2, x3, total):
    """Four int8 codes (bytes 0-3 of w) as u 2^-24 (u = q + 128) times four x, added to total."""
    # (w & 0x00FF00FF) ^ 0x00800080 in one LOP3: bytes 0 and 2 into the low bytes of two halves, each + 128 (a
    # two's complement byte with its top bit flipped is q + 128)
    total = dot_half2(lop3(w, 0x00FF00FF, 0x00800080, AND_XOR), x0, x2, total)
    return dot_half2(lop3(w >> uint32(8), 0x00FF00FF, 0x00800080, AND_XOR), x1, x3, total)  # bytes 1 and 3


@jit(device=True)
def dot_int8(W, start, xs, offset, scales, row, c, group, total):
    w0, w1, w2, w3 = load_words4(W, start)  # 16 codes; the row's scale (times 2^24) multiplies the row's sum
    part = dot_int8_word(w0, xs[0], xs[1], xs[2], xs[3], float32(0))
    part = dot_int8_word(w1, xs[4], xs[5], xs[6], xs[7], part)
    part = dot_int8_word(w2, xs[8], xs[9], xs[10], xs[11], part)
    part = dot_int8_word(w3, xs[12], xs[13], xs[14], xs[15], part)
    return total + (part - offset)


@jit(device=True)
def dot_int4_word(w, x0, x1, x2, x3, x4, x5, x6, x7, total):
    """Eight int4 codes (nibble j is column j) as u 2^-24 (u = q + 8) times eight x, added to total."""
    # nibbles k and k + 4 into the low nibbles of the two halves of a word, each + 8 (^ 8 on a two's complement
    # nibble), in one LOP3: the float16 subnormals u 2^-24
    total = dot_half2(lop3(w, 0x000F000F, 0x00080008, AND_XOR), x0, x4, total)
    total = dot_half2(lop3(w >> uint32(4), 0x000F000F, 0x00080008, AND_XOR), x1, x5, total)
    total = dot_half2(lop3(w >> uint32(8), 0x000F000F, 0x00080008, AND_XOR), x2, x6, total)
    return dot_half2(lop3(w >> uint32(12), 0x000F000F, 0x00080008, AND_XOR), x3, x7, total)


@jit(device=True)
def dot_int4(W, start, xs, offset, scales, row, c, group, total):
    w0, w1, w2, w3 = load_words4(W, start)  # 16 bytes: 32 codes
    part = dot_int4_word(w0, xs[0], xs[1], xs[2], xs[3], xs[4], xs[5], xs[6], xs[7], float32(0))
    part = dot_int4_word(w1, xs[8], xs[9], xs[10], xs[11], xs[12], xs[13], xs[14], xs[15], part)
    part = dot_int4_word(w2, xs[16], xs[17], xs[18], xs[19], xs[20], xs[21], xs[22], xs[23], part)
    part = dot_int4_word(w3, xs[24], xs[25], xs[26], xs[27], xs[28], xs[29], xs[30], xs[31], part)
    # sum q x = 2^24 (part - offset); 2^24 is exact, and joins the chunk's group scale (a chunk of 32 lies in one group)
    return total + (part - offset) * (float32(scales[row, c // uint32(group)]) * float32(2.0**24))


# -- the row's scale (int8), applied to the row's sum; 1 for the formats without ------------------------------------
@jit(device=True)
def no_scale(scales, row):
    return float32(1)


@jit(device=True)
def row_scale(scales, row):
    return float32(scales[row, 0]) * float32(2.0**24)  # the row's sum is sum u 2^-24 x less the offsets


LOAD_X = {"fp32": x_float4, "fp16": x_half8, "int8": x_half16, "int4": x_half32}
OFFSET = {"fp32": no_offset, "fp16": no_offset, "int8": offset_int8, "int4": offset_int4}
DOT = {"fp32": dot_fp32, "fp16": dot_fp16, "int8": dot_int8, "int4": dot_int4}
ROW_SCALE = {"fp32": no_scale, "fp16": no_scale, "int8": row_scale, "int4": no_scale}


@functools.cache
def build(fmt, group):
    """The 16-byte kernel for one format (and int4 group size): the format's functions are closure constants."""
    load_x, offset_of, dot, scale_of_row = LOAD_X[fmt], OFFSET[fmt], DOT[fmt], ROW_SCALE[fmt]
    chunk = CHUNK[fmt]
    per_byte = 2 if fmt == "int4" else 1  # weights per element of W: int4 indexes W by byte

    @jit(device=True)
    def dot_rows(W, x, scales, out):
        totals = cuda.local.array(ROWS_PER_WARP, float32)  # constant indices only: registers
        starts = cuda.local.array(ROWS_PER_WARP, uint32)
        lane = uint32(cuda.threadIdx.x) % uint32(32)  # the thread's lane in its warp
        first = uint32(cuda.grid(1)) // uint32(32) * uint32(ROWS_PER_WARP)  # the warp's first row
        rows = uint32(out.size)
        if first >= rows:
            return  # the whole warp leaves together: no shuffle below misses a lane
        for r in range(ROWS_PER_WARP):
            row = min(first + uint32(r), rows - uint32(1))  # past the last row: the last row again, not written
            starts[r] = row * uint32(W.shape[1])  # the row's first element: 16-byte aligned (launch)
            totals[r] = float32(0)
        chunks = uint32(x.size) // uint32(chunk)  # in is a multiple of the chunk (launch)
        k = lane
        while k < chunks:  # chunk k of each row: columns k chunk .. k chunk + chunk - 1
            c = k * uint32(chunk)
            xs = load_x(x, c)  # once for the warp's rows
            offset = offset_of(xs)  # so is the codes' offset
            for r in range(ROWS_PER_WARP):
                row = min(first + uint32(r), rows - uint32(1))
                totals[r] = dot(W, starts[r] + c // uint32(per_byte), xs, offset, scales, row, c, group, totals[r])
            k += uint32(32)
        for r in range(ROWS_PER_WARP):
            total = totals[r]
            for k in range(5):  # butterfly, offsets 16, 8, 4, 2, 1: every lane ends with the warp's sum
                total += cuda.shfl_xor_sync(FULL_MASK, total, 16 >> k)
            row = first + uint32(r)
            if lane == uint32(r) and row < rows:  # lanes 0-3 write the four rows
                out[row] = total * scale_of_row(scales, row)

    return kernels(fmt, dot_rows)


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
    rows_per_block = ROWS_PER_BLOCK if wide else WARPS_PER_BLOCK
    blocks = (out.size + rows_per_block - 1) // rows_per_block
    if scales is None:
        kernel[blocks, THREADS_PER_BLOCK](W, x, out)
    else:
        kernel[blocks, THREADS_PER_BLOCK](W, x, scales, out)
