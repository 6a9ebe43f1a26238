"""The zoo's intrinsics for numba-cuda-mlir, as inline PTX (``ZOO_BACKEND=numba-cuda-mlir`` only).

numba-cuda-mlir lowers to MLIR, so the intrinsics of ``zoo.device.memory``, ``bits``, ``approx``,
``dependent_launch`` and ``mma``, written against numba-cuda's extension API (llvmlite IR), do not compile there; its
own ``@intrinsic`` does not yet work either (NVIDIA/numba-cuda-mlir#74). What it does take is CUDA C++-style inline
assembly, ``experimental.inline_ptx(ptx, constraint, value, ...)`` (``%0, %1, ...`` numbered in the order of the
pairs; an ``"="`` output is returned, several as a tuple, its value only a type), and ``overload`` from its extension
API, which picks an implementation from the argument types when a kernel is typed. Each function here is the same
instruction the numba-cuda version emits, with the same meaning and the same name; those modules take them from here
under numba-cuda-mlir, so a step's source does not change.

An element's address is the array's data pointer (``ctypes.pointer(arr)``, a generic address for global and shared
arrays alike) plus the flat index times the item size, which the overload knows from the array's type
(``arr.itemsize`` does not compile there: a NotImplementedError in its lowering). The loads and stores are generic
ones (``ld.v4.f32``, not ``ld.global.v4.f32``): the hardware resolves the space.

A shared array's element (ldmatrix, cp.async) is made a shared-window address with ``cvta.to.shared`` inside the
instruction's braces. Not here: ``mma.pack_half2`` (a float16 for an ``"h"`` operand is converted to an integer,
not passed as its bits: ``zoo.device.mlir_lowerings`` bit casts it), ``wgmma`` (its accumulators are read and
written in place: ``zoo.device.mlir_wgmma``), and, not yet, ``constant`` (docs/numba-cuda-mlir.md says how it
would port).
"""

import ctypes

import numpy as np
from numba_cuda_mlir import cuda
from numba_cuda_mlir.cuda import experimental
from numba_cuda_mlir.extending import overload, typing_registry
from numba_cuda_mlir.numba_cuda import types

uint32 = cuda.uint32
F32, I32, I64 = np.float32, np.int32, np.int64  # the types of "=" outputs


def _stub(name):
    def function(*args):
        raise NotImplementedError(f"{name} runs in a kernel compiled by numba-cuda-mlir")

    function.__name__ = function.__qualname__ = name
    return function


def _overload(name):
    """A function of this name that kernels call, and the decorator that gives it its implementations."""
    stub = _stub(name)
    return stub, overload(stub, typing_registry=typing_registry)


def _flat_array(arr):
    return isinstance(arr, types.Array) and (arr.ndim == 1 or arr.layout == "C")


# -- addresses ---------------------------------------------------------------------------------------------------
element_address, _element_address = _overload("element_address")


@_element_address
def _element_address_impl(arr, i):
    if not _flat_array(arr):
        raise TypeError(f"a flat element address needs a 1-D or C-contiguous array, got {arr}")
    size = arr.dtype.bitwidth // 8

    def impl(arr, i):
        return experimental.inline_ptx("mov.b64 %0, %1;", "=l", I64, "C", ctypes.pointer(arr)) + i * size

    return impl


# -- zoo.device.approx -------------------------------------------------------------------------------------------
@cuda.jit(device=True, forceinline=True)
def exp2_approx(x):
    return experimental.inline_ptx("ex2.approx.ftz.f32 %0, %1;", "=f", F32, "f", x)


# -- zoo.device.bits ---------------------------------------------------------------------------------------------
as_uint32, _as_uint32 = _overload("as_uint32")


@_as_uint32
def _as_uint32_impl(v):
    if v == types.float32:
        return lambda v: uint32(experimental.inline_ptx("mov.b32 %0, %1;", "=r", I32, "f", v))  # the same 32 bits
    if isinstance(v, types.Integer):
        return lambda v: uint32(v)
    return None


from_uint32, _from_uint32 = _overload("from_uint32")


@_from_uint32
def _from_uint32_impl(bits, like):
    if like == types.float32:
        return lambda bits, like: experimental.inline_ptx("mov.b32 %0, %1;", "=f", F32, "r", uint32(bits))
    if like == types.int32:
        return lambda bits, like: cuda.int32(uint32(bits))
    return None


@cuda.jit(device=True, forceinline=True)
def unpack_half2(word):
    return experimental.inline_ptx(
        "{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %2; cvt.f32.f16 %0, lo; cvt.f32.f16 %1, hi; }",
        "=f",
        F32,
        "=f",
        F32,
        "r",
        uint32(word),
    )


