"""The grouped order of block tiles (v07, v15): blocks that run at the same time share their A and B panels.

A GEMM's out is a grid of ``tiles_m`` x ``tiles_n`` block tiles, and the blocks that run at the same time
take consecutive tile numbers. Row by row, a wave of them covers a few block rows and every column: few A
panels (a block row of A) but every B panel (a block column of B), which at 8192^3 is all 128 MiB of B, far
past the L2. Walked in groups of ``group`` block rows, down each column of the group before the next column
(the "thread-block swizzle" of CUTLASS, Triton's grouped ordering), a wave covers ``group`` rows and a few
columns instead, and the panels it reads fit the L2 together. The last group may have fewer rows.

``grouped_order(group, BM, BN)`` returns ``tile_origin(tile, tiles_m, tiles_n)``, a device function giving
(row0, col0), the top-left corner in out of tile number ``tile`` in that order: a few integer operations a
tile. v07 numbers its blocks by launch order; v15's persistent blocks number the tiles they walk.
"""

from zoo.device import uint32
from zoo.device.jit import jit


def grouped_order(group, BM, BN):
    """tile_origin(tile, tiles_m, tiles_n) for groups of ``group`` block rows of BM x BN tiles (constants)."""

    @jit(device=True, forceinline=True)
    def tile_origin(tile, tiles_m, tiles_n):
        per_group = uint32(group) * tiles_n  # tiles in a full group
        first_row = tile // per_group * uint32(group)  # the group's first block row
        rows = min(uint32(group), tiles_m - first_row)  # block rows in this group: the last group may be short
        within = tile % per_group  # the tile's place in its group: column within // rows, row within % rows
        return (first_row + within % rows) * uint32(BM), within // rows * uint32(BN)

    return tile_origin
