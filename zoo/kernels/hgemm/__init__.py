"""HGEMM on tensor cores, out = A @ B: float16 or bfloat16 inputs, float32 accumulation and output.

Why ``hgemm`` and not ``tensor_cores``: zoo's families are named after the
operation (sgemm, transpose, reduce), and the technique is what the steps teach.
The H is BLAS's prefix for half precision inputs; the output here is float32
(in cuBLAS terms a ``cublasGemmEx`` with 16F A and B, 32F C and 32F compute),
because a float32 result is what makes the tensor core comparable with the
zoo's SGEMM and checkable to a tight tolerance.

A GEMM is bound by arithmetic, and on a Hopper GPU float16 arithmetic lives in
the tensor cores: one ``mma.sync`` instruction per warp does a 16 x 8 x 16
multiply-accumulate (4096 FLOPs) where an FFMA does 2 per lane. numba has no
tensor-core API, so ``zoo.device.mma`` emits the PTX through llvmlite inline assembly;
the SASS shows ``HMMA.16816.F32`` (``python -m zoo show hgemm v01 --sass | grep
HMMA``). The steps then do what keeps the tensor cores fed: shared-memory block
tiles (v02), ``ldmatrix`` from a conflict-free padded layout with 128-bit
global loads and larger block tiles (v03), asynchronous copies that load the
next tile while the current one is multiplied (v04), a third stage in tiles
swizzled instead of padded, with larger warp tiles (v05), fragments
double-buffered in registers so that ``ldmatrix`` and the barrier overlap the
``mma`` (v06), and blocks ordered in groups for the L2 (v07, ``tile_order.py``), then Hopper's
own path (v08-v11, below). Every step
runs in the simulator too, where ``zoo.device.mma`` emulates each instruction
over the warp (see its docstring), so the tests check every step's index
arithmetic there, and ``tests/kernels/test_hgemm.py`` checks on a GPU that the
hardware agrees with the fragment table below.

The fragments of ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``
----------------------------------------------------------------------
Each of the 32 lanes holds fixed elements of every tile (PTX ISA, "Matrix
Fragments for mma.m16n8k16 with floating point type"). With ``g = lane // 4``
(PTX's groupID) and ``t = lane % 4`` (threadID_in_group)::

    register   type              A is 16 x 16 (m x k), B is 16 x 8 (k x n), C and D are 16 x 8 (m x n)
    a0         2 x f16 (uint32)  A[g,     2t], A[g,     2t+1]       low half first
    a1         2 x f16 (uint32)  A[g + 8, 2t], A[g + 8, 2t+1]
    a2         2 x f16 (uint32)  A[g,     2t+8], A[g,     2t+9]
    a3         2 x f16 (uint32)  A[g + 8, 2t+8], A[g + 8, 2t+9]
    b0         2 x f16 (uint32)  B[2t,     g], B[2t+1, g]           two k of one column
    b1         2 x f16 (uint32)  B[2t + 8, g], B[2t+9, g]
    c0, c1     f32, f32          C[g,     2t], C[g,     2t+1]       D likewise
    c2, c3     f32, f32          C[g + 8, 2t], C[g + 8, 2t+1]

(PTX numbers the eight float16 elements a0..a7; here a0..a3 name the four
registers that hold them in pairs.) Which lane holds each element of an 8 x 8
quarter of A, C or D (``lane = 4 row + col // 2``), the same in every quarter::

    col:     0  1   2  3   4  5   6  7
    row 0:   0  0   1  1   2  2   3  3
    row 1:   4  4   5  5   6  6   7  7
    row 2:   8  8   9  9  10 10  11 11
     ...
    row 7:  28 28  29 29  30 30  31 31

A's quarters are a0 (rows 0-7, k 0-7), a1 (rows 8-15, k 0-7), a2 (rows 0-7,
k 8-15), a3 (rows 8-15, k 8-15); C's are c0 c1 (rows 0-7) and c2 c3 (rows
8-15), columns 0-7. B is the transpose: ``lane = 4 n + k // 2``, b0 for k 0-7
and b1 for k 8-15. "row.col" in the instruction means A is read along its rows
and B along its columns: a register always holds two neighbours in k, which for
B stored row-major (K x N, as here) are N elements apart in memory, hence v01's
packing, v02's transposed tile and v03's ``ldmatrix.trans``.

Sizes, edges, checking
----------------------
Sizes are n (square) or M x N x K; every step takes any M, N, K >= 1 by
zero-padding A and B to whole tiles and cropping the result (``padding.py``;
the copies are inside the timed launch, and at the benchmark sizes there are
none). The reference is the float64 NumPy product of the float16 inputs (they
are float16 already, so nothing is rounded before it). Every product of two
float16 numbers is exact in float32 (11 + 11 significant bits <= 24), so the
only error is the float32 accumulation over K: about 2^-24 per addition,
growing like sqrt(K) for these zero-mean inputs, and the tensor core's adder
truncates rather than rounds some of its alignments. TOLERANCE(size) =
max(2e-6, 2^-21 sqrt(K)) is 3e-5 at K = 4096, about six times the 5e-6 a
one-warp-per-tile kernel measured there on an H200, and below the ~1.4e-4 that
a float16 output would cost, so a kernel that rounds through float16 fails.

The baseline is cuBLAS ``cublasGemmEx`` with float16 A and B, float32 output
and CUBLAS_COMPUTE_32F (the same arithmetic as the steps; cuBLAS picks its
tensor-core kernel). The row "cupy.matmul fp16 out" times ``cupy.matmul`` on the
float16 matrices, which returns float16 (the ~620 TFLOP/s figure): a ceiling,
since its float16 output misses the tolerance, checked against the reference
within a float16 result's own (ROW_TOLERANCE). The baseline is the family's
strongest row (STRONGEST): cuBLAS in each kind's own precision.

bfloat16 inputs
---------------
The second kind of input is bfloat16: float32's sign and 8-bit exponent with 7
mantissa bits (float16 has a 5-bit exponent and 10), the other 16-bit format the
tensor cores multiply (``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``,
SASS ``HMMA.16816.F32.BF16``, same fragments). Neither NumPy nor numba nor CuPy
has a bfloat16 dtype, so a bfloat16 matrix is a ``uint16`` array of bit patterns
(the top half of the float32 with the same value: ``to_bfloat16`` rounds float32
to it, ``bfloat16_values`` reads it back) and a uint16 input to this family
means bfloat16. Every step takes either kind with the same code: the 16-bit
data moves through shared memory and ``ldmatrix`` unread, the shared tiles take
the inputs' dtype (``cuda.shared.array(..., A.dtype)``), and ``mma_16bit_f32``
emits the .f16 or the .bf16 form from ``A.dtype``, chosen when numba compiles
the kernel for that dtype (two compiled kernels, one source). The wgmma steps
(v08 on) build their kernel once per kind (``build(tiles, kind)``, WGMMA_KIND):
the form is part of the instruction's name, ``wgmma.mma_async...f32.bf16.bf16``,
and the tensor cores read the tiles through descriptors that carry no type, so
the kind is a literal of the kernel (``mma_async(..., kind)``) and the shared
tiles hold uint16 bits; descriptors, swizzles and TMA boxes are the same bytes. Products of two
bfloat16 (8 + 8 significant bits) are exact in float32 too, so the tolerance is
the same. The baseline is then ``cublasGemmEx`` with CUDA_R_16BF A and B, the
same call otherwise; "cupy.matmul fp16 out" has no bfloat16 counterpart in CuPy
and is left out for this kind. ``KIND_TEST_SIZES`` checks float16 at the irregular size
and bfloat16 at one padded tile in the simulator (through wgmma at v08 and v13 only:
``KIND_TEST_SKIPS``); the GPU checks both at every size.

No TF32 step here: ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``
takes float32 inputs (rounded to TF32 by ``cvt.rna.tf32.f32``), so it is
sgemm's v15, this family's v07 moved to float32 operands, with a tolerance of
its own (TF32 keeps 10 mantissa bits); sgemm's v16 is this family's v15 moved
to ``wgmma...tf32``. FP8 (e4m3, with per-tensor scales as inputs of the call)
is the family fp8gemm, whose v01 is this family's v15 moved to ``wgmma...e4m3``.

Hopper's wgmma
--------------
sm_90 adds ``wgmma.mma_async``: a warpgroup (4 warps, 128 threads) issues one
asynchronous MMA of up to 64 x 256 x 16 whose A and B operands are read straight
from shared memory through 64-bit *matrix descriptors* (address, leading and
stride byte offsets, swizzle mode), with only the accumulators in registers. It
frees the registers and the issue slots that ``ldmatrix`` and ``mma.sync``
spend, and with TMA (``cp.async.bulk.tensor``, one thread copies a whole tile,
completion signalled on an ``mbarrier``) it is how cuBLAS reaches its figure:
the FlashAttention-3 paper reports that ``mma.sync`` reaches only about two
thirds of an H100's peak tensor-core rate. Steps v08 and v09 take that path
from numba (``zoo.device.wgmma``: the instructions as inline assembly, and an
emulation that decodes descriptors and swizzles as the hardware does, so the
simulator checks the layouts): wgmma from 128-byte-swizzled tiles (v08), two
warpgroups on 128 x 256 tiles (v09), a batch of MMAs left running while the next
step is prepared (v10: ``wait_group 1``), the epilogue's pairs stored as one
64-bit store (v11), a producer warpgroup handing stages to two consumer
warpgroups through full and empty mbarriers (v12), TMA copies of whole boxes,
their bytes counted on the mbarrier (v13), persistent blocks that walk the
tiles with the pipeline running on from one tile to the next (v14), those
tiles walked in groups of block rows, v07's order, for the L2 (v15), and a
tile's K loop split over several blocks where the tiles are fewer than the SMs,
their parts added by atomics (v16: split-K, for a model's layers at a small
batch).

From v12 on a kernel has static shared memory (the mbarriers) beside the dynamic
stages, and the driver starts dynamic shared memory right after the static
arrays, 16-byte aligned: measured on an H100, 64 bytes of mbarriers at 0x400
put the stages at 0x440. An alignment declared on the dynamic array does not
move it; it only lets the compiler assume it, fold ``first_tile``'s skew to 0 and
swizzle from the wrong origin (wrong products with ``cp.async``, a misaligned
address with TMA, which is what stopped these steps on an earlier branch). So
v12-v15 declare none and measure the skew when they run.

wgmma exists for the arch-specific target ``sm_90a`` only (numba-cuda 0.30
adds the "a" when it compiles for the GPU it runs on, not for ``compile_ptx(cc=(9,
0))``); those kernels are ``jit(arch_specific=True)``: always compiled for
``sm_90a`` and loaded by the lean launch (``zoo.runtime.launch``). The tensor maps TMA reads live in global memory,
not in a ``__grid_constant__`` parameter, which numba cannot declare (see
``zoo.device.wgmma``).
"""

