"""Any shape through kernels that only take whole tiles: pad A and B with zeros, run, crop.

The tensor-core steps multiply whole 16 x 8 x 16 ``mma`` tiles (v01) or whole
block tiles (v02 on) and have no bounds checks inside. ``run_tiled`` gives them
any M, N, K: a matrix whose dimensions are not multiples of the tile is copied
into a zero-padded float16 buffer (zeros add nothing to a dot product), the
kernel computes the padded product into a float32 buffer and the valid M x N
corner is copied out. The copies are O(M K + K N + M N) against the kernel's
O(M N K) and run inside the step's launch, so its timings include them; at the
benchmark sizes (multiples of 128) nothing is copied. The padded buffers are made
once a shape and kept (``scratch``): a loop of calls at one shape, such as a
model's layers at a small batch, allocates nothing after its first call.
"""

from zoo.device import cuda, float16
from zoo.device.jit import jit
from zoo.device.memory import flat_view
from zoo.errors import OutOfRange
from zoo.runtime.buffers import scratch

LIMIT = 2**32  # elements per matrix that uint32 indices reach

COPY_BLOCK = (32, 8)


@jit
def pad_kernel(src, dst):
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        if row < src.shape[0] and col < src.shape[1]:
            dst[row, col] = src[row, col]
        else:
            dst[row, col] = float16(0.0)


@jit
def crop_kernel(src, dst):
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


def _grid(shape):
    return ((shape[1] + COPY_BLOCK[0] - 1) // COPY_BLOCK[0], (shape[0] + COPY_BLOCK[1] - 1) // COPY_BLOCK[1])


def round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple


def padded(x, rows, cols, role):
    """x copied into the top-left of a zero-padded rows x cols buffer (kept for ``role`` and this shape), or x."""
    if tuple(x.shape) == (rows, cols):
        return x
    out = scratch(f"hgemm padded {role} {rows}x{cols}", rows * cols, x.dtype).reshape(rows, cols)
    pad_kernel[_grid(out.shape), COPY_BLOCK](x, out)  # every element written: the padding zeroed again each call
    return out


def run_tiled(launch_tiles, A, B, out, tile_m, tile_n, tile_k):
    """Call ``launch_tiles(a, b, result, M, N, K)`` on a whole-tile problem.

    ``a``, ``b`` and ``result`` are flat (1-D views of C-contiguous matrices),
    which is what the word-sized loads of ``zoo.device.mma`` index into; M, N, K are
    multiples of the tile.
    """
    m, k = A.shape
    n = B.shape[1]
    mp, np_, kp = round_up(m, tile_m), round_up(n, tile_n), round_up(k, tile_k)
    a, b = padded(A, mp, kp, "A"), padded(B, kp, np_, "B")
    if (mp, np_) == (m, n):
        launch_tiles(flat_view(a), flat_view(b), flat_view(out), mp, np_, kp)
        return
    result = scratch(f"hgemm padded result {mp}x{np_}", mp * np_, out.dtype).reshape(mp, np_)
    launch_tiles(flat_view(a), flat_view(b), flat_view(result), mp, np_, kp)
    crop_kernel[_grid(out.shape), COPY_BLOCK](result, out)


def check_uint32(step, A, B, tile_m, tile_n, tile_k):
    """OutOfRange when a padded matrix has 2^32 elements or more (the kernels index with uint32)."""
    m, k = A.shape
    n = B.shape[1]
    mp, np_, kp = round_up(m, tile_m), round_up(n, tile_n), round_up(k, tile_k)
    if max(mp * kp, kp * np_, mp * np_) >= LIMIT:
        raise OutOfRange(
            f"{step.rsplit('.', 1)[-1]} indexes with uint32: each matrix must hold fewer than "
            "2^32 elements after padding to whole tiles"
        )
