"""Ping-pong: the two consumer warpgroups take turns on the tensor cores, one's softmax under the other's MMAs.

Changes:
    From v10: two named barriers (``bar.sync``/``bar.arrive`` of 256
    threads, ``named_barrier_sync``) hand the tensor cores from one consumer
    warpgroup to the other. A consumer waits for its turn, issues its S and
    P V, and hands the turn over; its softmax then runs while the other
    warpgroup's MMAs do. The second consumer gives the first its first turn,
    and the first takes one more turn for its last P V, so every arrival
    is waited for.

Why it is faster:
    In v10 the two warpgroups issued their MMAs whenever they were ready,
    so they tended to fall in step: both on the tensor cores at once, then
    both on exponentials while the tensor cores idled. Forced to alternate
    (FlashAttention-3's ping-pong scheduling), one warpgroup's softmax
    always has the other's GEMMs to hide under.
"""

import functools
import math

import numpy as np

from zoo import SIMULATOR
from zoo.device import HOPPER, cuda, float16, float32, properties, uint32, uint64
from zoo.device.approx import exp2_approx
from zoo.device.jit import jit
from zoo.device.memory import flat_view
from zoo.device.mma import pack_half2
from zoo.device.warp import FULL_MASK
from zoo.device.wgmma import (
    SWIZZLE_128B,
    TILE_ALIGN,
    commit_group,
    descriptor,
    fence,
    fence_mbarrier_init,
    first_tile,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    mma_async,
    mma_async_a_regs,
    named_barrier_arrive,
    named_barrier_sync,
    setmaxnreg_dec,
    setmaxnreg_inc,
    tensor_map_2d,
    tensormap_acquire,
    tma_load_2d,
    wait_group,
)
from zoo.kernels.attention import check_aligned, check_head_dim, check_limits

MIN_CC = (9, 0)  # wgmma.mma_async needs sm_90a, Hopper's arch-specific target (H100, H200)
MAX_CC = (9, 0)  # sm_90a code is arch-specific: it runs on 9.0 GPUs only, not on later ones
NEG_INF = np.float32(-np.inf)  # a masked score: exp2(-inf) is exactly 0
LOG2E = math.log2(math.e)
CONSUMERS = 2  # warpgroups of 64 query rows each
BQ = 64 * CONSUMERS  # query rows a block
THREADS = 128 + 128 * CONSUMERS  # the producer warpgroup, then the consumers
ROW_BYTES = 128  # a swizzled row: 64 float16, the width of the 128-byte swizzle pattern
GROUP_BYTES = 8 * ROW_BYTES  # 8 rows: one turn of the pattern, the descriptors' stride byte offset
BOX = 64  # columns of a TMA box: 128 bytes, the widest row the 128-byte swizzle takes
SHARED_LIMIT = 227 * 1024 - TILE_ALIGN  # a Hopper block's dynamic shared memory, less the static mbarriers' KiB
TURN = 1  # named barrier TURN + c: consumer c's turn on the tensor cores (0 is syncthreads')
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 24, 240  # setmaxnreg: 128 x 24 + 256 x 240 <= the SM's 64 K registers


def keys_per_block(d):
    """BK: 128 keys a block up to d = 128 (64 accumulators of S and 64 of O a thread), 64 past it, where O alone
    takes up to 128; the simulator's 64 crosses a block at its test lengths."""
    return 64 if SIMULATOR or d > 128 else 128


