"""TMA and a producer warpgroup: Q, dO, L and D arrive in a ring of stages that two consumer warpgroups share.

Changes:
    From v06: a block is three warpgroups and 128 keys. Warpgroup 0 is the
    producer: its thread 0 copies the block's K and V once and each tile's Q
    and dO with ``cp.async.bulk.tensor`` (TMA, ``tma_load_2d``: 64-column
    boxes, swizzled by the copy engine as v06 swizzled by hand) into a ring of
    STAGES stages, and its first warp copies the tile's L and D beside them
    with ``cp.async``, each lane's arrival on the stage's ``full`` mbarrier
    made when its copies land (``cp_async_mbarrier_arrive``). Warpgroups 1
    and 2 are v06's consumer, 64 keys each, waiting on ``full`` instead of a
    block barrier and releasing the stage on ``empty``; two named barriers of
    its 128 threads order its dS^T stores after its last dQ MMAs and before
    its next. ``setmaxnreg``: 24 registers a producer thread, 240 a consumer.

Why it is faster:
    The consumers no longer issue copies: v06's 16-byte ``cp.async`` of every
    tile and their address and swizzle arithmetic are gone, and a warpgroup
    waits only for its own warps. The producer runs STAGES - 1 tiles ahead, so a tile has
    landed before the consumers ask, and the two consumer warpgroups share
    each tile of Q and dO: half its copies per key against v06's one
    warpgroup (attention v09's move, with keys and queries swapped).
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32, uint64
from zoo.device.approx import exp2_approx
from zoo.device.jit import jit
from zoo.device.memory import flat_view, red_add_float4
from zoo.device.mma import cp_async4, cp_async_wait_all, pack_half2
from zoo.device.warp import FULL_MASK
from zoo.device.wgmma import (
    SWIZZLE_128B,
    TILE_ALIGN,
    commit_group,
    cp_async_mbarrier_arrive,
    descriptor,
    fence,
    fence_mbarrier_init,
    fence_proxy_async,
    first_tile,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    mma_async,
    mma_async_a_regs,
    named_barrier_sync,
    setmaxnreg_dec,
    setmaxnreg_inc,
    swizzle_128b,
    tensor_map_2d,
    tensormap_acquire,
    tma_load_2d,
    wait_group,
)
from zoo.kernels.attention_backward import check_aligned, check_head_dim, check_limits
from zoo.kernels.attention_backward.row_dots import row_dots

MIN_CC = (9, 0)  # wgmma.mma_async needs sm_90a, Hopper's arch-specific target (H100, H200)
MAX_CC = (9, 0)  # sm_90a code is arch-specific: it runs on 9.0 GPUs only, not on later ones
LOG2E = math.log2(math.e)
NEG_INF = np.float32(-np.inf)  # a masked score: exp2(-inf) is exactly 0
LARGEST_D = 128  # dK and dV of 64 keys take d float32 registers a thread: past 128 they spill
CONSUMERS = 2  # warpgroups of 64 keys each
BKV = 64 * CONSUMERS  # keys a block
BQ = 64  # queries a tile: the N of S^T and dP^T, the M of dQ
THREADS = 128 + 128 * CONSUMERS  # the producer warpgroup, then the consumers
ROW_BYTES = 128  # a swizzled row: 64 float16, the width of the 128-byte swizzle pattern
GROUP_BYTES = 8 * ROW_BYTES  # 8 rows: one turn of the pattern, the descriptors' stride byte offset
SLICE = 16 * ROW_BYTES // 16  # 16 rows further down a column block, in descriptor units (bytes >> 4)
BOX = 64  # columns of a TMA box: 128 bytes, the widest row the 128-byte swizzle takes
LD = 2 * BQ  # a stage's L and D, a query each
MAX_STAGES = 4
SHARED_LIMIT = 227 * 1024 - TILE_ALIGN  # a Hopper block's shared memory, less the static arrays' KiB
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 24, 240  # setmaxnreg: 128 x 24 + 256 x 240 <= the SM's 64 K registers


def stages(d):
    """Stages of the ring: as many tiles of Q and dO as fit beside K, V and the two dS^T tiles, 2 to 4."""
    dp = -(-d // 64) * 64
    fixed = TILE_ALIGN + 2 * (2 * BKV * dp + CONSUMERS * 64 * BQ)
    return max(2, min(MAX_STAGES, (SHARED_LIMIT - fixed) // (2 * 2 * BQ * dp)))


@functools.cache
def build(D, STAGES, KV_GROUP=1):
    """The kernel for head dimension D, STAGES stages and KV_GROUP q heads a kv head, with its shared bytes."""
    DP = -(-D // 64) * 64  # D padded to whole 64-column blocks (TMA fills the columns past D with zeros)
    KV_TILE = BKV * DP  # elements: DP / 64 column blocks of BKV rows of 128 bytes, one box each
    Q_TILE = BQ * DP
    V_AT = KV_TILE  # from the first tile: K, V, then STAGES x (Q, dO), then a dS^T tile a consumer
    Q_AT = 2 * KV_TILE
    STAGE = 2 * Q_TILE
    STAGE_BYTES = 2 * STAGE
    DO_AT = Q_AT + Q_TILE
    DS_AT = Q_AT + STAGES * STAGE  # consumer c's dS^T: 64 rows (keys) of BQ queries, one column block
    DS_TILE = 64 * BQ
    NQ = BQ // 8  # 8-query column groups of S^T and dP^T
    S_REGS = BQ // 2  # m64nBQk16: a thread's S^T, keys g and g + 8 of its warp's 16
    O_REGS = DP // 2  # m64nDPk16: its share of dV, of dK
    SP_REGS = 2 * S_REGS  # S^T and dP^T in one array: one fence and one wait for both
    GRAD_REGS = 2 * O_REGS  # dV and dK in one array, likewise
    DQ_REGS = 32  # m64n64k16: a 64-column block of dQ
    FRAG = BQ // 16 * 4  # P^T or dS^T as wgmma's A fragments, four words per 16 queries
    RING_LD = STAGES * LD  # the L and D of every stage
    FULL, EMPTY, KV_FULL = 0, STAGES, 2 * STAGES  # bars[FULL + s], bars[EMPTY + s], then K's and V's
    BARS = 2 * STAGES + 1

    @jit(device=True, forceinline=True)
    def tile_at(row, chunk, rows):
        """The element index, from a tile's start, of 16-byte chunk `chunk` of row `row` in a tile of `rows` rows:
        column block chunk // 8, then the row's 128 bytes with the chunk moved by the swizzle."""
        in_block = swizzle_128b(row * uint32(ROW_BYTES) + chunk % uint32(8) * uint32(16))
        return (chunk // uint32(8) * uint32(rows * ROW_BYTES) + in_block) // uint32(2)

    @jit(arch_specific=True, launch_bounds=(THREADS, 1))  # 384 threads: 168 registers each until setmaxnreg
    def key_tile_gradients(tmap_q, tmap_k, tmap_v, tmap_do, L, Dsum, out, n, bh, kv, scale, scale_log2, causal):
        # the mbarriers and the ring of L and D are static, and dynamic shared memory starts after them, 16-byte
        # aligned: no declared alignment, so that first_tile measures the skew to the first 1024-byte boundary
        tiles = cuda.shared.array(0, float16)  # K, V, STAGES x (Q, dO), a dS^T a consumer, from tiles[tile0]
        bars = cuda.shared.array(BARS, uint64)  # full[STAGES], empty[STAGES], K's and V's
        ring_ld = cuda.shared.array(RING_LD, float32)  # stage s: L of its BQ queries from s LD, then D
        tile0, base = first_tile(tiles)  # K starts at tiles[tile0], shared address base: a 1024-byte boundary
        tid = uint32(cuda.threadIdx.x)
        warpgroup = tid // uint32(128)  # 0: the producer; c = 1, 2: the consumer of keys 64 (c - 1) ..
        kv_head = uint32(cuda.blockIdx.y)
        k0 = uint32(cuda.blockIdx.x) * uint32(BKV)
        first_q = k0 if causal else uint32(0)  # BQ divides BKV: queries before k0 see none of the keys (causal)
        per_head = (n - first_q + uint32(BQ - 1)) // uint32(BQ)  # query tiles a q head walks
        count = per_head * uint32(KV_GROUP)  # tiles of the whole walk: every q head of the group, in turn
        head0 = kv_head * uint32(KV_GROUP)
        last = n - uint32(1)
        if tid == uint32(0):
            for st in range(STAGES):
                mbarrier_init(bars, FULL + st, 33)  # thread 0's arrival (then STAGE_BYTES from TMA), warp 0's L, D
                mbarrier_init(bars, EMPTY + st, 128 * CONSUMERS)  # every consumer thread, its MMAs retired
            mbarrier_init(bars, KV_FULL, 1)
            fence_mbarrier_init()  # the copy engine, which counts bytes down on them, sees them set up too
        cuda.syncthreads()  # the barriers are set up before anyone uses them (the block's only barrier)

        if warpgroup == uint32(0):  # the producer: warp 0 fills each stage the consumers released
            setmaxnreg_dec(PRODUCER_REGISTERS)
            if tid >= uint32(32):
                return
            if tid == uint32(0):
                tensormap_acquire(tmap_q)  # the maps were written by a copy from the host: fetch them afresh
                tensormap_acquire(tmap_k)
                tensormap_acquire(tmap_v)
                tensormap_acquire(tmap_do)
                # rows of the maps: a head's n rows follow the one before; boxes past a head's end read the next
                # head's rows (or zeros past the last): masked pairs, whose P and dS are 0
                mbarrier_arrive_expect_tx(bars, KV_FULL, 2 * 2 * KV_TILE)
                for c in range(DP // BOX):  # column block c: BKV rows x 64 columns
                    at = tile0 + uint32(c * BKV * BOX)
                    tma_load_2d(tiles, at, tmap_k, uint32(c * BOX), kv_head * n + k0, bars, KV_FULL)
                    tma_load_2d(tiles, at + uint32(V_AT), tmap_v, uint32(c * BOX), kv_head * n + k0, bars, KV_FULL)
            stage, phase = uint32(0), uint32(0)  # the stage of tile it, and the parity of its round
            for it in range(count):
                it = uint32(it)
                head = head0 + it // per_head  # the tile's q head and first query
                q0 = first_q + it % per_head * uint32(BQ)
                # the consumers have released this stage (parity phase ^ 1: the first round passes at once)
                mbarrier_wait(bars, EMPTY + stage, phase ^ uint32(1))
                if tid == uint32(0):
                    mbarrier_arrive_expect_tx(bars, FULL + stage, STAGE_BYTES)  # arrive; STAGE_BYTES are to land
                    at = tile0 + uint32(Q_AT) + stage * uint32(STAGE)
                    for c in range(DP // BOX):  # column block c: BQ rows x 64 columns of Q, then of dO
                        tma_load_2d(
                            tiles, at + uint32(c * BQ * BOX), tmap_q, uint32(c * BOX), head * n + q0, bars, FULL + stage
                        )
                        dst = at + uint32(Q_TILE + c * BQ * BOX)
                        tma_load_2d(tiles, dst, tmap_do, uint32(c * BOX), head * n + q0, bars, FULL + stage)
                for h in range(BQ // 32):  # the tile's L and D, a query a lane each round; past the end the last
                    row = head * n + min(q0 + tid + uint32(32 * h), last)
                    cp_async4(ring_ld, stage * uint32(LD) + tid + uint32(32 * h), L, row)
                    cp_async4(ring_ld, stage * uint32(LD) + uint32(BQ) + tid + uint32(32 * h), Dsum, row)
                cp_async_mbarrier_arrive(bars, FULL + stage)  # this lane's arrival, once its copies have landed
                stage += uint32(1)
                if stage == uint32(STAGES):
                    stage, phase = uint32(0), phase ^ uint32(1)
            cp_async_wait_all()  # this lane's last copies have landed before it exits
            return

        setmaxnreg_inc(CONSUMER_REGISTERS)
        sp = cuda.local.array(SP_REGS, float32)  # S^T then P^T, from 0; dP^T then dS^T, from S_REGS
        grads = cuda.local.array(GRAD_REGS, float32)  # dV from 0, dK from O_REGS: summed over every tile
        dq = cuda.local.array(DQ_REGS, float32)  # a 64-column block of this tile's dQ
        p_frag = cuda.local.array(FRAG, uint32)
        ds_frag = cuda.local.array(FRAG, uint32)
        consumer = warpgroup - uint32(1)
        lane = tid % uint32(32)
        warp = tid % uint32(128) // uint32(32)
        g = lane // uint32(4)  # this lane's keys (rows of S^T, dV, dK): g and g + 8 of its warp's 16
        t = lane % uint32(4)  # its queries (columns of S^T) and columns of d: 2t and 2t + 1 of every 8
        rows = consumer * uint32(64)  # this warpgroup's first key in the block
        kc = k0 + rows
        key0 = kc + warp * uint32(16) + g  # the two keys of this lane
        key1 = key0 + uint32(8)
        for i in range(GRAD_REGS):
            grads[i] = float32(0.0)
        ds_at = tile0 + uint32(DS_AT) + consumer * uint32(DS_TILE)  # this warpgroup's dS^T
        # v06's descriptors; this warpgroup's K and V rows start 64 rows (8 KiB) into each column block
        k_desc = descriptor(base + rows * uint32(ROW_BYTES), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        v_desc = descriptor(
            base + uint32(2 * V_AT) + rows * uint32(ROW_BYTES), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B
        )
        q_desc = descriptor(base + uint32(2 * Q_AT), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        do_desc = descriptor(base + uint32(2 * DO_AT), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        q_n = descriptor(base + uint32(2 * Q_AT), uint32(BQ * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        do_n = descriptor(base + uint32(2 * DO_AT), uint32(BQ * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        k_n = descriptor(base + rows * uint32(ROW_BYTES), uint32(BKV * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B)
        ds_m = descriptor(
            base + uint32(2 * DS_AT) + consumer * uint32(2 * DS_TILE),
            uint32(BQ * ROW_BYTES),
            uint32(GROUP_BYTES),
            SWIZZLE_128B,
        )
        mbarrier_wait(bars, KV_FULL, 0)  # K and V have landed
        stage, phase = uint32(0), uint32(0)
        for it in range(count):
            it = uint32(it)
            head = head0 + it // per_head  # this tile's q head and first query
            q0 = first_q + it % per_head * uint32(BQ)
            l_at = stage * uint32(LD)  # this tile's L, then its D BQ further
            at = uint64(stage * uint32(STAGE_BYTES) >> uint32(4))  # its Q and dO, in descriptor units
            mbarrier_wait(bars, FULL + stage, phase)  # the tile has landed (TMA writes as wgmma reads)

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
            # branch for the whole warpgroup); then P^T = exp2(s c log2(e) - L log2(e)), exactly 0 for them.
            if q0 + uint32(BQ) > n or kc + uint32(64) > n or (causal and kc + uint32(64) > q0 + uint32(1)):
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
                    l_log2 = ring_ld[l_at + col] * float32(LOG2E)  # exp(c s - L) = exp2(s c log2(e) - L log2(e))
                    d_row = ring_ld[l_at + uint32(BQ) + col]
                    for r in range(2):  # keys g and g + 8
                        i = 4 * j + 2 * r + e
                        sp[i] = exp2_approx(sp[i] * scale_log2 - l_log2)
                        sp[S_REGS + i] = sp[i] * (sp[S_REGS + i] - d_row)  # dS^T = P^T (dP^T - D)
            # dS^T to this warpgroup's tile for dQ's product, swizzled as 64 rows (keys) of BQ queries, once every
            # warp of the warpgroup has retired the last tile's dQ MMAs, which read all of it (each warp's quarter of
            # the tensor cores reads every row of its A): v06's block barrier at the top of a tile did this
            named_barrier_sync(uint32(1) + consumer, 128)  # barrier 1 or 2: this warpgroup's 128 threads
            for j in range(NQ):
                for r in range(2):
                    key = warp * uint32(16) + g + uint32(8 * r)
                    at_ds = ds_at + tile_at(key, uint32(j), 64) + t * uint32(2)
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

            # dQ = dS K over this warpgroup's 64 keys, v06's: dS^T M-major (trans_a), K N-major (trans_b), a
            # 64-column block of dQ at a time
            fence_proxy_async()  # this thread's dS^T stores are visible to the tensor cores ...
            named_barrier_sync(uint32(1) + consumer, 128)  # ... and its warpgroup's are written (barrier 1 or 2)
            odd = t % uint32(2) == uint32(1)
            query = q0 + warp * uint32(16) + g + (uint32(8) if odd else uint32(0))  # this lane's row of dQ
            col0 = (t - t % uint32(2)) * uint32(2)  # its first column of each 8: 0 or 4
            q_base = head * n * uint32(D)  # the q head's first element in dQ
            for cb in range(DP // 64):
                fence(dq, DQ_REGS)  # the last block's reads of dq come before the MMAs write it
                for kp in range(4):  # the warpgroup's 64 keys, 16 a slice
                    k_at = uint64(cb * (BKV * ROW_BYTES // 16) + kp * SLICE)  # column block cb of its K rows
                    mma_async(dq, 0, 64, ds_m + uint64(kp * SLICE), k_n + k_at, 0 if kp == 0 else 1, 1, 1, "f16")
                commit_group()
                wait_group(0, dq, DQ_REGS)  # dQ's block has landed (the first wait retires dV's and dK's MMAs too)
                if cb == 0:
                    mbarrier_arrive(bars, EMPTY + stage)  # no MMA of this thread reads the stage any more
                # v06's exchange: lanes t and t xor 1 trade two columns, then add four at a time
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
            stage += uint32(1)
            if stage == uint32(STAGES):
                stage, phase = uint32(0), phase ^ uint32(1)

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

    return key_tile_gradients, TILE_ALIGN + 2 * (2 * KV_TILE + STAGES * STAGE + CONSUMERS * DS_TILE)


def validate(Q, K, V, O, dO, L, causal=False):
    check_limits(Q, K, V, O, dO, L)
    check_aligned(Q, K, V, O, dO, L)
    check_head_dim("backward v07", Q.shape[2], 16, LARGEST_D, ": wgmma's k of 16 columns; dK and dV in registers")


def launch(Q, K, V, O, dO, L, out, causal=False):
    bh, n, d = Q.shape
    kv = K.shape[0]
    D = row_dots(O, dO, out)  # D_i = dO_i . O_i of every query row; dQ cleared
    kernel, shared_bytes = build(d, stages(d), KV_GROUP=bh // kv)  # KV_GROUP: q heads per kv head
    scale = np.float32(1 / math.sqrt(d))
    grid = ((n + BKV - 1) // BKV, kv)  # a block a tile of keys of a kv head
    # the heads one above the other: Q and dO (bh n) x d matrices in boxes of BQ rows, K and V (kv n) x d in BKV
    tmap_q = tensor_map_2d(flat_view(Q), BQ, BOX, shape=(bh * n, d))
    tmap_do = tensor_map_2d(flat_view(dO), BQ, BOX, shape=(bh * n, d))
    tmap_k = tensor_map_2d(flat_view(K), BKV, BOX, shape=(kv * n, d))
    tmap_v = tensor_map_2d(flat_view(V), BKV, BOX, shape=(kv * n, d))
    flat = (flat_view(a) for a in (L, D, out))
    kernel[grid, THREADS, 0, shared_bytes](
        tmap_q,
        tmap_k,
        tmap_v,
        tmap_do,
        *flat,
        np.uint32(n),
        np.uint32(bh),
        np.uint32(kv),
        scale,
        np.float32(scale * LOG2E),
        bool(causal),
    )
