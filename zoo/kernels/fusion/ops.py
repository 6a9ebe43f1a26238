"""What the fusion steps share: the chain's ops as device functions, and cached temporaries.

Every step applies these same functions in the same order; the steps differ
only in how many kernels (launches) they are grouped into, which is the lesson.
Constants are float32 so the arithmetic stays float32: numba would widen
``float32 * 2.0`` to float64.
"""
import math

import numpy as np

from zoo.device.buffers import release as release_buffers
from zoo.device.buffers import scratch
from zoo.device.jit import jit
from zoo.kernels import fusion as spec

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


# sin's odd Taylor coefficients up to v^11: on |v| <= 1 the first term left out, v^13 / 13!, is
# below 1.7e-10, far under float32's half ulp of sin(1) (3e-8)
SIN_C3 = np.float32(-1.0 / 6.0)
SIN_C5 = np.float32(1.0 / 120.0)
SIN_C7 = np.float32(-1.0 / 5040.0)
SIN_C9 = np.float32(1.0 / 362880.0)
SIN_C11 = np.float32(-1.0 / 39916800.0)


@jit(device=True)
def sin_unit(v):
    """sin(v) for |v| <= 1 only: no range reduction, an odd polynomial in 7 float32 instructions.

    Every sin's output lies in [-1, 1], so in sin(sin(...)) only the first sin needs
    sinf's reduction of its argument to [-pi/4, pi/4] and its quadrant logic; the next
    ones can take this. Measured against float64 on 200,001 points of [-1, 1]: at most
    5.2e-8 off (under one float32 ulp of sin(1), 6e-8). Outside [-1, 1] it is wrong.
    """
    v2 = v * v
    p = SIN_C9 + v2 * SIN_C11  # Horner in v^2: each line one FMA
    p = SIN_C7 + v2 * p
    p = SIN_C5 + v2 * p
    p = SIN_C3 + v2 * p
    return v + v * v2 * p  # v + v^3 (c3 + v^2 (c5 + ...))


@jit(device=True)
def sin4(v):
    """sin applied four times, each a full libdevice sinf: the seeds' example."""
    return sin(sin(sin(sin(v))))


@jit(device=True)
def sin4_bounded(v):
    """sin applied four times, the last three through sin_unit: their arguments are sines."""
    return sin_unit(sin_unit(sin_unit(sin(v))))


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
