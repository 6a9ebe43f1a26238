"""128-bit accesses: each thread computes 4 neighbouring columns and moves them as float4.

Changes:
    From v05: a thread computes a 4 x 8 block of outputs (4 neighbouring
    columns, 8 rows), so a block of 32 x 8 threads covers 128 x 64 and loads a
    68 x 136 tile, its side halos widened to a whole float4; the tile is filled
    float4 by float4 (10 a thread). When the width is a multiple of 4 and both
    arrays are 16-byte aligned, each comes from ``load_float4`` and the
    outputs leave with ``store_float4``; otherwise from four 4-byte loads, and
    the outputs leave 4 bytes at a time (``build(..., wide=False)``). From each
    tile row a thread reads the 8 pixels under its 4 columns with 128-bit
    shared loads, runs the 4 row passes in registers, and adds the 4 results to
    its column passes.

Why it is faster:
    v05 spent as many instructions moving data as computing: per pixel loaded
    a 4-byte load with its index and bounds tests, per tap of a row pass a
    4-byte shared load, per output a store. A float4 moves 4 pixels for the
    index and bounds tests of one (the width a multiple of 4, a float4 is
    wholly inside the image or wholly outside), a thread's 3 shared loads per
    tile row serve 4 columns (about 1 per output instead of 7.5), a store
    writes 4 outputs: about 22 instructions per output instead of 54. A warp's
    float4 accesses cover 512 consecutive bytes (4 shared-memory wavefronts, no
    bank conflict), and a thread has 160 bytes of loads in flight, not 40.
"""

import functools

import numpy as np

from zoo.device import constant, cuda, float32, int64, uint32
from zoo.device.jit import jit, unrolled
from zoo.device.memory import aligned, load_flat, load_float4, store_flat, store_float4
from zoo.kernels.stencil import check_index_range, check_separable
from zoo.runtime.buffers import scratch

BLOCK_X, BLOCK_Y = 32, 8  # a warp spans 32 x 4 = 128 columns of one row
COLUMNS = 4  # neighbouring output columns per thread: one float4
OUTPUTS = 8  # consecutive output rows per thread
TILE_X, TILE_Y = BLOCK_X * COLUMNS, BLOCK_Y * OUTPUTS  # the block's outputs: 128 x 64
THREADS = BLOCK_X * BLOCK_Y
SUMS = OUTPUTS * COLUMNS  # a thread's outputs
MAX_GRID_Y = 65535
FACTORS = "stencil_factors"  # the constant array's symbol in each compiled module: u, then v


