"""numba's dispatcher as users call it: STEPS launches of ``affine[blocks, threads](src, dst)``.

Changes:
    The first step: a plain ``numba.cuda.jit`` kernel, one thread per element,
    ``dst[i] = A * src[i] + B``. A call launches it STEPS times, the first on
    (x, out), every later one on (out, out): each launch reads what the one
    before wrote, in order on the default stream, as a decode loop's kernels do.
    Each launch is written as users write it, ``affine[blocks, threads](...)``,
    on the arrays as they come (CuPy arrays, in a CuPy program).

Why it is faster:
    It is the starting point. At n = 4096 a launch of 16 blocks runs for about
    two microseconds, and every launch through numba's dispatcher costs the host
    tens: it reads each CuPy array's ``__cuda_array_interface__`` and builds a
    view of it, waits on the stream CuPy names there (numba's
    CUDA_ARRAY_INTERFACE_SYNC), types the arguments, looks up the compiled
    specialisation and packs the parameters. The loop runs at the host's pace.
"""

from zoo.device import cuda
from zoo.kernels.launch import STEPS, A, B

THREADS_PER_BLOCK = 256  # a multiple of the 32-thread warp; 16 blocks at n = 4096


@cuda.jit
def affine(src, dst):
    i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x: this thread's element
    if i < dst.size:  # the last block sticks out past n
        dst[i] = A * src[i] + B


def launch(x, out):
    blocks = (out.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    affine[blocks, THREADS_PER_BLOCK](x, out)  # step 1 reads x
    for _ in range(STEPS - 1):
        affine[blocks, THREADS_PER_BLOCK](out, out)  # each later step updates the last one's result in place
