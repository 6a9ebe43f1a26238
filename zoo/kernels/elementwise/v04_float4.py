"""128-bit loads and stores: four elements per memory instruction, the n % 4 tail apart.

Changes:
    From v03: the grid-stride loop walks float4 instead of floats, reading and
    writing through ``zoo.device.memory.load_float4`` / ``store_float4``; the last
    n % 4 elements (at most 3) are done by the grid's first threads after the
    loop. A float4 must start on a 16-byte boundary: when x or out does not (a
    view starting mid-array), ``launch`` runs v03's scalar kernel instead.

Why it is faster:
    A warp's load moves 512 bytes instead of 128 with one instruction, so the
    kernel issues a quarter of the memory instructions (and a quarter of the
    loop and index overhead) for the same bytes, and each thread has 16 bytes
    in flight instead of 4. The LSU and the issue slots stop being a limit
    long before DRAM is.

Measured:
    NVIDIA H200, size 268435456: 3,921 GB/s (548 us a call), 231.8% of cupy.maximum(x,
    0, out=out), 18 registers, occupancy bound 100%. Other sizes, % of cupy.maximum(x,
    0, out=out): 1048576: 37.1%, 16777216: 156.6%. From results/nvidia-h200.json.
"""
import numpy as np
from numba import cuda, float32, uint32

from zoo.device import sm_count
from zoo.device.jit import jit
from zoo.kernels.elementwise import v03_grid_stride as scalar
from zoo.device.memory import aligned, load_float4, store_float4

THREADS_PER_BLOCK = 256
BLOCKS_PER_SM = 8
validate = scalar.validate  # the same uint32 limit


@jit(device=True)
def relu(v):
    return float32(0) if v <= float32(0) else v  # -0 becomes +0 and NaN stays NaN, as np.maximum does


@jit
def relu4_kernel(x, out, n):
    n4 = n // uint32(4)  # whole float4; the rest is the tail
    i = uint32(cuda.grid(1))
    stride = uint32(cuda.gridsize(1))
    while i < n4:
        a, b, c, d = load_float4(x, i * uint32(4))  # element index a multiple of 4: 16-byte aligned
        store_float4(out, i * uint32(4), relu(a), relu(b), relu(c), relu(d))
        i += stride
    t = n4 * uint32(4) + uint32(cuda.grid(1))  # the n % 4 leftovers, one thread each
    if t < n:
        out[t] = relu(x[t])


def launch(x, out):
    if not (aligned(x) and aligned(out)):
        scalar.launch(x, out)  # a float4 here would straddle a 16-byte boundary
        return
    needed = (x.size // 4 + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    blocks = max(1, min(needed, BLOCKS_PER_SM * sm_count()))
    relu4_kernel[blocks, THREADS_PER_BLOCK](x, out, np.uint32(x.size))
