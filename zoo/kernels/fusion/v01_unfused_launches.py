"""One launch per op, each through a temporary in DRAM: the chain as a framework runs it op by op.

8 launches, 8 x 8n = 64n bytes moved (8 times the fused 8n).

Changes:
    The first step: each op of the chain is its own kernel, one thread per
    element (``i = blockIdx.x * blockDim.x + threadIdx.x``, ``if i < n``).
    ``sin_kernel`` runs four times, then ``scale_kernel``, ``bias_kernel``,
    ``gelu_kernel`` and ``clamp_kernel``; each reads the previous result from
    one temporary and writes the next into the other, the last into out. The
    two temporaries are allocated on the first call for a size and reused.

Why it is faster:
    It is the starting point. Each launch is a perfectly coalesced stream at
    close to copy bandwidth, and that is the trouble: every op pays a full
    read and write of n floats for a few instructions of work, and the values
    go out to DRAM only to come straight back in the next launch. The chain
    costs eight streaming passes (plus eight launch gaps) where the data
    needs one.
"""

from zoo.device import cuda
from zoo.device.jit import jit
from zoo.kernels.fusion import ops

THREADS_PER_BLOCK = 256


@jit
def sin_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:  # the last block sticks out past n
        dst[i] = ops.sin(src[i])


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
    # every launch reads the last one's output: ping-pong between the temporaries
    sin_kernel[blocks, THREADS_PER_BLOCK](x, t0)
    sin_kernel[blocks, THREADS_PER_BLOCK](t0, t1)
    sin_kernel[blocks, THREADS_PER_BLOCK](t1, t0)
    sin_kernel[blocks, THREADS_PER_BLOCK](t0, t1)
    scale_kernel[blocks, THREADS_PER_BLOCK](t1, t0)
    bias_kernel[blocks, THREADS_PER_BLOCK](t0, t1)
    gelu_kernel[blocks, THREADS_PER_BLOCK](t1, t0)
    clamp_kernel[blocks, THREADS_PER_BLOCK](t0, out)
