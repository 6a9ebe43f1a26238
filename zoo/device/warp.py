"""Warp helpers: the full-warp mask, a warp-wide inclusive scan, and shuffles with CUDA's ``width``.

``FULL_MASK`` (0xFFFFFFFF) names all 32 lanes for the ``*_sync`` intrinsics.
``warp_inclusive_scan(v)`` is the inclusive prefix sum of ``v`` across a warp,
in five shuffle rounds and no barrier (every lane must call).

The shuffles with ``width``:

CUDA C++ has ``__shfl_sync(mask, var, srcLane, width)`` and its ``_up``,
``_down`` and ``_xor`` siblings: ``width`` (a power of two, at most 32) splits
the warp into segments of ``width`` lanes that shuffle among themselves.
numba's ``cuda.shfl_*_sync`` have no ``width``: numba's ``shfl_sync_intrinsic``
passes PTX's clamp/segment operand ``c`` as a compile-time constant (0x1f, or 0
for ``up``), so a width chosen by the caller cannot reach the instruction. The
device functions here do the segmenting in software instead: one full-warp
shuffle, then a compare and select, which gives exactly CUDA's results:

- ``shfl_sync``: reads lane ``(lane & ~(width-1)) | (src_lane & (width-1))``,
  the ``src_lane % width``-th lane of the caller's own segment.
- ``shfl_up_sync``: keeps its own value when ``(lane & (width-1)) < delta``.
- ``shfl_down_sync``: keeps its own value when
  ``(lane & (width-1)) + delta >= width``.
- ``shfl_xor_sync``: keeps its own value when ``lane ^ lane_mask`` lies in a
  later segment than the caller's (a segment may read earlier segments, not
  later ones).

As in PTX, ``delta`` and ``lane_mask`` count by their low 5 bits. Every lane
named in ``mask`` must call, with the same ``width``; ``width`` is not checked.
All arguments are integers; ``value`` may be int32, int64, float32 or float64.
They work on the GPU and in the simulator (``zoo.simulator``).
"""

from zoo.runtime.backend import cuda

FULL_MASK = 0xFFFFFFFF  # every lane of the warp takes part


@cuda.jit(device=True)
def warp_inclusive_scan(v):
    """Inclusive scan of v across the 32 lanes of a warp (all lanes must call).

    Five shuffle rounds: lane l adds the value of lane l - d for d = 1, 2, 4, 8,
    16 (Hillis-Steele inside the warp, in registers, no barrier needed).
    """
    lane = cuda.laneid
    for k in range(5):  # constant trip count: unrolled
        d = 1 << k
        got = cuda.shfl_up_sync(FULL_MASK, v, d)
        if lane >= d:
            v += got
    return v


@cuda.jit(device=True)
def shfl_sync(mask, value, src_lane, width):
    """value from lane src_lane % width of the caller's width-lane segment."""
    src = (cuda.laneid & ~(width - 1)) | (src_lane & (width - 1))
    return cuda.shfl_sync(mask, value, src)


@cuda.jit(device=True)
def shfl_up_sync(mask, value, delta, width):
    """value from lane - delta, or the caller's own value if that lane lies
    before the caller's segment."""
    d = delta & 31
    got = cuda.shfl_up_sync(mask, value, d)
    return value if (cuda.laneid & (width - 1)) < d else got


@cuda.jit(device=True)
def shfl_down_sync(mask, value, delta, width):
    """value from lane + delta, or the caller's own value if that lane lies
    past the caller's segment."""
    d = delta & 31
    got = cuda.shfl_down_sync(mask, value, d)
    return value if (cuda.laneid & (width - 1)) + d >= width else got


@cuda.jit(device=True)
def shfl_xor_sync(mask, value, lane_mask, width):
    """value from lane ^ lane_mask, or the caller's own value if that lane lies
    in a later segment."""
    m = lane_mask & 31
    got = cuda.shfl_xor_sync(mask, value, m)
    # The caller's segment ends at lane | (width - 1).
    return value if (cuda.laneid ^ m) > (cuda.laneid | (width - 1)) else got
