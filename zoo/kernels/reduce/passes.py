"""What the multi-launch reduce steps share: cached scratch and the partials-until-one loop.

Each step file shows its own kernel in full; only the host-side loop that
launches it again on the partials, and the buffers it needs, live here.
"""
import numpy as np
from numba import cuda

_SCRATCH = {}


def _device_id():
    try:
        return cuda.get_current_device().id
    except Exception:  # the simulator
        return 0


def scratch(what, count, dtype, zero=False):
    """A device buffer cached per (what, count, dtype, device): allocated on the first call only.

    zero=True fills it with zeros when it is created (counters the kernel resets itself).
    """
    key = (what, int(count), np.dtype(dtype).str, _device_id())
    buf = _SCRATCH.get(key)
    if buf is None:
        buf = cuda.to_device(np.zeros(int(count), dtype)) if zero else cuda.device_array(int(count), dtype)
        _SCRATCH[key] = buf
    return buf


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
