"""2-D correlation of a float32 image with a small filter, zero boundary: halos, constant memory, register reuse.

For an image x of H x W and a filter w of (2ry + 1) x (2rx + 1) (radius ry down,
rx across; the headline filter is 5 x 5, ry = rx = 2) each output pixel is

    out[y, c] = sum over i = 0..2ry, j = 0..2rx of  w[i, j] * x[y + i - ry, c + j - rx]

with x = 0 outside the image (a zero boundary). This is *correlation*, what
image filters and CNN layers compute and what ``scipy.ndimage.correlate`` with
``mode='constant', cval=0`` returns; *convolution* is the same sum with the
filter flipped (``w[::-1, ::-1]``), so a convolution is this family called on a
flipped filter. A 1-D correlation is a 1 x n image with a 1 x (2r + 1) filter.

Every output reads (2ry + 1)(2rx + 1) inputs and each input is read by as many
outputs: 25 reads per pixel for a 5 x 5 filter, of which only one is new. The
steps turn those reads from DRAM and L1 traffic into shared-memory and then
register traffic, until the kernel moves what a copy moves: the image read once
and the output written once, 8 bytes a pixel (``bytes_moved``; the filter's
bytes are left out). FLOPs: 2 (2ry + 1)(2rx + 1) a pixel, 50 for 5 x 5, the
direct sum; the separable steps do 2 (2ry + 1) + 2 (2rx + 1), 20 for 5 x 5, plus
the row passes of their tiles' halo rows, and their GFLOP/s figure counts the
direct sum's FLOPs (the work the result is worth).

Inputs ``image`` (H, W) and ``weights`` (2ry + 1, 2rx + 1), both float32 and C-
contiguous; the filter's sides must be odd (its center sits on the output pixel)
and its radii at most ``MAX_RADIUS`` (the steps unroll over the taps and size
their tiles for the radius, building one kernel per filter shape). Sizes are n
(n x n) or H x W; the filter of ``make_inputs`` is always 5 x 5.

The filter is separable in every generated input: the outer product of two
random vectors, w = outer(u, v), so w[i, j] = u[i] v[j]. Steps 1-4 take any
filter and do not rely on that; the separable steps (two 1-D passes, 2 (2r + 1) taps a
pixel instead of (2r + 1)^2) need it and refuse any other filter with
``OutOfRange`` (``check_separable``): a valid input those steps cannot take, as a
size beyond a step's limits is. Making every input separable keeps one function
for all steps, so each step's time is comparable with the others' on the same
data. The factors are recovered from w itself (``separable_factors``): the row
and the column through w's largest entry.

Baseline: ``cupyx.scipy.ndimage.correlate(image, weights, mode='constant')``,
one thread per output with the taps in a loop; ``cupyx_correlate1d_twice`` is
the separable route a CuPy user would take, ``correlate1d`` along the rows and
then down the columns, which writes and reads back a whole intermediate image.
``copy_ceiling`` times a device-to-device copy of the image, the bytes the best
step must move.

A 3-D 7-point stencil, or Jacobi iterations with two buffers, would teach the
same halo and reuse lessons on another shape of data (inputs of another rank, a
family of their own); it is left out here.
"""

import numpy as np

from zoo.errors import OutOfRange

