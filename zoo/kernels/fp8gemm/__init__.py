"""FP8 GEMM on Hopper's tensor cores, out = (sa A) @ (sw W)^T: e4m3 inputs, per-tensor scales, float32 out.

A model's linear layer in FP8: activations A (M x K) and weights W (N x K, as ``torch.nn.Linear`` keeps them: a
row per output feature) quantized to float8 e4m3 (1 sign, 4 exponent and 3 mantissa bits, bias 7, largest
448, no infinities: OCP's E4M3FN), each with one float32 scale, multiplied on the tensor cores with float32
accumulation, the product of the two scales applied to the float32 result. Hopper's tensor cores multiply e4m3
at twice the float16 rate (``wgmma...m64nNk32.f32.e4m3.e4m3``: K = 32 an instruction, the same 32 bytes of a
row as float16's 16), and an e4m3 matrix is half a float16 one's bytes.

Why a family of its own and not a kind of hgemm: the scales are inputs of the call (``scales``: sa, sw), and
wgmma reads e4m3 K-major only (PTX ISA: the transposes are for .f16 and .bf16), so B comes as W = B^T, the
layout cuBLASLt's FP8 GEMM asks for too ("TN"; ``torch._scaled_mm`` takes it as a column-major view). hgemm's
calls are ``(A, B)`` with B row-major.

Quantization is the host's (``make_inputs``, ``quantize``): scale = amax / 448 per tensor, each element
rounded to the nearest e4m3 (ties to even), as a framework's per-tensor recipe does before the GEMM; the bits
travel as uint8 (no NumPy dtype is e4m3). A kernel's job is the GEMM.

Checking and tolerance
----------------------
The reference is the float64 product of the dequantized inputs, ``(sa A) (sw W)^T``: the quantization is part
of the inputs, not an error of the kernel. Every product of two e4m3 values is exact in float32 (4 + 4
significant bits), and sa sw is applied once to the float32 sum. What remains is the accumulation: in float32,
about 2^-24 per addition (hgemm's 2^-21 sqrt(K) bound); but Hopper's FP8 tensor cores keep fewer bits while
they add (DeepSeek-V3's report measured about 14). An instruction adds its 32 products to the accumulator by
aligning every term to the largest one's exponent and cutting what falls below about 13 fraction bits, so each of
the K products loses up to 2^-13 of the running sum, toward zero, with the product's random sign: a random walk
over all K products, not over the K / 32 instructions. TOLERANCE(size) = max(1e-5, 2^-14 sqrt(K)): 3.9e-3 at
K = 4096, 5.5e-3 at 8192 (one 2^-13 cut a product, its mean magnitude half that). The accumulation's error in
the tensor core is the same for cuBLASLt's FP8 GEMM with fast accumulation, which the strongest row checks
against this tolerance too; PyTorch's default (``use_fast_accum=False``) is nearer float32. v02 cuts the walk short
as DeepSeek-V3 does, adding each 128 products' partial sum in float32 registers, and declares its own tolerance,
that of one 128-long walk (6.9e-4 at any K from 128 on). In the simulator ``mma_async`` adds e4m3 as the tensor
core does (``zoo.simulator.hopper.truncating_sum``), so both walks show there too. A wrong scale, layout or format
is off by O(1).

The error that quantization itself costs is reported apart (``quantization_error``), as the gemv family reports
its formats': against the float32 product of the unquantized normals it is a few percent (3 mantissa bits:
each element rounded by up to 2^-4 of itself, two inputs), the price FP8 pays for its rate.

Rows
----
The baseline is what a user without an FP8 GEMM does: dequantize to float16 (every e4m3 value is exact in
float16) and call cuBLAS (``cublasGemmEx``, float16 in, float32 out), then scale.
The strongest row is cuBLASLt's own FP8 GEMM through ``torch._scaled_mm`` with ``use_fast_accum=True``: the
same arithmetic as the steps, the accumulation in the tensor core; ``torch._scaled_mm`` with PyTorch's default
(``use_fast_accum=False``: cuBLASLt adds the tensor core's partial sums into float32 every few instructions) is
a row beside it. Without PyTorch both rows say so and the run goes on.
"""

import math

import numpy as np

