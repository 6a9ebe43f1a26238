"""Prepacked weights: W and its scales stored once in the order the kernel reads them, each warp's run one piece.

Changes:
    From v09: ``pack`` reorders an int4 W and its scales once, as a model's
    weights are reordered when they load: a warp's run, 32 rows x 128 bytes
    that v09 copied from 32 places a row apart, is 4 KB in one piece, its runs
    follow each other, its scales are one piece copied into its slot with the
    codes, and each word's codes come in the pairs x comes in (no PRMT). A
    slot is refilled once its run is in registers, before the math, so both
    slots are in flight. A packed W is (rows / 32, 16 in): launch refuses the
    row-major int4 W it would take, and a call through Variant packs once per
    weights array. Rows not of whole runs (in % 256) run v06's kernels.
    ``zoo tune gemv`` picks per shape class: slots, refill order, trigger,
    and a kernel (``KERNELS``: immediate offsets, one group a block).

Why it is faster:
    Row-major, a run is 32 pieces of 128 bytes 7 KB apart (4096 x 14336),
    and the next 128 bytes of each row come a run later: every piece is a
    request of its own to a DRAM page that has likely closed since. Packed,
    a warp reads one stream of 4 KB runs, as a copy kernel does. With the
    tuned trigger (a warp lets the next kernel start a run or two before its
    last, so that its first loads fill this call's idle end) the H100 reads
    int4 weights at about 3.8x fp16's rate at the three shapes; the H200
    reaches 3.5x only with the other kernels of the tuning (``KERNELS``).
    Every variant tried, with its figures: ``sweeps/NOTES.md``.
"""

import functools

import numpy as np

from zoo import SIMULATOR
from zoo.device import cuda, float32, int64, sm_count, uint8, uint32
from zoo.device.bits import hfma2, lop3, unpack_half2
from zoo.device.dependent_launch import let_next_kernel_start, wait_for_previous_kernel
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_word, load_words2, load_words4
from zoo.device.mma import (
    SHARED_ALIGN,
    cp_async4,
    cp_async8,
    cp_async16,
    cp_async_commit,
    cp_async_wait_group,
    mma_f16_f32,
)
from zoo.kernels.gemv import SPLIT_THREADS, TENSOR_WARPS_PER_SM, check_index_range, layout, ring
from zoo.kernels.gemv import v06_split_k as v06

FROM = "v09"  # the step this one changes: its ring, on packed weights
BASE = "v06"  # other formats, and rows not of whole runs: v06's kernels
MIN_CC = (9, 0)  # griddepcontrol, the device side of programmatic dependent launch (sm_90)

validate = check_index_range  # the step's size limit: its indices are uint32

THREADS_PER_BLOCK = SPLIT_THREADS  # a multiple of 32: up to 8 warps share 32 rows
# Why not 16 warps a block (twice the warps an SM at 4096 x 14336): one such block fills an SM's registers, so the
# next kernel's block cannot start beside it (10% slower on the H200 at 4096 x 14336)
WARPS_PER_BLOCK = THREADS_PER_BLOCK // 32
ROWS_PER_WARP = 32  # two m-tiles of 16: each x pair feeds two mma
# Why not one m-tile of 16 rows a warp, which gives 4096 x 14336 256 blocks, two an SM: x's shared-memory reads and the
# mma per byte of codes double: slower at every shape, and slower still with launch bounds of three blocks an SM (80
# registers, spilling)
WARPS_AT_128_REGISTERS = 16  # warps an SM's 65,536 registers hold at 128 a thread (the launch bounds)
WARPS_PER_SM = TENSOR_WARPS_PER_SM  # launch's target, as in v07 (2 in the simulator: both paths at the test sizes)
BLOCK = 64  # columns of a block: lane t owns 16 of them (8 bytes of a row), four lanes cover one group of 64
RUN_BLOCKS = 4  # blocks in a run: 256 columns, whole groups of 64 or 128
RUN_BYTES = RUN_BLOCKS * BLOCK // 2  # a row's bytes in a run: 128, eight 16-byte chunks (two per lane t)
RUN_WORDS = RUN_BLOCKS * 8  # a run's words a lane holds: codes (4 rows x 2 words a block), and x pairs (8 a block)
CODE_BYTES = ROWS_PER_WARP * RUN_BYTES  # 4 KB: a run's codes, the warp's 32 rows
X_BYTES = RUN_BLOCKS * BLOCK * 2  # 512: x of the run's 256 columns, float16, 16 bytes a lane
SCALES_AT = CODE_BYTES + X_BYTES  # a slot: codes, x, then the 32 rows' scales of the run (row r at r x 2 per_run)
# Slots in a warp's ring: STAGES runs in flight during a run's math (v09: STAGES - 1), each slot refilled as soon as its
# run is in registers (H100, the row-major ring at 4096 x 14336: 11.7 us -> 11.3; the H200 may prefer v09's
# order, ``refill_after_math``). 2: eight warps an SM (one block) x 2 x 4 KB = 64 KB of weights
# in flight, in 8 x 2 x 4.6 KB = 74 KB of shared memory a block, so the next kernel's block still fits beside it
# (dependent launch). The default: a GPU's tune table (ring.py) may pick 3 slots, v09's order (refill after the math),
# or an earlier trigger, per class.
STAGES = 2
# The kernels of this ring a shape class may run (``build``'s ``kernel``, the tune's candidates with the slots, the
# order and the trigger), each measured because none is fastest everywhere; the H200's picks are one of each:
#   "packed"             each copy's row and swizzle computed, eight sources kept in registers; blocks of eight warps
#   "immediate_offsets"  the copies' addresses a register plus a constant of the instruction (copy_codes_at_offsets)
#   "one_group_a_block"  those, a block the warps of one group of 32 rows: at 14336 x 4096 448 blocks of four warps,
#                        three or four an SM that leave as soon as their own warps are done, not 224 of eight, two an
#                        SM, where a full SM has no room for the next call's block (where the groups have eight
#                        warps, the same grid)
KERNELS = ("packed", "immediate_offsets", "one_group_a_block")


