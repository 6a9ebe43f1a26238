"""Sixteen bytes per load: 128-bit loads, four words unpacked per iteration.

Changes:
    From v04: the walk reads aligned 16-byte chunks (``zoo.device.memory.load_words4``,
    ``ld.global.v4.u32``) and counts their 16 bytes; ``launch`` splits the
    array at its first 16-byte boundary, and the head and tail (at most 15
    bytes each) are counted one byte per thread as before.

Why it is faster:
    A warp's load now moves 512 bytes, so each thread has 16 bytes in flight
    per load and issues a quarter of v04's loads and loop iterations. At 2^28
    bytes the memory side needs about 65 us at 4.1 TB/s; the 16 shared
    atomics per load are the rest of the cost, so this step mainly helps
    uniform data, where the atomics rarely conflict.
"""

import numpy as np

from zoo.device import cuda, int32, uint32
from zoo.device.jit import jit
from zoo.device.memory import load_words4
from zoo.kernels.histogram import BLOCK, bins

BINS = 256
WARPS = BLOCK // 32
COPIES = WARPS * BINS
BLOCKS_PER_SM = 8


@jit(device=True)
def count_word(hist, warp_copy, w):
    cuda.atomic.add(hist, warp_copy + (w & uint32(255)), 1)
    cuda.atomic.add(hist, warp_copy + ((w >> uint32(8)) & uint32(255)), 1)
    cuda.atomic.add(hist, warp_copy + ((w >> uint32(16)) & uint32(255)), 1)
    cuda.atomic.add(hist, warp_copy + (w >> uint32(24)), 1)


@jit
def histogram_vector(data, head, chunks, out):
    hist = cuda.shared.array(COPIES, int32)
    t = cuda.threadIdx.x
    for b in range(t, COPIES, BLOCK):
        hist[b] = 0
    cuda.syncthreads()  # every copy zero before any warp counts
    warp_copy = uint32((t // 32) * BINS)  # where this warp's copy starts: warp w owns hist[w BINS : (w + 1) BINS]
    g = uint32(cuda.grid(1))  # this thread's index in the grid
    stride = uint32(cuda.gridsize(1))
    i = g
    while i < chunks:
        w0, w1, w2, w3 = load_words4(data, head + i * uint32(16))  # 16-byte aligned (launch's split)
        count_word(hist, warp_copy, w0)
        count_word(hist, warp_copy, w1)
        count_word(hist, warp_copy, w2)
        count_word(hist, warp_copy, w3)
        i += stride
    if g < head:  # bytes before the first aligned chunk
        cuda.atomic.add(hist, warp_copy + data[g], 1)
    tail = head + chunks * uint32(16) + g  # bytes after the last whole chunk
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
    head, chunks = bins.split(data, 16)
    bins.zero(out)
    grid = bins.grid_for(max(chunks, 1), BLOCK, BLOCKS_PER_SM)  # head and tail need 15 threads at most
    histogram_vector[grid, BLOCK](data, np.uint32(head), np.uint32(chunks), out)
