"""Causal masking by blocks: key blocks wholly above the diagonal are never loaded, and only the diagonal's are masked.

Changes:
    From v06: with ``causal``, query block b stops after the key block that
    holds its last row: (64 b + 63) // 64 + 1 blocks instead of all of them,
    so the copies of the skipped blocks are never issued either. The
    per-score mask runs only on a block that crosses the diagonal
    (k0 + 63 > q0) or the end of the sequence; v06 masked every block of a
    causal pass. A causal grid is 1-D and takes the heads in groups of
    about half the L2's worth of K and V (``heads_per_group``): within a
    group the query blocks run last to first, a block of each head in turn.

Why it is faster:
    Half the work: of the n / 64 key blocks a query block used, it skips
    those above its diagonal, on average half, and each skipped block took
    64 or 128 ``mma`` per warp, a softmax and 16 or 32 KB of copies. The blocks
    left are unmasked except one per query block (v06 ran the mask's
    compares and selects on every block). Ordering the longest first (the
    longest-processing-time rule) keeps the last wave from ending on a few
    long blocks while the SMs sit idle; doing it a group of heads at a time
    keeps the K and V the running blocks share in L2 (all 32 heads at
    d = 128 are 64 MiB, more than the L2, and ran 23% slower).
"""

import functools
import math

import numpy as np

from zoo.device import HOPPER, cuda, float16, float32, properties, uint32
from zoo.device.approx import exp2_approx
from zoo.device.jit import jit
from zoo.device.memory import flat_view
from zoo.device.mma import (
    SHARED_ALIGN,
    cp_async16,
    cp_async_commit,
    cp_async_wait_all,
    ldmatrix_x4,
    ldmatrix_x4_trans,
    mma_f16_f32,
    pack_half2,
)
from zoo.device.warp import FULL_MASK
from zoo.kernels.attention import (
    BK,  # keys per block of keys
    WARPS,  # warps per block, 16 query rows each
    check_aligned,
    check_head_dim,
    check_limits,
)