import math

import numpy as np

ORDER = 35  # right after sgemm (30): the same problem on the tensor cores
# Every step issues mma.sync m16n8k16, which Ampere (8.0) introduced; a Turing GPU (7.5, Colab's T4) has
# ldmatrix and an f16 mma.sync of half the depth, m16n8k8, but no cp.async.
MIN_CC = (8, 0)  # mma.sync m16n8k16 and cp.async (Turing, 7.5, has mma only as m16n8k8)
INPUTS = ("A", "B")
INPUT_KINDS = ("float16", "bfloat16")
DTYPE = (np.float16, np.uint16)  # float16, or bfloat16 as its bit patterns (no NumPy dtype has it)
WGMMA_KIND = {np.dtype(np.float16): "f16", np.dtype(np.uint16): "bf16"}  # the inputs' dtype -> wgmma's form (v08 on)
MIN_CC = (8, 0)  # mma.sync m16n8k16 and cp.async; sm_75 has float16 mma only as m16n8k8, no bfloat16
NDIM = 2
# small K: the simulator pays per K step; 70 x 129 crosses the 64- and 128-wide tiles, 1 x 1 x 1 pads everything
TEST_SIZES = ((1, 1, 1), (70, 129, 31))
# In the simulator float16 at the irregular size, bfloat16 (the same kernels with .bf16 mma) at the padded one
# tile: every step runs both kinds and both paths once (the GPU: every kind at every size)
KIND_TEST_SIZES = {"float16": ((70, 129, 31),), "bfloat16": ((1, 1, 1),)}
# bfloat16 through wgmma in the simulator: v08 (cp.async) and v13 (TMA); the others issue the same .bf16 form on the
# same bytes and pipelines already checked in float16 (15-30 s each in the simulator); the GPU checks every step
KIND_TEST_SKIPS = {"bfloat16": ("v09", "v10", "v11", "v12", "v14", "v15", "v16")}
# 100 x 4096 x 4096: a model's layer at a batch of 100, 16 tiles: v16 splits its K loop eight ways on an H100
GPU_TEST_SIZES = (
    (1, 1, 1),
    (17, 33, 65),
    (70, 129, 31),
    (1000, 777, 333),
    (100, 4096, 4096),
    (4095, 4097, 1000),
    (4096, 4096, 4096),
)
BENCH_SIZES = (1024, 2048, 4096, 8192)
HEADLINE_SIZE = 4096
BASELINE = "cuBLAS GemmEx"
STRONGEST = "baseline"  # cuBLAS in each kind's own precision: float16 or bfloat16 in, float32 out
SIZE_DIMS = (1, 3)  # n (square) or M x N x K


