"""No branch at all: both arms rewritten as w <- w m + 1, m selected by parity, every lane runs all 32 chunks.

Changes:
    From v02, back to one element per thread in index order: no remapping
    and no ``if`` on the parity. The arms z <- z x + A and z <- z B + x are
    one recurrence once z is written as c w (see the spec): w <- w m + 1 from
    w = 0, then z = c w. So each lane selects ``m = B if odd else x`` and
    ``c = x if odd else A`` and runs the same instructions as every other lane.
    The trip count is made branch-free too: every lane runs all N_CHUNKS = 32
    chunks, and after chunk k it keeps w if k is its own count T
    (``kept = w if k == T else kept``, a compare and a select). Its result is
    c times the kept w.

Why it is faster:
    No warp is ever split, and no remapping is needed: a select is one
    instruction on values that are already in registers, not a path to run.
    Rewriting the arms matters as much as removing the branch: z <- z m + c
    with selected (m, c) reads three registers per FMA and measured slower
    than v02 (see ``geometric_chunk``); in w <- w m + 1 the added one is an
    immediate again. Every lane issues 512 FMAs whatever its count, plus a
    compare and a select per chunk of 16: within a few percent of v02 on
    uniform inputs. On skewed inputs it wastes the most, since a lane that
    needed 16 steps still issues 512: the yardstick for v04 and v05.
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
    # Selecting (m, c) and running z <- z m + c (an earlier version of this step) measured 23-27% slower
    # than v02 on uniform inputs (H200, 256 steps): every FMA then reads three registers (z, m, c), where
    # v02's arms read two and an immediate. v02 with its constants passed in registers was 30% slower too.
    for _ in range(CHUNK):  # a constant trip count: unrolled into CHUNK dependent FMAs
        w = w * m + float32(1)  # one fma.rn.f32 with an immediate 1.0
    return w


@jit
def branch_free_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:  # the last block sticks out past n
        v = x[i]
        odd = i % 2 == 1
        m = float32(B) if odd else v  # selects (selp.f32): both values are in registers, nothing to jump over
        c = v if odd else float32(A)
        t = trips(v)
        w = float32(0)
        kept = float32(0)
        k = uint32(0)
        while k < uint32(N_CHUNKS):  # a constant count: every lane of every warp runs all 32 chunks
            w = geometric_chunk(w, m)
            k = uint32(k + uint32(1))  # numba widens uint32 + uint32 to 64 bits: cast back
            kept = w if k == t else kept  # a select, not a branch: w after the lane's own count
        out[i] = c * kept


def launch(x, out):
    blocks = (x.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    branch_free_kernel[blocks, THREADS_PER_BLOCK](x, out)
