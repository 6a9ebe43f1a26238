r"""SiLU-and-multiply, SwiGLU's activation: silu(gate) times up, elementwise, between the MLP's two projections.

Llama's MLP is down(silu(gate(x)) * up(x)) (SwiGLU, Shazeer 2020): two projections of the
normed stream to the intermediate width (14,336 at Llama-3-8B), the SiLU of one,
silu(g) = g / (1 + exp(-g)), multiplied element by element with the other, and a third
projection back. Fused into one product, gate and up are the two halves of one output
row, [gate | up]: one GEMV reads both weight matrices in one pass (``zoo.llm``), and this
kernel reads its two halves and writes their product, the down projection's input.

Formats, as the model composes them: gate_up float32 (rows x 2n, the gemv family writes
float32), out float16 (rows x n, what the down projection reads). Sizes are rows x n
(n the intermediate width; an integer n is one row). Bytes moved: 8 read and 2 written
an output element. FLOPs: 4 an element (exp counted as one, the add, the divide, the
multiply).

Tolerance (relative norm error against float64 of the same inputs): 1e-3: y is rounded
to float16 once (2^-11 at worst), expf is within 2 ulp of float32. A wrong element (a
gate read from up's half, a missing SiLU) is an error of order 1 / sqrt(n) or more.
"""

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange, Unavailable

ORDER = 187  # after rope (185): the MLP's activation
INPUTS = ("gate_up",)
DTYPE = np.float32
NDIM = 2
SIZE_DIMS = (1, 2)  # n (one row) or rows x n
THREADS = 64 if SIMULATOR else 256  # threads per block in every step

# Simulator sizes: one element, rows of no whole float4 vectors (the scalar path), and rows of whole vectors
TEST_SIZES = ((1, 1), (3, 33), (2, 100), (1, 260))
GPU_TEST_SIZES = ((1, 1), (7, 1001), (33, 100), (1, 14336), (4096, 14336))
BENCH_SIZES = ((1, 14336), (4096, 14336))
HEADLINE_SIZE = (4096, 14336)
BASELINE = "CuPy ops: gate / (1 + exp(-gate)) * up"
TOLERANCE = 1e-3
LIMIT = 2**31  # elements: the steps' uint32 indices stay below 2^32


def shape(size):
    """(rows, n) of a size: n means one row."""
    if isinstance(size, (tuple, list)):
        rows, n = size
        return int(rows), int(n)
    return 1, int(size)


def make_inputs(size, seed):
    rows, n = shape(size)
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, 2 * n), dtype=np.float32) * np.float32(3),)  # SiLU's bend lies near 0


def reference(gate_up):
    n = gate_up.shape[1] // 2
    g, u = gate_up[:, :n].astype(np.float64), gate_up[:, n:].astype(np.float64)
    return g / (1 + np.exp(-g)) * u


def output_for(gate_up):
    if gate_up.shape[1] % 2:
        raise ValueError(f"gate_up holds gate and up side by side: an even width, got {gate_up.shape[1]}")
    return (gate_up.shape[0], gate_up.shape[1] // 2), np.float16


def flops(size):
    rows, n = shape(size)
    return 4 * rows * n


def bytes_moved(size):
    rows, n = shape(size)
    return rows * n * (8 + 2)  # gate and up read, y written


def check_index_range(gate_up):
    """OutOfRange for an array too large for the steps' uint32 indices (every step's validate)."""
    if gate_up.size >= LIMIT:
        raise OutOfRange(f"silu_mul indexes with uint32: fewer than 2^31 elements, got {gate_up.size}")


def baseline(gate_up, out):
    import cupy

    n = gate_up.shape[1] // 2
    g = gate_up[:, :n]
    cupy.multiply(g / (1 + cupy.exp(-g)), gate_up[:, n:], out=out)


def torch_silu_mul(gate_up, out):
    """PyTorch's ``silu`` times up on the same array (shared, not copied)."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch not installed ({e})") from None
    gu = torch.as_tensor(gate_up, device="cuda")
    n = gu.shape[1] // 2
    torch.as_tensor(out, device="cuda").copy_(torch.nn.functional.silu(gu[:, :n]) * gu[:, n:])


EXTRA_BASELINES = {"torch": torch_silu_mul}


def copy_ceiling(gate_up, out):
    """A device-to-device copy of half the call's bytes: it reads and writes what a one-pass kernel moves."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((gate_up,), _copied_bytes(gate_up))


def _copied_bytes(gate_up):
    return gate_up.size // 2 * (8 + 2) // 2


CEILINGS = {"copy_ceiling": copy_ceiling}
ROW_REFERENCE = {"copy_ceiling": lambda gate_up: gate_up.reshape(-1).view(np.uint8)[: _copied_bytes(gate_up)]}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


def cpu_numpy(gate_up):
    """The same in NumPy, float32 (one core)."""
    n = gate_up.shape[1] // 2
    g = gate_up[:, :n]
    return (g / (1 + np.exp(-g)) * gate_up[:, n:]).astype(np.float16)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
