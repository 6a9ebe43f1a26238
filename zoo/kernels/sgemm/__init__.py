"""SGEMM, C = alpha * A @ B + beta * C in float32: from a naive kernel toward cuBLAS.

The flagship family. A (M x K) times B (K x N) does 2 M N K floating-point
operations on 4 (M K + K N + M N) bytes, so for large matrices it is bound by
arithmetic, not memory: every step cuts the memory traffic per FLOP (coalescing,
shared-memory tiles, register tiles, wide loads) or the instructions per FLOP
(vector loads, fewer bank conflicts, warp tiling, cheaper index arithmetic),
until the FMA units are what limits it. The baseline is cuBLAS SGEMM through
``cupy.matmul`` in float32 with TF32 off.

Sizes are n (square) or M x N x K. Every variant takes any M, N, K >= 1: the
first steps guard each access inside the kernel; v06 to v10 send shapes that
are not whole tiles through ``padding.run_tiled``, which copies A and B into
zero-padded buffers and crops the result (its cost is inside the timed launch);
from v11 on, the kernel handles partial tiles itself and nothing is copied.
v14 is v12's kernel with its hot loop unrolled (``zoo.device.jit.unrolled``),
launched by v13's split of the last wave.
Inputs must be row-major and C-contiguous; anything else is refused, not copied.

TF32 tensor cores (v15)
-----------------------
v15 leaves the FMA units for the tensor cores in TF32: float32 in and out, each
input rounded to TF32 (float32's exponent, 10 of its 23 mantissa bits), the
products summed in float32 by ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``.
It is checked against its own tolerance (1e-3: its ``TOLERANCE`` says why), not
the family's, and ``zoo run`` shows every row's error against float64 beside
its time, so v15's accuracy stands next to v14's. The row ``cublas_tf32`` is
``cupy.matmul`` as it runs with ``CUPY_TF32=1`` (cuBLAS with
``CUBLAS_COMPUTE_32F_FAST_TF32``), set for that call only: the baseline and
every other row stay true float32. Its tolerance is v15's (``ROW_TOLERANCE``).

TF32 on Hopper's wgmma (v16)
----------------------------
v16 takes TF32 where a learner with float32 matrices looks for it, here rather
than in hgemm: its inputs and output are float32, its strongest row is cuBLAS TF32
and v15 is the step it beats. Its kernel is hgemm v15's (TMA, a producer
warpgroup, persistent tiles in groups) issuing ``wgmma...m64n256k8.f32.tf32.tf32``
(K = 8 a instruction: 32 bytes of a row, as hgemm's 16 halves). wgmma reads tf32
operands K-major only (PTX ISA: the transposes are for .f16 and .bf16), and B here
is K x N row-major, N-major, so v16 packs B once as B^T (its ``pack``: made before
the timing and reused by a plain call on the same B, ``Variant.prepared``). The
tensor core ignores the 13 low mantissa bits of each float32 word, so v16
truncates where v15 rounds (``cvt.rna``): about 7.7e-4 against float64 where v15
gives 2.9e-4 and v14, true float32, 5e-6; ``zoo run`` prints each beside its time.

Each of the 32 lanes of a warp holds fixed elements of every tile (PTX ISA,
"Matrix Fragments for mma.m16n8k8", .tf32); with ``g = lane // 4`` and
``t = lane % 4``, every register one element (a float32 whose low 13 bits the
tensor core ignores)::

    register   A is 16 x 8 (m x k)    B is 8 x 8 (k x n)    C and D are 16 x 8 (m x n)
    a0         A[g,     t]            b0   B[t,     g]      c0, c1   C[g,     2t], C[g,     2t+1]
    a1         A[g + 8, t]            b1   B[t + 4, g]      c2, c3   C[g + 8, 2t], C[g + 8, 2t+1]
    a2         A[g,     t + 4]
    a3         A[g + 8, t + 4]

C and D are laid out as in hgemm's m16n8k16. ``ldmatrix`` (16-bit elements)
serves A unchanged: an 8 x 8 matrix of 16-bit elements is an 8 x 4 matrix of
float32, and lane l receives word l % 4 of row l // 4, which is element (g, t):
a0 to a3 are its four matrices (rows 0-7 and 8-15 at k 0-3, then at k 4-7).
B needs element (t, g), a column, and ``ldmatrix.trans`` transposes 16-bit
halves, not 32-bit words, so v15 reads B with one 32-bit load per register.
"""

import math
import numbers
import os

import numpy as np

from zoo.device import float32

ORDER = 30
INPUTS = ("A", "B", "C?")
DTYPE = np.float32
NDIM = 2
TOLERANCE = 2e-5  # relative norm error of float32 accumulation over K up to 8192 (measured ~5e-6)
TEST_SIZES = (
    (1, 1, 1),
    (70, 129, 31),
)  # partial tiles on every axis and small K: the simulator pays per K step (whole tiles, 33x17x21: test_sgemm)
GPU_TEST_SIZES = ((1, 1, 1), (33, 17, 65), (70, 129, 31), (1000, 777, 333), (4096, 4096, 4096))
BENCH_SIZES = (1024, 2048, 4096, 8192, (256, 4096, 4096))  # the last: a skinny product, a long K
HEADLINE_SIZE = 4096  # the size the README table, the plot and each step's measured line quote
MAPPING = {"v01": (40, 40, 8)}  # the picture: 32 x 32 blocks; a warp reads a column of A, one element of B
BASELINE = "cuBLAS"
SIZE_DIMS = (1, 3)  # n (square) or M x N x K

os.environ.setdefault("CUPY_TF32", "0")  # the baseline is true float32 SGEMM, not TF32 tensor cores


