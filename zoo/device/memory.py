"""Wide and narrow loads and stores that numba does not emit by itself.

numba emits one access per element: a float32 array is read 4 bytes at a time, a
uint8 array one byte at a time; it never merges neighbouring accesses into one
wide instruction. Each function here takes an array and an element index,
reinterprets the element's address as a pointer to a wider type (an LLVM
``bitcast``: the same address, another type) and loads or stores through it.

=============================================  ===============================================
``load_float4(arr, i)``                         arr[i..i+3] of a float32 array: ``ld.v4.f32``
``store_float4(arr, i, v0, v1, v2, v3)``        the reverse: ``st.v4.f32``
``store_float2(arr, i, v0, v1)``                arr[i], arr[i+1] of a float32 array: ``st.v2.f32`` (i even)
``load_int4(arr, i)``                           arr[i..i+3] of an int32 array: ``ld.v4.u32``
``store_int4(arr, i, v0, v1, v2, v3)``          the reverse: ``st.v4.u32``
``load4``, ``store4``                           either of the two, chosen by the array's dtype
                                                (a kernel compiled for float32 and for int32)
``load_flat(arr, i)``, ``store_flat(arr, i, v)``  one element of a C-contiguous array of any rank by
                                                its flat index (mixes with the 128-bit accesses)
``load_word(arr, i)``                           the 4 bytes at arr[i] as one uint32 (little endian:
                                                for a uint8 array, bytes[i..i+3], byte i in bits 0-7):
                                                ``ld.u32``
``load_words2(arr, i)``                         the 8 bytes at arr[i] as two uint32: ``ld.v2.u32``
``load_words4(arr, i)``                         the 16 bytes at arr[i] as four uint32: ``ld.v4.u32``
``store_word``, ``store_words4``                the reverse: ``st.u32``, ``st.v4.u32``
``red_add_flat(arr, i, v)``                     arr[i] += v of a float32 array of any rank, by flat
                                                index, as one atomic with no result: ``red.global.add.f32``
``red_add_float4(arr, i, v0, v1, v2, v3)``      arr[i..i+3] += v0..v3 of a float32 array in global
                                                memory, as one atomic: ``red.global.add.v4.f32``
                                                (sm_90 on: ``REDG.E.ADD.F32x4``, where four scalar
                                                atomics make four requests to the L2)
=============================================  ===============================================

The 128-bit forms need ``i`` to be a multiple of 4 elements (16 bytes; ``store_float2``: of 2) from an
aligned start; the word forms need the element's *address* 4- (8-, 16-) byte aligned.
The word forms read raw bytes of any dtype: on a uint8 array ``i`` is a byte
index, on a float16 array eight consecutive halves come back as four words
(``zoo.device.bits.unpack_half2`` turns a word into two float32).
The float32 and int32 forms take a 1-D array or a C-contiguous array of any
rank indexed by its flat element index (a kernel needs no reshaped view, which
costs host time at every launch). They work on global or shared memory, whichever
the array lives in.

Host side (``zoo.runtime.arrays``, named here too): ``address(arr)`` is the device address of an array's first element
and ``aligned(arr)`` says whether it sits on a 16-byte boundary, the check a
launch makes before choosing the 128-bit path. ``flat_view(arr)`` is a 1-D view of
a C-contiguous array, made once per array object and kept while it lives, for the
functions that take 1-D arrays only (``zoo.device.mma``'s word loads).

In the simulator they are plain Python that also check the alignment (the word
forms check the real address), so a misaligned access fails a test there too.
"""

from zoo.runtime import SIMULATOR, backend
from zoo.runtime.arrays import address, aligned, flat_view  # noqa: F401 (the host side: see above)

