"""One launch: the block that finishes its kv head's splits last merges them, so no second kernel waits.

Changes:
    From v04: ``combine`` is gone. Each block writes its partial rows, fences
    them (``threadfence``: visible to every block before it is counted) and
    takes a ticket, an atomic add on its kv head's counter. The block that
    draws the last ticket knows every split of its kv head is written: it
    merges them by log-sum-exp, four columns a thread, the partials of BATCH
    splits loaded at once (16 bytes of o each) and folded into a running max,
    sum and o, as the online softmax folds keys; it writes o in float16 and
    resets the counter for the next call (sort's v05 picks its last block
    the same way). The partial maxima stay in log2 units: the merge is the
    kernel's own.

Why it is faster:
    The second launch. At 8k positions the whole cache is 33.5 MB, about
    11 us at 3 TB/s, and v04's combine was a kernel boundary after it: the
    GPU drains the grid, then launches and fills a second, a few
    microseconds in which no cache byte moves. Here the merge runs on the
    eight kv heads' last blocks while nothing else is left to read, reading
    the partials (about 2 KB a block) from L2. At 32k the cache's time grows
    fourfold and the boundary's share shrinks with it.
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, sm_count, uint32
from zoo.device.approx import exp2_approx
from zoo.device.bits import unpack_half2
from zoo.device.jit import jit, unrolled
from zoo.device.memory import aligned, load_float4, load_words4, store_flat
from zoo.device.warp import FULL_MASK
from zoo.errors import OutOfRange
from zoo.kernels.decode_attention import (
    SPLIT_BLOCKS_PER_SM,  # blocks a launch aims for, per SM
    UNROLL,  # keys a group loads before it uses one
    VECTOR_WARPS,  # warps a block
    check_limits,
    host_length,  # a host int of the positions filled: a device length is refused
)
from zoo.runtime.buffers import scratch

THREADS = 32 * VECTOR_WARPS
LOG2E = math.log2(math.e)
NEG_INF = np.float32(-np.inf)  # the score of a key past the end or masked: exp(-inf - m) is exactly 0
BATCH = 16  # splits whose partials the merging block loads at once: 64 splits at 8k in four round trips
MAX_ROWS = 8  # query rows a block serves (g q heads x Q positions): 16 registers a row a lane (q and o)


@functools.cache
def build(D, R):
    """The kernel for head size D and R query rows a kv head (compile-time constants: the loops unroll)."""
    PIECES = D // 8  # 16-byte pieces of a row: one a lane
    LANES = 1 << (PIECES - 1).bit_length()  # lanes a key: PIECES up to a power of two (d = 80: 10 of 16 busy)
    GROUPS = 32 // LANES  # keys a warp reads with one load instruction
    BLOCK_GROUPS = VECTOR_WARPS * GROUPS  # keys the block reads with one load instruction
    REDUCE_STEPS = LANES.bit_length() - 1  # shuffles that sum a score over its group: log2(LANES)
    MERGE_STEPS = GROUPS.bit_length() - 1  # shuffles that merge a warp's groups: log2(GROUPS)
    COLS = R * 8  # a lane's registers of q, and of o: row r's columns at r * 8 .. r * 8 + 7
    WORDS = UNROLL * 4  # a lane's loaded words of K, and of V: key u's at u * 4 .. u * 4 + 3
    SCORES = UNROLL * R  # a group's scores of an iteration: key u, row r at u * R + r
    BATCH_COLS = BATCH * 4  # the merge's four columns of BATCH splits: split k's at k * 4 .. k * 4 + 3

    @jit(device=True, forceinline=True)
    def load_q_row(r, Q, at, q):
        """Row r's eight columns of this lane (r a constant), one 16-byte load: Q as (kv heads, R, d)."""
        words = load_words4(Q, at + r * uint32(D))
        for w in range(4):
            q[r * 8 + 2 * w], q[r * 8 + 2 * w + 1] = unpack_half2(words[w])

    @jit(device=True, forceinline=True)
    def load_key(u, K, V, key0, at0, end, busy, k_words, v_words):
        """The lane's pieces of K and V of the iteration's key u (u a constant): two 16-byte loads, or zeros."""
        key = uint32(key0 + u * uint32(BLOCK_GROUPS))  # the block's groups read BLOCK_GROUPS consecutive keys a load
        at = uint32(at0 + u * uint32(BLOCK_GROUPS * D))  # flat index of the piece
        if busy and key < end:
            k_words[u * 4], k_words[u * 4 + 1], k_words[u * 4 + 2], k_words[u * 4 + 3] = load_words4(K, at)
            v_words[u * 4], v_words[u * 4 + 1], v_words[u * 4 + 2], v_words[u * 4 + 3] = load_words4(V, at)
        else:
            for w in range(4):
                k_words[u * 4 + w] = uint32(0)
                v_words[u * 4 + w] = uint32(0)

    @jit(device=True, forceinline=True)
    def score_key(u, k_words, q, s, key0, row_end, scale_log2):
        """Key u's R scores (u a constant), in log2 units: the lane's eight products, summed over the group."""
        k0, k1 = unpack_half2(k_words[u * 4])  # the key's eight columns at this lane, widened once for every row
        k2, k3 = unpack_half2(k_words[u * 4 + 1])
        k4, k5 = unpack_half2(k_words[u * 4 + 2])
        k6, k7 = unpack_half2(k_words[u * 4 + 3])
        key = uint32(key0 + u * uint32(BLOCK_GROUPS))
        for r in range(R):
            dot = q[r * 8] * k0 + q[r * 8 + 1] * k1 + q[r * 8 + 2] * k2 + q[r * 8 + 3] * k3
            dot += q[r * 8 + 4] * k4 + q[r * 8 + 5] * k5 + q[r * 8 + 6] * k6 + q[r * 8 + 7] * k7
            for k in range(REDUCE_STEPS):  # butterfly over the group: xor by less than LANES stays inside it
                dot += cuda.shfl_xor_sync(FULL_MASK, dot, LANES >> (k + 1))
            s[u * R + r] = dot * scale_log2 if key < row_end[r] else NEG_INF  # past the row's last key: masked

    @jit(device=True, forceinline=True)
    def softmax_row(r, s, m, l, acc):
        """Row r's online softmax over the iteration's UNROLL keys (r a constant): the scores become p, o rescaled."""
        top = m[r]
        for u in range(UNROLL):
            top = max(top, s[u * R + r])
        m_safe = top if top != NEG_INF else float32(0.0)  # exp2(-inf - 0) = 0, never exp2(-inf + inf)
        rescale = exp2_approx(m[r] - m_safe)  # 0 on the group's first keys, 1 while its max holds
        total = l[r] * rescale
        for u in range(UNROLL):
            p = exp2_approx(s[u * R + r] - m_safe)  # 0 for a key past the end or masked
            s[u * R + r] = p
            total += p
        l[r] = total
        m[r] = top
        for j in range(8):
            acc[r * 8 + j] *= rescale

    @jit(device=True, forceinline=True)
    def add_value(u, v_words, s, acc):
        """Key u's p V at this lane's eight columns, for every row (u a constant): V widened once."""
        v0, v1 = unpack_half2(v_words[u * 4])
        v2, v3 = unpack_half2(v_words[u * 4 + 1])
        v4, v5 = unpack_half2(v_words[u * 4 + 2])
        v6, v7 = unpack_half2(v_words[u * 4 + 3])
        for r in range(R):
            p = s[u * R + r]
            acc[r * 8] += p * v0
            acc[r * 8 + 1] += p * v1
            acc[r * 8 + 2] += p * v2
            acc[r * 8 + 3] += p * v3
            acc[r * 8 + 4] += p * v4
            acc[r * 8 + 5] += p * v5
            acc[r * 8 + 6] += p * v6
            acc[r * 8 + 7] += p * v7

    @jit(device=True, forceinline=True)
    def merge_row(r, lanes_apart, m, l, acc):
        """Row r (a constant) of this lane's group merged with the group lanes_apart lanes away, by log-sum-exp."""
        m_other = cuda.shfl_xor_sync(FULL_MASK, m[r], lanes_apart)
        l_other = cuda.shfl_xor_sync(FULL_MASK, l[r], lanes_apart)
        top = max(m[r], m_other)
        m_safe = top if top != NEG_INF else float32(0.0)
        mine, theirs = exp2_approx(m[r] - m_safe), exp2_approx(m_other - m_safe)
        l[r] = mine * l[r] + theirs * l_other
        m[r] = top
        for j in range(8):
            acc[r * 8 + j] = mine * acc[r * 8 + j] + theirs * cuda.shfl_xor_sync(FULL_MASK, acc[r * 8 + j], lanes_apart)

    @jit(device=True, forceinline=True)
    def load_split(k, part_o, part_ml, row0, s0, splits, apart, c, split_m, split_l, split_o):
        """Split s0 + k's partial of the row (k a constant): its max, sum and four columns (one 16-byte load), or
        those of an empty split past the last."""
        at = uint32(s0 + k)
        if at < splits:
            row = uint32(row0 + at * apart)
            split_m[k] = part_ml[row * uint32(2)]
            split_l[k] = part_ml[row * uint32(2) + uint32(1)]
            split_o[k * 4], split_o[k * 4 + 1], split_o[k * 4 + 2], split_o[k * 4 + 3] = load_float4(
                part_o, row * uint32(D) + c
            )
        else:
            split_m[k] = NEG_INF
            split_l[k] = float32(0.0)
            for j in range(4):
                split_o[k * 4 + j] = float32(0.0)

    load_q = unrolled(R, load_q_row)  # straight-line code, so that q, acc, s and the words stay in registers
    load_keys = unrolled(UNROLL, load_key)
    scores = unrolled(UNROLL, score_key)
    softmax = unrolled(R, softmax_row)
    add_values = unrolled(UNROLL, add_value)
    merge = unrolled(R, merge_row)
    load_splits = unrolled(BATCH, load_split)  # BATCH splits' loads issued together, in flight at once

    @jit
    def decode_kernel(Q, K, V, O, part_o, part_ml, tickets, length, queries, scale_log2, chunk):
        warp_m = cuda.shared.array((VECTOR_WARPS, R), float32)  # each warp's max, sum and o, merged at the end
        warp_l = cuda.shared.array((VECTOR_WARPS, R), float32)
        warp_o = cuda.shared.array((VECTOR_WARPS, R, D), float32)
        last = cuda.shared.array(1, uint32)  # 1 in the block that finishes its kv head's splits last
        split_m = cuda.local.array(BATCH, float32)  # the merge's batch of partials: registers (constant indices)
        split_l = cuda.local.array(BATCH, float32)
        split_o = cuda.local.array(BATCH_COLS, float32)
        q = cuda.local.array(COLS, float32)
        acc = cuda.local.array(COLS, float32)  # o of the group's keys at this lane's columns, weighted by exp(s - m)
        m = cuda.local.array(R, float32)  # the group's running max and sum of each row (its lanes keep the same)
        l = cuda.local.array(R, float32)
        k_words = cuda.local.array(WORDS, uint32)
        v_words = cuda.local.array(WORDS, uint32)
        s = cuda.local.array(SCORES, float32)
        row_end = cuda.local.array(R, uint32)  # each row's keys end here: the split's end or the row's causal limit
        t = uint32(cuda.threadIdx.x)
        lane = t % uint32(32)
        warp = t // uint32(32)
        piece = lane % uint32(LANES)  # this lane's columns: 8 piece .. 8 piece + 7
        busy = piece < uint32(PIECES)  # d = 80: lanes 10-15 of a group load nothing and add zeros
        group = warp * uint32(GROUPS) + lane // uint32(LANES)  # the block's groups read consecutive keys
        kv_head = uint32(cuda.blockIdx.x)
        split = uint32(cuda.blockIdx.y)
        first = uint32(split * chunk)  # this block's keys: first .. end - 1 (uint32: numba widens to 64 bits)
        end = uint32(min(length, first + chunk))
        column = piece * uint32(8)
        for i in range(COLS):
            q[i] = float32(0.0)
            acc[i] = float32(0.0)
        for r in range(R):
            m[r] = NEG_INF
            l[r] = float32(0.0)
            # row r is query r % Q of its q head: it sees keys below length - Q + r % Q + 1 (one division a row, here)
            row_end[r] = min(end, uint32(length - queries + uint32(r) % queries + uint32(1)))
        if busy:
            load_q(Q, kv_head * uint32(R * D) + column, q)

        k0 = first
        while k0 < end:
            key0 = uint32(k0 + group)
            at0 = uint32((kv_head * uint32(K.shape[1]) + key0) * uint32(D) + column)  # flat index of key0's piece
            # Every load of the iteration first: UNROLL keys' pieces of K and of V, 2 x UNROLL x 16 bytes a lane.
            load_keys(K, V, key0, at0, end, busy, k_words, v_words)
            scores(k_words, q, s, key0, row_end, scale_log2)
            softmax(s, m, l, acc)
            add_values(v_words, s, acc)
            k0 = uint32(k0 + uint32(BLOCK_GROUPS * UNROLL))

        for k in range(MERGE_STEPS):  # a warp's groups merge: lanes LANES, 2 LANES, ... apart hold the same columns
            merge(LANES << k, m, l, acc)
        if lane < uint32(LANES) and busy:  # the first group holds the warp's merged figures
            for r in range(R):
                for j in range(8):
                    warp_o[warp, r, column + uint32(j)] = acc[r * 8 + j]
                if lane == 0:
                    warp_m[warp, r] = m[r]
                    warp_l[warp, r] = l[r]
        cuda.syncthreads()  # every warp's max, sum and o are in shared memory

        first_row = (split * uint32(cuda.gridDim.x) + kv_head) * uint32(R)  # this split's partial rows
        for e in range(t, R * D, THREADS):  # element e of the R rows: row e // D, column e % D
            r, c = e // D, e % D
            top = NEG_INF
            for w in range(VECTOR_WARPS):
                top = max(top, warp_m[w, r])
            m_safe = top if top != NEG_INF else float32(0.0)
            o = float32(0.0)
            total = float32(0.0)
            for w in range(VECTOR_WARPS):
                weight = exp2_approx(warp_m[w, r] - m_safe)
                o += weight * warp_o[w, r, c]
                total += weight * warp_l[w, r]
            row = first_row + r
            part_o[row * uint32(D) + c] = o  # unnormalized, weighted by exp2(s - top) (the buffers flat: row-major)
            if c == 0:
                part_ml[row * uint32(2)] = top  # in log2 units; -inf and 0 for a row with no key in this split
                part_ml[row * uint32(2) + uint32(1)] = total

        cuda.threadfence()  # this thread's partial rows reach every block before the ticket below is taken
        cuda.syncthreads()  # every thread of the block has written and fenced
        if t == 0:
            last[0] = cuda.atomic.add(tickets, kv_head, uint32(1)) == uint32(cuda.gridDim.y) - uint32(1)
        cuda.syncthreads()  # the block knows whether it is its kv head's last split to finish
        if last[0]:  # every split of this kv head is written: merge them (the whole block takes this branch)
            cuda.threadfence()  # no load below is served from before the other blocks' fences
            splits = uint32(cuda.gridDim.y)
            apart = uint32(cuda.gridDim.x) * uint32(R)  # partial rows from one split to the next
            for e in range(t * uint32(4), R * D, THREADS * 4):  # four columns a thread: row e // D, columns e % D ..
                r, c = e // D, e % D
                row0 = kv_head * uint32(R) + r  # the row's partial in split 0
                top = NEG_INF  # the running max, sum and o of the merge, BATCH splits at a time
                total = float32(0.0)
                o0 = o1 = o2 = o3 = float32(0.0)
                s0 = uint32(0)
                while s0 < splits:
                    load_splits(part_o, part_ml, row0, s0, splits, apart, c, split_m, split_l, split_o)
                    new_top = top
                    for k in range(BATCH):
                        new_top = max(new_top, split_m[k])  # finite from the first batch on: split 0 holds key 0
                    rescale = exp2_approx(top - new_top)  # 0 on the first batch (top = -inf), 1 while the max holds
                    total *= rescale
                    o0, o1, o2, o3 = o0 * rescale, o1 * rescale, o2 * rescale, o3 * rescale
                    for k in range(BATCH):
                        weight = exp2_approx(split_m[k] - new_top)  # 0 for a split with no key of the row, or none
                        total += weight * split_l[k]
                        o0 += weight * split_o[k * 4]
                        o1 += weight * split_o[k * 4 + 1]
                        o2 += weight * split_o[k * 4 + 2]
                        o3 += weight * split_o[k * 4 + 3]
                    top = new_top
                    s0 = uint32(s0 + uint32(BATCH))
                inv = float32(1.0) / total
                at = row0 * uint32(D) + c  # O's row (kv head, r) is Q's: q head kv_head g + r // Q, query r % Q
                store_flat(O, at, float16(o0 * inv))
                store_flat(O, at + uint32(1), float16(o1 * inv))
                store_flat(O, at + uint32(2), float16(o2 * inv))
                store_flat(O, at + uint32(3), float16(o3 * inv))
            if t == 0:
                tickets[kv_head] = uint32(0)  # every ticket is drawn: ready for the next call

    return decode_kernel


