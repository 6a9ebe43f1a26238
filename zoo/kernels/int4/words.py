"""Aligned 32-bit and 128-bit access to uint8 arrays, and where an array's aligned part starts.

The loads are the histogram family's (``zoo.kernels.histogram.wide``); this
module adds the matching stores, which compile to ``st.global.u32`` and
``st.global.v4.u32``. The byte index must be 4-byte (16-byte) aligned as an
address; bytes are little endian (byte i is bits 0-7 of the word). In the
simulator they are plain Python that check the real address, as the loads do.

    w = load_word(a, i);  store_word(out, i, w)
    w0, w1, w2, w3 = load_words4(a, i);  store_words4(out, i, w0, w1, w2, w3)

``split(packed, out, width)`` says how a step walks two arrays in ``width``-byte
pieces: the head (bytes before the first aligned address), the whole pieces,
and the tail after them; None when the two arrays sit at different offsets
from a ``width`` boundary, so no piece could be aligned in both.
"""
from zoo import SIMULATOR
from zoo.errors import OutOfRange
from zoo.kernels.histogram.wide import load_word, load_words4  # noqa: F401 (re-exported)

LIMIT = 2**31  # bytes: uint32 byte indices plus a grid stride stay below 2^32

if SIMULATOR:
    import numpy as np

    def _check(arr, i, width):
        if (arr.ctypes.data + int(i)) % width:
            raise IndexError(f"{width}-byte store at byte {i}: address not {width}-byte aligned")
        if int(i) + width > arr.size:
            raise IndexError(f"{width}-byte store at byte {i} runs past {arr.size} bytes")

    def _put(arr, i, w):
        w = np.uint32(w)
        for k in range(4):
            arr[i + k] = (w >> np.uint32(8 * k)) & np.uint32(255)

    def store_word(arr, i, w):
        _check(arr, i, 4)
        _put(arr, i, w)

    def store_words4(arr, i, w0, w1, w2, w3):
        _check(arr, i, 16)
        for k, w in enumerate((w0, w1, w2, w3)):
            _put(arr, i + 4 * k, w)

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    _I32 = ir.IntType(32)
    _VEC4 = ir.VectorType(_I32, 4)

    def _check(arr):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint8):
            raise TypeError(f"word stores need a 1-D uint8 array, got {arr}")

    def _pointer(context, builder, arrty, arr, index, indexty, target):
        data = context.make_array(arrty)(context, builder, arr).data
        offset = context.cast(builder, index, indexty, types.intp)
        element = builder.gep(data, [offset])
        return builder.bitcast(element, target.as_pointer(element.type.addrspace))  # uint8* -> i32* or <4 x i32>*

    @intrinsic
    def store_word(typingctx, arr, index, w):
        _check(arr)
        sig = types.void(arr, index, types.uint32)

        def codegen(context, builder, sig, args):
            ptr = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], _I32)
            builder.store(args[2], ptr, align=4)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def store_words4(typingctx, arr, index, w0, w1, w2, w3):
        _check(arr)
        sig = types.void(arr, index, types.uint32, types.uint32, types.uint32, types.uint32)

        def codegen(context, builder, sig, args):
            ptr = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], _VEC4)
            vec = ir.Constant(_VEC4, None)
            for j in range(4):
                vec = builder.insert_element(vec, args[2 + j], ir.Constant(_I32, j))
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()

        return sig, codegen


def address(arr):
    """Device address of arr's first element (the simulator's arrays are host memory)."""
    interface = getattr(arr, "__cuda_array_interface__", None)
    return interface["data"][0] if interface else arr.ctypes.data


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