ORDER = 115  # after transpose (110): the shared-memory tile comes back, now with a halo around it
INPUTS = ("image", "weights")
DTYPE = np.float32
NDIM = 2
SIZE_DIMS = (1, 2)  # n (square) or rows x cols
# float32 sums of 25 products against float64: about 1e-7 relative; one tap missing or one boundary row wrong is
# an error of order 0.2 or (at the largest size) 1e-2, far above.
TOLERANCE = 1e-5
RADIUS = 2  # the generated filter: 5 x 5
MAX_RADIUS = 8  # 17 x 17 taps at most: the tiles and the unrolled loops are sized for the radius
LIMIT = 2**31  # pixels: the uint32 indices of the steps stay below 2^32 with any radius added
SEPARABLE_TOLERANCE = 1e-5  # largest |w - outer(u, v)| / max |w| that counts as separable (float32 rounding: ~1e-7)
# Simulator sizes: one pixel (every tap outside); a single row (a 1-D correlation) and a single column; tiles cut on
# both edges; and a shape whose rows are a multiple of 4 floats (128-bit loads) with partial tiles.
TEST_SIZES = ((1, 1), (1, 70), (70, 1), (31, 33), (45, 68))
# GPU sizes add the shapes, the headline, 1 x (2^24 + 3), and a column of 2^22 + 7 rows: more tile rows than a
# grid's y dimension holds (65535), so every step's blocks stride down.
GPU_TEST_SIZES = (
    (1, 1),
    (1, 1000),
    (1000, 1),
    (31, 33),
    (100, 77),
    (1000, 777),
    (1024, 1024),
    (4099, 4100),
    (10000, 7777),
    (16384, 16384),
    (1, (1 << 24) + 3),
    ((1 << 22) + 7, 3),
)
BENCH_SIZES = ((16384, 16384), (10000, 7777), (4096, 4096))
HEADLINE_SIZE = (16384, 16384)
BASELINE = "cupyx.scipy.ndimage.correlate(image, weights, mode='constant')"


def shape(size):
    """(rows, cols) of a size: n means n x n."""
    if isinstance(size, (tuple, list)):
        rows, cols = size
        return int(rows), int(cols)
    return int(size), int(size)


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    image = rng.standard_normal(shape(size), dtype=np.float32)
    column_factor = rng.standard_normal(2 * RADIUS + 1)
    row_factor = rng.standard_normal(2 * RADIUS + 1)
    weights = np.outer(column_factor, row_factor).astype(np.float32)  # separable: see the module docstring
    return image, weights


def radii(weights):
    """(ry, rx) of a filter of (2ry + 1) x (2rx + 1); ValueError for an even side or a radius over MAX_RADIUS."""
    taps_y, taps_x = weights.shape
    if taps_y % 2 == 0 or taps_x % 2 == 0:
        raise ValueError(
            f"weights must have odd sides (2r + 1: the center tap sits on the output pixel), got shape {weights.shape}"
        )
    radius_y, radius_x = taps_y // 2, taps_x // 2
    if max(radius_y, radius_x) > MAX_RADIUS:
        raise ValueError(
            f"weights of shape {weights.shape} have radius {max(radius_y, radius_x)}; the steps take at most "
            f"{MAX_RADIUS} ({2 * MAX_RADIUS + 1} taps a side)"
        )
    return radius_y, radius_x


def _correlate(image, weights, dtype):
    """Sum of the image's shifted copies, each times its tap, in ``dtype``: the reference and the CPU row."""
    radius_y, radius_x = radii(weights)
    rows, cols = image.shape
    padded = np.zeros((rows + 2 * radius_y, cols + 2 * radius_x), dtype)
    padded[radius_y : radius_y + rows, radius_x : radius_x + cols] = image  # the zero boundary
    out = np.zeros((rows, cols), dtype)
    term = np.empty_like(out)
    for i in range(2 * radius_y + 1):
        for j in range(2 * radius_x + 1):
            np.multiply(padded[i : i + rows, j : j + cols], dtype(weights[i, j]), out=term)
            out += term
    return out


def reference(image, weights):
    return _correlate(image, weights.astype(np.float64), np.float64)


def output_for(image, weights):
    radii(weights)
    return image.shape, np.float32


def flops(size):
    rows, cols = shape(size)
    return 2 * (2 * RADIUS + 1) ** 2 * rows * cols  # the direct sum: a multiply and an add per tap


def bytes_moved(size):
    rows, cols = shape(size)
    return 2 * 4 * rows * cols  # read the image once, write the output once


def check_index_range(image):
    """OutOfRange for an image too large for the steps' uint32 indices (the validate of the steps that use them)."""
    if image.size >= LIMIT:
        raise OutOfRange(f"stencil indexes with uint32: the image must have fewer than 2^31 pixels, got {image.size}")


