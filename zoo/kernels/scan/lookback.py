"""The look-back state every single-pass scan step shares: its flags, ticket counter and epoch.

A single-pass scan (v05, v06) publishes each tile's total in a status word that
later tiles read; the words and the counter that hands out tile numbers live in
device buffers kept between calls, so the epoch that tells this call's words from
an earlier call's lives here too, one for all the steps that use them.
"""

import numpy as np

from zoo.runtime.buffers import scratch

MAX_EPOCH = 1 << 29  # epoch * 4 + status must fit in the 32 tag bits of a status word
_EPOCHS = {}  # id of a flags array -> epoch of its latest call


def lookback_state(tiles):
    """(flags, counter, epoch) for a single-pass launch over ``tiles`` tiles.

    The flags and the ticket counter are cached per tile count and device, and
    shared by every step that uses them, so the epoch lives here too: it goes up
    by one every call, whichever step makes it, and a status word of an earlier
    call (smaller epoch) reads as "not yet published". The kernel's last tile
    resets the counter. When the epoch would overflow the tag bits, the flags
    are cleared and the count starts over.
    """
    flags = scratch("lookback_flags", tiles, np.uint64, zero=True)
    counter = scratch("lookback_counter", 1, np.int32, zero=True)
    epoch = _EPOCHS.get(id(flags), 0) + 1
    if epoch >= MAX_EPOCH:
        flags.copy_to_device(np.zeros(int(tiles), np.uint64))
        epoch = 1
    _EPOCHS[id(flags)] = epoch
    return flags, counter, np.uint64(epoch)
