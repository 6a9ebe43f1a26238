"""Warp-shuffle scan in one block: registers instead of shared trees, any n in chunks.

Changes:
    Each warp scans its 32 values with five ``shfl_up_sync`` rounds (no shared
    memory, no barrier); the last lane of each warp writes the warp total to
    shared memory, warp 0 scans those (at most 32) totals the same way, and each
    warp adds the total of the warps before it. The block walks the array in
    chunks of blockDim.x elements, carrying the running total from chunk to
    chunk, so one block takes any n up to MAX_ELEMENTS.

Why it is faster:
    A shuffle moves a register between lanes in one instruction: the 10 levels
    of a 1024-element tree cost 5 shuffle rounds plus one small scan of 32 warp
    totals and two barriers, instead of 2 log2(n) barriers and shared-memory
    round trips. Still one block on one SM, so it is limited to small n.
"""

from zoo.device import cuda, float32, int32
from zoo.device.jit import jit
from zoo.device.warp import warp_inclusive_scan
from zoo.errors import OutOfRange
from zoo.kernels.scan import WARP_SCAN_THREADS

MAX_THREADS = WARP_SCAN_THREADS  # the block: chunks of this many elements
WARPS = 1024 // 32  # warp_sums: warp 0 writes a total for each of its 32 lanes (the most warps a block has)
MAX_ELEMENTS = 1 << 20  # one block walks the array: beyond this it is far too slow to time


def _build(T):
    @jit
    def warp_shuffle_scan(x, out):
        warp_sums = cuda.shared.array(WARPS, T)
        t = cuda.threadIdx.x
        lane = t & 31  # lane within the warp
        warp = t >> 5  # warp within the block
        nwarps = cuda.blockDim.x >> 5
        n = x.size
        carry = T(0)  # sum of all earlier chunks, the same in every thread
        for base in range(0, n, cuda.blockDim.x):
            i = base + t
            v = x[i] if i < n else T(0)
            v = warp_inclusive_scan(v)
            if lane == 31:
                warp_sums[warp] = v
            cuda.syncthreads()  # warp totals written before warp 0 scans them
            if warp == 0:
                w = warp_sums[lane] if lane < nwarps else T(0)
                warp_sums[lane] = warp_inclusive_scan(w)
            cuda.syncthreads()  # scanned warp totals visible to all warps
            if warp > 0:
                v += warp_sums[warp - 1]
            if i < n:
                out[i] = v + carry
            carry += warp_sums[nwarps - 1]
            cuda.syncthreads()  # all reads of warp_sums done before the next chunk writes it

    return warp_shuffle_scan


scan_float32 = _build(float32)
scan_int32 = _build(int32)


def validate(x):
    if x.size > MAX_ELEMENTS:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} runs one block over the whole array: "
            f"at most {MAX_ELEMENTS} elements, got {x.size}"
        )


def launch(x, out):
    threads = min(MAX_THREADS, (x.size + 31) // 32 * 32)  # whole warps: every lane shuffles
    kernel = scan_int32 if x.dtype == "int32" else scan_float32
    kernel[1, threads](x, out)
