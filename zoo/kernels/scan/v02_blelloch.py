"""Blelloch work-efficient scan in one block: up-sweep, down-sweep, padded against bank conflicts.

Changes:
    A balanced-tree scan (Blelloch 1990, as in GPU Gems 3 ch. 39) replaces
    Hillis-Steele. Each thread holds two elements (n <= 2048, padded with zeros
    to the next power of two m). The up-sweep builds partial sums up a tree in
    place; the root is cleared; the down-sweep pushes prefixes back down,
    giving the exclusive scan, and each thread adds its own inputs to make it
    inclusive. Shared indices go through ``padded(i) = i + (i >> 5)``: one
    spare word every 32.

Why it is faster:
    About 2 m additions instead of m log2(m), and two elements per thread.
    Without padding, level k (offset 2^k) has a warp touch indices
    2^k (2t + 1) - 1, stride 2^(k+1): with 32 four-byte banks (bank = index %
    32) that is a 2^(k+1)-way conflict, and from k = 4 on every active thread
    of the warp is in one bank (at k = 5: 31, 95, 159, ... all in bank 31):
    the access is serialised. With the padding,
    index i lives in bank (i + i // 32) % 32: levels 0 to 4 are conflict-free
    and the deeper ones, where at most 32 threads are active, are at most 2-way
    (at k = 5: banks 31, 1, 3, 5, ...).
"""

from zoo.device import cuda, float32, int32
from zoo.device.jit import jit
from zoo.errors import OutOfRange

CAPACITY = 2048  # 1024 threads, two elements each
PADDED = CAPACITY + CAPACITY // 32  # one spare word per 32


@cuda.jit(device=True)
def padded(i):
    return i + (i >> 5)  # skip a bank every 32 words (see docstring)


def _build(T):
    @jit
    def blelloch(x, out, m):
        temp = cuda.shared.array(PADDED, T)
        t = cuda.threadIdx.x
        n = x.size
        half = m >> 1
        ai = t
        bi = t + half
        a = x[ai] if ai < n else T(0)  # zeros pad up to m
        b = x[bi] if bi < n else T(0)
        temp[padded(ai)] = a
        temp[padded(bi)] = b
        offset = 1
        d = half
        while d > 0:  # up-sweep: node j gets the sum of its subtree
            cuda.syncthreads()  # the level below is complete
            if t < d:
                i = offset * (2 * t + 1) - 1
                j = offset * (2 * t + 2) - 1
                temp[padded(j)] += temp[padded(i)]
            offset <<= 1
            d >>= 1
        if t == 0:
            temp[padded(m - 1)] = T(0)  # the root becomes the identity
        d = 1
        while d < m:  # down-sweep: left child gets the parent, right gets parent + left
            offset >>= 1
            cuda.syncthreads()  # the level above is complete
            if t < d:
                i = offset * (2 * t + 1) - 1
                j = offset * (2 * t + 2) - 1
                left = temp[padded(i)]
                temp[padded(i)] = temp[padded(j)]
                temp[padded(j)] += left
            d <<= 1
        cuda.syncthreads()  # the exclusive scan is complete
        if ai < n:
            out[ai] = temp[padded(ai)] + a  # exclusive + own element = inclusive
        if bi < n:
            out[bi] = temp[padded(bi)] + b

    return blelloch


scan_float32 = _build(float32)
scan_int32 = _build(int32)


def validate(x):
    if x.size > CAPACITY:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} scans in one block of two elements per thread: "
            f"at most {CAPACITY} elements, got {x.size}"
        )


def launch(x, out):
    m = 2
    while m < x.size:
        m *= 2  # the tree needs a power of two
    kernel = scan_int32 if x.dtype == "int32" else scan_float32
    kernel[1, m // 2](x, out, m)
