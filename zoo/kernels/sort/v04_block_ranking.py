"""Block-local ranking: each tile sorted by its digit in shared memory, then written as coalesced runs.

Changes:
    The scatter ranks its tile in shared memory before writing. Each warp owns a
    run of 32 x TILE_ITEMS keys, taken 32 at a time in input order.
    ``match_any_sync`` gives each lane the lanes holding its digit; its rank among
    them is the count of those below it (``popc`` under ``lanemask_lt``), and the
    lowest adds the group's size to the warp's counter of that digit. A thread per
    digit turns the warps' counters into where each warp's keys of each digit start
    in the tile sorted by digit (digits in order, then warps: stable); the keys go
    there in shared memory, and the block writes the sorted tile with consecutive
    threads on consecutive keys, place s of digit d landing at the digit's start in
    the output plus s minus its start in the tile. Histogram and scan are v03's.

Why it is faster:
    Every thread ranks its keys, all at once, instead of 16 threads walking the
    tile one key at a time; and the writes leave in runs: the keys of one digit
    from one tile are consecutive in the output (about TILE / 16 of them), so a
    warp's 32 stores fill whole sectors instead of 32 scattered ones. Shared
    memory does the reordering that global memory did badly.
"""

import numpy as np

from zoo.device import cuda, float32, int32, uint32
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK, warp_inclusive_scan
from zoo.kernels.sort import TILE_ITEMS, TILE_THREADS
from zoo.kernels.sort.order import float_word, uint_word
from zoo.runtime.buffers import scratch

BITS = 4  # bits of a digit
RADIX = 1 << BITS  # digit values
PASSES = 32 // BITS  # digits of a 32-bit word, lowest first
MASK = np.uint32(RADIX - 1)
TILE = TILE_THREADS * TILE_ITEMS  # keys of a block
WARPS = TILE_THREADS // 32
WARP_COUNTS = WARPS * RADIX  # a counter per digit per warp
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
        warp_counts = cuda.shared.array(WARP_COUNTS, int32)  # keys of each digit in each warp's run
        digit_first = cuda.shared.array(RADIX, int32)  # where each digit starts in the sorted tile
        digit_start = cuda.shared.array(RADIX, int32)  # where this tile's keys of each digit start in the output
        my_keys = cuda.local.array(TILE_ITEMS, T)  # constant indices only: registers
        my_values = cuda.local.array(TILE_ITEMS, int32)
        my_ranks = cuda.local.array(TILE_ITEMS, int32)
        t = cuda.threadIdx.x
        lane = t & 31  # lane within the warp
        warp = t >> 5  # warp within the block
        n = keys.size
        first = cuda.blockIdx.x * TILE
        for d in range(t, WARP_COUNTS, TILE_THREADS):
            warp_counts[d] = 0
        for d in range(t, RADIX, TILE_THREADS):
            digit_start[d] = starts[d * cuda.gridDim.x + cuda.blockIdx.x]
        cuda.syncthreads()  # counters zero before any warp counts
        below = cuda.lanemask_lt()  # the lanes under this one
        for j in range(TILE_ITEMS):  # every load issued before any is used: TILE_ITEMS in flight
            i = first + (warp * TILE_ITEMS + j) * 32 + lane  # warp w's run, 32 keys a round: coalesced
            if i < n:
                my_keys[j] = keys[i]
                if pairs:
                    my_values[j] = values[i]
        for j in range(TILE_ITEMS):  # rounds of 32 keys, lane order = input order
            digit = uint32(RADIX)  # past the tile: a digit no key has, matched only by other such lanes
            if first + (warp * TILE_ITEMS + j) * 32 + lane < n:
                digit = uint32((word_of(my_keys[j]) >> shift) & MASK)
            peers = cuda.match_any_sync(FULL_MASK, int32(digit))  # lanes with the same digit; int32: a 32-bit match
            before = 0
            if digit < RADIX:
                before = warp_counts[warp * RADIX + digit]
            cuda.syncwarp()  # every lane has read its counter before the lowest peer adds to it
            my_ranks[j] = before + cuda.popc(peers & below)  # earlier keys of this digit in this warp's run
            if digit < RADIX and (peers & below) == 0:  # the lowest lane of the group counts for all of it
                warp_counts[warp * RADIX + digit] = before + cuda.popc(peers)
            cuda.syncwarp()  # the counters are updated before the next round reads them
        cuda.syncthreads()  # every warp's counts are complete
        for d in range(t, RADIX, TILE_THREADS):  # a thread per digit: warps in order within the digit
            total = 0
            for w in range(WARPS):
                count = warp_counts[w * RADIX + d]
                warp_counts[w * RADIX + d] = total  # where warp w's keys of digit d start among the digit's
                total += count
            digit_first[d] = total  # the digit's count, for now
        cuda.syncthreads()  # digit counts complete
        if warp == 0:  # RADIX <= 32: one warp scans the digit counts
            count = digit_first[lane] if lane < RADIX else 0
            inclusive = warp_inclusive_scan(count)
            if lane < RADIX:
                digit_first[lane] = inclusive - count
                digit_start[lane] -= inclusive - count  # so that place s of the digit goes to digit_start + s
        cuda.syncthreads()  # where every digit starts, in the tile and in the output
        for j in range(TILE_ITEMS):
            i = first + (warp * TILE_ITEMS + j) * 32 + lane
            if i < n:
                digit = uint32((word_of(my_keys[j]) >> shift) & MASK)
                # unsigned 32-bit places and digits: numba adds a negative-index test to a signed index
                place = uint32(digit_first[digit] + warp_counts[warp * RADIX + digit] + my_ranks[j])
                tile_keys[place] = my_keys[j]
                if pairs:
                    tile_values[place] = my_values[j]
        cuda.syncthreads()  # the tile is sorted by digit in shared memory
        for j in range(TILE_ITEMS):
            s = j * TILE_THREADS + t  # consecutive threads, consecutive places: runs of one digit are coalesced
            if first + s < n:
                key = tile_keys[s]
                place = uint32(digit_start[(word_of(key) >> shift) & MASK] + s)
                keys_out[place] = key
                if pairs:
                    values_out[place] = tile_values[s]

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
