"""Hopper's warpgroup MMA: one warpgroup owns 64 query rows, S from shared tiles, P V with P from its registers.

Changes:
    From v07: ``mma.sync`` gives way to ``wgmma.mma_async``
    (``zoo.device.wgmma``): a block is one warpgroup (128 threads) owning 64
    query rows. S = Q K^T is D / 16 m64nBKk16 MMAs reading Q and K (K-major)
    from shared memory through descriptors; no ``ldmatrix``. O += P V is
    BK / 16 m64nDk16 MMAs in the register-A form (``mma_async_a_regs``): the
    scores a thread holds after S are laid out as wgmma's A fragment, so P,
    rounded and paired, goes in from registers; only V (N-major) comes from
    shared memory. Tiles are 64-column blocks of 128-byte rows swizzled by
    ``swizzle_128b``, still copied by v07's two stages of ``cp.async``. Each
    product is issued, committed and waited for; softmax and causal skip are
    v07's. Compiled for sm_90a (``jit(arch_specific=True)``).

Why it is faster:
    One wgmma does 64 x BK x 16 where ``mma.sync`` did 16 x 8 x 16, and the
    ``ldmatrix`` and ``mma.sync`` that took most of v07's issue slots are gone:
    Hopper's tensor cores reach their rate only through wgmma. P from
    registers is FlashAttention-3's choice too: staging it through shared
    memory would write 64 x BK float16 a block of keys, and need a proxy fence
    and a warpgroup barrier before the MMA could read them. Left for the next
    steps: the copies still take the consumers' issue slots, and nothing runs
    while a thread waits for its MMAs.
"""

import functools
import math

import numpy as np

from zoo import SIMULATOR
from zoo.device import HOPPER, cuda, float16, float32, properties, uint32, uint64
from zoo.device.approx import exp2_approx
from zoo.device.jit import jit
from zoo.device.memory import flat_view
from zoo.device.mma import cp_async16, cp_async_commit, cp_async_wait_all, pack_half2
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
from zoo.kernels.attention import check_aligned, check_head_dim, check_limits

MIN_CC = (9, 0)  # wgmma.mma_async needs sm_90a, Hopper's arch-specific target (H100, H200)
MAX_CC = (9, 0)  # sm_90a code is arch-specific: it runs on 9.0 GPUs only, not on later ones
NEG_INF = np.float32(-np.inf)  # a masked score: exp2(-inf) is exactly 0
LOG2E = math.log2(math.e)
BQ = 64  # query rows a block: one warpgroup, one m64 MMA
THREADS = 128
ROW_BYTES = 128  # a swizzled row: 64 float16, the width of the 128-byte swizzle pattern
GROUP_BYTES = 8 * ROW_BYTES  # 8 rows: one turn of the pattern, the descriptors' stride byte offset


def keys_per_block(d):
    """BK: 128 keys a block up to d = 128 (64 accumulators of S and 64 of O a thread), 64 past it, where O alone
    takes up to 128; the simulator's 64 crosses a block at its test lengths."""
    return 64 if SIMULATOR or d > 128 else 128


