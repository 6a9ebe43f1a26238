"""FlashAttention-2's recomputation on the CUDA cores: P rebuilt tile by tile from Q, K and L, dQ added by atomics.

Changes:
    The first step. ``row_dots`` (the family's row_dots.py) computes D_i = dO_i . O_i, a thread a query
    row, and clears that row of dQ. ``key_tile_gradients`` gives a block 16
    keys of a kv head (16 x 16 threads) and walks every tile of 16 queries of
    the q heads that read them. Per tile it stages Q and dO (K and V stay
    staged), then thread (key j, query i) rebuilds P_ij = exp(c S_ij - L_i)
    and dP_ij = dO_i . V_j and keeps P and dS = P (dP - D) in shared memory;
    thread (key j, column lane) adds P^T dO and dS^T Q to the dV and dK of its
    key in registers, and thread (query i, column lane) adds c dS K into dQ
    with float32 atomics. dK and dV are written once, at the end.

Why it is faster:
    It is the starting point. No n x n matrix is stored: P and dS live for one
    16 x 16 tile, so the memory is the inputs' and the outputs', as in the
    forward's fused steps. dK and dV need no atomics, since one block owns a
    key for the whole pass; dQ sums over every block of keys, and atomics
    into float32 do that in the same pass (FlashAttention-2's choice) where a
    second pass over the query tiles would rebuild P and dP once more: n / 16
    atomic adds per element of dQ, against two more n x n x d products.
"""

import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.jit import jit
from zoo.kernels.attention_backward import MAX_HEAD_DIM, check_head_dim, check_limits
from zoo.kernels.attention_backward.row_dots import row_dots

TILE = 16  # keys a block, queries a tile: 16 x 16 threads, one (key, query) pair each
PADDED = MAX_HEAD_DIM + 2  # float16 per staged row: 129 words, so a tile's 16 rows fall in different banks
PAIR_STRIDE = TILE + 1  # float32 per row of the P and dS tiles: a column read (key j, fixed query) hits 16 banks
COLUMN_GROUPS = MAX_HEAD_DIM // TILE  # a thread's columns of a row: lane + 16 m, m < d / 16 (compile-time trip count)


@jit
def key_tile_gradients(Q, K, V, dO, L, D, out, scale, causal, group):
    k_tile = cuda.shared.array((TILE, PADDED), float16)  # this block's 16 keys and values, staged once
    v_tile = cuda.shared.array((TILE, PADDED), float16)
    q_tile = cuda.shared.array((TILE, PADDED), float16)  # the current 16 queries and their rows of dO
    do_tile = cuda.shared.array((TILE, PADDED), float16)
    p_tile = cuda.shared.array((TILE, PAIR_STRIDE), float32)  # P[key, query] of the current pair of tiles
    ds_tile = cuda.shared.array((TILE, PAIR_STRIDE), float32)  # dS[key, query]
    dk = cuda.local.array(COLUMN_GROUPS, float32)  # dK and dV of key ty, columns tx + 16 m
    dv = cuda.local.array(COLUMN_GROUPS, float32)
    tx = uint32(cuda.threadIdx.x)
    ty = uint32(cuda.threadIdx.y)
    kv_head = uint32(cuda.blockIdx.y)
    bh, n, d = uint32(Q.shape[0]), uint32(Q.shape[1]), uint32(Q.shape[2])
    kv = uint32(K.shape[0])
    k0 = uint32(cuda.blockIdx.x) * uint32(TILE)
    key = k0 + ty  # the key this thread stages, and whose dK, dV it sums
    for c in range(tx, d, TILE):  # the block's keys and values, zeros past the last key
        k_tile[ty, c] = K[kv_head, key, c] if key < n else float16(0.0)
        v_tile[ty, c] = V[kv_head, key, c] if key < n else float16(0.0)
    for m in range(COLUMN_GROUPS):
        dk[m] = float32(0.0)
        dv[m] = float32(0.0)

    for head in range(kv_head * group, kv_head * group + group):  # the q heads that read this kv head
        for q0 in range(0, n, TILE):
            cuda.syncthreads()  # every thread is done with the previous tiles of Q, dO, P and dS
            query = uint32(q0) + ty  # the row this thread stages
            for c in range(tx, d, TILE):
                q_tile[ty, c] = Q[head, query, c] if query < n else float16(0.0)
                do_tile[ty, c] = dO[head, query, c] if query < n else float16(0.0)
            cuda.syncthreads()  # Q's and dO's tiles are complete

            # Thread (key ty, query tx): its score and its dP, both rebuilt from the staged rows.
            query = uint32(q0) + tx
            s = float32(0.0)
            dp = float32(0.0)
            for c in range(d):
                s += float32(q_tile[tx, c]) * float32(k_tile[ty, c])
                dp += float32(do_tile[tx, c]) * float32(v_tile[ty, c])
            p = float32(0.0)  # a key past the end, a query past the end, a key above a causal diagonal: P = 0
            if key < n and query < n and not (causal and key > query):
                p = math.exp(s * scale - L[head, query])  # P from the saved log-sum-exp: at most 1
            p_tile[ty, tx] = p
            ds_tile[ty, tx] = p * (dp - D[head * n + query]) if query < n else float32(0.0)
            cuda.syncthreads()  # the tile's P and dS are complete

            # Thread (key ty, column lane tx): dV += P^T dO and dK += dS^T Q for its key's row.
            for m in range(COLUMN_GROUPS):
                c = tx + uint32(TILE * m)
                if c < d:
                    for i in range(TILE):
                        dv[m] += p_tile[ty, i] * float32(do_tile[i, c])
                        dk[m] += ds_tile[ty, i] * float32(q_tile[i, c])
            # Thread (query ty, column lane tx): dQ += c dS K over this block's 16 keys, added into the output.
            query = uint32(q0) + ty
            if query < n:
                for m in range(COLUMN_GROUPS):
                    c = tx + uint32(TILE * m)
                    if c < d:
                        acc = float32(0.0)
                        for j in range(TILE):
                            acc += ds_tile[j, ty] * float32(k_tile[j, c])
                        cuda.atomic.add(out, (head, query, c), acc * scale)

    if key < n:  # dK (heads bh .. bh + kv) and dV (the kv heads after them) of this thread's key
        for m in range(COLUMN_GROUPS):
            c = tx + uint32(TILE * m)
            if c < d:
                out[bh + kv_head, key, c] = dk[m] * scale
                out[bh + kv + kv_head, key, c] = dv[m]


def validate(Q, K, V, O, dO, L, causal=False):
    check_limits(Q, K, V, O, dO, L)
    check_head_dim("v01", Q.shape[2], why=": a thread's dK and dV columns are registers, 16 of each")


def launch(Q, K, V, O, dO, L, out, causal=False):
    bh, n, d = Q.shape
    kv = K.shape[0]
    D = row_dots(O, dO, out)  # D_i = dO_i . O_i of every query row; dQ cleared
    scale = np.float32(1 / math.sqrt(d))
    grid = ((n + TILE - 1) // TILE, kv)  # a block a tile of keys of a kv head
    key_tile_gradients[grid, (TILE, TILE)](Q, K, V, dO, L, D, out, scale, bool(causal), np.uint32(bh // kv))
