"""Fused: one kernel per block of 8 query rows, their scores kept in shared memory, never in DRAM.

Changes:
    From v01: the three kernels become three phases of one block, which owns
    8 query rows of one head. Phase 1: each thread takes keys t, t + 256, ...,
    reads the key's row of K once and dots it with the 8 staged query rows,
    writing 8 scores into a shared 8 x n float32 array (dynamic shared memory,
    sized by the launch). Phase 2: warp w takes row w, finds its max and
    sum of exp(s - max) with shuffles, leaving the exponentials in place.
    Phase 3: lane l of warp w accumulates columns of O[w] = sum_j e_j V[j] / sum.
    The limit: 32 n bytes of scores a block (``max_seq``: 7,200 positions
    on Hopper at d = 64, 7,136 at d = 128).

Why it is faster:
    S never leaves the chip: none of v01's 20 bytes per score touch DRAM, and
    the per-row reductions work on shared memory at its bandwidth. K and V are
    read once per block of 8 rows (from L2 after the first block of a head),
    and the three launches become one.
"""

import functools
import math

import numpy as np

from zoo.device import cuda, float16, float32, properties
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK
from zoo.errors import OutOfRange
from zoo.kernels.attention import (
    ROWS,  # query rows per block: one warp each in phases 2 and 3
    check_head_dim,
    check_limits,
)

THREADS = 32 * ROWS
NEG_INF = np.float32(-np.inf)  # a masked score: exp(-inf - m) is exactly 0
HOPPER_OPTIN = 227 * 1024  # shared bytes a block may opt in to on an H100 or H200, when the device does not say


def max_seq(d):
    """The longest sequence whose 8 rows of float32 scores fit the shared memory one block may have."""
    optin = properties().get("shared_bytes_per_block_optin") or HOPPER_OPTIN
    return (optin - ROWS * d * 4) // (ROWS * 4)  # the staged query rows (static) come out of the same budget


@functools.cache
def build(D, KV_GROUP=1):
    """The kernel for head dimension D (a compile-time constant: the loops over d unroll) and KV_GROUP q heads a kv
    head (a constant too: at 1 the kv head is the head, and the kernel is the one without grouped heads)."""
    COLS = (D + 31) // 32  # output columns per lane in phase 3; those past D (d not a multiple of 32) are unused
    WHOLE = D % 32 == 0  # every lane's columns lie inside D: the column checks fold away

    @jit
    def fused_kernel(Q, K, V, O, scale, causal):
        q_tile = cuda.shared.array((ROWS, D), float32)
        scores = cuda.shared.array(0, float32)  # ROWS x n, its size set by the launch
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
        cuda.syncthreads()  # the query rows are staged

        # Phase 1: each thread its keys, all 8 rows: K's row is read once per block.
        key = t
        while key < n:
            for r in range(ROWS):
                acc[r] = float32(0.0)
            for c in range(D):
                kv = float32(K[kv_head, key, c])
                for r in range(ROWS):
                    acc[r] += q_tile[r, c] * kv
            for r in range(ROWS):
                scores[r * n + key] = NEG_INF if causal and key > q0 + r else acc[r] * scale
            key += THREADS
        cuda.syncthreads()  # every score of the block is in shared memory

        # Phase 2: warp w, row w: max, then exp(s - max) in place and its sum.
        row = warp * n
        m = NEG_INF
        for j in range(lane, n, 32):
            m = max(m, scores[row + j])
        for k in range(5):  # butterfly: every lane ends with the row's max (finite: key 0 is never masked)
            m = max(m, cuda.shfl_xor_sync(FULL_MASK, m, 16 >> k))
        total = float32(0.0)
        for j in range(lane, n, 32):
            e = math.exp(scores[row + j] - m)
            scores[row + j] = e
            total += e
        for k in range(5):
            total += cuda.shfl_xor_sync(FULL_MASK, total, 16 >> k)
        cuda.syncwarp()  # the row's exponentials, written by every lane, are visible to the whole warp

        # Phase 3: warp w, row w: lane l accumulates columns COLS l .. COLS l + COLS - 1 of O.
        for k in range(COLS):
            out_acc[k] = float32(0.0)
        for j in range(n):
            p = scores[row + j]  # one address for the whole warp: a broadcast
            for k in range(COLS):
                if WHOLE or lane * COLS + k < D:
                    out_acc[k] += p * float32(V[kv_head, j, lane * COLS + k])  # the warp reads V's row j whole
        if q0 + warp < n:
            inv = float32(1.0) / total
            for k in range(COLS):
                if WHOLE or lane * COLS + k < D:
                    O[head, q0 + warp, lane * COLS + k] = float16(out_acc[k] * inv)

    return fused_kernel


def validate(Q, K, V, causal=False):
    check_limits(Q, K, V)
    n, d = Q.shape[1], Q.shape[2]
    check_head_dim("v02", d, why=": a kernel compiled per d, d / 32 columns of O in each lane's registers")
    if n > max_seq(d):
        raise OutOfRange(
            f"v02 keeps {ROWS} rows of float32 scores in shared memory: at most {max_seq(d)} positions, got {n}"
        )


def launch(Q, K, V, out, causal=False):
    bh, n, d = Q.shape
    grid = ((n + ROWS - 1) // ROWS, bh)
    build(d, bh // K.shape[0])[grid, THREADS, 0, ROWS * n * 4](Q, K, V, out, np.float32(1 / math.sqrt(d)), bool(causal))
