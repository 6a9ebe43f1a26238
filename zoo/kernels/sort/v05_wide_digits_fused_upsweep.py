"""Fewer, wider digits, and the scan of the counts fused into the upsweep: four passes of two kernels.

Changes:
    8-bit digits: four passes instead of eight, each with 256 digit values. With 256
    counts a tile the counts array would grow 16-fold, so a block now owns a chunk of
    consecutive tiles (CHUNKS_PER_SM blocks a multiprocessor) and counts per chunk:
    256 counts a block. The upsweep kernel counts its chunk's digits and writes
    them; the last block to finish (a ticket counter, after a fence) scans them, a
    thread per digit walking the blocks in order (eight loads at a time), then the
    digit totals across the block, so the spine scan is no kernel of its own. The
    downsweep kernel walks its chunk tile by tile with v04's ranking (now 256
    digits: the digit counts are scanned by the whole block), keeping where the
    next key of each digit goes in shared memory from one tile to the next.

Why it is faster:
    Half the passes: each reads the keys twice and writes them once, so half the
    traffic, and two launches a pass instead of three (8 in all against 24). The
    spine is 256 counts a block instead of 16 a tile (tiny), and the one-block
    scan kernel of v03 and v04, which walked 16 counts a tile in chunks while the
    GPU idled, is gone. The cost: a tile's 256 digits leave shorter runs (about
    TILE / 256 keys each) than 16 did.
"""

import numpy as np

from zoo.device import cuda, float32, int32, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK, warp_inclusive_scan
from zoo.kernels.sort import CHUNKS_PER_SM, TILE_ITEMS, TILE_THREADS
from zoo.kernels.sort.order import float_word, uint_word
from zoo.runtime.buffers import scratch

BITS = 8  # bits of a digit
RADIX = 1 << BITS  # digit values
PASSES = 32 // BITS  # digits of a 32-bit word, lowest first
MASK = np.uint32(RADIX - 1)
TILE = TILE_THREADS * TILE_ITEMS  # keys of a tile
WARPS = TILE_THREADS // 32
WARP_COUNTS = WARPS * RADIX  # a counter per digit per warp
DIGITS_PER_THREAD = RADIX // TILE_THREADS  # consecutive digits a thread scans
BATCH = 8  # counts the last upsweep block loads at once: eight loads in flight, not one


@jit(device=True)
def scan_digits(digits, warp_sums, t):
    """Exclusive prefix sum of RADIX counts in shared memory, in place, by the whole block (every thread calls)."""
    lane = t & 31  # lane within the warp
    warp = t >> 5  # warp within the block
    base = t * DIGITS_PER_THREAD
    total = 0
    for k in range(DIGITS_PER_THREAD):
        total += digits[base + k]
    inclusive = warp_inclusive_scan(total)
    if lane == 31:
        warp_sums[warp] = inclusive
    cuda.syncthreads()  # warp totals written before warp 0 scans them
    if warp == 0:
        w = warp_sums[lane] if lane < WARPS else 0
        warp_sums[lane] = warp_inclusive_scan(w)
    cuda.syncthreads()  # scanned warp totals visible to all warps
    running = inclusive - total
    if warp > 0:
        running += warp_sums[warp - 1]
    for k in range(DIGITS_PER_THREAD):
        count = digits[base + k]
        digits[base + k] = running
        running += count
    cuda.syncthreads()  # the scanned digits are visible, and warp_sums free again


