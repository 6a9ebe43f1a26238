"""Int4 codes dequantized straight into tensor-core fragments: mma.sync does the multiply-adds, not FFMA.

Changes:
    From v06: the int4 kinds with in a multiple of 64 get a kernel of their
    own. A warp owns 32 rows, two m16n8k16 tiles. Per block of 64 columns
    lane (g, t) loads 8 bytes (16 codes) of rows g and g + 8 of each tile
    (``load_words2``, LDG.64) and x of the same 16 columns; four blocks'
    loads go out before any math. A LOP3 and an HFMA2 turn two codes into two
    exact float16 (``dequant``), PRMT pairs x to match (``pair_x``), and four
    ``mma_f16_f32`` per tile and block add W x into float32, every column of
    B being x. Lane t keeps row 8t + g (``pick``) and scales its group's sum
    in float32. in is split across a block's warps as in v06. fp32, fp16,
    int8, other int4 shapes and shapes under a block an SM run v06's
    kernels (``BASE``).

Why it is faster:
    Issue slots. v06's hot loop spends 490 instructions on 128 codes a lane
    (3.8 a code: HADD2.F32 conversions, FFMA, LOP3, shifts), which holds
    int4 at about 22 us at 8192 x 8192 where its bytes need 12. Here eight
    codes cost a shift, four LOP3 and four HFMA2, and an HMMA does eight
    multiply-adds a lane: no conversion, no FFMA a code. Compiled for sm_90
    the loop over 4 blocks of 32 rows is 417 instructions for 256 codes a
    lane (1.6 a code; int4_g64 424): 288 dequantize, 32 HMMA, 32 PRMT, 26
    loads, the rest indices and scales. Seven of B's eight columns repeat x:
    the tensor cores do 8x the work needed and still idle. fp16 already
    reads at its copy bandwidth; fp32 and int8 keep v06's kernels.
"""

import functools

from zoo.device import cuda, float32, int64, sm_count, uint32
from zoo.device.bits import hfma2, lop3, prmt
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_words2
from zoo.device.mma import load_half8, mma_f16_f32
from zoo.kernels.gemv import SPLIT_THREADS, TENSOR_WARPS_PER_SM, check_index_range, layout
from zoo.kernels.gemv import v06_split_k as v06

BASE = "v06"  # fp32, fp16, int8, and int4 rows that are not whole blocks of 64, run v06's kernels
MIN_CC = (8, 0)  # mma.sync m16n8k16 with float16 inputs (sm_75 has m16n8k8 only)

validate = check_index_range  # the step's size limit: its indices are uint32

THREADS_PER_BLOCK = SPLIT_THREADS  # a multiple of 32: up to 8 warps share 32 rows
WARPS_PER_BLOCK = THREADS_PER_BLOCK // 32
ROWS_PER_WARP = 32  # two m-tiles of 16: each x pair feeds two mma
PARTIALS = WARPS_PER_BLOCK * ROWS_PER_WARP  # shared memory: each warp's 32 sums, when warps share rows
# launch's target, as in v06: the fewest slices that give this many warps per SM. Half of v06's 16: a lane has 16
# LDG.64 in flight, so 8 x 32 x 128 bytes = 32 KB per SM, past the knee of the bytes-in-flight sweep, and two blocks
# of 8 warps (82-90 registers a thread) are all an SM holds: 8192 rows run as one wave of 2048 warps, 14336 as 1792.
# The simulator has one "SM": the spec makes it 2 there, so the test sizes take both paths.
WARPS_PER_SM = TENSOR_WARPS_PER_SM
BLOCK = 64  # columns of a block: lane t owns 16 of them (8 bytes of a row), four lanes cover one group of 64
UNROLL = 4  # blocks a warp loads before its mma: 16 LDG.64 (128 bytes) a lane in flight; even, so a run is whole groups
RUN_WORDS = UNROLL * 8  # a run's words a lane holds: codes (4 rows x 2 words a block), and x pairs (8 a block)
AND_XOR = (0xF0 & 0xCC) ^ 0xAA  # lop3's table of (a & b) ^ c
# float16 pairs, two to a word: 0x6400 is 1024 (exponent 10, so a code in the low mantissa bits counts 1 or 16)
LOW_MAGIC, HIGH_MAGIC = 0x64086408, 0x64806480  # 1024, and bit 3 of each nibble flipped: nibble ^ 8 = code + 8
ONE, MINUS_1032 = 0x3C003C00, 0xE408E408  # (1024 + code + 8) 1 - 1032 = code
SIXTEENTH, MINUS_72 = 0x2C002C00, 0xD480D480  # (1024 + 16 (code + 8)) / 16 - 72 = code


