"""Four pairs a thread: 128-bit loads of x, two words of float16 out on each side of the head.

Changes:
    From v02: a thread takes four consecutive pairs, j .. j+3, of a head:
    x_j .. x_{j+3} and x_{j+d/2} .. x_{j+d/2+3} in two ``load_float4``, the
    eight outputs in four word stores (two float16 a word). The angle table
    is v02's. Heads whose half is not a multiple of four, or unaligned
    arrays, run v02's kernel.
    Moves 6 bytes an element plus the positions, as v02.

Why it is faster:
    v02 read 4 bytes and wrote 2 an instruction: at a prefill's millions of
    elements the load and store instructions, not DRAM, limit it. Here 16
    bytes come in an instruction and 4 go out, four times fewer memory
    instructions for the same bytes.
"""

import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.jit import jit
from zoo.device.memory import aligned, flat_view, load_float4, store_word
from zoo.device.mma import pack_half2
from zoo.kernels.rope import LOG2_THETA, THREADS
from zoo.kernels.rope import v02_angles_once_per_token as v02

BASE = "v02"  # heads whose half is not whole vectors of four, or unaligned arrays: v02's kernel

MAX_HALF = v02.MAX_HALF
validate = v02.validate  # heads up to 2 MAX_HALF, uint32 indices


@jit
def rope_token_vectors(x, positions, out, heads, d):
    cosines = cuda.shared.array(MAX_HALF, float32)
    sines = cuda.shared.array(MAX_HALF, float32)
    t = uint32(cuda.threadIdx.x)
    token = uint32(cuda.blockIdx.x)
    half = d // uint32(2)
    p = float32(positions[token])
    j = t
    while j < half:  # the token's angles, once
        a = p * math.exp2(float32(-2.0 * LOG2_THETA) * float32(j) / float32(d))
        cosines[j] = math.cos(a)
        sines[j] = math.sin(a)
        j += uint32(THREADS)
    cuda.syncthreads()  # the table is written before any thread reads it
    base = token * heads * d
    quads = half // uint32(4)  # vectors of four pairs a head
    q = t
    while q < heads * quads:  # consecutive threads, consecutive vectors of a head
        j = (q % quads) * uint32(4)
        first = base + (q // quads) * d + j  # x_j .. x_{j+3}; the partners are d/2 further
        a0, a1, a2, a3 = load_float4(x, first)
        b0, b1, b2, b3 = load_float4(x, first + half)
        c0, c1, c2, c3 = cosines[j], cosines[j + 1], cosines[j + 2], cosines[j + 3]
        s0, s1, s2, s3 = sines[j], sines[j + 1], sines[j + 2], sines[j + 3]
        store_word(out, first, pack_half2(float16(a0 * c0 - b0 * s0), float16(a1 * c1 - b1 * s1)))
        store_word(out, first + uint32(2), pack_half2(float16(a2 * c2 - b2 * s2), float16(a3 * c3 - b3 * s3)))
        store_word(out, first + half, pack_half2(float16(b0 * c0 + a0 * s0), float16(b1 * c1 + a1 * s1)))
        store_word(out, first + half + uint32(2), pack_half2(float16(b2 * c2 + a2 * s2), float16(b3 * c3 + a3 * s3)))
        q += uint32(THREADS)


def launch(x, positions, out):
    tokens, heads, d = x.shape
    if (d // 2) % 4 or not aligned(x) or not aligned(out, 8):
        return v02.launch(x, positions, out)
    rope_token_vectors[tokens, THREADS](flat_view(x), positions, flat_view(out), np.uint32(heads), np.uint32(d))
