"""A separable filter as two 1-D passes through registers: 2 (2r + 1) FMAs an output instead of (2r + 1)^2.

Changes:
    For w = outer(u, v) the sum splits: out[y, c] = sum_i u[i] h[y + i - ry, c]
    with h[y, c] = sum_j v[j] x[y, c + j - rx]. The thread still walks down the
    8 + 2ry tile rows under its column, but reduces each row at once to one
    number h (the row pass: 2rx + 1 FMAs), then adds u[k - o] * h to each
    output o that row k belongs to (the column pass: one FMA each). A one-thread
    ``factor_kernel`` finds u and v on the GPU first (the column and the row
    through w's largest entry; ``separable_factors`` in the spec is the same on
    the host) into a scratch buffer, copied into constant memory as v02's
    filter was. ``validate`` refuses a filter that is not separable.

Why it is faster:
    v04 spent 25 of its 67 instructions per output on FFMAs. Here an output
    costs 5 FFMAs for its column pass and 12 / 8 x 5 = 7.5 for its share of
    the row passes, 12.5 in all, with the same 7.5 shared loads: about 54
    instructions per output, so more of each SM's issue slots are left for the
    loads that keep DRAM busy (at radius 8 the FFMAs would fall from 289 to 42).
    Two kernels, a row pass into a temporary image and then a column pass,
    would move 16 bytes a pixel instead of 8: the ``cupyx_correlate1d_twice``
    row does that.
"""

import functools

import numpy as np

from zoo.device import constant, cuda, float32, int64, uint32
from zoo.device.jit import jit, unrolled
from zoo.device.memory import load_flat, store_flat
from zoo.kernels.stencil import check_index_range, check_separable
from zoo.runtime.buffers import scratch

BLOCK_X, BLOCK_Y = 32, 8  # a warp spans 32 columns of one row
OUTPUTS = 8  # consecutive output rows per thread: the block's output tile is 32 x 64
TILE_Y = BLOCK_Y * OUTPUTS
THREADS = BLOCK_X * BLOCK_Y
MAX_GRID_Y = 65535
FACTORS = "stencil_factors"  # the constant array's symbol in each compiled module: u, then v


