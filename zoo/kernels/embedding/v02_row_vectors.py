"""A block a token: the id read once, the row copied 16 bytes (eight float16) a load, two float4 stores.

Changes:
    From v01: a block takes a token; the id is read once (every thread
    reads the same address: one broadcast load), and each thread copies
    eight elements at a time, ``load_words4`` of the table's row (16 bytes)
    widened into two ``store_float4`` (32 bytes). Rows that are not whole
    pieces of eight, or unaligned arrays, run v01's kernel.
    Moves 6 bytes an element, the floor, and 4 a token.

Why it is faster:
    v01 issued a 2-byte load and a 4-byte store an element, and an id load
    with each; here a load brings eight elements and a store writes four, so
    a prefill's gather runs at the memory's pace, not the load units'. At
    one token the kernel is one block of a few loads: its launch.
"""

import numpy as np

from zoo.device import cuda, float32, uint32
from zoo.device.bits import unpack_half2
from zoo.device.jit import jit
from zoo.device.memory import aligned, flat_view, load_words4, store_float4
from zoo.kernels.embedding import THREADS, check_index_range
from zoo.kernels.embedding import v01_element_per_thread as v01

BASE = "v01"  # rows not of whole 16-byte pieces, or unaligned arrays: v01's kernel

validate = check_index_range  # the step's size limit: its indices are uint32


@jit
def gather_row(table, ids, out, vocab, hidden):
    token = uint32(cuda.blockIdx.x)
    token_id = ids[token]  # the same address for every thread: one broadcast
    found = 0 <= token_id < vocab
    row = uint32(token_id) * hidden if found else uint32(0)
    at = token * hidden
    c = uint32(cuda.threadIdx.x) * uint32(8)
    while c < hidden:  # hidden % 8 == 0: whole pieces of eight
        if found:
            w0, w1, w2, w3 = load_words4(table, row + c)
            a0, a1 = unpack_half2(w0)
            a2, a3 = unpack_half2(w1)
            b0, b1 = unpack_half2(w2)
            b2, b3 = unpack_half2(w3)
        else:  # no read outside the table
            a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = float32(0)
        store_float4(out, at + c, a0, a1, a2, a3)
        store_float4(out, at + c + uint32(4), b0, b1, b2, b3)
        c += uint32(8 * THREADS)


def launch(table, ids, out):
    vocab, hidden = table.shape
    if hidden % 8 or not aligned(table) or not aligned(out):
        return v01.launch(table, ids, out)
    gather_row[ids.shape[0], THREADS](flat_view(table), ids, flat_view(out), np.int32(vocab), np.uint32(hidden))