@functools.cache
def build(D, BK, KV_GROUP=1):
    """The kernel for head dimension D, blocks of BK keys and KV_GROUP q heads a kv head, with its shared bytes."""
    DP = -(-D // 64) * 64  # D padded to whole 64-column blocks: the swizzled tiles' width, and the N of P V
    CHUNKS = D // 8  # 16-byte chunks in a row of Q, K or V
    Q_TILE = BQ * DP  # elements: DP / 64 column blocks of BQ rows of 128 bytes
    KV_TILE = BK * DP
    STAGE = 2 * KV_TILE  # a K tile and a V tile
    STAGE_BYTES = 2 * STAGE
    Q_PASSES = BQ * CHUNKS // THREADS  # whole passes: D is a multiple of 16, so CHUNKS is even
    K_PASSES = BK * CHUNKS // THREADS
    NT = BK // 8  # 8-key column groups of S
    S_REGS = BK // 2  # m64nBKk16: a thread's scores, rows g and g + 8 of its warp's 16
    O_REGS = DP // 2  # m64nDPk16: its accumulators of O
    P_WORDS = BK // 16 * 4  # P as wgmma's A fragments, four words per 16 keys

    @jit(device=True, forceinline=True)
    def copy_keys(tiles, K, V, at, k0, kv_base, last, tid):
        """This thread's cp.async of the K and V rows k0 .. k0 + BK into the stage at `at` (a row past the end copies
        the last: its keys are masked and its P is 0, so any finite values do)."""
        for p in range(K_PASSES):
            c = tid + uint32(p * THREADS)
            row, chunk = c // uint32(CHUNKS), c % uint32(CHUNKS)
            src = kv_base + min(k0 + row, last) * uint32(D) + chunk * uint32(8)
            dst = at + swizzled_chunk(row, chunk, BK)
            cp_async16(tiles, dst, K, src)
            cp_async16(tiles, dst + uint32(KV_TILE), V, src)

    @jit(arch_specific=True)
    def attention_kernel(Q, K, V, O, n, scale_log2, causal, group):
        tiles = cuda.shared.array(0, float16, alignment=SWIZZLE_ALIGN)  # Q, then 2 x (K tile, V tile), from tile0
        tile0, base = first_tile(tiles)  # Q starts at tiles[tile0], shared address base: a 1024-byte boundary
        s = cuda.local.array(S_REGS, float32)  # scores, then probabilities: S[16 w + g + 8 h, 8 j + 2 t + c]
        o = cuda.local.array(O_REGS, float32)  # O, the same layout over DP columns
        p_frag = cuda.local.array(P_WORDS, uint32)
        tid = uint32(cuda.threadIdx.x)
        lane = tid % uint32(32)
        warp = tid // uint32(32)
        g = lane // uint32(4)  # this lane's rows: g and g + 8 of the warp's 16
        t = lane % uint32(4)  # this lane's keys and columns: 2t and 2t + 1 of every 8
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
        row0 = q0 + warp * uint32(16) + g  # the two query rows of this lane
        row1 = row0 + uint32(8)
        visible0 = uint32(min(n, row0 + uint32(1))) if causal else n  # row g sees the keys below visible0
        visible1 = uint32(min(n, row1 + uint32(1))) if causal else n
        base_q = head * n * uint32(D)  # the head's first element in Q and O
        kv_base = base_q if KV_GROUP == 1 else head // uint32(KV_GROUP) * n * uint32(D)
        last = n - uint32(1)
        for p in range(Q_PASSES):  # Q's 64 rows, swizzled, rows past the end copying the last
            c = tid + uint32(p * THREADS)
            row, chunk = c // uint32(CHUNKS), c % uint32(CHUNKS)
            src = base_q + min(q0 + row, last) * uint32(D) + chunk * uint32(8)
            cp_async16(tiles, tile0 + swizzled_chunk(row, chunk, BQ), Q, src)
        copy_keys(tiles, K, V, tile0 + uint32(Q_TILE), uint32(0), kv_base, last, tid)  # block 0 into stage 0
        cp_async_commit()
        for i in range(O_REGS):
            o[i] = float32(0.0)
        m0, m1 = NEG_INF, NEG_INF  # running maxima of rows g and g + 8 (raw scores)
        l0, l1 = float32(0.0), float32(0.0)  # this lane's share of their running sums
        # descriptors of slice 0 (the fields drop 4 bits: an offset of x bytes adds x >> 4). Q and K are K-major:
        # 8-row groups 1024 B apart, a k slice 32 bytes along the row, the next 64 columns a column block further.
        # V is N-major: the next 64 columns BK rows of 128 bytes on (leading), the next 8 keys 1024 B (stride).
        q_desc = descriptor(base, uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        k_desc = descriptor(base + uint32(2 * Q_TILE), uint32(16), uint32(GROUP_BYTES), SWIZZLE_128B)
        v_desc = descriptor(
            base + uint32(2 * (Q_TILE + KV_TILE)), uint32(BK * ROW_BYTES), uint32(GROUP_BYTES), SWIZZLE_128B
        )

        blocks = (n + uint32(BK - 1)) // uint32(BK)
        if causal:  # the key block holding the query block's last row is its last
            blocks = min(blocks, (q0 + uint32(BQ - 1)) // uint32(BK) + uint32(1))
        for kb in range(blocks):
            kb = uint32(kb)
            k0 = kb * uint32(BK)
            stage = uint64(kb % uint32(2) * uint32(STAGE_BYTES) >> uint32(4))  # in descriptor units
            cp_async_wait_all()  # this thread's copies of block kb have landed ...
            fence_proxy_async()  # ... and are visible to the tensor cores, which read through the async proxy
            cuda.syncthreads()  # everyone's have; and every MMA that read the other stage (block kb - 1) retired
            if kb + uint32(1) < blocks:  # block kb + 1 copies itself into the other stage while this one is used
                other = tile0 + uint32(Q_TILE) + (kb + uint32(1)) % uint32(2) * uint32(STAGE)
                copy_keys(tiles, K, V, other, k0 + uint32(BK), kv_base, last, tid)
                cp_async_commit()

            # S = Q K^T: D / 16 MMAs of m64nBKk16, each a 16-column slice of Q's and K's rows
            fence(s, S_REGS)  # the softmax's last reads of s come before the MMAs write it
            for kk in range(D // 16):
                at = uint64(kk // 4 * (BQ * ROW_BYTES // 16) + kk % 4 * 2)  # column block kk // 4, 32 B per slice
                k_at = uint64(kk // 4 * (BK * ROW_BYTES // 16) + kk % 4 * 2)
                mma_async(s, 0, BK, q_desc + at, k_desc + stage + k_at, 0 if kk == 0 else 1, 0, 0, "f16")
            commit_group()
            wait_group(0, s, S_REGS)  # S has landed in s

            # Keys past the end, and above the diagonal of a causal mask, score -inf (v07's mask)
            if k0 + uint32(BK) > n or (causal and k0 + uint32(BK - 1) > q0):
                first_key = uint32(k0 + t * uint32(2))  # this lane's keys: first_key + 8j + e
                for j in range(NT):
                    for e in range(2):
                        key = uint32(first_key + uint32(8 * j + e))
                        if key >= visible0:
                            s[4 * j + e] = NEG_INF
                        if key >= visible1:
                            s[4 * j + 2 + e] = NEG_INF

            # Online softmax, v07's: the rows' maxima over the quad, the rescale when one grew, p = exp2(s c - m c)
            top0, top1 = m0, m1
            for j in range(NT):
                top0 = max(top0, max(s[4 * j], s[4 * j + 1]))
                top1 = max(top1, max(s[4 * j + 2], s[4 * j + 3]))
            for k in range(2):  # lanes 4g .. 4g + 3 hold the same two rows: xor 1, then 2
                top0 = max(top0, cuda.shfl_xor_sync(FULL_MASK, top0, 1 << k))
                top1 = max(top1, cuda.shfl_xor_sync(FULL_MASK, top1, 1 << k))
            mc0, mc1 = top0 * scale_log2, top1 * scale_log2  # the new maxima, scaled: finite (key 0 is never masked)
            if cuda.any_sync(FULL_MASK, top0 > m0 or top1 > m1):
                rescale0 = exp2_approx(m0 * scale_log2 - mc0)  # 0 on the first block (m = -inf), 1 where the max held
                rescale1 = exp2_approx(m1 * scale_log2 - mc1)
                l0 *= rescale0
                l1 *= rescale1
                for i in range(DP // 8):
                    o[4 * i] *= rescale0
                    o[4 * i + 1] *= rescale0
                    o[4 * i + 2] *= rescale1
                    o[4 * i + 3] *= rescale1
                m0, m1 = top0, top1
            for j in range(NT):
                for e in range(2):
                    s[4 * j + e] = exp2_approx(s[4 * j + e] * scale_log2 - mc0)  # one FMA and one ex2
                    s[4 * j + 2 + e] = exp2_approx(s[4 * j + 2 + e] * scale_log2 - mc1)
                    l0 += s[4 * j + e]  # the sums take the float32 probabilities
                    l1 += s[4 * j + 2 + e]

            # O += P V: keys 16kp .. 16kp + 15 of P (s[8kp .. 8kp + 8)), rounded and paired, are the A fragment of
            # one m64nDPk16 MMA from registers; V's slice is 16 rows (2048 bytes) further down its column blocks
            for kp in range(BK // 16):
                c = 8 * kp
                p_frag[4 * kp] = pack_half2(float16(s[c]), float16(s[c + 1]))  # row g, keys 2t, 2t + 1
                p_frag[4 * kp + 1] = pack_half2(float16(s[c + 2]), float16(s[c + 3]))  # row g + 8
                p_frag[4 * kp + 2] = pack_half2(float16(s[c + 4]), float16(s[c + 5]))  # row g, keys 8 + 2t, 9 + 2t
                p_frag[4 * kp + 3] = pack_half2(float16(s[c + 6]), float16(s[c + 7]))  # row g + 8
            fence(o, O_REGS)  # the rescale's writes of o, and P's words, come before the MMAs read them
            for kp in range(BK // 16):
                w = 4 * kp
                at = v_desc + stage + uint64(kp * (16 * ROW_BYTES // 16))
                mma_async_a_regs(o, 0, DP, p_frag[w], p_frag[w + 1], p_frag[w + 2], p_frag[w + 3], at, 1, 1, "f16")
            commit_group()
            wait_group(0, o, O_REGS)  # O has its sums; the stage may be refilled after the next barrier

        for k in range(2):  # the quad's four shares of each row's sum
            l0 += cuda.shfl_xor_sync(FULL_MASK, l0, 1 << k)
            l1 += cuda.shfl_xor_sync(FULL_MASK, l1, 1 << k)
        inv0, inv1 = float32(1.0) / l0, float32(1.0) / l1  # the deferred division: l >= 1 (the max's own exp2(0))
        for i in range(D // 8):  # the padded columns past D (zero or not) are never stored
            col = uint32(8 * i) + t * uint32(2)
            if row0 < n:
                O[base_q + row0 * uint32(D) + col] = float16(o[4 * i] * inv0)
                O[base_q + row0 * uint32(D) + col + uint32(1)] = float16(o[4 * i + 1] * inv0)
            if row1 < n:
                O[base_q + row1 * uint32(D) + col] = float16(o[4 * i + 2] * inv1)
                O[base_q + row1 * uint32(D) + col + uint32(1)] = float16(o[4 * i + 3] * inv1)

    return attention_kernel, TILE_ALIGN + 2 * (Q_TILE + 2 * STAGE)


def validate(Q, K, V, causal=False):
    check_limits(Q, K, V)
    check_aligned(Q, K, V)
    check_head_dim("v08", Q.shape[2], 16, why=": wgmma's k of 16 columns for S")


def heads_per_group(n, d):
    """Heads whose K and V fit in half the L2 together (at least 1), as v07's causal grid takes them."""
    l2_bytes = properties().get("l2_bytes") or HOPPER["l2_bytes"]  # the simulator has no L2: Hopper's
    return max(1, l2_bytes // 2 // (2 * n * d * 2))


def launch(Q, K, V, out, causal=False):
    bh, n, d = Q.shape
    kernel, shared_bytes = build(d, keys_per_block(d), KV_GROUP=bh // K.shape[0])
    scale_log2 = np.float32(LOG2E / math.sqrt(d))  # exp(s / sqrt(d)) = exp2(s scale_log2)
    q_blocks = (n + BQ - 1) // BQ
    group = min(bh, heads_per_group(n, d))
    grid = bh * q_blocks if causal else (q_blocks, bh)  # causal: 1-D, in groups of heads (v07's)
    flat = (flat_view(a) for a in (Q, K, V, out))
    kernel[grid, THREADS, 0, shared_bytes](*flat, np.uint32(n), scale_log2, bool(causal), np.uint32(group))