# -- one word of codes: eight columns of a row ------------------------------------------------------------------------
@jit(device=True)
def dequant(w):
    """The eight int4 codes of a word (nibble j is column j) as four words of two exact float16 each: (q0, q4),
    (q1, q5), (q2, q6), (q3, q7). Every intermediate is an integer below 2048: exact in float16."""
    high = w >> uint32(8)  # nibbles 2, 3 and 6, 7 where 0, 1 and 4, 5 were
    return (
        hfma2(lop3(w, 0x000F000F, LOW_MAGIC, AND_XOR), ONE, MINUS_1032),  # nibbles 0 and 4: 1024 + q + 8, less 1032
        hfma2(lop3(w, 0x00F000F0, HIGH_MAGIC, AND_XOR), SIXTEENTH, MINUS_72),  # 1 and 5: 1024 + 16 (q + 8)
        hfma2(lop3(high, 0x000F000F, LOW_MAGIC, AND_XOR), ONE, MINUS_1032),  # 2 and 6
        hfma2(lop3(high, 0x00F000F0, HIGH_MAGIC, AND_XOR), SIXTEENTH, MINUS_72),  # 3 and 7
    )


@jit(device=True)
def pair_x(x01, x23, x45, x67):
    """x of eight columns (four words, two float16 each) paired as ``dequant`` pairs the codes."""
    # prmt 0x5410: the low halves of both words; 0x7632: the high halves
    return prmt(x01, x45, 0x5410), prmt(x01, x45, 0x7632), prmt(x23, x67, 0x5410), prmt(x23, x67, 0x7632)


@jit(device=True)
def x_pairs(x, c):
    """x[c .. c + 15], one lane's 16 columns of a block, as eight words of pairs: those of c .. c + 7, then the rest."""
    x0, x1, x2, x3 = load_half8(x, c)
    x4, x5, x6, x7 = load_half8(x, c + 8)
    return pair_x(x0, x1, x2, x3) + pair_x(x4, x5, x6, x7)


@jit(device=True)
def mma_word(top, bottom, y0, y1, y2, y3, acc):
    """One word of codes of row g (top) and of row g + 8 (bottom) against x's pairs: two mma into acc.

    Fragments (zoo.device.mma): lane (g, t) gives A's rows g and g + 8 at k = 2t, 2t + 1 (registers a0, a1) and
    k = 2t + 8, 2t + 9 (a2, a3), and B's column g at the same k (b0, b1). Which W column a k stands for is free (the
    mma sums over k) as long as A and B agree: here k = 2t, 2t + 1 are columns j, j + 4 of the word, and so on."""
    t0, t1, t2, t3 = dequant(top)
    b0, b1, b2, b3 = dequant(bottom)
    d0, d1, d2, d3 = acc
    d0, d1, d2, d3 = mma_f16_f32(t0, b0, t1, b1, y0, y1, d0, d1, d2, d3)  # columns 0, 4 and 1, 5 of the word
    return mma_f16_f32(t2, b2, t3, b3, y2, y3, d0, d1, d2, d3)  # columns 2, 6 and 3, 7


