"""Device buffers a step keeps between calls: partial sums, counters, flags, temporaries.

A step that needs scratch memory asks for it by name, and the second call of the
same shape allocates nothing (allocation would be timed, and would wait for the
device):

    partials = scratch("reduce_partials", blocks, np.float32)
    counter = scratch("lookback_counter", 1, np.int32, zero=True)

Buffers are kept per (name, element count, dtype, device). ``zero=True`` fills a
new buffer with zeros (a counter the kernel resets itself after use); otherwise
its contents are whatever the last call left. ``only_latest=True`` keeps one
size per name, freeing the others: for large temporaries (two of 2^28 float32
are 2 GiB). ``release(prefix)`` drops the buffers whose names start with it.
"""

import numpy as np

from zoo.runtime.backend import cuda  # the backend's device arrays: the kernels' own kind

_BUFFERS = {}


def _device_id():
    try:
        return cuda.get_current_device().id
    except Exception:  # the simulator, or a dry run without a device
        return 0


def scratch(what, count, dtype, zero=False, only_latest=False):
    """A device array of ``count`` elements of ``dtype``, made on the first call for this key, then reused."""
    # The allocator is part of the key, so the host stand-ins of an offline compile (zoo.tools.machine_code
    # swaps cuda.device_array) never serve a real launch.
    key = (what, int(count), np.dtype(dtype).str, _device_id(), cuda.device_array)
    buf = _BUFFERS.get(key)
    if buf is None:
        if only_latest:
            for old in [k for k in _BUFFERS if k[0] == what]:
                del _BUFFERS[old]  # numba frees the array once nothing else holds it
        buf = cuda.to_device(np.zeros(int(count), dtype)) if zero else cuda.device_array(int(count), dtype)
        _BUFFERS[key] = buf
    return buf


def release(prefix=""):
    """Forget the buffers whose names start with ``prefix`` (all of them by default)."""
    for key in [k for k in _BUFFERS if k[0].startswith(prefix)]:
        del _BUFFERS[key]
