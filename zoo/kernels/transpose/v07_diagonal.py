"""Diagonal block order: blocks that run together write to different parts of out.

Changes:
    From v06: each block first renumbers itself. Block b = x + W y of a W x H
    grid takes tile row ``b % H`` and tile column ``(b // H + b % H) % W``
    instead of (y, x): a bijection of the grid onto itself, so every tile is
    still moved exactly once, but blocks with consecutive numbers (those the
    scheduler starts together) now lie along a diagonal of tiles instead of
    along one tile row. Nothing else changes.

Why it is faster:
    It is not, on the H200: it is the measured answer to a classic question.
    In row order, the blocks resident at one moment write one band of out
    *columns*, the same offset of many out rows, 4 * rows bytes apart. With a
    power-of-two row length those addresses share their low bits and can queue
    on a few DRAM channels while others idle ("partition camping", why NVIDIA's
    2009 transpose paper on the GT200 used this order). The diagonal spreads
    concurrent writes over many out columns. Hopper hashes addresses across
    channels, which may already remove the effect: here v07 trails v06 by 1.6
    points of copy bandwidth at 16384^2 and 8 at 10000 x 7777 (the last step).
"""

import functools

import numpy as np

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, store_float4
from zoo.errors import OutOfRange

TILE = 64
PADDED = TILE + 1  # rows start one bank apart
TILE_WORDS = TILE * PADDED
THREADS = 256
QUADS = TILE // 4  # float4 per tile row
QUAD_ROWS = THREADS // QUADS  # 16 tile rows per float4 pass
QUAD_PASSES = TILE // QUAD_ROWS  # 4 float4 per thread
WARPS = THREADS // 32  # 8 tile rows per scalar pass
ROW_PASSES = TILE // WARPS  # 8 scalar passes, each two 32-column halves
STAGED = 16  # elements per thread on either side: 4 float4 or 8 x 2 scalars
MIN_BLOCKS_PER_SM = 4  # caps registers at 64 a thread: 1024 threads and 64 KB of loads in flight per SM
MAX_GRID_Y = 65535
LIMIT = 2**31  # elements; every uint32 index sum stays below 2^32


@functools.cache
def build(wide_load, wide_store):
    """The kernel for one choice of widths (closure constants: the untaken branches compile away)."""

    @jit(launch_bounds=(THREADS, MIN_BLOCKS_PER_SM))
    def transpose_kernel(a, out, rows, cols):
        tile = cuda.shared.array(TILE_WORDS, float32)
        staged = cuda.local.array(STAGED, float32)  # constant indices only: registers
        tid = uint32(cuda.threadIdx.x)
        first_of_four = tid % uint32(QUADS) * uint32(4)  # float4 side: first of four columns (load) / rows (store)
        row_in_pass = tid // uint32(QUADS)  # float4 side: tile row within a 16-row pass (load) / column (store)
        lane = tid % uint32(32)  # scalar side: column within a 32-column half (load) / row (store)
        warp = tid // uint32(32)  # scalar side: one warp per tile row (load) / column (store), 8 apart
        width = uint32(cuda.gridDim.x)
        height = uint32(cuda.gridDim.y)
        block = uint32(cuda.blockIdx.x) + width * uint32(cuda.blockIdx.y)  # launch order
        # Timed against v06 in one process on the same arrays (eight allocations, 16384^2 and 10000 x 7777,
        # before the harness held the GPU before each sample), this order was 1 to 6 points of copy bandwidth
        # lower every time (16384^2: 68-80% of copy against 71-81%).
        tile_row = block % height  # consecutive blocks: consecutive tile rows ...
        tile_col = (block // height + tile_row) % width  # ... and a diagonal of tile columns
        col0 = tile_col * uint32(TILE)
        row0 = tile_row * uint32(TILE)
        step = uint32(cuda.gridDim.y) * uint32(TILE)
        while row0 < rows:
            if wide_load:
                col = col0 + first_of_four
                for p in range(QUAD_PASSES):  # four 16-byte loads in flight
                    row = row0 + row_in_pass + uint32(p * QUAD_ROWS)
                    if row < rows and col < cols:  # cols % 4 == 0: the float4 is wholly in or out
                        (staged[4 * p], staged[4 * p + 1], staged[4 * p + 2], staged[4 * p + 3]) = load_float4(
                            a, row * cols + col
                        )
                for p in range(QUAD_PASSES):  # garbage outside the matrix is never written out
                    at = (row_in_pass + uint32(p * QUAD_ROWS)) * uint32(PADDED) + first_of_four
                    for k in range(4):
                        tile[at + uint32(k)] = staged[4 * p + k]
            else:
                for p in range(ROW_PASSES):  # sixteen 4-byte loads in flight, each a coalesced warp row
                    row = row0 + warp + uint32(p * WARPS)
                    for h in range(2):
                        col = col0 + lane + uint32(32 * h)
                        if row < rows and col < cols:
                            staged[2 * p + h] = a[row * cols + col]
                for p in range(ROW_PASSES):
                    for h in range(2):
                        tile[(warp + uint32(p * WARPS)) * uint32(PADDED) + lane + uint32(32 * h)] = staged[2 * p + h]
            cuda.syncthreads()  # the tile is complete before it is read across
            if wide_store:
                out_col = row0 + first_of_four  # out column: four consecutive input rows
                for p in range(QUAD_PASSES):
                    col_in_tile = row_in_pass + uint32(p * QUAD_ROWS)  # tile column = out row offset
                    if col0 + col_in_tile < cols and out_col < rows:  # rows % 4 == 0: whole float4 again
                        at = first_of_four * uint32(PADDED) + col_in_tile
                        store_float4(
                            out,
                            (col0 + col_in_tile) * rows + out_col,
                            tile[at],
                            tile[at + uint32(PADDED)],
                            tile[at + uint32(2 * PADDED)],
                            tile[at + uint32(3 * PADDED)],
                        )
            else:
                for p in range(ROW_PASSES):
                    col_in_tile = warp + uint32(p * WARPS)  # tile column = out row offset
                    for h in range(2):
                        row_in_tile = lane + uint32(32 * h)  # tile row = out column offset
                        if col0 + col_in_tile < cols and row0 + row_in_tile < rows:
                            at = row_in_tile * uint32(PADDED) + col_in_tile  # down a tile column: 65-word stride
                            out[(col0 + col_in_tile) * rows + row0 + row_in_tile] = tile[at]
            cuda.syncthreads()  # reads are done before the next pass overwrites the tile
            row0 += step

    return transpose_kernel


def widths(a, out):
    """(wide_load, wide_store): which sides can move float4 for this shape and these addresses."""
    rows, cols = a.shape
    return cols % 4 == 0 and aligned(a), rows % 4 == 0 and aligned(out)


def validate(a):
    if a.size >= LIMIT:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: the matrix must have fewer "
            f"than 2^31 elements, got {a.size}"
        )


def launch(a, out):
    rows, cols = a.shape
    kernel = build(*widths(a, out))
    grid = ((cols + TILE - 1) // TILE, min((rows + TILE - 1) // TILE, MAX_GRID_Y))
    kernel[grid, THREADS](a.reshape(a.size), out.reshape(out.size), np.uint32(rows), np.uint32(cols))