@functools.cache
def build(radius_y, radius_x, wide):
    """The kernel for a (2 radius_y + 1) x (2 radius_x + 1) filter, moving float4 to and from global memory when
    ``wide`` (closure constants: the loops unroll and the untaken width compiles away)."""
    taps_y, taps_x = 2 * radius_y + 1, 2 * radius_x + 1
    margin = -(-radius_x // 4) * 4  # halo columns loaded on each side, a whole float4: 4 for radius_x = 2
    tile_rows, tile_cols = TILE_Y + 2 * radius_y, TILE_X + 2 * margin  # 68 x 136: each row 16-byte aligned
    tile_words = tile_rows * tile_cols
    quads_per_row = tile_cols // 4
    tile_quads = tile_rows * quads_per_row
    loads_per_thread = -(-tile_quads // THREADS)  # quads of 4 words each: 10 for 5 x 5 (2312 quads)
    staged_words = 4 * loads_per_thread
    rows_read = OUTPUTS + 2 * radius_y  # tile rows under one thread's 8 output rows
    skip = margin - radius_x  # the thread's first pixel, past the start of its first float4: 2 for radius_x = 2
    window = skip + COLUMNS + 2 * radius_x  # words of a tile row the thread reads, from a float4 boundary
    quads_read = -(-window // 4)  # 128-bit shared loads per tile row: 3 for radius_x = 2
    window_words = 4 * quads_read

    @jit(device=True, forceinline=True)
    def add_tile_row(k, tile, first, lane_col, factors, pixels, across, sums):
        """Tile row first + k (k a constant): the pixels under the thread's 4 columns, its 4 row passes, then the
        column passes' terms of each output row that tile row belongs to (pixel row k is tap row k - o of row o)."""
        at = (first + k) * uint32(tile_cols) + lane_col  # the float4 holding the thread's first pixel
        for q in range(quads_read):  # 128-bit shared loads: a warp reads 512 consecutive bytes, no bank conflict
            pixels[4 * q], pixels[4 * q + 1], pixels[4 * q + 2], pixels[4 * q + 3] = load_float4(
                tile, at + uint32(4 * q)
            )
        for m in range(COLUMNS):
            across[m] = float32(0)  # h of output column m: pixels m .. m + 2 radius_x weighted by v
            for j in range(taps_x):
                across[m] += factors[taps_y + j] * pixels[skip + m + j]
        for o in range(OUTPUTS):
            if o <= k < o + taps_y:  # k and o are constants: decided at compile time
                for m in range(COLUMNS):
                    sums[o * COLUMNS + m] += factors[k - uint32(o)] * across[m]  # u[k - o] h

    add_all_rows = unrolled(rows_read, add_tile_row)  # add_tile_row(0, ...) ... (rows_read - 1, ...), straight-line
    read_factors = constant.declare(FACTORS, (taps_y + taps_x,), np.float32)  # __constant__ float f[taps_y + taps_x]

    @jit(lto=False)  # no link-time optimization: it would make the constant array internal (constant.py)
    def correlate_kernel(image, out, rows, cols):
        factors = read_factors()  # u then v, in constant memory, filled by launch before the kernel runs
        tile = cuda.shared.array(tile_words, float32)  # the only shared array: it starts 16-byte aligned
        staged = cuda.local.array(staged_words, float32)  # constant indices only: registers
        sums = cuda.local.array(SUMS, float32)  # the thread's 4 x 8 outputs, in registers
        pixels = cuda.local.array(window_words, float32)  # a tile row's words under the thread's columns
        across = cuda.local.array(COLUMNS, float32)  # the row passes of the thread's 4 columns
        tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
        lane_col = tx * uint32(COLUMNS)  # tile column of the float4 holding the thread's first pixel (skip < 4)
        col0 = uint32(cuda.blockIdx.x) * uint32(TILE_X)  # the block's first output column
        row0 = uint32(cuda.blockIdx.y) * uint32(TILE_Y)  # its first output row, then one grid's height further
        first = ty * uint32(OUTPUTS)  # the tile row of this thread's first output (and of its first tap row)
        thread = ty * uint32(BLOCK_X) + tx  # 0 .. 255: the block's threads load the tile in flat order
        while row0 < rows:
            for k in range(loads_per_thread):  # a constant count: unrolled, every load issued before any store
                quad = uint32(thread + uint32(k * THREADS))  # flat float4 index into the tile: a warp, 512 bytes
                row_in_tile, col_in_tile = quad // uint32(quads_per_row), quad % uint32(quads_per_row) * uint32(4)
                # signed, then unsigned: above or left of the image wraps to a huge index, so one compare a side
                r = uint32(int64(row0 + row_in_tile) - radius_y)
                c = uint32(int64(col0 + col_in_tile) - margin)  # the first of the float4's 4 columns
                for w in range(4):
                    staged[4 * k + w] = float32(0)  # the zero boundary
                if quad < uint32(tile_quads) and r < rows:
                    if wide:
                        if c < cols:  # cols % 4 == 0: the float4 is wholly inside the image or wholly outside
                            staged[4 * k], staged[4 * k + 1], staged[4 * k + 2], staged[4 * k + 3] = load_float4(
                                image, uint32(r * cols + c)
                            )
                    else:
                        for w in range(4):  # 4-byte loads: the warp's 4 together read the same 512 bytes
                            if uint32(c + uint32(w)) < cols:
                                staged[4 * k + w] = load_flat(image, uint32(r * cols + c + uint32(w)))
            for k in range(loads_per_thread):
                quad = uint32(thread + uint32(k * THREADS))
                if quad < uint32(tile_quads):  # a 128-bit shared store: a warp writes 512 consecutive bytes
                    w = 4 * k
                    store_float4(tile, quad * uint32(4), staged[w], staged[w + 1], staged[w + 2], staged[w + 3])
            cuda.syncthreads()  # the tile and its halo are loaded before any thread reads a neighbour's pixel
            for n in range(SUMS):
                sums[n] = float32(0)
            add_all_rows(tile, first, lane_col, factors, pixels, across, sums)  # rows_read tile rows, unrolled
            col = col0 + lane_col  # the thread's first output column
            at = uint32((row0 + first) * cols + col)  # flat index of the thread's first output
            for o in range(OUTPUTS):
                if row0 + first + uint32(o) < rows:
                    if wide:
                        if col < cols:  # cols % 4 == 0: the float4 is wholly inside or outside
                            n = o * COLUMNS
                            store_float4(out, at, sums[n], sums[n + 1], sums[n + 2], sums[n + 3])
                    else:
                        for m in range(COLUMNS):
                            if col + uint32(m) < cols:
                                store_flat(out, uint32(at + uint32(m)), sums[o * COLUMNS + m])
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
    wide = cols % 4 == 0 and aligned(image) and aligned(out)  # a float4 of a row would straddle rows, or misalign
    kernel = build(weights.shape[0] // 2, weights.shape[1] // 2, wide)
    args = (image, out, np.uint32(rows), np.uint32(cols))
    factors = scratch("stencil_factors", weights.shape[0] + weights.shape[1], np.float32)
    factor_kernel[1, 1](weights, factors)
    constant.copy_to_symbol(kernel, args, FACTORS, factors)  # queued after the factors, before the launch
    grid = ((cols + TILE_X - 1) // TILE_X, min((rows + TILE_Y - 1) // TILE_Y, MAX_GRID_Y))
    kernel[grid, (BLOCK_X, BLOCK_Y)](*args)
