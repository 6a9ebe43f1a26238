r"""Decode at batch 1, y = W x: one pass over the weights in fp32, fp16, int8 or packed int4.

A language model generating one token multiplies every weight matrix by one
vector: y = W x with W of shape out x in. Each weight is read once and used in
one multiply-add, so the time is the time to read W, and the only way to go
faster than reading fp32 weights at full bandwidth is to read fewer bytes per
weight. The family holds the same product in four storage formats, the *kinds
of input* (``INPUT_KINDS``), and every step runs all of them:

    kind       W (out x ...)                 x          scales                bytes a weight
    fp32       float32, out x in             float32    -                     4
    fp16       float16, out x in             float16    -                     2
    int8       int8, out x in                float16    float16, out x 1      1 + 2 / in
    int4       uint8, out x ceil(in/2)       float16    float16, out x in/128 0.5 + 2 / 128
    int4_g64   the same, one scale for 64    float16    float16, out x in/64  0.5 + 2 / 64

int8 keeps one scale per row, W[r, c] = scale[r] q[r, c] with q in -127..127
(W8A16: weights in 8 bits, activations in 16). int4 keeps a scale per group of
64 or 128 consecutive weights of a row, W[r, c] = scale[r, c // g] q[r, c] with
q in -8..7, packed two to a byte in the int4 family's layout (``zoo.kernels.int4``:
code 2i in the low nibble of byte i, two's complement, a row of odd length padded
with a 0 nibble), each row packed on its own so that row r starts at byte
r ceil(in/2). The group size is not an argument: it is the one of 64 and 128 for
which ceil(in / g) is the scales' column count (for in <= 64 both give one group,
and the same product). The output is float32 in every kind, and every step
accumulates in float32: the formats change what is read, not the arithmetic.

Why kinds and not steps per format: the inputs a decode kernel gets *are* the
quantized weights (quantization happens once, when a model is loaded), so the
kinds are made by ``make_inputs`` on the host and no timed call quantizes
anything; each format is checked and timed at every size by the machinery that
checks and times every kind, with results keys such as ``8192x8192@int4``; and
"each format with the steps that make it fast" is exactly every step on every
kind. The arrays of a call differ in dtype and rank, so ``DTYPE`` and ``NDIM``
are given input by input, and ``output_for`` checks which go together.

Making the inputs (``make_inputs(size, seed, kind)``): W and x are drawn as
float32 standard normals from the seed, the same for every kind (the fp32 kind
*is* that master copy); the fp16 kind rounds both to float16; the quantized kinds
take the scale of a row or group as its largest magnitude over 127 (int8) or 7
(int4), rounded to float16, and the codes as clamp(rint(W / scale)), with the
int4 family's ``quantize_reference`` and ``pack_codes_reference`` for int4. The
reference is the float64 product of the *dequantized* weights (scale q, exactly
as stored) and x: what a step must compute. What the quantization itself costs
is a different number, ``quantization_error(size, seed, kind)``, the relative
error of that product against the float32 master product; ``tests/kernels/test_gemv.py``
bounds it and the ``gemv-formats`` sweep reports it beside the timings.

Sizes are OUT x IN (``SIZE_DIMS = (2,)``): 8192 x 8192, a Llama-like
4096 x 14336 (the down projection: short output, long rows) and its transpose
14336 x 4096 (the up projection). Rates: ``flops(size)`` = out in, one
multiply-add per weight, so the GFLOP/s column of ``zoo run`` reads billions of
*weights* per second, comparable across kinds; ``bytes_moved(size, kind)`` is
the kind's weight bytes, plus its scales, x and y: the GB/s column is the
bandwidth the kind really uses (x and y are under 0.1% at the benchmark sizes).
The README tables quote GB/s where the bytes outnumber the weights and weights
per second (GFLOP/s) for int4.

Tolerance: max(2e-6, 2^-21 sqrt(in)), as in hgemm. Every step multiplies in
float32 (fp16 and quantized products are exact there; an int4 group's partial
sum is scaled once) and adds in float32 over in terms, whose roundings grow like
2^-24 sqrt(in) relative to y; the tolerance is eight times that, 3.1e-5 at in =
4099 (v05's dequantization cancels a sum about four times larger than the
result: about four times the rounding, measured near 1e-7 at in = 14336 in the
simulator), while a lost 16-byte chunk of a row is an error of sqrt(chunk / in),
over 1% at every test size, and a wrong scale or nibble far more.

Rows besides the steps. ``baseline``: cuBLAS GEMV in float32 through CuPy,
``cupy.matmul(W32, x32, out=out)``, on the kind's weights held as float32 (the
fp32 kind's own arrays; for the others a float32 copy of the dequantized weights
made once, on the first, untimed call, as a model's load step would): the same
numbers from the fastest library route that keeps float32 arithmetic, checked
like a step. CEILINGS, timed and checked: ``cupy.matmul fp16``, cuBLAS GEMV in
float16 (``cupy.matmul`` of float16 weights and x, a float16 result) on the
kind's weights held as float16, the row the fp16 kind must match and the int4
kinds must beat by 3.5x in weights per second (its float16 output misses the
tolerance, hgemm's reason: it is checked within its own, ROW_TOLERANCE); and
``copy_ceiling``, a device-to-device copy of half the call's bytes (read plus
write = the bytes a GEMV reads), whose GB/s column is the copy bandwidth those
bytes could have: the family's STRONGEST row, checked against the bytes it
copied. The held copies of a size exceed twice the L2 cache and rotate, as the
harness rotates input sets. The CPU row is NumPy ``W @ x`` in float32 on NumPy's
BLAS: NumPy has no float16 or integer BLAS, so the quantized and float16 weights
are widened to float32 once (a load step).

The steps: one thread per row (v01), one warp per row with a shuffle reduction
(v02), 128-bit loads of weights and x (v03), several rows per warp sharing each
load of x (v04), dequantization by float16 magic numbers instead of integer
conversions (v05), the in dimension split across the warps of a block for shapes
with too few rows to fill the GPU (v06), int4 codes dequantized straight into
float16 tensor-core fragments, multiplied by ``mma.sync`` (v07, for the int4
kinds with in a multiple of 64; everything else runs v06's kernels), and those
codes, x and the scales asked for a run ahead, into a double buffer of shared
memory by ``cp.async`` (v08), so that a warp's next bytes are in flight during
its math, and that kernel launched to overlap the one before it in the stream
(v09, programmatic dependent launch, Hopper): its first codes are asked for
before the kernel before it has finished, and only x waits for it. v10 reads W
and its scales packed once in the order its kernel reads them (``pack``: each
warp's run of 32 rows x 128 bytes in one 4 KB piece, its runs one after another,
a run's scales in one piece copied into its slot with its codes, each word's
codes in the pairs x comes in), as a model's weights are packed when they load;
it takes rows of whole runs (in a multiple of 256). Its ring has choices no one
GPU settles, which ``python -m zoo tune gemv`` measures per shape class
(``ring.py``): two or three slots, a slot refilled before or after its run's
math, where a warp lets the next kernel start, and its kernel (each copy's
address computed or a register plus a constant of the instruction; blocks of
eight warps or of the warps of one group of 32 rows). A call through ``Variant``
packs the weights once per weights array (``Variant.prepared``), so a decode loop
that calls the step on the same weights reads them packed. Steps v03 on read 16
bytes at a time and need every row 16-byte aligned: in a multiple of 4 (fp32), 8
(fp16), 16 (int8) or 32 (int4); other shapes run v02's kernel.

Goals (the issue): at 8192 x 8192, 4096 x 14336 and 14336 x 4096, the fp16 kind
at 90% of the copy bandwidth of its bytes and at least cuBLAS fp16; int4 at
3.5x the fp16 kind's weights per second. ``python -m zoo gemv-formats`` times the
last step of every kind at those shapes as a decode loop runs it (a CUDA graph of
calls: at 8 us a call, an int4 GEMV is shorter than the host's launch) and says
how far each goal is.
"""

