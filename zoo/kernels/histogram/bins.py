"""Helpers shared by the histogram steps: zeroing the output, sizing the grid, the aligned split.

Every step accumulates into ``out`` with atomics, so ``out`` must hold zeros
first: ``zero_bins`` is launched before the step's kernel in the same stream
(ordered after it, no host synchronisation).
"""

from zoo.device import cuda, int32, sm_count
from zoo.device.jit import jit
from zoo.device.memory import address

BINS = 256


@jit
def zero_bins(out):
    b = cuda.grid(1)  # one thread per bin
    if b < out.size:
        out[b] = int32(0)


def zero(out):
    zero_bins[1, BINS](out)


def grid_for(units, block, blocks_per_sm):
    """Blocks for `units` pieces of work at one per thread, capped at blocks_per_sm per SM."""
    needed = (units + block - 1) // block
    return max(1, min(needed, blocks_per_sm * sm_count()))


def split(arr, width):
    """(head, chunks): arr[:head] are the bytes before the first `width`-byte boundary,
    then `chunks` whole aligned `width`-byte pieces; the rest (< width bytes) is the tail."""
    n = arr.size
    head = min(-address(arr) % width, n)
    return head, (n - head) // width