from zoo.errors import Unavailable

ORDER = 36  # right after hgemm (35): the same tensor cores in 8 bits
MIN_CC = (9, 0)  # wgmma .e4m3 (sm_90a): Hopper; Ada (8.9) has FP8 only through mma.sync
INPUTS = ("A", "W", "scales")
DTYPE = {"A": np.uint8, "W": np.uint8, "scales": np.float32}  # e4m3 bit patterns; sa and sw
NDIM = {"A": 2, "W": 2, "scales": 1}
TEST_SIZES = ((70, 129, 31),)  # partial tiles on every axis, K below one 128-wide tile
GPU_TEST_SIZES = ((1, 1, 1), (70, 129, 31), (1025, 2047, 1029), (129, 4099, 257), (4096, 4096, 4096))
BENCH_SIZES = (2048, 4096, 8192)
HEADLINE_SIZE = 4096
BASELINE = "cuBLAS fp16 on the dequantized inputs"
STRONGEST = "scaled_mm fast_accum"  # cuBLASLt FP8 through torch._scaled_mm, accumulating as the steps do
SIZE_DIMS = (1, 3)  # n (square) or M x N x K
E4M3_MAX = 448.0


def dims(size):
    """(M, N, K) of a size: n means n x n x n."""
    if isinstance(size, int):
        return size, size, size
    m, n, k = size
    return m, n, k


def TOLERANCE(size):
    """Relative norm error of the tensor core's accumulation over K: 2^-14 sqrt(K) (see the module docstring)."""
    k = dims(size)[2]
    return max(1e-5, 2.0**-14 * math.sqrt(k))


def _e4m3_values():
    """The value of each of the 256 e4m3 bit patterns (NaN at S.1111.111)."""
    bits = np.arange(256)
    exponent, mantissa = bits >> 3 & 15, (bits & 7) / 8
    magnitude = np.where(exponent == 0, mantissa * 2.0**-6, (1 + mantissa) * 2.0 ** (exponent - 7))
    magnitude[bits & 0x7F == 0x7F] = np.nan
    return np.where(bits & 0x80, -magnitude, magnitude)


E4M3 = _e4m3_values()


