"""What every pipeline step shares: the kernel, the chunking, cached buffers and streams, the timeline.

The steps differ only in how they order copies and kernel launches; the pieces they
order live here so that each step file shows the ordering and nothing else. The
kernel is the work each chunk does, a knob rather than the lesson: every step
launches this same ``fma_chain`` itself, on the stream its ordering picks.

Buffers and streams are cached and reused (one set per array length), never made
per call: a call that raises half-way leaves nothing behind, and a thousand calls
hold the same pinned and device memory as one. ``release()`` frees them all.
"""

import weakref
from contextlib import contextmanager

import numpy as np

from zoo import SIMULATOR
from zoo.device import cuda, float32
from zoo.device.jit import jit

WORK = 16 if SIMULATOR else 512  # FMAs per element; the simulator runs each one in Python
CHUNKS = 8
STREAMS = 4
THREADS = 256

# v <- v * A + B, A = 1 - 2^-10: contracting slowly, so float32 rounding errors stay near
# sqrt(work) ulps while x still matters after thousands of steps (A^4096 = e^-4).
A = float32(1.0 - 2.0**-10)
B = float32(2.0**-11)  # fixed point B / (1 - A) = 0.5


@jit
def fma_chain(x, y, work):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        for _ in range(work >> 2):  # four FMAs a trip: one loop-counter update per four
            v = v * A + B
            v = v * A + B
            v = v * A + B
            v = v * A + B
        for _ in range(work & 3):
            v = v * A + B
        y[i] = v


def reference(x, work=WORK):
    """The recurrence in closed form, in float64: A^w x + B (1 - A^w) / (1 - A)."""
    a, b = float(A), float(B)
    aw = a ** int(work)
    return aw * x.astype(np.float64) + b * (1.0 - aw) / (1.0 - a)


def blocks_for(n):
    """Blocks of THREADS threads that cover n elements, one thread each."""
    return (n + THREADS - 1) // THREADS


def compute(x, y, work, stream=0):
    """Launch the kernel over x -> y (device arrays or views) on ``stream`` (the sweep's timing of the kernel)."""
    fma_chain[blocks_for(x.size), THREADS, stream](x, y, work)


def chunk_bounds(n, chunks):
    """(start, stop) of min(chunks, n) pieces of n whose lengths differ by at most one."""
    k = max(1, min(int(chunks), n))
    base, extra = divmod(n, k)
    bounds, start = [], 0
    for c in range(k):
        stop = start + base + (1 if c < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def check_run(x, out, work, chunks, streams):
    """ValueError before anything is enqueued: run() is called directly, past the registry's checks."""
    if not (isinstance(x, np.ndarray) and isinstance(out, np.ndarray)):
        raise TypeError("run() takes NumPy arrays (launch() takes device arrays)")
    if x.dtype != np.float32 or out.dtype != np.float32 or x.ndim != 1 or out.shape != x.shape:
        raise ValueError(
            f"x and out must be 1-D float32 of one shape, got {x.dtype}{x.shape} and {out.dtype}{out.shape}"
        )
    if x.size == 0 or not (x.flags.c_contiguous and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError("x must be non-empty and contiguous, out contiguous and writeable")
    check_params(work, chunks, streams)


def check_params(work, chunks, streams):
    if int(work) < 0:
        raise ValueError(f"work must be >= 0, got {work}")
    if int(chunks) < 1 or int(streams) < 1:
        raise ValueError(f"chunks and streams must be >= 1, got {chunks} and {streams}")


# -- host memory -----------------------------------------------------------------
_PINNED = {}  # id -> weak reference of arrays made by pinned_empty (ndarrays are unhashable)


def pinned_empty(n, dtype=np.float32):
    """A NumPy array in page-locked host memory: copies from it can run asynchronously."""
    a = cuda.pinned_array(n, dtype)
    key = id(a)
    _PINNED[key] = weakref.ref(a, lambda _, key=key: _PINNED.pop(key, None))
    return a


def is_pinned(a):
    """True for pinned_empty / cuda.pinned_array / cuda.mapped_array arrays and their views."""
    from numba.cuda.cudadrv import driver

    while isinstance(a, np.ndarray):
        ref = _PINNED.get(id(a))
        if ref is not None and ref() is a:
            return True
        base = a.base
        if not SIMULATOR and isinstance(base, (driver.PinnedMemory, driver.MappedMemory)):
            return True
        a = base
    return False


# -- cached buffers and streams --------------------------------------------------
_cache = {}


def device_buffers(n):
    """Device input and output of length n, reused while n stays the same."""
    key = ("device", n)
    if key not in _cache:
        _cache.pop(next((k for k in _cache if k[0] == "device"), None), None)
        _cache[key] = (cuda.device_array(n, np.float32), cuda.device_array(n, np.float32))
    return _cache[key]


def staging(n):
    """Pinned host input and output of length n, reused while n stays the same."""
    key = ("pinned", n)
    if key not in _cache:
        _cache.pop(next((k for k in _cache if k[0] == "pinned"), None), None)
        _cache[key] = (pinned_empty(n), pinned_empty(n))
    return _cache[key]


def streams(count):
    """``count`` non-default streams, created once and kept."""
    have = _cache.setdefault("streams", [])
    while len(have) < count:
        have.append(cuda.stream())
    return have[:count]


def release():
    """Drop every cached buffer and stream (numba frees them when they are collected)."""
    cuda.synchronize()
    _cache.clear()


@contextmanager
def pinned_io(x, out):
    """(x, out) in pinned memory: the arrays themselves, or cached staging copies.

    Staging costs a host copy each way that nothing overlaps; callers that
    care allocate with pinned_empty.
    """
    direct = is_pinned(x) and is_pinned(out)
    px, pout = (x, out) if direct else staging(x.size)
    if not direct:
        px[...] = x
    try:
        yield px, pout
    except BaseException:
        cuda.synchronize()  # no copy still in flight may touch these buffers once the error is raised
        raise
    if not direct:
        out[...] = pout  # the caller synchronized before leaving the with block


# -- timeline ---------------------------------------------------------------------
@contextmanager
def span(timeline, stage, chunk, lane, stream=0):
    """Record CUDA events around one stage on ``stream`` when a timeline (a list) is given.

    Entries are (stage, chunk, lane, start event, stop event); the sweep reads
    the times once the call has finished. In the simulator events record nothing.
    """
    if timeline is None:
        yield
        return
    start, stop = cuda.event(), cuda.event()
    start.record(stream)
    yield
    stop.record(stream)
    timeline.append((stage, chunk, lane, start, stop))


def is_host(*arrays):
    return all(isinstance(a, np.ndarray) for a in arrays)