if SIMULATOR:
    import threading

    import numpy as np

    _RED_LOCK = threading.Lock()  # the simulator's threads add into shared elements one at a time

    def _flat(arr):
        return arr if arr.ndim == 1 else arr.reshape(-1)  # a view: C-contiguous like the device arrays

    def load_float4(arr, i):
        if i % 4:
            raise IndexError(f"load_float4 at element {i}: not 16-byte aligned")
        arr = _flat(arr)
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

    def store_float4(arr, i, v0, v1, v2, v3):
        if i % 4:
            raise IndexError(f"store_float4 at element {i}: not 16-byte aligned")
        arr = _flat(arr)
        arr[i], arr[i + 1], arr[i + 2], arr[i + 3] = v0, v1, v2, v3

    def store_float2(arr, i, v0, v1):
        if i % 2:
            raise IndexError(f"store_float2 at element {i}: not 8-byte aligned")
        arr = _flat(arr)
        arr[i], arr[i + 1] = v0, v1

    load_int4, store_int4 = load_float4, store_float4
    load4, store4 = load_float4, store_float4

    def load_flat(arr, i):
        return _flat(arr)[i]

    def store_flat(arr, i, v):
        _flat(arr)[i] = v

    def _raw(arr, i, width, what):
        """(the array's bytes, the byte offset of element i), checked: aligned, and inside the array."""
        flat = _flat(arr)
        start = int(i) * flat.itemsize
        if (flat.ctypes.data + start) % width:
            raise IndexError(f"{width}-byte {what} at element {i}: address not {width}-byte aligned")
        if start + width > flat.nbytes:
            raise IndexError(f"{width}-byte {what} at element {i} runs past {flat.nbytes} bytes")
        return flat.view(np.uint8), start

    def _word(raw, b):
        return (
            np.uint32(raw[b])
            | np.uint32(raw[b + 1]) << np.uint32(8)
            | np.uint32(raw[b + 2]) << np.uint32(16)
            | np.uint32(raw[b + 3]) << np.uint32(24)
        )

    def _put_word(raw, b, w):
        w = np.uint32(w)
        for k in range(4):
            raw[b + k] = (w >> np.uint32(8 * k)) & np.uint32(255)

    def load_word(arr, i):
        raw, b = _raw(arr, i, 4, "load")
        return _word(raw, b)

    def load_words2(arr, i):
        raw, b = _raw(arr, i, 8, "load")
        return _word(raw, b), _word(raw, b + 4)

    def load_words4(arr, i):
        raw, b = _raw(arr, i, 16, "load")
        return _word(raw, b), _word(raw, b + 4), _word(raw, b + 8), _word(raw, b + 12)

    def store_word(arr, i, w):
        raw, b = _raw(arr, i, 4, "store")
        _put_word(raw, b, w)

    def store_words4(arr, i, w0, w1, w2, w3):
        raw, b = _raw(arr, i, 16, "store")
        for k, w in enumerate((w0, w1, w2, w3)):
            _put_word(raw, b + 4 * k, w)

    def red_add_flat(arr, i, v):
        with _RED_LOCK:
            _flat(arr)[i] += v

    def red_add_float4(arr, i, v0, v1, v2, v3):
        if i % 4:
            raise IndexError(f"red_add_float4 at element {i}: not 16-byte aligned")
        for k, v in enumerate((v0, v1, v2, v3)):  # each of the four is atomic (on the GPU too), not the four together
            red_add_flat(arr, i + k, v)

