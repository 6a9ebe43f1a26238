r"""Argmax of each row: the index of the largest logit, greedy decoding's last op.

A language model's last projection gives a logit for every token of the vocabulary
(128,256 at Llama-3-8B); greedy decoding takes the largest. It is a reduction, as the
reduce family's sum, but of pairs (value, index): two pairs combine to the one with the
larger value, and of equal values to the smaller index (NumPy's argmax: the first
occurrence), a rule that is associative and commutative, so any tree of threads,
warps and blocks may apply it. At decode there is one row: 512 KB that a single block
reads at a fraction of the GPU's bandwidth, which is the lesson of the second step.

Formats: logits float32 (the gemv family writes float32), the result int32, one index
a row, left on the GPU for the next token's embedding gather. Sizes are rows x
vocabulary (an integer n is one row). Bytes moved: 4 an element read, 4 a row written.
FLOPs: one comparison an element. Exact (TOLERANCE 0): an index is right or wrong. The
inputs are finite (a NaN logit has no place in the order).
"""

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange, Unavailable

ORDER = 190  # after silu_mul (187): a token's last op
INPUTS = ("logits",)
DTYPE = np.float32
NDIM = 2
SIZE_DIMS = (1, 2)  # vocabulary (one row) or rows x vocabulary
BLOCK = 64 if SIMULATOR else 256  # threads per block in every step, a power of two (v01's tree halves it)
CHUNK = 4 * BLOCK  # elements of a row a block of v02 takes

# Simulator sizes: one element; rows shorter than a block; a row v02 splits into several chunks, the last one short
TEST_SIZES = ((1, 1), (3, 33), (2, 1000))
GPU_TEST_SIZES = ((1, 1), (7, 1001), (1, 128256), (64, 128256), (3, 1_000_003))
BENCH_SIZES = ((1, 128256), (64, 128256))
HEADLINE_SIZE = (1, 128256)  # a decode step of Llama-3-8B
BASELINE = "cupy.argmax"
TOLERANCE = 0  # an index is right or wrong
LIMIT = 2**31  # elements: the steps' uint32 indices stay below 2^32


def shape(size):
    """(rows, vocabulary) of a size: n means one row."""
    if isinstance(size, (tuple, list)):
        rows, n = size
        return int(rows), int(n)
    return 1, int(size)


def make_inputs(size, seed):
    rows, n = shape(size)
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, n), dtype=np.float32) * np.float32(4),)


def reference(logits):
    return np.argmax(logits, axis=1)  # the first of equal maxima


def output_for(logits):
    return (logits.shape[0],), np.int32


def flops(size):
    rows, n = shape(size)
    return rows * n  # a comparison an element


def bytes_moved(size):
    rows, n = shape(size)
    return 4 * rows * n + 4 * rows


def check_index_range(logits):
    """OutOfRange for logits too large for the steps' uint32 indices (every step's validate)."""
    if logits.size >= LIMIT:
        raise OutOfRange(f"argmax indexes with uint32: fewer than 2^31 logits, got {logits.size}")


def baseline(logits, out):
    import cupy

    out[...] = cupy.argmax(logits, axis=1)  # int64 indices, stored as int32


def torch_argmax(logits, out):
    """PyTorch's ``argmax`` on the same array (shared, not copied)."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch not installed ({e})") from None
    torch.as_tensor(out, device="cuda").copy_(torch.as_tensor(logits, device="cuda").argmax(dim=1))


EXTRA_BASELINES = {"torch": torch_argmax}


def copy_ceiling(logits, out):
    """A device-to-device copy of half the call's bytes: it reads and writes what the argmax reads."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((logits,), _copied_bytes(logits))


def _copied_bytes(logits):
    return (4 * logits.size + 4 * logits.shape[0]) // 2


CEILINGS = {"copy_ceiling": copy_ceiling}
ROW_REFERENCE = {"copy_ceiling": lambda logits: logits.reshape(-1).view(np.uint8)[: _copied_bytes(logits)]}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


def cpu_numpy(logits):
    """NumPy's argmax (one core)."""
    return np.argmax(logits, axis=1).astype(np.int32)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
