"""Attention's forward pass, O = softmax(Q K^T / sqrt(d)) V in float16: from three kernels to FlashAttention-2.

For each of BH independent heads (batch x heads) Q, K and V are n x d float16
matrices, one row per position of the sequence, and

    S = Q K^T / sqrt(d)          n x n scores: every query against every key
    P = softmax(S) row by row    n x n probabilities
    O = P V                      n x d: each output row a weighted mean of V's rows

The ``causal`` kind lets query i see keys 0..i only (S[i, j] = -inf for j > i,
so P[i, j] = 0): the decoder's mask. Row 0 then sees only key 0, so O[0] = V[0].

What the steps teach is the n x n matrix in the middle. Written out (v01: a
kernel for S, the softmax of the ``softmax`` family over its rows, a kernel for
P V) it holds n / 4d times as many numbers as Q, K, V and O together: at
n = 4096, d = 64 and 32 heads, 537 million scores, 2.1 GB in float32, moved five
times (``v01.score_bytes``: 10.7 GB) against the 67 MB of inputs and output. The
fused steps never store it. v02 keeps the scores of a block of 8 query rows in
shared memory, so its sequences end where that memory does (``v02.max_seq``:
about 7,100 positions on a Hopper). v03 takes any length with the online
softmax of the ``softmax`` family (v04 there): the keys arrive in blocks, each
row keeps a running maximum m and sum l, and what was accumulated against an
older maximum is rescaled by exp(m_old - m_new) (FlashAttention-1). v04 takes
FlashAttention-2's ordering: each warp owns 16 query rows through the whole
pass, so the softmax needs no block-wide barrier, and the division by l waits
until the end. v05 moves both products to the tensor cores (the ``mma.sync``
and ``ldmatrix`` of ``zoo.device.mma``, as the ``hgemm`` family uses them),
keeping P in registers: the scores an ``mma`` leaves in a lane are exactly the
A fragment the next ``mma`` needs. v06 copies the next keys and values with
``cp.async`` while the current ones are used; v07 skips the key blocks that lie
wholly above the diagonal of a causal mask, half the work. From v08 on the steps
take Hopper's path (sm_90a, ``zoo.device.wgmma``): v08 puts both products on
``wgmma``, one warpgroup owning 64 query rows, S from Q and K in shared memory
and P V with P from registers (wgmma's register-A form); v09 has K and V arrive by
TMA in a ring of stages that a producer warpgroup fills for two consumer
warpgroups; v10 runs a block's softmax while the previous block's P V is on the
tensor cores (FlashAttention-3's intra-warpgroup overlap); v11 makes the two consumer
warpgroups take turns on the tensor cores with named barriers (its ping-pong).

From v04 on the exponentials are exp2(x log2(e)) (``zoo.device.approx``: one
``ex2`` instruction): 1 / sqrt(d) and log2(e) are one constant c, a row's
maximum enters as m c, and a probability is exp2(s c - m c), one fused
multiply-add and one ``ex2``. The rescale exp2(m_old c - m_new c) uses the same
products m c, so every term of a row carries the same rounding of m c, which
cancels in P / l; and since a row's maximum stops growing after its first few
blocks of keys, a warp rescales O only when a vote says that one of its rows'
maxima grew.

Sizes, kinds, output
--------------------
A size is BH x n x d, or n alone for 1 x n x 64. Any head size d runs in v01;
v02 and v03 take any d up to 256 (``MAX_HEAD_DIM``: what current models use,
64, 80, 96, 112, 128, 256), v04, which stages rows in 16-byte copies, the
multiples of 8 of those, and the tensor-core steps (v05 on: mma's k is 16 wide)
the multiples of 16: a step given another d raises ``OutOfRange`` with its
reason (``check_head_dim``). Q, K and V share n and d; K and V may have fewer
heads than Q (grouped KV heads, GQA): with g = Q's heads / K's, q head i reads
kv head i // g, so g consecutive q heads share one (a batch folded into the
first axis keeps this: batch b's head h is b H + h, its kv head b H / g + h // g).
Heads that do not divide into whole groups, like a mismatched shape, are a
ValueError.
The output is float16, as FlashAttention's and PyTorch's are: the steps
accumulate in float32 and round once at the end. A float32 output would be a
little easier to check, but it doubles the bytes of O for a next layer that
reads float16, and the tolerance is set by the float16 probabilities anyway. The kinds of
input are ``full``, ``causal`` and ``gqa`` (the same random data; ``KIND_PARAMS``
gives the causal kind ``causal=True`` in every call, reference included, and any step
takes it by hand: ``step(Q, K, V, causal=True)``; the ``gqa`` kind makes K and V with
``kv_heads(BH)`` heads, a quarter of Q's where four divide them, as Llama-3-8B's 32 q
heads share 8 kv heads). Inputs are standard normal
float16, so the scores have unit variance and the attention is spread over
many keys, the case where a dropped or doubled key shows most.

FLOPs: 4 BH n^2 d (two products, a multiply and an add each), halved to
4 BH d n (n + 1) / 2 for the causal kind (the pairs j <= i); the exponentials
are not counted, as the FlashAttention papers do not. Bytes moved: Q, K and V
read once and O written once, 8 BH n d (4 (BH + Hkv) n d with Hkv kv heads).

Tolerance (relative norm error against float64): 2e-3. The tensor-core steps
round each probability to float16 before P V (a relative error of up to 2^-11
= 4.9e-4 each), and every step rounds O to float16 at the end (the same bound).
A NumPy model of that arithmetic measures 2.5e-4 to 2.9e-4 at n = 31 to 4096,
and the steps measure 1.9e-4 to 2.7e-4 in the simulator's tests; the baseline,
whose scores and softmax are float16 CuPy arrays between ops, measures 5e-4 to
9e-4 in the same model, so it passes with a margin of two. In that model at
n = 4096, d = 64, dropping the last key from every row is an error of 1.5e-2;
letting one masked key through in every row of a causal pass, 0.3; a forgotten
scale, more than 1.

Baselines: the main row is the composition a user writes in CuPy:
``cupy.matmul`` for S (cuBLAS, float16 in and out, float32 accumulation), the
scale, the mask and the softmax as CuPy ops, ``cupy.matmul`` for P V. The row
"torch sdpa" is ``torch.nn.functional.scaled_dot_product_attention`` (FlashAttention-2
kernels inside PyTorch) where PyTorch can be imported; zoo never depends on
it, and where it is missing the row raises ``zoo.errors.Unavailable`` and is
left out. The CPU row is NumPy in float32, head by head, through its BLAS.
On a GPU, ``.ci/gpu-attention.sh`` measures v01's DRAM bytes against the fused
steps' with ncu, times other tile shapes of v07, and prints the goals' figures
(x over CuPy, % of torch, % of the zoo's best hgemm rate, v07 over v06 causal).
"""

