"""32-bit bit casts: a float32 or int32 value's bits as uint32 and back (CUDA's ``__float_as_uint``).

numba has no bit-cast for scalars. ``as_uint32(v)`` gives the 32 bits of a float32
or int32 value as a uint32 (an LLVM ``bitcast``: no instruction on the GPU), and
``from_uint32(bits, like)`` turns them back into the type of ``like`` (float32 or
int32). A kernel uses them to pack a value and a flag into one 64-bit word that a
single atomic or volatile access publishes whole.

    word = (uint64(as_uint32(total)) << 32) | flag
    total = from_uint32(uint32(word >> 32), total_like)

Two more for data narrower than 32 bits that a kernel reads a word at a time
(float16 pairs, packed integer codes):

``unpack_half2(word)`` reads a word as two float16 values, bits 0-15 first (the
order ``zoo.device.mma.pack_half2`` writes), and returns them as two float32, each
an exact ``cvt.f32.f16`` (subnormal halves included).

``lop3(a, b, c, lut)`` is PTX's ``lop3.b32``: any function of three words, bit by
bit, in one instruction. ``lut`` (a constant) is the function applied to the
constants 0xF0, 0xCC and 0xAA standing for a, b and c: ``(a & b) ^ c`` is
``lop3(a, b, c, (0xF0 & 0xCC) ^ 0xAA)``. The compiler makes LOP3 of plain ``&``,
``|`` and ``^`` too, but LLVM first rewrites ``(w ^ C1) & C2`` on constants into
``(w & C2) ^ (C1 & C2)``, two constants that one LOP3 cannot both hold as
immediates, and ptxas then emits two instructions; written as ``lop3`` the
operation stays one (as CUTLASS writes its int4-to-float16 conversions).

Two for float16 pairs kept in words, as tensor-core fragments hold them:

``prmt(a, b, selector)`` is PTX's ``prmt.b32`` (default mode): byte i of the result is
byte ``(selector >> 4i) & 0xF`` of the eight bytes of a (bytes 0-3) and b (bytes 4-7);
``selector`` is a constant of four nibbles 0-7 (the sign-replicating 8-15 are refused).
``prmt(a, b, 0x5410)`` gives the low halves of a and b, ``prmt(a, b, 0x7632)`` the high
halves, each in one instruction (SASS ``PRMT``).

``hfma2(a, b, c)`` is PTX's ``fma.rn.f16x2``: a b + c on the two float16 of each word
(bits 0-15 and 16-31 apart), rounded once to float16, as a word (SASS ``HFMA2``).
"""

import numpy as np

from zoo.runtime import SIMULATOR, backend

