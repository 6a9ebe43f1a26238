"""The two pieces every tiled step shares: a warp tile's ``mma`` and its store to ``out``.

A warp tile is MT x NT ``mma`` tiles of 16 x 8: MT A fragments (four words each)
and NT B fragments (two words each) give MT NT accumulator tiles (four float32
each, ``acc[4 (i NT + j)]`` onwards). ``kind`` is the inputs' dtype (``A.dtype``):
float16, or uint16 for bfloat16, which picks the ``mma`` form when the kernel
compiles. MT and NT must be compile-time constants for the accumulators to stay
in registers, so these are factories: each returns a device function built for
one (MT, NT), inlined where it is called.
"""

import functools

from zoo.device import uint32
from zoo.device.jit import jit
from zoo.device.mma import mma_16bit_f32


@functools.cache
def multiply(MT, NT):
    """``multiply(kind, acc, a_frag, a0, b_frag, b0)``: acc += A fragments from a_frag[a0] times B's from b_frag[b0]."""

    @jit(device=True, forceinline=True)
    def multiply_warp_tile(kind, acc, a_frag, a0, b_frag, b0):
        for i in range(MT):
            a = a0 + 4 * i
            for j in range(NT):
                b = b0 + 2 * j
                c = 4 * (i * NT + j)
                acc[c], acc[c + 1], acc[c + 2], acc[c + 3] = mma_16bit_f32(
                    kind,
                    a_frag[a],
                    a_frag[a + 1],
                    a_frag[a + 2],
                    a_frag[a + 3],
                    b_frag[b],
                    b_frag[b + 1],
                    acc[c],
                    acc[c + 1],
                    acc[c + 2],
                    acc[c + 3],
                )

    return multiply_warp_tile


@functools.cache
def store(MT, NT):
    """``store(out, acc, row, col, N)``: the warp tile whose top-left is (row, col) of ``out`` (N columns, flat).

    Lane (g, t) holds rows g and g + 8 and columns 2t, 2t + 1 of each 16 x 8 tile
    (the C fragment), so each of its stores writes two neighbours.
    """

    @jit(device=True, forceinline=True)
    def store_warp_tile(out, acc, row, col, N, g, t):
        for i in range(MT):
            for j in range(NT):
                c = 4 * (i * NT + j)
                at = (row + uint32(i * 16) + g) * N + col + uint32(j * 8) + t * uint32(2)
                out[at], out[at + uint32(1)] = acc[c], acc[c + 1]
                at += uint32(8) * N
                out[at], out[at + uint32(1)] = acc[c + 2], acc[c + 3]

    return store_warp_tile
