"""Branch on the parity of the index: every warp holds both parities, so it runs both arms.

Changes:
    The first kernel: thread ``i = blockIdx.x * blockDim.x + threadIdx.x``
    takes element i, works out its trip count T = ``trips(x[i])`` chunks, then
    branches on ``i % 2``. The even arm runs T chunks of z <- z x + A, the odd
    arm T chunks of z <- z B + x; a chunk is CHUNK = 16 FMAs, unrolled.
    ceil(n / 256) blocks of 256 threads, one element per thread.

Why it is faster:
    It is the starting point, and it pays for divergence twice. A warp's lanes
    are 32 consecutive indices, 16 of each parity, so every warp takes both
    arms: it runs the even arm with the odd lanes masked off, then the odd arm
    with the even lanes masked off. Half of each FMA instruction's lanes are
    idle: on uniform inputs (every lane 512 steps) a warp issues 1024 FMA
    instructions for 512 steps of work. Inside each arm the loop runs until
    the longest lane of that half is done, the data divergence of v04 and v05.
"""

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.kernels.divergence import CHUNK, N_CHUNKS, A, B

THREADS_PER_BLOCK = 256


@jit(device=True)
def trips(v):
    """Chunks element v runs, 1 to N_CHUNKS: the spec's chunks(x), in float32 as on the GPU."""
    scaled = abs(v) * float32(N_CHUNKS)  # exact: N_CHUNKS is a power of two
    whole = uint32(min(scaled, float32(N_CHUNKS - 1)))  # truncation is floor: scaled >= 0
    return uint32(whole + uint32(1))  # numba widens uint32 + uint32 to 64 bits: cast back


@jit(device=True)
def chunk(z, m, c):
    for _ in range(CHUNK):  # a constant trip count: unrolled into CHUNK dependent FMAs
        z = z * m + c  # contracted into one fma.rn.f32
    return z


@jit
def parity_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:  # the last block sticks out past n
        v = x[i]
        t = trips(v)
        z = float32(0)
        k = uint32(0)
        if i % 2 == 0:  # splits every warp 16/16: the warp runs this arm, then the other
            while k < t:  # until the longest even lane of the warp is done
                z = chunk(z, v, float32(A))
                k = uint32(k + uint32(1))  # numba widens uint32 + uint32 to 64 bits: cast back
        else:
            while k < t:  # until the longest odd lane is done
                z = chunk(z, float32(B), v)
                k = uint32(k + uint32(1))
        out[i] = z


def launch(x, out):
    blocks = (x.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    parity_kernel[blocks, THREADS_PER_BLOCK](x, out)
