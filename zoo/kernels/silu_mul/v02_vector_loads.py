"""Four elements a thread: gate and up in one 128-bit load each, four float16 out in two words.

Changes:
    From v01: thread i owns four consecutive output elements: gate and up
    come in with ``load_float4`` (16 bytes each), the four results go out as
    two words of two float16. Rows whose n is not a multiple of four, or
    unaligned arrays, run v01's kernel.
    Moves 10 bytes an element, as v01.

Why it is faster:
    The same bytes in a quarter of the memory instructions and a quarter of
    the index arithmetic: at a prefill's millions of elements v01 is bound
    by issuing loads, not by DRAM. At one row (decode, 14,336 elements) both
    are a handful of blocks, and the launch is most of the time.
"""

import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.jit import jit
from zoo.device.memory import aligned, flat_view, load_float4, store_word
from zoo.device.mma import pack_half2
from zoo.kernels.silu_mul import THREADS, check_index_range
from zoo.kernels.silu_mul import v01_element_per_thread as v01

BASE = "v01"  # rows not of whole float4 vectors, or unaligned arrays: v01's kernel

validate = check_index_range  # the step's size limit: its indices are uint32


@jit(device=True)
def silu(g):
    return g / (float32(1) + math.exp(-g))


@jit
def silu_mul_vectors(gate_up, out, n):
    i = uint32(cuda.grid(1)) * uint32(4)  # the first of the thread's four elements
    if i < out.size:  # n % 4 == 0: a vector never crosses a row
        at = (i // n) * uint32(2) * n + i % n
        g0, g1, g2, g3 = load_float4(gate_up, at)
        u0, u1, u2, u3 = load_float4(gate_up, at + n)
        store_word(out, i, pack_half2(float16(silu(g0) * u0), float16(silu(g1) * u1)))
        store_word(out, i + uint32(2), pack_half2(float16(silu(g2) * u2), float16(silu(g3) * u3)))


def launch(gate_up, out):
    rows, n = out.shape
    if n % 4 or not aligned(gate_up) or not aligned(out, 8):
        return v01.launch(gate_up, out)
    vectors = out.size // 4
    silu_mul_vectors[(vectors + THREADS - 1) // THREADS, THREADS](flat_view(gate_up), flat_view(out), np.uint32(n))
