"""128-bit loads and stores: 32 elements a thread per iteration.

Changes:
    From v02: the walk reads and writes aligned 16-byte pieces
    (``load_words4`` / ``store_words4``: ``ld.global.v4.u32`` and
    ``st.global.v4.u32``) and runs ``relu_word`` on each of the four words;
    ``launch`` splits at the first 16-byte boundary, so the head and tail are
    up to 15 bytes each, still one byte per thread. Arrays at different
    offsets from a 16-byte boundary fall back to v02 (which may itself fall
    back to v01).

Why it is faster:
    A warp's memory instruction moves 512 bytes, 1024 elements: a quarter of
    v02's loads, stores and loop overhead again, and 16 bytes in flight per
    thread instead of 4. What it does not reduce is the unpacking, now the
    larger cost: compiled for sm_90 the loop is 271 instructions for every 16
    bytes read. Reading 2 TB/s (half of the H200's 4 TB/s, the other half is
    the writes) is 1.25e11 pieces a second, 3.4e13 thread instructions, 1e12
    warp instructions: about what all 528 schedulers of the H200 issue in a
    second. The SMs' issue slots, not DRAM, set the pace. v04 attacks that.

Measured:
    NVIDIA H200, size 268435456: 2,108 GB/s (127 us a call), 499.0% of cupy.take(TABLE,
    packed, out=out), 32 registers, occupancy bound 100%. Other sizes, % of
    cupy.take(TABLE, packed, out=out): 16777216: 52.8%. From results/nvidia-h200.json.
"""
import numpy as np
from numba import cuda, uint32

from zoo.device import sm_count
from zoo.device.jit import jit
from zoo.kernels.int4 import v02_words as wordwise
from zoo.kernels.int4 import alignment
from zoo.kernels.int4.v01_byte_per_thread import relu_byte
from zoo.kernels.int4.v02_words import relu_word
from zoo.device.memory import load_words4, store_words4

THREADS_PER_BLOCK = 256
BLOCKS_PER_SM = 8
validate = alignment.validate


@jit
def relu_vector(packed, out, head, count, size):
    g = uint32(cuda.grid(1))
    stride = uint32(cuda.gridsize(1))
    i = g
    while i < count:
        j = head + i * uint32(16)  # 16-byte aligned in both arrays (launch's split)
        w0, w1, w2, w3 = load_words4(packed, j)
        store_words4(out, j, relu_word(w0), relu_word(w1), relu_word(w2), relu_word(w3))
        i += stride
    if g < head:  # bytes before the first aligned piece
        out[g] = relu_byte(packed[g])
    e = head + count * uint32(16) + g  # bytes after the last whole piece
    if e < size:
        out[e] = relu_byte(packed[e])


def launch(packed, out):
    parts = alignment.split(packed, out, 16)
    if parts is None:
        wordwise.launch(packed, out)  # no 16 bytes are aligned in both arrays at once
        return
    head, count = parts
    needed = (count + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    blocks = max(1, min(needed, BLOCKS_PER_SM * sm_count()))  # 256 threads cover a head and tail of 15 each
    relu_vector[blocks, THREADS_PER_BLOCK](packed, out, np.uint32(head), np.uint32(count), np.uint32(packed.size))
