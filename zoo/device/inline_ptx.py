"""The zoo's intrinsics for numba-cuda-mlir, as inline PTX (``ZOO_BACKEND=numba-cuda-mlir`` only).

numba-cuda-mlir lowers to MLIR, so the intrinsics of ``zoo.device.memory``, ``bits``, ``approx`` and
``dependent_launch``, written against numba-cuda's extension API (llvmlite IR), do not compile there; its own
``@intrinsic`` does not yet work either (NVIDIA/numba-cuda-mlir#74). What it does take is CUDA C++-style inline
assembly, ``experimental.inline_ptx(ptx, constraint, value, ...)`` (``%0, %1, ...`` numbered in the order of the
pairs; an ``"="`` output is returned, several as a tuple, its value only a type), and ``overload`` from its extension
API, which picks an implementation from the argument types when a kernel is typed. Each function here is the same
instruction the numba-cuda version emits, with the same meaning and the same name; those modules take them from here
under numba-cuda-mlir, so a step's source does not change.

An element's address is the array's data pointer (``ctypes.pointer(arr)``, a generic address for global and shared
arrays alike) plus the flat index times the item size, which the overload knows from the array's type
(``arr.itemsize`` does not compile there: a NotImplementedError in its lowering). The loads and stores are generic
ones (``ld.v4.f32``, not ``ld.global.v4.f32``): the hardware resolves the space.

Not here yet: ``zoo.device.mma`` (mma.sync, ldmatrix, cp.async), ``wgmma`` and ``constant``
(docs/numba-cuda-mlir.md says how each would port).
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
