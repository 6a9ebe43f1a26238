"""Split over the cache (FlashDecoding): many blocks per query row, each a slice of the keys, merged by log-sum-exp.

Changes:
    From v01: the grid gets a third axis, the splits: block (query, head,
    split) walks keys split * chunk .. (split + 1) * chunk only, with chunk a
    multiple of 128 chosen so that the grid holds about four blocks an SM
    (``splits``). Each block writes its unnormalized o, its max m
    and its sum l to a float32 scratch buffer instead of o. A second kernel,
    ``combine``, merges a row's splits: with M the largest m,
    o = sum_s exp(m_s - M) o_s / sum_s exp(m_s - M) l_s (a split with no key
    has m = -inf and adds 0), a column a thread.

Why it is faster:
    Parallelism. v01 ran 32 blocks at Llama-3-8B's shapes, a quarter of the
    SMs, each walking the whole cache with its latency exposed; here 512
    blocks keep every SM's loads in flight, for the price of a second launch
    and a scratch buffer of a few hundred KB (splits x rows x (d + 2) floats,
    written and read once: under 1% of the cache's bytes at 8k positions).
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK
from zoo.kernels.decode_attention import (
    SPLIT_BLOCKS_PER_SM,  # blocks a launch aims for, per SM
    THREADS,  # threads per block: a key each for the scores, a column each for p V
    check_limits,
    host_length,  # a host int of the positions filled: a device length is refused
)
from zoo.runtime.buffers import scratch

WARPS = THREADS // 32
NEG_INF = np.float32(-np.inf)  # the score of a key past the end: exp(-inf - m) is exactly 0


@functools.cache
def build(D):
    """The kernel for head size D (a compile-time constant: the dot product's loop unrolls)."""
    COLS = (D + THREADS - 1) // THREADS  # columns of o a thread owns: t, t + THREADS, ...

    @jit
    def decode_kernel(Q, K, V, part_o, part_ml, length, scale, kv_group, chunk):
        q_row = cuda.shared.array(D, float32)
        probs = cuda.shared.array(THREADS, float32)  # a block of keys' probabilities
        warp_max = cuda.shared.array(WARPS, float32)
        warp_sum = cuda.shared.array(WARPS, float32)
        acc = cuda.local.array(COLS, float32)  # this thread's columns of o, weighted by exp(s - m), not yet by 1 / l
        t = uint32(cuda.threadIdx.x)
        lane = t % uint32(32)
        warp = t // uint32(32)
        query = uint32(cuda.blockIdx.x)
        head = uint32(cuda.blockIdx.y)
        kv_head = head // kv_group  # grouped KV heads: g consecutive q heads read one cache
        split = uint32(cuda.blockIdx.z)
        seen = length - uint32(Q.shape[1]) + query + uint32(1)  # keys 0 .. seen - 1: causal within the new positions
        first = split * chunk  # this block's keys: first .. end - 1 (none when the split lies past seen)
        end = min(seen, first + chunk)
        for c in range(t, D, THREADS):
            q_row[c] = float32(Q[head, query, c])
        for k in range(COLS):
            acc[k] = float32(0.0)
        m = NEG_INF  # the running max and sum of the row (every thread keeps the same)
        l = float32(0.0)
        cuda.syncthreads()  # q is staged

        for k0 in range(first, end, uint32(THREADS)):
            key = k0 + t
            s = NEG_INF
            if key < end:
                dot = float32(0.0)
                for c in range(D):
                    dot += q_row[c] * float32(K[kv_head, key, c])
                s = dot * scale
            top = s
            for k in range(5):  # butterfly: every lane ends with its warp's max
                top = max(top, cuda.shfl_xor_sync(FULL_MASK, top, 16 >> k))
            if lane == 0:
                warp_max[warp] = top
            cuda.syncthreads()  # every warp's max is in shared memory
            m_new = m
            for w in range(WARPS):
                m_new = max(m_new, warp_max[w])  # finite: every block of keys holds one
            p = math.exp(s - m_new)  # 0 past the end
            probs[t] = p
            for k in range(5):
                p += cuda.shfl_xor_sync(FULL_MASK, p, 16 >> k)
            if lane == 0:
                warp_sum[warp] = p
            cuda.syncthreads()  # the probabilities and every warp's sum are in shared memory
            rescale = math.exp(m - m_new)  # 0 on the first block (m = -inf), 1 while the max holds
            total = float32(0.0)
            for w in range(WARPS):
                total += warp_sum[w]
            l = l * rescale + total
            m = m_new
            keys = min(uint32(THREADS), end - k0)
            for k in range(COLS):
                c = t + uint32(k * THREADS)
                if c < D:
                    a = acc[k] * rescale
                    for i in range(keys):
                        a += probs[i] * float32(V[kv_head, k0 + i, c])  # one row of V, a column a thread
                    acc[k] = a
            cuda.syncthreads()  # everyone is done with probs and the warps' figures before the next block's

        row = (split * uint32(cuda.gridDim.y) + head) * uint32(cuda.gridDim.x) + query  # this split's partial row
        for k in range(COLS):
            c = t + uint32(k * THREADS)
            if c < D:
                part_o[row, c] = acc[k]  # unnormalized, weighted by exp(s - m): combine divides
        if t == 0:
            part_ml[row, 0] = m  # -inf and 0 for a split with no key
            part_ml[row, 1] = l

    @jit
    def combine(part_o, part_ml, O, splits):
        t = uint32(cuda.threadIdx.x)
        query = uint32(cuda.blockIdx.x)
        head = uint32(cuda.blockIdx.y)
        rows = uint32(cuda.gridDim.y) * uint32(cuda.gridDim.x)  # partial rows per split
        first = head * uint32(cuda.gridDim.x) + query  # the row's partial in split 0: head-major, as written
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
            O[head, query, c] = float16(merged * inv)

    return decode_kernel, combine


validate = check_limits


def splits(rows, length):
    """(splits, keys a split) for ``rows`` query rows over ``length`` keys: about SPLIT_BLOCKS_PER_SM blocks an SM in
    all, each split a whole number of blocks of THREADS keys."""
    wanted = max(1, min(-(-most_blocks() // rows), -(-length // THREADS)))  # -(-a // b): a / b rounded up
    chunk = -(-length // wanted)  # keys a split, rounded up to whole blocks of THREADS keys
    chunk = -(-chunk // THREADS) * THREADS
    return -(-length // chunk), chunk


def most_blocks():
    return SPLIT_BLOCKS_PER_SM * sm_count()


def launch(Q, K, V, out, length=None):
    bh, queries, d = Q.shape
    length = host_length(K, length, "v02")
    kv_group = np.uint32(bh // K.shape[0])  # q heads per kv head
    rows = bh * queries
    count, chunk = splits(rows, length)
    most = -(-most_blocks() // rows) * rows  # partial rows at any length: the buffers stay put through a decode loop
    part_o = scratch("decode_partial_o", most * d, np.float32)[: count * rows * d].reshape(count * rows, d)
    part_ml = scratch("decode_partial_ml", most * 2, np.float32)[: count * rows * 2].reshape(count * rows, 2)
    decode_kernel, combine = build(d)
    scale = np.float32(1 / math.sqrt(d))
    grid = (queries, bh, count)  # a block per query row and split
    decode_kernel[grid, THREADS](Q, K, V, part_o, part_ml, np.uint32(length), scale, kv_group, np.uint32(chunk))
    combine[(queries, bh), THREADS](part_o, part_ml, out, np.uint32(count))
