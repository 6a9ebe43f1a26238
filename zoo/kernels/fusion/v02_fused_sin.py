"""The four sins fused into one kernel; scale, bias, GELU and clamp still launch one by one.

5 launches, 5 x 8n = 40n bytes moved (v01: 8 launches, 64n).

Changes:
    From v01: the four ``sin_kernel`` launches become one ``sin4_kernel`` that
    loads x[i] once, applies ``sin`` four times in registers and stores once.
    This is what a compiler's fusion pass does to ``sin(sin(sin(sin(x))))``.
    The other four ops keep their own launches and temporaries.

Why it is faster:
    The three intermediate arrays of the sins never reach DRAM: 6n floats of
    traffic (three writes, three reads) and three launches are gone, 24n of
    v01's 64n bytes. The four sins (80 to 100 instructions an element on the
    fast path of sinf) now run back to back behind one 8-byte stream, close to
    the 65 or so instructions an H200 issues in the time DRAM takes for 8
    bytes: the sin part lands near the ridge, between 2.5 and 4 times faster
    than four launches (``python -m zoo fusion-sweep`` measures it), and the
    whole chain up to 64/40 = 1.6x faster.

Measured:
    NVIDIA H100 80GB HBM3, size 268435456: 913 GFLOP/s (4,997 us a call), 405.9% of CuPy
    op by op: cupy.sin x4, *, +, GELU as 9 ufuncs, cupy.clip (16 launches), 12
    registers, occupancy bound 100%. From results/nvidia-h100-80gb-hbm3.json.
    NVIDIA H200, size 268435456: 1,001 GFLOP/s (4,560 us a call), 444.8% of CuPy op by
    op: cupy.sin x4, *, +, GELU as 9 ufuncs, cupy.clip (16 launches), 12 registers,
    occupancy bound 100%. Other sizes, % of CuPy op by op: cupy.sin x4, *, +, GELU as 9
    ufuncs, cupy.clip (16 launches): 16777216: 430.5%. From results/nvidia-h200.json.
"""

from numba import cuda

from zoo.device.jit import jit
from zoo.kernels.fusion import ops

THREADS_PER_BLOCK = 256


@jit
def sin4_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:  # the last block sticks out past n
        v = src[i]  # one load; the three intermediates stay in a register
        dst[i] = ops.sin4(v)  # sin(sin(sin(sin(v))))


@jit
def scale_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = ops.scale(src[i])


@jit
def bias_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = ops.bias(src[i])


@jit
def gelu_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = ops.gelu(src[i])


@jit
def clamp_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = ops.clamp(src[i])


def launch(x, out):
    blocks = (x.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    t0, t1 = ops.temporaries(x.size)
    sin4_kernel[blocks, THREADS_PER_BLOCK](x, t0)
    scale_kernel[blocks, THREADS_PER_BLOCK](t0, t1)
    bias_kernel[blocks, THREADS_PER_BLOCK](t1, t0)
    gelu_kernel[blocks, THREADS_PER_BLOCK](t0, t1)
    clamp_kernel[blocks, THREADS_PER_BLOCK](t1, out)
