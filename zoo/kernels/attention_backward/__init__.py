"""Attention's backward pass: dQ, dK and dV of O = softmax(Q K^T / sqrt(d)) V from dO, recomputing P tile by tile.

Training runs the forward pass (the ``attention`` family) and then this: given
the gradient dO of a loss with respect to O, the gradients of Q, K and V are,
with c = 1 / sqrt(d) and S, P the forward's scores and probabilities,

    dV = P^T dO                  (n x n)^T (n x d)
    dP = dO V^T                  n x n
    D_i = sum_j P_ij dP_ij = dO_i . O_i      one number a query row
    dS = P * (dP - D)            the softmax's Jacobian, row by row
    dQ = c dS K        dK = c dS^T Q

The forward saved O and, for each query row, the log-sum-exp of its scaled
scores, L_i = log sum_j exp(c S_ij), so that P_ij = exp(c S_ij - L_i) can be
rebuilt from Q, K and L alone: no n x n matrix is ever stored
(FlashAttention-2's recomputation). D needs no n x n pass either: it is the dot
product of two rows the forward and the loss already hold.

v01 is the plain version: a small kernel for D (it also clears dQ), then one
block per tile of 16 keys walking every tile of 16 queries on the CUDA cores,
P and dS rebuilt in shared memory, dK and dV summed in registers, dQ added into
the output with float32 atomics. v02 moves the five products to the tensor
cores (``zoo.device.mma``'s ``mma.sync`` m16n8k16, as attention v05 does): a
block per 64 keys, a warp per 16 of them, each warp holding S^T and dP^T for
its keys so that P^T and dS^T, rounded to float16, are the A fragments of
dV's and dK's products without leaving registers; dS^T goes through shared
memory once for dQ's product. v03 starts each block's walk at the first tile
of queries that can see its keys under a causal mask: half the causal work.
v04 copies the next tile of Q and dO with ``cp.async`` while the current one
is used (attention v06's double buffering). v05 adds dQ into the output four
columns at a time (``red.global.add.v4.f32``, Hopper on), a quarter of the
atomic requests to the L2. v06 moves the five products to Hopper's
``wgmma.mma_async`` (attention v08's move): a warpgroup owns 64 keys, S^T and
dP^T read K, V, Q and dO from swizzled shared tiles, P^T and dS^T go into dV's
and dK's products from registers, and dQ's reads dS^T from shared memory
transposed. v01 takes any d up to 256, the tensor-core steps multiples of 16
up to 128 (dK and dV in registers), all with grouped KV heads.

Inputs, kinds, output
---------------------
Q, K, V, O and dO are float16 (heads, n, d), L float32 (heads, n) in natural
log units, as PyTorch's and FlashAttention's forward save it. ``make_inputs``
draws Q, K, V and dO standard normal and computes O (rounded to float16) and L
in float64 from them. The kinds are the forward's (``full``, ``causal``,
``gqa``; sizes, ``kv_heads`` and ``KIND_PARAMS`` are imported from its spec):
causal takes O and L of a causal forward, and with grouped KV heads dK and dV
of a kv head sum over the g q heads that read it.

The output is one float32 array of BH + 2 Hkv heads: dQ (BH heads), then dK and
dV (Hkv heads each): ``gradients(out, Q.shape[0])`` gives the three views. float32
because dQ is summed across blocks of keys by atomic adds, which need it
(FlashAttention keeps the same float32 dQ and converts it at the end), and a
training step's optimizer keeps float32 gradients anyway; PyTorch's row
returns float16, which its tolerance below covers.

FLOPs: the FlashAttention-2 paper's convention, 2.5 times the forward's: five
n x n x d products (S recomputed, dV, dP, dQ, dK), 10 BH n^2 d, halved to
10 BH d n (n + 1) / 2 for the causal kind. Bytes moved: Q, O, dO (BH heads)
and K, V (Hkv heads) read once as float16, L as float32, and the three float32
gradients written once.

Tolerance (relative norm error of the three gradients against float64 ones,
computed from Q, K, V and dO with the exact P and O): 2e-3, the forward's. The
tensor-core steps round P to float16 before dV = P^T dO and dS before
dQ and dK (2^-11 = 4.9e-4 relative each, at most); D comes from the float16 O
(the same bound) and L from float32 (negligible). A NumPy model of that
arithmetic measures 2.0e-4 to 2.3e-4 at n = 31 to 2048, d = 64 and 128, causal
or not, about the same in each of dQ, dK and dV (whose norms are within 20% of one
another, so one norm over the three hides none); the CUDA-core step's model,
which keeps P and dS in float32, 1e-5 to 7e-5. The CuPy baseline, whose scores,
P, dP, dS and products are float16 between ops, measures 4.6e-4 to 6.2e-4 and
PyTorch's (float16 gradients) about 3e-4: margins of three and more. In the same
model at n = 4096, d = 64, a pass that drops the last key is an error of 1.4e-2,
one that forgets D 7.6e-2, one that lets a masked key through in every row of
a causal pass 0.27.

Baselines: the main row is the composition in CuPy (``cupy.matmul`` in float16,
P rebuilt from L, the n x n matrices in DRAM). The row "torch sdpa backward"
is PyTorch's ``scaled_dot_product_attention`` differentiated by autograd: its
forward runs once per set of input arrays (untimed, on the row's first call
with them) and each timed call is ``torch.autograd.grad`` alone, the backward
kernels of FlashAttention-2 inside PyTorch. On a GPU, ``.ci/gpu-backward.sh``
checks the steps at GPU sizes, runs compute-sanitizer on each, and times them
against that row.
"""