def dims(size):
    """(M, N, K) of a size: n means n x n x n."""
    if isinstance(size, int):
        return size, size, size
    m, n, k = size
    return m, n, k


def TOLERANCE(size):
    """Relative norm error of float32 accumulation over K (see the module docstring)."""
    k = dims(size)[2]
    return max(2e-6, 2.0**-21 * math.sqrt(k))


def to_bfloat16(x):
    """float32 values rounded to bfloat16 (nearest, ties to even) as uint16 bit patterns (finite values)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + (bits >> 16 & 1)) >> 16).astype(np.uint16)  # half an ulp, and one more on a tie to odd


def bfloat16_values(bits):
    """The float32 values of bfloat16 bit patterns (exact: a bfloat16 is the top half of a float32)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def values(x):
    """A matrix of this family as float64: float16 as it is, uint16 read as bfloat16."""
    return (bfloat16_values(x) if x.dtype == np.uint16 else x).astype(np.float64)


def make_inputs(size, seed, kind="float16"):
    m, n, k = dims(size)
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    if kind == "bfloat16":
        return to_bfloat16(A), to_bfloat16(B)
    return A.astype(np.float16), B.astype(np.float16)


def reference(A, B):
    return values(A) @ values(B)


def output_for(A, B):
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"A is {A.shape[0]} x {A.shape[1]} and B is {B.shape[0]} x {B.shape[1]}: A's columns must equal B's rows"
        )
    return (A.shape[0], B.shape[1]), np.float32


