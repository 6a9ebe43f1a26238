"""Many elements per thread (grid-stride): a fixed grid, one partial per block, two launches.

Changes:
    The grid is capped at BLOCKS_PER_SM blocks per SM; each thread walks the
    array with a stride of the whole grid, adding two elements BLOCK apart per
    iteration in a register, before step 6's unrolled tree. The partials (at
    most a few hundred) are summed by a second launch of the same kernel with
    one block.

Why it is faster:
    Steps 1-6 launch one block per 2 BLOCK elements (half a million blocks at
    2^28) and pay a whole tree and a partial per block; here each thread adds
    hundreds of elements, the tree runs once per resident block, and the
    second pass reads a few kilobytes instead of a megabyte. Enough blocks stay
    resident to keep many loads in flight.
"""

from zoo.device import cuda, float32, int32, sm_count
from zoo.device.jit import jit
from zoo.kernels.reduce import BLOCK  # threads per block, a power of two >= 64
from zoo.kernels.reduce.passes import until_one

BLOCKS_PER_SM = 8  # 8 x 256 threads = a full SM of 2048


def _build(T):
    @jit
    def reduce_grid_stride(x, partials):
        sdata = cuda.shared.array(BLOCK, T)
        t = cuda.threadIdx.x
        n = x.size
        step = cuda.gridDim.x * (2 * BLOCK)  # elements the whole grid covers per iteration
        v = T(0)
        for i in range(cuda.blockIdx.x * (2 * BLOCK) + t, n, step):  # grid-stride walk: adds i, i + BLOCK
            v += x[i]
            if i + BLOCK < n:
                v += x[i + BLOCK]
        sdata[t] = v
        cuda.syncthreads()  # the per-thread sums are in shared memory
        # Step 6's tree: each `if BLOCK >= ...` is decided at compile time.
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
            for k in range(5):  # offsets 16, 8, 4, 2, 1, unrolled
                cuda.syncwarp()  # every lane read its operands before any lane overwrites
                sdata[t] = v
                cuda.syncwarp()  # every lane's sum is written before lanes read t + (16 >> k)
                v += sdata[t + (16 >> k)]
            if t == 0:
                partials[cuda.blockIdx.x] = v

    return reduce_grid_stride


reduce_float32 = _build(float32)
reduce_int32 = _build(int32)


def launch(x, out):
    kernel = reduce_int32 if x.dtype == "int32" else reduce_float32
    grid = BLOCKS_PER_SM * sm_count()
    until_one(kernel, x, out, BLOCK, 2 * BLOCK, grid_for=lambda n: grid)
