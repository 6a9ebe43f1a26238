r"""Embedding gather: the rows of a token table picked by token ids, the first op of a language model.

A model's input is token ids; its first op replaces each id by its row of a learned
table, vocabulary x hidden (128,256 x 4096 at Llama-3-8B, 1 GB in float16). Only the
picked rows are read: a decode step reads one row, 8 KB of the gigabyte, and the kernel
is a gather, a copy whose source addresses come from data. In a decode loop the id is
the argmax of the previous token, already on the GPU (the argmax family), so the gather
reads it there: the host never learns the token, and a whole token can be one CUDA
graph.

Formats, as the model composes them (``zoo.llm``): the table float16, the ids int32, the
rows written float32 (the residual stream, which the rmsnorm family adds into). An id
outside the table is refused before any launch where the ids are on the host; on the
GPU the kernels write that row as zeros rather than read outside the table.

Sizes are tokens x vocabulary x hidden (an integer n is n tokens of a 1000 x 64
table). Bytes moved: 2 read and 4 written an element of the picked rows, 4 an id.
FLOPs: none (reported as one an element, a conversion). Exact: a float16 widened to
float32 is exact, so TOLERANCE is 0.
"""

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange, Unavailable

ORDER = 178  # before rmsnorm (180): a token's first op
INPUTS = ("table", "ids")
DTYPE = {"table": np.float16, "ids": np.int32}
NDIM = {"table": 2, "ids": 1}
SIZE_DIMS = (3,)  # tokens x vocabulary x hidden
THREADS = 64 if SIMULATOR else 256  # threads per block in every step

# Simulator sizes: one element; rows of no whole 16-byte pieces (the scalar path); rows of whole pieces
TEST_SIZES = ((1, 1, 1), (3, 50, 33), (5, 100, 64))
GPU_TEST_SIZES = ((1, 1, 1), (7, 1001, 33), (1, 32000, 4096), (1000, 32000, 4096))  # tables of 256 MB
BENCH_SIZES = ((1, 128256, 4096), (4096, 128256, 4096))
HEADLINE_SIZE = (4096, 128256, 4096)
BASELINE = "CuPy: table[ids] widened to float32"
TOLERANCE = 0  # a float16 widened to float32 is exact
LIMIT = 2**31  # elements: the steps' uint32 indices stay below 2^32


def dims(size):
    """(tokens, vocabulary, hidden) of a size; an integer n is n tokens of a 1000 x 64 table."""
    if not isinstance(size, (tuple, list)):
        return int(size), 1000, 64
    tokens, vocab, hidden = (int(s) for s in size)
    return tokens, vocab, hidden


def make_inputs(size, seed):
    tokens, vocab, hidden = dims(size)
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((vocab, hidden), dtype=np.float32).astype(np.float16)
    ids = rng.integers(0, vocab, tokens, dtype=np.int32)
    return table, ids


def reference(table, ids):
    return table[ids].astype(np.float64)


def output_for(table, ids):
    if isinstance(ids, np.ndarray) and ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise ValueError(f"token ids must lie in 0 .. {table.shape[0] - 1} (the table's rows)")
    return (ids.shape[0], table.shape[1]), np.float32


def flops(size):
    tokens, vocab, hidden = dims(size)
    return tokens * hidden  # a conversion an element


def bytes_moved(size):
    tokens, vocab, hidden = dims(size)
    return tokens * hidden * (2 + 4) + 4 * tokens


def check_index_range(table, ids):
    """OutOfRange for a table or output too large for the steps' uint32 indices (every step's validate)."""
    if max(table.size, ids.size * table.shape[1]) >= LIMIT:
        raise OutOfRange("embedding indexes with uint32: the table and the rows must hold fewer than 2^31 elements")


def baseline(table, ids, out):
    import cupy

    cupy.copyto(out, table[ids], casting="unsafe")


def torch_embedding(table, ids, out):
    """PyTorch's ``embedding`` on the same arrays (shared, not copied), widened into out."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch not installed ({e})") from None
    rows = torch.nn.functional.embedding(torch.as_tensor(ids, device="cuda"), torch.as_tensor(table, device="cuda"))
    torch.as_tensor(out, device="cuda").copy_(rows)


EXTRA_BASELINES = {"torch": torch_embedding}


def copy_ceiling(table, ids, out):
    """A device-to-device copy of half the call's bytes: it reads and writes what the gather moves."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((table,), _copied_bytes(table, ids))


def _copied_bytes(table, ids):
    return min(table.nbytes, ids.shape[0] * table.shape[1] * (2 + 4) // 2)


CEILINGS = {"copy_ceiling": copy_ceiling}
ROW_REFERENCE = {"copy_ceiling": lambda table, ids: table.reshape(-1).view(np.uint8)[: _copied_bytes(table, ids)]}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


def cpu_numpy(table, ids):
    """NumPy's fancy indexing, widened to float32 (one core)."""
    return table[ids].astype(np.float32)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
