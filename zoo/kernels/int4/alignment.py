"""Where the word steps' aligned part of two byte arrays starts, and the limit of their uint32 indices.

The word steps read and write 4 or 16 bytes at a time (``zoo.device.memory``'s
``load_word`` / ``store_word`` and ``load_words4`` / ``store_words4``), which needs
the byte's address aligned in both the packed input and the output.
``split(packed, out, width)`` says how a step walks two arrays in ``width``-byte
pieces: the head (bytes before the first aligned address), the whole pieces,
and the tail after them; None when the two arrays sit at different offsets
from a ``width`` boundary, so no piece could be aligned in both.
"""

from zoo.device.memory import address
from zoo.errors import OutOfRange

LIMIT = 2**31  # bytes: uint32 byte indices plus a grid stride stay below 2^32


def split(packed, out, width):
    """(head, pieces) for walking packed and out ``width`` bytes at a time, or None if they cannot both be aligned.

    packed[:head] lie before the first ``width``-byte boundary; then ``pieces``
    whole aligned pieces; the rest, fewer than ``width`` bytes, is the tail.
    """
    offset = -address(packed) % width
    if -address(out) % width != offset:
        return None
    head = min(offset, packed.size)
    return head, (packed.size - head) // width


def validate(packed):
    """The word steps index bytes with uint32: fewer than 2^31 bytes."""
    if packed.size >= LIMIT:
        raise OutOfRange(f"the int4 word steps index bytes with uint32: fewer than 2^31 bytes, got {packed.size}")
