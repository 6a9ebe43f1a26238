"""v04's fused chain with sins two to four as a bare polynomial: fusion shows their argument lies in [-1, 1].

1 launch, 8n bytes moved, as v04.

Changes:
    From v04: the chain's four sins become ``sin4_bounded``: the first is
    still libdevice's ``sinf`` (``ops.sin``), the other three ``sin_unit``,
    the odd Taylor polynomial of sin to v^11 in 7 float32 instructions (one
    multiply, five FMAs, one multiply-add), with no range reduction. The
    float4 loop, the fallback kernel and the rest of the chain are v04's.

Why it is faster:
    v04 is compute-bound: each accurate ``sinf`` reduces its argument to
    [-pi/4, pi/4] (a three-part Cody-Waite step and a branch to a slow path
    for huge arguments), picks a sin or cos polynomial by quadrant and fixes
    the sign: tens of instructions an element, four times over. In one kernel
    the chain is visible as a whole: the argument of sins two to four is a
    sine, in [-1, 1], where the polynomial alone is within one float32 ulp.
    A compiler pass tracking value ranges could find this; kernels launched
    one op at a time cannot, since each must accept any input. Three of the
    four range reductions go, and the arithmetic fits behind the memory
    traffic far better (``python -m zoo fusion-sweep``, row ``fused_bounded``).
"""

import numpy as np

from zoo.device import cuda, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, store_float4
from zoo.errors import OutOfRange
from zoo.kernels.fusion import ops

THREADS_PER_BLOCK = 256
BLOCKS_PER_SM = 8  # 8 x 256 = 2048 threads: a full Hopper SM
LIMIT = 2**31  # elements; i + stride stays below 2^32


# sin's odd Taylor coefficients up to v^11: on |v| <= 1 the first term left out, v^13 / 13!, is
# below 1.7e-10, far under float32's half ulp of sin(1) (3e-8). float32 constants keep the
# arithmetic float32 (numba would widen float32 * a Python float to float64).
SIN_C3 = np.float32(-1.0 / 6.0)
SIN_C5 = np.float32(1.0 / 120.0)
SIN_C7 = np.float32(-1.0 / 5040.0)
SIN_C9 = np.float32(1.0 / 362880.0)
SIN_C11 = np.float32(-1.0 / 39916800.0)


@jit(device=True)
def sin_unit(v):
    """sin(v) for |v| <= 1 only: no range reduction, an odd polynomial in 7 float32 instructions.

    Every sin's output lies in [-1, 1], so in sin(sin(...)) only the first sin needs
    sinf's reduction of its argument to [-pi/4, pi/4] and its quadrant logic; the next
    ones can take this. Measured against float64 on 200,001 points of [-1, 1]: at most
    5.2e-8 off (under one float32 ulp of sin(1), 6e-8). Outside [-1, 1] it is wrong.
    """
    v2 = v * v
    p = SIN_C9 + v2 * SIN_C11  # Horner in v^2: each line one FMA
    p = SIN_C7 + v2 * p
    p = SIN_C5 + v2 * p
    p = SIN_C3 + v2 * p
    return v + v * v2 * p  # v + v^3 (c3 + v^2 (c5 + ...))


@jit(device=True)
def sin4_bounded(v):
    """sin applied four times, the last three through sin_unit: their arguments are sines, in [-1, 1]."""
    return sin_unit(sin_unit(sin_unit(ops.sin(v))))


@jit(device=True)
def chain(v):
    """The eight ops of the chain on one value, in registers (v03's chain with sin4_bounded)."""
    s = sin4_bounded(v)  # v04 had ops.sin4: four full sinf
    y = ops.bias(ops.scale(s))
    g = ops.gelu(y)
    return ops.clamp(g)


@jit
def fused4_kernel(x, out, n):
    n4 = n // uint32(4)  # whole float4; the rest is the tail
    i = uint32(cuda.grid(1))  # the float4 this thread starts at: elements 4i .. 4i + 3
    stride = uint32(cuda.gridsize(1))  # every thread of the grid: no float4 is visited twice
    while i < n4:
        a, b, c, d = load_float4(x, i * uint32(4))  # element index a multiple of 4: 16-byte aligned
        # four independent chains: the compiler interleaves them, one issues while another waits
        store_float4(out, i * uint32(4), chain(a), chain(b), chain(c), chain(d))
        i += stride
    tail = n4 * uint32(4) + uint32(cuda.grid(1))  # the n % 4 leftovers, one thread each
    if tail < n:
        out[tail] = chain(x[tail])


@jit
def fused_kernel(x, out):
    """v03's kernel over this chain, one element a thread: for arrays a float4 cannot be aligned in."""
    i = cuda.grid(1)
    if i < x.size:  # the last block sticks out past n
        out[i] = chain(x[i])


def validate(x):
    if x.size >= LIMIT:
        raise OutOfRange(f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: fewer than 2^31 elements, got {x.size}")


def launch(x, out):
    if not (aligned(x) and aligned(out)):  # a float4 here would straddle a 16-byte boundary
        fused_kernel[(x.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK, THREADS_PER_BLOCK](x, out)
        return
    needed = (x.size // 4 + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    blocks = max(1, min(needed, BLOCKS_PER_SM * sm_count()))
    fused4_kernel[blocks, THREADS_PER_BLOCK](x, out, np.uint32(x.size))
