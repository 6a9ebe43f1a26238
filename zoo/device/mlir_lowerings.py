"""What numba-cuda-mlir 0.6.0 types but does not lower, lowered here (``ZOO_BACKEND=numba-cuda-mlir`` only).

Three of numba's CUDA functions type under numba-cuda-mlir and then stop the compiler with "NotImplemented lowering
call": ``cuda.threadfence`` (reduce v09-v10, sort v05-v06), its block and system forms, and ``cuda.lanemask_lt``
(sort v04). And a float16's 16 bits cannot reach an instruction as they are: ``inline_ptx`` converts a float16 for an
``"h"`` operand to an integer (``cvt.rzi``), so ``zoo.device.mma.pack_half2`` (two float16 in one word) has no inline
PTX form. numba-cuda-mlir's extension API registers a lowering of its own for any of them
(``numba_cuda_mlir.extending.lower_builtin``, writing MLIR), so each is written here as the operations numba-cuda
emits for it:

========================  ==========================================================================================
``cuda.threadfence``      ``membar.gl`` (``_block``: ``membar.cta``, ``_system``: ``membar.sys``), as numba-cuda's
                          ``llvm.nvvm.membar.*``
``cuda.lanemask_lt``      ``mov.u32`` of the ``%lanemask_lt`` register
``pack_half2(lo, hi)``    two float16 (or two uint16, bfloat16's bits) bit cast to 16-bit integers, widened, ``hi``
                          shifted up 16 and or-ed in: one ``mov.b32 {lo, hi}`` after ptxas, as numba-cuda's
========================  ==========================================================================================

Importing this module registers them (``zoo.device`` does under numba-cuda-mlir); steps call ``cuda.threadfence()``
and ``pack_half2`` as under numba-cuda, so their source does not change.
"""

from numba_cuda_mlir._mlir.dialects import arith, llvm, memref
from numba_cuda_mlir._mlir.extras import types as T
from numba_cuda_mlir.extending import lower_builtin, refresh_registries, type_callable
from numba_cuda_mlir.numba_cuda import stubs, types
from numba_cuda_mlir.numba_cuda.typing import signature

_SIXTEEN_BIT = (types.float16, types.uint16)  # float16, and bfloat16 carried as its bits


def _fence(level):
    def lower(builder, target, args, kwargs):
        llvm.inline_asm(None, [], f"membar.{level};", "~{memory}", has_side_effects=True)
        builder.store_var(target, None)

    return lower


lower_builtin(stubs.threadfence)(_fence("gl"))
lower_builtin(stubs.threadfence_block)(_fence("cta"))
lower_builtin(stubs.threadfence_system)(_fence("sys"))


@lower_builtin(stubs.lanemask_lt)
def _lanemask_lt(builder, target, args, kwargs):
    # LLVM's inline assembly (as numba-cuda-mlir's own activemask): its NVVM translation has no
    # nvvm.read.ptx.sreg.lanemask.lt, and nvvm.inline_ptx takes every % for an operand
    builder.store_var(target, llvm.inline_asm(T.i32(), [], "mov.u32 $0, %lanemask_lt;", "=r"))


def pack_half2(lo, hi):
    """Two 16-bit values as one uint32 word, ``lo`` in bits 0-15 (in a kernel compiled by numba-cuda-mlir)."""
    raise NotImplementedError("pack_half2 runs in a kernel compiled by numba-cuda-mlir")


@type_callable(pack_half2)
def _pack_half2_type(context):
    def typer(lo, hi):
        if lo not in _SIXTEEN_BIT or hi != lo:
            raise TypeError(f"pack_half2 takes two float16, or two uint16 (bfloat16 bits), got {lo} and {hi}")
        return types.uint32

    return typer


@lower_builtin(pack_half2, types.Number, types.Number)
def _pack_half2(builder, target, args, kwargs):
    lo, hi = (builder.load_var(a) for a in args)
    if lo.type == T.f16():  # the same 16 bits as an integer: a bit cast, not a conversion
        lo, hi = arith.bitcast(T.i16(), lo), arith.bitcast(T.i16(), hi)
    lo, hi = arith.extui(T.i32(), lo), arith.extui(T.i32(), hi)
    builder.store_var(target, arith.ori(lo, arith.shli(hi, arith.constant(T.i32(), 16))))


# -- LLVM inline assembly with tied operands and a memory clobber ------------------------------------------------
def asm(text, constraints, *operands):
    """LLVM inline assembly in a kernel compiled by numba-cuda-mlir: ``text`` (``$0, $1, ...``) and LLVM's
    ``constraints`` (``"=f,=f,l,0,1,~{memory}"``: outputs, inputs, an input tied to an output by its number,
    clobbers), both literal strings; returns the outputs (one, or a tuple). What ``experimental.inline_ptx`` cannot
    say: an operand read and written in one register (wgmma's accumulators), and that memory may change."""
    raise NotImplementedError("asm runs in a kernel compiled by numba-cuda-mlir")


