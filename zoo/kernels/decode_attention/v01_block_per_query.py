"""One block per query row: its keys in blocks of 128, an online softmax, o accumulated a column a thread.

Changes:
    The first step: the attention family's online softmax (its v03) with one
    query row a block. The block stages q, then walks the cache 128 keys at a
    time: thread t scores key k0 + t (a dot product over d, its row of K read
    by the thread alone), the block finds the keys' max (shuffles, then the
    warps' maxima through shared memory), each thread writes its probability
    exp(s - m') to shared memory and the block sums them; then thread t
    rescales its columns t, t + 128, ... of o by exp(m - m') and adds the
    keys' p V (a row of V read by the whole block, one column a thread). The
    division by the running sum waits for the end. Grid: (query, q head).

Why it is faster:
    It is the starting point, and it is correct for any length, any d up to
    256 and grouped heads. Its cost is the grid: Llama-3-8B's 32 q heads and
    one query are 32 blocks on a GPU of 132 SMs, each walking 8k or 32k keys
    alone; the K rows a warp reads lie 256 bytes apart (a sector a key), and
    each kv head's cache is read by its g q heads' blocks separately.
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK
from zoo.kernels.decode_attention import (
    THREADS,  # threads per block: a key each for the scores, a column each for p V
    check_limits,
    host_length,  # a host int of the positions filled: a device length is refused
)

WARPS = THREADS // 32
NEG_INF = np.float32(-np.inf)  # the score of a key past the end: exp(-inf - m) is exactly 0


@functools.cache
def build(D):
    """The kernel for head size D (a compile-time constant: the dot product's loop unrolls)."""
    COLS = (D + THREADS - 1) // THREADS  # columns of o a thread owns: t, t + THREADS, ...

    @jit
    def decode_kernel(Q, K, V, O, length, scale, kv_group):
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
        seen = length - uint32(Q.shape[1]) + query + uint32(1)  # keys 0 .. seen - 1: causal within the new positions
        for c in range(t, D, THREADS):
            q_row[c] = float32(Q[head, query, c])
        for k in range(COLS):
            acc[k] = float32(0.0)
        m = NEG_INF  # the running max and sum of the row (every thread keeps the same)
        l = float32(0.0)
        cuda.syncthreads()  # q is staged

        for k0 in range(uint32(0), seen, uint32(THREADS)):
            key = k0 + t
            s = NEG_INF
            if key < seen:
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
                m_new = max(m_new, warp_max[w])  # finite: the first block holds key 0
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
            keys = min(uint32(THREADS), seen - k0)
            for k in range(COLS):
                c = t + uint32(k * THREADS)
                if c < D:
                    a = acc[k] * rescale
                    for i in range(keys):
                        a += probs[i] * float32(V[kv_head, k0 + i, c])  # one row of V, a column a thread
                    acc[k] = a
            cuda.syncthreads()  # everyone is done with probs and the warps' figures before the next block's

        inv = float32(1.0) / l  # l >= 1: the max's own exp(0)
        for k in range(COLS):
            c = t + uint32(k * THREADS)
            if c < D:
                O[head, query, c] = float16(acc[k] * inv)

    return decode_kernel


validate = check_limits


def launch(Q, K, V, out, length=None):
    bh, queries, d = Q.shape
    length = host_length(K, length, "v01")
    kv_group = np.uint32(bh // K.shape[0])  # q heads per kv head
    grid = (queries, bh)
    build(d)[grid, THREADS](Q, K, V, out, np.uint32(length), np.float32(1 / math.sqrt(d)), kv_group)