import math

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange, Unavailable

ORDER = 175  # after softmax (170): the capstone that composes the softmax with two tensor-core GEMMs
INPUTS = ("Q", "K", "V")
DTYPE = np.float16
NDIM = 3
MAX_HEAD_DIM = 256  # the largest d the fused steps compile for (v01 takes any)
INPUT_KINDS = ("full", "causal", "gqa")
GQA_GROUP = 4  # q heads per kv head in the gqa kind, where they divide BH: Llama-3-8B's 32 q heads over 8 kv heads
KIND_PARAMS = {"causal": {"causal": True}}  # the causal kind changes the computation, not the data
SIZE_DIMS = (1, 3)  # n (1 x n x 64) or BH x n x d
TOLERANCE = 2e-3  # float16 probabilities and output (see the module docstring)

# Sizes the steps take from here: the simulator runs every CUDA thread in Python, so it gets smaller ones (the
# same code paths); the GPU gets the ones the steps are written and measured for (zoo.profile counts with those).
BLOCK = 32 if SIMULATOR else 256  # v01's softmax threads per row
ROWS = 2 if SIMULATOR else 8  # v02's and v03's query rows per block, one warp each
ONLINE_BK = 16 if SIMULATOR else 256  # v03's keys per block of keys, a key a thread (32 ROWS); tests cross several
WARPS = 2 if SIMULATOR else 4  # warps per block from v04 on, 16 query rows each
BK = 32 if SIMULATOR else 64  # keys per block of keys from v04 on

