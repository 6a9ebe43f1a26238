"""Any n over many blocks: each block reverses its tile and writes it to the mirrored place.

Changes:
    The array is cut into tiles of 256 elements, one block each. Block b loads
    tile b (x[b*256 : b*256+256]) into shared memory, waits at the barrier, and
    writes the tile reversed into the mirrored slot out[n - b*256 - 256 : n - b*256].
    The last tile may be partial: loads and stores are guarded separately.

Why it is faster:
    The whole GPU works instead of one block. Both the load and the store are
    coalesced: consecutive threads read consecutive x elements and write
    consecutive out elements; the reversal happens inside shared memory, where
    the order of access does not cost a transaction.
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit

TILE = 256  # elements per block = threads per block


@jit
def reverse_kernel(x, out):
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x  # position in the block's tile
    n = x.size
    tile_start = cuda.blockIdx.x * TILE
    i = tile_start + t  # the element of x this thread loads into s[t]
    if i < n:
        s[t] = x[i]
    cuda.syncthreads()  # the whole tile is in shared memory before anyone reads it reversed
    # out[j] = x[n - 1 - j]; thread t writes j = n - tile_start - TILE + t, so a warp's
    # stores are consecutive. Its source x[tile_start + TILE - 1 - t] = s[TILE - 1 - t].
    j = n - tile_start - TILE + t
    if j >= 0:  # the mirror of a partial last tile starts before out[0]
        out[j] = s[TILE - 1 - t]


def launch(x, out):
    blocks = (x.size + TILE - 1) // TILE
    reverse_kernel[blocks, TILE](x, out)
