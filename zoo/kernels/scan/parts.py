"""Pieces several scan steps share: the warp scan, 32-bit bit casts, cached scratch.

Each step file still spells out its own block-level logic; only these small
building blocks live here.
"""
import numpy as np
from numba import cuda

from zoo import SIMULATOR

FULL_MASK = 0xFFFFFFFF


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


# -- 32-bit bit casts, for packing a value and a flag into one 64-bit word --------
if SIMULATOR:

    def to_u32(v):
        """The 32 bits of a float32 or int32 value, as uint32."""
        if isinstance(v, (float, np.floating)):
            return np.float32(v).view(np.uint32)
        return np.uint32(int(v) & 0xFFFFFFFF)

    def from_u32(u, like):
        """uint32 bits back to the type of ``like`` (float32 or int32)."""
        u = np.uint32(u)
        if isinstance(like, (float, np.floating)):
            return u.view(np.float32)
        return u.view(np.int32)

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    _I32 = ir.IntType(32)

    @intrinsic
    def to_u32(typingctx, v):
        if v == types.float32:
            def codegen(context, builder, sig, args):
                return builder.bitcast(args[0], _I32)  # numba has no __float_as_uint
        elif isinstance(v, types.Integer):
            def codegen(context, builder, sig, args):
                return context.cast(builder, args[0], sig.args[0], types.uint32)
        else:
            return None
        return types.uint32(v), codegen

    @intrinsic
    def from_u32(typingctx, u, like):
        if like == types.float32:
            def codegen(context, builder, sig, args):
                bits = context.cast(builder, args[0], sig.args[0], types.uint32)
                return builder.bitcast(bits, ir.FloatType())
            return types.float32(u, like), codegen
        if like == types.int32:
            def codegen(context, builder, sig, args):
                return context.cast(builder, args[0], sig.args[0], types.uint32)  # same 32 bits
            return types.int32(u, like), codegen
        return None


# -- scratch cached per (what, size, dtype, device) --------------------------------
_SCRATCH = {}


def scratch(what, count, dtype):
    """A zeroed device array cached per (what, count, dtype, device): allocated once, reused.

    Callers must leave it fit for the next call (or carry an epoch, see v05).
    """
    key = (what, int(count), np.dtype(dtype).str, _device_id())
    if key not in _SCRATCH:
        _SCRATCH[key] = cuda.to_device(np.zeros(int(count), dtype))
    return _SCRATCH[key]


def _device_id():
    try:
        return cuda.get_current_device().id
    except Exception:  # the simulator's fake device may lack an id
        return 0
