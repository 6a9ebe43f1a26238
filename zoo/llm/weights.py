"""Random weights made on the GPU from a seed, in float16, and the same weights quantized to the gemv family's int4.

Nothing is downloaded: each matrix is filled by a counter-based hash of (seed, matrix,
element), so a seed names the same model on any GPU and in the simulator, in
milliseconds at Llama-3-8B's 8 billion weights. Linear weights are uniform with the
standard deviation 1 / sqrt(in) of a fresh model, the norms' weights 1 +- 0.1, the
embedding table uniform in -1 .. 1. The model's output is then noise, but noise that
every implementation of the same model must reproduce token for token.

int4 (``Linear.quantize``): one float16 scale per 128 weights of a row, the group's
largest magnitude over 7, and the codes clamp(round(w / scale), -8, 7) packed two to a
byte in the gemv family's layout (code 2i in the low nibble of byte i), quantized on
the GPU; the gemv family's last step then packs them into its own order once
(``Variant.packed``: its prepared-weights API), as a model's weights are packed when they
load.
"""

import math

import numpy as np
from numba import cuda, float32, uint32, uint64
from numba.core.types import float16

import zoo
from zoo import SIMULATOR
from zoo.device.jit import jit
from zoo.llm.config import GROUP

THREADS = 256
TILE = 32  # transpose_tiles: a block moves a 32 x 32 tile
TILE_ROWS = 8  # ... with 32 x 8 threads, four rows each
PADDED = TILE + 1  # the shared tile's row: the +1 column puts a tile's column in 32 different banks (a constant:
# numba sizes a shared array from literals only)
MASK = 0xFFFFFFFF  # products of two 32-bit numbers stay below 2^64: each mixing step is exact in uint64


@jit
def fill_uniform(out, seed, center, half_width):
    """out[i] = center + half_width (2 u - 1), u in [0, 1) from murmur3's finalizer of (i, seed)."""
    i = cuda.grid(1)
    if i < out.size:
        h = (uint64(i) * uint64(0x9E3779B1) + uint64(seed) * uint64(0x7F4A7C15)) & uint64(MASK)
        h ^= h >> uint64(16)
        h = (h * uint64(0x85EBCA6B)) & uint64(MASK)
        h ^= h >> uint64(13)
        h = (h * uint64(0xC2B2AE35)) & uint64(MASK)
        h ^= h >> uint64(16)
        u = float32(h >> uint64(8)) * float32(2.0**-24)
        out[i] = float16(center + half_width * (float32(2) * u - float32(1)))


