"""One block per kv head and split: the g q heads that share a cache read each key and value once, together.

Changes:
    From v02: a block owns a kv head's slice of the cache and all R = g Q
    query rows that read it (Llama-3-8B: 4 q heads, 1 query). Phase 1: thread
    t reads key k0 + t's row of K once and dots it with the R rows staged in
    shared memory, writing R scores to a shared R x 128 array (the attention
    family's v03 phase 1, with q heads where it had query rows). Phase 2: warp
    w takes rows w, w + 4, ...: the block's max, the new running max and sum,
    exp(s - m') in place, and the row's rescale into shared memory. Phase 3:
    thread t rescales and accumulates its columns of o for all R rows, each
    element of V read once for R multiply-adds. The grid is (kv head, split);
    the partial rows and ``combine`` are v02's, a row being (kv head, r).

Why it is faster:
    Bytes. In v02 each kv head's cache was read by its g q heads' blocks
    apart, g times the cache's bytes from L2 and, when those blocks did not
    run together, from DRAM; here it crosses the chip once, and each load of K
    or V feeds g multiply-adds instead of one, against the copy's one read.
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK
from zoo.errors import OutOfRange
from zoo.kernels.decode_attention import (
    SPLIT_BLOCKS_PER_SM,  # blocks a launch aims for, per SM
    THREADS,  # threads per block: a key each for the scores, a column each for p V
    check_limits,
    host_length,  # a host int of the positions filled: a device length is refused
)
from zoo.runtime.buffers import scratch

WARPS = THREADS // 32
NEG_INF = np.float32(-np.inf)  # the score of a key past the end or masked: exp(-inf - m) is exactly 0
MAX_ROWS = 16  # query rows a block serves (g q heads x Q positions): scores and o of each in registers


@functools.cache
def build(D, R):
    """The kernel for head size D and R query rows a kv head (compile-time constants: the loops unroll)."""
    COLS = (D + THREADS - 1) // THREADS  # columns of o a thread owns: t, t + THREADS, ...
    ACC = R * COLS  # a thread's accumulators: its columns of every row

    @jit
    def decode_kernel(Q, K, V, part_o, part_ml, length, queries, scale, chunk):
        q_rows = cuda.shared.array((R, D), float32)
        probs = cuda.shared.array((R, THREADS), float32)  # a block of keys' scores, then probabilities
        row_m = cuda.shared.array(R, float32)  # each row's running max and sum, and the rescale of this block
        row_l = cuda.shared.array(R, float32)
        row_rescale = cuda.shared.array(R, float32)
        scores = cuda.local.array(R, float32)
        acc = cuda.local.array(ACC, float32)  # o of every row at this thread's columns: row r at r COLS + k
        t = uint32(cuda.threadIdx.x)
        lane = t % uint32(32)
        warp = t // uint32(32)
        kv_head = uint32(cuda.blockIdx.x)
        split = uint32(cuda.blockIdx.y)
        first = split * chunk  # this block's keys: first .. end - 1
        end = min(length, first + chunk)
        for e in range(t, R * D, THREADS):  # element e of the R rows: row e // D, column e % D
            q_rows[e // D, e % D] = float32(Q[kv_head, e // D, e % D])  # Q as (kv heads, R, d)
        for r in range(t, R, THREADS):
            row_m[r] = NEG_INF
            row_l[r] = float32(0.0)
        for i in range(ACC):
            acc[i] = float32(0.0)
        cuda.syncthreads()  # the rows and their running figures are set

        for k0 in range(first, end, uint32(THREADS)):
            # Phase 1: thread t, key k0 + t, all R rows: the key's row of K read once for the group.
            key = k0 + t
            for r in range(R):
                scores[r] = float32(0.0)
            if key < end:
                for c in range(D):
                    kv = float32(K[kv_head, key, c])
                    for r in range(R):
                        scores[r] += q_rows[r, c] * kv
            for r in range(R):  # row r is query r % Q of its q head: it sees keys below length - Q + r % Q + 1
                sees = key < end and key < length - queries + uint32(r) % queries + uint32(1)
                probs[r, t] = scores[r] * scale if sees else NEG_INF
            cuda.syncthreads()  # every score of this block of keys is in shared memory

            # Phase 2: warp w, rows w, w + WARPS, ...: the block's max, the row's new max and sum, exp in place.
            for r in range(warp, R, WARPS):
                top = NEG_INF
                for i in range(lane, THREADS, 32):
                    top = max(top, probs[r, i])
                for k in range(5):  # butterfly: every lane ends with the row's max over the block
                    top = max(top, cuda.shfl_xor_sync(FULL_MASK, top, 16 >> k))
                m_old = row_m[r]
                m_new = max(m_old, top)  # -inf while a row has seen no key (a causal row in a late split)
                m_safe = m_new if m_new != NEG_INF else float32(0.0)  # exp(-inf - 0) = 0, never exp(-inf + inf)
                total = float32(0.0)
                for i in range(lane, THREADS, 32):
                    p = math.exp(probs[r, i] - m_safe)
                    probs[r, i] = p
                    total += p
                for k in range(5):
                    total += cuda.shfl_xor_sync(FULL_MASK, total, 16 >> k)
                cuda.syncwarp()  # every lane has read the row's old max before lane 0 replaces it
                if lane == 0:
                    rescale = math.exp(m_old - m_safe)  # 0 on the row's first keys, 1 while its max holds
                    row_rescale[r] = rescale
                    row_l[r] = row_l[r] * rescale + total
                    row_m[r] = m_new
            cuda.syncthreads()  # the probabilities and every row's rescale are in shared memory

            # Phase 3: thread t, its columns, all R rows: each element of V read once for R multiply-adds.
            keys = min(uint32(THREADS), end - k0)
            for k in range(COLS):
                c = t + uint32(k * THREADS)
                if c < D:
                    for r in range(R):
                        acc[r * COLS + k] *= row_rescale[r]
                    for i in range(keys):
                        v = float32(V[kv_head, k0 + i, c])
                        for r in range(R):
                            acc[r * COLS + k] += probs[r, i] * v
            cuda.syncthreads()  # everyone is done with probs and the rescales before the next block's

        first_row = (split * uint32(cuda.gridDim.x) + kv_head) * uint32(R)  # this split's partial rows
        for k in range(COLS):
            c = t + uint32(k * THREADS)
            if c < D:
                for r in range(R):
                    part_o[first_row + uint32(r), c] = acc[r * COLS + k]  # unnormalized: combine divides
        for r in range(t, R, THREADS):
            part_ml[first_row + r, 0] = row_m[r]  # -inf and 0 for a row with no key in this split
            part_ml[first_row + r, 1] = row_l[r]

    @jit
    def combine(part_o, part_ml, O, splits):
        t = uint32(cuda.threadIdx.x)
        r = uint32(cuda.blockIdx.x)  # a query row of the kv head (its g q heads x Q positions)
        kv_head = uint32(cuda.blockIdx.y)
        rows = uint32(cuda.gridDim.y) * uint32(cuda.gridDim.x)  # partial rows per split
        first = kv_head * uint32(cuda.gridDim.x) + r  # the row's partial in split 0: kv-head-major, as written
        top = NEG_INF
        for s in range(splits):
            top = max(top, part_ml[first + s * rows, 0])  # finite: split 0 holds key 0
        total = float32(0.0)
        for s in range(splits):
            total += math.exp(part_ml[first + s * rows, 0] - top) * part_ml[first + s * rows, 1]
        inv = float32(1.0) / total
        for c in range(t, D, THREADS):
            merged = float32(0.0)
            for s in range(splits):
                merged += math.exp(part_ml[first + s * rows, 0] - top) * part_o[first + s * rows, c]
            O[kv_head, r, c] = float16(merged * inv)

    return decode_kernel, combine


def validate(Q, K, V, length=None):
    check_limits(Q, K, V)
    rows = Q.shape[0] // K.shape[0] * Q.shape[1]
    if rows > MAX_ROWS:
        raise OutOfRange(
            f"decode_attention v03 keeps the scores and o of a kv head's query rows (q heads per kv head x new "
            f"positions) in registers: at most {MAX_ROWS}, got {rows}"
        )


def splits(rows, length):
    """(splits, keys a split) for ``rows`` blocks a split (its kv heads) over ``length`` keys: about
    SPLIT_BLOCKS_PER_SM blocks an SM in all, each split a whole number of blocks of THREADS keys."""
    wanted = max(1, min(-(-most_blocks() // rows), -(-length // THREADS)))  # -(-a // b): a / b rounded up
    chunk = -(-length // wanted)  # keys a split, rounded up to whole blocks of THREADS keys
    chunk = -(-chunk // THREADS) * THREADS
    return -(-length // chunk), chunk


def most_blocks():
    return SPLIT_BLOCKS_PER_SM * sm_count()


def launch(Q, K, V, out, length=None):
    bh, queries, d = Q.shape
    kv = K.shape[0]
    rows = bh // kv * queries  # a kv head's query rows: its g q heads' consecutive rows of Q, as (kv, R, d)
    length = host_length(K, length, "v03")
    count, chunk = splits(kv, length)
    most = -(-most_blocks() // kv) * kv * rows  # partial rows at any length: the buffers stay put through a decode loop
    part_o = scratch("decode_partial_o", most * d, np.float32)[: count * kv * rows * d].reshape(count * kv * rows, d)
    part_ml = scratch("decode_partial_ml", most * 2, np.float32)[: count * kv * rows * 2].reshape(count * kv * rows, 2)
    decode_kernel, combine = build(d, rows)
    grouped_q, grouped_out = Q.reshape(kv, rows, d), out.reshape(kv, rows, d)
    scale = np.float32(1 / math.sqrt(d))
    grid = (kv, count)  # a block per kv head and split
    sizes = np.uint32(length), np.uint32(queries), scale, np.uint32(chunk)
    decode_kernel[grid, THREADS](grouped_q, K, V, part_o, part_ml, *sizes)
    combine[(rows, kv), THREADS](part_o, part_ml, grouped_out, np.uint32(count))