else:
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    _I32 = ir.IntType(32)
    _WORDS4 = ir.VectorType(_I32, 4)

    def element_pointer(context, builder, arrty, arr, index, indexty):
        """LLVM pointer to arr[index] (flat index into the array's data)."""
        data = context.make_array(arrty)(context, builder, arr).data
        offset = context.cast(builder, index, indexty, types.intp)
        return builder.gep(data, [offset])

    def pointer_as(context, builder, arrty, arr, index, indexty, target):
        """The address of arr[index] as a pointer to ``target`` (an LLVM type), in the same address space."""
        element = element_pointer(context, builder, arrty, arr, index, indexty)
        return builder.bitcast(element, target.as_pointer(element.type.addrspace))

    def _check_lanes(arr, dtype):
        if not (isinstance(arr, types.Array) and arr.dtype == dtype and (arr.ndim == 1 or arr.layout == "C")):
            raise TypeError(
                f"{'float4' if dtype == types.float32 else 'int4'} access needs a 1-D or C-contiguous "
                f"{dtype} array, got {arr}"
            )

    def _load4(arr, index, dtype):
        _check_lanes(arr, dtype)
        sig = types.UniTuple(dtype, 4)(arr, index)

        def codegen(context, builder, sig, args):
            vec4 = ir.VectorType(context.get_data_type(sig.args[0].dtype), 4)  # <4 x float> or <4 x i32>
            vec = builder.load(pointer_as(context, builder, sig.args[0], args[0], args[1], sig.args[1], vec4), align=16)
            parts = [builder.extract_element(vec, ir.Constant(_I32, j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    def _store4(arr, index, dtype):
        _check_lanes(arr, dtype)
        sig = types.void(arr, index, dtype, dtype, dtype, dtype)

        def codegen(context, builder, sig, args):
            vec4 = ir.VectorType(context.get_data_type(dtype), 4)
            ptr = pointer_as(context, builder, sig.args[0], args[0], args[1], sig.args[1], vec4)
            vec = ir.Constant(vec4, None)
            for j in range(4):
                value = context.cast(builder, args[2 + j], sig.args[2 + j], dtype)
                vec = builder.insert_element(vec, value, ir.Constant(_I32, j))
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def load_float4(typingctx, arr, index):
        return _load4(arr, index, types.float32)

    @intrinsic
    def store_float4(typingctx, arr, index, v0, v1, v2, v3):
        return _store4(arr, index, types.float32)

    @intrinsic
    def store_float2(typingctx, arr, index, v0, v1):
        _check_lanes(arr, types.float32)
        sig = types.void(arr, index, v0, v1)

        def codegen(context, builder, sig, args):
            vec2 = ir.VectorType(ir.FloatType(), 2)
            ptr = pointer_as(context, builder, sig.args[0], args[0], args[1], sig.args[1], vec2)
            vec = ir.Constant(vec2, None)
            for j in range(2):
                value = context.cast(builder, args[2 + j], sig.args[2 + j], types.float32)
                vec = builder.insert_element(vec, value, ir.Constant(_I32, j))
            builder.store(vec, ptr, align=8)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def load_int4(typingctx, arr, index):
        return _load4(arr, index, types.int32)

    @intrinsic
    def store_int4(typingctx, arr, index, v0, v1, v2, v3):
        return _store4(arr, index, types.int32)

    _FOUR_BYTE = (types.float32, types.int32)

    @intrinsic
    def load4(typingctx, arr, index):
        if isinstance(arr, types.Array) and arr.dtype in _FOUR_BYTE:
            return _load4(arr, index, arr.dtype)
        return None

    @intrinsic
    def store4(typingctx, arr, index, v0, v1, v2, v3):
        if isinstance(arr, types.Array) and arr.dtype in _FOUR_BYTE:
            return _store4(arr, index, arr.dtype)
        return None

    def _check_flat(arr):
        if not (isinstance(arr, types.Array) and (arr.ndim == 1 or arr.layout == "C")):
            raise TypeError(f"flat access needs a 1-D or C-contiguous array, got {arr}")

    @intrinsic
    def load_flat(typingctx, arr, index):
        _check_flat(arr)
        sig = arr.dtype(arr, index)

        def codegen(context, builder, sig, args):
            return builder.load(element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1]))

        return sig, codegen

    @intrinsic
    def store_flat(typingctx, arr, index, value):
        _check_flat(arr)
        sig = types.void(arr, index, value)

        def codegen(context, builder, sig, args):
            ptr = element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            builder.store(context.cast(builder, args[2], sig.args[2], sig.args[0].dtype), ptr)
            return context.get_dummy_value()

        return sig, codegen

    def _check_bytes(arr, what):
        if not (isinstance(arr, types.Array) and (arr.ndim == 1 or arr.layout == "C")):
            raise TypeError(f"word {what} need a 1-D or C-contiguous array, got {arr}")

    @intrinsic
    def load_word(typingctx, arr, index):
        _check_bytes(arr, "loads")
        sig = types.uint32(arr, index)

        def codegen(context, builder, sig, args):
            ptr = pointer_as(context, builder, sig.args[0], args[0], args[1], sig.args[1], _I32)
            return builder.load(ptr, align=4)

        return sig, codegen

    @intrinsic
    def load_words2(typingctx, arr, index):
        _check_bytes(arr, "loads")
        sig = types.UniTuple(types.uint32, 2)(arr, index)

        def codegen(context, builder, sig, args):
            ptr = pointer_as(context, builder, sig.args[0], args[0], args[1], sig.args[1], ir.VectorType(_I32, 2))
            vec = builder.load(ptr, align=8)
            parts = [builder.extract_element(vec, ir.Constant(_I32, j)) for j in range(2)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    @intrinsic
    def load_words4(typingctx, arr, index):
        _check_bytes(arr, "loads")
        sig = types.UniTuple(types.uint32, 4)(arr, index)

        def codegen(context, builder, sig, args):
            ptr = pointer_as(context, builder, sig.args[0], args[0], args[1], sig.args[1], _WORDS4)
            vec = builder.load(ptr, align=16)
            parts = [builder.extract_element(vec, ir.Constant(_I32, j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    @intrinsic
    def store_word(typingctx, arr, index, w):
        _check_bytes(arr, "stores")
        sig = types.void(arr, index, types.uint32)

        def codegen(context, builder, sig, args):
            ptr = pointer_as(context, builder, sig.args[0], args[0], args[1], sig.args[1], _I32)
            builder.store(args[2], ptr, align=4)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def store_words4(typingctx, arr, index, w0, w1, w2, w3):
        _check_bytes(arr, "stores")
        sig = types.void(arr, index, types.uint32, types.uint32, types.uint32, types.uint32)

        def codegen(context, builder, sig, args):
            ptr = pointer_as(context, builder, sig.args[0], args[0], args[1], sig.args[1], _WORDS4)
            vec = ir.Constant(_WORDS4, None)
            for j in range(4):
                vec = builder.insert_element(vec, args[2 + j], ir.Constant(_I32, j))
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def red_add_flat(typingctx, arr, index, value):
        _check_flat(arr)
        if arr.dtype != types.float32:
            raise TypeError(f"red_add_flat adds into a float32 array, got {arr}")
        sig = types.void(arr, index, value)

        def codegen(context, builder, sig, args):
            ptr = element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            f32 = ir.FloatType()
            # NVVM's float atomic add (what numba's cuda.atomic.add calls); its old value is never read, so ptxas
            # emits a RED: no round trip from the L2 back to the thread
            add = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(f32, (ir.PointerType(f32), f32)), "llvm.nvvm.atomic.load.add.f32.p0f32"
            )
            builder.call(add, (ptr, context.cast(builder, args[2], sig.args[2], types.float32)))
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def red_add_float4(typingctx, arr, index, v0, v1, v2, v3):
        _check_lanes(arr, types.float32)
        sig = types.void(arr, index, v0, v1, v2, v3)

        def codegen(context, builder, sig, args):
            element = element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            address = builder.ptrtoint(element, ir.IntType(64))
            values = [context.cast(builder, args[2 + j], sig.args[2 + j], types.float32) for j in range(4)]
            f32 = ir.FloatType()
            # the vector form needs a .global address: numba's arrays hold generic ones (cvta converts; without
            # .global ptxas emits a generic ATOM)
            text = "{ .reg .u64 g; cvta.to.global.u64 g, $0; red.global.add.v4.f32 [g], {$1, $2, $3, $4}; }"
            asm = ir.InlineAsm(
                ir.FunctionType(ir.VoidType(), [ir.IntType(64)] + [f32] * 4),
                text,
                "l,f,f,f,f,~{memory}",
                side_effect=True,
            )
            builder.call(asm, [address] + values)
            return context.get_dummy_value()

        return sig, codegen


if backend.MLIR:  # numba-cuda-mlir compiles none of the above (llvmlite IR): the same instructions as inline PTX
    from zoo.device.inline_ptx import (  # noqa: F401, F811 (these names, for numba-cuda-mlir)
        load4,
        load_flat,
        load_float4,
        load_int4,
        load_word,
        load_words2,
        load_words4,
        red_add_flat,
        red_add_float4,
        store4,
        store_flat,
        store_float2,
        store_float4,
        store_int4,
        store_word,
        store_words4,
    )
