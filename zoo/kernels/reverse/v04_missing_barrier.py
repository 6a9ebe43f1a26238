"""Demonstration, wrong on purpose: v03 without its barrier.

Changes:
    ``cuda.syncthreads()`` is removed from v03. Nothing else changes.

Why it is faster:
    It is not meant to be faster: it shows what the barrier buys. Without it a
    thread may read s[TILE - 1 - t] before the thread that owns that slot has
    stored it, and write stale shared memory to out. On a GPU the warps of a
    block run in no fixed order, so the result can be right on one run and
    wrong on the next; ``compute-sanitizer --tool racecheck`` reports the
    read-after-write hazard on shared memory every time. The simulator hides it.
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit

DEMONSTRATION = "the barrier between the shared-memory store and load is missing: a data race"

TILE = 256


@jit
def reverse_kernel(x, out):
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x  # position in the block's tile
    n = x.size
    tile_start = cuda.blockIdx.x * TILE
    i = tile_start + t  # the element of x this thread loads into s[t]
    if i < n:
        s[t] = x[i]
    # no cuda.syncthreads(): the load below races with other warps' stores above
    j = n - tile_start - TILE + t  # as in v03: the out element this thread writes
    if j >= 0:
        out[j] = s[TILE - 1 - t]


def launch(x, out):
    blocks = (x.size + TILE - 1) // TILE
    reverse_kernel[blocks, TILE](x, out)