def to_e4m3(x):
    """float values as e4m3 bit patterns (uint8): nearest, ties to even, saturated at +-448."""
    x = np.asarray(x, np.float64)
    magnitude = np.minimum(np.abs(x), E4M3_MAX)
    quantum = 2.0 ** (np.floor(np.log2(np.maximum(magnitude, 2.0**-6))) - 3)  # 3 mantissa bits; subnormals 2^-9
    rounded = np.minimum(np.rint(magnitude / quantum) * quantum, E4M3_MAX)  # rint: ties to even
    codes = np.searchsorted(E4M3[:127], rounded)  # patterns 0 .. 126 are the non-negative values, increasing
    return (codes | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def quantize(x):
    """(e4m3 bits of x / scale, scale) with scale = amax / 448: the per-tensor recipe."""
    scale = np.float32(max(float(np.abs(x).max()), 1e-12) / E4M3_MAX)
    return to_e4m3(np.asarray(x, np.float32) / scale), scale


def values(bits):
    """e4m3 bit patterns as float64 values."""
    return E4M3[np.asarray(bits, np.uint8)]


def _normals(size, seed):
    m, n, k = dims(size)
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((n, k), dtype=np.float32)


def make_inputs(size, seed):
    (a, sa), (w, sw) = (quantize(x) for x in _normals(size, seed))
    return a, w, np.array([sa, sw], np.float32)


def reference(A, W, scales):
    return (values(A) * float(scales[0])) @ (values(W) * float(scales[1])).T


def quantization_error(size, seed=0):
    """Relative norm error of the FP8 product (exact arithmetic) against the float32 inputs' product: what the
    format costs, apart from any kernel's arithmetic."""
    a, w = _normals(size, seed)
    exact = a.astype(np.float64) @ w.astype(np.float64).T
    return float(np.linalg.norm(reference(*make_inputs(size, seed)) - exact) / np.linalg.norm(exact))


def output_for(A, W, scales):
    if A.shape[1] != W.shape[1]:
        raise ValueError(
            f"A is {A.shape[0]} x {A.shape[1]} and W is {W.shape[0]} x {W.shape[1]}: both hold K = A's columns "
            "(W is N x K, a row per output)"
        )
    if tuple(scales.shape) != (2,):
        raise ValueError(f"scales holds A's and W's scale (2 float32), got shape {tuple(scales.shape)}")
    return (A.shape[0], W.shape[0]), np.float32


def flops(size):
    m, n, k = dims(size)
    return 2 * m * n * k


def bytes_moved(size):
    m, n, k = dims(size)
    return m * k + n * k + 4 * m * n + 8


def baseline(A, W, scales, out):
    """cuBLAS on float16 copies of the dequantized inputs (exact: e4m3 values are float16 values), float32 out, then
    scaled. ``cublasGemmEx`` with float32 C: ``cupy.matmul`` would return float16, and sums past 65504 overflow."""
    import cupy

    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    table = cupy.asarray(E4M3.astype(np.float16))
    libraries.cublas_gemm_ex(table[A], table[W], out, b_rows_are_columns=True)  # W is N x K: cuBLAS's "TN"
    out *= scales[0] * scales[1]


def torch_module():
    """PyTorch, imported when a row runs; ``Unavailable`` where it is not installed (the row says so)."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch not installed ({e}): torch._scaled_mm is cuBLASLt's FP8 GEMM") from None
    return torch


_OWN_SCALES = {}  # id of a scales array -> (the array, its two scales as tensors of their own)


def _own_scales(torch, scales):
    """The two scales as two one-element tensors, each its own allocation: cuBLASLt refuses the view ``s[1]``
    (CUBLAS_STATUS_NOT_SUPPORTED on the H100, .ci/probe-scaled-mm.py), whose pointer is 4 bytes into ``s``. Made
    once for each scales array the timed calls pass (the harness rotates a few sets of inputs), and held with the
    array so its id is not reused: a timed call is the GEMM alone."""
    kept = _OWN_SCALES.get(id(scales))
    if kept is None or kept[0] is not scales:
        if len(_OWN_SCALES) >= 64:  # the arrays of earlier cases: let them go
            _OWN_SCALES.clear()
        s = torch.as_tensor(scales, device="cuda")
        kept = _OWN_SCALES[id(scales)] = (scales, (s[0:1].clone().reshape(()), s[1:2].clone().reshape(())))
    return kept[1]


def _scaled_mm(A, W, scales, out, fast_accum):
    torch = torch_module()
    a = torch.as_tensor(A, device="cuda").view(torch.float8_e4m3fn)
    w = torch.as_tensor(W, device="cuda").view(torch.float8_e4m3fn)
    scale_a, scale_b = _own_scales(torch, scales)
    result = torch.as_tensor(out, device="cuda")
    # W is N x K row-major: W.t() is B (K x N) column-major, the layout cuBLASLt's FP8 GEMM takes
    torch._scaled_mm(a, w.t(), scale_a, scale_b, out_dtype=torch.float32, use_fast_accum=fast_accum, out=result)


def scaled_mm(A, W, scales, out):
    """torch._scaled_mm as PyTorch calls it by default (use_fast_accum=False). Needs PyTorch and K, N % 16 == 0."""
    _scaled_mm(A, W, scales, out, False)


def scaled_mm_fast_accum(A, W, scales, out):
    """torch._scaled_mm(use_fast_accum=True): cuBLASLt accumulating in the tensor core, as the steps do."""
    _scaled_mm(A, W, scales, out, True)


EXTRA_BASELINES = {"scaled_mm": scaled_mm, "scaled_mm fast_accum": scaled_mm_fast_accum}


# -- the CPU beside the GPU ----------------------------------------------------------------------------------------
def cpu_numpy(A, W, scales):
    """numpy.matmul on float32 copies of the dequantized inputs, through NumPy's BLAS (every core): a CPU BLAS has no
    FP8 GEMM, so the host dequantizes first, as the baseline does on the GPU."""
    a = (values(A) * float(scales[0])).astype(np.float32)
    w = (values(W) * float(scales[1])).astype(np.float32)
    return a @ w.T


CPU = {"cpu_numpy": (cpu_numpy, "blas")}
