"""Split in across the warps of a block: shapes with few rows still put enough warps on every SM.

Changes:
    From v05: blocks of eight warps, and ``slices`` warps (1, 2, 4 or 8) share
    each group of four rows: warp w of the block works on group w // slices
    and, within its rows, on chunks (w % slices) 32 + lane, stepping by
    32 slices. Each warp reduces its sums by the butterfly as before; with
    slices > 1 lane 0 puts them in shared memory, one barrier, and lanes 0-3
    of the group's first warp add the slices and write. ``launch`` takes the
    most slices that leave each warp MIN_TRIPS trips of its loop, and at
    least enough for WARPS_PER_SM warps per SM (``slices_for``).

Why it is faster:
    Parallelism for the short outputs. 4096 rows of four make 1024 warps,
    under eight per SM on an H100 or H200: four 16-byte loads a lane make
    8 x 32 x 64 bytes, 16 KB in flight per SM, where the bytes-in-flight
    sweep needed 13.4 KB per SM for 90% of the H200's copy bandwidth with
    every warp streaming (these also compute), and eight warps hide little
    of the loop's latency. Split four ways, the same rows are 4096 warps, 31
    an SM, four times the bytes in flight, for one barrier and a few
    shared-memory stores per block. No atomics: every output written once.
    Long outputs gain too, from shorter warps (see slices_for).
"""

import functools

from zoo.device import cuda, float32, int32, sm_count, uint32
from zoo.device.bits import lop3, unpack_half2
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, load_words4
from zoo.device.warp import FULL_MASK
from zoo.kernels.gemv import SPLIT_THREADS, SPLIT_WARPS_PER_SM, check_index_range, layout

validate = check_index_range  # the step's size limit: its indices are uint32