def dims(size):
    """(M, N, K) of a size: n means n x n x n."""
    if isinstance(size, int):
        return size, size, size
    m, n, k = size
    return m, n, k


def sgemm_element(A, B, C, out, alpha, beta, row, col):
    """One element of the result, a dot product of a row of A and a column of B: v01 runs it on one GPU thread per
    element, ``cpu_numba`` on the CPU's threads."""
    acc = float32(0.0)
    for k in range(A.shape[1]):
        acc += A[row, k] * B[k, col]
    if beta != 0:  # C is only read when it contributes
        out[row, col] = alpha * acc + beta * C[row, col]
    else:
        out[row, col] = alpha * acc


def make_inputs(size, seed):
    m, n, k = dims(size)
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)


def reference(A, B, C=None, alpha=1.0, beta=0.0):
    result = alpha * (A.astype(np.float64) @ B.astype(np.float64))
    if beta != 0:
        result += beta * C.astype(np.float64)
    return result


def output_for(A, B, C=None, alpha=1.0, beta=0.0):
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"A is {A.shape[0]} x {A.shape[1]} and B is {B.shape[0]} x {B.shape[1]}: A's columns must equal B's rows"
        )
    shape = (A.shape[0], B.shape[1])
    if C is not None and tuple(C.shape) != shape:
        raise ValueError(f"C must be {shape[0]} x {shape[1]} (A's rows x B's columns), got {tuple(C.shape)}")
    if beta != 0 and C is None:
        raise ValueError("beta != 0 needs C")
    for name, value in (("alpha", alpha), ("beta", beta)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        raise ValueError("alpha and beta must be finite numbers")
    return shape, np.float32


def flops(size):
    m, n, k = dims(size)
    return 2 * m * n * k


def bytes_moved(size):
    m, n, k = dims(size)
    return 4 * (m * k + k * n + m * n)


def baseline(A, B, out):
    import cupy

    cupy.matmul(A, B, out=out)


def cublas_tf32(A, B, out):
    """cupy.matmul as with CUPY_TF32=1: CuPy's compute type for float32 set to TF32 for this call, then restored."""
    import cupy
    from cupy._core import _routines_linalg as linalg  # where CuPy keeps the compute type CUPY_TF32 sets

    previous = linalg.get_compute_type(np.float32)
    linalg.set_compute_type(np.float32, linalg.COMPUTE_TYPE_TF32)
    try:
        cupy.matmul(A, B, out=out)
    finally:
        linalg.set_compute_type(np.float32, previous)


def triton_fp32(A, B, out):
    """The product as a Triton kernel (``zoo.bench.triton_rows.matmul``): block pointers and ``tl.dot`` on float32
    FMAs (input_precision "ieee"), tiles and stages chosen by Triton's autotuner from three. Needs Triton and
    PyTorch (the row says so where they are missing)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.triton_rows().matmul(A, B, out, precision="ieee")


def triton_tf32(A, B, out):
    """The same Triton kernel with ``tl.dot`` on TF32 tensor cores (input_precision "tf32"), as v15 and cuBLAS TF32."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.triton_rows().matmul(A, B, out, precision="tf32")


EXTRA_BASELINES = {"cublas_tf32": cublas_tf32, "triton": triton_fp32, "triton tf32": triton_tf32}
STRONGEST = "cublas_tf32"  # the best step runs on TF32 tensor cores: cuBLAS in the same precision
ROW_TOLERANCE = {"cublas_tf32": 1e-3, "triton tf32": 1e-3}  # TF32 inputs, as v15's TOLERANCE (cuBLAS may truncate
# them: ~7.7e-4)
ROW_CODE = {"triton": "zoo.bench.triton_rows.matmul", "triton tf32": "zoo.bench.triton_rows.matmul"}


# -- the CPU beside the GPU: NumPy's BLAS, and the same Python as v01 compiled for the CPU -------------------------
def cpu_numpy(A, B, C=None, alpha=1.0, beta=0.0):
    """numpy.matmul in float32 through NumPy's BLAS (every core)."""
    product = A @ B
    if alpha != 1.0:
        product *= np.float32(alpha)
    if beta != 0.0 and C is not None:
        product += np.float32(beta) * C
    return product


CPU_NUMBA_LIMIT = 2048**3  # multiply-adds: the naive loop takes minutes above this on a CPU
_CPU_LOOP = []


def cpu_numba(A, B, C=None, alpha=1.0, beta=0.0):
    """v01's element function compiled by numba for the CPU: one dot product per element, rows split over threads."""
    from zoo.errors import OutOfRange

    if A.shape[0] * B.shape[1] * A.shape[1] > CPU_NUMBA_LIMIT:
        raise OutOfRange(f"cpu_numba runs the naive loop up to {CPU_NUMBA_LIMIT:,} multiply-adds (minutes above)")
    if not _CPU_LOOP:
        from numba import njit, prange

        element = njit(sgemm_element)  # the very function v01's kernel calls, compiled for the host

        @njit(parallel=True)
        def every_element(A, B, C, out, alpha, beta):
            for row in prange(out.shape[0]):  # numba splits the rows over its threads
                for col in range(out.shape[1]):
                    element(A, B, C, out, alpha, beta, row, col)

        _CPU_LOOP.append(every_element)
    out = np.empty((A.shape[0], B.shape[1]), np.float32)
    _CPU_LOOP[0](A, B, out if C is None else C, out, np.float32(alpha), np.float32(beta))
    return out


CPU = {"cpu_numpy": (cpu_numpy, "blas"), "cpu_numba": (cpu_numba, "numba")}
