"""Completely unrolled tree for a block size fixed at compile time.

Changes:
    BLOCK is a module constant, so the shared-memory rounds are written out as
    ``if BLOCK >= 512: ...`` blocks that the compiler folds away, and the last
    warp's offsets come from a constant-trip loop that numba unrolls. No loop
    counter, no loop test is left in the kernel.

Why it is faster:
    Step 5 still ran a loop with a shift and a compare per round and a
    variable offset in each address; with everything constant, each round is
    one compare of t against a literal, one load pair with an immediate offset
    and an add. Harris measured this step as a small gain; its main value is
    making the reduction cheap enough that the loads dominate.
"""

from zoo.device import cuda, float32, int32
from zoo.device.jit import jit
from zoo.kernels.reduce import BLOCK  # threads per block, a power of two >= 64; a block covers 2 BLOCK
from zoo.kernels.reduce.passes import until_one


def _build(T):
    @jit
    def reduce_unrolled(x, partials):
        sdata = cuda.shared.array(BLOCK, T)
        t = cuda.threadIdx.x
        n = x.size
        i = cuda.blockIdx.x * (2 * BLOCK) + t  # block b covers 2 BLOCK elements: this thread adds i, i + BLOCK
        v = x[i] if i < n else T(0)
        if i + BLOCK < n:
            v += x[i + BLOCK]  # the first level of the tree, done in registers
        sdata[t] = v
        cuda.syncthreads()  # the tile is in shared memory
        # Each `if BLOCK >= ...` is decided at compile time; each barrier ends a round.
        if BLOCK >= 1024:
            if t < 512:
                sdata[t] = v = v + sdata[t + 512]
            cuda.syncthreads()  # this round's sums written before the next round reads them
        if BLOCK >= 512:
            if t < 256:
                sdata[t] = v = v + sdata[t + 256]
            cuda.syncthreads()  # as above: round done before the next reads its results
        if BLOCK >= 256:
            if t < 128:
                sdata[t] = v = v + sdata[t + 128]
            cuda.syncthreads()  # as above: round done before the next reads its results
        if BLOCK >= 128:
            if t < 64:
                sdata[t] = v = v + sdata[t + 64]
            cuda.syncthreads()  # as above: round done before the next reads its results
        if t < 32:  # one warp finishes: warp barriers only
            v += sdata[t + 32]
            for k in range(5):  # constant trip count: unrolled, offsets 16, 8, 4, 2, 1
                cuda.syncwarp()  # every lane read its operands before any lane overwrites
                sdata[t] = v
                cuda.syncwarp()  # every lane's sum is written before lanes read t + (16 >> k)
                v += sdata[t + (16 >> k)]
            if t == 0:
                partials[cuda.blockIdx.x] = v

    return reduce_unrolled


reduce_float32 = _build(float32)
reduce_int32 = _build(int32)


def launch(x, out):
    kernel = reduce_int32 if x.dtype == "int32" else reduce_float32
    until_one(kernel, x, out, BLOCK, 2 * BLOCK)
