"""Onesweep: one kernel a digit, each tile learning its offsets by decoupled look-back (Adinets and Merrill 2022).

Changes:
    No upsweep per pass. A first kernel reads the keys once and counts all four
    digits of every key (four 256-bin histograms in shared memory, added to global
    counters); its last block scans each into where each digit starts in the output.
    Then a pass is one kernel over tiles, numbered by a ticket in the order blocks
    start (as the scan family's v05): a block ranks its tile as v05 does, publishes
    each digit's count in the tile at once (status AGGREGATE, one 64-bit word per
    tile and digit, with the call's epoch in the tag: no clearing between passes),
    then a thread per digit walks back over earlier tiles, adding counts until it
    meets an INCLUSIVE word, and publishes its own INCLUSIVE prefix. The digit's
    start plus that prefix is where the tile's keys of the digit go.

Why it is faster:
    A pass reads the keys once and writes them once, the least a pass can move:
    8 bytes a key instead of v05's 12, and one launch a pass (5 in all). The
    look-back costs a few L2 round trips a tile, overlapped with other tiles'
    loads, and usually stops at the tile before: it is the scan family's single
    pass, run on 256 digits at once.
"""

import numpy as np

from zoo.device import cuda, float32, int32, sm_count, uint32, uint64
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK, warp_inclusive_scan
from zoo.kernels.sort import CHUNKS_PER_SM, TILE_ITEMS, TILE_THREADS
from zoo.kernels.sort.order import float_word, uint_word
from zoo.runtime.buffers import scratch

BITS = 8  # bits of a digit
RADIX = 1 << BITS  # digit values
PASSES = 32 // BITS  # digits of a 32-bit word, lowest first
MASK = np.uint32(RADIX - 1)
ALL_DIGITS = PASSES * RADIX  # a counter per digit value per pass
TILE = TILE_THREADS * TILE_ITEMS  # keys of a tile
WARPS = TILE_THREADS // 32
WARP_COUNTS = WARPS * RADIX  # a counter per digit per warp
DIGITS_PER_THREAD = RADIX // TILE_THREADS  # consecutive digits a thread scans
# A tile's word for a digit, 64 bits: the high 32 a tag, epoch * 4 + status; the low 32 a count of keys. Count and
# status travel in one word written by one atomic, so no reader sees a status without its count (no fence needed).
AGGREGATE = np.uint64(1)  # the tile's own count of the digit is published
INCLUSIVE = np.uint64(2)  # the count of this tile and every earlier one is published
SHIFT = np.uint64(32)  # the tag sits above the count
TAG_BITS = np.uint64(2)  # the status takes the tag's low two bits, the epoch the rest
LOW = np.uint64(0xFFFFFFFF)
ZERO = np.uint64(0)
MAX_EPOCH = 1 << 29  # epoch * 4 + status must fit in the 32 tag bits
_EPOCHS = {}  # id of a flags array -> the epoch of its latest pass