lop3, _lop3 = _overload("lop3")


@_lop3
def _lop3_impl(a, b, c, lut):
    if not isinstance(lut, types.IntegerLiteral):
        return None  # the table is part of the instruction: a constant (typed again as its literal)
    text = f"lop3.b32 %0, %1, %2, %3, {lut.literal_value & 0xFF:#x};"

    def impl(a, b, c, lut):
        return uint32(experimental.inline_ptx(text, "=r", I32, "r", uint32(a), "r", uint32(b), "r", uint32(c)))

    return impl


prmt, _prmt = _overload("prmt")


@_prmt
def _prmt_impl(a, b, selector):
    if not isinstance(selector, types.IntegerLiteral):
        return None
    chosen = selector.literal_value
    if chosen & 0x8888 or not 0 <= chosen <= 0xFFFF:
        raise ValueError(f"prmt takes four selector nibbles 0-7, got {chosen:#x}")
    text = f"prmt.b32 %0, %1, %2, {chosen:#x};"

    def impl(a, b, selector):
        return uint32(experimental.inline_ptx(text, "=r", I32, "r", uint32(a), "r", uint32(b)))

    return impl


@cuda.jit(device=True, forceinline=True)
def hfma2(a, b, c):
    return uint32(
        experimental.inline_ptx(
            "fma.rn.f16x2 %0, %1, %2, %3;", "=r", I32, "r", uint32(a), "r", uint32(b), "r", uint32(c)
        )
    )


# -- zoo.device.memory -------------------------------------------------------------------------------------------
def _four(name, dtypes):
    """A load and a store of four neighbouring elements, for arrays of ``dtypes`` (float32 ones as .f32, int32
    ones as .u32: the same 128 bits)."""
    load, register_load = _overload(f"load_{name}")
    store, register_store = _overload(f"store_{name}")

    @register_load
    def _load(arr, i):
        if not (_flat_array(arr) and arr.dtype in dtypes):
            return None
        if arr.dtype == types.float32:
            return lambda arr, i: experimental.inline_ptx(
                "ld.v4.f32 {%0, %1, %2, %3}, [%4];", "=f", F32, "=f", F32, "=f", F32, "=f", F32, "l",
                element_address(arr, i),
            )  # fmt: skip
        return lambda arr, i: experimental.inline_ptx(
            "ld.v4.u32 {%0, %1, %2, %3}, [%4];", "=r", I32, "=r", I32, "=r", I32, "=r", I32, "l",
            element_address(arr, i),
        )  # fmt: skip

    @register_store
    def _store(arr, i, v0, v1, v2, v3):
        if not (_flat_array(arr) and arr.dtype in dtypes):
            return None
        if arr.dtype == types.float32:
            return lambda arr, i, v0, v1, v2, v3: experimental.inline_ptx(
                "st.v4.f32 [%0], {%1, %2, %3, %4};", "l", element_address(arr, i), "f", v0, "f", v1, "f", v2, "f", v3
            )
        return lambda arr, i, v0, v1, v2, v3: experimental.inline_ptx(
            "st.v4.u32 [%0], {%1, %2, %3, %4};", "l", element_address(arr, i), "r", v0, "r", v1, "r", v2, "r", v3
        )

    return load, store


load_float4, store_float4 = _four("float4", (types.float32,))
load_int4, store_int4 = _four("int4", (types.int32,))
load4, store4 = _four("4", (types.float32, types.int32))


@cuda.jit(device=True, forceinline=True)
def store_float2(arr, i, v0, v1):
    experimental.inline_ptx("st.v2.f32 [%0], {%1, %2};", "l", element_address(arr, i), "f", v0, "f", v1)


@cuda.jit(device=True, forceinline=True)
def load_word(arr, i):
    return uint32(experimental.inline_ptx("ld.u32 %0, [%1];", "=r", I32, "l", element_address(arr, i)))


@cuda.jit(device=True, forceinline=True)
def load_words2(arr, i):
    w0, w1 = experimental.inline_ptx("ld.v2.u32 {%0, %1}, [%2];", "=r", I32, "=r", I32, "l", element_address(arr, i))
    return uint32(w0), uint32(w1)


@cuda.jit(device=True, forceinline=True)
def load_words4(arr, i):
    w0, w1, w2, w3 = experimental.inline_ptx(
        "ld.v4.u32 {%0, %1, %2, %3}, [%4];", "=r", I32, "=r", I32, "=r", I32, "=r", I32, "l", element_address(arr, i)
    )
    return uint32(w0), uint32(w1), uint32(w2), uint32(w3)


