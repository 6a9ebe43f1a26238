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


# -- 128-bit loads and stores of four float32 or four int32 ------------------------
# zoo.vector has them for float32 only; the scan needs int32 too. Same technique:
# bitcast the element pointer to a <4 x T> pointer with align 16 (ld/st.global.v4).
if SIMULATOR:

    def load4(arr, i):
        if i % 4:
            raise IndexError(f"load4 at element {i}: not 16-byte aligned")
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

    def store4(arr, i, v0, v1, v2, v3):
        if i % 4:
            raise IndexError(f"store4 at element {i}: not 16-byte aligned")
        arr[i], arr[i + 1], arr[i + 2], arr[i + 3] = v0, v1, v2, v3

else:

    def _vector_pointer(context, builder, arrty, arr, index, indexty):
        data = context.make_array(arrty)(context, builder, arr).data
        element = builder.gep(data, [context.cast(builder, index, indexty, types.intp)])
        vec = ir.VectorType(context.get_value_type(arrty.dtype), 4)
        return builder.bitcast(element, vec.as_pointer(element.type.addrspace))

    def _four(arr):
        return (isinstance(arr, types.Array) and arr.ndim == 1
                and arr.dtype in (types.float32, types.int32))

    @intrinsic
    def load4(typingctx, arr, index):
        if not _four(arr):
            return None
        sig = types.UniTuple(arr.dtype, 4)(arr, index)

        def codegen(context, builder, sig, args):
            vec = builder.load(_vector_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1]),
                               align=16)
            parts = [builder.extract_element(vec, ir.Constant(_I32, j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    @intrinsic
    def store4(typingctx, arr, index, v0, v1, v2, v3):
        if not _four(arr):
            return None
        sig = types.void(arr, index, v0, v1, v2, v3)

        def codegen(context, builder, sig, args):
            dtype = sig.args[0].dtype
            ptr = _vector_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            vec = ir.Constant(ir.VectorType(context.get_value_type(dtype), 4), None)
            for j in range(4):
                value = context.cast(builder, args[2 + j], sig.args[2 + j], dtype)
                vec = builder.insert_element(vec, value, ir.Constant(_I32, j))
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()

        return sig, codegen


# -- look-back state, shared by every single-pass step -----------------------------
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
    flags = scratch("lookback_flags", tiles, np.uint64)
    counter = scratch("lookback_counter", 1, np.int32)
    epoch = _EPOCHS.get(id(flags), 0) + 1
    if epoch >= MAX_EPOCH:
        flags.copy_to_device(np.zeros(int(tiles), np.uint64))
        epoch = 1
    _EPOCHS[id(flags)] = epoch
    return flags, counter, np.uint64(epoch)