@jit(device=True)
def scan_digits(digits, offset, warp_sums, t):
    """Exclusive prefix sum of RADIX counts in shared memory from ``offset``, in place, by the whole block."""
    lane = t & 31  # lane within the warp
    warp = t >> 5  # warp within the block
    base = offset + t * DIGITS_PER_THREAD
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
    def digit_histograms(keys, counts, digit_starts, ticket):
        bins = cuda.shared.array(ALL_DIGITS, int32)  # pass p's digit d at p * RADIX + d
        warp_sums = cuda.shared.array(32, int32)
        last = cuda.shared.array(1, int32)
        t = cuda.threadIdx.x
        n = keys.size
        for d in range(t, ALL_DIGITS, TILE_THREADS):
            bins[d] = 0
        cuda.syncthreads()  # the counts are zero before any thread adds
        my_keys = cuda.local.array(TILE_ITEMS, T)  # constant indices only: registers
        for tile in range(cuda.blockIdx.x, (n + TILE - 1) // TILE, cuda.gridDim.x):  # tiles, grid-stride
            for j in range(TILE_ITEMS):  # every load issued before any is used: TILE_ITEMS in flight
                i = tile * TILE + j * TILE_THREADS + t  # strided: each access coalesced
                if i < n:
                    my_keys[j] = keys[i]
            for j in range(TILE_ITEMS):
                if tile * TILE + j * TILE_THREADS + t < n:
                    word = word_of(my_keys[j])
                    for p in range(PASSES):
                        cuda.atomic.add(bins, p * RADIX + ((word >> uint32(p * BITS)) & MASK), 1)
        cuda.syncthreads()  # every key of this block is counted
        for d in range(t, ALL_DIGITS, TILE_THREADS):
            if bins[d] != 0:
                cuda.atomic.add(counts, d, bins[d])
        cuda.threadfence()  # this thread's additions reach every block before the ticket below is taken
        cuda.syncthreads()  # every thread of the block has added and fenced
        if t == 0:
            last[0] = cuda.atomic.add(ticket, 0, 1) == cuda.gridDim.x - 1
        cuda.syncthreads()  # the block knows whether it is the last
        if last[0]:  # every block's counts are in: scan them (the whole block takes this branch)
            cuda.threadfence()  # no load below is served from before the other blocks' fences
            for d in range(t, ALL_DIGITS, TILE_THREADS):  # read in L2, where the atomics added; zeroed for next call
                bins[d] = cuda.atomic.exch(counts, d, 0)
            cuda.syncthreads()  # the totals are in shared memory
            for p in range(PASSES):
                scan_digits(bins, p * RADIX, warp_sums, t)
            for d in range(t, ALL_DIGITS, TILE_THREADS):
                digit_starts[d] = bins[d]  # where pass p's digit d starts in the output
            if t == 0:
                ticket[0] = 0  # every ticket is drawn: ready for the next call

    @jit
    def onesweep(keys, values, keys_out, values_out, digit_starts, pass_first, flags, ticket, epoch, shift):
        tile_keys = cuda.shared.array(TILE, T)
        tile_values = cuda.shared.array(value_slots, int32)
        warp_counts = cuda.shared.array(WARP_COUNTS, int32)  # keys of each digit in each warp's run
        digit_first = cuda.shared.array(RADIX, int32)  # where each digit starts in the sorted tile
        digit_start = cuda.shared.array(RADIX, int32)  # where the tile's keys of each digit start in the output
        warp_sums = cuda.shared.array(32, int32)
        drawn = cuda.shared.array(1, int32)
        my_keys = cuda.local.array(TILE_ITEMS, T)  # constant indices only: registers
        my_values = cuda.local.array(TILE_ITEMS, int32)
        my_ranks = cuda.local.array(TILE_ITEMS, int32)
        t = cuda.threadIdx.x
        lane = t & 31  # lane within the warp
        warp = t >> 5  # warp within the block
        n = keys.size
        tiles = cuda.gridDim.x
        below = cuda.lanemask_lt()  # the lanes under this one
        # Tiles numbered in the order blocks start: a block only waits on tiles drawn earlier, by blocks already
        # running, which publish their counts without waiting on anyone (no deadlock in any schedule).
        if t == 0:
            drawn[0] = cuda.atomic.add(ticket, 0, 1)
            if drawn[0] == tiles - 1:
                ticket[0] = 0  # every ticket is drawn: ready for the next pass
        for d in range(t, WARP_COUNTS, TILE_THREADS):
            warp_counts[d] = 0
        cuda.syncthreads()  # the tile number is visible, the counters zero
        tile = drawn[0]
        first = tile * TILE
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
        tag = epoch << TAG_BITS  # this pass's tag with status 0; earlier passes' tags are all smaller
        for d in range(t, RADIX, TILE_THREADS):  # a thread per digit: warps in order within the digit
            total = 0
            for w in range(WARPS):
                count = warp_counts[w * RADIX + d]
                warp_counts[w * RADIX + d] = total  # where warp w's keys of digit d start among the digit's
                total += count
            digit_first[d] = total
            status = AGGREGATE if tile > 0 else INCLUSIVE  # tile 0's count is already its inclusive prefix
            cuda.atomic.exch(flags, tile * RADIX + d, ((tag | status) << SHIFT) | uint64(total))  # publish early
        cuda.syncthreads()  # digit counts complete
        for d in range(t, RADIX, TILE_THREADS):  # a thread per digit looks back over the earlier tiles
            count = uint64(digit_first[d])
            exclusive = ZERO
            p = tile - 1
            while p >= 0:
                # Reading through an atomic goes to L2: never a stale L1 copy, never hoisted out of the loop. The
                # simulator runs blocks one at a time, in order, so there the earlier tile is always done.
                word = cuda.atomic.add(flags, p * RADIX + d, ZERO)
                if word >> SHIFT > tag:  # published in this pass (earlier passes' epochs are smaller)
                    exclusive += word & LOW
                    if word >> SHIFT == tag | INCLUSIVE:
                        break
                    p -= 1  # only an aggregate: keep walking back
            if tile > 0:
                cuda.atomic.exch(flags, tile * RADIX + d, ((tag | INCLUSIVE) << SHIFT) | (exclusive + count))
            digit_start[d] = digit_starts[pass_first + d] + int32(exclusive)
        scan_digits(digit_first, 0, warp_sums, t)  # its barriers also make digit_start visible
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
                place = uint32(digit_start[digit] - digit_first[digit] + s)
                keys_out[place] = key
                if pairs:
                    values_out[place] = tile_values[s]

    return digit_histograms, onesweep


KERNELS = {(T, pairs): _build(T, pairs) for T in (float32, uint32) for pairs in (False, True)}


def _next_epoch(flags, tiles):
    """The epoch of a new pass over these flags: one more than the last; the flags cleared when it would overflow."""
    epoch = _EPOCHS.get(id(flags), 0) + 1
    if epoch >= MAX_EPOCH:
        flags.copy_to_device(np.zeros(tiles * RADIX, np.uint64))
        epoch = 1
    _EPOCHS[id(flags)] = epoch
    return np.uint64(epoch)


def launch(keys, values, out):
    n = keys.size
    tiles = (n + TILE - 1) // TILE
    T = float32 if keys.dtype == np.float32 else uint32
    digit_histograms, onesweep = KERNELS[T, values is not None]
    counts = scratch("sort_digit_counts", PASSES * RADIX, np.int32, zero=True)  # the last block zeroes it again
    digit_starts = scratch("sort_digit_starts", PASSES * RADIX, np.int32)
    ticket = scratch("sort_ticket", 1, np.int32, zero=True)  # each kernel's last block resets it
    flags = scratch("sort_onesweep_flags", tiles * RADIX, np.uint64, zero=True, only_latest=True)
    if values is None:  # the last pass writes out: passes alternate, so the first writes the scratch
        key_buffers = (out, scratch("sort_keys", n, keys.dtype, only_latest=True))
        value_buffers = (keys, keys)  # keys-only kernels never touch values: any array of the right type
        values = keys
    else:
        key_buffers = (scratch("sort_keys", n, keys.dtype, only_latest=True), scratch("sort_keys_b", n, keys.dtype))
        value_buffers = (out, scratch("sort_values", n, np.int32, only_latest=True))
    digit_histograms[min(tiles, CHUNKS_PER_SM * sm_count()), TILE_THREADS](keys, counts, digit_starts, ticket)
    for p in range(PASSES):
        last = (PASSES - 1 - p) % 2  # 0 where this pass writes the buffers the last pass writes
        onesweep[tiles, TILE_THREADS](
            keys,
            values,
            key_buffers[last],
            value_buffers[last],
            digit_starts,
            np.int32(p * RADIX),
            flags,
            ticket,
            _next_epoch(flags, tiles),
            np.uint32(p * BITS),
        )
        keys, values = key_buffers[last], value_buffers[last]