@cuda.jit(device=True, forceinline=True)
def store_word(arr, i, w):
    experimental.inline_ptx("st.u32 [%0], %1;", "l", element_address(arr, i), "r", uint32(w))


@cuda.jit(device=True, forceinline=True)
def store_words4(arr, i, w0, w1, w2, w3):
    experimental.inline_ptx(  # the pairs written out: a starred tuple does not type there (a ForceLiteralArg)
        "st.v4.u32 [%0], {%1, %2, %3, %4};", "l", element_address(arr, i),
        "r", uint32(w0), "r", uint32(w1), "r", uint32(w2), "r", uint32(w3),
    )  # fmt: skip


load_flat, _load_flat = _overload("load_flat")


@_load_flat
def _load_flat_impl(arr, i):
    if not _flat_array(arr):
        return None
    if arr.ndim == 1:
        return lambda arr, i: arr[i]
    return lambda arr, i: arr.ravel()[i]  # a C-contiguous array's flat view (reshape to arr.size does not lower)


store_flat, _store_flat = _overload("store_flat")


@_store_flat
def _store_flat_impl(arr, i, v):
    if not _flat_array(arr):
        return None

    def one(arr, i, v):
        arr[i] = v

    def flat(arr, i, v):
        arr.ravel()[i] = v

    return one if arr.ndim == 1 else flat


@cuda.jit(device=True, forceinline=True)
def red_add_flat(arr, i, v):
    experimental.inline_ptx("red.add.f32 [%0], %1;", "l", element_address(arr, i), "f", v)


@cuda.jit(device=True, forceinline=True)
def red_add_float4(arr, i, v0, v1, v2, v3):
    # the vector form needs a .global address: the element's is generic
    text = "{ .reg .u64 g; cvta.to.global.u64 g, %0; red.global.add.v4.f32 [g], {%1, %2, %3, %4}; }"
    experimental.inline_ptx(text, "l", element_address(arr, i), "f", v0, "f", v1, "f", v2, "f", v3)


# -- zoo.device.dependent_launch ---------------------------------------------------------------------------------
# numba-cuda-mlir's launch sets no programmatic-serialization attribute, so the wait returns at once: plain order
@cuda.jit(device=True, forceinline=True)
def wait_for_previous_kernel():
    experimental.inline_ptx("griddepcontrol.wait;")


@cuda.jit(device=True, forceinline=True)
def let_next_kernel_start():
    experimental.inline_ptx("griddepcontrol.launch_dependents;")


# -- zoo.device.mma (all but pack_half2: a float16 for an "h" operand is converted: zoo.device.mlir_lowerings) ---
_SIXTEEN_BIT = (types.float16, types.uint16)  # float16, and bfloat16 carried as its bits
_COPYABLE = _SIXTEEN_BIT + (types.float32, types.uint32, types.uint8)


def _check_array(arr, what, dtypes=_SIXTEEN_BIT):
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype in dtypes):
        raise TypeError(f"{what} needs a 1-D array of {' or '.join(map(str, dtypes))}, got {arr}")


