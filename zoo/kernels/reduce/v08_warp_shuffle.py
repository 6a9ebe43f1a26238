"""Warp shuffles: the block tree in registers, one shared slot per warp.

Changes:
    Step 7's grid-stride sum per thread stays (now with uint32 indices); the
    block then reduces with five ``shfl_down_sync`` rounds inside each warp,
    lane 0 of each warp writes one shared slot, and the first warp reduces the
    slots with the same five shuffles. One barrier per block instead of
    log2(BLOCK). The partials still go to a second launch.

Why it is faster:
    A shuffle passes a register between lanes in one instruction, without the
    store, barrier and load of a shared-memory round; shared memory shrinks to
    one word per warp. numba's signed 64-bit index arithmetic is replaced by
    32-bit in the loop (n < 2^32 is checked by validate).
"""

from zoo.device import cuda, float32, int32, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK
from zoo.errors import OutOfRange
from zoo.kernels.reduce import BLOCK  # threads per block, a multiple of 32
from zoo.kernels.reduce.passes import until_one

WARPS = BLOCK // 32
BLOCKS_PER_SM = 8


def _build(T):
    @jit
    def reduce_shuffle(x, partials):
        warp_sums = cuda.shared.array(WARPS, T)
        t = cuda.threadIdx.x
        lane = t & 31  # lane within the warp; t >> 5 is the warp
        n = uint32(x.size)
        step = uint32(cuda.gridDim.x * (2 * BLOCK))  # elements the whole grid covers per iteration
        i = uint32(cuda.blockIdx.x * (2 * BLOCK) + t)  # this thread adds i and i + BLOCK, then moves on by step
        v = T(0)
        while i < n:  # grid-stride walk, 32-bit indices
            v = T(v + x[i])
            if i + uint32(BLOCK) < n:
                v = T(v + x[i + uint32(BLOCK)])
            i += step
        for k in range(5):  # offsets 16, 8, 4, 2, 1: lane 0 ends with the warp's sum
            v = T(v + cuda.shfl_down_sync(FULL_MASK, v, 16 >> k))  # T(): int32 + int32 is int64 in numba
        if lane == 0:
            warp_sums[t >> 5] = v
        cuda.syncthreads()  # every warp's sum is in shared memory
        if t < 32:  # the first warp sums the WARPS warp sums
            v = warp_sums[t] if t < WARPS else T(0)
            for k in range(5):  # the same five rounds: thread 0 ends with the block's sum
                v = T(v + cuda.shfl_down_sync(FULL_MASK, v, 16 >> k))  # T(): int32 + int32 is int64 in numba
            if t == 0:
                partials[cuda.blockIdx.x] = v

    return reduce_shuffle


reduce_float32 = _build(float32)
reduce_int32 = _build(int32)


def validate(x):
    if x.size >= 1 << 31:
        raise OutOfRange(f"{__name__.rsplit('.', 1)[-1]} uses 32-bit indices: fewer than 2^31 elements, got {x.size}")


def launch(x, out):
    kernel = reduce_int32 if x.dtype == "int32" else reduce_float32
    grid = BLOCKS_PER_SM * sm_count()
    until_one(kernel, x, out, BLOCK, 2 * BLOCK, grid_for=lambda n: grid)
