"""Static shared memory: a 64-element buffer and one barrier, as first taught.

Changes:
    The first step, after NVIDIA's ``staticReverse``: one block of n <= 64
    threads; ``cuda.shared.array(64, float32)`` is sized at compile time. Thread
    t stores x[t] in s[t], waits at ``cuda.syncthreads()``, then writes
    s[n - 1 - t], a value another thread stored, to out[t].

Why it is faster:
    It is the starting point, and it is about correctness more than speed:
    shared memory is an on-chip scratchpad visible to the whole block, and the
    barrier is what makes a neighbour's write visible before the read. One block
    of at most 64 threads uses a sliver of one SM.
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit
from zoo.errors import OutOfRange

CAPACITY = 64  # the static buffer's size must be a compile-time constant


@jit
def reverse_kernel(x, out):
    s = cuda.shared.array(CAPACITY, float32)
    t = cuda.threadIdx.x  # one block: the thread index is the element index
    n = x.size
    s[t] = x[t]
    cuda.syncthreads()  # every s[t] is written before any thread reads s[n - 1 - t]
    out[t] = s[n - 1 - t]


def validate(x):
    if x.size > CAPACITY:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} reverses at most {CAPACITY} elements "
            f"(its static shared buffer), got {x.size}"
        )


def launch(x, out):
    reverse_kernel[1, x.size](x, out)  # one thread per element, one block
