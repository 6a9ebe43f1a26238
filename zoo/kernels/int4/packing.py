"""Pack float32 to int4 and unpack it back, on the GPU: the conversions around the family's op.

    packed = pack(x, scale)          # ceil(n/2) uint8: clamp(rint(x / scale), -8, 7), two a byte
    y = unpack(packed, n, scale)     # n float32: q * scale

The bytes and values are exactly the NumPy references' in the spec
(``pack_reference``, ``unpack_reference``): x / scale is a correctly rounded
float32 division on both sides, rint rounds half to even, NaN packs as 0, and
q * scale is one float32 multiply. NumPy arrays in give NumPy arrays out;
CuPy or numba device arrays in give the same kind out. Bad input (wrong dtype,
shape, a scale that is not a positive finite number, an n that does not match
the bytes) is a TypeError or ValueError before anything is launched.

One thread per byte: a thread quantizes or unpacks the two elements of its
byte, so no two threads write the same byte. These conversions are not
optimized (the family's steps are about the op on packed data); each moves
4 n + n / 2 bytes.
"""

import math
import numbers

import numpy as np

from zoo.device import cuda, float32, int32, uint8, uint32
from zoo.device.jit import jit
from zoo.runtime import arrays

THREADS_PER_BLOCK = 256


@jit(device=True)
def quantize(v, scale):
    q = v / scale  # float32 / float32: IEEE division, the same float32 NumPy computes
    if q != q:
        return int32(0)  # NaN packs as 0
    q = min(max(q, float32(-8)), float32(7))  # clamp first: rounding an out-of-range value overflows
    return int32(round(q))  # round() of a float is llrint on the GPU: half to even, as np.rint


@jit
def pack_kernel(x, scale, out, n):
    i = cuda.grid(1)
    if i < out.size:
        lo = quantize(x[2 * i], scale)
        hi = int32(0)  # odd n: the last byte's high nibble is 0
        if 2 * i + 1 < n:
            hi = quantize(x[2 * i + 1], scale)
        # & 15 keeps the low 4 bits of the two's complement code: -3 -> 0b1101
        out[i] = uint8((uint32(lo) & uint32(15)) | ((uint32(hi) & uint32(15)) << uint32(4)))


@jit
def unpack_kernel(packed, scale, out, n):
    i = cuda.grid(1)
    if i < packed.size:
        w = uint32(packed[i])
        # sign extension: the nibble's bit 3 goes to bit 31, an arithmetic shift by 28 brings it back
        lo = int32(w << uint32(28)) >> 28
        hi = int32(w << uint32(24)) >> 28
        out[2 * i] = float32(lo) * scale
        if 2 * i + 1 < n:
            out[2 * i + 1] = float32(hi) * scale


def _array(a, name, dtype):
    kind = arrays.library_of(a)  # TypeError for a non-array
    if np.dtype(a.dtype) != dtype:
        raise TypeError(f"{name} must be {np.dtype(dtype)}, got {np.dtype(a.dtype)}")
    if a.ndim != 1:
        raise ValueError(f"{name} must have 1 dimension, got shape {tuple(a.shape)}")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not arrays.is_c_contiguous(a):
        raise ValueError(f"{name} is not C-contiguous: pass a contiguous copy")
    return kind


def _scale(scale):
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a real number, got {type(scale).__name__}")
    s = np.float32(scale) if math.isfinite(scale) else np.float32(np.nan)
    if not (np.isfinite(s) and s > 0):  # NaN, inf, <= 0, or a float64 that is 0 or inf as float32
        raise ValueError(f"scale must be a positive finite float32, got {scale!r}")
    return s


def _output(out, kind, shape, dtype):
    """(device view, object returned) for ``out``, checked, or a new array of the inputs' kind."""
    if out is None:
        return arrays.device_empty(shape, dtype, kind)
    if arrays.library_of(out) != kind:
        raise TypeError(f"out is a {arrays.library_of(out)} array, the input is {kind}")
    if tuple(out.shape) != shape or np.dtype(out.dtype) != dtype:
        raise ValueError(
            f"out must be {np.dtype(dtype)} of shape {shape}, got {np.dtype(out.dtype)} of shape {tuple(out.shape)}"
        )
    if not arrays.is_c_contiguous(out):
        raise ValueError("out must be C-contiguous")
    if kind == arrays.NUMPY and not out.flags.writeable:
        raise ValueError("out is read-only")
    return arrays.to_device(out), out


def _finish(kind, device_out, result, out):
    if kind != arrays.NUMPY:
        return result
    host = device_out.copy_to_host()
    if out is not None:
        out[...] = host
        return out
    return host


def _blocks(threads):
    return (threads + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK


def pack(x, scale, out=None):
    """ceil(n/2) uint8 holding clamp(rint(x / scale), -8, 7) of float32 x, element 2i in the low nibble."""
    kind = _array(x, "x", np.float32)
    s = _scale(scale)
    shape = ((x.size + 1) // 2,)
    device_out, result = _output(out, kind, shape, np.uint8)
    pack_kernel[_blocks(shape[0]), THREADS_PER_BLOCK](arrays.to_device(x), s, device_out, x.size)
    return _finish(kind, device_out, result, out)


def unpack(packed, n, scale=1.0, out=None):
    """n float32 values q * scale of packed int4 codes (scale 1: the codes themselves)."""
    kind = _array(packed, "packed", np.uint8)
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n must be an integer, got {type(n).__name__}")
    if n < 1 or (n + 1) // 2 != packed.size:
        raise ValueError(f"{packed.size} bytes hold {2 * packed.size - 1} or {2 * packed.size} elements, not {n}")
    s = _scale(scale)
    device_out, result = _output(out, kind, (int(n),), np.float32)
    unpack_kernel[_blocks(packed.size), THREADS_PER_BLOCK](arrays.to_device(packed), s, device_out, int(n))
    return _finish(kind, device_out, result, out)
