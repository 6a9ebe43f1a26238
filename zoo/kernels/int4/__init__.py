r"""Two signed 4-bit codes per byte: ReLU computed on packed int4 data, against float32 and int8.

Quantization stores a float32 tensor as small integer codes and one float32
scale, x ~ scale * q. Here the codes are signed 4-bit integers, -8..7, and two
share a byte: element 2i in the low nibble (bits 0-3), element 2i+1 in the high
nibble (bits 4-7), each in two's complement. For n odd the last byte's high
nibble is 0. Five elements, n = 5, take three bytes:

    codes q     3    -3     7    -8     1
    nibbles  0011  1101  0111  1000  0001  (0000: padding)
                \   /       \   /       \   /
    bytes      0xD3         0x87         0x01
              hi  lo       hi  lo       hi  lo

A nibble is read back by sign extension: its bit 3 is the sign, so 0b1101 is
-3 (13 - 16). The steps do it with shifts: move the nibble to the top of a
32-bit int, then shift it right arithmetically by 28.

Packing (``pack_reference``; ``packing.pack`` on the GPU gives the same bytes):
q = clamp(rint(x / scale), -8, 7), with x / scale in float32 and rint rounding
half to even (2.5 -> 2, 3.5 -> 4), as ``numpy.rint``; NaN packs as 0 and +-inf
as 7 and -8. ``unpack_reference`` (``packing.unpack``) gives the float32
values q * scale back. The scale is the caller's; ``make_inputs`` uses SCALE.

The family's op is ReLU on a packed tensor, packed in and packed out. For a
positive scale, max(scale * q, 0) = scale * max(q, 0): ReLU commutes with the
scale, so it runs on the codes with no dequantizing and no requantizing, and
the result is exact. ReLU(0) = 0, so the padding nibble stays 0. Every step
maps bytes to bytes and never needs n. The reference unpacks with NumPy
(in a different way from the kernels: (nibble ^ 8) - 8), takes the maximum
and packs again; results are compared exactly.

The steps keep one input and one output, ``packed`` (uint8, ceil(n/2) bytes),
and change how a thread gets at it: one byte (two elements) per thread, 32-bit
words (8 elements), 128-bit loads and stores (32), the same with ReLU done on
all eight nibbles of a word at once by bit masks (SWAR), and several 128-bit
loads in flight per thread.

Rates: a size is n, the number of elements. bytes_moved(n) = 2 ceil(n/2), the
packed bytes read and written, so GB/s is true bandwidth. flops(n) = n, one
ReLU per element (an integer one): the GFLOP/s column is the element rate,
billions of elements per second.

Rows besides the steps: the baseline is a 256-entry lookup table in CuPy,
``cupy.take(TABLE, packed, out=out)``, where TABLE[b] is the output byte for
input byte b: any op on a pair of int4 codes is such a table. CEILINGS, timed
and each checked against what it must hold (ROW_REFERENCE): ``copy_ceiling``, a
device-to-device copy of the packed bytes (the STRONGEST row); ``float32_relu``
and ``int8_relu``, ``cupy.maximum(x, 0, out=y)`` on the same tensor held as 2
ceil(n/2) float32 values (scale * q) or int8 codes. Their GFLOP/s column is
their element rate and compares directly with the steps' (the issue's goal on an
H200: the packed op at 2x or more the float32 op's element rate). Their GB/s
column, like every row's, counts the int4 bytes: the float32 row really moves 8x
that and the int8 row 2x.
"""

import math

import numpy as np

ORDER = 125
INPUTS = ("packed",)
DTYPE = np.uint8
NDIM = 1
TOLERANCE = 0  # integer codes: exact
SCALE = np.float32(0.5)  # make_inputs: x ~ N(0, 1) gives codes with a standard deviation of 2
TEST_SIZES = (1, 31, 33, 1000, 4099)
GPU_TEST_SIZES = (1, 3, 31, 33, 1000, 4099, (1 << 20) + 3, 1 << 24, (1 << 24) + 7)
BENCH_SIZES = (1 << 24, 1 << 28)
HEADLINE_SIZE = 1 << 28
BASELINE = "cupy.take(TABLE, packed, out=out)"


# -- the packing, in NumPy ---------------------------------------------------------------------
def quantize_reference(x, scale):
    """int8 codes of float32 ``x``: clamp(rint(x / scale), -8, 7), half to even; NaN -> 0."""
    q = np.asarray(x, np.float32) / np.float32(scale)  # float32 division, as the kernel's
    q = np.where(np.isnan(q), np.float32(0), q)
    return np.clip(np.rint(q), -8, 7).astype(np.int8)


def pack_codes_reference(codes):
    """uint8 bytes of int8 codes in -8..7: code 2i in the low nibble, 2i+1 in the high one."""
    codes = np.asarray(codes, np.int8)
    if codes.size % 2:
        codes = np.append(codes, np.int8(0))  # odd n: the last high nibble is 0
    nib = codes.astype(np.uint8) & np.uint8(0x0F)  # two's complement, low 4 bits
    return nib[0::2] | (nib[1::2] << np.uint8(4))


def pack_reference(x, scale):
    """The bytes ``packing.pack(x, scale)`` writes: ceil(n/2) uint8."""
    return pack_codes_reference(quantize_reference(x, scale))