@functools.cache
def build(radius_y, radius_x):
    """The kernel for a filter of (2 radius_y + 1) x (2 radius_x + 1) taps (closure constants: the loops unroll)."""
    taps_y, taps_x = 2 * radius_y + 1, 2 * radius_x + 1
    tile_rows, tile_cols = TILE_Y + 2 * radius_y, BLOCK_X + 2 * radius_x  # outputs plus the halo on each side
    tile_words = tile_rows * tile_cols
    loads_per_thread = -(-tile_words // THREADS)  # 10 for 5 x 5: 68 x 36 = 2448 pixels, 256 threads
    rows_read = OUTPUTS + 2 * radius_y  # tile rows under one thread's 8 outputs

    @jit(device=True, forceinline=True)
    def add_tile_row(k, tile, first, tx, factors, sums):
        """Tile row first + k (k a constant): its row pass under the thread's column, then the column pass's term
        of each output the row belongs to (pixel row k is tap row k - o of output o)."""
        across = float32(0)  # h: the row's pixels under the thread's column, weighted by v
        for j in range(taps_x):
            across += factors[taps_y + j] * tile[first + k, tx + uint32(j)]  # 32 consecutive words a warp
        for o in range(OUTPUTS):
            if o <= k < o + taps_y:  # k and o are constants: decided at compile time
                sums[o] += factors[k - uint32(o)] * across  # u[k - o] h

    add_all_rows = unrolled(rows_read, add_tile_row)  # add_tile_row(0, ...) ... (rows_read - 1, ...), straight-line
    read_factors = constant.declare(FACTORS, (taps_y + taps_x,), np.float32)  # __constant__ float f[taps_y + taps_x]

    @jit(lto=False)  # no link-time optimization: it would make the constant array internal (constant.py)
    def correlate_kernel(image, out, rows, cols):
        factors = read_factors()  # u then v, in constant memory, filled by launch before the kernel runs
        tile = cuda.shared.array((tile_rows, tile_cols), float32)
        staged = cuda.local.array(loads_per_thread, float32)  # constant indices only: registers
        sums = cuda.local.array(OUTPUTS, float32)  # the thread's 8 outputs, in registers
        tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
        col0 = uint32(cuda.blockIdx.x) * uint32(BLOCK_X)  # the block's first output column
        row0 = uint32(cuda.blockIdx.y) * uint32(TILE_Y)  # its first output row, then one grid's height further
        first = ty * uint32(OUTPUTS)  # the tile row of this thread's first output (and of its first tap row)
        thread = ty * uint32(BLOCK_X) + tx  # 0 .. 255: the block's threads load the tile in flat order
        while row0 < rows:
            for k in range(loads_per_thread):  # a constant count: unrolled, every load issued before any store
                at = uint32(thread + uint32(k * THREADS))  # flat index into the tile: a warp, 32 words
                row_in_tile, col_in_tile = at // uint32(tile_cols), at % uint32(tile_cols)  # tile row, column
                # signed, then unsigned: a pixel above or left of the image wraps to a huge index, so one compare
                # per side tests both edges
                r = uint32(int64(row0 + row_in_tile) - radius_y)
                c = uint32(int64(col0 + col_in_tile) - radius_x)
                staged[k] = float32(0)  # the zero boundary
                if at < uint32(tile_words) and r < rows and c < cols:
                    staged[k] = load_flat(image, uint32(r * cols + c))  # a 32-bit flat index: one multiply-add
            for k in range(loads_per_thread):
                at = uint32(thread + uint32(k * THREADS))
                if at < uint32(tile_words):
                    tile[at // uint32(tile_cols), at % uint32(tile_cols)] = staged[k]
            cuda.syncthreads()  # the tile and its halo are loaded before any thread reads a neighbour's pixel
            for o in range(OUTPUTS):
                sums[o] = float32(0)
            add_all_rows(tile, first, tx, factors, sums)  # rows_read tile rows, unrolled
            col = col0 + tx
            at = uint32((row0 + first) * cols + col)  # flat index of the thread's first output
            for o in range(OUTPUTS):
                if row0 + first + uint32(o) < rows and col < cols:
                    store_flat(out, at, sums[o])  # a warp writes 32 consecutive floats of one row
                at = uint32(at + cols)  # the next row down
            cuda.syncthreads()  # every thread is done with the tile before the next rows overwrite it
            row0 += uint32(cuda.gridDim.y) * uint32(TILE_Y)

    return correlate_kernel


@jit
def factor_kernel(weights, factors):
    """One thread: u = w[:, q] and v = w[p, :] / w[p, q] into factors, (p, q) the first largest |w[p, q]|."""
    taps_y, taps_x = weights.shape
    p, q, largest = 0, 0, float32(0)
    for i in range(taps_y):
        for j in range(taps_x):
            if abs(weights[i, j]) > largest:
                p, q, largest = i, j, abs(weights[i, j])
    pivot = weights[p, q]
    for i in range(taps_y):
        factors[i] = weights[i, q]
    for j in range(taps_x):
        factors[taps_y + j] = weights[p, j] / pivot if pivot != 0 else float32(0)  # a zero filter: zero factors


def validate(image, weights):
    check_index_range(image)
    check_separable(weights)


def launch(image, weights, out):
    rows, cols = image.shape
    kernel = build(weights.shape[0] // 2, weights.shape[1] // 2)
    args = (image, out, np.uint32(rows), np.uint32(cols))
    factors = scratch("stencil_factors", weights.shape[0] + weights.shape[1], np.float32)
    factor_kernel[1, 1](weights, factors)
    constant.copy_to_symbol(kernel, args, FACTORS, factors)  # queued after the factors, before the launch
    grid = ((cols + BLOCK_X - 1) // BLOCK_X, min((rows + TILE_Y - 1) // TILE_Y, MAX_GRID_Y))
    kernel[grid, (BLOCK_X, BLOCK_Y)](*args)