# Simulator sizes: one position; two heads shorter than a warp; d = 128 over two query blocks and two key
# blocks of the simulator's tiles (32), the second partial. The simulator runs one Python thread per CUDA
# thread (about a millisecond each) and every score as Python in the CUDA-core steps: n^2 d stays small.
TEST_SIZES = ((1, 1, 64), (2, 17, 64), (1, 20, 128))  # partial blocks of 16 and 64 positions; d = 64 and 128
KIND_TEST_SIZES = {"causal": ((1, 20, 128),), "gqa": ((2, 17, 64),)}
# v09 on run 384 simulator threads a block: their causal and gqa cases are tests/kernels/test_attention.py's
# (77 positions causal, 4 q heads over 1 kv head causal), which cross two blocks of queries and of keys
KIND_TEST_SKIPS = {"causal": ("v09", "v10", "v11"), "gqa": ("v09", "v10", "v11")}
# GPU sizes: the lengths 1, 31, 77, 1000 and 4099 at d = 64, 80, 128 and 256, and a few heads of a real
# length; 2 or 4 heads share one kv head in the gqa kind (3 heads do not divide into groups: 3 kv heads).
GPU_TEST_SIZES = (
    (1, 1, 64),
    (3, 31, 128),
    (2, 77, 80),
    (4, 77, 256),
    (2, 1000, 64),
    (1, 1000, 128),
    (4, 1000, 80),
    (1, 4099, 64),
    (1, 4099, 128),
    (2, 4099, 256),
    (4, 2048, 64),
)
BENCH_SIZES = ((32, 4096, 64), (32, 4096, 128))
HEADLINE_SIZE = (32, 4096, 64)
BASELINE = "CuPy: matmul, softmax ops, matmul"
LIMIT = 2**32  # elements a uint32 index reaches
MAX_HEADS = 65535  # the grid's y dimension holds the head


def dims(size):
    """(BH, n, d) of a size: n means 1 x n x 64."""
    if isinstance(size, (tuple, list)):
        bh, n, d = size
        return int(bh), int(n), int(d)
    return 1, int(size), 64


def kv_heads(bh, kind="full"):
    """K's and V's heads for BH q heads: BH, or in the gqa kind BH / GQA_GROUP (BH / gcd(BH, 4) where 4 does not
    divide BH, so that 2 q heads share 1 kv head)."""
    return bh // math.gcd(bh, GQA_GROUP) if kind == "gqa" else bh


def make_inputs(size, seed, kind="full"):
    bh, n, d = dims(size)
    rng = np.random.default_rng(seed)
    heads = (bh, kv_heads(bh, kind), kv_heads(bh, kind))
    return tuple(rng.standard_normal((h, n, d), dtype=np.float32).astype(np.float16) for h in heads)