import math

import numpy as np

from zoo import SIMULATOR
from zoo.errors import OutOfRange, Unavailable
from zoo.kernels.attention import (  # the forward's kinds of input, sizes and head-size check
    INPUT_KINDS,
    KIND_PARAMS,
    LIMIT,
    MAX_HEAD_DIM,
    MAX_HEADS,
    SIZE_DIMS,
    check_head_dim,
    dims,
    kv_heads,
)
from zoo.kernels.attention import make_inputs as forward_inputs
from zoo.kernels.attention import output_for as forward_output_for

__all__ = ["INPUT_KINDS", "KIND_PARAMS", "MAX_HEAD_DIM", "SIZE_DIMS", "check_head_dim", "dims", "kv_heads"]

ORDER = 177  # after attention's forward pass (175) and decode_attention (176): training after inference
INPUTS = ("Q", "K", "V", "O", "dO", "L")
DTYPE = {"Q": np.float16, "K": np.float16, "V": np.float16, "O": np.float16, "dO": np.float16, "L": np.float32}
NDIM = {"Q": 3, "K": 3, "V": 3, "O": 3, "dO": 3, "L": 2}
TOLERANCE = 2e-3  # float16 P and dS in the products, D from float16 O (see the module docstring)

# Sizes the steps take from here: the simulator runs every CUDA thread in Python and gets smaller ones.
WARPS = 2 if SIMULATOR else 4  # v02's warps per block, 16 keys each
BQ = 32  # v02's queries per tile of queries

# Simulator sizes: one position; 31 positions at d = 64 (partial tiles of 16 and 32 positions); 9 at d = 128 over two
# heads (one kv head in the gqa kind). The simulator runs every thread in Python: n^2 d stays small.
TEST_SIZES = ((1, 1, 64), (1, 31, 64), (2, 9, 128))
KIND_TEST_SIZES = {"causal": ((1, 31, 64),), "gqa": ((2, 9, 128),)}
KIND_TEST_SKIPS = {"gqa": ("v03", "v04")}  # v02's grouped heads, v05's walk over a group's tiles: the same code
# GPU sizes: the lengths 1, 31, 77, 1000 and 4099 at d = 64 and 128, and 77 at d = 80 and 256 (v01 only: v02
# says OutOfRange); in the gqa kind 2 q heads share 1 kv head (3 heads: 3 kv heads, which do not divide into groups)
GPU_TEST_SIZES = (
    (1, 1, 64),
    (3, 31, 128),
    (2, 77, 80),
    (2, 77, 256),
    (2, 1000, 64),
    (1, 1000, 128),
    (1, 4099, 64),
    (1, 4099, 128),
)
BENCH_SIZES = ((32, 4096, 64), (32, 4096, 128))
HEADLINE_SIZE = (32, 4096, 64)
BASELINE = "CuPy: matmuls and elementwise ops, P rebuilt from L"


def probabilities(q, k, causal=False):
    """(P, L) of one head in float64: its probabilities and the log-sum-exp of each row's scaled scores."""
    s = q.astype(np.float64) @ k.astype(np.float64).T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tri(len(q), dtype=bool), s, -np.inf)  # key j <= query i
    top = s.max(axis=1, keepdims=True)
    e = np.exp(s - top)
    total = e.sum(axis=1, keepdims=True)
    return e / total, (top + np.log(total))[:, 0]


