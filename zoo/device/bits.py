"""32-bit bit casts: a float32 or int32 value's bits as uint32 and back (CUDA's ``__float_as_uint``).

numba has no bit-cast for scalars. ``as_uint32(v)`` gives the 32 bits of a float32
or int32 value as a uint32 (an LLVM ``bitcast``: no instruction on the GPU), and
``from_uint32(bits, like)`` turns them back into the type of ``like`` (float32 or
int32). A kernel uses them to pack a value and a flag into one 64-bit word that a
single atomic or volatile access publishes whole.

    word = (uint64(as_uint32(total)) << 32) | flag
    total = from_uint32(uint32(word >> 32), total_like)
"""

import numpy as np

from zoo import SIMULATOR

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