_ASM_TYPES = {"f": (types.float32, T.f32), "r": (types.int32, T.i32), "l": (types.int64, T.i64)}


def _asm_operands(constraints):
    """(output letters, input letters) of an LLVM constraint string; a tied input takes its output's letter."""
    outputs, inputs = [], []
    for c in constraints.split(","):
        if c.startswith("~"):
            continue
        if c.startswith("="):
            outputs.append(c[1:])
        elif c.isdigit():
            inputs.append(outputs[int(c)])
        elif c in _ASM_TYPES:
            inputs.append(c)
        else:
            raise TypeError(f"asm takes the constraints f, r, l, a tied output's number and clobbers, not {c!r}")
    return outputs, inputs


@type_callable(asm)
def _asm_type(context):
    def typer(text, constraints, *operands):
        if not (isinstance(text, types.StringLiteral) and isinstance(constraints, types.StringLiteral)):
            return None  # typed again with the literal strings
        outputs, inputs = _asm_operands(constraints.literal_value)
        if len(inputs) != len(operands):
            raise TypeError(f"asm: {len(inputs)} inputs in {constraints.literal_value!r}, {len(operands)} given")
        results = [_ASM_TYPES[c][0] for c in outputs]
        returned = types.none if not results else results[0] if len(results) == 1 else types.Tuple(results)
        return signature(returned, text, constraints, *(_ASM_TYPES[c][0] for c in inputs))

    return typer


@lower_builtin(asm, types.VarArg(types.Any))
def _asm(builder, target, args, kwargs):
    text, constraints = (builder.get_numba_type(a.name).literal_value for a in args[:2])
    outputs, inputs = _asm_operands(constraints)
    values = [
        builder.mlir_convert(builder.load_var(a), _ASM_TYPES[c][1]()) for a, c in zip(args[2:], inputs, strict=True)
    ]
    kinds = [_ASM_TYPES[c][1]() for c in outputs]
    returned = None if not kinds else kinds[0] if len(kinds) == 1 else llvm.StructType.get_literal(kinds)
    result = llvm.inline_asm(returned, values, text, constraints, has_side_effects=True)
    if len(kinds) > 1:
        result = tuple(llvm.extractvalue(k, result, [i]) for i, k in enumerate(kinds))
    builder.store_var(target, result if kinds else None)


def asm_on(text, constraints, acc, first, *operands):
    """``asm`` whose outputs are acc[first], acc[first + 1], ...: each read (an input tied to it, ``"0"``, ``"1"``)
    and written back, in a kernel compiled by numba-cuda-mlir; ``operands`` are its other inputs, in order. The
    accumulators are read and written here, not passed: a Python call of more than 30 arguments is a starred one
    (CPython's bytecode), whose literal strings numba types as plain strings."""
    raise NotImplementedError("asm_on runs in a kernel compiled by numba-cuda-mlir")


@type_callable(asm_on)
def _asm_on_type(context):
    def typer(text, constraints, acc, first, *operands):
        if not (isinstance(text, types.StringLiteral) and isinstance(constraints, types.StringLiteral)):
            return None  # typed again with the literal strings
        if not isinstance(first, types.IntegerLiteral):
            return None
        if not (isinstance(acc, types.Array) and acc.ndim == 1 and acc.dtype == types.float32):
            raise TypeError(f"asm_on: the accumulators are a 1-D float32 array, got {acc}")
        outputs, inputs = _asm_operands(constraints.literal_value)
        given = [c for c in constraints.literal_value.split(",") if c in _ASM_TYPES]
        if set(outputs) != {"f"} or len(given) != len(operands):
            raise TypeError(f"asm_on: float outputs and {len(given)} other inputs, got {constraints.literal_value!r}")
        return signature(types.none, text, constraints, acc, first, *(_ASM_TYPES[c][0] for c in given))

    return typer


@lower_builtin(asm_on, types.VarArg(types.Any))
def _asm_on(builder, target, args, kwargs):
    text, constraints = (builder.get_numba_type(a.name).literal_value for a in args[:2])
    acc, first = builder.load_var(args[2]), builder.get_numba_type(args[3].name).literal_value
    outputs, _ = _asm_operands(constraints)
    at = [arith.constant(T.index(), first + i) for i in range(len(outputs))]
    given = iter(args[4:])
    values = []
    for c in constraints.split(","):
        if c.isdigit():
            values.append(memref.load(acc, [at[int(c)]]))
        elif c in _ASM_TYPES:
            values.append(builder.mlir_convert(builder.load_var(next(given)), _ASM_TYPES[c][1]()))
    returned = llvm.StructType.get_literal([T.f32()] * len(outputs)) if len(outputs) > 1 else T.f32()
    result = llvm.inline_asm(returned, values, text, constraints, has_side_effects=True)
    for i in range(len(outputs)):
        memref.store(llvm.extractvalue(T.f32(), result, [i]) if len(outputs) > 1 else result, acc, [at[i]])
    builder.store_var(target, None)


refresh_registries()
