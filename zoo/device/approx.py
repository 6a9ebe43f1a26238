"""The hardware's approximate exp2 as one instruction: ``exp2_approx(x)`` is ``ex2.approx.ftz.f32``.

``math.exp2`` in a kernel compiles to libdevice's ``exp2f``, which keeps
subnormal results: around the one ``MUFU.EX2`` it tests x < -126, halves x and
squares the result when it is, three more instructions per exponential
(``python -m zoo show attention v04 --sass`` shows them). ``fastmath=True``
would drop them, but it also tells LLVM that no value is infinite or NaN,
which a kernel that masks with -inf cannot afford. This intrinsic emits the
instruction alone:

    ex2.approx.ftz.f32   maximum relative error about 2^-22 (PTX ISA), results
                         below 2^-126 flushed to 0, ex2(-inf) = +0, ex2(+inf) = +inf

In the simulator it is ``math.exp2`` (subnormals kept: a difference below
2^-126 that no test can see).
"""

import math

from zoo.runtime import SIMULATOR, backend

if SIMULATOR:

    def exp2_approx(x):
        return math.exp2(x)

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def exp2_approx(typingctx, x):
        sig = types.float32(x)

        def codegen(context, builder, sig, args):
            value = context.cast(builder, args[0], sig.args[0], types.float32)
            f32 = ir.FloatType()
            asm = ir.InlineAsm(ir.FunctionType(f32, [f32]), "ex2.approx.ftz.f32 $0, $1;", "=f,f", side_effect=False)
            return builder.call(asm, [value])  # registers only: LLVM may schedule it like arithmetic

        return sig, codegen


if backend.MLIR:  # numba-cuda-mlir compiles none of the above (llvmlite IR): the same instructions as inline PTX
    from zoo.device.inline_ptx import (  # noqa: F401, F811 (these names, for numba-cuda-mlir)
        exp2_approx,
    )