if SIMULATOR:

    def as_uint32(v):
        """The 32 bits of a float32 or int32 value, as uint32."""
        if isinstance(v, (float, np.floating)):
            return np.float32(v).view(np.uint32)
        return np.uint32(int(v) & 0xFFFFFFFF)

    def from_uint32(bits, like):
        """uint32 bits back to the type of ``like`` (float32 or int32)."""
        bits = np.uint32(bits)
        if isinstance(like, (float, np.floating)):
            return bits.view(np.float32)
        return bits.view(np.int32)

    def unpack_half2(word):
        """The float16 values in bits 0-15 and 16-31 of a word, as two float32."""
        w = int(word)
        halves = np.array([w & 0xFFFF, (w >> 16) & 0xFFFF], dtype=np.uint16).view(np.float16)
        return np.float32(halves[0]), np.float32(halves[1])

    def lop3(a, b, c, lut):
        """Bit i of the result is bit (4 a_i + 2 b_i + c_i) of lut."""
        a, b, c, result = int(a), int(b), int(c), 0
        for index in range(8):
            if (int(lut) >> index) & 1:
                result |= (a if index & 4 else ~a) & (b if index & 2 else ~b) & (c if index & 1 else ~c)
        return np.uint32(result & 0xFFFFFFFF)

    def prmt(a, b, selector):
        """Byte i of the result is byte (selector >> 4i) & 0xF of b:a (a the low four bytes)."""
        if int(selector) & 0x8888 or not 0 <= int(selector) <= 0xFFFF:
            raise ValueError(f"prmt takes four selector nibbles 0-7, got {int(selector):#x}")
        pool, result = int(a) & 0xFFFFFFFF | (int(b) & 0xFFFFFFFF) << 32, 0
        for i in range(4):
            result |= (pool >> 8 * ((int(selector) >> 4 * i) & 7) & 0xFF) << 8 * i
        return np.uint32(result)

    def _halves(word):
        return np.array([int(word) & 0xFFFF, (int(word) >> 16) & 0xFFFF], dtype=np.uint16).view(np.float16)

    def hfma2(a, b, c):
        """a b + c on each float16 of the words: in float64 (a product of two float16 is exact there), then
        rounded once to float16."""
        fused = _halves(a).astype(np.float64) * _halves(b).astype(np.float64) + _halves(c).astype(np.float64)
        bits = fused.astype(np.float16).view(np.uint16)
        return np.uint32(int(bits[0]) | int(bits[1]) << 16)

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    _I32 = ir.IntType(32)

    @intrinsic
    def as_uint32(typingctx, v):
        if v == types.float32:

            def codegen(context, builder, sig, args):
                return builder.bitcast(args[0], _I32)  # the same 32 bits, read as an integer
        elif isinstance(v, types.Integer):

            def codegen(context, builder, sig, args):
                return context.cast(builder, args[0], sig.args[0], types.uint32)
        else:
            return None
        return types.uint32(v), codegen

    @intrinsic
    def from_uint32(typingctx, bits, like):
        if like == types.float32:

            def codegen(context, builder, sig, args):
                word = context.cast(builder, args[0], sig.args[0], types.uint32)
                return builder.bitcast(word, ir.FloatType())

            return types.float32(bits, like), codegen
        if like == types.int32:

            def codegen(context, builder, sig, args):
                return context.cast(builder, args[0], sig.args[0], types.uint32)  # same 32 bits

            return types.int32(bits, like), codegen
        return None

    @intrinsic
    def unpack_half2(typingctx, word):
        if not isinstance(word, types.Integer):
            return None
        sig = types.UniTuple(types.float32, 2)(word)

        def codegen(context, builder, sig, args):
            w = context.cast(builder, args[0], sig.args[0], types.uint32)
            halves = []
            for shift in (0, 16):  # bits 0-15 first
                bits = builder.trunc(builder.lshr(w, ir.Constant(_I32, shift)), ir.IntType(16))
                halves.append(builder.fpext(builder.bitcast(bits, ir.HalfType()), ir.FloatType()))  # cvt.f32.f16
            return context.make_tuple(builder, sig.return_type, halves)

        return sig, codegen

    @intrinsic
    def lop3(typingctx, a, b, c, lut):
        # lut must be a constant: it is part of the instruction (numba types a constant argument as its literal
        # value once this has refused the plain integer type)
        if not isinstance(lut, types.IntegerLiteral) or not all(isinstance(t, types.Integer) for t in (a, b, c)):
            return None
        table = lut.literal_value & 0xFF
        sig = types.uint32(a, b, c, lut)

        def codegen(context, builder, sig, args):
            words = [context.cast(builder, v, t, types.uint32) for v, t in zip(args[:3], sig.args[:3], strict=True)]
            asm = ir.InlineAsm(ir.FunctionType(_I32, [_I32] * 3), f"lop3.b32 $0, $1, $2, $3, {table:#x};", "=r,r,r,r")
            return builder.call(asm, words)  # no side effect: LLVM may schedule it like arithmetic

        return sig, codegen

    @intrinsic
    def prmt(typingctx, a, b, selector):
        # the selector is part of the instruction: a constant (numba retries with the literal type)
        if not isinstance(selector, types.IntegerLiteral) or not all(isinstance(t, types.Integer) for t in (a, b)):
            return None
        chosen = selector.literal_value
        if chosen & 0x8888 or not 0 <= chosen <= 0xFFFF:
            raise ValueError(f"prmt takes four selector nibbles 0-7, got {chosen:#x}")
        sig = types.uint32(a, b, selector)

        def codegen(context, builder, sig, args):
            words = [context.cast(builder, v, t, types.uint32) for v, t in zip(args[:2], sig.args[:2], strict=True)]
            asm = ir.InlineAsm(ir.FunctionType(_I32, [_I32] * 2), f"prmt.b32 $0, $1, $2, {chosen:#x};", "=r,r,r")
            return builder.call(asm, words)  # registers only: LLVM may schedule it like arithmetic

        return sig, codegen

    @intrinsic
    def hfma2(typingctx, a, b, c):
        if not all(isinstance(t, types.Integer) for t in (a, b, c)):
            return None
        sig = types.uint32(a, b, c)

        def codegen(context, builder, sig, args):
            words = [context.cast(builder, v, t, types.uint32) for v, t in zip(args, sig.args, strict=True)]
            asm = ir.InlineAsm(ir.FunctionType(_I32, [_I32] * 3), "fma.rn.f16x2 $0, $1, $2, $3;", "=r,r,r,r")
            return builder.call(asm, words)  # float16 pairs in 32-bit registers, as PTX's .f16x2 takes them

        return sig, codegen


if backend.MLIR:  # numba-cuda-mlir compiles none of the above (llvmlite IR): the same instructions as inline PTX
    from zoo.device.inline_ptx import (  # noqa: F401, F811 (these names, for numba-cuda-mlir)
        as_uint32,
        from_uint32,
        hfma2,
        lop3,
        prmt,
        unpack_half2,
    )
