"""Any shape through a kernel that only takes whole tiles: A and W copied into zero-padded buffers, the result cropped.

The step multiplies whole BM x BN x BK block tiles, and TMA needs every row of a matrix to start 16 bytes after the
one before (K a multiple of 16 for e4m3). ``padded`` copies a matrix whose dimensions are not multiples of its tile
into a zero-padded uint8 buffer (the pattern 0 is e4m3's +0, which adds nothing to a dot product); the kernel
computes the padded product into a float32 buffer and ``crop_kernel`` copies the valid M x N corner out. The copies
are O(M K + N K + M N) against the kernel's O(M N K) and run inside the step's call, so its timings include them;
at the benchmark sizes nothing is copied.
"""

from zoo.device import cuda, uint8
from zoo.device.jit import jit

COPY_BLOCK = (32, 8)


@jit
def pad_kernel(src, dst):
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        inside = row < src.shape[0] and col < src.shape[1]
        dst[row, col] = src[row, col] if inside else uint8(0)


@jit
def crop_kernel(src, dst):
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[row, col]


def grid_of(shape):
    """The grid of COPY_BLOCK blocks that covers a matrix of this shape."""
    return ((shape[1] + COPY_BLOCK[0] - 1) // COPY_BLOCK[0], (shape[0] + COPY_BLOCK[1] - 1) // COPY_BLOCK[1])


def round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple


def padded(x, rows, cols):
    """x itself when it is rows x cols, else a zero-padded copy of that shape on the device."""
    if tuple(x.shape) == (rows, cols):
        return x
    out = cuda.device_array((rows, cols), dtype=x.dtype)
    pad_kernel[grid_of(out.shape), COPY_BLOCK](x, out)
    return out
