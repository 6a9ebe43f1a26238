"""Unfused: S = Q K^T / sqrt(d) written to DRAM, a row softmax over it, then O = P V: three kernels.

Changes:
    The first step: attention as a framework runs its ops, one kernel each.
    ``scores`` is a shared-memory tiled product (sgemm v03's, 16 x 16):
    a block stages 16 query rows and 16 key rows, d/16 slices at a time (the
    last zero-padded: any d), and each thread writes one float32 score,
    scaled, or -inf above a causal diagonal. ``softmax_rows`` is softmax v04
    over each row of S, in place: one pass for the running max and sum, one
    writing P. ``weighted_values`` is the same tiled product again, P
    (float32) times V, into float16 O. S (BH x n x n float32) is allocated
    on the first call of a shape and kept.

Why it is faster:
    It is the starting point, and it is correct: exp never sees a positive
    argument and a masked score is an exact zero. Its cost is S. Per score
    it moves 20 bytes (``score_bytes``): written once, read twice by the
    softmax, written back as P, read by the last product; at 32 x 4096 x 64
    that is 10.7 GB against the 67 MB that Q, K, V and O need.
"""

import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK
from zoo.errors import OutOfRange
from zoo.kernels.attention import (
    BLOCK,  # softmax threads per row, a multiple of 32
    check_limits,
    dims,
)
from zoo.runtime.buffers import scratch

TILE = 16  # a 16 x 16 tile of S or O per block: 256 threads, each one output
PADDED = TILE + 1  # K's tile rows padded by one: the 16 rows a half-warp reads lie in 16 banks
WARPS = BLOCK // 32
LOWEST = np.float32(np.finfo(np.float32).min)  # the running max of a thread that has read nothing (softmax v04)
NEG_INF = np.float32(-np.inf)  # a masked score: exp(-inf - m) is exactly 0
SCORE_BYTES = 4 + 2 * 4 + 4 + 4  # per score: S written, read twice by the softmax, P written, P read


def score_bytes(size):
    """Bytes this step moves through S and P beyond the minimum (20 per score; the fused steps move none)."""
    bh, n, _ = dims(size)
    return SCORE_BYTES * bh * n * n