def slot_bytes(group):
    """One slot of a warp's ring for groups of ``group`` columns: codes, x, and each row's scales of the run (two
    float16 for groups of 128, four for 64): 4,736 or 4,864 bytes, multiples of 16."""
    return SCALES_AT + ROWS_PER_WARP * 2 * (RUN_BLOCKS * BLOCK // group)


AND_XOR = (0xF0 & 0xCC) ^ 0xAA  # lop3's table of (a & b) ^ c
# float16 pairs, two to a word: 0x6400 is 1024 (exponent 10, so a code in the low mantissa bits counts 1 or 16)
LOW_MAGIC, HIGH_MAGIC = 0x64086408, 0x64806480  # 1024, and bit 3 of each nibble flipped: nibble ^ 8 = code + 8
ONE, MINUS_1032 = 0x3C003C00, 0xE408E408  # (1024 + code + 8) 1 - 1032 = code
SIXTEENTH, MINUS_72 = 0x2C002C00, 0xD480D480  # (1024 + 16 (code + 8)) / 16 - 72 = code


# -- one word of codes: eight columns of a row ------------------------------------------------------------------------
@jit(device=True)
def dequant(w):
    """The eight int4 codes of a packed word as four words of two exact float16 each: nibbles (0, 4), (1, 5),
    (2, 6), (3, 7), which ``pack`` filled with columns (0, 1), (2, 3), (4, 5), (6, 7): x's own pairs. Every
    intermediate is an integer below 2048: exact in float16."""
    high = w >> uint32(8)  # nibbles 2, 3 and 6, 7 where 0, 1 and 4, 5 were
    return (
        hfma2(lop3(w, 0x000F000F, LOW_MAGIC, AND_XOR), ONE, MINUS_1032),  # nibbles 0 and 4: 1024 + q + 8, less 1032
        hfma2(lop3(w, 0x00F000F0, HIGH_MAGIC, AND_XOR), SIXTEENTH, MINUS_72),  # 1 and 5: 1024 + 16 (q + 8)
        hfma2(lop3(high, 0x000F000F, LOW_MAGIC, AND_XOR), ONE, MINUS_1032),  # 2 and 6
        hfma2(lop3(high, 0x00F000F0, HIGH_MAGIC, AND_XOR), SIXTEENTH, MINUS_72),  # 3 and 7
    )


@jit(device=True)
def mma_word(top, bottom, y0, y1, y2, y3, acc):
    """One word of codes of row g (top) and of row g + 8 (bottom) against x's pairs: two mma into acc.

    Fragments (zoo.device.mma): lane (g, t) gives A's rows g and g + 8 at k = 2t, 2t + 1 (registers a0, a1) and
    k = 2t + 8, 2t + 9 (a2, a3), and B's column g at the same k (b0, b1). Which W column a k stands for is free (the
    mma sums over k) as long as A and B agree: here k = 2t, 2t + 1 are columns 2j, 2j + 1 of the word (pack's order)."""
    t0, t1, t2, t3 = dequant(top)
    b0, b1, b2, b3 = dequant(bottom)
    d0, d1, d2, d3 = acc
    d0, d1, d2, d3 = mma_f16_f32(t0, b0, t1, b1, y0, y1, d0, d1, d2, d3)  # columns 0, 4 and 1, 5 of the word
    return mma_f16_f32(t2, b2, t3, b3, y2, y3, d0, d1, d2, d3)  # columns 2, 6 and 3, 7


@jit(device=True)
def mma_block(codes, at, xs, x_at, acc):
    """A tile's block of 64 columns: the lane's two words of row g (codes[at], codes[at + 1]) and of row g + 8
    (codes[at + 2], codes[at + 3]) against its x pairs (xs[x_at .. x_at + 7], x's words as ``read_run`` loads
    them): four mma. D's eight columns are equal (every column of B is x): d0 is row g's sum, d2 row g + 8's."""
    acc = mma_word(codes[at], codes[at + 2], xs[x_at], xs[x_at + 1], xs[x_at + 2], xs[x_at + 3], acc)
    return mma_word(codes[at + 1], codes[at + 3], xs[x_at + 4], xs[x_at + 5], xs[x_at + 6], xs[x_at + 7], acc)


@jit(device=True)
def pick(tile0, tile1, upper, odd):
    """The sum of this lane's own row out of two tiles' D: row g (d0) or g + 8 (d2) of tile 0 or 1. Every lane holds
    all four (D's columns are equal), so lane t keeps row j = t alone and scales one sum, not four."""
    mine0 = tile0[2] if odd else tile0[0]
    mine1 = tile1[2] if odd else tile1[0]
    return mine1 if upper else mine0  # selects: no branch, all lanes stay together for the next mma


# -- the packed layout: a warp's runs in the order it reads them ---------------------------------------------------
# Row-major, run k of the warp's 32 rows is 128 bytes at 128 k in each of 32 rows, a row (in / 2 bytes) apart. Packed,
# W is (rows / 32, 16 in): row q holds rows 32 q .. 32 q + 31's runs one after another, run k at 4096 k, its row r at
# 4096 k + 128 r. Byte b of row 32 q + r's run k is at [q, 4096 k + 128 r + b]: the slot's order, less the swizzle.
# The scales likewise: (rows / 32, 32 groups), run k's 32 rows x per_run at 32 per_run k, row r's at per_run r.
# Within each 4-byte word of codes, column c of its eight moves to nibble NIBBLE[c] (``_paired``): dequant's pairs
# of nibbles (j, j + 4) are then columns (2j, 2j + 1), the pairs x's float16 already come in, so the kernel needs no
# PRMT to pair x as v07 to v09 do (33 fewer instructions a run).
NIBBLE = (0, 4, 1, 5, 2, 6, 3, 7)
# A warp's runs are one contiguous range. Orders that read W more in step (a group's warps taking its runs in turn;
# W stored step-major, the grid reading one window of it at a time) gain 2-3% at 8192 x 8192, which meets 3.5x without
# them, and lose at the Llama shapes, which do not (H200).


def _paired(xp, codes):
    """uint8 codes (rows of whole 4-byte words, row-major nibbles: nibble c of a word is column c) with column c of
    each word moved to nibble NIBBLE[c]."""
    words = codes.view(xp.uint32)
    out = xp.zeros_like(words)
    for column, nibble in enumerate(NIBBLE):
        out |= ((words >> xp.uint32(4 * column)) & xp.uint32(0xF)) << xp.uint32(4 * nibble)
    return out.view(xp.uint8)


def _packed(xp, a, runs):
    """``a`` (rows, runs x per) reordered as above: (rows / 32 rounded up, 32 runs per), rows past the last zero."""
    rows, width = a.shape
    groups = -(-rows // ROWS_PER_WARP)
    padded = xp.zeros((groups * ROWS_PER_WARP, width), a.dtype)  # the last group's missing rows: zeros, never stored
    padded[:rows] = a
    tiles = padded.reshape(groups, ROWS_PER_WARP, runs, width // runs).transpose(0, 2, 1, 3)  # [group][run][row]
    return xp.ascontiguousarray(tiles).reshape(groups, ROWS_PER_WARP * width)


def _packed_pair(xp, W, scales, runs):
    """[W, scales] of one library (``xp``) as the kernel reads them: both ``_packed``, W's nibbles ``_paired``."""
    return [_paired(xp, _packed(xp, W, runs)), _packed(xp, scales, runs)]


def pack(W, x, scales=None):
    """The inputs as this step's kernels read them, made once per W: W and scales packed (``_packed_pair``) where the
    kernel takes the call, else all as they are. Any library in, the same out (NumPy on the host, CuPy or numba on
    the device: packed by CuPy there, by NumPy in the simulator)."""
    if scales is None or not takes(W, x, scales):
        return (W, x) if scales is None else (W, x, scales)  # as given
    runs = x.size // (RUN_BLOCKS * BLOCK)
    on_host = isinstance(W, np.ndarray)
    numba_array = hasattr(W, "copy_to_host")  # numba's device array (the simulator's too), not CuPy's
    if on_host or SIMULATOR:  # the simulator's device arrays: through the host
        W_host, scales_host = (W, scales) if on_host else (W.copy_to_host(), scales.copy_to_host())
        packed = _packed_pair(np, W_host, scales_host, runs)
        if not on_host:
            packed = [cuda.to_device(a) for a in packed]
        return packed[0], x, packed[1]
    import cupy

    packed = _packed_pair(cupy, cupy.asarray(W), cupy.asarray(scales), runs)
    if numba_array:
        packed = [cuda.as_cuda_array(a) for a in packed]  # a numba view that keeps the CuPy array alive
    return packed[0], x, packed[1]


def is_packed(W, x):
    """Whether W has the packed shape: 16 in bytes a row (32 rows of in / 2), not a row-major int4 W's in / 2."""
    return W.ndim == 2 and W.shape[1] == 16 * x.size


# -- the ring: a warp's runs in shared memory ----------------------------------------------------------------------
# Slot layout: row r of the warp's 32 (r = 8j + g) at r * 128 bytes, its eight 16-byte chunks c at (c ^ g) * 16. Why
# the swizzle: lane (g, t) reads 8 bytes of chunk 2b + t // 2 of row 8j + g. Unswizzled, rows 128 bytes apart start on
# the same bank, so the eight rows' chunk lands on the same four banks: 8 wavefronts a read. Swizzled, chunk 2b lands
# at 2b ^ g and chunk 2b + 1 at (2b + 1) ^ g, sixteen places over eight rows that cover every bank twice: 2
# wavefronts, the least a warp's 256 bytes can take.
#
# Why every lane asks for 16 bytes, and not one lane for the run's 4 KB with a TMA bulk copy (``cp.async.bulk``, its
# bytes counted on an mbarrier a slot, ``pack`` storing each run already swizzled): right sums from fewer
# instructions, but 11 to 18% slower (H200, 4096 x 14336).
@jit(device=True)
def copy_codes(W, lines, at, ring, slot, lane):
    """Ask for a run's codes: the 32 rows' 128 bytes at byte ``at`` of a row into the slot. Instruction i, lane l:
    chunk l % 8 of the warp's row 4 i + l // 8, packed at 32 ``at`` (the run's 4 KB) + 512 i + 16 l (``lines[i]``
    holds all but the first), so each instruction asks for 512 bytes in one piece: 4 KB in eight."""
    quad = lane >> uint32(3)  # the lane's row in each group of four
    chunk = lane & uint32(7)  # its 16 bytes of those rows' 128
    for i in range(8):
        swizzle = quad + uint32(4 * (i % 2))  # (4 i + quad) % 8: the row's g, which its chunks are xored with
        dst = slot + (quad + uint32(4 * i)) * uint32(RUN_BYTES) + (chunk ^ swizzle) * uint32(16)
        cp_async16(ring, dst, W, int64(lines[i]) + 32 * at)  # run at // 128, 4096 bytes each


@jit(device=True)
def copy_x(x, at, ring, slot, lane):
    """Ask for x of the run at byte ``at``: its 256 columns (2 at + 8 lane ..), 16 bytes a lane, after the codes.

    Why x rides in the slot, a ring's turn ahead, and is not loaded from global memory when its run is read (which
    would let the ring refill after the wait without waiting for x): tried on this kernel, x loaded at each run's
    start was about 25% slower on the H100, with or without the warp's x prefetched into L1 after the wait: every
    run's math then waits for a load's latency."""
    cp_async16(ring, slot + uint32(CODE_BYTES) + lane * uint32(16), x, 2 * at + int64(8 * lane))  # 8 float16 a lane


# Why a run's scales ride in its slot, copied with its codes, and are not loaded into registers a run ahead: that load
# came from DRAM through the queues the copies fill (~1.2 us under load), so a warp whose codes had landed could wait
# on its scales (8% slower on the H100 at 14336 x 4096)
@jit(device=True)
def copy_two_scales(scales, scales_row, at, ring, slot, lane):
    """Ask for the scales of the run at byte ``at``, groups of 128: lane l the two of row l of the warp's 32, packed
    at 64 (at // 128) (the run's 64 scales) from ``scales_row`` (the group's first plus 2 l, flat)."""
    cp_async4(ring, slot + uint32(SCALES_AT) + lane * uint32(4), scales, int64(scales_row) + at // 2)


@jit(device=True)
def copy_four_scales(scales, scales_row, at, ring, slot, lane):
    """The same for groups of 64: the four of row l, packed at 128 (at // 128) from ``scales_row`` (+ 4 l), 8 bytes."""
    cp_async8(ring, slot + uint32(SCALES_AT) + lane * uint32(8), scales, int64(scales_row) + at)


@jit(device=True)
def set_copy_lines(lines, group_at, lane):
    """copy_codes's sources, once a warp: lines[i] is where lane l's 16 bytes of instruction i start in the packed W,
    less the run's 32 ``at``: the warp's first byte (``group_at``) + 512 i + 16 l. uint32: W is under 2^31 bytes."""
    for i in range(8):
        lines[i] = uint32(group_at + uint32(512 * i) + lane * uint32(16))


# Immediate offsets (the kernels "immediate_offsets" and "one_group_a_block"): every address below is a register plus a
# constant of the instruction, which ptxas folds into the LDGSTS ([R + imm], no instruction of its own), where
# ``copy_codes`` computes each copy's row and swizzle and keeps eight sources in registers: a run's loop of 445 SASS
# instructions, not 488 (sm_90). It pays where a run's math weighs against the memory (4096 x 14336 on the H200) and
# costs where it does not (8192 x 8192): a candidate of the tuning, not the rule.
@jit(device=True)
def copy_codes_at_offsets(W, source, at, ring, slot, lane):
    """Ask for a run's codes: the 32 rows' 128 bytes at byte ``at`` of a row into the slot. Instruction i, lane l:
    chunk l % 8 of the warp's row 4 i + l // 8, packed at 32 ``at`` (the run's 4 KB) + 512 i + 16 l, so each
    instruction asks for 512 bytes in one piece: 4 KB in eight. Its source is ``source`` (the warp's first byte
    + 16 l) + 32 ``at`` + 512 i; its destination row 4 i + quad is 512 i past row quad, its chunk xored with the
    row's g = (4 i + quad) % 8: quad when i is even, quad + 4 when i is odd. Two bases, then, each + 512 i."""
    quad = lane >> uint32(3)  # the lane's row in each group of four
    chunk = lane & uint32(7)  # its 16 bytes of those rows' 128
    row = slot + quad * uint32(RUN_BYTES)  # row quad of the slot; row 4 i + quad is 512 i on
    even = row + (chunk ^ quad) * uint32(16)  # i even: g = quad
    odd = row + (chunk ^ quad ^ uint32(4)) * uint32(16)  # i odd: g = quad + 4, which is quad ^ 4 (quad < 4)
    src = int64(source) + 32 * at  # the lane's 16 bytes of the run's first 512
    for i in range(8):  # unrolled: 512 i is a constant of each instruction
        cp_async16(ring, (odd if i % 2 else even) + uint32(512 * i), W, src + 512 * i)


@jit(device=True)
def copy_source(group_at, lane):
    """copy_codes's source, once a warp: where lane l's 16 bytes of a run's first instruction start in the packed W,
    less the run's 32 ``at``: the warp's first byte (``group_at``) + 16 l. uint32: W is under 2^31 bytes."""
    return uint32(group_at + lane * uint32(16))


@jit(device=True)
def read_run(ring, slot, lane_src, g, t, codes, xs):
    """The lane's codes of a run out of its slot, in v07's order codes[8 b + 2 j + w] (block b, row j, word w), and
    its x pairs, xs[8 b ..]: x's words as they are, two columns each, since ``pack`` ordered the nibbles to match.

    Block b of row 8j + g, lane t: bytes 8 t .. 8 t + 7 of the block, in chunk 2 b + t // 2, its first or second 8
    bytes (``lane_src`` holds g * 128 and that 8 (t % 2)). Its x: columns 64 b + 16 t .. + 15, 32 bytes, the same for
    the eight lanes of a t (a broadcast)."""
    for b in range(RUN_BLOCKS):
        chunk = (uint32(2 * b) + (t >> uint32(1))) ^ g  # where the swizzle put the chunk
        for j in range(4):
            w0, w1 = load_words2(ring, slot + lane_src + uint32(j * 8 * RUN_BYTES) + chunk * uint32(16))
            codes[8 * b + 2 * j] = w0
            codes[8 * b + 2 * j + 1] = w1
        at = slot + uint32(CODE_BYTES + 128 * b) + t * uint32(32)  # 2 bytes a column
        x0, x1, x2, x3 = load_words4(ring, at)
        x4, x5, x6, x7 = load_words4(ring, at + uint32(16))
        pairs = (x0, x1, x2, x3, x4, x5, x6, x7)  # no PRMT: the codes come paired as x is (``pack``)
        for p in range(8):
            xs[8 * b + p] = pairs[p]


# What the math costs: with add_run replaced by an XOR of the run's words, every copy and read kept, 4096 x 14336
# takes 11% less time (H200): at the Llama shapes even free math leaves this ring near the goal, and cheaper math (the
# magic numbers' offsets taken out once a group, shorter mma chains) moved less than that. The rest is the ring's: the
# read roof (``zoo gemv-read-roof``, 64 KB an SM before the wait) is barely below the math-free ring there.
@jit(device=True)
def add_run(codes, xs, run_scales, blocks_per_group, upper, odd, total):
    """A run's mma, each group's sum scaled once in float32 and added to the lane's row total."""
    zero = float32(0)
    tile0 = tile1 = (zero, zero, zero, zero)  # the sums of the group in hand, each tile's D
    for b in range(RUN_BLOCKS):  # b % blocks_per_group is a constant once the loop is unrolled
        tile0 = mma_block(codes, 8 * b, xs, 8 * b, tile0)  # rows j = 0, 1
        tile1 = mma_block(codes, 8 * b + 4, xs, 8 * b, tile1)  # rows j = 2, 3
        if b % blocks_per_group == blocks_per_group - 1:  # the group's sum, scaled once in float32
            total += pick(tile0, tile1, upper, odd) * float32(run_scales[b // blocks_per_group])
            tile0 = tile1 = (zero, zero, zero, zero)  # the next group starts from 0
    return total


@functools.cache
def build(group, slices, stages=STAGES, refill_after_math=False, trigger_early=0, kernel=KERNELS[0]):
    """The ring kernel for int4 in groups of ``group`` (64 or 128), for one number of warps per 32 rows, ``stages``
    slots a warp, a slot refilled as soon as its run is in registers or (``refill_after_math``, v09's order)
    after the run's math, each warp letting the next kernel start ``trigger_early`` runs before its last, and
    ``kernel`` one of ``KERNELS``: its copies' addresses, and the warps of a block."""
    at_offsets = kernel != "packed"  # the copies' addresses a register plus a constant (``copy_codes_at_offsets``)
    one_group = kernel == "one_group_a_block"  # a block is the slices of one group of 32 rows
    threads = 32 * slices if one_group else THREADS_PER_BLOCK
    groups_per_block = 1 if one_group else WARPS_PER_BLOCK // slices
    # shared memory: each warp's 32 sums. Four blocks of one group's four warps with three slots take 4 x (56,832 B
    # of ring + 512 of sums + 1,024 the GPU keeps a block) = 233,472 B, an SM's 228 KB exactly: with eight warps' sums
    # (1 KB) three fit, twelve warps an SM, not sixteen
    partials_size = threads // 32 * ROWS_PER_WARP
    blocks_an_sm = WARPS_AT_128_REGISTERS * 32 // threads  # two blocks of eight warps, four of four
    blocks_per_group = group // BLOCK  # 1 or 2: the mma of a group add into one sum
    per_run = RUN_BLOCKS // blocks_per_group  # scales a run needs: 4 or 2
    copy_scales = copy_two_scales if per_run == 2 else copy_four_scales  # a row's scales of a run: 4 or 8 bytes
    copy_run = copy_codes_at_offsets if at_offsets else copy_codes  # a run's codes: from one source or eight
    newer = stages - 1  # groups that may still be in flight when a run is read: a constant of the instruction
    slot_size = slot_bytes(group)
    ring_bytes = stages * slot_size  # a warp's ring

    # launch_bounds: at most 128 registers a thread, so that two blocks of 256 threads fit on an SM, as in v09 (the
    # next kernel's blocks beside this one's). A run held in registers while the next copies are asked for takes 64
    # of them; without the bound ptxas gave a draft of this ring 134 and an SM one block, which was slower
    @jit(dependent_launch=True, launch_bounds=(threads, blocks_an_sm))  # launched to overlap the kernel before it
    def gemv_int4_packed_ring(W, x, scales, out):
        if not at_offsets:  # a constant of the build: only one of its branches is compiled
            addresses = cuda.local.array(8, uint32)  # constant indices only: registers. copy_codes's sources
        codes = cuda.local.array(RUN_WORDS, uint32)  # a run's codes: [block][row j][word]
        xs = cuda.local.array(RUN_WORDS, uint32)  # a run's x pairs: [block][pair]
        run_scales = cuda.local.array(per_run, float32)  # the scales of the run in hand, read out of its slot
        partials = cuda.shared.array(partials_size, float32)  # [warp][row of its 32]: the slices' sums
        ring = cuda.shared.array(0, uint8, alignment=SHARED_ALIGN)  # [warp][slot][codes, x, scales], sized by launch
        # every index is uint32, cast back after each operation: numba widens the result of two uint32 to 64 bits
        lane = uint32(uint32(cuda.threadIdx.x) % uint32(32))  # the thread's lane in its warp
        warp = uint32(uint32(cuda.threadIdx.x) // uint32(32))  # the warp in its block: rows warp // slices
        g = uint32(lane // uint32(4))  # this lane's rows in a tile: g and g + 8 (the mma's groupID)
        t = uint32(lane % uint32(4))  # this lane's 16 columns of every block of 64 (the mma's thread in group)
        if one_group:
            piece = warp  # its slice of the runs: the block is one group's warps
            first = uint32(uint32(cuda.blockIdx.x) * uint32(ROWS_PER_WARP))  # the block's group: rows first ..
        else:
            piece = uint32(warp % uint32(slices))  # its slice of the runs
            first = uint32(
                (uint32(cuda.blockIdx.x) * uint32(groups_per_block) + warp // uint32(slices)) * ROWS_PER_WARP
            )
        rows = uint32(out.size)
        total = float32(0)  # the sum of row 8t + g of the warp's 32 (j = t: tile t // 2, row g + 8 when t is odd)
        if first < rows:  # the whole warp or none of it: every mma has its 32 lanes (and no return before the barrier)
            # the warp's 32 rows are packed row first // 32 of W: first x in / 2 bytes in (rows past the last: zeros)
            if at_offsets:  # one source: copy_codes_at_offsets adds each copy's offset
                addresses = copy_source(uint32(first * uint32(x.size // 2)), lane)
            else:  # eight sources, one a copy
                set_copy_lines(addresses, uint32(first * uint32(x.size // 2)), lane)
            upper, odd = t >= uint32(2), (t & uint32(1)) != uint32(0)
            # lane l copies the scales of row l of the warp's 32, per_run of them beside lane l - 1's; lane (g, t)
            # applies row 8t + g's, at 2 per_run bytes a row in the slot
            scales_row = uint32(first * uint32(x.size // group) + uint32(per_run) * lane)
            scales_at = uint32(SCALES_AT) + (uint32(8) * t + g) * uint32(2 * per_run)
            lane_dst = uint32(g * uint32(RUN_BYTES))  # where the lane's rows start in a slot
            lane_src = uint32(lane_dst + (t & uint32(1)) * uint32(8))  # and where its reads start
            ring_at = uint32(warp * uint32(ring_bytes))  # the warp's ring
            ring_end = uint32(ring_at + uint32(ring_bytes))
            runs = int64(x.size // (RUN_BLOCKS * BLOCK))  # in is a multiple of 256 (launch): whole runs, no last blocks
            per_slice = (runs + slices - 1) // slices  # each warp a contiguous range of runs: piece per_slice ..
            mine_runs = max(int64(0), min(per_slice, runs - int64(piece) * per_slice))
            at = int64(piece) * per_slice * RUN_BYTES  # the next run to ask for: its first byte in a row
            first_at = at  # the first run's byte: its x is asked for after the wait
            # the first STAGES - 1 runs' codes and scales, before the wait (as v09). More landed by the wait was
            # slower: run 0 loaded straight into registers, its slot then holding run STAGES, or the warp's next
            # runs asked of L2 (``cp.async.bulk.prefetch.L2``)
            for r in range(stages - 1):
                if r < mine_runs:
                    copy_run(W, addresses, at, ring, ring_at + uint32(r * slot_size), lane)
                    copy_scales(scales, scales_row, at, ring, ring_at + uint32(r * slot_size), lane)  # weights too
                    at += RUN_BYTES
            # the kernel before this one (launched ahead of it in the stream) has finished and its writes are
            # visible from here on: x may be its output, and out may be what it reads; nothing above touched them.
            # What that costs (4096 x 14336, H100, each warp's %globaltimer in a graph of calls): the first run's math
            # starts about 1.4 us after the last warp of the call before ends, of an 11 us call
            wait_for_previous_kernel()
            for r in range(stages):  # every slot's x, and the last slot's codes: a group a run, the first run's alone
                if r < mine_runs:
                    slot = ring_at + uint32(r * slot_size)
                    if r == stages - 1:  # the slot v09 kept free for its first refill (asking for it before the wait
                        copy_run(W, addresses, at, ring, slot, lane)  # too was slower at every shape: it
                        copy_scales(scales, scales_row, at, ring, slot, lane)  # competes with the last reads of
                        at += RUN_BYTES  # the kernel before, which the wait is waiting for)
                    copy_x(x, first_at + r * RUN_BYTES, ring, slot, lane)
                cp_async_commit()  # a group even when empty: wait_group counts groups (the first holds the codes)
            reading = ring_at  # the slot of run r, and of run r + STAGES once run r is in registers
            # the run at which this warp lets the next kernel start placing blocks (once every block of this one has, or
            # has ended), each asking for its first runs before its wait: ``trigger_early`` runs before the warp's last
            # (0: at its last, when every copy of the warp is asked for), the GPU's pick (``zoo tune``). Too early, the
            # next kernel's first runs compete with this one's; too late, they are not yet asked for when this kernel's
            # last math and the wait leave the memory idle. On the H100 a run before the last was best (4096 x 14336,
            # three slots); the H200 drains a call's runs faster and wants them earlier still
            trigger_at = max(mine_runs - int64(1 + trigger_early), int64(0))
            r = int64(0)
            while r < mine_runs:
                if r == trigger_at:
                    let_next_kernel_start()
                cp_async_wait_group(newer)  # run r has landed: only the STAGES - 1 newer groups may be in flight
                cuda.syncwarp()  # run r's copies, made by every lane, are visible to every lane
                read_run(ring, reading, lane_src, g, t, codes, xs)  # run r in registers
                for k in range(per_run // 2):  # and its scales (its row's, two float16 a word): the slot is free
                    word = load_word(ring, reading + scales_at + uint32(4 * k))
                    run_scales[2 * k], run_scales[2 * k + 1] = unpack_half2(word)
                cuda.syncwarp()  # every lane has read slot r before any lane's copy may overwrite it
                if refill_after_math:  # v09's order: STAGES - 1 runs in flight during the math, the slot waits
                    total = add_run(codes, xs, run_scales, blocks_per_group, upper, odd, total)
                # (asking L2 for the warp's run 1, 2 or 3 beyond the ring here too, one cp.async.bulk.prefetch.L2
                # from lane 0 with each refill, was slower at every shape on the H200)
                if r + stages < mine_runs:  # run r + STAGES into the slot just read
                    copy_run(W, addresses, at, ring, reading, lane)
                    copy_scales(scales, scales_row, at, ring, reading, lane)
                    copy_x(x, at, ring, reading, lane)
                    at += RUN_BYTES
                cp_async_commit()  # a group even when empty: wait_group counts groups
                if not refill_after_math:  # refilled before the math: STAGES runs in flight during the math
                    total = add_run(codes, xs, run_scales, blocks_per_group, upper, odd, total)
                reading += uint32(slot_size)  # the ring turns
                if reading == ring_end:
                    reading = ring_at
                r += 1
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
                for other in range(slices):  # its own slice first, then the others, in order
                    total += partials[(warp + uint32(other)) * uint32(ROWS_PER_WARP) + lane]
                out[row] = total

    return gemv_int4_packed_ring


# Why a block takes whole groups of 32 rows although 4096 x 14336 then leaves 4 of the H200's 132 SMs idle: the call's
# runs spread evenly over every warp, a group shared by warps of several blocks and added through L2 by the last of
# them to finish, was about 45% slower there (H200); the slices of a block add through shared memory. And why
# one_group_a_block keeps these slices: eight warps a group at 14336 x 4096 (448 blocks of eight) was slower too.
def slices_for(rows):
    """Warps per 32 rows: the fewest (a power of two, at most a block) that make WARPS_PER_SM per SM."""
    groups = (rows + ROWS_PER_WARP - 1) // ROWS_PER_WARP
    slices = 1
    while slices < WARPS_PER_BLOCK and groups * slices < WARPS_PER_SM * sm_count():
        slices *= 2
    return slices


def grid_for(rows, kernel=KERNELS[0]):
    """(warps per 32 rows, blocks, threads a block) of ``kernel``'s grid for ``rows`` outputs: v09's, or for
    "one_group_a_block" a block of each group's slices."""
    slices = slices_for(rows)
    groups_per_block = 1 if kernel == "one_group_a_block" else WARPS_PER_BLOCK // slices
    rows_per_block = ROWS_PER_WARP * groups_per_block
    return slices, (rows + rows_per_block - 1) // rows_per_block, 32 * slices * groups_per_block


def takes(W, x, scales):
    """The call's group (64 or 128) when this kernel takes it, else 0: int4 (row-major, as the family makes it) in
    whole runs (in a multiple of 256, so a row's scales of a run are one aligned copy of 4 or 8 bytes), 16-byte
    aligned codes and x, and scales 8-byte aligned with their rows packed."""
    fmt, n, group = layout(W, x, scales)
    taken = (
        fmt == "int4"
        and n % (RUN_BLOCKS * BLOCK) == 0
        and aligned(W)
        and aligned(x)
        and scales.strides[0] == 2 * scales.shape[1]  # rows packed: the flat index of row r is r x groups
        and aligned(scales, 8)
    )
    return group if taken else 0


def launch(W, x, scales, out):
    """The packed ring on inputs ``pack`` made (int4 in whole runs); anything else it did not pack: v06's kernels."""
    if not is_packed(W, x):
        if takes(W, x, scales):
            raise ValueError("v10 takes its int4 weights packed: pass W and scales through pack(W, x, scales) first")
        return v06.launch(W, x, scales, out)
    groups = -(-out.size // ROWS_PER_WARP)
    if W.shape[0] != groups or scales.shape[0] != groups or scales.shape[1] % ROWS_PER_WARP:
        raise ValueError(
            f"packed W and scales must have {groups} rows (one per 32 of out's {out.size}), got "
            f"{W.shape[0]} and {tuple(scales.shape)}"
        )
    if not aligned(x):
        raise ValueError("v10's packed weights take x 16-byte aligned (a copy of 16 bytes a lane)")
    # the ring measured fastest on this GPU for the call's shape class: its kernel, slots, order of a slot's refill
    # and trigger (ring.py; without a table, each class's default)
    launch_ring(ring.ring_for(out.size, KERNELS), W, x, scales, out)


def launch_ring(choice, W, x, scales, out):
    """Launch the packed ring ``choice`` (a ``ring.Ring``) names on packed inputs: its kernel, slots, order of a
    slot's refill and trigger."""
    group = x.size // (scales.shape[1] // ROWS_PER_WARP)  # x.size // groups in a row: 128 or 64
    slices, blocks, threads = grid_for(out.size, choice.kernel)
    shared_bytes = threads // 32 * choice.stages * slot_bytes(group)  # dynamic: 74 or 76 KB for 8 warps, 2 slots
    kernel = build(group, slices, choice.stages, choice.refill_after_math, choice.trigger_early, choice.kernel)
    kernel[blocks, threads, 0, shared_bytes](W, x, scales, out)