@jit(device=True)
def mma_block(codes, at, xs, x_at, acc):
    """A tile's block of 64 columns: the lane's two words of row g (codes[at], codes[at + 1]) and of row g + 8
    (codes[at + 2], codes[at + 3]) against its x pairs (xs[x_at .. x_at + 7], ``x_pairs``): four mma. D's eight
    columns are equal (every column of B is x): d0 is row g's sum, d2 row g + 8's."""
    acc = mma_word(codes[at], codes[at + 2], xs[x_at], xs[x_at + 1], xs[x_at + 2], xs[x_at + 3], acc)
    return mma_word(codes[at + 1], codes[at + 3], xs[x_at + 4], xs[x_at + 5], xs[x_at + 6], xs[x_at + 7], acc)


@jit(device=True)
def pick(tile0, tile1, upper, odd):
    """The sum of this lane's own row out of two tiles' D: row g (d0) or g + 8 (d2) of tile 0 or 1. Every lane holds
    all four (D's columns are equal), so lane t keeps row j = t alone and scales one sum, not four."""
    mine0 = tile0[2] if odd else tile0[0]
    mine1 = tile1[2] if odd else tile1[0]
    return mine1 if upper else mine0  # selects: no branch, all lanes stay together for the next mma


@jit(device=True)
def load_block(W, starts, at, x, lane_x, codes, code_at, xs, x_at):
    """The lane's part of a block of 64 columns starting at byte ``at`` of a row: 8 bytes of each of its four rows
    (j = 0 .. 3, two words each) into codes[code_at ..], and x of its 16 columns, paired, into xs[x_at ..]."""
    for j in range(4):
        w0, w1 = load_words2(W, starts[j] + at)
        codes[code_at + 2 * j] = w0
        codes[code_at + 2 * j + 1] = w1
    pairs = x_pairs(x, 2 * at + lane_x)
    for p in range(8):
        xs[x_at + p] = pairs[p]


