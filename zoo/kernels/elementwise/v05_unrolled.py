"""Several float4 per thread, all loaded before any is stored, from a grid that covers the array once.

Changes:
    From v04: each thread handles UNROLL = 2 float4, spaced a whole grid apart
    (so each of them is still a coalesced warp access); the loads are issued
    first into registers, then the stores. The grid is no longer capped at
    BLOCKS_PER_SM blocks per SM: it has enough blocks for one pass over the
    array, so the grid-stride loop runs once. The kernel is built by
    ``build(unroll)`` and launched by ``launch_with(kernel, unroll,
    blocks_per_sm, ...)``, which is what ``python -m zoo elementwise-sweep``
    varies to measure elements per thread against blocks per SM.

Why it is faster:
    A memory-bound kernel runs at the rate Little's law allows: bandwidth =
    bytes in flight / latency. DRAM latency is several hundred ns, so an H200
    needs a few MB in flight across its 132 SMs; with two independent float4
    a thread has 32 bytes outstanding instead of 16. The grid matters more
    than the unrolling (the sweep's figures are beside ``BLOCKS_PER_SM``): a
    looping thread issues its next loads only after its stores, while in a
    one-pass grid a new block's loads go out as soon as a finished block frees
    its slot, so the SMs never wait on one thread's turn around the loop.
"""

import functools

import numpy as np

from zoo.device import cuda, float32, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, store_float4
from zoo.errors import OutOfRange

THREADS_PER_BLOCK = 256
UNROLL = 2  # float4 per thread per pass: 32 bytes in flight per thread
# No cap: enough blocks for one pass. ``python -m zoo elementwise-sweep`` on the H200 at 2^28 elements
# (results/sweeps/nvidia-h200-elementwise-sweep.csv, timed with the hold at 9a44317): a one-pass grid
# moves 97 to 100% of the copy's bytes a second whatever the unrolling (1, 2, 4 or 8 float4 a thread); a grid
# of 4 to 16 blocks per SM 90 to 93% (the chart: docs/results.md, from that CSV).
BLOCKS_PER_SM = None
FALLBACK_BLOCKS_PER_SM = 8  # the scalar loop's grid, as v03's: 8 x 256 = 2048 threads, a full Hopper SM
LIMIT = 2**31  # elements; i + stride stays below 2^32


@jit(device=True)
def relu(v):
    return float32(0) if v <= float32(0) else v  # -0 becomes +0 and NaN stays NaN, as np.maximum does


@functools.cache
def build(unroll):
    """The kernel for ``unroll`` float4 per thread per pass (a closure constant: loops unroll)."""
    STAGED = 4 * unroll

    @jit
    def relu4_kernel(x, out, n):
        staged = cuda.local.array(STAGED, float32)  # staged[4k .. 4k+3]: the k-th float4; constant indices: registers
        n4 = n // uint32(4)  # whole float4; the rest is the tail
        threads = uint32(cuda.gridsize(1))
        i = uint32(cuda.grid(1))  # this thread's first float4; its k-th is k grids further on
        while i < n4:
            for k in range(unroll):  # every load goes out before the first store waits on one
                j = i + uint32(k) * threads  # the k-th float4, a grid apart: each warp access stays coalesced
                if j < n4:
                    (staged[4 * k], staged[4 * k + 1], staged[4 * k + 2], staged[4 * k + 3]) = load_float4(
                        x, j * uint32(4)
                    )
            for k in range(unroll):
                j = i + uint32(k) * threads
                if j < n4:
                    store_float4(
                        out,
                        j * uint32(4),
                        relu(staged[4 * k]),
                        relu(staged[4 * k + 1]),
                        relu(staged[4 * k + 2]),
                        relu(staged[4 * k + 3]),
                    )
            i += threads * uint32(unroll)
        tail = n4 * uint32(4) + uint32(cuda.grid(1))  # the n % 4 leftovers, one thread each
        if tail < n:
            out[tail] = relu(x[tail])

    return relu4_kernel


relu4_kernel = build(UNROLL)


@jit
def relu_kernel(x, out, n):
    """v03's kernel, one float a step of the loop: for arrays a float4 cannot be aligned in."""
    i = uint32(cuda.grid(1))
    stride = uint32(cuda.gridsize(1))
    while i < n:
        out[i] = relu(x[i])
        i += stride


def validate(x):
    if x.size >= LIMIT:
        raise OutOfRange(f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: fewer than 2^31 elements, got {x.size}")


def grid_blocks(n, unroll, blocks_per_sm, threads_per_block=THREADS_PER_BLOCK):
    """Blocks launched for n elements: blocks_per_sm per SM, or (None) enough for a single pass."""
    per_block = threads_per_block * unroll * 4  # elements one block covers in one pass
    blocks = max(1, (n + per_block - 1) // per_block)
    return blocks if blocks_per_sm is None else min(blocks, blocks_per_sm * sm_count())


def launch_with(kernel, unroll, blocks_per_sm, x, out, threads_per_block=THREADS_PER_BLOCK):
    """Launch ``build(unroll)`` with ``blocks_per_sm`` blocks per SM (None: enough for one pass)."""
    if not (aligned(x) and aligned(out)):  # a float4 here would straddle a 16-byte boundary
        needed = (x.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        blocks = min(needed, FALLBACK_BLOCKS_PER_SM * sm_count())
        relu_kernel[blocks, THREADS_PER_BLOCK](x, out, np.uint32(x.size))
        return
    blocks = grid_blocks(x.size, unroll, blocks_per_sm, threads_per_block)
    kernel[blocks, threads_per_block](x, out, np.uint32(x.size))


def launch(x, out):
    launch_with(relu4_kernel, UNROLL, BLOCKS_PER_SM, x, out)