def reference(Q, K, V, causal=False):
    """float64 attention of the float16 inputs, head by head (an n x n float64 block at a time); q head h reads
    kv head h // g, g = Q's heads / K's heads."""
    bh, n, d = Q.shape
    group = bh // K.shape[0]
    out = np.empty((bh, n, d))
    keep = np.tri(n, dtype=bool) if causal else None  # key j <= query i
    for h in range(bh):
        s = Q[h].astype(np.float64) @ K[h // group].astype(np.float64).T / math.sqrt(d)
        if causal:
            s = np.where(keep, s, -np.inf)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        out[h] = (e @ V[h // group].astype(np.float64)) / e.sum(axis=1, keepdims=True)
    return out


def output_for(Q, K, V, causal=False):
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    if K.shape != V.shape or Q.shape[1:] != K.shape[1:]:
        raise ValueError(
            f"Q, K and V must share seq and d, and K and V one shape (heads, seq, d), got {tuple(Q.shape)}, "
            f"{tuple(K.shape)} and {tuple(V.shape)}"
        )
    if K.shape[0] == 0 or Q.shape[0] % K.shape[0]:
        raise ValueError(
            f"Q's heads must be a whole number of groups of K's and V's (grouped KV heads), got {Q.shape[0]} q heads "
            f"and {K.shape[0]} kv heads"
        )
    return Q.shape, np.float16


def flops(size, causal=False):
    bh, n, d = dims(size)
    pairs = n * (n + 1) // 2 if causal else n * n  # (query, key) pairs the mask lets through
    return 4 * bh * pairs * d  # S = Q K^T and O = P V: a multiply and an add per pair and column each


def bytes_moved(size, kind="full", causal=False):
    bh, n, d = dims(size)
    return 2 * 2 * (bh + kv_heads(bh, kind)) * n * d  # Q and O, K and V (fewer heads with gqa) once each, float16


def check_head_dim(step, d, multiple=1, largest=MAX_HEAD_DIM, why=""):
    """OutOfRange for a head size d the step's tiling does not take: a multiple of ``multiple`` up to ``largest``."""
    if d % multiple or (largest is not None and d > largest):
        sizes = "any d" if multiple == 1 else f"d a multiple of {multiple}"
        raise OutOfRange(f"attention {step} takes {sizes} up to {largest}{why}, got d = {d}")


def check_limits(Q, K, V, causal=False):
    """OutOfRange for inputs the steps' uint32 indices or grid cannot cover (every step's validate)."""
    bh, n, d = Q.shape
    if bh * n * d >= LIMIT:
        raise OutOfRange(f"attention indexes with uint32: Q must have fewer than 2^32 elements, got {bh * n * d}")
    if bh > MAX_HEADS:
        raise OutOfRange(f"attention puts a head in the grid's y dimension: at most {MAX_HEADS} heads, got {bh}")


def check_aligned(Q, K, V, causal=False):
    """ValueError for a device array that does not start on a 16-byte boundary (v04 on copy 16 bytes at a time).

    A NumPy array is copied to a fresh device array first, so only device arrays are checked.
    """
    from zoo.device.memory import aligned

    for name, a in (("Q", Q), ("K", K), ("V", V)):
        if not isinstance(a, np.ndarray) and not aligned(a):
            raise ValueError(
                f"{name} does not start on a 16-byte boundary, which this step's 16-byte copies need: pass a copy "
                f"({name}.copy()) or a view that starts at a whole head"
            )


def baseline(Q, K, V, out, causal=False):
    """The composition in CuPy ops: each a kernel, the n x n scores in DRAM between them (float16)."""
    import cupy

    bh, n, d = Q.shape
    kv = K.shape[0]  # a kv head's g q heads are consecutive: as kv x (g n) x d, Q meets its K in one matmul
    s = cupy.matmul(Q.reshape(kv, -1, d), K.transpose(0, 2, 1)) * np.float16(1 / math.sqrt(d))
    if causal:
        s = cupy.where(cupy.tri(n, dtype=bool), s.reshape(kv, -1, n, n), np.float16(-np.inf)).reshape(kv, -1, n)
    e = cupy.exp(s - s.max(axis=-1, keepdims=True))
    cupy.matmul(e / e.sum(axis=-1, keepdims=True), V, out=out.reshape(kv, -1, d))


def torch_sdpa(Q, K, V, out, causal=False):
    """PyTorch's fused attention on the same arrays (shared through DLPack, no copy), then O copied into out.

    sdpa has no ``out=``: the copy (16 MB at the headline size, a few microseconds) is in the row's time.
    The arrays go in as (1, batch x heads, seq, d): sdpa's fused kernels (flash, memory-efficient) take
    4-D inputs only, and 3-D ones fall back to its math path, which writes S to DRAM like the unfused
    composition (9.5 ms at the headline size on an H100, measured, against 0.55 ms for v06).
    """
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        raise Unavailable(f"PyTorch cannot be imported here ({e})") from None
    q, k, v = (torch.from_dlpack(a).unsqueeze(0) for a in (Q, K, V))
    grouped = {"enable_gqa": True} if K.shape[0] != Q.shape[0] else {}  # kv head h // g, as the reference's
    torch.from_dlpack(out).copy_(F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), **grouped)[0])


def triton_attention(Q, K, V, out, causal=False):
    """FlashAttention-2's forward pass as a Triton kernel (``zoo.bench.triton_rows.attention``): a program a block of
    query rows, block pointers to walk the keys, both products on ``tl.dot``, the online softmax in exp2, the causal
    mask's upper blocks skipped. Needs Triton and PyTorch (the row says so where they are missing), one kv head a
    q head and a power-of-two d (its tiles' shapes), or the row says it does not take them."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    d = Q.shape[2]
    if K.shape[0] != Q.shape[0] or d & (d - 1):
        raise Unavailable(
            f"the Triton row takes one kv head a q head and d a power of two, got {K.shape[0]} kv heads "
            f"for {Q.shape[0]} q heads and d = {d}"
        )
    libraries.triton_rows().attention(Q, K, V, out, causal=causal)


EXTRA_BASELINES = {"torch sdpa": torch_sdpa, "triton": triton_attention}
ROW_CODE = {"triton": "zoo.bench.triton_rows.attention"}
STRONGEST = "torch sdpa"  # FlashAttention-style fused kernels, 4-D inputs: what a model calls
RATE_BESIDE = "hgemm"  # each page gives the best rate beside hgemm's: how close attention comes to a plain GEMM


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(Q, K, V, causal=False):
    """The same ops in NumPy, float32, one head at a time (the two products through NumPy's BLAS)."""
    bh, n, d = Q.shape
    group = bh // K.shape[0]
    out = np.empty(Q.shape, np.float16)
    keep = np.tri(n, dtype=bool) if causal else None
    for h in range(bh):
        s = Q[h].astype(np.float32) @ K[h // group].astype(np.float32).T * np.float32(1 / math.sqrt(d))
        if causal:
            s = np.where(keep, s, np.float32(-np.inf))
        e = np.exp(s - s.max(axis=1, keepdims=True))
        out[h] = (e @ V[h // group].astype(np.float32)) / e.sum(axis=1, keepdims=True)
    return out


CPU = {"cpu_numpy": (cpu_numpy, "blas")}