def flops(size):
    m, n, k = dims(size)
    return 2 * m * n * k


def bytes_moved(size):
    m, n, k = dims(size)
    return 2 * (m * k + k * n) + 4 * m * n


def baseline(A, B, out):
    """cublasGemmEx: float16 (or bfloat16) A and B, float32 out, float32 compute (``zoo.bench.libraries``)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.cublas_gemm_ex(A, B, out)


def matmul_fp16_out(A, B, out):
    """cupy.matmul on the float16 matrices: a float16 result, returned (out is left alone). CuPy has no bfloat16."""
    from zoo.errors import OutOfRange

    if A.dtype != np.float16:
        raise OutOfRange("cupy.matmul has no bfloat16: on uint16 it would multiply integers")
    import cupy

    return cupy.matmul(A, B)  # checked: a float16 result, within ROW_TOLERANCE


def triton_matmul(A, B, out):
    """The product as a Triton kernel (``zoo.bench.triton_rows.matmul``): block pointers and ``tl.dot`` on the tensor
    cores, float16 or bfloat16 in, float32 accumulated and out, tiles chosen by Triton's autotuner from three (wgmma
    with TMA on Hopper, as Triton picks). Needs Triton and PyTorch (the row says so where they are missing)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.triton_rows().matmul(A, B, out)


EXTRA_BASELINES = {"triton": triton_matmul}
ROW_CODE = {"triton": "zoo.bench.triton_rows.matmul"}
CEILINGS = {"cupy.matmul fp16 out": matmul_fp16_out}  # timed; its output is float16
ROW_TOLERANCE = {"cupy.matmul fp16 out": 2e-3}  # float16 rounding of the result: about 3e-4 relative


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(A, B):
    """numpy.matmul on float32 copies of the float16 (or bfloat16) inputs, through NumPy's BLAS (every core): a CPU
    BLAS has no float16 GEMM, and NumPy's own float16 matmul loops element by element (minutes at 4096^3)."""
    as_float32 = bfloat16_values if A.dtype == np.uint16 else (lambda x: x.astype(np.float32))
    return as_float32(A) @ as_float32(B)


CPU = {"cpu_numpy": (cpu_numpy, "blas")}
