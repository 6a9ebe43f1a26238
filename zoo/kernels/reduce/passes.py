"""What the multi-launch reduce steps share: the partials-until-one loop.

Each step file shows its own kernel in full; only the host-side loop that
launches it again on the partials lives here (the cached buffers are ``zoo.runtime.buffers.scratch``).
"""

from zoo.runtime.buffers import scratch


def until_one(kernel, x, out, threads, per_block, grid_for=None):
    """Launch kernel[blocks, threads](inp, partials) until one value remains, the last into out.

    Every block reads per_block elements of inp and writes partials[blockIdx.x].
    grid_for(n) may cap the grid (grid-stride kernels); by default one block per tile.
    The partials of each level go to a cached buffer, ping-ponging between two.
    """
    inp = x
    level = 0
    while True:
        n = inp.size
        blocks = (n + per_block - 1) // per_block
        if grid_for is not None:
            blocks = min(blocks, grid_for(n))
        if blocks == 1:
            kernel[1, threads](inp, out)
            return
        dst = scratch(f"partials{level % 2}", blocks, x.dtype)[:blocks]
        kernel[blocks, threads](inp, dst)
        inp = dst
        level += 1
