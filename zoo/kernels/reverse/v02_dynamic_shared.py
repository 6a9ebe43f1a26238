"""Dynamic shared memory: the buffer is sized at launch, for any n up to one block.

Changes:
    ``cuda.shared.array(0, float32)`` declares a buffer whose size comes from the
    launch's fourth argument (``kernel[1, n, 0, 4 * n]``), so one compiled kernel
    serves every n up to the 1024-thread block limit instead of only n <= 64.

Why it is faster:
    Not faster per element: more general. A static buffer reserves its full
    size in every block whether used or not; a dynamic one reserves exactly
    4 n bytes, which leaves more shared memory for other resident blocks.
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit
from zoo.errors import OutOfRange

MAX_THREADS_PER_BLOCK = 1024  # CUDA's limit on threads in one block


@jit
def reverse_kernel(x, out):
    s = cuda.shared.array(0, float32)  # size set by the launch, in bytes
    t = cuda.threadIdx.x  # one block: the thread index is the element index
    n = x.size
    s[t] = x[t]
    cuda.syncthreads()  # all stores land before the mirrored loads
    out[t] = s[n - 1 - t]


def validate(x):
    if x.size > MAX_THREADS_PER_BLOCK:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} runs one block of one thread per element: "
            f"at most {MAX_THREADS_PER_BLOCK} elements, got {x.size}"
        )


def launch(x, out):
    reverse_kernel[1, x.size, 0, x.size * x.dtype.itemsize](x, out)
