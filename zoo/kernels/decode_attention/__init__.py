"""Decode attention: a few new query positions against a long float16 KV cache, with grouped KV heads.

A language model generating token t runs attention for one query per head
against the keys and values of every earlier position, kept in a cache:

    S = q K[:length]^T / sqrt(d)     1 x length scores per q head
    P = softmax(S)                   (the forward family's online softmax)
    o = P V[:length]                 1 x d

Each cached key and value is read once and used in one multiply-add per
query row that reads it, so the time is the time to read the cache: at
Llama-3-8B's shapes (8 kv heads of d = 128) and 32k positions, 128 MiB a layer
against 16 KB of queries. The lesson is a memory-bound one: the copy of the
cache's bytes is the row to reach (``copy_ceiling``), and the steps climb from
one block per query (v01: 32 blocks on a GPU of 132 SMs) to splitting the cache
over many blocks whose partial results are merged by their log-sum-exp
(v02, FlashDecoding), to one block reading a kv head's cache once for all the
q heads that share it (v03, grouped KV heads), to the cache read 16 bytes a
load with many loads in flight and no barrier in the loop (v04), to one
launch, the last block of each kv head merging its splits (v05), to a launch
that reads the length on the GPU, so a CUDA graph can replay it at every token
(v06).

The host API (what a model's decode loop would call)::

    step = zoo.family("decode_attention")["v06"]      # or the best step
    step(q, k_cache, v_cache, length=t, out=o)        # device arrays: CuPy or numba

with ``q`` of shape (B H, Q, d) (B sequences of H q heads, Q new positions
each, usually 1), ``k_cache`` and ``v_cache`` of shape (B Hkv, capacity, d), H a
multiple of Hkv (q head b H + h reads kv head (b H + h) // (H / Hkv), so the
batch stays folded into the first axis), and ``length`` the positions filled
(default: all of them), the new ones included. Query j of Q sits at position
length - Q + j and sees keys 0 .. length - Q + j (causal within the new
positions; for Q = 1, every cached key). Everything is float16; the steps
accumulate in float32. A bad shape, a ``length`` past the cache or shorter than
Q is a ValueError before any launch. From v06 on, ``length`` may also be a
one-element int32 device array (CuPy or numba), read by the kernel: a model
whose position lives on the GPU passes it, and a CUDA graph of the call replays
at every position. Its value cannot be checked without waiting for the GPU: the
kernel takes a value past the cache as the cache's capacity. v01 to v05 plan
their launch from a host int and refuse a device length (a TypeError), as
anything but an int, None or such an array is refused, before any launch.

Sizes: H x Hkv x n x d (q heads, kv heads, cache positions, head size), or n
for 1 x 1 x n x 64, one query position; the headline is Llama-3-8B's 32 x 8 x 8192 x 128, and 32k
positions. FLOPs: 4 H Q n d. Bytes moved: the cache read once, 4 Hkv n d,
plus q and o (4 H Q d).

Tolerance (relative norm error against float64): 1.5e-3. The steps keep
scores, probabilities and sums in float32 and round o to float16 once (a
relative error of at most 2^-11 = 4.9e-4 an element); a NumPy model of that
arithmetic measures 2.0e-4 at 77 to 32,768 positions (d = 128, 4 q heads a kv
head). The CuPy baseline rounds the scores, the exponentials and the
probabilities to float16 between its ops: the same model measures 5.3e-4 at 77
positions rising to 9.7e-4 at 32,768, which passes with a margin of 1.5. What
the bound must catch: one key dropped from every row is an error of 2.8e-2 at
77 positions, 1.8e-2 at 1000 and 1.7e-3 at 32,768 (with random data o shrinks
like 1 / sqrt(n), and a key's share with it); a split's worth of keys dropped,
or a key read twice, is far more.

Baselines: the main row is the composition a user writes in CuPy (``matmul``
for the scores with q heads grouped by kv head, the softmax as CuPy ops,
``matmul`` for P V); "torch sdpa" is ``scaled_dot_product_attention`` with
``enable_gqa`` on the same arrays, where PyTorch imports; the strongest row is
the copy of the cache's bytes. The goal (issue 65): 85% of the copy at 8k and
32k positions. On a GPU, ``.ci/gpu-decode.sh`` checks every step at
GPU_TEST_SIZES and under compute-sanitizer, times them with ``zoo run --save``,
tries v05 at other numbers of blocks an SM and replays v06 in one CUDA graph at
lengths 1 to 32768 set in its device length.
"""

