"""Any shape at full width: each side of the tile picks float4 or scalar on its own.

Changes:
    From v05: the 64 x 64 tile and its 256 threads now serve every shape.
    Reads are float4 when cols is a multiple of 4 and a is 16-byte aligned;
    writes are float4 when rows is a multiple of 4 and out is aligned; each
    side decides alone, so 10000 x 7777 reads scalars and writes float4. A
    scalar side moves 16 elements per thread (lanes along a tile row, eight
    rows apart, two halves of 32 columns), all loads issued before the first
    shared store. ``build(wide_load, wide_store)`` makes each of the four
    kernels; v04's kernel is no longer used. ``launch_bounds=(256, 4)`` tells
    ptxas that four blocks must fit on an SM.

Why it is faster:
    v05 fell back to v04 for any shape with an odd side, and v04 keeps only 16
    bytes per thread in flight. A scalar side here keeps 64 (sixteen 4-byte
    loads), as many as a float4 side, so irregular shapes get the same
    outstanding requests per SM as aligned ones; a 128-bit store still cuts the
    write instructions by four whenever the output rows allow it. The scalar
    accesses to the padded tile are conflict-free (a warp touches 32
    consecutive words of a row, or 32 words 65 apart: 32 different banks).
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
# launch_bounds: caps registers at 64 a thread, for 1024 threads and 64 KB of loads in flight per SM. ptxas
# settles on 46-54 for the four kernels, no spills, where v05 used 54 and the float4-load, scalar-store kernel
# 72 without the bound.
MIN_BLOCKS_PER_SM = 4
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
        col0 = uint32(cuda.blockIdx.x) * uint32(TILE)
        row0 = uint32(cuda.blockIdx.y) * uint32(TILE)
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
