"""128-bit loads and stores of four float32: ``load_float4`` and ``store_float4`` (``load_int4`` for int32).

numba emits one 32-bit load per element access; it never merges four into one
wide access. These intrinsics take a float32 (int32) array, 1-D or a C-contiguous
array of any rank indexed by its flat element index (so a kernel needs no reshaped
view, which costs host time at every launch), and an element index that must be
a multiple of 4 (16-byte aligned), bitcast the element pointer to
``<4 x float>*`` with ``align 16``, and compile to ``ld.v4.f32`` / ``st.v4.f32``
(global or shared memory, whichever the array lives in). In the simulator they
are plain Python that also checks the alignment.

    a0, a1, a2, a3 = load_float4(A, i)      # A[i], A[i+1], A[i+2], A[i+3]
    store_float4(out, i, v0, v1, v2, v3)

``load_flat(arr, i)`` and ``store_flat(arr, i, v)`` are the 32-bit companions: one
element of a C-contiguous array of any rank by its flat index, so a kernel that
takes 2-D matrices can mix scalar and 128-bit accesses on one flat index.

``aligned(arr)`` is the host-side check a launch makes before choosing them:
whether the array's first element sits on a 16-byte boundary.
"""
from zoo import SIMULATOR
from zoo.arrays import address


def aligned(arr):
    """Whether arr starts on a 16-byte boundary: a device, CuPy or NumPy array (the simulator's are host memory)."""
    return address(arr) % 16 == 0

if SIMULATOR:

    def _flat(arr):
        return arr if arr.ndim == 1 else arr.reshape(-1)  # a view: C-contiguous like the device arrays

    def load_float4(arr, i):
        if i % 4:
            raise IndexError(f"load_float4 at element {i}: not 16-byte aligned")
        arr = _flat(arr)
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

    load_int4 = load_float4

    def load_flat(arr, i):
        return _flat(arr)[i]

    def store_flat(arr, i, v):
        _flat(arr)[i] = v

    def store_float4(arr, i, v0, v1, v2, v3):
        if i % 4:
            raise IndexError(f"store_float4 at element {i}: not 16-byte aligned")
        arr = _flat(arr)
        arr[i], arr[i + 1], arr[i + 2], arr[i + 3] = v0, v1, v2, v3

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    _VEC4 = ir.VectorType(ir.FloatType(), 4)

    def _flat_indexable(arr):
        return isinstance(arr, types.Array) and (arr.ndim == 1 or arr.layout == "C")

    def _check(arr, dtype=types.float32):
        if not (_flat_indexable(arr) and arr.dtype == dtype):
            raise TypeError(f"{'float4' if dtype == types.float32 else 'int4'} access needs a 1-D or C-contiguous "
                            f"{dtype} array, got {arr}")

    def _element_pointer(context, builder, arrty, arr, index, indexty):
        data = context.make_array(arrty)(context, builder, arr).data
        offset = context.cast(builder, index, indexty, types.intp)
        return builder.gep(data, [offset])

    def _vector_pointer(context, builder, arrty, arr, index, indexty):
        element = _element_pointer(context, builder, arrty, arr, index, indexty)
        vec4 = ir.VectorType(context.get_data_type(arrty.dtype), 4)  # <4 x float> or <4 x i32>
        return builder.bitcast(element, vec4.as_pointer(element.type.addrspace))

    def _load4(arr, index, dtype):
        _check(arr, dtype)
        sig = types.UniTuple(dtype, 4)(arr, index)

        def codegen(context, builder, sig, args):
            ptr = _vector_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            vec = builder.load(ptr, align=16)
            parts = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    @intrinsic
    def load_float4(typingctx, arr, index):
        return _load4(arr, index, types.float32)

    @intrinsic
    def load_int4(typingctx, arr, index):
        return _load4(arr, index, types.int32)

    @intrinsic
    def store_float4(typingctx, arr, index, v0, v1, v2, v3):
        _check(arr)
        sig = types.void(arr, index, types.float32, types.float32, types.float32, types.float32)

        def codegen(context, builder, sig, args):
            ptr = _vector_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            vec = ir.Constant(_VEC4, None)
            for j in range(4):
                value = context.cast(builder, args[2 + j], sig.args[2 + j], types.float32)
                vec = builder.insert_element(vec, value, ir.Constant(ir.IntType(32), j))
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()

        return sig, codegen

    def _check_flat(arr):
        if not _flat_indexable(arr):
            raise TypeError(f"flat access needs a 1-D or C-contiguous array, got {arr}")

    @intrinsic
    def load_flat(typingctx, arr, index):
        _check_flat(arr)
        sig = arr.dtype(arr, index)

        def codegen(context, builder, sig, args):
            return builder.load(_element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1]))

        return sig, codegen

    @intrinsic
    def store_flat(typingctx, arr, index, value):
        _check_flat(arr)
        sig = types.void(arr, index, value)

        def codegen(context, builder, sig, args):
            ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            builder.store(context.cast(builder, args[2], sig.args[2], sig.args[0].dtype), ptr)
            return context.get_dummy_value()

        return sig, codegen
