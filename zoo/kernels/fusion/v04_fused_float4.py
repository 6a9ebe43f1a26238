"""The fused chain with 128-bit loads and stores, four independent chains a thread, 32-bit indices.

1 launch, 8n bytes moved, a quarter of v03's memory instructions.

Changes:
    From v03: a grid of at most 8 blocks of 256 threads per SM walks the vector
    in float4 with a grid-stride loop, reading and writing through
    ``zoo.device.memory.load_float4`` / ``store_float4`` and running ``chain`` on the
    four lanes of each. The last n % 4 elements are done by the grid's first
    threads after the loop. Indices and n are ``uint32`` (``validate`` refuses
    2^31 elements or more). When x or out does not start on a 16-byte boundary
    (a view starting mid-array) ``launch`` runs v03's kernel instead.

Why it is faster:
    The four chains of a float4 do not depend on each other, so the compiler
    interleaves them: while one sinf waits on an FMA's latency the other three
    issue, which a thread running one dependent chain cannot do. Memory
    instructions, loop and index overhead drop to a quarter per element, and
    32-bit index arithmetic replaces numba's signed 64-bit (numba-cuda #801),
    leaving the issue slots to the chain's own arithmetic.

Measured:
    NVIDIA H200, size 268435456: 3,706 GFLOP/s (1,231 us a call), 1650.1% of CuPy op by
    op: cupy.sin x4, *, +, GELU as 9 ufuncs, cupy.clip (16 launches), 28 registers,
    occupancy bound 100%. Other sizes, % of CuPy op by op: cupy.sin x4, *, +, GELU as 9
    ufuncs, cupy.clip (16 launches): 16777216: 1616.5%. From results/nvidia-h200.json.
"""
import numpy as np
from numba import cuda, uint32

from zoo.device import sm_count
from zoo.errors import OutOfRange
from zoo.device.jit import jit
from zoo.kernels.fusion import v03_fused_chain as scalar
from zoo.kernels.fusion.v03_fused_chain import chain
from zoo.device.memory import aligned, load_float4, store_float4

THREADS_PER_BLOCK = 256
BLOCKS_PER_SM = 8  # 8 x 256 = 2048 threads: a full Hopper SM
LIMIT = 2**31  # elements; i + stride stays below 2^32


def build(element):
    """The float4 grid-stride kernel applying the device function ``element`` to every element.

    v05 and the fusion sweep build theirs from the same loop with other functions.
    """

    @jit
    def fused4_kernel(x, out, n):
        n4 = n // uint32(4)  # whole float4; the rest is the tail
        i = uint32(cuda.grid(1))
        stride = uint32(cuda.gridsize(1))  # every thread of the grid: no float4 is visited twice
        while i < n4:
            a, b, c, d = load_float4(x, i * uint32(4))  # element index a multiple of 4: 16-byte aligned
            store_float4(out, i * uint32(4), element(a), element(b), element(c), element(d))
            i += stride
        t = n4 * uint32(4) + uint32(cuda.grid(1))  # the n % 4 leftovers, one thread each
        if t < n:
            out[t] = element(x[t])

    return fused4_kernel


fused4_kernel = build(chain)


def validate(x):
    if x.size >= LIMIT:
        raise OutOfRange(f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: fewer than 2^31 elements, "
                         f"got {x.size}")


def launch_with(kernel, unaligned_kernel, x, out):
    """Launch a ``build``-made kernel on x, a grid of at most BLOCKS_PER_SM blocks per SM, or v03's
    ``build``-made ``unaligned_kernel`` of the same function where x or out is not 16-byte aligned."""
    if not (aligned(x) and aligned(out)):
        scalar.launch_with(unaligned_kernel, x, out)  # a float4 here would straddle a 16-byte boundary
        return
    needed = (x.size // 4 + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    blocks = max(1, min(needed, BLOCKS_PER_SM * sm_count()))
    kernel[blocks, THREADS_PER_BLOCK](x, out, np.uint32(x.size))


def launch(x, out):
    launch_with(fused4_kernel, scalar.fused_kernel, x, out)
