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


# -- matmul: sgemm's float32 (on the FMA units or on TF32 tensor cores) and hgemm's float16 and bfloat16 --------------
def _matmul_configs(block_k, stages):
    """A few tilings for the autotuner to time on the first call of each shape and dtype (Triton's own tutorial's
    best ones on Hopper): 128 x 256 and 128 x 128 tiles, 64 x 256 for shapes with few rows of tiles."""
    tiles = ((128, 256, 8), (128, 128, 8), (64, 256, 4))
    return [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": block_k, "GROUP_M": 8}, num_warps=w, num_stages=stages)
        for m, n, w in tiles
    ]


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, a_row, b_row, c_row,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    # Programs in groups of GROUP_M tile rows, column by column: a group's tiles share A's rows and B's columns in L2
    # (sgemm's and hgemm's block order, tile_order.py).
    program = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    group = program // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (program % (GROUP_M * tiles_n)) % rows_in_group
    tile_n = (program % (GROUP_M * tiles_n)) // rows_in_group
    # Block pointers: Triton moves whole tiles (TMA or cp.async, swizzled shared memory) and pads past the edges.
    a = tl.make_block_ptr(a_ptr, (M, K), (a_row, 1), (tile_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K), order=(1, 0))
    b = tl.make_block_ptr(b_ptr, (K, N), (b_row, 1), (0, tile_n * BLOCK_N), (BLOCK_K, BLOCK_N), order=(1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for _ in range(tl.cdiv(K, BLOCK_K)):  # pipelined over num_stages tiles in flight
        a_tile = tl.load(a, boundary_check=(0, 1), padding_option="zero")  # zeros past K add nothing
        b_tile = tl.load(b, boundary_check=(0, 1), padding_option="zero")
        acc = tl.dot(a_tile, b_tile, acc, input_precision=PRECISION)  # tensor cores (or FMAs for "ieee")
        a = tl.advance(a, (0, BLOCK_K))
        b = tl.advance(b, (BLOCK_K, 0))
    corner = (tile_m * BLOCK_M, tile_n * BLOCK_N)
    c = tl.make_block_ptr(c_ptr, (M, N), (c_row, 1), corner, (BLOCK_M, BLOCK_N), order=(1, 0))
    tl.store(c, acc, boundary_check=(0, 1))


# One kernel, two lists of tilings: a float32 tile of K holds twice the bytes of a 16-bit one.
_matmul_32bit = triton.autotune(_matmul_configs(block_k=32, stages=3), key=["M", "N", "K", "PRECISION"])(_matmul_kernel)
_matmul_16bit = triton.autotune(_matmul_configs(block_k=64, stages=3), key=["M", "N", "K"])(_matmul_kernel)


def matmul(A, B, out, precision="ieee"):
    """out = A @ B in float32 (row-major CuPy arrays): float32 A and B with ``precision`` "ieee" (float32 FMAs, as
    sgemm's baseline) or "tf32" (tensor cores, as cuBLAS TF32), float16 A and B, or bfloat16 as uint16 bit patterns
    (hgemm's kinds), float32 accumulation."""
    M, K = A.shape
    N = B.shape[1]
    a, b, c = _tensor(A), _tensor(B), torch.from_dlpack(out)
    strides = (a.stride(0), b.stride(0), c.stride(0))  # rows apart; the columns of each must be contiguous
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    if a.dtype == torch.float32:
        _matmul_32bit[grid](a, b, c, M, N, K, *strides, PRECISION=precision)
    else:
        _matmul_16bit[grid](a, b, c, M, N, K, *strides, PRECISION="tf32")  # the precision of float32 inputs only


def _tensor(x):
    """A PyTorch tensor over a CuPy array's memory; a uint16 array is hgemm's bfloat16 (DLPack has no bfloat16 in
    CuPy, so the bits go across as int16 and are viewed as bfloat16)."""
    if x.dtype.kind == "u" and x.dtype.itemsize == 2:
        return torch.from_dlpack(x.view("i2")).view(torch.bfloat16)
    return torch.from_dlpack(x)


# -- attention's forward pass: FlashAttention-2 in Triton's idiom --------------------------------------------------
_ATTENTION_CONFIGS = [
    triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
    for m, n, w, s in ((128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3))
]
LOG2_E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x log2 e): one ex2 instruction


@triton.autotune(_ATTENTION_CONFIGS, key=["n", "HEAD_DIM", "CAUSAL"])
@triton.jit
def _attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, n, scale,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # A program owns BLOCK_M query rows of one head and walks that head's keys BLOCK_N at a time, keeping for each row
    # a running maximum m and sum l (the online softmax) and the unnormalised output in registers; S and P never
    # leave the chip.
    first_row = tl.program_id(0) * BLOCK_M
    head = tl.program_id(1).to(tl.int64) * n * HEAD_DIM  # Q, K, V and O are heads x n x HEAD_DIM, contiguous
    q = tl.make_block_ptr(q_ptr + head, (n, HEAD_DIM), (HEAD_DIM, 1), (first_row, 0), (BLOCK_M, HEAD_DIM), (1, 0))
    k_t = tl.make_block_ptr(k_ptr + head, (HEAD_DIM, n), (1, HEAD_DIM), (0, 0), (HEAD_DIM, BLOCK_N), (0, 1))  # K^T
    v = tl.make_block_ptr(v_ptr + head, (n, HEAD_DIM), (HEAD_DIM, 1), (0, 0), (BLOCK_N, HEAD_DIM), (1, 0))
    q_tile = tl.load(q, boundary_check=(0,), padding_option="zero")
    rows = first_row + tl.arange(0, BLOCK_M)
    row_max = tl.full((BLOCK_M,), -float("inf"), tl.float32)  # the papers' m and l
    row_sum = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    if CAUSAL:  # keys past the block's last row are masked for every row: not visited
        last_key = tl.minimum(n, first_row + BLOCK_M)
    else:
        last_key = n
    for first_key in range(0, last_key, BLOCK_N):
        k_tile = tl.load(k_t, boundary_check=(1,), padding_option="zero")
        s = tl.dot(q_tile, k_tile) * (scale * LOG2_E)  # scores in log2 units
        keys = first_key + tl.arange(0, BLOCK_N)
        keep = keys[None, :] < n  # the last block's padding
        if CAUSAL:
            keep = keep & (keys[None, :] <= rows[:, None])
        s = tl.where(keep, s, -float("inf"))  # key 0 is always kept: every row's maximum is finite
        new_max = tl.maximum(row_max, tl.max(s, 1))
        p = tl.math.exp2(s - new_max[:, None])
        rescale = tl.math.exp2(row_max - new_max)  # what was summed against the older maximum
        row_sum = row_sum * rescale + tl.sum(p, 1)
        v_tile = tl.load(v, boundary_check=(0,), padding_option="zero")  # zeros: 0 x padding must stay 0
        acc = tl.dot(p.to(v_tile.dtype), v_tile, acc * rescale[:, None])  # P in float16, as the tensor-core steps
        row_max = new_max
        k_t = tl.advance(k_t, (0, BLOCK_N))
        v = tl.advance(v, (BLOCK_N, 0))
    o = tl.make_block_ptr(o_ptr + head, (n, HEAD_DIM), (HEAD_DIM, 1), (first_row, 0), (BLOCK_M, HEAD_DIM), (1, 0))
    tl.store(o, (acc / row_sum[:, None]).to(o_ptr.dtype.element_ty), boundary_check=(0,))


def attention(Q, K, V, out, causal=False):
    """out = softmax(Q K^T / sqrt(d)) V, the causal mask where asked, for heads x n x d float16 CuPy arrays."""
    heads, n, d = Q.shape
    q, k, v, o = (torch.from_dlpack(x) for x in (Q, K, V, out))
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_M"]), heads)  # noqa: E731
    _attention_kernel[grid](q, k, v, o, n, d**-0.5, HEAD_DIM=d, CAUSAL=bool(causal))