def _build(T, pairs):
    word_of = float_word if T == float32 else uint_word
    value_slots = TILE if pairs else 1  # keys-only kernels keep no values in shared memory

    @jit
    def upsweep(keys, counts, digit_starts, ticket, shift, chunk_tiles):
        bins = cuda.shared.array(RADIX, int32)
        warp_sums = cuda.shared.array(32, int32)
        last = cuda.shared.array(1, int32)
        t = cuda.threadIdx.x
        n = keys.size
        blocks = cuda.gridDim.x
        for d in range(t, RADIX, TILE_THREADS):
            bins[d] = 0
        cuda.syncthreads()  # the counts are zero before any thread adds
        my_keys = cuda.local.array(TILE_ITEMS, T)  # constant indices only: registers
        first_tile = cuda.blockIdx.x * chunk_tiles
        for tile in range(first_tile, min(first_tile + chunk_tiles, (n + TILE - 1) // TILE)):
            for j in range(TILE_ITEMS):  # every load issued before any is used: TILE_ITEMS in flight
                i = tile * TILE + j * TILE_THREADS + t  # strided: each access coalesced
                if i < n:
                    my_keys[j] = keys[i]
            for j in range(TILE_ITEMS):
                if tile * TILE + j * TILE_THREADS + t < n:
                    cuda.atomic.add(bins, (word_of(my_keys[j]) >> shift) & MASK, 1)
        cuda.syncthreads()  # every key of the chunk is counted
        for d in range(t, RADIX, TILE_THREADS):
            counts[cuda.blockIdx.x * RADIX + d] = bins[d]  # block-major: a thread per digit reads them coalesced
        cuda.threadfence()  # this thread's counts reach every block before the ticket below is taken
        cuda.syncthreads()  # every thread of the block has written and fenced
        if t == 0:
            last[0] = cuda.atomic.add(ticket, 0, 1) == blocks - 1
        cuda.syncthreads()  # the block knows whether it is the last
        if last[0]:  # every other block's counts are written: scan them (the whole block takes this branch)
            cuda.threadfence()  # no load below is served from before the other blocks' fences
            batch = cuda.local.array(BATCH, int32)  # constant indices only: registers
            for d in range(t, RADIX, TILE_THREADS):  # a thread per digit walks the blocks in order
                total = 0
                for b0 in range(0, blocks, BATCH):
                    for k in range(BATCH):
                        batch[k] = counts[(b0 + k) * RADIX + d] if b0 + k < blocks else 0
                    for k in range(BATCH):
                        if b0 + k < blocks:
                            counts[(b0 + k) * RADIX + d] = total  # where block b0 + k starts among digit d's keys
                        total += batch[k]
                bins[d] = total
            cuda.syncthreads()  # every digit's total is in bins
            scan_digits(bins, warp_sums, t)
            for d in range(t, RADIX, TILE_THREADS):
                digit_starts[d] = bins[d]  # where each digit starts in the output
            if t == 0:
                ticket[0] = 0  # every ticket is drawn: ready for the next pass

    @jit
    def downsweep(keys, values, keys_out, values_out, counts, digit_starts, shift, chunk_tiles):
        tile_keys = cuda.shared.array(TILE, T)
        tile_values = cuda.shared.array(value_slots, int32)
        warp_counts = cuda.shared.array(WARP_COUNTS, int32)  # keys of each digit in each warp's run
        digit_first = cuda.shared.array(RADIX, int32)  # where each digit starts in the sorted tile
        digit_count = cuda.shared.array(RADIX, int32)  # keys of each digit in the tile
        digit_next = cuda.shared.array(RADIX, int32)  # where the chunk's next key of each digit goes in the output
        warp_sums = cuda.shared.array(32, int32)
        my_keys = cuda.local.array(TILE_ITEMS, T)  # constant indices only: registers
        my_values = cuda.local.array(TILE_ITEMS, int32)
        my_ranks = cuda.local.array(TILE_ITEMS, int32)
        t = cuda.threadIdx.x
        lane = t & 31  # lane within the warp
        warp = t >> 5  # warp within the block
        n = keys.size
        below = cuda.lanemask_lt()  # the lanes under this one
        for d in range(t, RADIX, TILE_THREADS):
            digit_next[d] = digit_starts[d] + counts[cuda.blockIdx.x * RADIX + d]
        first_tile = cuda.blockIdx.x * chunk_tiles
        for tile in range(first_tile, min(first_tile + chunk_tiles, (n + TILE - 1) // TILE)):
            first = tile * TILE
            for d in range(t, WARP_COUNTS, TILE_THREADS):
                warp_counts[d] = 0
            cuda.syncthreads()  # counters zero, and the previous tile's shared memory read, before any warp counts
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
                digit_count[d] = total
                digit_first[d] = total
            cuda.syncthreads()  # digit counts complete
            scan_digits(digit_first, warp_sums, t)
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
                    digit = uint32((word_of(key) >> shift) & MASK)
                    place = uint32(digit_next[digit] - digit_first[digit] + s)
                    keys_out[place] = key
                    if pairs:
                        values_out[place] = tile_values[s]
            cuda.syncthreads()  # every thread has read digit_next for this tile
            for d in range(t, RADIX, TILE_THREADS):
                digit_next[d] += digit_count[d]  # the next tile's keys of digit d follow this tile's

    return upsweep, downsweep


KERNELS = {(T, pairs): _build(T, pairs) for T in (float32, uint32) for pairs in (False, True)}


def launch(keys, values, out):
    n = keys.size
    tiles = (n + TILE - 1) // TILE
    chunk_tiles = (tiles + CHUNKS_PER_SM * sm_count() - 1) // (CHUNKS_PER_SM * sm_count())
    blocks = (tiles + chunk_tiles - 1) // chunk_tiles  # every block has at least one tile
    T = float32 if keys.dtype == np.float32 else uint32
    upsweep, downsweep = KERNELS[T, values is not None]
    counts = scratch("sort_counts", RADIX * blocks, np.int32)
    digit_starts = scratch("sort_digit_starts", RADIX, np.int32)
    ticket = scratch("sort_ticket", 1, np.int32, zero=True)  # the last upsweep block resets it
    if values is None:  # the last pass writes out: passes alternate, so the first writes the scratch
        key_buffers = (out, scratch("sort_keys", n, keys.dtype, only_latest=True))
        value_buffers = (keys, keys)  # keys-only kernels never touch values: any array of the right type
        values = keys
    else:
        key_buffers = (scratch("sort_keys", n, keys.dtype, only_latest=True), scratch("sort_keys_b", n, keys.dtype))
        value_buffers = (out, scratch("sort_values", n, np.int32, only_latest=True))
    for p in range(PASSES):
        last = (PASSES - 1 - p) % 2  # 0 where this pass writes the buffers the last pass writes
        shift = np.uint32(p * BITS)
        upsweep[blocks, TILE_THREADS](keys, counts, digit_starts, ticket, shift, chunk_tiles)
        downsweep[blocks, TILE_THREADS](
            keys, values, key_buffers[last], value_buffers[last], counts, digit_starts, shift, chunk_tiles
        )
        keys, values = key_buffers[last], value_buffers[last]
