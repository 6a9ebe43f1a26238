"""Online softmax over blocks of keys (FlashAttention-1): a running max and sum per row, O rescaled each block.

Changes:
    From v02: the keys arrive 256 at a time and the shared scores shrink to
    8 x 256. For each block of keys phase 1 writes its scores as before
    (thread t, key t of the block); phase 2 finds the block's max, the new
    running max m' = max(m, block max),
    the exponentials exp(s - m') and their sum, and the running sum
    l' = exp(m - m') l + block sum (the online normalizer of the softmax
    family); phase 3 rescales each lane's O, already divided by l, to the new
    max and sum and adds the block's product: O' = (exp(m - m') l O + sum_j
    exp(s_j - m') V[j]) / l'. A barrier ends each block of keys.

Why it is faster:
    It is not, per score: a block of keys costs what v02 paid for it, plus
    a rescale of O. What it frees is the shared memory: 10 or 12 KB whatever the
    length, so any sequence runs (v02 stops near 7,100 positions), and a
    block that small leaves room for more blocks on each SM (v02 fits one
    at n = 4096: 128 KB of scores).
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK
from zoo.kernels.attention import ONLINE_BK as BK  # keys per block of keys: a key a thread on the GPU (THREADS)
from zoo.kernels.attention import (
    ROWS,  # query rows per block: one warp each in phases 2 and 3
    check_head_dim,
    check_limits,
)

THREADS = 32 * ROWS
NEG_INF = np.float32(-np.inf)  # a masked score: exp(-inf - m) is exactly 0


@functools.cache
def build(D, KV_GROUP=1):
    """The kernel for head dimension D (a compile-time constant: the loops over d unroll) and KV_GROUP q heads a kv
    head (a constant too: at 1 the kv head is the head, and the kernel is the one without grouped heads)."""
    COLS = (D + 31) // 32  # output columns per lane in phase 3; those past D (d not a multiple of 32) are unused
    WHOLE = D % 32 == 0  # every lane's columns lie inside D: the column checks fold away

    @jit
    def online_kernel(Q, K, V, O, scale, causal):
        q_tile = cuda.shared.array((ROWS, D), float32)
        scores = cuda.shared.array((ROWS, BK), float32)
        acc = cuda.local.array(ROWS, float32)
        out_acc = cuda.local.array(COLS, float32)
        t = cuda.threadIdx.x
        lane = t % 32  # phases 2 and 3: warp t // 32 owns query row q0 + t // 32
        warp = t // 32
        head = cuda.blockIdx.y
        kv_head = head if KV_GROUP == 1 else head // KV_GROUP  # KV_GROUP consecutive q heads read one K and V
        q0 = cuda.blockIdx.x * ROWS
        n = Q.shape[1]
        for e in range(t, ROWS * D, THREADS):  # element e of the 8 query rows: row e // D, column e % D
            r, c = e // D, e % D
            q_tile[r, c] = float32(Q[head, q0 + r, c]) if q0 + r < n else float32(0.0)
        for k in range(COLS):
            out_acc[k] = float32(0.0)
        m = NEG_INF  # warp w's running max and sum for its row; O in out_acc, divided by l
        l = float32(0.0)
        cuda.syncthreads()  # the query rows are staged

        for k0 in range(0, n, BK):
            # Phase 1: thread t, key k0 + t (the only one when BK = THREADS), all 8 rows; past the end, -inf.
            for j in range(t, BK, THREADS):
                key = k0 + j
                for r in range(ROWS):
                    acc[r] = float32(0.0)
                if key < n:
                    for c in range(D):
                        kv = float32(K[kv_head, key, c])
                        for r in range(ROWS):
                            acc[r] += q_tile[r, c] * kv
                for r in range(ROWS):
                    scores[r, j] = NEG_INF if key >= n or (causal and key > q0 + r) else acc[r] * scale
            cuda.syncthreads()  # every score of this block of keys is in shared memory

            # Phase 2: warp w, row w: the block's max, the new running max and sum, exp(s - m') in place.
            block_max = NEG_INF
            for j in range(lane, BK, 32):
                block_max = max(block_max, scores[warp, j])
            for k in range(5):  # butterfly: every lane ends with the block's max (-inf if all masked)
                block_max = max(block_max, cuda.shfl_xor_sync(FULL_MASK, block_max, 16 >> k))
            m_new = max(m, block_max)  # finite from the first block on: key 0 is never masked
            block_sum = float32(0.0)
            for j in range(lane, BK, 32):
                e = math.exp(scores[warp, j] - m_new)
                scores[warp, j] = e
                block_sum += e
            for k in range(5):
                block_sum += cuda.shfl_xor_sync(FULL_MASK, block_sum, 16 >> k)
            rescale = math.exp(m - m_new)  # 0 on the first block (m = -inf), 1 while the max holds
            l_new = rescale * l + block_sum
            cuda.syncwarp()  # the row's exponentials, written by every lane, are visible to the whole warp

            # Phase 3: warp w, row w: O' = (rescale l O + sum_j e_j V[j]) / l', columns COLS l .. COLS l + COLS - 1.
            keep = rescale * l
            for k in range(COLS):
                out_acc[k] *= keep
            for j in range(min(BK, n - k0)):
                p = scores[warp, j]  # one address for the whole warp: a broadcast
                for k in range(COLS):
                    if WHOLE or lane * COLS + k < D:
                        out_acc[k] += p * float32(V[kv_head, k0 + j, lane * COLS + k])
            inv = float32(1.0) / l_new
            for k in range(COLS):
                out_acc[k] *= inv
            m = m_new
            l = l_new
            cuda.syncthreads()  # every warp is done with its scores before the next block overwrites them

        if q0 + warp < n:
            for k in range(COLS):
                if WHOLE or lane * COLS + k < D:
                    O[head, q0 + warp, lane * COLS + k] = float16(out_acc[k])

    return online_kernel


def validate(Q, K, V, causal=False):
    check_limits(Q, K, V)  # any length: the steps' limits are their uint32 indices and the grid
    check_head_dim("v03", Q.shape[2], why=": a kernel compiled per d, d / 32 columns of O in each lane's registers")


def launch(Q, K, V, out, causal=False):
    bh, n, d = Q.shape
    grid = ((n + ROWS - 1) // ROWS, bh)
    build(d, bh // K.shape[0])[grid, THREADS](Q, K, V, out, np.float32(1 / math.sqrt(d)), bool(causal))
