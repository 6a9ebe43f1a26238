"""Running a family's computation as a PyTorch user writes it, eager (each op its own kernel, temporaries in DRAM) or
under ``torch.compile`` (TorchInductor fuses the ops into generated Triton kernels): rows that show what the
compiler buys against the numba steps, the seeds' "fuse more" lever. The torch code itself is the family's, in its
spec beside its CuPy and NumPy forms (fusion's ``torch_chain``, softmax's ``torch_softmax``...).

Imported only when such a row runs, through ``zoo.bench.libraries.torch_rows``, which says "torch not installed"
(``zoo.errors.Unavailable``) where PyTorch is missing. The CuPy array reaches PyTorch as a tensor over the same
memory (DLPack, no copy) and the tensor PyTorch returns goes back to the harness the same way, so no row pays a copy
into ``out`` that its user would not write. The kernels run on PyTorch's current stream, the default stream, on which
the harness records its events. A compiled function compiles on its first call of a shape (seconds, before the row
is timed: the harness checks a row once first), for that shape only (``dynamic=False``, as for a model's fixed
batch).
"""

import cupy
import torch

_COMPILED = {}  # (function, mode) -> torch.compile(function, mode=mode)
_TENSORS = {}  # (address, shape, dtype) of a CuPy array -> a tensor over it: a user's loop holds its tensors already


def _tensor(x):
    """A tensor over a CuPy array's memory, made once per array."""
    key = (x.data.ptr, x.shape, x.dtype.str)
    found = _TENSORS.get(key)
    if found is None:
        if any(shape != x.shape for _, shape, _ in _TENSORS):  # the harness rotates a few input sets of one size
            _TENSORS.clear()  # a new size: let the old arrays go
        found = _TENSORS[key] = torch.from_dlpack(x)
    return found


def call(function, x):
    """``function`` (torch ops on one tensor) on a CuPy array, eager; its result as a CuPy array over its memory."""
    return cupy.from_dlpack(function(_tensor(x)))


def call_compiled(function, x, mode=None):
    """``torch.compile(function, mode=mode)`` (compiled once per function and mode) on a CuPy array, as ``call``.
    With mode "reduce-overhead" the compiled kernels are replayed as a CUDA graph, which copies x into the graph's own
    input buffer first and rewrites its output buffer on the next replay: the harness reads each result before the
    next call, as a decode loop would."""
    key = (function, mode)
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(function, mode=mode, dynamic=False)
    return cupy.from_dlpack(_COMPILED[key](_tensor(x)))
