"""Naive: one thread per element, reads along rows, writes down columns.

Changes:
    The first kernel. Blocks of 32 x 8 threads cover the matrix; thread (x, y)
    copies a[row, col] to out[col, row] with ``col`` from the x index, so a
    warp is 32 neighbours of one input row. Grid y may hold at most 65535
    blocks, so blocks step down the rows by the grid's height when the matrix
    is taller than that.

Why it is faster:
    It is the starting point. The reads coalesce: a warp loads 128 contiguous
    bytes. The writes do not: the warp's 32 values land in 32 different rows of
    out, 4 * rows bytes apart, so each store is a separate 32-byte sector of
    which 4 bytes are useful, and the memory system moves up to 8 times the
    bytes it needs on the write side.
"""

from zoo.device import cuda
from zoo.device.jit import jit

BLOCK_X = 32  # a warp spans 32 columns: the reads are whole 128-byte lines
BLOCK_Y = 8
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y


@jit
def transpose_kernel(a, out):
    rows, cols = a.shape
    col = cuda.blockIdx.x * BLOCK_X + cuda.threadIdx.x
    # a tall matrix needs more row blocks than grid y holds: each block strides down by the grid's height
    for row0 in range(cuda.blockIdx.y * BLOCK_Y, rows, cuda.gridDim.y * BLOCK_Y):
        row = row0 + cuda.threadIdx.y
        if row < rows and col < cols:
            out[col, row] = a[row, col]  # coalesced read, write 4 * rows bytes from the neighbour's


def launch(a, out):
    rows, cols = a.shape
    grid = ((cols + BLOCK_X - 1) // BLOCK_X, min((rows + BLOCK_Y - 1) // BLOCK_Y, MAX_GRID_Y))
    transpose_kernel[grid, (BLOCK_X, BLOCK_Y)](a, out)
