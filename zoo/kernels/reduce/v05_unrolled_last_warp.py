"""Last warp unrolled, warp-synchronous with syncwarp: no block barrier below 64.

Changes:
    The shared-memory rounds stop once 64 partial sums are left; the first
    warp then finishes with six unrolled steps (offsets 32, 16, ..., 1), each
    keeping its running sum in a register and separated by ``cuda.syncwarp()``
    instead of ``cuda.syncthreads()``.

Why it is faster:
    The last six rounds of step 4 each cost a block-wide barrier and a loop
    test although only one warp works; a warp barrier is nearly free. CUDA C
    code of the Fermi/Kepler era dropped even that: it declared the shared
    array ``volatile`` and relied on the 32 lanes running in lockstep. Since
    Volta (independent thread scheduling) lanes of a warp may run apart, so a
    lane can read its neighbour's slot before the neighbour wrote it: the
    ``volatile`` trick became a race. ``__syncwarp()`` between the read and
    the write of each step (or register shuffles, step 8) replace it. numba has
    no volatile shared memory at all, so ``syncwarp`` is the only option here.
"""

from zoo.device import cuda, float32, int32
from zoo.device.jit import jit
from zoo.kernels.reduce import BLOCK  # threads per block; a block covers 2 BLOCK elements (>= 64)
from zoo.kernels.reduce.passes import until_one


def _build(T):
    @jit
    def reduce_last_warp(x, partials):
        sdata = cuda.shared.array(BLOCK, T)
        t = cuda.threadIdx.x
        n = x.size
        i = cuda.blockIdx.x * (2 * BLOCK) + t  # block b covers 2 BLOCK elements: this thread adds i, i + BLOCK
        v = x[i] if i < n else T(0)
        if i + BLOCK < n:
            v += x[i + BLOCK]  # the first level of the tree, done in registers
        sdata[t] = v
        cuda.syncthreads()  # the tile is in shared memory
        s = BLOCK // 2
        while s > 32:
            if t < s:
                sdata[t] += sdata[t + s]
            cuda.syncthreads()  # round done before the next reads its results
            s >>= 1
        if t < 32:  # one warp finishes: warp barriers only
            v = sdata[t] + sdata[t + 32]
            off = 16
            while off > 0:
                cuda.syncwarp()  # every lane read its operands before any lane overwrites
                sdata[t] = v
                cuda.syncwarp()  # every lane's sum is written before lanes read t + off
                v += sdata[t + off]
                off >>= 1
            if t == 0:
                partials[cuda.blockIdx.x] = v

    return reduce_last_warp


reduce_float32 = _build(float32)
reduce_int32 = _build(int32)


def launch(x, out):
    kernel = reduce_int32 if x.dtype == "int32" else reduce_float32
    until_one(kernel, x, out, BLOCK, 2 * BLOCK)
