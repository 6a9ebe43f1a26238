"""What the fusion steps share: the chain's ops as device functions, and cached temporaries.

Every step applies these same functions in the same order (v05 swaps three of
the sins for a polynomial of its own); the steps differ in how many kernels
(launches) they are grouped into and how those kernels walk the vector, which
is the lesson, not in the ops. Constants are float32 so the arithmetic stays float32: numba would widen
``float32 * 2.0`` to float64.
"""

import math

import numpy as np

from zoo.device.jit import jit
from zoo.kernels import fusion as spec
from zoo.runtime.buffers import release as release_buffers
from zoo.runtime.buffers import scratch

SCALE = np.float32(spec.SCALE)
BIAS = np.float32(spec.BIAS)
LO = np.float32(spec.LO)
HI = np.float32(spec.HI)
C0 = np.float32(spec.GELU_C0)
C1 = np.float32(spec.GELU_C1)
HALF = np.float32(0.5)
ONE = np.float32(1.0)


@jit(device=True)
def sin(v):
    return math.sin(v)  # libdevice sinf: full range reduction, no fastmath


@jit(device=True)
def sin4(v):
    """sin applied four times, each a full libdevice sinf: the seeds' example."""
    return sin(sin(sin(sin(v))))


@jit(device=True)
def scale(v):
    return v * SCALE


@jit(device=True)
def bias(v):
    return v + BIAS


@jit(device=True)
def gelu(y):
    inner = C0 * (y + C1 * (y * y * y))
    return HALF * y * (ONE + math.tanh(inner))  # libdevice tanhf


@jit(device=True)
def clamp(v):
    return LO if v < LO else (HI if v > HI else v)  # NaN passes through, as np.clip does


# -- temporaries ----------------------------------------------------------------------------------
def temporaries(n, count=2):
    """``count`` float32 device arrays of n elements: allocated on the first call for n, then reused.

    A framework's op-by-op path gets a fresh temporary from a memory pool per op;
    reusing two here keeps allocation out of the timing, so what is left is
    exactly the launches and the bytes. One size is kept at a time: at 2^28
    elements two temporaries are 2 GiB.
    """
    return tuple(scratch(f"fusion_temporary_{i}", n, np.float32, only_latest=True) for i in range(count))


def release():
    """Drop the cached temporaries (numba frees them once they are collected)."""
    release_buffers("fusion_temporary_")
