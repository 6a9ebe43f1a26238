"""Each warp streams its next run into shared memory with cp.async: loads in flight without registers.

Changes:
    From v07: the int4 tensor-core kernel no longer loads codes into
    registers. Each warp owns a ring of STAGES slots of shared memory (two:
    a double buffer), one run each: 256 columns (four blocks of 64) of its
    32 rows, 4 KB, and x of those columns. Before any math a warp asks for
    its first run (``copy_run``: nine 16-byte ``cp_async16`` a lane, each
    instruction four rows' whole 128-byte lines); at each run it waits for
    it (``cp_async_wait_group``), asks for the next into the other slot,
    and reads this one back (``read_run``, LDS.64 and LDS.128) into v07's
    fragments. A warp's runs are a contiguous range of its rows; a row's
    16-byte chunks are swizzled in a slot so the reads have no bank
    conflict; the scales are loaded with the copies, a run ahead, and stay
    float16 until used. The math (dequant, mma, pick) is v07's.

Why it is faster:
    v07 asks for a run (16 LDG.64 a lane), waits for all of it, does its
    math, and only then asks for the next: at 8192 x 8192 a warp has four
    runs, so the GPU's reads come in four bursts with the DRAM queue empty
    while 16 warps an SM do their math, and every group's scale is a DRAM
    load the math waits for. Here the next run is in flight during this
    one's math, and registers do not bound it (a slot is shared memory).
    What is left (ncu, H100): a warp spends 7 of every 11 cycles at the wait
    for its run, and this ring with the math taken out reaches only 78% of
    the copy of the same bytes: the pattern of 128-byte pieces of 32 rows,
    not the math, bounds it (see STAGES for the ring's depth; the figures
    of the variants tried: ``sweeps/NOTES.md``).
"""

import functools

from zoo.device import cuda, float16, float32, int64, sm_count, uint8, uint32
from zoo.device.bits import hfma2, lop3, prmt
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_words2, load_words4
from zoo.device.mma import SHARED_ALIGN, cp_async16, cp_async_commit, cp_async_wait_group, load_half8, mma_f16_f32
from zoo.kernels.gemv import SPLIT_THREADS, TENSOR_WARPS_PER_SM, check_index_range, layout
from zoo.kernels.gemv import v06_split_k as v06

FROM = "v07"  # the step this one changes: its math, its fragments
BASE = "v06"  # fp32, fp16, int8, and int4 rows that are not whole blocks of 64, run v06's kernels
MIN_CC = (8, 0)  # mma.sync m16n8k16 with float16 inputs, and cp.async (sm_80)

validate = check_index_range  # the step's size limit: its indices are uint32

THREADS_PER_BLOCK = SPLIT_THREADS  # a multiple of 32: up to 8 warps share 32 rows
WARPS_PER_BLOCK = THREADS_PER_BLOCK // 32
ROWS_PER_WARP = 32  # two m-tiles of 16: each x pair feeds two mma
PARTIALS = WARPS_PER_BLOCK * ROWS_PER_WARP  # shared memory: each warp's 32 sums, when warps share rows
WARPS_PER_SM = TENSOR_WARPS_PER_SM  # launch's target, as in v07 (2 in the simulator: both paths at the test sizes)
BLOCK = 64  # columns of a block: lane t owns 16 of them (8 bytes of a row), four lanes cover one group of 64
RUN_BLOCKS = 4  # blocks in a run: 256 columns, whole groups of 64 or 128
RUN_BYTES = RUN_BLOCKS * BLOCK // 2  # a row's bytes in a run: 128, eight 16-byte chunks (two per lane t)
RUN_WORDS = RUN_BLOCKS * 8  # a run's words a lane holds: codes (4 rows x 2 words a block), and x pairs (8 a block)
CODE_BYTES = ROWS_PER_WARP * RUN_BYTES  # 4 KB: a run's codes, the warp's 32 rows
X_BYTES = RUN_BLOCKS * BLOCK * 2  # 512: x of the run's 256 columns, float16, 16 bytes a lane
SLOT_BYTES = CODE_BYTES + X_BYTES  # one slot of a warp's ring: codes, then x
# Slots in a warp's ring: STAGES - 1 runs in flight while one is read. 2, a double buffer: 16 warps an SM (two blocks
# of 8) x 1 x 4 KB = 64 KB of weights in flight per SM, twice v07's 32 KB, in 2 x 8 x 2 x 4.5 KB = 144 KB of shared
# memory. 3 slots were 6-7% slower at 8192 x 8192 on both the H100 and the H200. With runs of
# 2 blocks, 2 KB: 3 slots (64 KB in flight again) was the best of 3 to 8, and 4 to 8 slower with every slot added.
STAGES = 2
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