def forward(Q, K, V, causal=False):
    """(O, L) in float64: the forward pass and the row log-sum-exp it saves, head by head."""
    group = Q.shape[0] // K.shape[0]
    O, L = np.empty(Q.shape), np.empty(Q.shape[:2])
    for h in range(Q.shape[0]):
        p, L[h] = probabilities(Q[h], K[h // group], causal)
        O[h] = p @ V[h // group].astype(np.float64)
    return O, L


def make_inputs(size, seed, kind="full"):
    Q, K, V = forward_inputs(size, seed, kind)
    dO = np.random.default_rng([seed, 1]).standard_normal(Q.shape, dtype=np.float32).astype(np.float16)
    O, L = forward(Q, K, V, causal=kind == "causal")
    return Q, K, V, O.astype(np.float16), dO, L.astype(np.float32)


def reference(Q, K, V, O, dO, L, causal=False):
    """float64 dQ, dK, dV (stacked on the head axis) of the float16 Q, K, V and dO, with the exact P and D: O and L
    are the steps' shortcuts, not part of the function differentiated."""
    bh, n, d = Q.shape
    kv = K.shape[0]
    group = bh // kv
    c = 1 / math.sqrt(d)
    grads = np.zeros((bh + 2 * kv, n, d))
    for h in range(bh):
        q, k, v, do = (a.astype(np.float64) for a in (Q[h], K[h // group], V[h // group], dO[h]))
        p, _ = probabilities(q, k, causal)
        dp = do @ v.T
        ds = p * (dp - (p * dp).sum(axis=1, keepdims=True))  # D_i = sum_j P_ij dP_ij = dO_i . O_i
        grads[h] = ds @ k * c
        grads[bh + h // group] += ds.T @ q * c  # a kv head's gradients sum over its group's q heads
        grads[bh + kv + h // group] += p.T @ do
    return grads


def gradients(out, bh):
    """(dQ, dK, dV): views of the stacked output of BH + 2 Hkv heads."""
    kv = (out.shape[0] - bh) // 2
    return out[:bh], out[bh : bh + kv], out[bh + kv :]


def output_for(Q, K, V, O, dO, L, causal=False):
    forward_output_for(Q, K, V, causal)  # the forward's checks: causal a bool, shapes, whole groups of kv heads
    if O.shape != Q.shape or dO.shape != Q.shape or L.shape != Q.shape[:2]:
        raise ValueError(
            f"O and dO must have Q's shape {tuple(Q.shape)} and L its (heads, seq) {tuple(Q.shape[:2])}, got "
            f"{tuple(O.shape)}, {tuple(dO.shape)} and {tuple(L.shape)}"
        )
    bh, n, d = Q.shape
    return (bh + 2 * K.shape[0], n, d), np.float32


def flops(size, causal=False):
    bh, n, d = dims(size)
    pairs = n * (n + 1) // 2 if causal else n * n  # (query, key) pairs the mask lets through
    return 10 * bh * pairs * d  # five products (S again, dV, dP, dQ, dK): 2.5 times the forward's 4 BH n^2 d


def bytes_moved(size, kind="full", causal=False):
    bh, n, d = dims(size)
    kv = kv_heads(bh, kind)
    reads = 2 * (3 * bh + 2 * kv) * n * d + 4 * bh * n  # Q, O, dO and K, V in float16; L in float32
    return reads + 4 * (bh + 2 * kv) * n * d  # dQ, dK and dV written once in float32


def check_limits(Q, K, V, O, dO, L, causal=False):
    """OutOfRange for inputs the steps' uint32 indices or grid cannot cover (every step's validate)."""
    bh, n, d = Q.shape
    if (bh + 2 * K.shape[0]) * n * d >= LIMIT:
        raise OutOfRange(
            f"attention_backward indexes with uint32: the output must have fewer than 2^32 elements, got "
            f"{(bh + 2 * K.shape[0]) * n * d}"
        )
    if bh > MAX_HEADS:
        raise OutOfRange(f"attention_backward puts a head in the grid: at most {MAX_HEADS} heads, got {bh}")


def check_aligned(*arrays):
    """ValueError for a device array that does not start on a 16-byte boundary (16-byte copies need it).

    A NumPy array is copied to a fresh device array first, so only device arrays are checked.
    """
    from zoo.device.memory import aligned

    for name, a in zip(INPUTS, arrays, strict=False):
        if not isinstance(a, np.ndarray) and not aligned(a):
            raise ValueError(
                f"{name} does not start on a 16-byte boundary, which this step's 16-byte copies need: pass a copy "
                f"({name}.copy()) or a view that starts at a whole head"
            )


def baseline(Q, K, V, O, dO, L, out, causal=False):
    """The composition in CuPy ops: P rebuilt from L, every n x n matrix in DRAM (float16 between ops)."""
    import cupy

    bh, n, d = Q.shape
    kv = K.shape[0]
    g = bh // kv  # a kv head's g q heads are consecutive: as kv x (g n) x d, Q meets its K in one matmul
    c = np.float32(1 / math.sqrt(d))
    s = cupy.matmul(Q.reshape(kv, g * n, d), K.transpose(0, 2, 1)).reshape(bh, n, n)
    p = cupy.exp(s.astype(np.float32) * c - L[:, :, None])
    if causal:
        p = cupy.where(cupy.tri(n, dtype=bool), p, np.float32(0))
    p = p.astype(np.float16)
    dp = cupy.matmul(dO.reshape(kv, g * n, d), V.transpose(0, 2, 1)).reshape(bh, n, n)
    D = (dO.astype(np.float32) * O.astype(np.float32)).sum(axis=-1, keepdims=True)
    ds = (p * (dp - D)).astype(np.float16)
    dQ, dK, dV = gradients(out, bh)
    dQ[...] = cupy.matmul(ds.reshape(kv, g, n, n), K.reshape(kv, 1, n, d)).reshape(bh, n, d) * c
    ds_t = ds.reshape(kv, g, n, n).transpose(0, 3, 1, 2).reshape(kv, n, g * n)  # keys x (the group's queries)
    dK[...] = cupy.matmul(ds_t, Q.reshape(kv, g * n, d)) * c
    p_t = p.reshape(kv, g, n, n).transpose(0, 3, 1, 2).reshape(kv, n, g * n)
    dV[...] = cupy.matmul(p_t, dO.reshape(kv, g * n, d))


_FORWARDS = {}  # the torch row's forward passes: (ids of Q, K, V, causal) -> (inputs kept alive, leaves, output)


def torch_sdpa_backward(Q, K, V, O, dO, L, out, causal=False):
    """PyTorch's attention backward on the same arrays (DLPack, no copy), its float16 gradients copied into out.

    Autograd needs its own forward: it runs on the first call with a set of arrays and is kept (with the arrays, so
    that an id is never reused while kept), and each call after it is ``torch.autograd.grad`` alone, with
    ``retain_graph``: what a training step's backward costs. The arrays go in as (1, heads, seq, d), the 4-D form
    sdpa's fused kernels take. The copies into the float32 out (a few microseconds) are in the row's time.
    """
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        raise Unavailable(f"PyTorch cannot be imported here ({e})") from None
    key = (id(Q), id(K), id(V), bool(causal))
    if key not in _FORWARDS:
        if len(_FORWARDS) >= 8:  # the harness rotates a few input sets of one size: let older ones go
            _FORWARDS.clear()
        q, k, v = (torch.from_dlpack(a).unsqueeze(0).detach().requires_grad_() for a in (Q, K, V))
        grouped = {"enable_gqa": True} if K.shape[0] != Q.shape[0] else {}  # kv head h // g, as the reference's
        o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), **grouped)
        _FORWARDS[key] = ((Q, K, V), (q, k, v), o)
    _, leaves, o = _FORWARDS[key]
    grads = torch.autograd.grad(o, leaves, grad_outputs=torch.from_dlpack(dO).unsqueeze(0), retain_graph=True)
    for part, grad in zip(gradients(torch.from_dlpack(out), Q.shape[0]), grads, strict=True):
        part.copy_(grad[0])


EXTRA_BASELINES = {"torch sdpa backward": torch_sdpa_backward}
STRONGEST = "torch sdpa backward"  # FlashAttention-2's backward kernels: what a training step calls
RATE_BESIDE = "hgemm"  # the pages give the best rate beside hgemm's: five GEMMs a tile, softmax's gradient between


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(Q, K, V, O, dO, L, causal=False):
    """The same recomputation in NumPy, float32, one q head at a time (the products through NumPy's BLAS)."""
    bh, n, d = Q.shape
    kv = K.shape[0]
    group = bh // kv
    c = np.float32(1 / math.sqrt(d))
    out = np.zeros((bh + 2 * kv, n, d), np.float32)
    dQ, dK, dV = gradients(out, bh)
    keep = np.tri(n, dtype=bool) if causal else None
    for h in range(bh):
        q, k, v, o, do = (a.astype(np.float32) for a in (Q[h], K[h // group], V[h // group], O[h], dO[h]))
        p = np.exp(q @ k.T * c - L[h][:, None])
        if causal:
            p = np.where(keep, p, np.float32(0))
        ds = p * (do @ v.T - (do * o).sum(axis=1, keepdims=True))
        dQ[h] = ds @ k * c
        dK[h // group] += ds.T @ q * c
        dV[h // group] += p.T @ do
    return out


CPU = {"cpu_numpy": (cpu_numpy, "blas")}