import math

import numpy as np

from zoo import SIMULATOR
from zoo.errors import Unavailable
from zoo.runtime import arrays

ORDER = 176  # after attention (175): its forward's online softmax, now over a cache a token reads once
INPUTS = ("Q", "K", "V")
DTYPE = np.float16
NDIM = 3
SIZE_DIMS = (1, 4)  # n (1 x 1 x n x 64) or H x Hkv x n x d
TOLERANCE = 1.5e-3  # float32 arithmetic, float16 output; the float16 CuPy baseline measures up to 9.7e-4
MAX_HEAD_DIM = 256  # the largest d the steps compile for

THREADS = 32 if SIMULATOR else 128  # threads per block: a key a thread for scores, a column a thread for P V
# Blocks a split launch aims for, per SM (zoo.device.sm_count(): 132 on an H100 or H200; 1 in the simulator, where
# four blocks make the tests cross split boundaries). Four: v04's and v05's 128 registers a thread fit four blocks of
# 128 threads on an SM, so the whole grid is resident at once (one wave, no tail of a second) with 64 KB of loads in
# flight an SM. .ci/gpu-decode.sh times v05 at 2, 3, 4 and 6.
SPLIT_BLOCKS_PER_SM = 4
VECTOR_WARPS = 2 if SIMULATOR else 4  # v04 on: warps a block (two in the simulator: the warps' merge is exercised)
UNROLL = 2 if SIMULATOR else 4  # v04 on: keys each group of lanes loads before it uses one (K and V, 16 bytes each)

# Simulator sizes: the 1, 31 and 77 cached positions (one position; 31 and 77 over one and three blocks of
# keys of the simulator's 32, the last partial); d = 64 and 80 (not a multiple of 32; in v04 on, 10 of a group's 16
# lanes busy); 1, 2 and 2 q heads a kv head (no grouping, GQA). d = 128 and 1000 positions run in
# tests/kernels/test_decode_attention.py. The simulator runs a shuffle as a rendezvous of 32 Python threads, and v04
# on shuffle each score: d = 128 at 77 positions would take seconds there.
TEST_SIZES = ((1, 1, 1, 64), (2, 1, 31, 80), (4, 2, 77, 64))
# GPU sizes: 1 to 4099 positions at d = 64, 80, 128, 256 with and without grouping, Llama-3-8B's shapes at 8k and 32k
GPU_TEST_SIZES = (
    (1, 1, 1, 64),
    (4, 4, 31, 128),
    (8, 2, 77, 80),
    (4, 2, 1000, 80),
    (8, 8, 1000, 64),
    (32, 8, 4099, 128),
    (8, 8, 4099, 256),
    (32, 8, 8192, 128),
    (32, 8, 32768, 128),
)
BENCH_SIZES = ((32, 8, 8192, 128), (32, 8, 32768, 128))
HEADLINE_SIZE = (32, 8, 8192, 128)
BASELINE = "CuPy: matmul, softmax ops, matmul"
LIMIT = 2**32  # elements a uint32 index reaches


def dims(size):
    """(H, Hkv, n, d) of a size: n means 1 x 1 x n x 64."""
    if isinstance(size, (tuple, list)):
        h, kv, n, d = size
        return int(h), int(kv), int(n), int(d)
    return 1, 1, int(size), 64


