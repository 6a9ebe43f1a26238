r"""Rotary position embedding (RoPE): each pair of a query's or key's elements turned by an angle set by its position.

Attention compares queries with keys by dot products, which know nothing of where the
tokens stand. RoPE (Su et al., 2021; Llama's position encoding) writes the position into
q and k themselves: pair j of a head's d elements, (x_j, x_{j + d/2}), is rotated by the
angle p f_j, where p is the token's position and f_j = theta^(-2j / d) a frequency that
falls from 1 (j = 0, a turn every 6 tokens) to about 1 / theta (slow):

    y_j         = x_j cos(p f_j) - x_{j+d/2} sin(p f_j)
    y_{j + d/2} = x_{j+d/2} cos(p f_j) + x_j sin(p f_j)          (j < d/2; theta = 500,000)

A rotation keeps lengths, and the dot product of a query rotated by p and a key rotated
by p' depends on p - p' only: relative position, for free. The pairing (j, j + d/2) is
the "rotate half" layout of Llama's reference code and Hugging Face (the original paper
pairs neighbours, 2j and 2j + 1: another layout of the same weights). Llama 3.1's
frequency rescaling for long contexts is not applied: theta alone, as Llama 3.

Formats, as the model composes them (``zoo.llm``): x is the projection's float32 output
(tokens x heads x d: the query heads and the key heads of one fused QKV product), the
positions int32 (one per token), y float16 (what attention and the KV cache read).

Sizes are tokens x heads x head size. Bytes moved: x read (4) and y written (2) an
element, 4 a token for its position. FLOPs: 3 an element (two multiplies, an add); the
sines and cosines are the steps' lesson: v01 computes one pair of them for every
element, v02 one for every pair of every token, shared by the token's heads.

Tolerance (relative norm error against float64 of the same inputs): 2e-3. y is rounded
to float16 (2^-11 relative at worst). The angle is a float32 product: at position
8191 and f_0 = 1 its rounding is up to 2^-11 radians, as large again for the fastest
pairs (measured near 6e-4 in the simulator). A pair rotated the wrong way or by the
wrong position is an error of order sqrt(2 / d) or more: 12% at d = 128.
"""

import math

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange, Unavailable

ORDER = 185  # after rmsnorm (180): the decoder's ops in the order a layer runs them
INPUTS = ("x", "positions")
DTYPE = {"x": np.float32, "positions": np.int32}
NDIM = {"x": 3, "positions": 1}
SIZE_DIMS = (3,)  # tokens x heads x head size
THETA = 500_000.0  # Llama 3's rope_theta
MAX_POSITION = 8192  # positions make_inputs draws: up to Llama 3's context

THREADS = 64 if SIMULATOR else 256  # threads per block in every step

# Simulator sizes: a head of one pair; heads of 3 pairs (no whole float4 vectors: the scalar path); a Llama head
# (d = 128, v03's vectors); and 10 pairs a head, cut across v03's vectors of four
TEST_SIZES = ((1, 1, 2), (3, 5, 6), (2, 3, 128), (5, 2, 40))
GPU_TEST_SIZES = ((1, 1, 2), (7, 3, 6), (33, 5, 64), (1, 40, 128), (1000, 40, 128), (4096, 40, 128))
BENCH_SIZES = ((1, 40, 128), (4096, 40, 128))
HEADLINE_SIZE = (4096, 40, 128)  # a prefill of 4096 tokens: Llama-3-8B's 32 query and 8 key heads
BASELINE = "CuPy ops: angles, cos, sin, rotate half"
TOLERANCE = 2e-3
LIMIT = 2**31  # elements: the steps' uint32 indices stay below 2^32


def dims(size):
    """(tokens, heads, head size) of a size; an integer n is n tokens of one head of 128."""
    if not isinstance(size, (tuple, list)):
        return int(size), 1, 128
    tokens, heads, d = (int(s) for s in size)
    return tokens, heads, d


