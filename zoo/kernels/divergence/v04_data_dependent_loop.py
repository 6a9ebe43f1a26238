"""Branch-free selection, but each lane stops at its own count: the warp runs as long as its longest lane.

Changes:
    From v03: the loop runs ``trips(x[i])`` chunks of w <- w m + 1 instead of
    all N_CHUNKS, so there is nothing to keep aside: w after the loop is the
    lane's. The selects of m and c stay.

Why it is faster:
    A lane that needs 16 steps stops after 16. Lanes that stop early do not
    free the warp, though: the loop branch diverges, the finished lanes are
    masked off, and the warp keeps issuing until its longest lane is done.
    The time of a warp is that of its longest lane. On uniform inputs every
    lane needs all 512 steps, so it runs like v03 (a loop counter and a
    branch a chunk instead of a compare and a select). On skewed inputs the
    work drops to about a seventh of v03's but the time only by about a
    tenth: the lanes are free, the warps are not, which is what v05 changes.
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
def geometric_chunk(w, m):
    for _ in range(CHUNK):  # a constant trip count: unrolled into CHUNK dependent FMAs
        w = w * m + float32(1)  # one fma.rn.f32 with an immediate 1.0
    return w


@jit
def data_loop_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:  # the last block sticks out past n
        v = x[i]
        odd = i % 2 == 1
        m = float32(B) if odd else v  # selects (selp.f32), as in v03: the arms' common form w <- w m + 1
        c = v if odd else float32(A)
        t = trips(v)
        w = float32(0)
        k = uint32(0)
        # Skewed inputs: one element in 16 is long, so 1 - (15/16)^32 = 87% of warps hold a long lane and run
        # all 512 steps however short their other lanes are.
        while k < t:  # each lane its own count: finished lanes idle until the warp's longest ends
            w = geometric_chunk(w, m)
            k = uint32(k + uint32(1))  # numba widens uint32 + uint32 to 64 bits: cast back
        out[i] = c * w


def launch(x, out):
    blocks = (x.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    data_loop_kernel[blocks, THREADS_PER_BLOCK](x, out)