def unpack_codes_reference(packed, n=None):
    """int8 codes of packed bytes: n of them (default: two per byte)."""
    packed = np.asarray(packed, np.uint8)
    n = 2 * packed.size if n is None else int(n)
    codes = np.empty(2 * packed.size, np.int8)
    # (nibble ^ 8) - 8 sign-extends a 4-bit value: 0..7 stay, 8..15 become -8..-1
    codes[0::2] = ((packed & 0x0F).astype(np.int16) ^ 8) - 8
    codes[1::2] = ((packed >> 4).astype(np.int16) ^ 8) - 8
    return codes[:n]


def unpack_reference(packed, n, scale):
    """float32 values q * scale of n packed codes (what ``packing.unpack`` returns)."""
    return unpack_codes_reference(packed, n).astype(np.float32) * np.float32(scale)


# -- the family's spec -------------------------------------------------------------------------
def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(int(size), dtype=np.float32)  # 40% of the codes negative, a few clamped
    return (pack_reference(x, SCALE),)


def relu_bytes(packed):
    """ReLU on packed bytes, in NumPy: unpack, max(q, 0), pack. uint8 out."""
    return pack_codes_reference(np.maximum(unpack_codes_reference(packed), np.int8(0)))


def reference(packed):
    return relu_bytes(packed).astype(np.float64)


def output_for(packed):
    return packed.shape, np.uint8


def flops(size):
    return int(size)  # one ReLU per element: the GFLOP/s column is billions of elements per second


def bytes_moved(size):
    return 2 * ((int(size) + 1) // 2)  # read the packed bytes, write as many


_TABLE = {}


def baseline(packed, out):
    import cupy

    if "table" not in _TABLE:  # made on the first, untimed call
        _TABLE["table"] = cupy.asarray(relu_bytes(np.arange(256, dtype=np.uint8)))
    cupy.take(_TABLE["table"], packed, out=out)  # out[i] = TABLE[packed[i]]


def copy_ceiling(packed, out):
    """A device-to-device copy of the packed bytes: the bandwidth the steps aim at (its result is the packed bytes,
    checked as such: ROW_REFERENCE)."""
    from zoo.bench import ceilings  # host tooling: loaded when the row runs, not with the spec

    ceilings.device_copy(packed, out)


# The float32 and int8 rows' operands: (n, dtype) -> [rotated sources, destination, calls so far].
# Not zoo.runtime.buffers' scratch: these are CuPy arrays for CuPy's ufuncs, filled with the tensor's values
# (scratch hands out uninitialized numba arrays), and several copies of them that the row rotates through,
# as the harness rotates input sets, so that a row whose operands would fit in L2 still reads from DRAM.
_WIDER_OPERANDS = {}


def _wider_operands(packed, dtype):
    """(source, destination) of 2 packed.size elements of ``dtype``: the codes (times SCALE for float32).

    Made on the first call (untimed: the harness calls once before timing), from the first input's
    codes; as many copies of the sources as make them exceed twice the L2 cache, one per call in turn.
    """
    import cupy

    from zoo.device import properties

    n, dtype = 2 * packed.size, np.dtype(dtype)
    key = (n, dtype.str)
    if key not in _WIDER_OPERANDS:
        for k in [k for k in _WIDER_OPERANDS if k[0] != n]:
            del _WIDER_OPERANDS[k]  # a new size: free the last one's arrays
        values = unpack_codes_reference(cupy.asnumpy(packed)).astype(dtype)
        if dtype == np.float32:
            values *= SCALE
        l2 = properties().get("l2_bytes") or 0
        count = 1 if values.nbytes >= 2 * l2 else min(16, math.ceil(2 * l2 / values.nbytes))
        _WIDER_OPERANDS[key] = [[cupy.asarray(values) for _ in range(count)], cupy.empty(n, dtype), 0]
    entry = _WIDER_OPERANDS[key]
    sources, dest, calls = entry
    entry[2] = calls + 1
    return sources[calls % len(sources)], dest


def float32_relu(packed, out):
    """ReLU of the same tensor as float32 values, cupy.maximum: 8 bytes an element."""
    import cupy

    x, y = _wider_operands(packed, np.float32)
    return cupy.maximum(x, np.float32(0), out=y)


def int8_relu(packed, out):
    """ReLU of the same tensor as int8 codes, one a byte, cupy.maximum: 2 bytes an element."""
    import cupy

    x, y = _wider_operands(packed, np.int8)
    return cupy.maximum(x, np.int8(0), out=y)


def _wider_relu(packed, dtype):
    """What float32_relu and int8_relu must produce: ReLU of the codes (times SCALE for float32), as _wider_operands
    makes them."""
    values = unpack_codes_reference(packed).astype(dtype)
    if dtype == np.float32:
        values *= SCALE
    return np.maximum(values, dtype(0))


# Timed, and checked: a copy of the packed bytes, and the same op on wider representations
CEILINGS = {"copy_ceiling": copy_ceiling, "float32_relu": float32_relu, "int8_relu": int8_relu}
ROW_REFERENCE = {
    "copy_ceiling": lambda packed: packed,  # what the copy must hold: the packed bytes
    "float32_relu": lambda packed: _wider_relu(packed, np.float32),
    "int8_relu": lambda packed: _wider_relu(packed, np.int8),
}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(packed):
    """The same ReLU on the host: NumPy unpacks the nibbles, clamps and repacks (one core)."""
    return relu_bytes(packed)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