# -- the ring: a warp's runs in shared memory ----------------------------------------------------------------------
# Slot layout: row r of the warp's 32 (r = 8j + g) at r * 128 bytes, its eight 16-byte chunks c at (c ^ g) * 16. Why
# the swizzle: lane (g, t) reads 8 bytes of chunk 2b + t // 2 of row 8j + g. Unswizzled, rows 128 bytes apart start on
# the same bank, so the eight rows' chunk lands on the same four banks: 8 wavefronts a read. Swizzled, chunk 2b lands
# at 2b ^ g and chunk 2b + 1 at (2b + 1) ^ g, sixteen places over eight rows that cover every bank twice: 2
# wavefronts, the least a warp's 256 bytes can take.
@jit(device=True)
def copy_run(W, x, lines, at, ring, slot, lane):
    """Ask for a run: the 32 rows' 128 bytes at byte ``at`` into the slot's codes, and 16 bytes of x's 256 columns
    (columns 2 at + 8 lane ..) into its x. Instruction i, lane l: chunk l % 8 of the warp's row 4 i + l // 8
    (``lines[i]``: where that row's chunk starts in W, less ``at``), so each instruction asks L2 for four whole
    128-byte lines: 32 rows in eight instructions, 36 requests a run with x's four. Eight rows' half lines an
    instruction (twice the requests) took 15.1 us against 14.7 at 8192 x 8192 on the H100."""
    quad = lane >> uint32(3)  # the lane's row in each group of four
    chunk = lane & uint32(7)  # its 16 bytes of those rows' 128
    for i in range(8):
        swizzle = quad + uint32(4 * (i % 2))  # (4 i + quad) % 8: the row's g, which its chunks are xored with
        dst = slot + (quad + uint32(4 * i)) * uint32(RUN_BYTES) + (chunk ^ swizzle) * uint32(16)
        cp_async16(ring, dst, W, int64(lines[i]) + at)
    cp_async16(ring, slot + uint32(CODE_BYTES) + lane * uint32(16), x, 2 * at + int64(8 * lane))  # 8 float16 a lane


@jit(device=True)
def set_copy_lines(lines, first, rows, row_bytes, lane):
    """copy_run's sources, once a warp: lines[i] is where chunk lane % 8 of row first + 4 i + lane // 8 starts in W
    (a row past the last: the last again). uint32: W is under 2^31 bytes (validate)."""
    for i in range(8):
        row = min(uint32(first + (lane >> uint32(3)) + uint32(4 * i)), uint32(rows - uint32(1)))
        lines[i] = uint32(row * row_bytes + (lane & uint32(7)) * uint32(16))