MIN_CC = (8, 0)  # mma.sync m16n8k16 with float16 inputs, ldmatrix (sm_75 has m16n8k8 only), cp.async
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
    K_AT = BQ * STRIDE  # the staged tiles in the dynamic shared array: Q, then two stages of K and V
    V_AT = K_AT + BK * STRIDE
    STAGE = 2 * BK * STRIDE  # one stage: a K tile and a V tile
    CHUNKS = D // 8  # 16-byte chunks in a row of Q, K or V
    ROWS_PER_PASS = THREADS // CHUNKS  # rows the block's threads copy at once, a chunk each
    Q_PASSES = -(-BQ // ROWS_PER_PASS)  # copy passes over Q's rows and K's (-(-a // b): a / b rounded up); the last
    K_PASSES = -(-BK // ROWS_PER_PASS)  # may be partial, a few threads idle, where d / 8 divides neither (d = 80)
    EVEN_Q = THREADS % CHUNKS == 0 and BQ % ROWS_PER_PASS == 0  # every thread copies in every pass: checks fold away
    EVEN_K = THREADS % CHUNKS == 0 and BK % ROWS_PER_PASS == 0
    NT = BK // 8  # 8-key column groups of a warp's S
    DT = D // 8  # 8-column groups of a warp's O
    S_REGS = NT * 4  # a lane's scores: the C fragments of NT mma tiles (rows g, g + 8; keys 2t, 2t + 1)
    O_REGS = DT * 4  # a lane's accumulators of O: the C fragments of DT mma tiles
    Q_KEPT = D <= 128  # Q's fragments stay in registers; past d = 128 (O alone is d / 2 a lane) they would spill
    Q_REGS = D // 16 * 4 if Q_KEPT else 4  # the warp's Q rows as A fragments: four words per 16 columns

    @jit
    def attention_kernel(Q, K, V, O, n, scale_log2, causal, group):
        tiles = cuda.shared.array(0, float16, alignment=SHARED_ALIGN)  # Q (BQ rows), 2 x (K and V, BK rows each)
        s = cuda.local.array(S_REGS, float32)  # scores, then probabilities: rows g, g + 8 of each 8-key group
        o = cuda.local.array(O_REGS, float32)  # O: rows g, g + 8, columns 2t, 2t + 1 of each 8-column group
        q_frag = cuda.local.array(Q_REGS, uint32)
        tid = uint32(cuda.threadIdx.x)
        lane = tid % uint32(32)
        warp = tid // uint32(32)
        g = lane // uint32(4)  # this lane's rows: g and g + 8 of the warp's 16
        t = lane % uint32(4)  # this lane's keys and columns: 2t and 2t + 1 of every 8
        # Blocks start in order of their linear index. Causal: a 1-D grid, the heads in groups of `group` (a smaller
        # group first if they do not divide evenly, so the grid ends on a whole group); within a group the query
        # blocks run last to first, a block of each head in turn: a group's long blocks start before its short ones,
        # and the blocks running at once read only a group or two's K and V. Otherwise v06's grid: x is the query
        # block, y the head.
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
        for p in range(Q_PASSES):  # Q's block of rows, copied without passing through registers (partial last pass)
            if EVEN_Q or copy_row + uint32(p * ROWS_PER_PASS) < uint32(min(BQ, (p + 1) * ROWS_PER_PASS)):
                row = min(q0 + copy_row + uint32(p * ROWS_PER_PASS), last)
                cp_async16(tiles, copy_dst + uint32(p * ROWS_PER_PASS * STRIDE), Q, base + row * uint32(D) + copy_col)
        for p in range(K_PASSES):  # the first block of keys and values, into stage 0
            if EVEN_K or copy_row + uint32(p * ROWS_PER_PASS) < uint32(min(BK, (p + 1) * ROWS_PER_PASS)):
                at = kv_base + min(copy_row + uint32(p * ROWS_PER_PASS), last) * uint32(D) + copy_col
                cp_async16(tiles, copy_dst + uint32(K_AT + p * ROWS_PER_PASS * STRIDE), K, at)
                cp_async16(tiles, copy_dst + uint32(V_AT + p * ROWS_PER_PASS * STRIDE), V, at)
        cp_async_commit()
        for i in range(O_REGS):
            o[i] = float32(0.0)
        m0, m1 = NEG_INF, NEG_INF  # running maxima of rows g and g + 8 (raw scores)
        l0, l1 = float32(0.0), float32(0.0)  # this lane's share of their running sums
        # ldmatrix row addresses, as in hgemm: Q (A) and V (B, transposed) name row l % 16 at column 8 (l // 16);
        # K (B, not transposed) names key 8 (l // 16) + l % 8 at column 8 (l // 8 % 2): b0 b1 of keys 0-7, then 8-15
        q_lane = (warp * uint32(16) + lane % uint32(16)) * uint32(STRIDE) + lane // uint32(16) * uint32(8)
        k_row = lane // uint32(16) * uint32(8) + lane % uint32(8)
        k_lane = k_row * uint32(STRIDE) + lane // uint32(8) % uint32(2) * uint32(8)
        v_lane = lane % uint32(16) * uint32(STRIDE) + lane // uint32(16) * uint32(8)
        cp_async_wait_all()  # this thread's copies of Q and of the first block have landed
        cuda.syncthreads()  # everyone's have: Q is staged
        for kk in range(D // 16 if Q_KEPT else 0):  # the warp's 16 rows, 16 columns at a time, as A fragments
            q_frag[4 * kk], q_frag[4 * kk + 1], q_frag[4 * kk + 2], q_frag[4 * kk + 3] = ldmatrix_x4(
                tiles, q_lane + uint32(16 * kk)
            )

        blocks = (n + uint32(BK - 1)) // uint32(BK)
        if causal:  # the key block holding the query block's last row is its last
            blocks = min(blocks, (q0 + uint32(BQ - 1)) // uint32(BK) + uint32(1))
        for kb in range(blocks):
            kb = uint32(kb)
            k0 = kb * uint32(BK)
            stage = kb % uint32(2) * uint32(STAGE)  # block kb's K and V tiles: stage kb % 2
            cp_async_wait_all()  # this thread's copies of block kb have landed
            cuda.syncthreads()  # everyone's have; and every warp is done with the other stage (block kb - 1)
            if kb + uint32(1) < blocks:  # block kb + 1 copies itself into the other stage while this one is used
                other = (kb + uint32(1)) % uint32(2) * uint32(STAGE) + copy_dst
                for p in range(K_PASSES):
                    if EVEN_K or copy_row + uint32(p * ROWS_PER_PASS) < uint32(min(BK, (p + 1) * ROWS_PER_PASS)):
                        key = min(k0 + uint32(BK) + copy_row + uint32(p * ROWS_PER_PASS), last)
                        at = kv_base + key * uint32(D) + copy_col
                        cp_async16(tiles, other + uint32(K_AT + p * ROWS_PER_PASS * STRIDE), K, at)
                        cp_async16(tiles, other + uint32(V_AT + p * ROWS_PER_PASS * STRIDE), V, at)
                cp_async_commit()

            # S = Q K^T: per 16 columns of d and 16 keys, one ldmatrix and two mma (keys 0-7 and 8-15).
            for i in range(S_REGS):
                s[i] = float32(0.0)
            for kk in range(D // 16):
                qk = 4 * kk if Q_KEPT else 0  # this slice's A fragments in q_frag
                if not Q_KEPT:  # d > 128: re-read from the staged Q, 16 columns at a time
                    q_frag[0], q_frag[1], q_frag[2], q_frag[3] = ldmatrix_x4(tiles, q_lane + uint32(16 * kk))
                for jp in range(NT // 2):
                    b0, b1, b2, b3 = ldmatrix_x4(tiles, uint32(K_AT + 16 * jp * STRIDE + 16 * kk) + stage + k_lane)
                    for h in range(2):
                        c = 4 * (2 * jp + h)
                        s[c], s[c + 1], s[c + 2], s[c + 3] = mma_f16_f32(
                            q_frag[qk],
                            q_frag[qk + 1],
                            q_frag[qk + 2],
                            q_frag[qk + 3],
                            b2 if h else b0,
                            b3 if h else b1,
                            s[c],
                            s[c + 1],
                            s[c + 2],
                            s[c + 3],
                        )

            # Keys past the end, and above the diagonal of a causal mask, score -inf: only in the blocks that cross
            # the end of the sequence or the diagonal (some key k0 + BK - 1 above some row q0).
            if k0 + uint32(BK) > n or (causal and k0 + uint32(BK - 1) > q0):
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
                    s[4 * j + e] = exp2_approx(s[4 * j + e] * scale_log2 - mc0)  # one FMA and one ex2
                    s[4 * j + 2 + e] = exp2_approx(s[4 * j + 2 + e] * scale_log2 - mc1)
                    l0 += s[4 * j + e]  # the sums take the float32 probabilities
                    l1 += s[4 * j + 2 + e]

            # O += P V: the C fragments of keys 16kp .. 16kp + 15 (mma tiles 2kp, 2kp + 1), rounded to float16 and
            # paired, are the A fragment of those keys; V's B fragments come two 8-column tiles per ldmatrix.trans.
            for kp in range(NT // 2):
                c = 8 * kp
                a0 = pack_half2(float16(s[c]), float16(s[c + 1]))  # row g, keys 2t, 2t + 1
                a1 = pack_half2(float16(s[c + 2]), float16(s[c + 3]))  # row g + 8
                a2 = pack_half2(float16(s[c + 4]), float16(s[c + 5]))  # row g, keys 8 + 2t, 8 + 2t + 1
                a3 = pack_half2(float16(s[c + 6]), float16(s[c + 7]))  # row g + 8
                for dp in range(DT // 2):
                    b0, b1, b2, b3 = ldmatrix_x4_trans(
                        tiles, uint32(V_AT + 16 * kp * STRIDE + 16 * dp) + stage + v_lane
                    )
                    for h in range(2):
                        i = 4 * (2 * dp + h)
                        o[i], o[i + 1], o[i + 2], o[i + 3] = mma_f16_f32(
                            a0, a1, a2, a3, b2 if h else b0, b3 if h else b1, o[i], o[i + 1], o[i + 2], o[i + 3]
                        )

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

    return attention_kernel, BQ, THREADS, (BQ + 2 * 2 * BK) * STRIDE * 2


def validate(Q, K, V, causal=False):
    check_limits(Q, K, V)
    check_aligned(Q, K, V)
    check_head_dim("v07", Q.shape[2], 16, why=": mma's k of 16 columns for S, ldmatrix's pairs of 8-column tiles of V")


def heads_per_group(n, d):
    """Heads whose K and V fit in half the L2 together (at least 1): a causal pass's blocks running at once read a
    group's K and V from L2, not DRAM. 4096 x 128 (2 MiB of K and V a head) on a 50 MiB L2: 12 heads."""
    l2_bytes = properties().get("l2_bytes") or HOPPER["l2_bytes"]  # the simulator has no L2: Hopper's
    return max(1, l2_bytes // 2 // (2 * n * d * 2))


def launch(Q, K, V, out, causal=False, group=None):
    bh, n, d = Q.shape
    kernel, rows, threads, shared_bytes = build(d, KV_GROUP=bh // K.shape[0])  # KV_GROUP: q heads per kv head
    scale_log2 = np.float32(LOG2E / math.sqrt(d))  # exp(s / sqrt(d)) = exp2(s scale_log2)
    q_blocks = (n + rows - 1) // rows
    group = min(bh, group or heads_per_group(n, d))  # ``group``: the tuning probe's other sizes (.ci/gpu-attention.py)
    grid = bh * q_blocks if causal else (q_blocks, bh)  # causal: 1-D, in groups of heads (see the kernel)
    flat = (flat_view(a) for a in (Q, K, V, out))  # 16-byte loads index 1-D float16 arrays
    kernel[grid, threads, 0, shared_bytes](*flat, np.uint32(n), scale_log2, bool(causal), np.uint32(group))
