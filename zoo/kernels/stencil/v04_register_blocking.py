"""Several outputs per thread: each thread computes 8 rows of one column and reuses every pixel it reads.

Changes:
    Each thread now computes OUTPUTS = 8 consecutive rows of its column, so a
    block of 32 x 8 threads covers 32 x 64 outputs and loads a (64 + 2ry) x
    (32 + 2rx) tile (68 x 36 for 5 x 5, 10 loads a thread, all issued before
    the first store). A thread walks down the 8 + 2ry tile rows its outputs
    need; from each row it reads the 2rx + 1 pixels under its column once, into
    registers, and adds each to every output whose filter covers that row
    (pixel row k is tap row k - o of output o). The 8 sums live in registers:
    every index is a constant once the loops unroll
    (``zoo.device.jit.unrolled`` over the tile rows).

Why it is faster:
    v03 read 25 words of shared memory per output, and shared memory, like L1,
    delivers 128 bytes a cycle per SM: a warp's 25 loads took 25 cycles, more
    than one SM's share of DRAM bandwidth needs to bring its 32 pixels and take
    back its 32 outputs (about 20 on an H100), and with its other instructions
    a thread issued about 100 per output. Here 12 rows x 5 pixels = 60 shared
    loads serve 8 outputs, 7.5 per output, the taller tile cuts the halo from
    1.7 loads a pixel to 1.2, and an output costs about 67 instructions, 25 of
    them FFMAs (``zoo show stencil v04 --sass --summary``).
"""

import functools

import numpy as np

from zoo.device import constant, cuda, float32, int64, uint32
from zoo.device.jit import jit, unrolled
from zoo.device.memory import load_flat, store_flat
from zoo.kernels.stencil import check_index_range

BLOCK_X, BLOCK_Y = 32, 8  # a warp spans 32 columns of one row
OUTPUTS = 8  # consecutive output rows per thread: the block's output tile is 32 x 64
TILE_Y = BLOCK_Y * OUTPUTS
THREADS = BLOCK_X * BLOCK_Y
MAX_GRID_Y = 65535
FILTER = "stencil_filter"  # the constant array's symbol in each compiled module


@functools.cache
def build(radius_y, radius_x):
    """The kernel for a filter of (2 radius_y + 1) x (2 radius_x + 1) taps (closure constants: the loops unroll)."""
    taps_y, taps_x = 2 * radius_y + 1, 2 * radius_x + 1
    tile_rows, tile_cols = TILE_Y + 2 * radius_y, BLOCK_X + 2 * radius_x  # outputs plus the halo on each side
    tile_words = tile_rows * tile_cols
    loads_per_thread = -(-tile_words // THREADS)  # 10 for 5 x 5: 68 x 36 = 2448 pixels, 256 threads
    rows_read = OUTPUTS + 2 * radius_y  # tile rows under one thread's 8 outputs

    @jit(device=True, forceinline=True)
    def add_tile_row(k, tile, first, tx, weights, pixels, sums):
        """Tile row first + k (k a constant): its pixels under the thread's column, read once, then added to each
        output whose filter covers the row (pixel row k is tap row k - o of output o)."""
        for j in range(taps_x):
            pixels[j] = tile[first + k, tx + uint32(j)]  # 32 consecutive words a warp: no bank conflict
        for o in range(OUTPUTS):
            if o <= k < o + taps_y:  # k and o are constants: decided at compile time
                for j in range(taps_x):
                    sums[o] += weights[k - uint32(o), j] * pixels[j]

    add_all_rows = unrolled(rows_read, add_tile_row)  # add_tile_row(0, ...) ... (rows_read - 1, ...), straight-line
    read_filter = constant.declare(FILTER, (taps_y, taps_x), np.float32)  # __constant__ float f[taps_y][taps_x]

    @jit(lto=False)  # no link-time optimization: it would make the constant array internal (constant.py)
    def correlate_kernel(image, out, rows, cols):
        weights = read_filter()  # constant memory, filled by launch before the kernel runs
        tile = cuda.shared.array((tile_rows, tile_cols), float32)
        staged = cuda.local.array(loads_per_thread, float32)  # constant indices only: registers
        sums = cuda.local.array(OUTPUTS, float32)  # the thread's 8 outputs, in registers
        pixels = cuda.local.array(taps_x, float32)  # the pixels of one tile row under the thread's column
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
            add_all_rows(tile, first, tx, weights, pixels, sums)  # rows_read tile rows, unrolled
            col = col0 + tx
            at = uint32((row0 + first) * cols + col)  # flat index of the thread's first output
            for o in range(OUTPUTS):
                if row0 + first + uint32(o) < rows and col < cols:
                    store_flat(out, at, sums[o])  # a warp writes 32 consecutive floats of one row
                at = uint32(at + cols)  # the next row down
            cuda.syncthreads()  # every thread is done with the tile before the next rows overwrite it
            row0 += uint32(cuda.gridDim.y) * uint32(TILE_Y)

    return correlate_kernel


def validate(image, weights):
    check_index_range(image)


def launch(image, weights, out):
    rows, cols = image.shape
    kernel = build(weights.shape[0] // 2, weights.shape[1] // 2)
    args = (image, out, np.uint32(rows), np.uint32(cols))
    constant.copy_to_symbol(kernel, args, FILTER, weights)  # queued before the launch, on its stream
    grid = ((cols + BLOCK_X - 1) // BLOCK_X, min((rows + TILE_Y - 1) // TILE_Y, MAX_GRID_Y))
    kernel[grid, (BLOCK_X, BLOCK_Y)](*args)
