"""Hillis-Steele scan in one block: log2(n) rounds over a double buffer in shared memory.

Changes:
    The first step. One block, one thread per element (n <= 1024). Each round
    every thread t adds the element ``offset`` places to its left (offset = 1,
    2, 4, ...), reading one half of a shared double buffer and writing the
    other, so a single barrier per round suffices. After ceil(log2 n) rounds
    each slot holds its inclusive prefix.

Why it is faster:
    It is the starting point: log2(n) parallel rounds instead of n serial
    additions, but n log2(n) additions in total (work-inefficient), and one
    block of at most 1024 threads uses a sliver of one SM.
"""

from zoo.device import cuda, float32, int32
from zoo.device.jit import jit
from zoo.errors import OutOfRange

CAPACITY = 1024  # CUDA's limit on threads per block: one element each
BUFFER = 2 * CAPACITY  # two rows: read one, write the other


def _build(T):
    @jit
    def hillis_steele(x, out):
        buf = cuda.shared.array(BUFFER, T)
        t = cuda.threadIdx.x
        n = x.size
        buf[t] = x[t]
        cuda.syncthreads()  # row 0 complete before round 1 reads neighbours
        src = 0
        offset = 1
        while offset < n:
            dst = CAPACITY - src  # the other row
            v = buf[src + t]
            if t >= offset:
                v += buf[src + t - offset]
            buf[dst + t] = v
            # The new row is complete before anyone reads it; the old row, read
            # this round, is written only next round, after this barrier.
            cuda.syncthreads()
            src = dst
            offset *= 2
        out[t] = buf[src + t]

    return hillis_steele


scan_float32 = _build(float32)
scan_int32 = _build(int32)


def validate(x):
    if x.size > CAPACITY:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} runs one block of one thread per element: "
            f"at most {CAPACITY} elements, got {x.size}"
        )


def launch(x, out):
    kernel = scan_int32 if x.dtype == "int32" else scan_float32
    kernel[1, x.size](x, out)