@functools.cache
def build(group, slices):
    """The tensor-core kernel for one int4 group size (64 or 128) and one number of warps per 32 rows."""
    groups_per_block = WARPS_PER_BLOCK // slices
    blocks_per_group = group // BLOCK  # 2 (int4) or 1 (int4_g64): the mma of a group add into one sum
    step = slices * UNROLL * BLOCK // 2  # bytes of a row between one run of a warp and its next

    @jit
    def gemv_int4_mma(W, x, scales, out):
        starts = cuda.local.array(4, int64)  # constant indices only: registers. Row j's bytes for this lane
        codes = cuda.local.array(RUN_WORDS, uint32)  # a run's codes: [block][row j][word]
        xs = cuda.local.array(RUN_WORDS, uint32)  # a run's x pairs: [block][pair]
        partials = cuda.shared.array(PARTIALS, float32)  # [warp][row of its 32]: the slices' sums
        # every index is uint32, cast back after each operation: numba widens the result of two uint32 to 64 bits
        lane = uint32(uint32(cuda.threadIdx.x) % uint32(32))  # the thread's lane in its warp
        warp = uint32(uint32(cuda.threadIdx.x) // uint32(32))  # the warp in its block: rows warp // slices
        g = uint32(lane // uint32(4))  # this lane's rows in a tile: g and g + 8 (the mma's groupID)
        t = uint32(lane % uint32(4))  # this lane's 16 columns of every block of 64 (the mma's thread in group)
        piece = uint32(warp % uint32(slices))  # its slice of the columns
        first = uint32((uint32(cuda.blockIdx.x) * uint32(groups_per_block) + warp // uint32(slices)) * ROWS_PER_WARP)
        rows = uint32(out.size)
        zero = float32(0)
        zeros = (zero, zero, zero, zero)
        total = zero  # the sum of row 8t + g of the warp's 32 (j = t: tile t // 2, row g + 8 when t is odd)
        if first < rows:  # the whole warp or none of it: every mma has its 32 lanes (and no return before the barrier)
            for j in range(4):  # row j = 2 tile + half of the warp: first + 16 tile + 8 half + g
                row = min(uint32(first + uint32(8 * j) + g), uint32(rows - uint32(1)))  # past the last: the last again
                starts[j] = int64(row * uint32(W.shape[1]) + t * uint32(8))  # rows: whole blocks of 32 bytes (launch)
            mine = min(uint32(first + uint32(8) * t + g), uint32(rows - uint32(1)))  # the row whose scales it applies
            upper, odd = t >= uint32(2), (t & uint32(1)) != uint32(0)
            lane_x = int64(t * uint32(16))  # the lane's first column in a block
            blocks = int64(x.size // BLOCK)  # in is a multiple of 64 (launch)
            runs = blocks // UNROLL  # runs of UNROLL blocks: whole groups of 64 or 128 (UNROLL is even)
            k = int64(piece)  # the warp's slice of the runs: every slices-th
            # the run's first byte in a row; 64 bits, so that the compiler steps one pointer a row
            at = int64(piece * uint32(UNROLL * BLOCK // 2))
            while k < runs:
                for b in range(UNROLL):  # every load of the run before any mma: UNROLL x 4 LDG.64 in flight a lane
                    load_block(W, starts, at + b * (BLOCK // 2), x, lane_x, codes, 8 * b, xs, 8 * b)
                tile0, tile1 = zeros, zeros  # the sums of the group in hand, each tile's D
                for b in range(UNROLL):  # b % blocks_per_group is a constant once the loop is unrolled
                    tile0 = mma_block(codes, 8 * b, xs, 8 * b, tile0)  # rows j = 0, 1
                    tile1 = mma_block(codes, 8 * b + 4, xs, 8 * b, tile1)  # rows j = 2, 3
                    if b % blocks_per_group == blocks_per_group - 1:  # the group's sum, scaled once in float32
                        scale = float32(scales[mine, (2 * at + b * BLOCK) // group])
                        total += pick(tile0, tile1, upper, odd) * scale
                        tile0, tile1 = zeros, zeros  # the next group starts from 0
                k += slices
                at += step
            i = int64(piece)  # the last blocks (fewer than UNROLL), one at a time, in turn to the slices
            while i < blocks - runs * UNROLL:
                at = (runs * UNROLL + i) * (BLOCK // 2)
                load_block(W, starts, at, x, lane_x, codes, 0, xs, 0)
                tile0 = mma_block(codes, 0, xs, 0, zeros)
                tile1 = mma_block(codes, 4, xs, 0, zeros)
                total += pick(tile0, tile1, upper, odd) * float32(scales[mine, 2 * at // group])  # a block: one group
                i += slices
            if slices == 1:
                row = first + uint32(8) * t + g
                if row < rows:
                    out[row] = total
            else:
                partials[warp * uint32(ROWS_PER_WARP) + uint32(8) * t + g] = total
        if slices > 1:
            cuda.syncthreads()  # every slice's sums are in shared memory
            row = first + lane
            if piece == uint32(0) and row < rows:  # the rows' first warp adds the slices, lane l row l
                total = float32(0)
                for s in range(slices):  # its own slice first, then the others, in order
                    total += partials[(warp + uint32(s)) * uint32(ROWS_PER_WARP) + lane]
                out[row] = total

    return gemv_int4_mma


def slices_for(rows):
    """Warps per 32 rows: the fewest (a power of two, at most a block) that make WARPS_PER_SM per SM."""
    groups = (rows + ROWS_PER_WARP - 1) // ROWS_PER_WARP
    slices = 1
    while slices < WARPS_PER_BLOCK and groups * slices < WARPS_PER_SM * sm_count():
        slices *= 2
    return slices


def launch(W, x, scales, out):
    fmt, n, group = layout(W, x, scales)
    if fmt != "int4" or n % BLOCK or not (aligned(W) and aligned(x)):
        return v06.launch(W, x, scales, out)  # v06's kernels: the other formats, and rows not whole blocks of 64
    slices = slices_for(out.size)
    rows_per_block = ROWS_PER_WARP * (WARPS_PER_BLOCK // slices)
    blocks = (out.size + rows_per_block - 1) // rows_per_block
    if blocks < sm_count():  # under a block an SM (4096 rows: 128 blocks of 32 rows x 8 slices; the simulator: never)
        return v06.launch(W, x, scales, out)  # v06's 4-row warps fill the GPU: 21.2 us against 23.1 on the H100
    build(group, slices)[blocks, THREADS_PER_BLOCK](W, x, scales, out)
