"""A thread an output element: each computes its pair's frequency, angle, sine and cosine, and reads two inputs.

Changes:
    The first step. Thread i owns element i of the flat x: its head offset e
    gives the pair j = e mod d/2, f_j = theta^(-2j/d) by ``pow``, the angle p
    f_j from its token's position, a sine and a cosine, then x_e and its
    partner x_{e +- d/2}, and one float16 out.
    Moves 8 bytes an element plus the positions: x is read twice (each
    element by its own thread and by its partner's), mostly from L1.

Why it is faster:
    It is the starting point. Every element pays a ``pow``, a ``sin`` and a
    ``cos``: a token's 40 heads x 128 elements compute the same 64 angles 80
    times over, and a pair's two threads compute the same one twice. At a
    prefill's thousands of tokens the transcendentals, not the bytes, set
    the time.
"""

import math

import numpy as np

from zoo.device import cuda, float16, float32, uint32
from zoo.device.jit import jit
from zoo.kernels.rope import THETA, THREADS, check_index_range

validate = check_index_range  # the step's size limit: its indices are uint32


@jit
def rope_element(x, positions, out, token_size, d):
    i = uint32(cuda.grid(1))
    if i < x.size:  # the last block sticks out past the end
        half = d // uint32(2)
        e = i % d  # the element's place in its head
        j = e % half  # its pair
        f = math.pow(float32(THETA), float32(-2.0) * float32(j) / float32(d))
        a = float32(positions[i // token_size]) * f
        c, s = math.cos(a), math.sin(a)
        if e < half:  # the first of its pair: x_j cos - x_{j+d/2} sin
            y = x[i] * c - x[i + half] * s
        else:  # the second: x_{j+d/2} cos + x_j sin
            y = x[i] * c + x[i - half] * s
        out[i] = float16(y)


def launch(x, positions, out):
    tokens, heads, d = x.shape
    rope_element[(x.size + THREADS - 1) // THREADS, THREADS](
        x.reshape(x.size), positions, out.reshape(out.size), np.uint32(heads * d), np.uint32(d)
    )