def stages(d, bk):
    """Stages of the ring: as many of K's and V's tiles as fit beside Q, 2 to 4."""
    dp = -(-d // 64) * 64
    return max(2, min(4, (SHARED_LIMIT - TILE_ALIGN - 2 * BQ * dp) // (2 * 2 * bk * dp)))


@functools.cache
def build(D, BK, STAGES, KV_GROUP=1):
    """The kernel for head dimension D, blocks of BK keys in STAGES stages and KV_GROUP q heads a kv head, with its
    shared bytes."""
    DP = -(-D // 64) * 64  # D padded to whole 64-column blocks (TMA fills the columns past D with zeros)
    Q_TILE = BQ * DP  # elements: DP / 64 column blocks of BQ rows of 128 bytes, one box each
    KV_TILE = BK * DP
    STAGE = 2 * KV_TILE  # a K tile and a V tile
    STAGE_BYTES = 2 * STAGE
    NT = BK // 8  # 8-key column groups of S
    S_REGS = BK // 2  # m64nBKk16: a thread's scores, rows g and g + 8 of its warp's 16
    O_REGS = DP // 2  # m64nDPk16: its accumulators of O
    P_WORDS = BK // 16 * 4  # P as wgmma's A fragments, four words per 16 keys
    FULL, EMPTY, Q_FULL = 0, STAGES, 2 * STAGES  # bars[FULL + s], bars[EMPTY + s], then Q's
    BARS = 2 * STAGES + 1

    @jit(arch_specific=True, launch_bounds=(THREADS, 1))  # 384 threads: 168 registers each until setmaxnreg
    def attention_kernel(tmap_q, tmap_k, tmap_v, O, n, scale_log2, causal, group):
        # the mbarriers are static, and dynamic shared memory starts after them, 16-byte aligned: no declared
        # alignment, so that first_tile measures the skew to the first 1024-byte boundary when the kernel runs
        tiles = cuda.shared.array(0, float16)  # Q, then STAGES x (K tile, V tile), from tiles[tile0]
        bars = cuda.shared.array(BARS, uint64)  # full[STAGES], empty[STAGES], Q's
        tile0, base = first_tile(tiles)  # Q starts at tiles[tile0], shared address base: a 1024-byte boundary
        tid = uint32(cuda.threadIdx.x)
        warpgroup = tid // uint32(128)  # 0: the producer; 1, 2: the consumers of rows 64 (w - 1) ..
        # v07's grids: causal, 1-D in groups of heads, each group's query blocks last to first; else x the query
        # block, y the head
        if causal:
            q_blocks = (n + uint32(BQ - 1)) // uint32(BQ)
            small = uint32(cuda.gridDim.x) // q_blocks % group  # heads in the first group, if it is the smaller
            i = uint32(cuda.blockIdx.x)
            if i < small * q_blocks:
                first_head, members, within = uint32(0), small, i
            else:
                i -= small * q_blocks
                first_head = small + i // (group * q_blocks) * group
                members = group
                within = i % (group * q_blocks)  # this block's place in its group: query block, then head
            head = first_head + within % members
            q_block = q_blocks - uint32(1) - within // members
        else:
            head = uint32(cuda.blockIdx.y)
            q_block = uint32(cuda.blockIdx.x)
        q0 = q_block * uint32(BQ)
        blocks = (n + uint32(BK - 1)) // uint32(BK)
        if causal:  # the key block holding the query block's last row is its last
            blocks = min(blocks, (q0 + uint32(BQ - 1)) // uint32(BK) + uint32(1))
        if tid == uint32(0):
            for st in range(STAGES):
                mbarrier_init(bars, FULL + st, 1)  # the producer's arrival, then STAGE_BYTES from TMA
                mbarrier_init(bars, EMPTY + st, 128 * CONSUMERS)  # every consumer thread, its MMAs retired
            mbarrier_init(bars, Q_FULL, 1)
            fence_mbarrier_init()  # the copy engine, which counts bytes down on them, sees them set up too
        cuda.syncthreads()  # the barriers are set up before anyone uses them (the block's only barrier)

        if warpgroup == uint32(0):  # the producer: thread 0 copies Q, then each block of keys into a free stage
            setmaxnreg_dec(PRODUCER_REGISTERS)
            if tid != uint32(0):
                return
            tensormap_acquire(tmap_q)  # the maps were written by a copy from the host: fetch them afresh
            tensormap_acquire(tmap_k)
            tensormap_acquire(tmap_v)
            # rows of the maps: a head's n rows follow the one before; boxes past a head's end read the next head's
            # rows (or zeros past the last): masked keys, query rows never stored
            kv_row = (head if KV_GROUP == 1 else head // uint32(KV_GROUP)) * n
            mbarrier_arrive_expect_tx(bars, Q_FULL, 2 * Q_TILE)
            for c in range(DP // BOX):  # column block c: BQ rows x 64 columns
                tma_load_2d(tiles, tile0 + uint32(c * BQ * BOX), tmap_q, uint32(c * BOX), head * n + q0, bars, Q_FULL)
            stage, phase = uint32(0), uint32(0)  # the stage of block kb, and the parity of its round
            for kb in range(blocks):
                # the consumers have released this stage (parity phase ^ 1: the first round passes at once)
                mbarrier_wait(bars, EMPTY + stage, phase ^ uint32(1))
                mbarrier_arrive_expect_tx(bars, FULL + stage, STAGE_BYTES)  # arrive; STAGE_BYTES are to land
                at = tile0 + uint32(Q_TILE) + stage * uint32(STAGE)
                row = kv_row + uint32(kb) * uint32(BK)
                for c in range(DP // BOX):
                    tma_load_2d(tiles, at + uint32(c * BK * BOX), tmap_k, uint32(c * BOX), row, bars, FULL + stage)
                    dst = at + uint32(KV_TILE + c * BK * BOX)
                    tma_load_2d(tiles, dst, tmap_v, uint32(c * BOX), row, bars, FULL + stage)
                stage += uint32(1)
                if stage == uint32(STAGES):
                    stage, phase = uint32(0), phase ^ uint32(1)
            return

        setmaxnreg_inc(CONSUMER_REGISTERS)
        s = cuda.local.array(S_REGS, float32)  # scores, then probabilities: S[16 w + g + 8 h, 8 j + 2 t + c]
        o = cuda.local.array(O_REGS, float32)  # O, the same layout over DP columns
        p_frag = cuda.local.array(P_WORDS, uint32)
        lane = tid % uint32(32)
        warp = tid % uint32(128) // uint32(32)
        g = lane // uint32(4)  # this lane's rows: g and g + 8 of the warp's 16
        t = lane % uint32(4)  # this lane's keys and columns: 2t and 2t + 1 of every 8
        rows = (warpgroup - uint32(1)) * uint32(64)  # this warpgroup's first row in the block
        row0 = q0 + rows + warp * uint32(16) + g  # the two query rows of this lane
        row1 = row0 + uint32(8)
        visible0 = uint32(min(n, row0 + uint32(1))) if causal else n  # row g sees the keys below visible0
        visible1 = uint32(min(n, row1 + uint32(1))) if causal else n
        for i in range(O_REGS):
            o[i] = float32(0.0)
        m0, m1 = NEG_INF, NEG_INF  # running maxima of rows g and g + 8 (raw scores)
        l0, l1 = float32(0.0), float32(0.0)  # this lane's share of their running sums
        # v08's descriptors of slice 0; this warpgroup's Q rows start 64 rows (8 KiB) into each column block
        q_desc = descriptor(base + rows * uint32(ROW_BYTES), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        k_desc = descriptor(base + uint32(2 * Q_TILE), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        v_desc = descriptor(
            base + uint32(2 * (Q_TILE + KV_TILE)), uint32(BK * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B
        )
        consumer = warpgroup - uint32(1)
        if consumer == uint32(1):
            named_barrier_arrive(TURN, 256)  # the first consumer takes the first turn
        mbarrier_wait(bars, Q_FULL, 0)  # Q has landed
        stage, phase = uint32(0), uint32(0)
        previous = uint32(0)  # the stage of block kb - 1, whose P V runs beside block kb's softmax
        for i in range(P_WORDS):
            p_frag[i] = uint32(0)  # the P of a block before the first: zeros
        for kb in range(blocks):
            k0 = uint32(kb) * uint32(BK)
            at_stage = uint64(stage * uint32(STAGE_BYTES) >> uint32(4))  # in descriptor units
            mbarrier_wait(bars, FULL + stage, phase)  # this block's K and V have landed (TMA writes as wgmma reads)

            # S = Q K^T of block kb, then block kb - 1's O += P V behind it: two groups in flight
            # wgmma.fence: the softmax's last reads of s, the last rescale of o and P's words come before the MMAs
            # (both fences here, before the first MMA: registers written between two of a group's MMAs, even by a
            # fence, make ptxas serialize them)
            at_previous = v_desc + uint64(previous * uint32(STAGE_BYTES) >> uint32(4))  # block kb - 1's V
            named_barrier_sync(uint32(TURN) + consumer, 256)  # this warpgroup's turn: the other issued its MMAs
            fence(s, S_REGS)
            fence(o, O_REGS)
            for kk in range(D // 16):
                at = uint64(kk // 4 * (BQ * ROW_BYTES // 16) + kk % 4 * 2)  # column block kk // 4, 32 B per slice
                k_at = uint64(kk // 4 * (BK * ROW_BYTES // 16) + kk % 4 * 2)
                mma_async(s, 0, BK, q_desc + at, k_desc + at_stage + k_at, 0 if kk == 0 else 1, 0, 0, "f16")
            commit_group()
            # block kb - 1's P (p_frag) against its V, in the stage it still holds; at kb = 0 a P of zeros against
            # block 0's V adds nothing: one wasted P V a query block, where a branch here would make ptxas serialize
            for kp in range(BK // 16):
                w = 4 * kp
                at = at_previous + uint64(kp * (16 * ROW_BYTES // 16))
                mma_async_a_regs(o, 0, DP, p_frag[w], p_frag[w + 1], p_frag[w + 2], p_frag[w + 3], at, 1, 1, "f16")
            commit_group()
            named_barrier_arrive(uint32(TURN + 1) - consumer, 256)  # the other warpgroup's turn
            wait_group(1, s, S_REGS)  # S, the older group, has landed; P V may still run

            # Keys past the end, and above the diagonal of a causal mask, score -inf (v07's mask)
            if k0 + uint32(BK) > n or (causal and k0 + uint32(BK - 1) > q0 + rows):
                first_key = uint32(k0 + t * uint32(2))  # this lane's keys: first_key + 8j + e
                for j in range(NT):
                    for e in range(2):
                        key = uint32(first_key + uint32(8 * j + e))
                        if key >= visible0:
                            s[4 * j + e] = NEG_INF
                        if key >= visible1:
                            s[4 * j + 2 + e] = NEG_INF

            # Online softmax while P V runs: everything but O's rescale, which waits for the MMAs writing O
            top0, top1 = m0, m1
            for j in range(NT):
                top0 = max(top0, max(s[4 * j], s[4 * j + 1]))
                top1 = max(top1, max(s[4 * j + 2], s[4 * j + 3]))
            for k in range(2):  # lanes 4g .. 4g + 3 hold the same two rows: xor 1, then 2
                top0 = max(top0, cuda.shfl_xor_sync(FULL_MASK, top0, 1 << k))
                top1 = max(top1, cuda.shfl_xor_sync(FULL_MASK, top1, 1 << k))
            mc0, mc1 = top0 * scale_log2, top1 * scale_log2  # the new maxima, scaled: finite (key 0 is never masked)
            grew = cuda.any_sync(FULL_MASK, top0 > m0 or top1 > m1)
            rescale0, rescale1 = float32(1.0), float32(1.0)
            if grew:
                rescale0 = exp2_approx(m0 * scale_log2 - mc0)  # 0 on the first block (m = -inf), 1 where the max held
                rescale1 = exp2_approx(m1 * scale_log2 - mc1)
                l0 *= rescale0
                l1 *= rescale1
                m0, m1 = top0, top1
            for j in range(NT):
                for e in range(2):
                    s[4 * j + e] = exp2_approx(s[4 * j + e] * scale_log2 - mc0)  # one FMA and one ex2
                    s[4 * j + 2 + e] = exp2_approx(s[4 * j + 2 + e] * scale_log2 - mc1)
                    l0 += s[4 * j + e]  # the sums take the float32 probabilities
                    l1 += s[4 * j + 2 + e]

            wait_group(0, o, O_REGS)  # block kb - 1's P V has retired ...
            if kb > 0:
                mbarrier_arrive(bars, EMPTY + previous)  # ... so its stage may be refilled
            if grew:  # O now holds every block before kb: onto this block's maxima
                for i in range(DP // 8):
                    o[4 * i] *= rescale0
                    o[4 * i + 1] *= rescale0
                    o[4 * i + 2] *= rescale1
                    o[4 * i + 3] *= rescale1
            for kp in range(BK // 16):  # P of block kb, rounded and paired: its P V is issued beside the next S
                c = 8 * kp
                p_frag[4 * kp] = pack_half2(float16(s[c]), float16(s[c + 1]))  # row g, keys 2t, 2t + 1
                p_frag[4 * kp + 1] = pack_half2(float16(s[c + 2]), float16(s[c + 3]))  # row g + 8
                p_frag[4 * kp + 2] = pack_half2(float16(s[c + 4]), float16(s[c + 5]))  # row g, keys 8 + 2t, 9 + 2t
                p_frag[4 * kp + 3] = pack_half2(float16(s[c + 6]), float16(s[c + 7]))  # row g + 8
            previous = stage
            stage += uint32(1)
            if stage == uint32(STAGES):
                stage, phase = uint32(0), phase ^ uint32(1)

        # the last block's O += P V, with nothing left to overlap; the first consumer waits for the second's last
        # hand-over (the turns' arrivals and waits then match: none is left when the block ends)
        if consumer == uint32(0):
            named_barrier_sync(TURN, 256)
        fence(o, O_REGS)
        at_previous = v_desc + uint64(previous * uint32(STAGE_BYTES) >> uint32(4))
        for kp in range(BK // 16):
            w = 4 * kp
            at = at_previous + uint64(kp * (16 * ROW_BYTES // 16))
            mma_async_a_regs(o, 0, DP, p_frag[w], p_frag[w + 1], p_frag[w + 2], p_frag[w + 3], at, 1, 1, "f16")
        commit_group()
        wait_group(0, o, O_REGS)
        mbarrier_arrive(bars, EMPTY + previous)  # no one waits for it; every arrival of the phase is made all the same

        for k in range(2):  # the quad's four shares of each row's sum
            l0 += cuda.shfl_xor_sync(FULL_MASK, l0, 1 << k)
            l1 += cuda.shfl_xor_sync(FULL_MASK, l1, 1 << k)
        inv0, inv1 = float32(1.0) / l0, float32(1.0) / l1  # the deferred division: l >= 1 (the max's own exp2(0))
        base_o = head * n * uint32(D)  # the head's first element in O
        for i in range(D // 8):  # the padded columns past D are never stored
            col = uint32(8 * i) + t * uint32(2)
            if row0 < n:
                O[base_o + row0 * uint32(D) + col] = float16(o[4 * i] * inv0)
                O[base_o + row0 * uint32(D) + col + uint32(1)] = float16(o[4 * i + 1] * inv0)
            if row1 < n:
                O[base_o + row1 * uint32(D) + col] = float16(o[4 * i + 2] * inv1)
                O[base_o + row1 * uint32(D) + col + uint32(1)] = float16(o[4 * i + 3] * inv1)

    return attention_kernel, TILE_ALIGN + 2 * (Q_TILE + STAGES * STAGE)


def validate(Q, K, V, causal=False):
    check_limits(Q, K, V)
    check_aligned(Q, K, V)
    check_head_dim("v11", Q.shape[2], 16, why=": wgmma's k of 16 columns for S")


def heads_per_group(n, d):
    """Heads whose K and V fit in half the L2 together (at least 1), as v07's causal grid takes them."""
    l2_bytes = properties().get("l2_bytes") or HOPPER["l2_bytes"]  # the simulator has no L2: Hopper's
    return max(1, l2_bytes // 2 // (2 * n * d * 2))


def launch(Q, K, V, out, causal=False):
    bh, n, d = Q.shape
    kv = K.shape[0]
    bk = keys_per_block(d)
    kernel, shared_bytes = build(d, bk, stages(d, bk), KV_GROUP=bh // kv)
    scale_log2 = np.float32(LOG2E / math.sqrt(d))  # exp(s / sqrt(d)) = exp2(s scale_log2)
    q_blocks = (n + BQ - 1) // BQ
    group = min(bh, heads_per_group(n, d))
    grid = bh * q_blocks if causal else (q_blocks, bh)  # causal: 1-D, in groups of heads (v07's)
    # the heads one above the other: Q a (bh n) x d matrix in boxes of BQ rows, K and V (kv n) x d in boxes of BK
    tmap_q = tensor_map_2d(flat_view(Q), BQ, BOX, shape=(bh * n, d))
    tmap_k = tensor_map_2d(flat_view(K), bk, BOX, shape=(kv * n, d))
    tmap_v = tensor_map_2d(flat_view(V), bk, BOX, shape=(kv * n, d))
    kernel[grid, THREADS, 0, shared_bytes](
        tmap_q, tmap_k, tmap_v, flat_view(out), np.uint32(n), scale_log2, bool(causal), np.uint32(group)
    )
