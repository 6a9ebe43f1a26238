"""Naive: one thread per output pixel, every tap read from global memory, the filter too.

Changes:
    The first step. A 2-D grid of 32 x 8 blocks covers the image, one thread
    per output; thread (x, y) sums w[i, j] * image[y + i - ry, x + j - rx] over
    the (2ry + 1)(2rx + 1) taps, skipping taps that fall outside the image (the
    zero boundary), and reading both the pixel and the tap from global memory.
    The radii are compile-time constants: ``build(ry, rx)`` makes and keeps one
    kernel per filter shape (CUDA C's ``template <int R>``), so the tap loops
    unroll. Blocks stride down when the image has more rows than the grid.

Why it is faster:
    It is the baseline of the steps. Reads along a warp are coalesced (32
    neighbours of a row), but each thread issues 25 image loads and 25 filter
    loads for a 5 x 5 filter, and 25 bounds tests: each pixel is fetched by 25
    threads, from L1 at best, and the filter, the same for every thread, is
    fetched by every thread again.
"""

import functools

from zoo.device import cuda, float32
from zoo.device.jit import jit

BLOCK_X, BLOCK_Y = 32, 8  # a warp spans 32 columns of one row: its loads and its store are coalesced
MAX_GRID_Y = 65535


@functools.cache
def build(radius_y, radius_x):
    """The kernel for a filter of (2 radius_y + 1) x (2 radius_x + 1) taps (closure constants: the loops unroll)."""
    taps_y, taps_x = 2 * radius_y + 1, 2 * radius_x + 1

    @jit
    def correlate_kernel(image, weights, out):
        rows, cols = image.shape
        col = cuda.blockIdx.x * BLOCK_X + cuda.threadIdx.x
        for row in range(cuda.blockIdx.y * BLOCK_Y + cuda.threadIdx.y, rows, cuda.gridDim.y * BLOCK_Y):
            if col < cols:
                total = float32(0)
                for i in range(taps_y):
                    r = row + i - radius_y  # input row of tap row i
                    if 0 <= r < rows:
                        for j in range(taps_x):
                            c = col + j - radius_x  # input column of tap column j
                            if 0 <= c < cols:  # outside the image the pixel is 0: the tap adds nothing
                                total += weights[i, j] * image[r, c]
                out[row, col] = total

    return correlate_kernel


def launch(image, weights, out):
    rows, cols = image.shape
    kernel = build(weights.shape[0] // 2, weights.shape[1] // 2)
    grid = ((cols + BLOCK_X - 1) // BLOCK_X, min((rows + BLOCK_Y - 1) // BLOCK_Y, MAX_GRID_Y))
    kernel[grid, (BLOCK_X, BLOCK_Y)](image, weights, out)
