"""Shared-memory tiling: 32 x 32 tiles of A and B staged on chip, with two barriers per step.

Changes:
    The K loop advances one 32-wide tile at a time. Each thread copies one
    element of the A tile and one of the B tile into shared memory (zero when
    the tile hangs over the matrix edge), the block waits at a barrier, every
    thread runs 32 multiply-adds out of shared memory, and waits again before
    the tiles are overwritten.

Why it is faster:
    Each element loaded from global memory is now used 32 times (by the 32
    threads of a tile row or column) instead of once, cutting global traffic by
    32x. What limits it next: every FMA still needs two shared-memory loads,
    and shared memory, though on chip, cannot feed the FMA units that fast.
"""

import numpy as np

from zoo.device import cuda, float32
from zoo.device.jit import jit

TILE = 32  # a warp wide: a tile row is one coalesced 128-byte load


@jit
def sgemm_kernel(A, B, C, out, alpha, beta):
    a_tile = cuda.shared.array((TILE, TILE), float32)
    b_tile = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    m, k_total = A.shape
    n = B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, k_total, TILE):
        # zero-fill past the edges, so the dot product below needs no bounds checks
        a_tile[ty, tx] = A[row, k0 + tx] if row < m and k0 + tx < k_total else float32(0.0)
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < k_total and col < n else float32(0.0)
        cuda.syncthreads()  # the tiles are complete before anyone reads them
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()  # everyone is done reading before the next tiles overwrite them
    if row < m and col < n:
        if beta != 0:
            out[row, col] = alpha * acc + beta * C[row, col]
        else:
            out[row, col] = alpha * acc


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    m, n = out.shape
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    sgemm_kernel[grid, (TILE, TILE)](A, B, out if C is None else C, out, np.float32(alpha), np.float32(beta))
