"""Bitonic sort across blocks: the same network over global memory, one launch per merge stride.

Changes:
    Any n. The pairs (sort word above index, padded to a power of two) live in a
    global scratch array. Kernel 1 sorts each block's 2 BITONIC_THREADS pairs in
    shared memory as v01 does, but with each run's direction taken from its
    position in the whole array, so the blocks come out as the bitonic runs the
    next merge needs. Then, for each run length k from two blocks' worth to the
    whole array, the strides j >= one block are one launch each (``merge_global``:
    every thread one compare-exchange in global memory, the launch boundary the
    barrier), and the strides below one block are one launch of ``merge_block``,
    which finishes them in shared memory. A last kernel gathers the keys (or
    values) by the sorted indices. About (log2 m)^2 / 2 launches for m pairs:
    about 170 at 2^28.

Why it is faster:
    Every SM works, and the strides below a block stay in shared memory: of the
    log2 m (log2 m + 1) / 2 rounds, all but about (log2 m - 11)^2 / 2 read global
    memory once per 11 rounds instead of once a round. What it still pays is the
    network's O(n log^2 n) work, a full pass over 8 bytes a key for every large
    stride, and a host launch for each: at 2^28, 17 merges, 153 global passes.
"""

import numpy as np

from zoo.device import cuda, uint64
from zoo.device.jit import jit
from zoo.kernels.sort import BITONIC_THREADS
from zoo.kernels.sort.order import float_word, uint_word
from zoo.runtime.buffers import scratch

BLOCK_KEYS = 2 * BITONIC_THREADS  # each thread holds two slots
PAD = np.uint64(0xFFFFFFFFFFFFFFFF)  # above every real pair: real indices stay below 2^31
INDEX = np.uint64(0xFFFFFFFF)  # the low half of a pair: the key's position


def _build(word_of):
    @jit
    def sort_blocks(keys, pairs):
        block = cuda.shared.array(BLOCK_KEYS, uint64)
        t = cuda.threadIdx.x
        n = keys.size
        first = cuda.blockIdx.x * BLOCK_KEYS  # this block's pairs in the whole array
        for s in range(t, BLOCK_KEYS, BITONIC_THREADS):
            i = first + s
            block[s] = (uint64(word_of(keys[i])) << uint64(32)) | uint64(i) if i < n else PAD
        cuda.syncthreads()  # every pair is in shared memory
        k = 2
        while k <= BLOCK_KEYS:  # merge sorted runs of k // 2 into bitonic runs of k, sorted
            j = k // 2
            while j > 0:  # compare slots j apart
                low = (t // j) * 2 * j + (t & (j - 1))  # thread t's pair is (low, low + j)
                a = block[low]
                b = block[low + j]
                ascending = ((first + low) & k) == 0  # runs of k alternate direction across the whole array
                if (a > b) == ascending:
                    block[low] = b
                    block[low + j] = a
                cuda.syncthreads()  # this round's swaps are done before the next round reads
                j //= 2
            k *= 2
        for s in range(t, BLOCK_KEYS, BITONIC_THREADS):
            pairs[first + s] = block[s]

    return sort_blocks


sort_blocks_float32 = _build(float_word)
sort_blocks_uint32 = _build(uint_word)


@jit
def merge_global(pairs, j, k):
    """One round of stride j >= a block in runs of k: each thread compares and swaps one pair of slots."""
    t = cuda.grid(1)  # one thread per compared pair: the array's size / 2 of them
    low = (t // j) * 2 * j + (t & (j - 1))
    a = pairs[low]
    b = pairs[low + j]
    ascending = (low & k) == 0
    if (a > b) == ascending:
        pairs[low] = b
        pairs[low + j] = a


@jit
def merge_block(pairs, k):
    """The rounds of strides below a block in runs of k, in shared memory: one load and one store per pair."""
    block = cuda.shared.array(BLOCK_KEYS, uint64)
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * BLOCK_KEYS
    for s in range(t, BLOCK_KEYS, BITONIC_THREADS):
        block[s] = pairs[first + s]
    cuda.syncthreads()  # the block's pairs are in shared memory
    j = BLOCK_KEYS // 2
    while j > 0:
        low = (t // j) * 2 * j + (t & (j - 1))
        a = block[low]
        b = block[low + j]
        ascending = ((first + low) & k) == 0
        if (a > b) == ascending:
            block[low] = b
            block[low + j] = a
        cuda.syncthreads()  # this round's swaps are done before the next round reads
        j //= 2
    for s in range(t, BLOCK_KEYS, BITONIC_THREADS):
        pairs[first + s] = block[s]


@jit
def gather(pairs, payload, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = payload[pairs[i] & INDEX]  # the key, or its value, from where it came


def launch(keys, values, out):
    n = keys.size
    size = BLOCK_KEYS
    while size < n:
        size *= 2  # the network's width: a power of two, at least one block
    pairs = scratch("sort_bitonic_pairs", size, np.uint64, only_latest=True)
    blocks = size // BLOCK_KEYS
    sort_blocks = sort_blocks_float32 if keys.dtype == np.float32 else sort_blocks_uint32
    sort_blocks[blocks, BITONIC_THREADS](keys, pairs)
    k = 2 * BLOCK_KEYS
    while k <= size:
        j = k // 2
        while j >= BLOCK_KEYS:
            merge_global[size // 2 // BITONIC_THREADS, BITONIC_THREADS](pairs, j, k)
            j //= 2
        merge_block[blocks, BITONIC_THREADS](pairs, k)
        k *= 2
    payload = keys if values is None else values
    gather[(n + BITONIC_THREADS - 1) // BITONIC_THREADS, BITONIC_THREADS](pairs, payload, out)