import math

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange
from zoo.kernels.int4 import pack_codes_reference, quantize_reference, unpack_codes_reference

ORDER = 130  # after int4 (125), whose packing it reads, and before softmax (170)
INPUTS = ("W", "x", "scales?")
DTYPE = {"W": (np.float32, np.float16, np.int8, np.uint8), "x": (np.float32, np.float16), "scales": np.float16}
NDIM = {"W": 2, "x": 1, "scales": 2}
INPUT_KINDS = ("fp32", "fp16", "int8", "int4", "int4_g64")
SIZE_DIMS = (2,)  # OUT x IN
# Simulator sizes, every kind: a 1 x 1 product; an irregular in (no 16-byte rows: v02's kernel in every
# step); in = 320, a 16-byte multiple in every format with a partial last int4 group of 128 (64 columns),
# at 33 rows (not a multiple of the rows a warp takes) and 3 rows (v06 splits in across the warps).
TEST_SIZES = ((1, 1), (5, 77), (3, 320), (33, 320))
KIND_TEST_SIZES = {"int4_g64": ((5, 77), (33, 320))}  # int4's kernels with the other group size
# The irregular shapes; aligned rows, few (split across a block's warps) and some; a benchmark shape
# (the other benchmark shapes are checked by `zoo run`, which compares every row with the reference)
GPU_TEST_SIZES = ((1, 1), (33, 4099), (1000, 777), (7, 14336), (100, 4096), (4096, 14336))
BENCH_SIZES = ((8192, 8192), (4096, 14336), (14336, 4096))
HEADLINE_SIZE = (8192, 8192)
BASELINE = "cupy.matmul fp32 (cuBLAS)"
GROUPS = (128, 64)  # int4 group sizes: the int4 kind's, then int4_g64's
INT8_LIMIT, INT4_LIMIT = 127, 7  # the largest code magnitude the scales map a row's or group's largest weight to
LIMIT = 2**31  # elements or bytes: the steps' uint32 indices (plus a stride) stay below 2^32
# The steps' sizes for the simulator, which runs every CUDA thread in Python: smaller blocks there, the same code paths;
# the GPU's are the second values (what the PTX snapshot compiles and `zoo profile` counts with). The simulator has
# one "SM" (zoo.device.SIM_SM_COUNT): 2 warps an SM there makes the test sizes take both of a split step's paths.
ROW_THREADS = 32 if SIMULATOR else 128  # v01's threads per block, one thread per row
WARP_ROW_THREADS = 64 if SIMULATOR else 128  # v02-v05's threads per block, a multiple of 32: rows by the warp
SPLIT_THREADS = 64 if SIMULATOR else 256  # v06 on: threads per block, a multiple of 32, up to 8 warps sharing rows
SPLIT_WARPS_PER_SM = 2 if SIMULATOR else 16  # v06's floor of warps per SM when it splits the inputs of rows
TENSOR_WARPS_PER_SM = 2 if SIMULATOR else 8  # v07 on: the same floor for the tensor-core steps