def _mma(instruction):
    """One mma.sync form: four A and two B words (uint32), four float32 accumulators in, four out."""
    text = instruction + " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"

    @cuda.jit(device=True, forceinline=True)
    def mma(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return experimental.inline_ptx(
            text, "=f", F32, "=f", F32, "=f", F32, "=f", F32,
            "r", uint32(a0), "r", uint32(a1), "r", uint32(a2), "r", uint32(a3), "r", uint32(b0), "r", uint32(b1),
            "f", cuda.float32(c0), "f", cuda.float32(c1), "f", cuda.float32(c2), "f", cuda.float32(c3),
        )  # fmt: skip

    return mma


mma_f16_f32 = _mma("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
mma_bf16_f32 = _mma("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
mma_tf32_f32 = _mma("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")

mma_16bit_f32 = _stub("mma_16bit_f32")
_mma_16bit_f32 = overload(mma_16bit_f32, typing_registry=typing_registry, inline="always")


@_mma_16bit_f32
def _mma_16bit_f32_impl(kind, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    dtype = getattr(kind, "dtype", None)  # kind is the inputs' dtype (A.dtype): the form is chosen when typed
    if not isinstance(kind, (types.DType, types.NumberClass)) or dtype not in _SIXTEEN_BIT:
        raise TypeError(f"mma_16bit_f32: kind is the inputs' dtype, float16 or uint16 (bfloat16 bits), got {kind}")
    form = mma_f16_f32 if dtype == types.float16 else mma_bf16_f32

    def impl(kind, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return form(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

    return impl


to_tf32, _to_tf32 = _overload("to_tf32")


@_to_tf32
def _to_tf32_impl(x):
    if x == types.float32:
        return lambda x: uint32(experimental.inline_ptx("cvt.rna.tf32.f32 %0, %1;", "=r", I32, "f", x))
    if x == types.uint32:  # a float32's bits
        text = "{ .reg .f32 f; mov.b32 f, %1; cvt.rna.tf32.f32 %0, f; }"
        return lambda x: uint32(experimental.inline_ptx(text, "=r", I32, "r", x))
    raise TypeError(f"to_tf32 takes a float32 or its bits as uint32, got {x}")


load_half2, _load_half2 = _overload("load_half2")


@_load_half2
def _load_half2_impl(arr, i):
    _check_array(arr, "load_half2")
    return lambda arr, i: uint32(experimental.inline_ptx("ld.u32 %0, [%1];", "=r", I32, "l", element_address(arr, i)))


load_half8, _load_half8 = _overload("load_half8")


@_load_half8
def _load_half8_impl(arr, i):
    _check_array(arr, "load_half8")

    def impl(arr, i):
        w0, w1, w2, w3 = experimental.inline_ptx(
            "ld.v4.u32 {%0, %1, %2, %3}, [%4];", "=r", I32, "=r", I32, "=r", I32, "=r", I32, "l",
            element_address(arr, i),
        )  # fmt: skip
        return uint32(w0), uint32(w1), uint32(w2), uint32(w3)

    return impl


store_half8, _store_half8 = _overload("store_half8")


@_store_half8
def _store_half8_impl(arr, i, w0, w1, w2, w3):
    _check_array(arr, "store_half8")

    def impl(arr, i, w0, w1, w2, w3):
        experimental.inline_ptx(
            "st.v4.u32 [%0], {%1, %2, %3, %4};", "l", element_address(arr, i),
            "r", uint32(w0), "r", uint32(w1), "r", uint32(w2), "r", uint32(w3),
        )  # fmt: skip

    return impl


def _ldmatrix(trans):
    """ldmatrix .x4 from a shared tile (the element's generic address, made a shared one first)."""
    name = "ldmatrix_x4" + ("_trans" if trans else "")
    function, register = _overload(name)
    op = "ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans else "") + ".shared.b16"
    text = "{ .reg .u64 s; cvta.to.shared.u64 s, %4; " + op + " {%0, %1, %2, %3}, [s]; }"

    @register
    def _impl(tile, index):
        # .trans swaps 16-bit halves: on 32-bit elements it would split them, so float32 takes the plain form only
        _check_array(tile, name, _SIXTEEN_BIT + (() if trans else (types.float32,)))

        def impl(tile, index):
            w0, w1, w2, w3 = experimental.inline_ptx(
                text, "=r", I32, "=r", I32, "=r", I32, "=r", I32, "l", element_address(tile, index)
            )
            return uint32(w0), uint32(w1), uint32(w2), uint32(w3)

        return impl

    return function


ldmatrix_x4 = _ldmatrix(False)
ldmatrix_x4_trans = _ldmatrix(True)


def _cp_async(size, cache):
    """cp.async of ``size`` bytes, global to shared; ``cache``: .cg (L2 only, 16 bytes only) or .ca."""
    function, register = _overload(f"cp_async{size}")
    text = f"{{ .reg .u64 s; cvta.to.shared.u64 s, %0; cp.async.{cache}.shared.global [s], [%1], {size}; }}"

    @register
    def _impl(tile, index, src, src_index):
        _check_array(tile, f"cp_async{size} (destination)", _COPYABLE)
        if not (_flat_array(src) and src.dtype in _COPYABLE):
            raise TypeError(f"cp_async{size} (source) needs a 1-D or C-contiguous array of {_COPYABLE}, got {src}")

        def impl(tile, index, src, src_index):
            experimental.inline_ptx(text, "l", element_address(tile, index), "l", element_address(src, src_index))

        return impl

    return function


cp_async16 = _cp_async(16, "cg")
cp_async8 = _cp_async(8, "ca")
cp_async4 = _cp_async(4, "ca")


@cuda.jit(device=True, forceinline=True)
def cp_async_commit():
    experimental.inline_ptx("cp.async.commit_group;")


@cuda.jit(device=True, forceinline=True)
def cp_async_wait_all():
    experimental.inline_ptx("cp.async.wait_group 0;")


cp_async_wait_group, _cp_async_wait_group = _overload("cp_async_wait_group")


@_cp_async_wait_group
def _cp_async_wait_group_impl(n):
    if not isinstance(n, types.IntegerLiteral):
        return None  # the count is an immediate in the instruction: a constant (typed again as its literal)
    text = f"cp.async.wait_group {int(n.literal_value)};"

    def impl(n):
        experimental.inline_ptx(text)

    return impl
