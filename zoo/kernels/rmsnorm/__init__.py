r"""RMSNorm with the residual add fused: a row reduction and a map per row, the first op of every decoder layer.

A Llama-style decoder keeps a *residual stream* h, one row of ``hidden`` numbers per
token, and every sublayer (attention, the MLP) adds its output x to it. The next
sublayer reads h normalized by its root mean square and scaled by a learned weight:

    h = h + x,      y_j = h_j / sqrt(mean_k h_k^2 + eps) * w_j          (eps = 1e-5)

Written as a framework runs it, that is an add kernel (read x and h, write h) and a
norm kernel that reads h twice (the sum of squares, then the output): four trips of
h through DRAM where two are needed. Fused, one kernel reads x and h once, writes h
back once and writes y: the bytes of the call are then the floor, and the row's one
reduction (a sum of squares) is the only thing standing between the read and the
write. vLLM calls this ``fused_add_rms_norm``; it updates h *in place*, and so do
the steps here: ``residual`` is both an input and the stream's new value.

Formats, as the model composes them (``zoo.llm``): x and the residual in float32 (the
gemv family writes its products in float32, and a stream of float32 sums loses nothing
over 32 layers), the weight and y in float16 (what the next projection, a gemv, reads).
The arithmetic is float32 throughout; the reference is float64 of the same inputs.

Sizes are rows x hidden: one row is a decode step (1 x 4096 at Llama-3-8B), many rows
a prefill. Bytes moved: x read, residual read and written, y written and the weight
read once (4 + 8 + 2 bytes an element, plus 2 a column). FLOPs: 4 an element (add,
square-add, two multiplies). The baseline is the same computation as CuPy ops; the
``torch`` row is PyTorch's add and ``rms_norm`` where PyTorch is installed; the
strongest row is a device copy of the call's bytes (``copy_ceiling``).

Tolerance (relative norm error of y against float64): 1e-3. y is rounded to float16
once (2^-11 relative at worst, about 2^-12 on average), the float32 sum of squares
adds ``hidden`` roundings of 2^-24 (1e-5 at 4096): a lost element or a wrong scale is
an error of order 1 / sqrt(hidden) or more (1.6% at 4096, larger at every test size).
"""

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange, Unavailable

ORDER = 180  # after attention (175): the decoder's own ops begin here, then rope, silu_mul, embedding, argmax
INPUTS = ("x", "residual", "weight")
UPDATED_IN_PLACE = ("residual",)  # h += x: the harness restores it before each checked call
DTYPE = {"x": np.float32, "residual": np.float32, "weight": np.float16}
NDIM = {"x": 2, "residual": 2, "weight": 1}
SIZE_DIMS = (1, 2)  # hidden (one row) or rows x hidden
EPS = 1e-5  # Llama 3's rms_norm_eps

BLOCK = 64 if SIMULATOR else 256  # threads per row in every step, a power of two (v01 and v02's tree halves it)
VECTORS = 4  # float4 vectors of a row each thread holds in registers (v03): rows up to 16 BLOCK columns

# Simulator sizes: one element; a row shorter than a warp, rows cut at no multiple of 4 (the scalar path), a row of
# whole float4 vectors that fits the registers (v03's path), and one past them (v03 hands it to v02)
TEST_SIZES = ((1, 1), (3, 33), (2, 300), (2, 1024), (1, 1028))
GPU_TEST_SIZES = ((1, 1), (3, 33), (5, 1000), (1, 4096), (33, 4096), (4096, 4096), (7, 8193), (100, 14336))
BENCH_SIZES = ((1, 4096), (4096, 4096), (16384, 4096))
HEADLINE_SIZE = (4096, 4096)
BASELINE = "CuPy ops: h + x, mean of squares, rsqrt, multiply"
TOLERANCE = 1e-3
LIMIT = 2**31  # elements: the steps' uint32 indices stay below 2^32


def shape(size):
    """(rows, hidden) of a size: n means one row of n."""
    if isinstance(size, (tuple, list)):
        rows, cols = size
        return int(rows), int(cols)
    return 1, int(size)


def make_inputs(size, seed):
    rows, cols = shape(size)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=np.float32)  # a sublayer's output
    residual = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(4)  # the stream so far, larger
    weight = (1 + 0.1 * rng.standard_normal(cols)).astype(np.float16)  # trained norm weights sit near 1
    return x, residual, weight


def reference(x, residual, weight):
    h = x.astype(np.float64) + residual.astype(np.float64)
    return h / np.sqrt((h * h).mean(axis=1, keepdims=True) + EPS) * weight.astype(np.float64)


def output_for(x, residual, weight):
    if x.shape != residual.shape:
        raise ValueError(f"x is {x.shape} and residual {residual.shape}: the stream and the sublayer's output match")
    if weight.shape != (x.shape[1],):
        raise ValueError(f"weight has {weight.shape[0]} elements, a row has {x.shape[1]}")
    return x.shape, np.float16


def flops(size):
    rows, cols = shape(size)
    return 4 * rows * cols  # add, square-add, and two multiplies an element


def bytes_moved(size):
    rows, cols = shape(size)
    return rows * cols * (4 + 8 + 2) + 2 * cols  # x read, residual read and written, y written; the weight once


def check_index_range(x, residual, weight):
    """OutOfRange for a matrix too large for the steps' uint32 indices (every step's validate)."""
    if x.size >= LIMIT:
        raise OutOfRange(f"rmsnorm indexes with uint32: x must have fewer than 2^31 elements, got {x.size}")


def baseline(x, residual, weight, out):
    import cupy

    residual += x  # in place, as the steps
    scale = cupy.reciprocal(cupy.sqrt(cupy.mean(residual * residual, axis=1, keepdims=True) + EPS))
    cupy.multiply(residual * scale, weight.astype(cupy.float32), out=out)


def torch_rms_norm(x, residual, weight, out):
    """PyTorch's in-place add and ``rms_norm`` on the same arrays (shared, not copied). Needs PyTorch."""
    torch = torch_module()
    h = torch.as_tensor(residual, device="cuda")
    h.add_(torch.as_tensor(x, device="cuda"))
    w = torch.as_tensor(weight, device="cuda").float()
    y = torch.nn.functional.rms_norm(h, (h.shape[1],), w, EPS)
    torch.as_tensor(out, device="cuda").copy_(y)


EXTRA_BASELINES = {"torch": torch_rms_norm}


def torch_module():
    """PyTorch, imported when a row runs; ``Unavailable`` where it is not installed (the row says so)."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch not installed ({e})") from None
    return torch


def copy_ceiling(x, residual, weight, out):
    """A device-to-device copy of half the call's bytes: it reads and writes what the fused kernel moves."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((x, residual), _copied_bytes(x))


def _copied_bytes(x):
    return x.shape[0] * x.shape[1] * (4 + 8 + 2) // 2


CEILINGS = {"copy_ceiling": copy_ceiling}
ROW_REFERENCE = {
    "copy_ceiling": lambda x, residual, weight: np.concatenate([x.reshape(-1), residual.reshape(-1)]).view(np.uint8)[
        : _copied_bytes(x)
    ]
}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


def cpu_numpy(x, residual, weight):
    """The same ops in NumPy, float32 (one core)."""
    h = residual + x
    return (h / np.sqrt((h * h).mean(axis=1, keepdims=True) + np.float32(EPS)) * weight.astype(np.float32)).astype(
        np.float16
    )


CPU = {"cpu_numpy": (cpu_numpy, "one")}