THREADS_PER_BLOCK = SPLIT_THREADS  # a multiple of 32: up to 8 warps share a group of rows
ROWS_PER_WARP = 4  # rows a group of warps owns: four 16-byte loads of W in flight per lane
WARPS_PER_BLOCK = THREADS_PER_BLOCK // 32
PARTIALS = WARPS_PER_BLOCK * ROWS_PER_WARP  # shared memory: each warp's four sums, when warps share rows
# launch's floor: at least the slices that give this many warps per SM. 16 of 64 resident warps: with four 16-byte
# loads per lane, 16 x 32 x 64 bytes = 32 KB in flight per SM, past the knee of the bytes-in-flight sweep. The
# simulator has one "SM" (zoo.device.SIM_SM_COUNT): the spec makes it 2 there, so the test sizes take both paths.
WARPS_PER_SM = SPLIT_WARPS_PER_SM
MIN_TRIPS = 4  # launch's ceiling: at most the slices that leave a warp this many trips of its loop (see slices_for)
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
def build(fmt, group, slices):
    """The 16-byte kernel for one format (and int4 group size) and one number of warps per group of rows."""
    load_x, offset_of, dot, scale_of_row = LOAD_X[fmt], OFFSET[fmt], DOT[fmt], ROW_SCALE[fmt]
    chunk = CHUNK[fmt]
    per_byte = 2 if fmt == "int4" else 1  # weights per element of W: int4 indexes W by byte
    groups_per_block = WARPS_PER_BLOCK // slices

    @jit(device=True)
    def dot_rows(W, x, scales, out):
        totals = cuda.local.array(ROWS_PER_WARP, float32)  # constant indices only: registers
        starts = cuda.local.array(ROWS_PER_WARP, uint32)
        partials = cuda.shared.array(PARTIALS, float32)  # [warp][row of its group]: the slices' sums
        lane = uint32(cuda.threadIdx.x) % uint32(32)  # the thread's lane in its warp
        warp = uint32(cuda.threadIdx.x) // uint32(
            32
        )  # the warp in its block: group warp // slices, slice warp % slices
        piece = warp % uint32(slices)
        first = (uint32(cuda.blockIdx.x) * uint32(groups_per_block) + warp // uint32(slices)) * uint32(ROWS_PER_WARP)
        rows = uint32(out.size)
        if first < rows:  # the whole warp or none of it: no shuffle misses a lane (and no return before the barrier)
            for r in range(ROWS_PER_WARP):
                row = min(first + uint32(r), rows - uint32(1))  # past the last row: the last row again, not written
                starts[r] = row * uint32(W.shape[1])  # the row's first element: 16-byte aligned (launch)
                totals[r] = float32(0)
            chunks = uint32(x.size) // uint32(chunk)  # in is a multiple of the chunk (launch)
            k = piece * uint32(32) + lane  # the warp's slice of the chunks: every slices-th run of 32
            while k < chunks:  # chunk k of each row: columns k chunk .. k chunk + chunk - 1
                c = k * uint32(chunk)
                xs = load_x(x, c)  # once for the group's rows
                offset = offset_of(xs)  # so is the codes' offset
                for r in range(ROWS_PER_WARP):
                    row = min(first + uint32(r), rows - uint32(1))
                    totals[r] = dot(W, starts[r] + c // uint32(per_byte), xs, offset, scales, row, c, group, totals[r])
                k += uint32(32 * slices)
            for r in range(ROWS_PER_WARP):
                total = totals[r]
                for k in range(5):  # butterfly, offsets 16, 8, 4, 2, 1: every lane ends with the warp's sum
                    total += cuda.shfl_xor_sync(FULL_MASK, total, 16 >> k)
                if slices == 1:
                    row = first + uint32(r)
                    if lane == uint32(r) and row < rows:  # lanes 0-3 write the four rows
                        out[row] = total * scale_of_row(scales, row)
                elif lane == uint32(0):
                    partials[warp * uint32(ROWS_PER_WARP) + uint32(r)] = total
        if slices > 1:
            cuda.syncthreads()  # every slice's sums are in shared memory
            row = first + lane
            if piece == uint32(0) and lane < uint32(ROWS_PER_WARP) and row < rows:  # the group's first warp writes
                total = float32(0)
                for s in range(slices):  # its own slice first, then the others, in order
                    total += partials[(warp + uint32(s)) * uint32(ROWS_PER_WARP) + lane]
                out[row] = total * scale_of_row(scales, row)

    return kernels(fmt, dot_rows)


def slices_for(rows, chunks):
    """Warps per group of rows (a power of two, at most a block): the fewest that make WARPS_PER_SM per SM, then
    doubled while each warp keeps MIN_TRIPS trips of its loop over a row's ``chunks`` (32 a trip, a slice each).

    Why more slices than fill the SMs: a warp's trips run one after another, and the warps that start last run on
    with the SM part empty. Shorter warps fill the SM where one a group leaves slots empty (14336 rows: 27 warps
    an SM of the 40 the registers allow) and shorten the last wave where they are many (28672 rows: 54 an SM, in
    waves of 40). Why not more: each warp pays its set-up, the butterfly of four rows and the block's barrier once,
    however few its trips. Over fp32, fp16 and int8 at six shapes (2048 x 8192 to 28672 x 4096) the pick took at most
    2% longer than the fastest on the H100; the fewest slices for WARPS_PER_SM alone took up to 10% longer (fp16 at
    28672 x 4096). The table of slices 1 to 8: ``sweeps/NOTES.md``."""
    groups = (rows + ROWS_PER_WARP - 1) // ROWS_PER_WARP
    slices = 1
    while slices < WARPS_PER_BLOCK and groups * slices < WARPS_PER_SM * sm_count():  # fill the SMs
        slices *= 2
    while slices < WARPS_PER_BLOCK and chunks >= 2 * slices * 32 * MIN_TRIPS:  # twice the slices: half the trips
        slices *= 2
    return slices


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
    if wide:
        slices = slices_for(out.size, n // CHUNK[fmt])
        kernel = build(fmt, group, slices)
        rows_per_block = ROWS_PER_WARP * (WARPS_PER_BLOCK // slices)
    else:
        kernel, rows_per_block = build_scalar(fmt, group), WARPS_PER_BLOCK  # v02's: a row a warp
    blocks = (out.size + rows_per_block - 1) // rows_per_block
    if scales is None:
        kernel[blocks, THREADS_PER_BLOCK](W, x, out)
    else:
        kernel[blocks, THREADS_PER_BLOCK](W, x, scales, out)
