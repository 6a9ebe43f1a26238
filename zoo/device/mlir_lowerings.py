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

from numba_cuda_mlir._mlir.dialects import arith, llvm
from numba_cuda_mlir._mlir.extras import types as T
from numba_cuda_mlir.extending import lower_builtin, refresh_registries, type_callable
from numba_cuda_mlir.numba_cuda import stubs, types

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


refresh_registries()