@jit
def scores(Q, K, S, scale, causal, kv_group):
    q_tile = cuda.shared.array((TILE, TILE), float32)
    k_tile = cuda.shared.array((TILE, PADDED), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    head = cuda.blockIdx.z
    kv_head = uint32(head) // kv_group  # grouped KV heads: g consecutive q heads read one K
    n, d = Q.shape[1], Q.shape[2]
    query = cuda.blockIdx.y * TILE + ty  # this thread's score: S[head, query, key]
    key = cuda.blockIdx.x * TILE + tx
    key_row = cuda.blockIdx.x * TILE + ty  # the K row this thread stages (the tile's rows are keys)
    acc = float32(0.0)
    for c0 in range(0, d, TILE):  # d / 16 slices of the dot products, the last partial for any d: zeros past d
        inside = c0 + tx < d
        q_tile[ty, tx] = float32(Q[head, query, c0 + tx]) if query < n and inside else float32(0.0)
        k_tile[ty, tx] = float32(K[kv_head, key_row, c0 + tx]) if key_row < n and inside else float32(0.0)
        cuda.syncthreads()  # both tiles are complete before anyone reads them
        for c in range(TILE):
            acc += q_tile[ty, c] * k_tile[tx, c]
        cuda.syncthreads()  # everyone is done reading before the next slice overwrites them
    if query < n and key < n:
        S[head, query, key] = NEG_INF if causal and key > query else acc * scale


@jit(device=True)
def merge(m1, d1, m2, d2):
    """Two (running max, running sum) states as one, as in softmax v04."""
    m = max(m1, m2)
    return m, d1 * math.exp(m1 - m) + d2 * math.exp(m2 - m)


@jit
def softmax_rows(S, n):
    warp_m = cuda.shared.array(WARPS, float32)
    warp_d = cuda.shared.array(WARPS, float32)
    t = uint32(cuda.threadIdx.x)
    lane = t % uint32(32)  # the thread's lane in its warp; its warp is t // 32
    base = uint32(cuda.blockIdx.x) * n  # one block per row of S (BH n rows of n)
    m = LOWEST
    d = float32(0)
    c = t
    while c < n:  # one pass: running max and running sum of exp(s - max)
        v = S[base + c]
        if v > m:
            d = d * math.exp(m - v) + float32(1)
            m = v
        else:
            d += math.exp(v - m)  # a masked -inf adds exp(-inf) = 0
        c += uint32(BLOCK)
    for k in range(5):  # butterfly, offsets 16, 8, 4, 2, 1: every lane ends with its warp's state
        m2 = cuda.shfl_xor_sync(FULL_MASK, m, 16 >> k)
        d2 = cuda.shfl_xor_sync(FULL_MASK, d, 16 >> k)
        m, d = merge(m, d, m2, d2)
    if lane == 0:
        warp_m[t // uint32(32)] = m
        warp_d[t // uint32(32)] = d
    cuda.syncthreads()  # every warp's (m, d) is in shared memory
    m = warp_m[0]
    d = warp_d[0]
    for w in range(1, WARPS):
        m, d = merge(m, d, warp_m[w], warp_d[w])
    scale = float32(1) / d  # the row holds key 0 at least, so d >= 1
    c = t
    while c < n:  # the second read of S writes P in its place
        S[base + c] = math.exp(S[base + c] - m) * scale
        c += uint32(BLOCK)


@jit
def weighted_values(P, V, O, kv_group):
    p_tile = cuda.shared.array((TILE, TILE), float32)
    v_tile = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    head = cuda.blockIdx.z
    n, d = V.shape[1], V.shape[2]
    query = cuda.blockIdx.y * TILE + ty  # this thread's output: O[head, query, col]
    col = cuda.blockIdx.x * TILE + tx
    inside = col < d  # false in the last column tile past d (any d): V read as 0 there, O never stored
    kv_head = uint32(head) // kv_group  # grouped KV heads: g consecutive q heads read one V
    acc = float32(0.0)
    for k0 in range(0, n, TILE):  # 16 keys at a time
        p_tile[ty, tx] = P[head, query, k0 + tx] if query < n and k0 + tx < n else float32(0.0)
        v_tile[ty, tx] = float32(V[kv_head, k0 + ty, col]) if k0 + ty < n and inside else float32(0.0)
        cuda.syncthreads()  # both tiles are complete before anyone reads them
        for k in range(TILE):
            acc += p_tile[ty, k] * v_tile[k, tx]
        cuda.syncthreads()  # everyone is done reading before the next keys overwrite them
    if query < n and inside:
        O[head, query, col] = float16(acc)  # rounded once, at the end


def validate(Q, K, V, causal=False):
    check_limits(Q, K, V)
    bh, n, _ = Q.shape
    if bh * n * n >= 2**32:
        raise OutOfRange(f"v01 indexes S with uint32: BH n^2 must be below 2^32, got {bh * n * n}")


def launch(Q, K, V, out, causal=False):
    bh, n, d = Q.shape
    S = scratch("attention_scores", bh * n * n, np.float32, only_latest=True)  # 2.1 GB at 32 x 4096^2
    S3 = S.reshape(bh, n, n)
    tiles = (n + TILE - 1) // TILE
    kv_group = np.uint32(bh // K.shape[0])  # q heads per kv head (1 without grouped KV heads)
    scores[(tiles, tiles, bh), (TILE, TILE)](Q, K, S3, np.float32(1 / math.sqrt(d)), bool(causal), kv_group)
    softmax_rows[bh * n, BLOCK](S, np.uint32(n))
    # x walks O's d / 16 column tiles first: the blocks that read one row block of P run together (L2 hits)
    weighted_values[((d + TILE - 1) // TILE, tiles, bh), (TILE, TILE)](S3, V, out, kv_group)
