"""Causal skip: a block of keys starts at the first tile of queries that can see one of them, half the causal work.

Changes:
    From v02: under a causal mask, query i sees keys 0..i only, so the
    queries before a block's first key k0 see none of its keys: their P and
    dS are all zero and add nothing to dK, dV or dQ. The block's walk over
    the query tiles starts at the tile that holds query k0 (k0 rounded down
    to BQ) instead of 0. The tiles that cross the diagonal are masked as
    before; the ones below it need no mask at all (the block-wide branch).

Why it is faster:
    v02 computed every (key, query) pair and zeroed the upper half of them:
    five products, the exponentials and dQ's atomics on pairs the mask
    throws away. Skipping them leaves the n (n + 1) / 2 pairs the causal
    FLOP count names (plus the diagonal tiles' upper parts), so the causal
    pass takes about half of v02's time; the full pass is unchanged. The
    blocks are unequal (the last block of keys walks two tiles, the first
    all of them), which the many blocks of 32 heads even out.
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.approx import exp2_approx
from zoo.device.jit import jit
from zoo.device.memory import flat_view, red_add_flat
from zoo.device.mma import (
    SHARED_ALIGN,
    ldmatrix_x4,
    ldmatrix_x4_trans,
    load_half8,
    mma_f16_f32,
    pack_half2,
    store_half8,
)
from zoo.kernels.attention_backward import (
    BQ,  # queries per tile of queries
    WARPS,  # warps per block, 16 keys each
    check_aligned,
    check_head_dim,
    check_limits,
)
from zoo.kernels.attention_backward.row_dots import row_dots

MIN_CC = (8, 0)  # mma.sync m16n8k16 with float16 inputs and ldmatrix (sm_75 has m16n8k8 only)
LOG2E = math.log2(math.e)
NEG_INF = np.float32(-np.inf)  # a masked score: exp2(-inf) is exactly 0, where exp2 of a large one is inf
LARGEST_D = 128  # dK and dV of 16 keys are d / 2 float32 registers a lane each: past 128 they spill


@functools.cache
def build(D, WARPS=WARPS, BQ=BQ, KV_GROUP=1):
    """The kernel for head dimension D, WARPS warps of 16 keys, tiles of BQ queries and KV_GROUP q heads a kv head,
    with its block and shared-memory sizes; every loop over d, keys or queries has a constant trip count."""
    BKV = 16 * WARPS  # keys per block
    THREADS = 32 * WARPS
    STRIDE = D + 8  # float16 per staged row: padded by 16 bytes, so the rows ldmatrix reads fall in different banks
    DS_STRIDE = BQ + 8  # float16 per row of the dS^T tile (a key's BQ queries), padded the same way
    V_AT = BKV * STRIDE  # the staged tiles in the dynamic shared array: K, V, Q, dO, then dS^T
    Q_AT = 2 * BKV * STRIDE
    DO_AT = Q_AT + BQ * STRIDE
    DS_AT = DO_AT + BQ * STRIDE
    CHUNKS = D // 8  # 16-byte chunks in a row of Q, K, V or dO
    ROWS_PER_PASS = THREADS // CHUNKS  # rows the block's threads copy at once, a chunk each
    KV_PASSES = -(-BKV // ROWS_PER_PASS)  # copy passes (-(-a // b): a / b rounded up); the last may be partial
    Q_PASSES = -(-BQ // ROWS_PER_PASS)
    EVEN_KV = THREADS % CHUNKS == 0 and BKV % ROWS_PER_PASS == 0  # every thread copies in every pass
    EVEN_Q = THREADS % CHUNKS == 0 and BQ % ROWS_PER_PASS == 0
    NQ = BQ // 8  # 8-query column groups of a warp's S^T and dP^T
    DT = D // 8  # 8-column groups of a warp's dK and dV
    PAIR_REGS = NQ * 4  # a lane's S^T (then P^T) and dP^T (then dS^T): rows g, g + 8; queries 2t, 2t + 1 of each 8
    KV_REGS = DT * 4  # a lane's dK and dV: rows g, g + 8; columns 2t, 2t + 1 of each 8
    # dQ's tile (BQ queries x D) is shared out: BQ / 16 groups of rows, and columns halved where the warps allow it
    ROW_GROUPS = BQ // 16
    COL_SPLIT = 2 if WARPS >= 2 * ROW_GROUPS and D % 32 == 0 else 1
    DQ_COLS = D // COL_SPLIT
    DQ_WARPS = ROW_GROUPS * COL_SPLIT  # warps past these sit out dQ's products
    DQ_REGS = DQ_COLS // 8 * 4

    @jit
    def key_tile_gradients(Q, K, V, dO, L, Dsum, out, n, bh, kv, scale, scale_log2, causal):
        tiles = cuda.shared.array(0, float16, alignment=SHARED_ALIGN)  # K, V (BKV rows), Q, dO (BQ rows), dS^T
        l_tile = cuda.shared.array(BQ, float32)  # the tile's L log2(e) and D, a query each
        d_tile = cuda.shared.array(BQ, float32)
        p = cuda.local.array(PAIR_REGS, float32)  # S^T, then P^T: keys g, g + 8 of the warp; queries 2t, 2t + 1
        ds = cuda.local.array(PAIR_REGS, float32)  # dP^T, then dS^T
        dk = cuda.local.array(KV_REGS, float32)
        dv = cuda.local.array(KV_REGS, float32)
        dq = cuda.local.array(DQ_REGS, float32)
        tid = uint32(cuda.threadIdx.x)
        lane = tid % uint32(32)
        warp = tid // uint32(32)
        g = lane // uint32(4)  # this lane's keys: g and g + 8 of the warp's 16
        t = lane % uint32(4)  # this lane's queries or columns: 2t and 2t + 1 of every 8
        kv_head = uint32(cuda.blockIdx.y)
        k0 = uint32(cuda.blockIdx.x) * uint32(BKV)
        key0 = k0 + warp * uint32(16) + g  # the two keys of this lane
        key1 = key0 + uint32(8)
        kv_base = kv_head * n * uint32(D)  # the kv head's first element in K and V
        last = n - uint32(1)
        # This thread's 16-byte chunk of each copy pass: row copy_row + p ROWS_PER_PASS, 8 columns from copy_col. A
        # row past the end copies the last row instead: its P and dS are 0 and its outputs never stored.
        copy_row = tid // uint32(CHUNKS)
        copy_col = tid % uint32(CHUNKS) * uint32(8)
        copy_dst = copy_row * uint32(STRIDE) + copy_col
        for copy_pass in range(KV_PASSES):  # the block's keys and values, once
            if EVEN_KV or copy_row + uint32(copy_pass * ROWS_PER_PASS) < uint32(
                min(BKV, (copy_pass + 1) * ROWS_PER_PASS)
            ):
                at = kv_base + min(k0 + copy_row + uint32(copy_pass * ROWS_PER_PASS), last) * uint32(D) + copy_col
                w0, w1, w2, w3 = load_half8(K, at)
                store_half8(tiles, copy_dst + uint32(copy_pass * ROWS_PER_PASS * STRIDE), w0, w1, w2, w3)
                w0, w1, w2, w3 = load_half8(V, at)
                store_half8(tiles, copy_dst + uint32(V_AT + copy_pass * ROWS_PER_PASS * STRIDE), w0, w1, w2, w3)
        for i in range(KV_REGS):
            dk[i] = float32(0.0)
            dv[i] = float32(0.0)
        # ldmatrix row addresses: the warp's K and V rows as A (row l % 16, column 8 (l // 16)); Q and dO as B, not
        # transposed (query 8 (l // 16) + l % 8, column 8 (l // 8 % 2)); dO and Q as B transposed for dV and dK
        # (query l % 16, column 8 (l // 16)); dS^T as A transposed (key 8 (l // 16) + l % 8, query 8 (l // 8 % 2))
        a_lane = (warp * uint32(16) + lane % uint32(16)) * uint32(STRIDE) + lane // uint32(16) * uint32(8)
        b_row = lane // uint32(16) * uint32(8) + lane % uint32(8)
        b_lane = b_row * uint32(STRIDE) + lane // uint32(8) % uint32(2) * uint32(8)
        bt_lane = lane % uint32(16) * uint32(STRIDE) + lane // uint32(16) * uint32(8)
        dst_lane = b_row * uint32(DS_STRIDE) + lane // uint32(8) % uint32(2) * uint32(8)
        dq_rows = warp % uint32(ROW_GROUPS) * uint32(16)  # this warp's part of dQ: 16 queries, DQ_COLS columns
        dq_cols = warp // uint32(ROW_GROUPS) * uint32(DQ_COLS)
        first_tile = k0 // uint32(BQ) * uint32(BQ) if causal else uint32(0)  # queries before k0 see none of the keys

        for head in range(kv_head * uint32(KV_GROUP), kv_head * uint32(KV_GROUP) + uint32(KV_GROUP)):
            head = uint32(head)  # the q heads that read this kv head (at KV_GROUP 1, its own)
            base = head * n * uint32(D)  # the q head's first element in Q, dO and dQ
            for q0 in range(first_tile, n, BQ):  # under a causal mask, from the tile that holds query k0
                q0 = uint32(q0)
                cuda.syncthreads()  # every warp is done with the previous Q, dO, dS^T, L and D
                for copy_pass in range(Q_PASSES):  # the tile's rows of Q and dO
                    if EVEN_Q or copy_row + uint32(copy_pass * ROWS_PER_PASS) < uint32(
                        min(BQ, (copy_pass + 1) * ROWS_PER_PASS)
                    ):
                        at = base + min(q0 + copy_row + uint32(copy_pass * ROWS_PER_PASS), last) * uint32(D) + copy_col
                        w0, w1, w2, w3 = load_half8(Q, at)
                        store_half8(tiles, copy_dst + uint32(Q_AT + copy_pass * ROWS_PER_PASS * STRIDE), w0, w1, w2, w3)
                        w0, w1, w2, w3 = load_half8(dO, at)
                        store_half8(
                            tiles, copy_dst + uint32(DO_AT + copy_pass * ROWS_PER_PASS * STRIDE), w0, w1, w2, w3
                        )
                if tid < uint32(BQ):
                    row = head * n + min(q0 + tid, last)
                    l_tile[tid] = L[row] * float32(LOG2E)  # exp(c s - L) = exp2(s c log2(e) - L log2(e))
                    d_tile[tid] = Dsum[row]
                cuda.syncthreads()  # Q, dO, L and D of the tile are staged

                # S^T = K Q^T and dP^T = V dO^T: per 16 columns of d, one A fragment each and, per 16 queries, one
                # ldmatrix of B and two mma (queries 0-7 and 8-15).
                for i in range(PAIR_REGS):
                    p[i] = float32(0.0)
                    ds[i] = float32(0.0)
                for kk in range(D // 16):
                    ka0, ka1, ka2, ka3 = ldmatrix_x4(tiles, a_lane + uint32(16 * kk))
                    va0, va1, va2, va3 = ldmatrix_x4(tiles, a_lane + uint32(V_AT + 16 * kk))
                    for jp in range(NQ // 2):
                        b0, b1, b2, b3 = ldmatrix_x4(tiles, uint32(Q_AT + 16 * jp * STRIDE + 16 * kk) + b_lane)
                        e0, e1, e2, e3 = ldmatrix_x4(tiles, uint32(DO_AT + 16 * jp * STRIDE + 16 * kk) + b_lane)
                        for h in range(2):
                            c = 4 * (2 * jp + h)
                            p[c], p[c + 1], p[c + 2], p[c + 3] = mma_f16_f32(
                                ka0, ka1, ka2, ka3, b2 if h else b0, b3 if h else b1, p[c], p[c + 1], p[c + 2], p[c + 3]
                            )
                            ds[c], ds[c + 1], ds[c + 2], ds[c + 3] = mma_f16_f32(
                                va0,
                                va1,
                                va2,
                                va3,
                                e2 if h else e0,
                                e3 if h else e1,
                                ds[c],
                                ds[c + 1],
                                ds[c + 2],
                                ds[c + 3],
                            )

                # Pairs past the end and above a causal diagonal score -inf, in a tile that crosses either (the same
                # branch for the whole block); then P^T = exp2(s c log2(e) - L log2(e)), exactly 0 for them.
                if q0 + uint32(BQ) > n or k0 + uint32(BKV) > n or (causal and k0 + uint32(BKV) > q0 + uint32(1)):
                    for j in range(NQ):
                        for e in range(2):
                            query = q0 + uint32(8 * j + e) + t * uint32(2)
                            if query >= n or key0 >= n or (causal and key0 > query):
                                p[4 * j + e] = NEG_INF
                            if query >= n or key1 >= n or (causal and key1 > query):
                                p[4 * j + 2 + e] = NEG_INF
                for j in range(NQ):
                    for e in range(2):
                        col = uint32(8 * j + e) + t * uint32(2)  # the query in the tile
                        p[4 * j + e] = exp2_approx(p[4 * j + e] * scale_log2 - l_tile[col])  # key g
                        p[4 * j + 2 + e] = exp2_approx(p[4 * j + 2 + e] * scale_log2 - l_tile[col])  # key g + 8
                # dS^T = P^T (dP^T - D), kept in registers and written to shared memory for dQ
                for j in range(NQ):
                    for e in range(2):
                        col = uint32(8 * j + e) + t * uint32(2)
                        for r in range(2):  # keys g and g + 8
                            i = 4 * j + 2 * r + e
                            ds[i] = p[i] * (ds[i] - d_tile[col])
                            tiles[DS_AT + (warp * uint32(16) + g + uint32(8 * r)) * uint32(DS_STRIDE) + col] = float16(
                                ds[i]
                            )

                # dV += P^T dO and dK += dS^T Q: the C fragments of queries 16kp .. 16kp + 15, rounded to float16 and
                # paired, are the A fragments; dO's and Q's B fragments come two 8-column tiles per ldmatrix.trans.
                for kp in range(NQ // 2):
                    c = 8 * kp
                    a0 = pack_half2(float16(p[c]), float16(p[c + 1]))  # key g, queries 2t, 2t + 1
                    a1 = pack_half2(float16(p[c + 2]), float16(p[c + 3]))  # key g + 8
                    a2 = pack_half2(float16(p[c + 4]), float16(p[c + 5]))  # key g, queries 8 + 2t, 8 + 2t + 1
                    a3 = pack_half2(float16(p[c + 6]), float16(p[c + 7]))  # key g + 8
                    s0 = pack_half2(float16(ds[c]), float16(ds[c + 1]))
                    s1 = pack_half2(float16(ds[c + 2]), float16(ds[c + 3]))
                    s2 = pack_half2(float16(ds[c + 4]), float16(ds[c + 5]))
                    s3 = pack_half2(float16(ds[c + 6]), float16(ds[c + 7]))
                    for dp in range(DT // 2):
                        b0, b1, b2, b3 = ldmatrix_x4_trans(tiles, uint32(DO_AT + 16 * kp * STRIDE + 16 * dp) + bt_lane)
                        e0, e1, e2, e3 = ldmatrix_x4_trans(tiles, uint32(Q_AT + 16 * kp * STRIDE + 16 * dp) + bt_lane)
                        for h in range(2):
                            i = 4 * (2 * dp + h)
                            dv[i], dv[i + 1], dv[i + 2], dv[i + 3] = mma_f16_f32(
                                a0, a1, a2, a3, b2 if h else b0, b3 if h else b1, dv[i], dv[i + 1], dv[i + 2], dv[i + 3]
                            )
                            dk[i], dk[i + 1], dk[i + 2], dk[i + 3] = mma_f16_f32(
                                s0, s1, s2, s3, e2 if h else e0, e3 if h else e1, dk[i], dk[i + 1], dk[i + 2], dk[i + 3]
                            )
                cuda.syncthreads()  # every warp's dS^T is in shared memory

                # dQ += c dS K over the block's keys: dS (queries x keys) is A, read transposed from dS^T; K is B,
                # transposed (keys are its k). Each of DQ_WARPS warps sums 16 queries x DQ_COLS columns.
                if warp < uint32(DQ_WARPS):
                    for i in range(DQ_REGS):
                        dq[i] = float32(0.0)
                    for kk in range(BKV // 16):
                        a0, a1, a2, a3 = ldmatrix_x4_trans(
                            tiles, uint32(DS_AT + 16 * kk * DS_STRIDE) + dq_rows + dst_lane
                        )
                        for dp in range(DQ_COLS // 16):
                            b0, b1, b2, b3 = ldmatrix_x4_trans(
                                tiles, uint32(16 * kk * STRIDE + 16 * dp) + dq_cols + bt_lane
                            )
                            for h in range(2):
                                i = 4 * (2 * dp + h)
                                dq[i], dq[i + 1], dq[i + 2], dq[i + 3] = mma_f16_f32(
                                    a0,
                                    a1,
                                    a2,
                                    a3,
                                    b2 if h else b0,
                                    b3 if h else b1,
                                    dq[i],
                                    dq[i + 1],
                                    dq[i + 2],
                                    dq[i + 3],
                                )
                    query0 = q0 + dq_rows + g  # this lane's rows of dQ: g and g + 8 of the warp's 16
                    query1 = query0 + uint32(8)
                    for i in range(DQ_COLS // 8):
                        col = dq_cols + uint32(8 * i) + t * uint32(2)
                        if query0 < n:
                            red_add_flat(out, base + query0 * uint32(D) + col, dq[4 * i] * scale)
                            red_add_flat(out, base + query0 * uint32(D) + col + uint32(1), dq[4 * i + 1] * scale)
                        if query1 < n:
                            red_add_flat(out, base + query1 * uint32(D) + col, dq[4 * i + 2] * scale)
                            red_add_flat(out, base + query1 * uint32(D) + col + uint32(1), dq[4 * i + 3] * scale)

        dk_base = (bh + kv_head) * n * uint32(D)  # dK's kv head in the output, then dV's
        dv_base = (bh + kv + kv_head) * n * uint32(D)
        for i in range(DT):
            col = uint32(8 * i) + t * uint32(2)
            if key0 < n:
                out[dk_base + key0 * uint32(D) + col] = dk[4 * i] * scale
                out[dk_base + key0 * uint32(D) + col + uint32(1)] = dk[4 * i + 1] * scale
                out[dv_base + key0 * uint32(D) + col] = dv[4 * i]
                out[dv_base + key0 * uint32(D) + col + uint32(1)] = dv[4 * i + 1]
            if key1 < n:
                out[dk_base + key1 * uint32(D) + col] = dk[4 * i + 2] * scale
                out[dk_base + key1 * uint32(D) + col + uint32(1)] = dk[4 * i + 3] * scale
                out[dv_base + key1 * uint32(D) + col] = dv[4 * i + 2]
                out[dv_base + key1 * uint32(D) + col + uint32(1)] = dv[4 * i + 3]

    return key_tile_gradients, BKV, THREADS, (2 * BKV + 2 * BQ) * STRIDE * 2 + BKV * DS_STRIDE * 2


def validate(Q, K, V, O, dO, L, causal=False):
    check_limits(Q, K, V, O, dO, L)
    check_aligned(Q, K, V, O, dO, L)
    check_head_dim(
        "backward v03", Q.shape[2], 16, LARGEST_D, ": mma's k of 16 columns; dK and dV of 16 keys live in registers"
    )


def launch(Q, K, V, O, dO, L, out, causal=False):
    bh, n, d = Q.shape
    kv = K.shape[0]
    D = row_dots(O, dO, out)  # D_i = dO_i . O_i of every query row; dQ cleared
    kernel, keys, threads, shared_bytes = build(d, KV_GROUP=bh // kv)  # KV_GROUP: q heads per kv head
    scale = np.float32(1 / math.sqrt(d))
    grid = ((n + keys - 1) // keys, kv)  # a block a tile of keys of a kv head
    flat = (flat_view(a) for a in (Q, K, V, dO, L, D, out))  # 16-byte loads and flat stores index 1-D arrays
    kernel[grid, threads, 0, shared_bytes](
        *flat, np.uint32(n), np.uint32(bh), np.uint32(kv), scale, np.float32(scale * LOG2E), bool(causal)
    )
