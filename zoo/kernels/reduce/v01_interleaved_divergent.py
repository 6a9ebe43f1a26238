"""Interleaved addressing with a divergent branch: the textbook tree, one partial per block.

Changes:
    First step. Each block copies BLOCK elements into shared memory and halves
    them in log2(BLOCK) rounds: in round s, thread t adds element t + s into
    element t when t is a multiple of 2 s, with a barrier after every round.
    Thread 0 writes the block's partial; the launch repeats the
    kernel on the partials until one value is left (passes.until_one).

Why it is faster:
    It is the baseline of the family. ``t % (2*s) == 0`` keeps only every
    2 s-th thread busy, so from the first round on every warp diverges: all 32
    lanes issue the round while few of them add. (In CUDA C the modulo is also
    a slow division; here BLOCK is a constant, so numba's LLVM unrolls the
    rounds and turns each modulo into a bit mask: the PTX has no rem.)
"""

from zoo.device import cuda, float32, int32
from zoo.device.jit import jit
from zoo.kernels.reduce import BLOCK  # threads per block = elements per block
from zoo.kernels.reduce.passes import until_one


def _build(T):
    @jit
    def reduce_divergent(x, partials):
        sdata = cuda.shared.array(BLOCK, T)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * BLOCK + t  # the element this thread loads: block b covers [b BLOCK, (b + 1) BLOCK)
        sdata[t] = x[i] if i < x.size else T(0)
        cuda.syncthreads()  # the tile is in shared memory
        s = 1
        while s < BLOCK:
            if t % (2 * s) == 0:  # every 2s-th thread works: each warp diverges
                sdata[t] += sdata[t + s]
            cuda.syncthreads()  # round done before the next reads its results
            s *= 2
        if t == 0:
            partials[cuda.blockIdx.x] = sdata[0]

    return reduce_divergent


reduce_float32 = _build(float32)
reduce_int32 = _build(int32)


def launch(x, out):
    kernel = reduce_int32 if x.dtype == "int32" else reduce_float32
    until_one(kernel, x, out, BLOCK, BLOCK)