def validate(Q, K, V, length=None):
    check_limits(Q, K, V)
    d = Q.shape[2]
    if d % 8:
        raise OutOfRange(
            f"decode_attention v05 reads rows in 16-byte pieces of eight float16: d a multiple of 8, got {d}"
        )
    rows = Q.shape[0] // K.shape[0] * Q.shape[1]
    if rows > MAX_ROWS:
        raise OutOfRange(
            f"decode_attention v05 keeps q and o of a kv head's query rows (q heads per kv head x new positions) in "
            f"registers: at most {MAX_ROWS}, got {rows}"
        )
    for name, a in (("Q", Q), ("K", K), ("V", V)):  # a NumPy array is copied to a fresh, aligned device array
        if not isinstance(a, np.ndarray) and not aligned(a):
            raise ValueError(
                f"{name} does not start on a 16-byte boundary, which v05's 16-byte loads need: pass a copy"
            )


def splits(kv, length, stride, blocks):
    """(splits, keys a split) for ``kv`` blocks a split over ``length`` keys: about ``blocks`` blocks in all, each
    split a whole number of the block's iterations of ``stride`` keys."""
    wanted = max(1, min(-(-blocks // kv), -(-length // stride)))  # -(-a // b): a / b rounded up
    chunk = -(-length // wanted)  # keys a split, rounded up to whole iterations
    chunk = -(-chunk // stride) * stride
    return -(-length // chunk), chunk


def most_blocks():
    return SPLIT_BLOCKS_PER_SM * sm_count()


@functools.lru_cache(maxsize=256)
def plan(bh, queries, d, kv, length, blocks):
    """(grid, rows, partial rows to allocate, the kernel's scalars) for these shapes, once for each: the host's
    arithmetic stays out of the per-call time (a decode loop calls at one more position each token)."""
    rows = bh // kv * queries  # a kv head's query rows: its g q heads' consecutive rows of Q, as (kv, R, d)
    lanes = 1 << (d // 8 - 1).bit_length()  # build's LANES: a key's lanes
    count, chunk = splits(kv, length, VECTOR_WARPS * 32 // lanes * UNROLL, blocks)
    most = -(-blocks // kv) * kv * rows  # partial rows at any length: the buffers stay put through a decode loop
    scale_log2 = np.float32(LOG2E / math.sqrt(d))  # exp(s / sqrt(d)) = exp2(s scale_log2)
    return (kv, count), rows, most, (np.uint32(length), np.uint32(queries), scale_log2, np.uint32(chunk))


@functools.lru_cache(maxsize=16)
def buffers(most, d, kv, allocator):
    """The partial rows' o and (m, l), ``most`` rows of d and 2 floats, and a ticket counter a kv head (zeroed once;
    each kv head's last block resets its own), looked up once a size: ``allocator`` (numba's ``cuda.device_array``)
    is in the key as in ``scratch``'s, so an offline compile's stand-ins never serve a call."""
    return (
        scratch("decode_partial_o", most * d, np.float32),
        scratch("decode_partial_ml", most * 2, np.float32),
        scratch("decode_tickets", kv, np.uint32, zero=True),
    )


def launch(Q, K, V, out, length=None):
    bh, queries, d = Q.shape
    length = host_length(K, length, "v05")
    grid, rows, most, sizes = plan(bh, queries, d, K.shape[0], length, most_blocks())  # grid: (kv heads, splits)
    part_o, part_ml, tickets = buffers(most, d, grid[0], cuda.device_array)  # whole, indexed flat: no view a call
    build(d, rows)[grid, THREADS](Q, K, V, out, part_o, part_ml, tickets, *sizes)  # Q and O flat as (kv, R, d)
