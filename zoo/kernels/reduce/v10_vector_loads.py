"""128-bit loads: step 9's single pass reading four elements per load instruction.

Changes:
    The grid-stride walk goes over groups of four elements, each read with one
    ``ld.global.v4`` (``zoo.device.memory.load_float4`` / ``load_int4``), four such
    loads per thread per iteration: 16 elements, 64 bytes in flight per thread.
    The last n % 4 elements are added by the grid's first threads after the
    walk. The block sum and the last-block-done ending are step 9's, unchanged.
    A view that does not start on a 16-byte boundary gets the same kernel built
    with four 4-byte loads in place of each 128-bit one.

Why it is faster:
    Bandwidth is latency times bytes in flight (Little's law). Step 9 keeps
    four 4-byte loads in flight per thread and spends a load instruction and
    an index computation on every element; here each thread has 64 bytes in
    flight for the same instruction count, so the memory system, not
    instruction issue, sets the pace.
"""

import numpy as np

from zoo.device import cuda, float32, int32, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, load_int4
from zoo.device.warp import FULL_MASK
from zoo.errors import OutOfRange
from zoo.kernels.reduce import BLOCK  # threads per block, a multiple of 32
from zoo.runtime.buffers import scratch

WARPS = BLOCK // 32
BLOCKS_PER_SM = 8
# Little's law: at 4.8 TB/s and about 0.6 us of DRAM latency the H200 needs some 3 MB in flight, 22 KB
# per SM. Step 9's four 4-byte loads per thread keep 32 KB per SM (8 blocks of 256) at one load
# instruction per element; four 16-byte loads keep 128 KB for the same instruction count.
VECTOR_LOADS = 4  # independent 16-byte loads per thread per iteration


def make_block_sum(T):
    @cuda.jit(device=True)
    def block_sum(v, warp_sums):
        """Sum of v over the block, valid in thread 0 (every thread must call)."""
        t = cuda.threadIdx.x
        for k in range(5):  # offsets 16, 8, 4, 2, 1: lane 0 ends with the warp's sum
            v = T(v + cuda.shfl_down_sync(FULL_MASK, v, 16 >> k))  # T(): int32 + int32 is int64 in numba
        if (t & 31) == 0:  # lane 0 of warp t >> 5
            warp_sums[t >> 5] = v
        cuda.syncthreads()  # every warp's sum is in shared memory
        if t < 32:  # the first warp sums the WARPS warp sums
            v = warp_sums[t] if t < WARPS else T(0)
            for k in range(5):  # the same five rounds: thread 0 ends with the block's sum
                v = T(v + cuda.shfl_down_sync(FULL_MASK, v, 16 >> k))  # T(): int32 + int32 is int64 in numba
        return v

    return block_sum


def make_finish(T):
    """The single-pass ending: this block's sum v to its partial; the last block to finish sums them."""
    block_sum = make_block_sum(T)

    @cuda.jit(device=True)
    def finish(v, partials, counter, out):
        warp_sums = cuda.shared.array(WARPS, T)
        is_last = cuda.shared.array(1, int32)
        t = cuda.threadIdx.x
        nblocks = uint32(cuda.gridDim.x)
        v = block_sum(v, warp_sums)
        if t == 0:
            partials[cuda.blockIdx.x] = v
            # The fence makes this block's partial visible device-wide before its
            # ticket is: whoever draws the last ticket then reads every partial.
            cuda.threadfence()
            ticket = cuda.atomic.add(counter, 0, uint32(1))
            is_last[0] = 1 if ticket == nblocks - uint32(1) else 0
        cuda.syncthreads()  # is_last is known to the whole block
        if is_last[0] == 1:
            cuda.threadfence()  # order the reads of the partials after the ticket
            w = T(0)
            for p in range(t, nblocks, BLOCK):
                w = T(w + partials[p])
            cuda.syncthreads()  # warp_sums free again before block_sum reuses it
            w = block_sum(w, warp_sums)
            if t == 0:
                out[0] = w
                counter[0] = 0  # reset for the next call: every block has drawn its ticket

    return finish


@cuda.jit(device=True)
def load4_scalar(x, i):
    """x[i], ..., x[i + 3] with four 4-byte loads: any alignment (the kernel for unaligned views)."""
    return x[i], x[i + 1], x[i + 2], x[i + 3]


def _build(T, load4):
    finish = make_finish(T)

    @jit
    def reduce_vector_loads(x, partials, counter, out):
        n = uint32(x.size)
        n4 = n // uint32(4)  # whole groups of four; the rest is the tail
        stride = uint32(cuda.gridDim.x) * uint32(BLOCK)
        g = uint32(cuda.grid(1))  # this thread's index in the grid
        group = g  # the group of four this thread reads first
        v = T(0)
        while group < n4:  # grid-stride over groups: VECTOR_LOADS loads issued before the adds
            for k in range(VECTOR_LOADS):
                j = group + uint32(k) * stride
                if j < n4:
                    a, b, c, d = load4(x, j * uint32(4))  # elements 4j .. 4j + 3: 16-byte aligned where x is
                    v = T(v + T(T(a + b) + T(c + d)))  # T(): int32 + int32 is int64 in numba
            group += uint32(VECTOR_LOADS) * stride
        tail = n4 * uint32(4) + g  # the n % 4 leftovers, one thread each
        if tail < n:
            v = T(v + x[tail])
        finish(v, partials, counter, out)

    return reduce_vector_loads


reduce_float32 = _build(float32, load_float4)
reduce_int32 = _build(int32, load_int4)
unaligned_float32 = _build(float32, load4_scalar)
unaligned_int32 = _build(int32, load4_scalar)


def validate(x):
    if x.size >= 1 << 31:
        raise OutOfRange(f"{__name__.rsplit('.', 1)[-1]} uses 32-bit indices: fewer than 2^31 elements, got {x.size}")


def launch(x, out):
    if aligned(x):
        kernel = reduce_int32 if x.dtype == "int32" else reduce_float32
    else:  # a 16-byte load here would straddle a boundary
        kernel = unaligned_int32 if x.dtype == "int32" else unaligned_float32
    per_block = BLOCK * 4 * VECTOR_LOADS
    grid = max(1, min(BLOCKS_PER_SM * sm_count(), (x.size + per_block - 1) // per_block))
    partials = scratch("vector_loads_partials", grid, x.dtype)
    counter = scratch("vector_loads_counter", 1, np.uint32, zero=True)
    kernel[grid, BLOCK](x, partials, counter, out)