@jit
def quantize_groups(W, codes, scales, n, groups):
    """A thread a group of GROUP weights of a row: its float16 scale, and its codes packed two to a byte."""
    i = uint32(cuda.grid(1))
    if i < scales.size:
        row, group = i // groups, i % groups
        first = group * uint32(GROUP)
        last = min(n, first + uint32(GROUP))
        largest = float32(0)
        for c in range(first, last):
            largest = max(largest, abs(float32(W[row * n + c])))
        scale = float16(max(largest / float32(7), float32(2.0**-14)))  # never 0: the smallest float16 normal
        scales[i] = scale
        inverse = float32(1) / float32(scale)
        row_bytes = (n + uint32(1)) // uint32(2)
        for c in range(first, last, 2):
            low = min(max(math.floor(float32(W[row * n + c]) * inverse + float32(0.5)), -8), 7)
            high = 0
            if c + 1 < last:  # an odd row ends in a 0 nibble
                high = min(max(math.floor(float32(W[row * n + c + 1]) * inverse + float32(0.5)), -8), 7)
            codes[row * row_bytes + c // uint32(2)] = (int(low) & 0xF) | ((int(high) & 0xF) << 4)


@jit
def transpose_tiles(W, out):
    """out = W^T for a float16 W (rows x cols): a block reads a 32 x 32 tile along W's rows and writes it along
    out's rows, through shared memory."""
    tile = cuda.shared.array((TILE, PADDED), float32)  # float32 (exact for float16), padded: the reads down a column
    # below do not conflict
    rows, cols = W.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col0, row0 = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    for k in range(0, TILE, TILE_ROWS):  # consecutive threads, consecutive columns of W: coalesced reads
        r, c = row0 + ty + k, col0 + tx
        if r < rows and c < cols:
            tile[ty + k, tx] = float32(W[r, c])
    cuda.syncthreads()  # the whole tile is in shared memory before any thread reads another's element
    for k in range(0, TILE, TILE_ROWS):  # consecutive threads, consecutive columns of out (W's rows): coalesced
        c, r = col0 + ty + k, row0 + tx
        if c < cols and r < rows:
            out[c, r] = float16(tile[tx, ty + k])


def transposed(W):
    """A new float16 (cols x rows) device array holding W^T."""
    rows, cols = W.shape
    out = cuda.device_array((cols, rows), np.float16)
    transpose_tiles[((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE), (TILE, TILE_ROWS)](W, out)
    return out


def uniform_on_host(count, seed, center, half_width):
    """``fill_uniform``'s numbers computed by NumPy: the same hash, the same float32 rounding (the simulator's way,
    where a kernel of a thread an element is slow)."""
    h = (
        np.arange(count, dtype=np.uint64) * np.uint64(0x9E3779B1) + np.uint64(seed) * np.uint64(0x7F4A7C15)
    ) & np.uint64(MASK)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & np.uint64(MASK)
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & np.uint64(MASK)
    h ^= h >> np.uint64(16)
    u = (h >> np.uint64(8)).astype(np.float32) * np.float32(2.0**-24)
    return (np.float32(center) + np.float32(half_width) * (np.float32(2) * u - np.float32(1))).astype(np.float16)


def random_matrix(shape, seed, center, half_width):
    if SIMULATOR:
        return cuda.to_device(uniform_on_host(int(np.prod(shape)), seed, center, half_width).reshape(shape))
    a = cuda.device_array(shape, np.float16)
    flat = a.reshape(a.size)
    fill_uniform[(a.size + THREADS - 1) // THREADS, THREADS](
        flat, np.uint32(seed), np.float32(center), np.float32(half_width)
    )
    return a


class Linear:
    """One linear layer, y = W x: float16 W (out x in) and, once ``quantize`` ran, its int4 form packed for gemv.

    ``parts`` are the row counts of the projections it fuses (Q, K, V; gate, up): the rows of one matrix, so the
    unfused model launches one GEMV a part on row slices of the same weights."""

    def __init__(self, out, n, seed, parts=None):
        self.shape = (out, n)
        self.W = random_matrix((out, n), seed, 0.0, math.sqrt(3.0 / n))  # std 1 / sqrt(in)
        self.parts = parts or (out,)
        self.codes = self.scales = self.packed = None

    @classmethod
    def of(cls, W, parts=None):
        """A linear layer on a given float16 device matrix W (out x in): a shard of another's (``tensor_parallel``)."""
        linear = cls.__new__(cls)
        linear.shape, linear.W, linear.parts = W.shape, W, parts or (W.shape[0],)
        linear.codes = linear.scales = linear.packed = None
        return linear

    def slices(self):
        """[(first row, last row)] of each part."""
        edges = np.cumsum((0, *self.parts))
        return list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))

    def quantize(self, x_like, keep_plain=False):
        """The int4 codes and scales (row-major, the gemv family's int4 kind), packed by gemv's last step for its
        kernel (``Variant.packed``). ``x_like`` is any float16 vector of ``in`` elements where x will live (packing
        looks at its size and alignment only). keep_plain keeps the row-major form (the reference reads it)."""
        out, n = self.shape
        groups = -(-n // GROUP)
        codes = cuda.device_array((out, (n + 1) // 2), np.uint8)
        scales = cuda.device_array((out, groups), np.float16)
        quantize_groups[(scales.size + THREADS - 1) // THREADS, THREADS](
            self.W.reshape(self.W.size),
            codes.reshape(codes.size),
            scales.reshape(scales.size),
            np.uint32(n),
            np.uint32(groups),
        )
        gemv = zoo.family("gemv")
        packed_W, _, packed_scales = gemv[len(gemv)].packed((codes, x_like, scales))
        self.packed = (packed_W, packed_scales)
        if keep_plain:
            self.codes, self.scales = codes, scales

    def dequantized(self):
        """float64 host copy of the int4 weights as stored (scale times code): what the int4 model multiplies by."""
        from zoo.kernels.gemv import dequantize

        n = self.shape[1]
        return dequantize(self.codes.copy_to_host(), np.zeros(n, np.float16), self.scales.copy_to_host())

    @property
    def nbytes_fp16(self):
        return 2 * self.shape[0] * self.shape[1]

    @property
    def nbytes_int4(self):
        out, n = self.shape
        return out * ((n + 1) // 2) + 2 * out * -(-n // GROUP)


class Layer:
    def __init__(self, config, seed):
        c = config
        self.attn_norm = random_matrix((c.hidden,), seed + 1, 1.0, 0.1)
        self.qkv = Linear(c.qkv_size, c.hidden, seed + 2, parts=(c.q_size, c.kv_size, c.kv_size))
        self.o = Linear(c.hidden, c.q_size, seed + 3)
        self.mlp_norm = random_matrix((c.hidden,), seed + 4, 1.0, 0.1)
        self.gate_up = Linear(2 * c.intermediate, c.hidden, seed + 5, parts=(c.intermediate, c.intermediate))
        self.down = Linear(c.hidden, c.intermediate, seed + 6)

    @property
    def linears(self):
        return (self.qkv, self.o, self.gate_up, self.down)


class Weights:
    """Every weight of the model, on the GPU, from ``seed``."""

    def __init__(self, config, seed=0):
        self.config = config.check()
        self.embedding = random_matrix((config.vocab, config.hidden), seed * 1000 + 1, 0.0, 1.0)
        self.layers = [Layer(config, seed * 1000 + 10 * (i + 1)) for i in range(config.layers)]
        self.final_norm = random_matrix((config.hidden,), seed * 1000 + 7, 1.0, 0.1)
        self.lm_head = Linear(config.vocab, config.hidden, seed * 1000 + 8)
        self.quantized = False
        self._transposed = self._lm_head_transposed = None

    def transposed(self):
        """Every layer's weights as the hgemm family's B (in x out), made once on the GPU (as many bytes again as the
        fp16 weights) and kept: a dict a layer, with Q and K's rows apart from V's ("qk", "v": a GEMM's output rows
        are then what rope reads), "o", "gate_up", "down"."""
        if self._transposed is None:
            qk = self.config.q_size + self.config.kv_size  # the rows of Q and K in the fused QKV matrix
            layers = [
                {
                    "qk": transposed(layer.qkv.W[:qk]),
                    "v": transposed(layer.qkv.W[qk:]),
                    "o": transposed(layer.o.W),
                    "gate_up": transposed(layer.gate_up.W),
                    "down": transposed(layer.down.W),
                }
                for layer in self.layers
            ]
            self._transposed = layers
        return self._transposed

    def drop_transposed(self):
        """Let the transposed weights go (made again if asked for again)."""
        self._transposed = self._lm_head_transposed = None

    def lm_head_transposed(self):
        """The lm_head's weights as hgemm's B (hidden x vocabulary), made once: for logits of many rows."""
        if self._lm_head_transposed is None:
            self._lm_head_transposed = transposed(self.lm_head.W)
        return self._lm_head_transposed

    @property
    def linears(self):
        return [lin for layer in self.layers for lin in layer.linears] + [self.lm_head]

    def quantize(self, keep_plain=False):
        """int4 weights for every linear layer (the lm_head too), packed for the gemv family's last step."""
        c = self.config
        by_width = {n: cuda.device_array(n, np.float16) for n in {c.hidden, c.q_size, c.intermediate}}
        for lin in self.linears:
            lin.quantize(by_width[lin.shape[1]], keep_plain)
        self.quantized = True

    def bytes_per_token(self, int4):
        """Weight bytes one token reads: every linear layer, the norms and one row of the embedding table."""
        c = self.config
        linear = sum(lin.nbytes_int4 if int4 else lin.nbytes_fp16 for lin in self.linears)
        return linear + 2 * c.hidden * (2 * c.layers + 1) + 2 * c.hidden