def make_inputs(size, seed):
    h, kv, n, d = dims(size)
    rng = np.random.default_rng(seed)
    return tuple(
        rng.standard_normal(shape, dtype=np.float32).astype(np.float16) for shape in ((h, 1, d), (kv, n, d), (kv, n, d))
    )


def visible(Q, K, length=None):
    """(length, Q's positions): keys 0 .. length - 1 are filled; query j sees keys below length - Q + j + 1."""
    return (K.shape[1] if length is None else int(length)), Q.shape[1]


def reference(Q, K, V, length=None):
    """float64 attention of each q head's queries against its kv head's first ``length`` positions."""
    n, queries = visible(Q, K, length)
    bh, _, d = Q.shape
    group = bh // K.shape[0]
    keep = np.arange(n)[None, :] <= (n - queries + np.arange(queries))[:, None]  # causal within the new positions
    out = np.empty(Q.shape)
    for h in range(bh):
        s = Q[h].astype(np.float64) @ K[h // group, :n].astype(np.float64).T / math.sqrt(d)
        s = np.where(keep, s, -np.inf)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        out[h] = (e @ V[h // group, :n].astype(np.float64)) / e.sum(axis=1, keepdims=True)
    return out


def output_for(Q, K, V, length=None):
    if K.shape != V.shape or Q.shape[2] != K.shape[2]:
        raise ValueError(
            f"K and V (the cache) must share one shape (kv heads, positions, d) and Q its d, got {tuple(Q.shape)}, "
            f"{tuple(K.shape)} and {tuple(V.shape)}"
        )
    if Q.shape[0] % K.shape[0]:
        raise ValueError(
            f"Q's heads must be a whole number of groups of the cache's (grouped KV heads), got {Q.shape[0]} q heads "
            f"and {K.shape[0]} kv heads"
        )
    if on_device(length):
        if tuple(length.shape) != (1,) or length.dtype != np.int32:
            raise TypeError(
                f"length on the device must be a one-element int32 array, got {np.dtype(length.dtype)} of shape "
                f"{tuple(length.shape)}"
            )
        return Q.shape, np.float16  # its value is read by the kernel (v06 on), the host never sees it
    if length is not None and (isinstance(length, bool) or not isinstance(length, (int, np.integer))):
        raise TypeError(
            f"length must be an int (the cache positions filled) or a one-element int32 device array, got {length!r}"
        )
    n, queries = visible(Q, K, length)
    if not queries <= n <= K.shape[1]:
        raise ValueError(f"length must lie between Q's {queries} new positions and the cache's {K.shape[1]}, got {n}")
    return Q.shape, np.float16


def on_device(length):
    """Whether ``length`` is a device array (CuPy, numba or the simulator's), which v06 on read on the GPU."""
    try:
        return arrays.library_of(length) != arrays.NUMPY
    except TypeError:  # an int, None, or anything else: not an array zoo takes
        return False


def host_length(K, length, step):
    """The positions filled as a host int, for a step that plans its launch from it (v01 to v05): the cache's
    capacity for None; a device length (which v06 on read on the GPU) is a TypeError before any launch."""
    if length is None:
        return K.shape[1]
    if on_device(length):
        raise TypeError(
            f"decode_attention {step} plans its launch from the length on the host: pass an int (v06 on read a "
            "device length on the GPU)"
        )
    return int(length)


def flops(size):
    h, _, n, d = dims(size)
    return 4 * h * n * d  # q K^T and P V: a multiply and an add per key and column each


def bytes_moved(size):
    h, kv, n, d = dims(size)
    return 2 * 2 * kv * n * d + 2 * 2 * h * d  # the cache's K and V once, q read and o written, float16


def check_limits(Q, K, V, length=None):
    """OutOfRange for a cache the steps' uint32 indices cannot cover, or a head size past MAX_HEAD_DIM."""
    from zoo.errors import OutOfRange

    if K.size >= LIMIT:
        raise OutOfRange(f"decode attention indexes with uint32: the cache must hold fewer than 2^32, got {K.size}")
    if Q.shape[2] > MAX_HEAD_DIM:
        raise OutOfRange(
            f"decode attention compiles a kernel per d, d / {THREADS} columns a thread: d up to {MAX_HEAD_DIM}, "
            f"got {Q.shape[2]}"
        )


def _grouped(Q, K, length):
    """(kv heads, q rows per kv head, positions, Q's positions) for the CuPy and torch rows."""
    n, queries = visible(Q, K, length)
    return K.shape[0], Q.shape[0] // K.shape[0] * queries, n, queries


def baseline(Q, K, V, out, length=None):
    """The composition in CuPy ops: the q rows of a kv head as one matrix against its keys (float16)."""
    import cupy

    kv, rows, n, queries = _grouped(Q, K, length)
    d = Q.shape[2]
    s = cupy.matmul(Q.reshape(kv, rows, d), K[:, :n].transpose(0, 2, 1)) * np.float16(1 / math.sqrt(d))
    if queries > 1:
        keep = cupy.arange(n)[None, :] <= (n - queries + cupy.arange(queries))[:, None]
        s = cupy.where(keep, s.reshape(kv, -1, queries, n), np.float16(-np.inf)).reshape(kv, rows, n)
    e = cupy.exp(s - s.max(axis=-1, keepdims=True))
    cupy.matmul(e / e.sum(axis=-1, keepdims=True), V[:, :n], out=out.reshape(kv, rows, d))


def torch_sdpa(Q, K, V, out, length=None):
    """PyTorch's ``scaled_dot_product_attention`` on the same arrays (DLPack, no copy), ``enable_gqa`` where the
    heads are grouped, then o copied into out (a few KB). Its causal mask is top-left aligned, so Q > 1 positions
    pass their bottom-right mask as a boolean ``attn_mask``."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        raise Unavailable(f"PyTorch cannot be imported here ({e})") from None
    kv, _, n, queries = _grouped(Q, K, length)
    q, k, v = (torch.from_dlpack(a).unsqueeze(0) for a in (Q, K, V))
    k, v = k[:, :, :n], v[:, :, :n]
    mask = None
    if queries > 1:
        mask = (
            torch.arange(n, device=q.device)[None, :] <= (n - queries + torch.arange(queries, device=q.device))[:, None]
        )
    grouped = {"enable_gqa": True} if kv != Q.shape[0] else {}
    torch.from_dlpack(out).copy_(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **grouped)[0])


def copy_ceiling(Q, K, V, out, length=None):
    """A device-to-device copy of half the cache's bytes (K's): it reads and writes what a decode step reads."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.copy_leading_bytes((K,), K.nbytes)


EXTRA_BASELINES = {"torch sdpa": torch_sdpa}
CEILINGS = {"copy_ceiling": copy_ceiling}  # the cache's bytes, read and written: checked as a copy
ROW_REFERENCE = {"copy_ceiling": lambda Q, K, V, length=None: K.reshape(-1).view(np.uint8)}
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(Q, K, V, length=None):
    """The same ops in NumPy, float32, one q head at a time."""
    n, queries = visible(Q, K, length)
    bh, _, d = Q.shape
    group = bh // K.shape[0]
    keep = np.arange(n)[None, :] <= (n - queries + np.arange(queries))[:, None]
    out = np.empty(Q.shape, np.float16)
    for h in range(bh):
        s = Q[h].astype(np.float32) @ K[h // group, :n].astype(np.float32).T * np.float32(1 / math.sqrt(d))
        s = np.where(keep, s, np.float32(-np.inf))
        e = np.exp(s - s.max(axis=1, keepdims=True))
        out[h] = (e @ V[h // group, :n].astype(np.float32)) / e.sum(axis=1, keepdims=True)
    return out


CPU = {"cpu_numpy": (cpu_numpy, "blas")}
