"""Two families' computations written in Triton's own idiom: rows that show what Triton's block programs buy and
cost beside the numba steps (vector_add and softmax, the first two of Triton's own tutorials).

Imported only when such a row runs, through ``zoo.bench.libraries.triton_rows``, which says "triton not installed"
(``zoo.errors.Unavailable``) where Triton or PyTorch is missing. The arrays reach Triton as PyTorch tensors over
the same memory (DLPack, no copy), and the kernels run on PyTorch's current stream: the default stream, on which the
harness records its events.
"""

import torch
import triton
import triton.language as tl

from zoo.errors import OutOfRange

ADD_BLOCK = 1024  # elements a program adds: 4 KiB of each input, 8 per thread at Triton's default of 4 warps
LONGEST_ROW = 16384  # a softmax program holds its whole row in registers: beyond this it would spill


@triton.jit
def _add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # A program owns BLOCK consecutive elements; Triton spreads them over its threads and vectorizes the accesses.
    where = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = where < n  # the last program's tail
    total = tl.load(a_ptr + where, mask=inside) + tl.load(b_ptr + where, mask=inside)
    tl.store(out_ptr + where, total, mask=inside)


def vector_add(a, b, out):
    """out = a + b (CuPy arrays), one Triton program per ADD_BLOCK elements."""
    n = a.size
    a, b, out = (torch.from_dlpack(x) for x in (a, b, out))
    _add_kernel[(triton.cdiv(n, ADD_BLOCK),)](a, b, out, n, BLOCK=ADD_BLOCK)


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    # One program a row: the row is read once into registers (BLOCK, the next power of two, padded with -inf),
    # its max and sum taken there, and the result written once: 8 bytes an element, as the fused steps move.
    row = tl.program_id(0).to(tl.int64)  # rows x cols can pass 2^31 elements
    where = tl.arange(0, BLOCK)
    inside = where < cols
    x = tl.load(x_ptr + row * cols + where, mask=inside, other=-float("inf"))
    shifted = x - tl.max(x, axis=0)
    e = tl.exp(shifted)  # exp(-inf) = 0: the padding adds nothing to the sum
    tl.store(out_ptr + row * cols + where, e / tl.sum(e, axis=0), mask=inside)


def softmax(x, out):
    """Row-wise softmax of a 2-D float32 CuPy array into out, one Triton program a row."""
    rows, cols = x.shape
    if cols > LONGEST_ROW:
        raise OutOfRange(f"the Triton softmax holds a row in registers: at most {LONGEST_ROW} columns, got {cols}")
    block = triton.next_power_of_2(cols)
    warps = min(16, max(1, block // 256))  # about 8 elements a thread: a short row one warp, a long one sixteen
    x, out = torch.from_dlpack(x), torch.from_dlpack(out)
    _softmax_kernel[(rows,)](x, out, cols, BLOCK=block, num_warps=warps)