@jit(device=True)
def read_run(ring, slot, lane_src, g, t, codes, xs):
    """The lane's codes of a run out of its slot, in v07's order codes[8 b + 2 j + w] (block b, row j, word w), and
    its x pairs, xs[8 b ..], paired as v07's ``x_pairs`` pairs them.

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
        pairs = pair_x(x0, x1, x2, x3) + pair_x(x4, x5, x6, x7)
        for p in range(8):
            xs[8 * b + p] = pairs[p]


@jit(device=True)
def load_block(W, sources, at, x, lane_x, codes, xs):
    """v07's direct load of one block of 64 columns (8 bytes of each of the lane's four rows, and its x pairs) into
    codes[0 .. 7] and xs[0 .. 7]: the last blocks of a row, fewer than a run."""
    for j in range(4):
        w0, w1 = load_words2(W, sources[j] + at - lane_x // 2)  # sources[j]: the row + 16 t; the lane's bytes: + 8 t
        codes[2 * j] = w0
        codes[2 * j + 1] = w1
    pairs = x_pairs(x, 2 * at + lane_x)
    for p in range(8):
        xs[p] = pairs[p]


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
def build(group, slices, stages=STAGES):
    """The ring kernel for one int4 group size (64 or 128), one number of warps per 32 rows and a ring's slots."""
    groups_per_block = WARPS_PER_BLOCK // slices
    blocks_per_group = group // BLOCK  # 2 (int4) or 1 (int4_g64): the mma of a group add into one sum
    per_run = RUN_BLOCKS // blocks_per_group  # scales a run needs: 2 (int4) or 4 (int4_g64)
    queued = (stages - 1) * per_run  # scales of the runs in flight, loaded when their copies are asked for
    newest = queued - per_run  # where the newest run's scales go in the queue
    newer = stages - 2  # groups that may still be in flight when a run is read: a constant of the instruction
    ring_bytes = stages * SLOT_BYTES  # a warp's ring

    @jit(device=True)
    def ask_for_run(W, x, scales, lines, at, group_at, ring, slot, lane, mine, ahead_scales, place):
        """Ask for the run at byte ``at`` of the rows into ``slot`` and queue its scales (groups ``group_at`` ..) at
        ahead_scales[place ..]: with the codes, so a run's math never waits for DRAM. Returns the next run's byte
        and group."""
        copy_run(W, x, lines, at, ring, slot, lane)
        for k in range(per_run):
            ahead_scales[place + k] = scales[mine, group_at + uint32(k)]  # float16: no use before it is needed
        return at + RUN_BYTES, group_at + uint32(per_run)

    @jit
    def gemv_int4_ring(W, x, scales, out):
        lines = cuda.local.array(8, uint32)  # constant indices only: registers. copy_run's 16 bytes of 8 rows
        sources = cuda.local.array(4, int64)  # the last blocks' rows (load_block): row j's first byte, plus 16 t
        codes = cuda.local.array(RUN_WORDS, uint32)  # a run's codes: [block][row j][word]
        xs = cuda.local.array(RUN_WORDS, uint32)  # a run's x pairs: [block][pair]
        ahead_scales = cuda.local.array(queued, float16)  # the scales of the runs in flight, oldest first
        run_scales = cuda.local.array(per_run, float16)  # the scales of the run in hand
        partials = cuda.shared.array(PARTIALS, float32)  # [warp][row of its 32]: the slices' sums
        ring = cuda.shared.array(0, uint8, alignment=SHARED_ALIGN)  # [warp][slot][codes, x], sized by launch
        # every index is uint32, cast back after each operation: numba widens the result of two uint32 to 64 bits
        lane = uint32(uint32(cuda.threadIdx.x) % uint32(32))  # the thread's lane in its warp
        warp = uint32(uint32(cuda.threadIdx.x) // uint32(32))  # the warp in its block: rows warp // slices
        g = uint32(lane // uint32(4))  # this lane's rows in a tile: g and g + 8 (the mma's groupID)
        t = uint32(lane % uint32(4))  # this lane's 16 columns of every block of 64 (the mma's thread in group)
        piece = uint32(warp % uint32(slices))  # its slice of the runs
        first = uint32((uint32(cuda.blockIdx.x) * uint32(groups_per_block) + warp // uint32(slices)) * ROWS_PER_WARP)
        rows = uint32(out.size)
        zeros = (float32(0), float32(0), float32(0), float32(0))
        total = float32(0)  # the sum of row 8t + g of the warp's 32 (j = t: tile t // 2, row g + 8 when t is odd)
        if first < rows:  # the whole warp or none of it: every mma has its 32 lanes (and no return before the barrier)
            for j in range(4):  # row j = 2 tile + half of the warp: first + 16 tile + 8 half + g
                row = min(uint32(first + uint32(8 * j) + g), uint32(rows - uint32(1)))  # past the last: the last again
                sources[j] = int64(row) * int64(W.shape[1]) + int64(16 * t)  # rows 16-byte aligned (launch)
            set_copy_lines(lines, first, rows, uint32(W.shape[1]), lane)
            mine = min(uint32(first + uint32(8) * t + g), uint32(rows - uint32(1)))  # the row whose scales it applies
            upper, odd = t >= uint32(2), (t & uint32(1)) != uint32(0)
            lane_x = int64(t * uint32(16))  # the lane's first column in a block
            lane_dst = uint32(g * uint32(RUN_BYTES))  # where the lane's rows start in a slot
            lane_src = uint32(lane_dst + (t & uint32(1)) * uint32(8))  # and where its reads start
            ring_at = uint32(warp * uint32(ring_bytes))  # the warp's ring
            ring_end = uint32(ring_at + uint32(ring_bytes))
            blocks = int64(x.size // BLOCK)  # in is a multiple of 64 (launch)
            runs = blocks // RUN_BLOCKS  # whole groups of 64 or 128
            per_slice = (runs + slices - 1) // slices  # each warp a contiguous range of runs: piece per_slice ..
            mine_runs = max(int64(0), min(per_slice, runs - int64(piece) * per_slice))
            at = int64(piece) * per_slice * RUN_BYTES  # the next run to ask for: its first byte in a row
            group_at = uint32(int64(piece) * per_slice * per_run)  # and its first group (unsigned: no wraparound check)
            for r in range(stages - 1):  # the first STAGES - 1 runs, before any math
                if r < mine_runs:
                    slot = ring_at + uint32(r * SLOT_BYTES)
                    place = r * per_run  # the run's place in the scales' queue
                    at, group_at = ask_for_run(
                        W, x, scales, lines, at, group_at, ring, slot, lane, mine, ahead_scales, place
                    )
                cp_async_commit()  # a group even when empty: wait_group counts groups, not copies
            reading = ring_at  # the slot of run r
            writing = ring_at + uint32((stages - 1) * SLOT_BYTES)  # the slot of run r + STAGES - 1: read at r - 1
            r = int64(0)
            while r < mine_runs:
                for k in range(queued):  # the oldest run's scales out of the queue, the others one place on
                    if k < per_run:
                        run_scales[k] = ahead_scales[k]
                    if k + per_run < queued:
                        ahead_scales[k] = ahead_scales[k + per_run]
                cp_async_wait_group(newer)  # run r has landed: only the STAGES - 2 newer groups may be in flight
                cuda.syncwarp()  # run r's copies, made by every lane, are visible; every lane is done with slot r - 1
                if r + stages - 1 < mine_runs:  # at the queue's end, the oldest having moved out
                    at, group_at = ask_for_run(
                        W, x, scales, lines, at, group_at, ring, writing, lane, mine, ahead_scales, newest
                    )
                cp_async_commit()
                read_run(ring, reading, lane_src, g, t, codes, xs)
                total = add_run(codes, xs, run_scales, blocks_per_group, upper, odd, total)
                writing = reading  # the ring turns: the slot just read is the next one written
                reading += uint32(SLOT_BYTES)
                if reading == ring_end:
                    reading = ring_at
                r += 1
            i = int64(piece)  # the last blocks (fewer than a run), one at a time, in turn to the slices
            while i < blocks - runs * RUN_BLOCKS:
                at = (runs * RUN_BLOCKS + i) * (BLOCK // 2)
                load_block(W, sources, at, x, lane_x, codes, xs)
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
                for other in range(slices):  # its own slice first, then the others, in order
                    total += partials[(warp + uint32(other)) * uint32(ROWS_PER_WARP) + lane]
                out[row] = total

    return gemv_int4_ring


def slices_for(rows):
    """Warps per 32 rows: the fewest (a power of two, at most a block) that make WARPS_PER_SM per SM."""
    groups = (rows + ROWS_PER_WARP - 1) // ROWS_PER_WARP
    slices = 1
    while slices < WARPS_PER_BLOCK and groups * slices < WARPS_PER_SM * sm_count():
        slices *= 2
    return slices


def launch(W, x, scales, out, stages=STAGES):
    fmt, n, group = layout(W, x, scales)
    if fmt != "int4" or n % BLOCK or not (aligned(W) and aligned(x)):
        return v06.launch(W, x, scales, out)  # v06's kernels: the other formats, and rows not whole blocks of 64
    slices = slices_for(out.size)
    rows_per_block = ROWS_PER_WARP * (WARPS_PER_BLOCK // slices)
    blocks = (out.size + rows_per_block - 1) // rows_per_block
    shared_bytes = WARPS_PER_BLOCK * stages * SLOT_BYTES  # dynamic: 72 KB a block at 2 slots (the launch opts in)
    build(group, slices, stages)[blocks, THREADS_PER_BLOCK, 0, shared_bytes](W, x, scales, out)
