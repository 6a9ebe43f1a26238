"""The word a radix sort reads a key's digits from: for float32 keys, bits mapped so that unsigned order is the float's.

``float_word(key)`` takes a float32 and returns a uint32 whose unsigned order is the
float's order, as the family's spec states it: a positive float gets its sign bit set
(above every negative), a negative one has every bit flipped (a larger magnitude lower);
-0.0 first becomes +0.0 (equal, so zeros keep their input order) and every NaN becomes
the largest word (after +inf, in input order). On the GPU the cast is free and the map a
handful of integer instructions. ``uint_word(key)`` is a uint32 key's own word.

The steps read a key's digits through these and move the key itself unchanged, so the
sorted output holds the input's very bits (-0.0 stays -0.0, a NaN keeps its payload).
"""

import numpy as np

from zoo.device import cuda, uint32
from zoo.device.bits import as_uint32

SIGN = np.uint32(0x80000000)
MAGNITUDE = np.uint32(0x7FFFFFFF)
INFINITY = np.uint32(0x7F800000)  # the bits of +inf: a larger magnitude is a NaN
LAST = np.uint32(0xFFFFFFFF)  # where every NaN sorts


@cuda.jit(device=True)
def float_word(key):
    """The sort word of a float32 key: three selects and no branch on the GPU."""
    bits = as_uint32(key)
    word = uint32(~bits) if bits >= SIGN else uint32(bits | SIGN)  # negative: every bit flipped; positive: sign set
    word = SIGN if bits == SIGN else word  # -0.0 sorts as +0.0
    return LAST if bits & MAGNITUDE > INFINITY else word  # a NaN, of either sign, sorts last


@cuda.jit(device=True)
def uint_word(key):
    """The sort word of a uint32 key: the key."""
    return key
