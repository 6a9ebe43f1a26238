"""Any shape through a kernel that only handles whole tiles: pad, run, crop.

The fast SGEMM variants v06 to v10 compute whole BM x BN output tiles over whole
BK slices of K with 16-byte loads, and have no bounds checks in their inner
loops. ``run_tiled`` gives them any M, N, K: when a dimension is not a multiple
of its tile, A, B (and C when beta != 0) are copied into zero-padded buffers
(zeros add nothing to the dot products), the kernel runs on the padded problem
and the valid M x N corner is copied out. The copies are O(M K + K N + M N)
against the kernel's O(M N K), and they run inside the variant's launch, so the
timings include them.
"""

from zoo.device import cuda, float32
from zoo.device.jit import jit
from zoo.device.memory import flat_view

COPY_BLOCK = (32, 8)


@jit
def pad_kernel(src, dst):
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        inside = row < src.shape[0] and col < src.shape[1]
        dst[row, col] = src[row, col] if inside else float32(0.0)


@jit
def crop_kernel(src, dst):
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


def _grid(shape):
    return ((shape[1] + COPY_BLOCK[0] - 1) // COPY_BLOCK[0], (shape[0] + COPY_BLOCK[1] - 1) // COPY_BLOCK[1])


def padded(x, rows, cols):
    if x.shape == (rows, cols):
        return x
    out = cuda.device_array((rows, cols), dtype=x.dtype)
    pad_kernel[_grid(out.shape), COPY_BLOCK](x, out)
    return out


def round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple


def run_tiled(launch_tiles, A, B, C, out, alpha, beta, tile_m, tile_n, tile_k):
    """Call ``launch_tiles(A, B, C, out, M, N, K, alpha, beta)`` on a whole-tile problem.

    The arrays it receives are flat (1-D views of C-contiguous matrices), which is
    what 16-byte loads index into; M, N, K are multiples of the tiles.
    """
    m, k = A.shape
    n = B.shape[1]
    mp, np_, kp = round_up(m, tile_m), round_up(n, tile_n), round_up(k, tile_k)
    source = C if (beta != 0 and C is not None) else out  # not read when beta == 0
    if (mp, np_, kp) == (m, n, k):
        launch_tiles(
            flat_view(A),
            flat_view(B),
            flat_view(source),
            flat_view(out),
            m,
            n,
            k,
            float32(alpha),
            float32(beta),
        )
        return
    a, b = padded(A, mp, kp), padded(B, kp, np_)
    c = padded(source, mp, np_) if beta != 0 else None
    result = cuda.device_array((mp, np_), dtype=out.dtype)
    c = result if c is None else c
    launch_tiles(
        flat_view(a),
        flat_view(b),
        flat_view(c),
        flat_view(result),
        mp,
        np_,
        kp,
        float32(alpha),
        float32(beta),
    )
    crop_kernel[_grid(out.shape), COPY_BLOCK](result, out)
