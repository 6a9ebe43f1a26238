"""LSD radix sort, three kernels per digit: histogram the digit, scan the counts, scatter stably.

Changes:
    A new algorithm. The 32-bit sort word (``order``) is cut into eight 4-bit
    digits, lowest first; each is one pass that moves every key to its place by
    that digit alone, keeping the earlier passes' order among equal digits, so the
    last pass leaves the keys sorted. A pass is three kernels. ``histogram``: each
    block counts its tile's 16 digits in shared memory (the histogram family's
    privatized counts), written digit-major, ``counts[digit * tiles + tile]``.
    ``scan_counts``: one block scans them in place, exclusively (the scan family's
    warp-shuffle scan in chunks): where each (digit, tile) starts in the output.
    ``scatter``: each block loads its tile and digits into shared memory; thread d
    of 16 walks the tile in order, writing each key of digit d to the digit's next
    place: stable by construction. Keys (and values) ping-pong with a scratch array.

Why it is faster:
    O(n) work instead of O(n log^2 n): eight passes over the keys whatever n, 24
    launches instead of about 170. Each pass reads the keys twice and writes them
    once. What it pays: 16 threads of the block walk the whole tile one key at a
    time, and each writes its digit's keys one at a time, 16 scattered streams
    per tile, so the stores land in many partly used sectors.
"""

import numpy as np

from zoo.device import cuda, float32, int32, uint8, uint32
from zoo.device.jit import jit
from zoo.device.warp import warp_inclusive_scan
from zoo.kernels.sort import TILE_ITEMS, TILE_THREADS
from zoo.kernels.sort.order import float_word, uint_word
from zoo.runtime.buffers import scratch

BITS = 4  # bits of a digit
RADIX = 1 << BITS  # digit values
PASSES = 32 // BITS  # digits of a 32-bit word, lowest first
MASK = np.uint32(RADIX - 1)
TILE = TILE_THREADS * TILE_ITEMS  # keys of a block
SCAN_THREADS = 4 * TILE_THREADS  # the one block that scans the counts (at most 32 warps)


def _build(T, pairs):
    word_of = float_word if T == float32 else uint_word

    @jit
    def histogram(keys, counts, shift):
        bins = cuda.shared.array(RADIX, int32)
        t = cuda.threadIdx.x
        n = keys.size
        tiles = cuda.gridDim.x
        for d in range(t, RADIX, TILE_THREADS):
            bins[d] = 0
        cuda.syncthreads()  # the counts are zero before any thread adds
        first = cuda.blockIdx.x * TILE
        for j in range(TILE_ITEMS):
            i = first + j * TILE_THREADS + t  # strided: each access coalesced
            if i < n:
                cuda.atomic.add(bins, (word_of(keys[i]) >> shift) & MASK, 1)
        cuda.syncthreads()  # every key is counted
        for d in range(t, RADIX, TILE_THREADS):
            counts[d * tiles + cuda.blockIdx.x] = bins[d]  # digit-major: the scan gives each (digit, tile) its start

    @jit
    def scatter(keys, values, keys_out, values_out, starts, shift):
        tile_keys = cuda.shared.array(TILE, T)
        tile_values = cuda.shared.array(TILE, int32)
        tile_digits = cuda.shared.array(TILE, uint8)
        t = cuda.threadIdx.x
        n = keys.size
        first = cuda.blockIdx.x * TILE
        for j in range(TILE_ITEMS):
            s = j * TILE_THREADS + t  # strided: each access coalesced
            if first + s < n:
                key = keys[first + s]
                tile_keys[s] = key
                tile_digits[s] = (word_of(key) >> shift) & MASK
                if pairs:
                    tile_values[s] = values[first + s]
        cuda.syncthreads()  # the tile and its digits are in shared memory
        if t < RADIX:  # thread d writes the keys of digit d, in the tile's order
            place = starts[t * cuda.gridDim.x + cuda.blockIdx.x]
            for s in range(min(TILE, n - first)):
                if tile_digits[s] == t:
                    keys_out[place] = tile_keys[s]
                    if pairs:
                        values_out[place] = tile_values[s]
                    place += 1

    return histogram, scatter


@jit
def scan_counts(counts):
    """Exclusive prefix sum of counts, in place: one block walks it in chunks of blockDim.x, carrying the total."""
    warp_sums = cuda.shared.array(32, int32)  # 32 so that warp 0's lanes all have a slot
    t = cuda.threadIdx.x
    lane = t & 31  # lane within the warp
    warp = t >> 5  # warp within the block
    nwarps = cuda.blockDim.x >> 5
    n = counts.size
    carry = 0  # the sum of all earlier chunks, the same in every thread
    for base in range(0, n, cuda.blockDim.x):
        i = base + t
        count = counts[i] if i < n else 0
        inclusive = warp_inclusive_scan(count)
        if lane == 31:
            warp_sums[warp] = inclusive
        cuda.syncthreads()  # warp totals written before warp 0 scans them
        if warp == 0:
            w = warp_sums[lane] if lane < nwarps else 0
            warp_sums[lane] = warp_inclusive_scan(w)
        cuda.syncthreads()  # scanned warp totals visible to all warps
        if warp > 0:
            inclusive += warp_sums[warp - 1]
        if i < n:
            counts[i] = carry + inclusive - count  # exclusive: what comes before this count
        carry += warp_sums[nwarps - 1]
        cuda.syncthreads()  # all reads of warp_sums done before the next chunk writes it


KERNELS = {(T, pairs): _build(T, pairs) for T in (float32, uint32) for pairs in (False, True)}


def launch(keys, values, out):
    n = keys.size
    tiles = (n + TILE - 1) // TILE
    T = float32 if keys.dtype == np.float32 else uint32
    histogram, scatter = KERNELS[T, values is not None]
    counts = scratch("sort_counts", RADIX * tiles, np.int32)
    if values is None:  # the last pass writes out: passes alternate, so the first writes the scratch
        key_buffers = (out, scratch("sort_keys", n, keys.dtype, only_latest=True))
        value_buffers = (keys, keys)  # keys-only kernels never touch values: any array of the right type
        values = keys
    else:
        key_buffers = (scratch("sort_keys", n, keys.dtype, only_latest=True), scratch("sort_keys_b", n, keys.dtype))
        value_buffers = (out, scratch("sort_values", n, np.int32, only_latest=True))
    scan_threads = min(SCAN_THREADS, (counts.size + 31) // 32 * 32)  # whole warps: every lane shuffles
    for p in range(PASSES):
        last = (PASSES - 1 - p) % 2  # 0 where this pass writes the buffers the last pass writes
        shift = np.uint32(p * BITS)
        histogram[tiles, TILE_THREADS](keys, counts, shift)
        scan_counts[1, scan_threads](counts)
        scatter[tiles, TILE_THREADS](keys, values, key_buffers[last], value_buffers[last], counts, shift)
        keys, values = key_buffers[last], value_buffers[last]
