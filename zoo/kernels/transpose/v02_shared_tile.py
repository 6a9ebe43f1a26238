"""Through a shared-memory tile: both the reads and the writes are whole rows.

Changes:
    A block of 32 x 32 threads loads a 32 x 32 tile of a into shared memory,
    row by row as before, waits at a barrier, then writes the tile's columns as
    rows of out: thread (x, y) stores tile[x][y] to out[col0 + y, row0 + x].
    The block, not the thread, now decides where an element goes.

Why it is faster:
    Coalescing on both sides: a warp writes 32 consecutive floats of one out
    row, one 128-byte line, instead of 32 scattered sectors. The reordering
    happens in shared memory, on chip. It has a cost that the next step
    removes: reading ``tile[x][y]`` down a column hits addresses 32 floats
    apart, all in the same one of shared memory's 32 banks, so the warp's read
    is served one thread at a time (a 32-way bank conflict).
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit

TILE = 32  # one warp per tile row; 32 x 32 = 1024 threads, the most a block may have
MAX_GRID_Y = 65535


@jit
def transpose_kernel(a, out):
    tile = cuda.shared.array((TILE, TILE), float32)
    rows, cols = a.shape
    tx = cuda.threadIdx.x  # tile column when loading, tile row when storing
    ty = cuda.threadIdx.y  # tile row when loading, tile column when storing
    col0 = cuda.blockIdx.x * TILE
    for row0 in range(cuda.blockIdx.y * TILE, rows, cuda.gridDim.y * TILE):
        row, col = row0 + ty, col0 + tx
        if row < rows and col < cols:
            tile[ty, tx] = a[row, col]  # a warp reads one row of the tile: coalesced
        cuda.syncthreads()  # the whole tile is loaded before any thread reads another's element
        # out row = an input column (col0 + ty); along the warp, x walks the input rows
        r, c = col0 + ty, row0 + tx
        if r < cols and c < rows:
            out[r, c] = tile[tx, ty]  # coalesced write; the tile is read down a column (bank conflicts)
        cuda.syncthreads()  # everyone is done reading before the next pass overwrites the tile


def launch(a, out):
    rows, cols = a.shape
    grid = ((cols + TILE - 1) // TILE, min((rows + TILE - 1) // TILE, MAX_GRID_Y))
    transpose_kernel[grid, (TILE, TILE)](a, out)