# -- the formats, on the host --------------------------------------------------------------------------------------
def dims(size):
    """(out, in) of a size OUT x IN (an integer n, from Python, is n x n)."""
    if isinstance(size, (tuple, list)):
        out, n = size
        return int(out), int(n)
    return int(size), int(size)


def weight_format(W):
    """'fp32', 'fp16', 'int8' or 'int4' (packed, uint8) from the weights' dtype."""
    return {"f4": "fp32", "f2": "fp16", "i1": "int8", "u1": "int4"}[np.dtype(W.dtype).kind + str(W.dtype.itemsize)]


def group_size(n, groups):
    """The int4 group size (64 or 128) for which a row of n weights has this many groups; ValueError if none."""
    for g in GROUPS:
        if -(-n // g) == groups:
            return g
    raise ValueError(
        f"int4 scales hold one float16 per group of 64 or 128 weights: a row of {n} has "
        f"{-(-n // 64)} or {-(-n // 128)} groups, the scales have {groups} columns"
    )


def layout(W, x, scales=None):
    """(format, in, group): the format, the row length, and the int4 group size (0 for the other formats).

    Also the family's check of which arrays go together, before any launch (``output_for``)."""
    fmt = weight_format(W)
    n = x.shape[0]
    want_x = np.float32 if fmt == "fp32" else np.float16
    if x.dtype != want_x:
        raise TypeError(f"x must be {np.dtype(want_x)} with {fmt} weights ({np.dtype(W.dtype)}), got {x.dtype}")
    if fmt in ("fp32", "fp16"):
        if scales is not None:
            raise TypeError(f"{fmt} weights take no scales")
        if W.shape[1] != n:
            raise ValueError(f"W is {W.shape[0]} x {W.shape[1]} and x has {n} elements: W's columns must equal x's")
        return fmt, n, 0
    if scales is None:
        raise TypeError(f"{fmt} weights need their scales (float16)")
    if fmt == "int8":
        if W.shape[1] != n:
            raise ValueError(f"W is {W.shape[0]} x {W.shape[1]} and x has {n} elements: W's columns must equal x's")
        if tuple(scales.shape) != (W.shape[0], 1):
            raise ValueError(f"int8 scales are one per row, shape ({W.shape[0]}, 1); got {tuple(scales.shape)}")
        return fmt, n, 0
    if W.shape[1] != (n + 1) // 2:
        raise ValueError(
            f"packed int4 W holds two weights a byte: {n} elements of x need {(n + 1) // 2} bytes a row, "
            f"W has {W.shape[1]}"
        )
    if scales.shape[0] != W.shape[0]:
        raise ValueError(f"scales have {scales.shape[0]} rows, W has {W.shape[0]}")
    return fmt, n, group_size(n, scales.shape[1])


def pack_rows(codes):
    """uint8 out x ceil(in/2) of int8 codes in -8..7, each row packed on its own (the int4 family's layout)."""
    out, n = codes.shape
    even = np.zeros((out, n + n % 2), np.int8)  # an odd row ends in a 0 nibble
    even[:, :n] = codes
    return pack_codes_reference(even.reshape(-1)).reshape(out, -1)


def unpack_rows(packed, n):
    """int8 codes out x n of packed rows (the reverse of ``pack_rows``)."""
    return unpack_codes_reference(packed.reshape(-1)).reshape(packed.shape[0], -1)[:, :n]


def dequantize(W, x, scales=None):
    """The weights as stored, in float64: W itself, or scale times code."""
    fmt, n, group = layout(W, x, scales)
    if fmt in ("fp32", "fp16"):
        return W.astype(np.float64)
    if fmt == "int8":
        return W.astype(np.float64) * scales.astype(np.float64)
    per_weight = np.repeat(scales.astype(np.float64), group, axis=1)[:, :n]  # scale[r, c // group]
    return unpack_rows(W, n).astype(np.float64) * per_weight


def _scales(absmax, limit):
    """float16 scales mapping each largest magnitude to the largest code (never 0: the smallest float16 normal)."""
    return np.maximum(absmax / limit, np.float32(2.0**-14)).astype(np.float16)


def quantize(W, kind):
    """(weights, scales) of float32 W in a quantized kind: scales rounded to float16 first, codes from them."""
    if kind == "int8":
        scales = _scales(np.abs(W).max(axis=1, keepdims=True), INT8_LIMIT)
        codes = np.clip(np.rint(W / scales.astype(np.float32)), -INT8_LIMIT, INT8_LIMIT).astype(np.int8)
        return codes, scales
    group = GROUPS[0] if kind == "int4" else GROUPS[1]
    out, n = W.shape
    groups = -(-n // group)
    padded = np.zeros((out, groups * group), np.float32)
    padded[:, :n] = W
    scales = _scales(np.abs(padded.reshape(out, groups, group)).max(axis=2), INT4_LIMIT)
    per_weight = np.repeat(scales.astype(np.float32), group, axis=1)[:, :n]
    return pack_rows(quantize_reference(W, per_weight)), scales  # clamp(rint(W / scale), -8, 7)


# -- the family's spec -----------------------------------------------------------------------------------------------
def make_inputs(size, seed, kind="fp32"):
    out, n = dims(size)
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((out, n), dtype=np.float32)  # the master weights: the same for every kind
    x = rng.standard_normal(n, dtype=np.float32)
    if kind == "fp32":
        return W, x
    if kind == "fp16":
        return W.astype(np.float16), x.astype(np.float16)
    codes, scales = quantize(W, kind)
    return codes, x.astype(np.float16), scales


def reference(W, x, scales=None):
    return dequantize(W, x, scales) @ x.astype(np.float64)


def output_for(W, x, scales=None):
    layout(W, x, scales)
    return (W.shape[0],), np.float32


def TOLERANCE(size):
    """Relative norm error of float32 accumulation over a row (see the module docstring)."""
    return max(2e-6, 2.0**-21 * math.sqrt(dims(size)[1]))


def flops(size):
    out, n = dims(size)
    return out * n  # one multiply-add per weight: the GFLOP/s column reads billions of weights per second


def bytes_moved(size, kind="fp32"):
    """The kind's weight bytes and scales, x read and y written: what one call must move."""
    out, n = dims(size)
    weights = {"fp32": 4 * out * n, "fp16": 2 * out * n, "int8": out * n}.get(kind, out * ((n + 1) // 2))
    scales = {"int8": 2 * out, "int4": 2 * out * -(-n // GROUPS[0]), "int4_g64": 2 * out * -(-n // GROUPS[1])}
    return weights + scales.get(kind, 0) + (4 if kind == "fp32" else 2) * n + 4 * out


def quantization_error(size, seed=0, kind="int4"):
    """||y_kind - y_fp32|| / ||y_fp32||: what the kind's rounding of W (and of x to float16) costs, against the
    product of the float32 master weights and vector, both references in float64."""
    exact = reference(*make_inputs(size, seed, "fp32"))
    got = reference(*make_inputs(size, seed, kind))
    return float(np.linalg.norm(got - exact) / np.linalg.norm(exact))


def check_index_range(W, x, scales=None):
    """OutOfRange for weights too large for the steps' uint32 indices (every step's validate)."""
    if W.size >= LIMIT:
        raise OutOfRange(f"the gemv steps index with uint32: W must have fewer than 2^31 elements, got {W.size}")


# -- rows besides the steps: cuBLAS in float32 and float16, and a copy ------------------------------------------------
# (key: [held copies of (weights, x) for one size and kind, calls so far]); made on a row's first call (untimed), from
# its inputs, as many as exceed twice the L2 cache, used in turn as the harness rotates its input sets.
_HELD = {}


def _held(W, x, scales, dtype):
    """(W, x) of this call in ``dtype`` (float32 or float16): the arrays themselves when they are already, else a
    rotating copy of the dequantized weights and x, converted once."""
    import cupy

    from zoo.device import properties

    if W.dtype == dtype:
        return W, x
    key = (tuple(W.shape), str(W.dtype), np.dtype(dtype).str, x.shape[0], None if scales is None else scales.shape)
    # scales' shape in the key: int4 and int4_g64 pack the same bytes and differ only in their groups
    if key not in _HELD:
        for k in [k for k in _HELD if k[0] != key[0] or k[3] != key[3]]:
            del _HELD[k]  # another size: free the last one's copies
        host = [cupy.asnumpy(a) if a is not None else None for a in (W, x, scales)]
        weights = dequantize(*host).astype(dtype)
        l2 = properties().get("l2_bytes") or 0
        count = 1 if weights.nbytes >= 2 * l2 else min(16, math.ceil(2 * l2 / weights.nbytes))
        vector = cupy.asarray(host[1].astype(dtype))
        _HELD[key] = [[(cupy.asarray(weights), vector) for _ in range(count)], 0]
    entry = _HELD[key]
    copies, calls = entry
    entry[1] = calls + 1
    return copies[calls % len(copies)]


def baseline(W, x, *rest):
    """cuBLAS GEMV in float32 (cupy.matmul) on the kind's weights held as float32; rest is (scales, out) or (out,)."""
    import cupy

    out = rest[-1]
    W32, x32 = _held(W, x, rest[0] if len(rest) == 2 else None, np.float32)
    cupy.matmul(W32, x32, out=out)


_Y16 = {}  # rows: a float16 result for cupy.matmul fp16 (made once: no allocation in a timed call or a graph)


def matmul_fp16(W, x, *rest):
    """cuBLAS GEMV in float16 (cupy.matmul, a float16 result; out is left alone) on the weights held as float16."""
    import cupy

    W16, x16 = _held(W, x, rest[0] if len(rest) == 2 else None, np.float16)
    if W.shape[0] not in _Y16:
        _Y16.clear()
        _Y16[W.shape[0]] = cupy.empty(W.shape[0], cupy.float16)
    return cupy.matmul(W16, x16, out=_Y16[W.shape[0]])  # checked: a float16 result, within ROW_TOLERANCE


def _copied_bytes(W, x, scales=None):
    """How many bytes the copy row copies: half the call's bytes (it reads and writes each; y is W.shape[0] float32),
    out of W."""
    call = W.nbytes + x.nbytes + (0 if scales is None else scales.nbytes) + 4 * W.shape[0]
    return min(W.nbytes, call // 2)


def copy_ceiling(W, x, *rest):
    """A device-to-device copy of half the call's bytes out of W: it reads and writes what the GEMV reads."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((W,), _copied_bytes(W, x, *rest[:-1]))  # rest: the scales if any, then y


CEILINGS = {"cupy.matmul fp16": matmul_fp16, "copy_ceiling": copy_ceiling}  # timed; the copy checked as a copy
ROW_TOLERANCE = {"cupy.matmul fp16": 5e-3}  # float16 weights, x and y: about 5e-4 relative
ROW_REFERENCE = {"copy_ceiling": lambda W, x, scales=None: W.reshape(-1).view(np.uint8)[: _copied_bytes(W, x, scales)]}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
_CPU_WEIGHTS = []  # [(the weights array, its float32 copy)]: the last one converted


def cpu_numpy(W, x, scales=None):
    """NumPy's BLAS in float32, W32 @ x32 (every core); other kinds' weights are widened to float32 once."""
    if W.dtype == np.float32:
        return W @ x
    if not _CPU_WEIGHTS or _CPU_WEIGHTS[0][0] is not W:
        _CPU_WEIGHTS[:] = [(W, dequantize(W, x, scales).astype(np.float32))]
    return _CPU_WEIGHTS[0][1] @ x.astype(np.float32)


CPU = {"cpu_numpy": (cpu_numpy, "blas")}
