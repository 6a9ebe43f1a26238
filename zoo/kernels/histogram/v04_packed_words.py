"""Four bytes per load: 32-bit words unpacked with shifts and masks, uint32 indices.

Changes:
    From v03: the walk reads aligned 32-bit words (``zoo.device.memory.load_word``) and
    counts their four bytes, ``(w >> 8k) & 255``. ``launch`` splits the array
    at its first 4-byte boundary: the head before it and the n % 4-like tail
    after the last whole word (at most 3 bytes each) are counted one byte per
    thread by the grid's first threads, so a view that starts at an odd
    address never makes a misaligned load. Loop and index arithmetic is done
    in unsigned 32-bit (numba would use signed 64-bit).

Why it is faster:
    v03 issues one 1-byte load per byte: a warp's load instruction moves only
    32 bytes, and the load, its 64-bit address and the loop cost as much as
    the atomic. Here one instruction brings 128 bytes per warp, a quarter of
    the loads and loop iterations, and the unpacking is cheap ALU work. The
    shared atomics, unchanged, are now most of what remains.
"""

import numpy as np

from zoo.device import cuda, int32, uint32
from zoo.device.jit import jit
from zoo.device.memory import load_word
from zoo.kernels.histogram import BLOCK, bins

BINS = 256
WARPS = BLOCK // 32
COPIES = WARPS * BINS
BLOCKS_PER_SM = 8


@jit
def histogram_words(data, head, words, out):
    hist = cuda.shared.array(COPIES, int32)
    t = cuda.threadIdx.x
    for b in range(t, COPIES, BLOCK):
        hist[b] = 0
    cuda.syncthreads()  # every copy zero before any warp counts
    warp_copy = uint32((t // 32) * BINS)  # where this warp's copy starts: warp w owns hist[w BINS : (w + 1) BINS]
    g = uint32(cuda.grid(1))  # this thread's index in the grid
    stride = uint32(cuda.gridsize(1))
    i = g
    while i < words:
        w = load_word(data, head + i * uint32(4))  # head + 4i is 4-byte aligned (launch's split)
        cuda.atomic.add(hist, warp_copy + (w & uint32(255)), 1)
        cuda.atomic.add(hist, warp_copy + ((w >> uint32(8)) & uint32(255)), 1)
        cuda.atomic.add(hist, warp_copy + ((w >> uint32(16)) & uint32(255)), 1)
        cuda.atomic.add(hist, warp_copy + (w >> uint32(24)), 1)
        i += stride
    if g < head:  # bytes before the first aligned word
        cuda.atomic.add(hist, warp_copy + data[g], 1)
    tail = head + words * uint32(4) + g  # bytes after the last whole word
    if tail < data.size:
        cuda.atomic.add(hist, warp_copy + data[tail], 1)
    cuda.syncthreads()  # every warp's counts are complete
    for b in range(t, BINS, BLOCK):
        count = 0
        for k in range(WARPS):
            count += hist[k * BINS + b]
        if count != 0:
            cuda.atomic.add(out, b, count)


def launch(data, out):
    head, words = bins.split(data, 4)
    bins.zero(out)
    grid = bins.grid_for(max(words, 1), BLOCK, BLOCKS_PER_SM)  # head and tail need 3 threads at most
    histogram_words[grid, BLOCK](data, np.uint32(head), np.uint32(words), out)