def make_inputs(size, seed):
    tokens, heads, d = dims(size)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, heads, d), dtype=np.float32)
    positions = rng.integers(0, MAX_POSITION, tokens, dtype=np.int32)
    return x, positions


def angles(positions, d):
    """float64 (tokens, d / 2): the angle p f_j of every token's pair j."""
    frequencies = THETA ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    return positions.astype(np.float64)[:, None] * frequencies[None, :]


def reference(x, positions):
    d = x.shape[2]
    a = angles(positions, d)[:, None, :]  # one angle a pair, the same for every head of a token
    cos, sin = np.cos(a), np.sin(a)
    first, second = x[..., : d // 2].astype(np.float64), x[..., d // 2 :].astype(np.float64)
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=2)


def output_for(x, positions):
    if x.shape[2] % 2:
        raise ValueError(f"RoPE turns pairs of a head's elements: the head size must be even, got {x.shape[2]}")
    if positions.shape != (x.shape[0],):
        raise ValueError(f"one position a token: x has {x.shape[0]} tokens, positions {positions.shape[0]}")
    return x.shape, np.float16


def flops(size):
    tokens, heads, d = dims(size)
    return 3 * tokens * heads * d  # two multiplies and an add an element


def bytes_moved(size):
    tokens, heads, d = dims(size)
    return tokens * heads * d * (4 + 2) + 4 * tokens  # x read, y written, a position a token


def check_index_range(x, positions):
    """OutOfRange for an x too large for the steps' uint32 indices (every step's validate)."""
    if x.size >= LIMIT:
        raise OutOfRange(f"rope indexes with uint32: x must have fewer than 2^31 elements, got {x.size}")


def baseline(x, positions, out):
    import cupy

    d = x.shape[2]
    frequencies = THETA ** (-cupy.arange(0, d, 2, dtype=cupy.float32) / d)
    a = (positions.astype(cupy.float32)[:, None] * frequencies[None, :])[:, None, :]
    cos, sin = cupy.cos(a), cupy.sin(a)
    first, second = x[..., : d // 2], x[..., d // 2 :]
    out[..., : d // 2] = first * cos - second * sin
    out[..., d // 2 :] = second * cos + first * sin


def torch_rope(x, positions, out):
    """Hugging Face's ``apply_rotary_pos_emb`` in PyTorch ops on the same arrays (shared, not copied)."""
    torch = torch_module()
    x, positions = torch.as_tensor(x, device="cuda"), torch.as_tensor(positions, device="cuda")
    d = x.shape[2]
    frequencies = THETA ** (-torch.arange(0, d, 2, dtype=torch.float32, device="cuda") / d)
    a = torch.outer(positions.float(), frequencies)
    a = torch.cat([a, a], dim=1)[:, None, :]
    rotated = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], dim=2)  # rotate_half
    torch.as_tensor(out, device="cuda").copy_(x * a.cos() + rotated * a.sin())


def torch_module():
    """PyTorch, imported when a row runs; ``Unavailable`` where it is not installed (the row says so)."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch not installed ({e})") from None
    return torch


EXTRA_BASELINES = {"torch": torch_rope}


def copy_ceiling(x, positions, out):
    """A device-to-device copy of half the call's bytes: it reads and writes what a one-pass kernel moves."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((x, positions), _copied_bytes(x))


def _copied_bytes(x):
    return x.size * (4 + 2) // 2


CEILINGS = {"copy_ceiling": copy_ceiling}
ROW_REFERENCE = {"copy_ceiling": lambda x, positions: x.reshape(-1).view(np.uint8)[: _copied_bytes(x)]}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


def cpu_numpy(x, positions):
    """The same rotation in NumPy, float32 (one core)."""
    d = x.shape[2]
    a = (positions.astype(np.float32)[:, None] * np.float32(THETA) ** (-np.arange(0, d, 2, dtype=np.float32) / d))[
        :, None, :
    ]
    cos, sin = np.cos(a), np.sin(a)
    first, second = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=2).astype(np.float16)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
LOG2_THETA = math.log2(THETA)  # f_j = 2^(-2j/d log2 theta): the steps' exp2
