"""FlashAttention-2's ordering: each warp owns 16 query rows end to end, and O is divided by l once, at the end.

Changes:
    From v03: a block takes 64 query rows (four warps of 16) and stages Q and
    each block of 64 keys and values in shared memory as float16, with 128-bit
    copies (``load_half8``). Each warp then does everything for its rows with
    no barrier: lane (g, t) = (lane // 4, lane % 4) computes rows g and g + 8 of
    S against keys 2t, 2t + 1 of every 8 (32 scores), finds the rows' maxima
    among the 4 lanes of its quad (two shuffles), and accumulates the same rows
    of O at columns 2t, 2t + 1 of every 8, P passing through a warp-private
    shared tile. O and l are rescaled only when a row's max grows (a warp
    vote); the sums l stay per lane and meet, with the division by them,
    after the last block. exp2 (``exp2_approx``) takes 1 / sqrt(d) log2(e) in one FMA.

Why it is faster:
    Reuse. K and V come from L2 once per 64 query rows (v03: once per 8), in
    16-byte copies, and each lane reuses every staged value for two rows and
    16 keys or columns: about two FMAs per shared load, where v03's product
    with V did one FMA per global load. The softmax needs no barrier: a row's
    statistics live in the four lanes of a quad (two shuffles; v03 used ten
    per block of keys), and O is neither divided per block nor, while no
    row's max grows, rescaled. The layout is the tensor cores' (v05).
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.approx import exp2_approx
from zoo.device.jit import jit
from zoo.device.memory import flat_view
from zoo.device.mma import SHARED_ALIGN, load_half8, store_half8
from zoo.device.warp import FULL_MASK
from zoo.kernels.attention import (
    BK,  # keys per block of keys
    WARPS,  # warps per block, 16 query rows each
    check_aligned,
    check_head_dim,
    check_limits,
)

NEG_INF = np.float32(-np.inf)  # a masked score: exp2(-inf) is exactly 0
LOG2E = math.log2(math.e)


@functools.cache
def build(D, WARPS=WARPS, BK=BK, KV_GROUP=1):
    """The kernel for head dimension D, WARPS warps of 16 query rows, blocks of BK keys and KV_GROUP q heads a kv
    head, with its block and shared-memory sizes; every loop over d, keys or columns has a constant trip count, and
    at KV_GROUP 1 the kv head is the head. (Other shapes than the defaults are for the tuning probe,
    .ci/gpu-attention.sh.)"""
    BQ = 16 * WARPS  # query rows per block
    THREADS = 32 * WARPS
    STRIDE = D + 8  # float16 per staged row: padded by 16 bytes, so the rows a warp reads fall in different banks
    K_AT = BQ * STRIDE  # the staged tiles in the dynamic shared array: Q, then K, then V
    V_AT = K_AT + BK * STRIDE
    CHUNKS = D // 8  # 16-byte chunks in a row of Q, K or V
    ROWS_PER_PASS = THREADS // CHUNKS  # rows the block's threads copy at once, a chunk each
    Q_PASSES = -(-BQ // ROWS_PER_PASS)  # copy passes over Q's rows and K's (-(-a // b): a / b rounded up); the last
    K_PASSES = -(-BK // ROWS_PER_PASS)  # may be partial, a few threads idle, where d / 8 divides neither (d = 80)
    EVEN_Q = THREADS % CHUNKS == 0 and BQ % ROWS_PER_PASS == 0  # every thread copies in every pass: checks fold away
    EVEN_K = THREADS % CHUNKS == 0 and BK % ROWS_PER_PASS == 0
    NT = BK // 8  # 8-key column groups of a warp's S
    DT = D // 8  # 8-column groups of a warp's O
    S_REGS = NT * 4  # a lane's scores: 4 per 8-key group (rows g, g + 8; keys 2t, 2t + 1)
    O_REGS = DT * 4  # a lane's accumulators of O
    P_STRIDE = BK + 4  # float32 per row of a warp's P tile
    P_TILE = WARPS * 16 * P_STRIDE

    @jit
    def attention_kernel(Q, K, V, O, n, scale_log2, causal):
        tiles = cuda.shared.array(0, float16, alignment=SHARED_ALIGN)  # Q (BQ rows), K and V (BK rows each)
        p_tile = cuda.shared.array(P_TILE, float32)  # each warp's 16 x BK probabilities
        s = cuda.local.array(S_REGS, float32)  # scores, then probabilities: rows g, g + 8 of each 8-key group
        o = cuda.local.array(O_REGS, float32)  # O: rows g, g + 8, columns 2t, 2t + 1 of each 8-column group
        tid = uint32(cuda.threadIdx.x)
        lane = tid % uint32(32)
        warp = tid // uint32(32)
        g = lane // uint32(4)  # this lane's rows: g and g + 8 of the warp's 16
        t = lane % uint32(4)  # this lane's keys and columns: 2t and 2t + 1 of every 8
        head = uint32(cuda.blockIdx.y)
        q0 = uint32(cuda.blockIdx.x) * uint32(BQ)
        row0 = q0 + warp * uint32(16) + g  # the two query rows of this lane
        row1 = row0 + uint32(8)
        visible0 = uint32(min(n, row0 + uint32(1))) if causal else n  # row g sees the keys below visible0
        visible1 = uint32(min(n, row1 + uint32(1))) if causal else n
        base = head * n * uint32(D)  # the head's first element in Q and O
        # its kv head's in K and V, KV_GROUP consecutive q heads sharing one (at 1 the head's own, the same value)
        kv_base = base if KV_GROUP == 1 else head // uint32(KV_GROUP) * n * uint32(D)
        # This thread's 16-byte chunk of each pass: row copy_row + p ROWS_PER_PASS, 8 columns from copy_col. A row
        # past the end copies the last row instead: its keys are masked, its P is 0 and its outputs are never
        # stored, so any finite values do, and every copy is the same instruction with no branch.
        copy_row = tid // uint32(CHUNKS)
        copy_col = tid % uint32(CHUNKS) * uint32(8)
        copy_dst = copy_row * uint32(STRIDE) + copy_col  # the chunk in a staged tile
        last = n - uint32(1)
        # A thread copies in pass p if it has a row there (copy_row < ROWS_PER_PASS: THREADS % CHUNKS threads have
        # none) and the row is inside the tile (the last pass may stop short of ROWS_PER_PASS)
        for p in range(Q_PASSES):  # Q's block of rows; a partial last pass copies rows below BQ only
            if EVEN_Q or copy_row + uint32(p * ROWS_PER_PASS) < uint32(min(BQ, (p + 1) * ROWS_PER_PASS)):
                row = min(q0 + copy_row + uint32(p * ROWS_PER_PASS), last)
                w0, w1, w2, w3 = load_half8(Q, base + row * uint32(D) + copy_col)
                store_half8(tiles, copy_dst + uint32(p * ROWS_PER_PASS * STRIDE), w0, w1, w2, w3)
        for i in range(O_REGS):
            o[i] = float32(0.0)
        m0, m1 = NEG_INF, NEG_INF  # running maxima of rows g and g + 8 (raw scores)
        l0, l1 = float32(0.0), float32(0.0)  # this lane's share of their running sums
        q_at = (warp * uint32(16) + g) * uint32(STRIDE)  # row g of the warp's Q rows; row g + 8 is 8 rows on
        p_at = (warp * uint32(16) + g) * uint32(P_STRIDE)

        for k0 in range(0, n, BK):
            k0 = uint32(k0)
            cuda.syncthreads()  # every warp is done with the previous K and V tiles (and Q is staged)
            for p in range(K_PASSES):  # the block of keys and values
                if EVEN_K or copy_row + uint32(p * ROWS_PER_PASS) < uint32(min(BK, (p + 1) * ROWS_PER_PASS)):
                    at = kv_base + min(k0 + copy_row + uint32(p * ROWS_PER_PASS), last) * uint32(D) + copy_col
                    w0, w1, w2, w3 = load_half8(K, at)
                    store_half8(tiles, copy_dst + uint32(K_AT + p * ROWS_PER_PASS * STRIDE), w0, w1, w2, w3)
                    w0, w1, w2, w3 = load_half8(V, at)
                    store_half8(tiles, copy_dst + uint32(V_AT + p * ROWS_PER_PASS * STRIDE), w0, w1, w2, w3)
            cuda.syncthreads()  # the K and V tiles are complete

            # S = Q K^T for rows g, g + 8 and keys 8j + 2t + e: each staged value serves 2 rows or 16 keys.
            for i in range(S_REGS):
                s[i] = float32(0.0)
            for c in range(D):
                qa = float32(tiles[q_at + uint32(c)])
                qb = float32(tiles[q_at + uint32(8 * STRIDE + c)])
                for j in range(NT):
                    for e in range(2):
                        kv = float32(tiles[uint32(K_AT + (8 * j + e) * STRIDE + c) + t * uint32(2 * STRIDE)])
                        s[4 * j + e] += qa * kv
                        s[4 * j + 2 + e] += qb * kv

            # Keys past the end, and above the diagonal of a causal mask, score -inf.
            if k0 + uint32(BK) > n or causal:
                first_key = uint32(k0 + t * uint32(2))  # this lane's keys: first_key + 8j + e
                for j in range(NT):
                    for e in range(2):
                        key = uint32(first_key + uint32(8 * j + e))
                        if key >= visible0:
                            s[4 * j + e] = NEG_INF
                        if key >= visible1:
                            s[4 * j + 2 + e] = NEG_INF

            # Online softmax: the rows' block maxima over the quad, then p = exp2(s c - m c) and the rescale.
            top0, top1 = m0, m1
            for j in range(NT):
                top0 = max(top0, max(s[4 * j], s[4 * j + 1]))
                top1 = max(top1, max(s[4 * j + 2], s[4 * j + 3]))
            for k in range(2):  # lanes 4g .. 4g + 3 hold the same two rows: xor 1, then 2
                top0 = max(top0, cuda.shfl_xor_sync(FULL_MASK, top0, 1 << k))
                top1 = max(top1, cuda.shfl_xor_sync(FULL_MASK, top1, 1 << k))
            mc0, mc1 = top0 * scale_log2, top1 * scale_log2  # the new maxima, scaled: finite (key 0 is never masked)
            # O and l so far were weighted by exp2(s c - m c) of the old maxima: rescaled when a row's max grew, which
            # after the first blocks is rare, so a warp asks first (a vote, the same branch for all 32 lanes).
            if cuda.any_sync(FULL_MASK, top0 > m0 or top1 > m1):
                rescale0 = exp2_approx(m0 * scale_log2 - mc0)  # 0 on the first block (m = -inf), 1 where the max held
                rescale1 = exp2_approx(m1 * scale_log2 - mc1)
                l0 *= rescale0
                l1 *= rescale1
                for i in range(DT):
                    o[4 * i] *= rescale0
                    o[4 * i + 1] *= rescale0
                    o[4 * i + 2] *= rescale1
                    o[4 * i + 3] *= rescale1
                m0, m1 = top0, top1
            for j in range(NT):
                for e in range(2):
                    p0 = exp2_approx(s[4 * j + e] * scale_log2 - mc0)  # one FMA and one ex2
                    p1 = exp2_approx(s[4 * j + 2 + e] * scale_log2 - mc1)
                    l0 += p0
                    l1 += p1
                    p_tile[p_at + uint32(8 * j + e) + t * uint32(2)] = p0
                    p_tile[p_at + uint32(8 * P_STRIDE + 8 * j + e) + t * uint32(2)] = p1
            cuda.syncwarp()  # the warp's P rows, written by its 32 lanes, are visible to all of them

            # O += P V for rows g, g + 8 and columns 8i + 2t + e: each staged value serves 2 rows.
            for key in range(BK):
                pa = p_tile[p_at + uint32(key)]
                pb = p_tile[p_at + uint32(8 * P_STRIDE + key)]
                for i in range(DT):
                    for e in range(2):
                        vv = float32(tiles[uint32(V_AT + key * STRIDE + 8 * i + e) + t * uint32(2)])
                        o[4 * i + e] += pa * vv
                        o[4 * i + 2 + e] += pb * vv

        for k in range(2):  # the quad's four shares of each row's sum
            l0 += cuda.shfl_xor_sync(FULL_MASK, l0, 1 << k)
            l1 += cuda.shfl_xor_sync(FULL_MASK, l1, 1 << k)
        inv0, inv1 = float32(1.0) / l0, float32(1.0) / l1  # the deferred division: l >= 1 (the max's own exp2(0))
        for i in range(DT):
            col = uint32(8 * i) + t * uint32(2)
            if row0 < n:
                O[base + row0 * uint32(D) + col] = float16(o[4 * i] * inv0)
                O[base + row0 * uint32(D) + col + uint32(1)] = float16(o[4 * i + 1] * inv0)
            if row1 < n:
                O[base + row1 * uint32(D) + col] = float16(o[4 * i + 2] * inv1)
                O[base + row1 * uint32(D) + col + uint32(1)] = float16(o[4 * i + 3] * inv1)

    return attention_kernel, BQ, THREADS, (BQ + 2 * BK) * STRIDE * 2


def validate(Q, K, V, causal=False):
    check_limits(Q, K, V)  # any length
    check_aligned(Q, K, V)
    check_head_dim("v04", Q.shape[2], 8, why=": 16-byte copies of 8 columns, O in 8-column groups")


def launch(Q, K, V, out, causal=False):
    bh, n, d = Q.shape
    kernel, rows, threads, shared_bytes = build(d, KV_GROUP=bh // K.shape[0])  # KV_GROUP: q heads per kv head
    scale_log2 = np.float32(LOG2E / math.sqrt(d))  # exp(s / sqrt(d)) = exp2(s scale_log2)
    grid = ((n + rows - 1) // rows, bh)
    flat = (flat_view(a) for a in (Q, K, V, out))  # 16-byte loads index 1-D float16 arrays
    kernel[grid, threads, 0, shared_bytes](*flat, np.uint32(n), scale_log2, bool(causal))
