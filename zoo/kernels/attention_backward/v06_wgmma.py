"""Hopper's warpgroup MMA: a warpgroup owns 64 keys, and all five products are wgmma (attention v08's move).

Changes:
    From v05: ``mma.sync`` gives way to ``wgmma.mma_async`` (``zoo.device.wgmma``).
    A block is one warpgroup (128 threads) owning 64 keys; a tile of queries is
    64 rows (wgmma's M, which dQ's product needs). K, V and two stages of Q and
    dO are 128-byte rows swizzled by ``swizzle_128b``, still copied by cp.async.
    S^T = K Q^T and dP^T = V dO^T read all four K-major through descriptors. The
    scores' C fragment is wgmma's A fragment (the forward's P V), so dV += P^T dO
    and dK += dS^T Q take P^T and dS^T from registers, dO and Q read N-major
    from the same tiles. dQ = dS K reads dS^T, written once to shared memory,
    as an M-major A (trans_a) and K N-major, then v05's vector atomics.

Why it is faster:
    One wgmma m64nNk16 does 64 x N x 16 where an ``mma.sync`` did 16 x 8 x 16,
    with no ``ldmatrix``: the fragments v05 loaded into registers for every
    product (K, V, Q, dO, dS^T twice) are read by the tensor cores from shared
    memory, and the issue slots they took go to the softmax's gradient.
    Hopper's tensor cores reach their rate only through wgmma. Each product is
    still issued, committed and waited for: nothing overlaps the MMAs yet.
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32, uint64
from zoo.device.approx import exp2_approx
from zoo.device.jit import jit
from zoo.device.memory import flat_view, red_add_float4
from zoo.device.mma import cp_async4, cp_async16, cp_async_commit, cp_async_wait_all, pack_half2
from zoo.device.warp import FULL_MASK
from zoo.device.wgmma import (
    SWIZZLE_128B,
    SWIZZLE_ALIGN,
    TILE_ALIGN,
    commit_group,
    descriptor,
    fence,
    fence_proxy_async,
    first_tile,
    mma_async,
    mma_async_a_regs,
    swizzled_chunk,
    wait_group,
)
from zoo.kernels.attention_backward import check_aligned, check_head_dim, check_limits
from zoo.kernels.attention_backward.row_dots import row_dots

MIN_CC = (9, 0)  # wgmma.mma_async needs sm_90a, Hopper's arch-specific target (H100, H200)
MAX_CC = (9, 0)  # sm_90a code is arch-specific: it runs on 9.0 GPUs only, not on later ones
LOG2E = math.log2(math.e)
NEG_INF = np.float32(-np.inf)  # a masked score: exp2(-inf) is exactly 0
LARGEST_D = 128  # dK and dV of 64 keys take d float32 registers a thread: past 128 they spill
BKV = 64  # keys a block: one warpgroup, the M of S^T, dP^T, dV and dK
BQ = 64  # queries a tile: the N of S^T and dP^T, the M of dQ
THREADS = 128
ROW_BYTES = 128  # a swizzled row: 64 float16, the width of the 128-byte swizzle pattern
GROUP_BYTES = 8 * ROW_BYTES  # 8 rows: one turn of the pattern, the descriptors' stride byte offset
SLICE = 16 * ROW_BYTES // 16  # 16 rows further down a column block, in descriptor units (bytes >> 4)


@functools.cache
def build(D, KV_GROUP=1):
    """The kernel for head dimension D and KV_GROUP q heads a kv head, with its shared bytes."""
    DP = -(-D // 64) * 64  # D padded to whole 64-column blocks: the swizzled tiles' width, the N of dV, dK, dQ
    CHUNKS = D // 8  # 16-byte chunks in a row of Q, K, V or dO
    KV_TILE = BKV * DP  # elements: DP / 64 column blocks of BKV rows of 128 bytes
    Q_TILE = BQ * DP
    V_AT = KV_TILE  # from the first tile: K, V, then two stages of (Q, dO), then dS^T
    Q_AT = 2 * KV_TILE
    STAGE = 2 * Q_TILE
    DO_AT = Q_AT + Q_TILE
    DS_AT = Q_AT + 2 * STAGE  # dS^T: BKV rows (keys) of BQ queries, one column block
    KV_PASSES = BKV * CHUNKS // THREADS  # whole passes: D is a multiple of 16, so CHUNKS is even
    Q_PASSES = BQ * CHUNKS // THREADS
    NQ = BQ // 8  # 8-query column groups of S^T and dP^T
    S_REGS = BQ // 2  # m64nBQk16: a thread's S^T, keys g and g + 8 of its warp's 16
    O_REGS = DP // 2  # m64nDPk16: its share of dV, of dK, of dQ
    FRAG = BQ // 16 * 4  # P^T or dS^T as wgmma's A fragments, four words per 16 queries
    SP_REGS = 2 * S_REGS  # S^T and dP^T in one array: one fence and one wait for both
    GRAD_REGS = 2 * O_REGS  # dV and dK in one array, likewise
    DQ_REGS = 32  # m64n64k16: a 64-column block of dQ
    L_STAGES = 2 * BQ  # two stages of L and D, a query each (a shared array's size must be one name)

    @jit(device=True, forceinline=True)
    def copy_tile(tiles, l_tile, d_tile, at, Q, dO, L, Dsum, head, q0, stage, n, tid):
        """This thread's cp.async of q head ``head``'s queries q0 .. q0 + BQ - 1 (Q, dO, L and D) into ``stage``. A
        row past the end copies the last instead: its P and dS are 0 and its dQ row is never added."""
        base = head * n * uint32(D)
        last = n - uint32(1)
        for p in range(Q_PASSES):
            c = tid + uint32(p * THREADS)
            row, chunk = c // uint32(CHUNKS), c % uint32(CHUNKS)
            src = base + min(q0 + row, last) * uint32(D) + chunk * uint32(8)
            dst = at + stage * uint32(STAGE) + swizzled_chunk(row, chunk, BQ)
            cp_async16(tiles, dst + uint32(Q_AT), Q, src)
            cp_async16(tiles, dst + uint32(DO_AT), dO, src)
        if tid < uint32(BQ):
            row = head * n + min(q0 + tid, last)
            cp_async4(l_tile, stage * uint32(BQ) + tid, L, row)
            cp_async4(d_tile, stage * uint32(BQ) + tid, Dsum, row)

    @jit(arch_specific=True, launch_bounds=(THREADS, 1))  # one warpgroup: up to 255 registers a thread
    def key_tile_gradients(Q, K, V, dO, L, Dsum, out, n, bh, kv, scale, scale_log2, causal):
        tiles = cuda.shared.array(0, float16, alignment=SWIZZLE_ALIGN)  # K, V, 2 x (Q, dO), dS^T from tile0
        l_tile = cuda.shared.array(L_STAGES, float32)  # two stages of the tile's L and D, a query each
        d_tile = cuda.shared.array(L_STAGES, float32)
        tile0, base = first_tile(tiles)  # K starts at tiles[tile0], shared address base: a 1024-byte boundary
        sp = cuda.local.array(SP_REGS, float32)  # S^T then P^T, from 0; dP^T then dS^T, from S_REGS
        grads = cuda.local.array(GRAD_REGS, float32)  # dV from 0, dK from O_REGS: summed over every tile
        dq = cuda.local.array(DQ_REGS, float32)  # a 64-column block of this tile's dQ
        p_frag = cuda.local.array(FRAG, uint32)
        ds_frag = cuda.local.array(FRAG, uint32)
        tid = uint32(cuda.threadIdx.x)
        lane = tid % uint32(32)
        warp = tid // uint32(32)
        g = lane // uint32(4)  # this lane's keys (rows of S^T, dV, dK): g and g + 8 of its warp's 16
        t = lane % uint32(4)  # its queries (columns of S^T) and columns of d: 2t and 2t + 1 of every 8
        kv_head = uint32(cuda.blockIdx.y)
        k0 = uint32(cuda.blockIdx.x) * uint32(BKV)
        key0 = k0 + warp * uint32(16) + g  # the two keys of this lane
        key1 = key0 + uint32(8)
        kv_base = kv_head * n * uint32(D)  # the kv head's first element in K and V
        last = n - uint32(1)
        for p in range(KV_PASSES):  # the block's keys and values, once, rows past the end copying the last
            c = tid + uint32(p * THREADS)
            row, chunk = c // uint32(CHUNKS), c % uint32(CHUNKS)
            src = kv_base + min(k0 + row, last) * uint32(D) + chunk * uint32(8)
            dst = tile0 + swizzled_chunk(row, chunk, BKV)
            cp_async16(tiles, dst, K, src)
            cp_async16(tiles, dst + uint32(V_AT), V, src)
        for i in range(GRAD_REGS):
            grads[i] = float32(0.0)
        first_q = k0 if causal else uint32(0)  # BQ = BKV: queries before k0 see none of the keys under the mask
        per_head = (n - first_q + uint32(BQ - 1)) // uint32(BQ)  # query tiles a q head walks
        count = per_head * uint32(KV_GROUP)  # tiles of the whole walk: every q head of the group, in turn
        head0 = kv_head * uint32(KV_GROUP)
        copy_tile(tiles, l_tile, d_tile, tile0, Q, dO, L, Dsum, head0, first_q, uint32(0), n, tid)
        cp_async_commit()  # K, V and the first tile
        # Descriptors (the fields drop 4 bits: x bytes further adds x >> 4). K-major (S^T's and dP^T's A and B):
        # 8-row groups 1024 B apart, a k slice of 16 columns 32 bytes along the row, the next 64 columns a column
        # block further. N-major (dV's, dK's and dQ's B) and M-major (dQ's A): rows are k, the leading offset
        # steps to the next 64 columns, 16 rows of k are a slice.
        k_desc = descriptor(base, uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        v_desc = descriptor(base + uint32(2 * V_AT), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        q_desc = descriptor(base + uint32(2 * Q_AT), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        do_desc = descriptor(base + uint32(2 * DO_AT), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        q_n = descriptor(base + uint32(2 * Q_AT), uint32(BQ * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        do_n = descriptor(base + uint32(2 * DO_AT), uint32(BQ * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        k_n = descriptor(base, uint32(BKV * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        ds_m = descriptor(base + uint32(2 * DS_AT), uint32(BKV * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)

        for it in range(count):
            it = uint32(it)
            head = head0 + it // per_head  # this tile's q head and first query
            q0 = first_q + it % per_head * uint32(BQ)
            stage = it % uint32(2)
            l_at = stage * uint32(BQ)  # this tile's L and D
            at = uint64(stage * uint32(2 * STAGE) >> uint32(4))  # its Q and dO, in descriptor units
            cp_async_wait_all()  # this thread's copies of tile it have landed ...
            fence_proxy_async()  # ... and are visible to the tensor cores, which read through the async proxy
            cuda.syncthreads()  # everyone's have; and every MMA of tile it - 1 retired (its stage, dS^T free)
            if it + uint32(1) < count:  # tile it + 1 copies itself into the other stage while this one is used
                following = it + uint32(1)
                copy_tile(
                    tiles,
                    l_tile,
                    d_tile,
                    tile0,
                    Q,
                    dO,
                    L,
                    Dsum,
                    head0 + following // per_head,
                    first_q + following % per_head * uint32(BQ),
                    uint32(1) - stage,
                    n,
                    tid,
                )
                cp_async_commit()

            # S^T = K Q^T and dP^T = V dO^T: D / 16 MMAs of m64nBQk16 each, one group, one wait
            fence(sp, SP_REGS)  # the last tile's reads of sp come before the MMAs write it
            for kk in range(D // 16):
                k_at = uint64(kk // 4 * (BKV * ROW_BYTES // 16) + kk % 4 * 2)  # column block kk // 4, 32 B a slice
                q_at = at + uint64(kk // 4 * (BQ * ROW_BYTES // 16) + kk % 4 * 2)
                mma_async(sp, 0, BQ, k_desc + k_at, q_desc + q_at, 0 if kk == 0 else 1, 0, 0, "f16")
                mma_async(sp, S_REGS, BQ, v_desc + k_at, do_desc + q_at, 0 if kk == 0 else 1, 0, 0, "f16")
            commit_group()
            wait_group(0, sp, SP_REGS)  # S^T and dP^T have landed

            # Pairs past the end and above a causal diagonal score -inf, in a tile that crosses either (the same
            # branch for the whole block); then P^T = exp2(s c log2(e) - L log2(e)), exactly 0 for them.
            if q0 + uint32(BQ) > n or k0 + uint32(BKV) > n or (causal and k0 + uint32(BKV) > q0 + uint32(1)):
                for j in range(NQ):
                    for e in range(2):
                        query = q0 + uint32(8 * j + e) + t * uint32(2)
                        if query >= n or key0 >= n or (causal and key0 > query):
                            sp[4 * j + e] = NEG_INF
                        if query >= n or key1 >= n or (causal and key1 > query):
                            sp[4 * j + 2 + e] = NEG_INF
            for j in range(NQ):
                for e in range(2):
                    col = uint32(8 * j + e) + t * uint32(2)  # the query in the tile
                    l_log2 = l_tile[l_at + col] * float32(LOG2E)  # exp(c s - L) = exp2(s c log2(e) - L log2(e))
                    d_row = d_tile[l_at + col]
                    for r in range(2):  # keys g and g + 8
                        i = 4 * j + 2 * r + e
                        sp[i] = exp2_approx(sp[i] * scale_log2 - l_log2)
                        sp[S_REGS + i] = sp[i] * (sp[S_REGS + i] - d_row)  # dS^T = P^T (dP^T - D)
            # dS^T to shared memory for dQ's product, swizzled as a tile of BKV rows (keys) of BQ queries
            for j in range(NQ):
                for r in range(2):
                    key = warp * uint32(16) + g + uint32(8 * r)
                    at_ds = tile0 + uint32(DS_AT) + swizzled_chunk(key, uint32(j), BKV) + t * uint32(2)
                    tiles[at_ds] = float16(sp[S_REGS + 4 * j + 2 * r])
                    tiles[at_ds + uint32(1)] = float16(sp[S_REGS + 4 * j + 2 * r + 1])
            # P^T and dS^T as A fragments: queries 16kp .. 16kp + 15 of a thread's two keys, rounded and paired
            for kp in range(BQ // 16):
                c = 8 * kp
                p_frag[4 * kp] = pack_half2(float16(sp[c]), float16(sp[c + 1]))  # key g, queries 2t, 2t + 1
                p_frag[4 * kp + 1] = pack_half2(float16(sp[c + 2]), float16(sp[c + 3]))  # key g + 8
                p_frag[4 * kp + 2] = pack_half2(float16(sp[c + 4]), float16(sp[c + 5]))  # key g, queries 8 + 2t ..
                p_frag[4 * kp + 3] = pack_half2(float16(sp[c + 6]), float16(sp[c + 7]))  # key g + 8
                c += S_REGS
                ds_frag[4 * kp] = pack_half2(float16(sp[c]), float16(sp[c + 1]))
                ds_frag[4 * kp + 1] = pack_half2(float16(sp[c + 2]), float16(sp[c + 3]))
                ds_frag[4 * kp + 2] = pack_half2(float16(sp[c + 4]), float16(sp[c + 5]))
                ds_frag[4 * kp + 3] = pack_half2(float16(sp[c + 6]), float16(sp[c + 7]))

            # dV += P^T dO and dK += dS^T Q: BQ / 16 MMAs of m64nDPk16 each, A from registers, dO and Q N-major
            # (16 queries a slice: 16 rows, 2048 bytes, further down their column blocks)
            fence(grads, GRAD_REGS)  # the fragments' words, and the last waits' writes, come before the MMAs
            for kp in range(BQ // 16):
                w = 4 * kp
                b_at = at + uint64(kp * SLICE)
                mma_async_a_regs(
                    grads, 0, DP, p_frag[w], p_frag[w + 1], p_frag[w + 2], p_frag[w + 3], do_n + b_at, 1, 1, "f16"
                )
                mma_async_a_regs(
                    grads,
                    O_REGS,
                    DP,
                    ds_frag[w],
                    ds_frag[w + 1],
                    ds_frag[w + 2],
                    ds_frag[w + 3],
                    q_n + b_at,
                    1,
                    1,
                    "f16",
                )
            commit_group()

            # dQ = dS K: dS (queries x keys) is A, read M-major from dS^T (trans_a); K is B, N-major (trans_b); one
            # 64-column block of dQ at a time, so that its accumulators take 32 registers whatever D
            fence_proxy_async()  # this thread's dS^T stores are visible to the tensor cores ...
            cuda.syncthreads()  # ... and everyone's are written
            odd = t % uint32(2) == uint32(1)
            query = q0 + warp * uint32(16) + g + (uint32(8) if odd else uint32(0))  # this lane's row of dQ
            col0 = (t - t % uint32(2)) * uint32(2)  # its first column of each 8: 0 or 4
            q_base = head * n * uint32(D)  # the q head's first element in dQ
            for cb in range(DP // 64):
                fence(dq, DQ_REGS)  # the last block's reads of dq come before the MMAs write it
                for kp in range(BKV // 16):
                    k_at = uint64(cb * (BKV * ROW_BYTES // 16) + kp * SLICE)  # column block cb, 16 keys a slice
                    mma_async(dq, 0, 64, ds_m + uint64(kp * SLICE), k_n + k_at, 0 if kp == 0 else 1, 1, 1, "f16")
                commit_group()
                wait_group(0, dq, DQ_REGS)  # dQ's block has landed (the first wait retires dV's and dK's MMAs too)
                # Lanes t and t xor 1 trade values (four shuffles: choosing which two to send would index dq at run
                # time and send it to local memory); an even t keeps row g and adds the partner's two columns after
                # its own, an odd t keeps row g + 8 and adds the partner's two before its own: four columns a request
                for i in range(min(8, D // 8 - 8 * cb)):  # the padded columns past D are never added
                    take0 = cuda.shfl_xor_sync(FULL_MASK, dq[4 * i], 1)  # the partner's row g
                    take1 = cuda.shfl_xor_sync(FULL_MASK, dq[4 * i + 1], 1)
                    take2 = cuda.shfl_xor_sync(FULL_MASK, dq[4 * i + 2], 1)  # and row g + 8
                    take3 = cuda.shfl_xor_sync(FULL_MASK, dq[4 * i + 3], 1)
                    if query < n:
                        at_dq = q_base + query * uint32(D) + col0 + uint32(64 * cb + 8 * i)  # 16-byte aligned
                        if odd:
                            red_add_float4(
                                out, at_dq, take2 * scale, take3 * scale, dq[4 * i + 2] * scale, dq[4 * i + 3] * scale
                            )
                        else:
                            red_add_float4(
                                out, at_dq, dq[4 * i] * scale, dq[4 * i + 1] * scale, take0 * scale, take1 * scale
                            )
            wait_group(0, grads, GRAD_REGS)  # retired by the first wait above: dV and dK are final for the compiler

        dk_base = (bh + kv_head) * n * uint32(D)  # dK's kv head in the output, then dV's
        dv_base = (bh + kv + kv_head) * n * uint32(D)
        for i in range(D // 8):
            col = uint32(8 * i) + t * uint32(2)
            if key0 < n:
                out[dk_base + key0 * uint32(D) + col] = grads[O_REGS + 4 * i] * scale
                out[dk_base + key0 * uint32(D) + col + uint32(1)] = grads[O_REGS + 4 * i + 1] * scale
                out[dv_base + key0 * uint32(D) + col] = grads[4 * i]
                out[dv_base + key0 * uint32(D) + col + uint32(1)] = grads[4 * i + 1]
            if key1 < n:
                out[dk_base + key1 * uint32(D) + col] = grads[O_REGS + 4 * i + 2] * scale
                out[dk_base + key1 * uint32(D) + col + uint32(1)] = grads[O_REGS + 4 * i + 3] * scale
                out[dv_base + key1 * uint32(D) + col] = grads[4 * i + 2]
                out[dv_base + key1 * uint32(D) + col + uint32(1)] = grads[4 * i + 3]

    return key_tile_gradients, TILE_ALIGN + 2 * (2 * KV_TILE + 2 * STAGE + BKV * BQ)


def validate(Q, K, V, O, dO, L, causal=False):
    check_limits(Q, K, V, O, dO, L)
    check_aligned(Q, K, V, O, dO, L)
    check_head_dim("backward v06", Q.shape[2], 16, LARGEST_D, ": wgmma's k of 16 columns; dK and dV in registers")


def launch(Q, K, V, O, dO, L, out, causal=False):
    bh, n, d = Q.shape
    kv = K.shape[0]
    D = row_dots(O, dO, out)  # D_i = dO_i . O_i of every query row; dQ cleared
    kernel, shared_bytes = build(d, KV_GROUP=bh // kv)  # KV_GROUP: q heads per kv head
    scale = np.float32(1 / math.sqrt(d))
    grid = ((n + BKV - 1) // BKV, kv)  # a block a tile of keys of a kv head
    flat = (flat_view(a) for a in (Q, K, V, dO, L, D, out))  # 16-byte loads and flat stores index 1-D arrays
    kernel[grid, THREADS, 0, shared_bytes](
        *flat, np.uint32(n), np.uint32(bh), np.uint32(kv), scale, np.float32(scale * LOG2E), bool(causal)
    )
