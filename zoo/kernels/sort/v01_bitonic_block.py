"""Bitonic sorting network in one block: compare-exchange in shared memory, a barrier between rounds.

Changes:
    The first step. One block of up to BITONIC_THREADS threads sorts up to twice as
    many keys. Each key becomes a 64-bit pair, its sort word (``order``) above its
    index, so equal keys compare by position: the network is stable, and the index
    says where to fetch the key (or its value) from at the end. The pairs, padded
    with all-ones words up to a power of two, sit in shared memory; a bitonic
    network of log2 m (log2 m + 1) / 2 rounds sorts them, each round every thread
    comparing and swapping one pair of slots, a barrier between rounds. Beyond one
    block's keys the step refuses (OutOfRange).

Why it is faster:
    It is the baseline of the family: the network's shape never depends on the data,
    so every thread does the same work each round and no thread diverges. Shared
    memory makes each round a few cycles; what limits it is one block on one SM and
    O(m log^2 m) comparisons.
"""

import numpy as np

from zoo.device import cuda, uint64
from zoo.device.jit import jit
from zoo.errors import OutOfRange
from zoo.kernels.sort import BITONIC_THREADS
from zoo.kernels.sort.order import float_word, uint_word

BLOCK_KEYS = 2 * BITONIC_THREADS  # each thread holds two slots
PAD = np.uint64(0xFFFFFFFFFFFFFFFF)  # above every real pair: real indices stay below 2^31
INDEX = np.uint64(0xFFFFFFFF)  # the low half of a pair: the key's position


def _build(word_of):
    @jit
    def bitonic_block(keys, payload, out):
        pairs = cuda.shared.array(BLOCK_KEYS, uint64)
        t = cuda.threadIdx.x
        n = keys.size
        size = 2 * cuda.blockDim.x  # the network's width: a power of two, n or more
        for i in range(t, size, cuda.blockDim.x):
            pairs[i] = (uint64(word_of(keys[i])) << uint64(32)) | uint64(i) if i < n else PAD
        cuda.syncthreads()  # every pair is in shared memory
        k = 2
        while k <= size:  # merge sorted runs of k // 2 into bitonic runs of k, sorted
            j = k // 2
            while j > 0:  # compare slots j apart
                low = (t // j) * 2 * j + (t & (j - 1))  # thread t's pair is (low, low + j)
                a = pairs[low]
                b = pairs[low + j]
                ascending = (low & k) == 0  # runs of k alternate direction
                if (a > b) == ascending:
                    pairs[low] = b
                    pairs[low + j] = a
                cuda.syncthreads()  # this round's swaps are done before the next round reads
                j //= 2
            k *= 2
        for i in range(t, n, cuda.blockDim.x):
            out[i] = payload[pairs[i] & INDEX]  # the key, or its value, from where it came

    return bitonic_block


bitonic_block_float32 = _build(float_word)
bitonic_block_uint32 = _build(uint_word)


def validate(keys, values=None):
    if keys.size > BLOCK_KEYS:
        raise OutOfRange(f"v01_bitonic_block sorts one block's keys: at most {BLOCK_KEYS}, got {keys.size}")


def launch(keys, values, out):
    size = 2
    while size < keys.size:
        size *= 2  # the network's width: the next power of two
    kernel = bitonic_block_float32 if keys.dtype == np.float32 else bitonic_block_uint32
    kernel[1, size // 2](keys, keys if values is None else values, out)
