"""Sequential addressing: the stride halves from BLOCK / 2, conflict-free.

Changes:
    The rounds run backwards: s starts at BLOCK / 2 and halves, and thread
    t < s adds element t + s into element t.

Why it is faster:
    Consecutive lanes read and write consecutive words, so every shared access
    of a warp hits 32 different banks: no conflicts, and the working threads
    stay contiguous (no divergence above one warp). Half the threads still idle
    from the first round on: they only loaded one element each.
"""

from zoo.device import cuda, float32, int32
from zoo.device.jit import jit
from zoo.kernels.reduce import BLOCK  # threads per block = elements per block
from zoo.kernels.reduce.passes import until_one


def _build(T):
    @jit
    def reduce_sequential(x, partials):
        sdata = cuda.shared.array(BLOCK, T)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * BLOCK + t  # the element this thread loads: block b covers [b BLOCK, (b + 1) BLOCK)
        sdata[t] = x[i] if i < x.size else T(0)
        cuda.syncthreads()  # the tile is in shared memory
        s = BLOCK // 2
        while s > 0:
            if t < s:  # consecutive lanes, consecutive words: no bank conflict
                sdata[t] += sdata[t + s]
            cuda.syncthreads()  # round done before the next reads its results
            s >>= 1
        if t == 0:
            partials[cuda.blockIdx.x] = sdata[0]

    return reduce_sequential


reduce_float32 = _build(float32)
reduce_int32 = _build(int32)


def launch(x, out):
    kernel = reduce_int32 if x.dtype == "int32" else reduce_float32
    until_one(kernel, x, out, BLOCK, BLOCK)