# -- separable filters ---------------------------------------------------------------------------------------------
def separable_factors(weights):
    """(u, v), float64, with outer(u, v) equal to w when w has rank 1: the column and the row through w's largest
    entry w[p, q], u = w[:, q] and v = w[p, :] / w[p, q]. A zero filter gives zero factors. The separable steps
    compute the same factors on the GPU."""
    w = np.asarray(weights, dtype=np.float64)
    p, q = np.unravel_index(np.argmax(np.abs(w)), w.shape)
    if w[p, q] == 0:
        return np.zeros(w.shape[0]), np.zeros(w.shape[1])
    return w[:, q].copy(), w[p, :] / w[p, q]


def check_separable(weights):
    """OutOfRange unless the filter is the outer product of two vectors (to float32 rounding).

    A device array is copied to the host for the check: 4 (2r + 1)^2 bytes and a wait for the GPU, paid by a
    call with validation, not by ``launch``, which the benchmarks time. Inside a CUDA graph capture, where a copy
    to the host is not allowed, the check is skipped: the eager call before the capture made it."""
    from zoo.runtime import launch as lean_launch

    if lean_launch.capture_stream is not None:
        return
    if isinstance(weights, np.ndarray):
        w = weights
    elif hasattr(weights, "copy_to_host"):  # a numba device array
        w = weights.copy_to_host()
    else:  # a CuPy array
        w = weights.get()
    u, v = separable_factors(w)
    residual = np.abs(np.asarray(w, np.float64) - np.outer(u, v)).max()
    scale = np.abs(w).max()
    if residual > SEPARABLE_TOLERANCE * scale:
        raise OutOfRange(
            f"this step runs two 1-D passes: the filter must be separable (an outer product of two vectors); "
            f"the best such product misses it by {residual / scale:.2g} of its largest tap"
        )


# -- baselines -----------------------------------------------------------------------------------------------------
def baseline(image, weights, out):
    from cupyx.scipy import ndimage

    ndimage.correlate(image, weights, output=out, mode="constant", cval=0.0)


def cupyx_correlate1d_twice(image, weights, out):
    """The separable filter as a CuPy user runs it: the factors (found on the GPU, as the separable steps find
    them), then ``correlate1d`` along the rows into a temporary image and down its columns into out."""
    import cupy
    from cupyx.scipy import ndimage

    taps_y, taps_x = weights.shape
    flat = cupy.argmax(cupy.abs(weights)).astype(cupy.int64)  # stays on the GPU: no wait for the host
    p, q = flat // taps_x, flat % taps_x
    pivot = weights.ravel()[flat]
    safe = cupy.where(pivot == 0, cupy.float32(1), pivot)
    column_factor = cupy.take(weights.ravel(), cupy.arange(taps_y) * taps_x + q)
    row_factor = cupy.where(
        pivot == 0, cupy.float32(0), cupy.take(weights.ravel(), p * taps_x + cupy.arange(taps_x)) / safe
    )
    across = ndimage.correlate1d(image, row_factor, axis=1, mode="constant", cval=0.0)
    ndimage.correlate1d(across, column_factor, axis=0, output=out, mode="constant", cval=0.0)


EXTRA_BASELINES = {"cupyx_correlate1d_twice": cupyx_correlate1d_twice}


def copy_ceiling(image, weights, out):
    """A device-to-device copy of the image into out: the bandwidth a one-pass stencil aims at.

    Its result is the image itself, and it is checked as such (ROW_REFERENCE).
    """
    from zoo.bench import ceilings  # host tooling: loaded when the row runs, not with the spec

    ceilings.device_copy(image, out)


CEILINGS = {"copy_ceiling": copy_ceiling}  # a copy of the same bytes
ROW_REFERENCE = {"copy_ceiling": lambda image, weights: image}  # what the copy must hold: the image
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(image, weights):
    """NumPy, float32 (one core): the zero-padded image's shifted views, each times its tap, summed into out."""
    return _correlate(image, weights, np.float32)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
