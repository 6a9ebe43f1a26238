"""Aligned 32-bit and 128-bit loads from a uint8 array: ``load_word`` and ``load_words4``.

numba reads a uint8 array one byte per instruction. These intrinsics take a
1-D uint8 array and a byte index whose address is a multiple of 4 (16 for
``load_words4``), bitcast the element pointer to ``i32*`` (``<4 x i32>*``)
and compile to ``ld.global.u32`` (``ld.global.v4.u32``). Bytes come out little
endian: byte i is bits 0-7 of the word. In the simulator they are plain Python
that check the real address, so a misaligned load fails a test there.

    w = load_word(data, i)                  # data[i] | data[i+1] << 8 | ...
    w0, w1, w2, w3 = load_words4(data, i)   # data[i:i+16] as four words
"""
import numpy as np

from zoo import SIMULATOR

if SIMULATOR:

    def _word(arr, i):
        return (np.uint32(arr[i]) | np.uint32(arr[i + 1]) << np.uint32(8)
                | np.uint32(arr[i + 2]) << np.uint32(16) | np.uint32(arr[i + 3]) << np.uint32(24))

    def _check(arr, i, width):
        if (arr.ctypes.data + int(i)) % width:
            raise IndexError(f"{width}-byte load at byte {i}: address not {width}-byte aligned")
        if int(i) + width > arr.size:
            raise IndexError(f"{width}-byte load at byte {i} runs past {arr.size} bytes")

    def load_word(arr, i):
        _check(arr, i, 4)
        return _word(arr, i)

    def load_words4(arr, i):
        _check(arr, i, 16)
        return _word(arr, i), _word(arr, i + 4), _word(arr, i + 8), _word(arr, i + 12)

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    _I32 = ir.IntType(32)
    _VEC4 = ir.VectorType(_I32, 4)

    def _check(arr):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint8):
            raise TypeError(f"word loads need a 1-D uint8 array, got {arr}")

    def _pointer(context, builder, arrty, arr, index, indexty, target):
        data = context.make_array(arrty)(context, builder, arr).data
        offset = context.cast(builder, index, indexty, types.intp)
        element = builder.gep(data, [offset])
        return builder.bitcast(element, target.as_pointer(element.type.addrspace))

    @intrinsic
    def load_word(typingctx, arr, index):
        _check(arr)
        sig = types.uint32(arr, index)

        def codegen(context, builder, sig, args):
            ptr = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], _I32)
            return builder.load(ptr, align=4)

        return sig, codegen

    @intrinsic
    def load_words4(typingctx, arr, index):
        _check(arr)
        sig = types.UniTuple(types.uint32, 4)(arr, index)

        def codegen(context, builder, sig, args):
            ptr = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], _VEC4)
            vec = builder.load(ptr, align=16)
            parts = [builder.extract_element(vec, ir.Constant(_I32, j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen
