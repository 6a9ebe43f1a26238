"""Tensor cores from numba: warp-level ``mma.sync``, ``ldmatrix`` and ``cp.async`` as intrinsics.

numba has no WMMA API. These ``@intrinsic`` functions emit the PTX instructions
through llvmlite's ``ir.InlineAsm`` (the way ``zoo.device.memory`` emits 128-bit loads
through plain LLVM IR), so a kernel written in Python calls the tensor cores:

    d0, d1, d2, d3 = mma_f16_f32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

is one ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``: the 32 lanes of
a warp together multiply a 16 x 16 float16 tile of A by a 16 x 8 float16 tile
of B and add a 16 x 8 float32 tile C. Each lane holds a fixed part of every
tile (the *fragments*, tabled in ``zoo.kernels.hgemm``): A as four 32-bit
registers (two float16 each), B as two, C and D as four float32. The SASS
instruction is ``HMMA.16816.F32``. Three more forms:

=========================================  =====================================================
``mma_bf16_f32(a0, ..., c3)``               the same shape on bfloat16: ``...f32.bf16.bf16.f32``
                                            (SASS ``HMMA.16816.F32.BF16``)
``mma_16bit_f32(kind, a0, ..., c3)``        either of the two, chosen when the kernel is compiled
                                            from ``kind``, the inputs' dtype (``A.dtype``): float16,
                                            or uint16 for bfloat16 bit patterns (below)
``mma_tf32_f32(a0, a1, a2, a3, b0, b1,``    ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``:
``c0, c1, c2, c3)``                         a 16 x 8 (A) times 8 x 8 (B) tile of TF32, each register
                                            one element (fragments in ``zoo.kernels.sgemm``);
                                            SASS ``HMMA.1688.F32.TF32``
``to_tf32(x)``                              a float32 (or its bits as uint32) rounded to TF32, as
                                            the uint32 word an A or B register takes:
                                            ``cvt.rna.tf32.f32``
=========================================  =====================================================

bfloat16 has no NumPy or numba array type, so its data travels as ``uint16``
arrays of bit patterns (the top 16 bits of a float32); everything below moves
16-bit elements without looking at them, so it serves both.

The other intrinsics get 16- and 32-bit data into those registers:

=========================================  =====================================================
``load_half2(arr, i)``                      arr[i], arr[i+1] as one 32-bit word (i even): ``ld.b32``
``load_half8(arr, i)``                      arr[i..i+7] as four words (i a multiple of 8): ``ld.v4.b32``
``store_half8(arr, i, w0, w1, w2, w3)``     the reverse: ``st.v4.b32``
``pack_half2(lo, hi)``                      two 16-bit values into one word, ``lo`` in the low half
``ldmatrix_x4(tile, i)``                    ``ldmatrix.sync.aligned.m8n8.x4.shared.b16``
``ldmatrix_x4_trans(tile, i)``              the same with ``.trans`` (each 8 x 8 matrix transposed)
``cp_async16(tile, i, src, j)``             ``cp.async.cg.shared.global``: 16 bytes global -> shared
``cp_async4(tile, i, src, j)``, ``cp_async8``  ``cp.async.ca.shared.global``: 4 or 8 bytes (``.cg``
                                            takes 16 only), each address aligned to its size
``cp_async_commit()``                       ``cp.async.commit_group``
``cp_async_wait_all()``                     ``cp.async.wait_group 0``
``cp_async_wait_group(n)``                  ``cp.async.wait_group n``: all but the newest n groups
                                            have landed (n a compile-time constant)
=========================================  =====================================================

The half functions take 1-D float16 or uint16 (bfloat16 bits) arrays (a kernel
indexes flat views of C-contiguous matrices); ``ldmatrix_x4`` and ``cp_async16``
take float32 too. The ``tile`` of ``ldmatrix`` and ``cp_async16`` must be a
``cuda.shared.array`` declared with ``alignment=SHARED_ALIGN`` (16 bytes on the GPU);
``cp_async16`` copies 16 bytes (``cp_async4`` 4, ``cp_async8`` 8) whatever the two
arrays' element types (1, 2 or 4 bytes: a float16 vector into a uint8 ring is fine,
each index counting its own array's elements), from a 1-D or C-contiguous source
indexed flat. Words are ``uint32``
with the lower-indexed 16-bit element in bits 0-15, which is the order ``.f16x2``
and ``.bf16x2`` registers use.

``ldmatrix_x4``: lanes 8j .. 8j+7 each give the element index of one row of
matrix j (16 bytes: eight 16-bit elements, 16-byte aligned); each lane gets back
one word of each matrix: word j holds row ``lane // 4``, columns ``2 (lane % 4)``
and ``2 (lane % 4) + 1`` of matrix j, which is exactly the A and C fragment
layout of ``mma``. With ``.trans`` it holds rows ``2 (lane % 4)`` and
``2 (lane % 4) + 1`` of column ``lane // 4``: the B fragment, read from a B tile
stored row-major (k-major) in shared memory. On float32 data a row is four
elements and word j is element ``lane % 4`` of row ``lane // 4``: the TF32 A
fragment (``.trans`` would swap 16-bit halves, so it is refused there).

Why the asm statements are marked as they are: ``mma`` and ``cvt`` read only
registers, so they have no side effects and LLVM may schedule them freely. ``ldmatrix`` and the
``cp.async`` family read or write shared memory behind LLVM's back, so they are
``sideeffect`` with a ``~{memory}`` clobber; otherwise LLVM would treat an
``ldmatrix`` at a loop-invariant address as loop-invariant and hoist it out of
the K loop, across the barrier that refills the tile.

TF32 rounding
-------------
TF32 keeps float32's 8-bit exponent and 10 of its 23 mantissa bits. The tensor
core reads only the top 19 bits of each A and B register: the low 13 are dropped,
which truncates toward zero. ``to_tf32`` rounds to nearest first (ties away from
zero: PTX's ``.rna``), as the NVIDIA TF32 description does, which halves the
largest error of an input (2^-11 relative instead of 2^-10) and removes the
truncation's bias toward zero; it costs three integer instructions a word.

In the simulator
----------------
The same names are Python functions with the instructions' semantics, so the
kernels that use them run (slowly) in numba's CUDA simulator and their index
arithmetic is checked there. The ``mma`` forms and the ``ldmatrix`` functions are
collective: every lane of the warp deposits its registers (or its row address)
through the warp rendezvous of ``zoo.simulator``, and each lane computes its own
result from all of them (a float64 product rounded to float32; the tensor core
adds with at least float32 precision). ``mma_tf32_f32`` first drops the low 13
bits of every input word, as the hardware does, and ``to_tf32`` rounds as
``cvt.rna`` does, so a kernel that forgets to round is as inaccurate here as on
the GPU. The ``cp_async`` copies happen at once and the commit and wait are no-ops, which
is a legal schedule of the real instruction. What the simulator cannot check is
that the hardware agrees with this module's reading of the PTX ISA;
``tests/kernels/test_hgemm.py`` and ``tests/kernels/test_sgemm.py`` run the kernels on a GPU too.
"""

import numpy as np

from zoo.device.warp import FULL_MASK
from zoo.runtime import SIMULATOR, backend

# Pass as cuda.shared.array(..., alignment=SHARED_ALIGN): numba aligns a float16 shared array to
# 2 bytes, but 128-bit stores, ldmatrix rows and cp.async need 16. The simulator refuses the
# argument unless it is None (its arrays are NumPy's, aligned anyway).
SHARED_ALIGN = None if SIMULATOR else 16

if SIMULATOR:

    def _bits(x):
        """The 16 bits of a float16 value, or a uint16 (bfloat16 bits) as it is."""
        if isinstance(x, np.uint16):
            return int(x)
        return int(np.asarray(x, dtype=np.float16).view(np.uint16))

    def _half(bits):
        return np.array(bits & 0xFFFF, dtype=np.uint16).view(np.float16)[()]

    def _bfloat(bits):
        return np.array((bits & 0xFFFF) << 16, dtype=np.uint32).view(np.float32)[()]

    def _tf32(word):
        """The float32 the tensor core reads from a register: its low 13 bits dropped."""
        return float(np.array(int(word) & 0xFFFFE000, dtype=np.uint32).view(np.float32)[()])

    def _unpack(word, decode=_half):
        word = int(word)
        return float(decode(word)), float(decode(word >> 16))

    def _check_elements(arr, what, sizes=(2,)):
        itemsize = np.dtype(arr.dtype).itemsize
        if itemsize not in sizes:
            raise TypeError(f"{what} needs {' or '.join(f'{8 * n}-bit' for n in sizes)} elements, got {arr.dtype}")
        return itemsize

    def _row_word(arr, i, j):
        """Word j (bytes 4j .. 4j+3) of the 16 bytes that start at element i of arr."""
        if _check_elements(arr, "a 16-byte row", (2, 4)) == 4:
            return np.asarray(arr[i + j], dtype=np.float32).view(np.uint32)[()]
        return pack_half2(arr[i + 2 * j], arr[i + 2 * j + 1])

    def pack_half2(lo, hi):
        return np.uint32(_bits(lo) | _bits(hi) << 16)

    def load_half2(arr, i):
        _check_elements(arr, "load_half2")
        i = int(i)
        if i % 2:
            raise IndexError(f"load_half2 at element {i}: not 4-byte aligned")
        return pack_half2(arr[i], arr[i + 1])

    def load_half8(arr, i):
        _check_elements(arr, "load_half8")
        i = int(i)
        if i % 8:
            raise IndexError(f"load_half8 at element {i}: not 16-byte aligned")
        return tuple(pack_half2(arr[i + 2 * j], arr[i + 2 * j + 1]) for j in range(4))

    def store_half8(arr, i, w0, w1, w2, w3):
        _check_elements(arr, "store_half8")
        i = int(i)
        if i % 8:
            raise IndexError(f"store_half8 at element {i}: not 16-byte aligned")
        for j, w in enumerate((w0, w1, w2, w3)):
            w = int(w)
            if np.dtype(arr.dtype) == np.uint16:  # bit patterns: stored as they are
                arr[i + 2 * j], arr[i + 2 * j + 1] = w & 0xFFFF, w >> 16
            else:
                arr[i + 2 * j], arr[i + 2 * j + 1] = _unpack(w)

    def _warp_exchange(kind, value):
        from zoo.simulator.warps import _here

        warp, lane = _here()
        return warp.exchange(lane, FULL_MASK, kind, value), lane

    def _full(rv, what):
        if rv.arrived != FULL_MASK:
            missing = [lane for lane in range(32) if not rv.arrived >> lane & 1]
            raise RuntimeError(f"{what} needs all 32 lanes of the warp (.aligned); lanes {missing} did not take part")

    def _mma(kind, registers, tiles_of):
        """The collective part of every mma form: deposit this lane's registers; the first lane back builds
        the 16 x 8 result D = A @ B + C from everyone's (``tiles_of(values)`` gives A, B and C) and every
        lane takes its C/D fragment of it."""
        rv, lane = _warp_exchange(kind, registers)
        _full(rv, "mma.sync")
        tiles = getattr(rv, "mma_result", None)
        if tiles is None:  # the first lane here builds the tiles; the others reuse them
            A, B, C = tiles_of(rv.values)
            tiles = rv.mma_result = (A @ B + C).astype(np.float32)
        g, t = lane >> 2, lane & 3
        return tiles[g, 2 * t], tiles[g, 2 * t + 1], tiles[g + 8, 2 * t], tiles[g + 8, 2 * t + 1]

    def _c_tile(C, g, t, regs):
        C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1] = regs

    def _m16n8k16(decode):
        def tiles_of(values):
            A, B, C = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
            for src, regs in enumerate(values):
                g, t = src >> 2, src & 3
                for reg, (row, col) in enumerate(((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))):
                    A[row, col], A[row, col + 1] = _unpack(regs[reg], decode)
                for reg, k in enumerate((2 * t, 2 * t + 8)):
                    B[k, g], B[k + 1, g] = _unpack(regs[4 + reg], decode)
                _c_tile(C, g, t, regs[6:10])
            return A, B, C

        return tiles_of

    def mma_f16_f32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma("mma.f16", (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _m16n8k16(_half))

    def mma_bf16_f32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma("mma.bf16", (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _m16n8k16(_bfloat))

    def mma_16bit_f32(kind, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        kind = np.dtype(kind)
        if kind not in (np.float16, np.uint16):
            raise TypeError(f"mma_16bit_f32: inputs are float16, or uint16 holding bfloat16, got {kind}")
        form = mma_f16_f32 if kind == np.float16 else mma_bf16_f32
        return form(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

    def _m16n8k8_tf32(values):
        A, B, C = np.zeros((16, 8)), np.zeros((8, 8)), np.zeros((16, 8))
        for src, regs in enumerate(values):
            g, t = src >> 2, src & 3
            A[g, t], A[g + 8, t], A[g, t + 4], A[g + 8, t + 4] = (_tf32(w) for w in regs[:4])
            B[t, g], B[t + 4, g] = _tf32(regs[4]), _tf32(regs[5])
            _c_tile(C, g, t, regs[6:10])
        return A, B, C

    def mma_tf32_f32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma("mma.tf32", (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _m16n8k8_tf32)

    def to_tf32(x):
        if isinstance(x, np.uint32):  # the bits of a float32, as ldmatrix gives them
            bits = int(x)
        else:
            bits = int(np.asarray(x, dtype=np.float32).view(np.uint32))
        if bits & 0x7F800000 == 0x7F800000:  # inf and NaN pass unchanged, as in cvt.rna
            return np.uint32(bits)
        return np.uint32((bits + 0x1000) & 0xFFFFE000)  # half a TF32 ulp up, then truncate: ties away from zero

    def _ldmatrix(tile, i, trans):
        i = int(i)
        itemsize = _check_elements(tile, "ldmatrix" + (".trans" if trans else ""), (2,) if trans else (2, 4))
        if i % (16 // itemsize):
            raise IndexError(f"ldmatrix row at element {i}: not 16-byte aligned")
        rv, lane = _warp_exchange("ldmatrix", (tile, i))
        _full(rv, "ldmatrix")
        g, t = lane >> 2, lane & 3
        words = []
        for j in range(4):
            rows = [rv.values[8 * j + r] for r in range(8)]  # (array, first element) of each row of matrix j
            if trans:
                (arr0, r0), (arr1, r1) = rows[2 * t], rows[2 * t + 1]
                words.append(pack_half2(arr0[r0 + g], arr1[r1 + g]))
            else:
                arr, r = rows[g]
                words.append(_row_word(arr, r, t))
        return tuple(words)

    def ldmatrix_x4(tile, i):
        return _ldmatrix(tile, i, False)

    def ldmatrix_x4_trans(tile, i):
        return _ldmatrix(tile, i, True)

    def _cp_async(tile, i, src, j, size):
        name = f"cp_async{size}"
        at = int(i) * _check_elements(tile, name, (1, 2, 4))  # byte offsets, each in its own elements
        start = int(j) * _check_elements(src, f"{name} (source)", (1, 2, 4))
        if at % size or start % size:
            raise IndexError(f"{name} from element {j} to {i}: not {size}-byte aligned")
        src = src if src.ndim == 1 else src.reshape(-1)  # a flat index into a C-contiguous source
        tile.view(np.uint8)[at : at + size] = src.view(np.uint8)[start : start + size]

    def cp_async16(tile, i, src, j):
        _cp_async(tile, i, src, j, 16)

    def cp_async8(tile, i, src, j):
        _cp_async(tile, i, src, j, 8)

    def cp_async4(tile, i, src, j):
        _cp_async(tile, i, src, j, 4)

    def cp_async_commit():
        pass

    def cp_async_wait_all():
        pass

    def cp_async_wait_group(n):
        pass

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    from zoo.device.memory import element_pointer, pointer_as

    _I32 = ir.IntType(32)
    _F32 = ir.FloatType()
    _SIXTEEN_BIT = (types.float16, types.uint16)  # float16, and bfloat16 carried as its bits
    _COPYABLE = _SIXTEEN_BIT + (types.float32, types.uint32, types.uint8)  # what cp_async16 copies (bytes)

    def _check_array(arr, what, dtypes=_SIXTEEN_BIT):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype in dtypes):
            raise TypeError(f"{what} needs a 1-D array of {' or '.join(map(str, dtypes))}, got {arr}")

    def _word_pointer(context, builder, arrty, arr, index, indexty, words):
        """arr[index] as a pointer to one 32-bit word or to a vector of ``words`` words."""
        target = _I32 if words == 1 else ir.VectorType(_I32, words)
        return pointer_as(context, builder, arrty, arr, index, indexty, target)

    def _shared_address(context, builder, arrty, arr, index, indexty):
        """The 32-bit shared-window address of arr[index] (numba hands out generic pointers)."""
        element = element_pointer(context, builder, arrty, arr, index, indexty)
        generic = builder.bitcast(element, ir.IntType(8).as_pointer(element.type.addrspace))
        shared = builder.addrspacecast(generic, ir.IntType(8).as_pointer(3))
        return builder.ptrtoint(shared, _I32)

    def _global_address(context, builder, arrty, arr, index, indexty):
        element = element_pointer(context, builder, arrty, arr, index, indexty)
        return builder.ptrtoint(element, ir.IntType(64))

    def _as_i32(context, builder, value, ty):
        return context.cast(builder, value, ty, types.uint32)

    def _mma_form(name, instruction, a_words, b_words, registers):
        """Typing and code for one mma form: ``a_words`` A and ``b_words`` B registers (uint32), four float32
        accumulators in and out."""
        words = a_words + b_words
        for r in registers[:words]:
            if not isinstance(r, types.Integer):
                raise TypeError(f"{name}: A and B fragments are 32-bit words (uint32), got {r}")
        sig = types.UniTuple(types.float32, 4)(*registers)
        a = ", ".join(f"${4 + j}" for j in range(a_words))
        b = ", ".join(f"${4 + a_words + j}" for j in range(b_words))
        c = ", ".join(f"${4 + words + j}" for j in range(4))

        def codegen(context, builder, sig, args):
            ins = [_as_i32(context, builder, v, t) for v, t in zip(args[:words], sig.args[:words], strict=True)]
            accs = [
                context.cast(builder, v, t, types.float32) for v, t in zip(args[words:], sig.args[words:], strict=True)
            ]
            ftype = ir.FunctionType(ir.LiteralStructType([_F32] * 4), [_I32] * words + [_F32] * 4)
            asm = ir.InlineAsm(
                ftype,
                f"{instruction} {{$0, $1, $2, $3}}, {{{a}}}, {{{b}}}, {{{c}}};",
                "=f,=f,=f,=f," + "r," * words + "f,f,f,f",
                side_effect=False,
            )  # registers only: LLVM may schedule it like arithmetic
            result = builder.call(asm, ins + accs)
            parts = [builder.extract_value(result, j) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    _F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    _BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"

    @intrinsic
    def mma_f16_f32(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma_form("mma_f16_f32", _F16, 4, 2, (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3))

    @intrinsic
    def mma_bf16_f32(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma_form("mma_bf16_f32", _BF16, 4, 2, (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3))

    @intrinsic
    def mma_16bit_f32(typingctx, kind, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        # kind is the inputs' dtype (A.dtype): the form is chosen here, when the kernel is typed for it
        dtype = getattr(kind, "dtype", None)
        if not isinstance(kind, (types.DType, types.NumberClass)) or dtype not in _SIXTEEN_BIT:
            raise TypeError(f"mma_16bit_f32: kind is the inputs' dtype, float16 or uint16 (bfloat16 bits), got {kind}")
        instruction = _F16 if dtype == types.float16 else _BF16
        sig, codegen = _mma_form("mma_16bit_f32", instruction, 4, 2, (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3))

        def codegen_without_kind(context, builder, full_sig, args):
            return codegen(context, builder, sig, args[1:])

        return sig.return_type(kind, *sig.args), codegen_without_kind

    @intrinsic
    def mma_tf32_f32(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma_form(
            "mma_tf32_f32",
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
            4,
            2,
            (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3),
        )

    @intrinsic
    def to_tf32(typingctx, x):
        if x != types.float32 and x != types.uint32:
            raise TypeError(f"to_tf32 takes a float32 or its bits as uint32, got {x}")
        sig = types.uint32(x)

        def codegen(context, builder, sig, args):
            value = args[0] if sig.args[0] == types.float32 else builder.bitcast(args[0], _F32)
            asm = ir.InlineAsm(ir.FunctionType(_I32, [_F32]), "cvt.rna.tf32.f32 $0, $1;", "=r,f", side_effect=False)
            return builder.call(asm, [value])

        return sig, codegen

    @intrinsic
    def pack_half2(typingctx, lo, hi):
        if lo not in _SIXTEEN_BIT or hi != lo:
            raise TypeError(f"pack_half2 takes two float16, or two uint16 (bfloat16 bits), got {lo} and {hi}")
        sig = types.uint32(lo, hi)

        def codegen(context, builder, sig, args):
            # numba keeps a float16 as its 16 bits in an i16 (a bitcast covers an LLVM half too)
            lo, hi = (builder.zext(builder.bitcast(v, ir.IntType(16)), _I32) for v in args)
            return builder.or_(lo, builder.shl(hi, ir.Constant(_I32, 16)))  # lo in bits 0-15

        return sig, codegen

    @intrinsic
    def load_half2(typingctx, arr, index):
        _check_array(arr, "load_half2")
        sig = types.uint32(arr, index)

        def codegen(context, builder, sig, args):
            ptr = _word_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], 1)
            return builder.load(ptr, align=4)

        return sig, codegen

    @intrinsic
    def load_half8(typingctx, arr, index):
        _check_array(arr, "load_half8")
        sig = types.UniTuple(types.uint32, 4)(arr, index)

        def codegen(context, builder, sig, args):
            ptr = _word_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], 4)
            vec = builder.load(ptr, align=16)
            parts = [builder.extract_element(vec, ir.Constant(_I32, j)) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    @intrinsic
    def store_half8(typingctx, arr, index, w0, w1, w2, w3):
        _check_array(arr, "store_half8")
        sig = types.void(arr, index, w0, w1, w2, w3)

        def codegen(context, builder, sig, args):
            ptr = _word_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], 4)
            vec = ir.Constant(ir.VectorType(_I32, 4), None)
            for j in range(4):
                vec = builder.insert_element(
                    vec, _as_i32(context, builder, args[2 + j], sig.args[2 + j]), ir.Constant(_I32, j)
                )
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()

        return sig, codegen

    def _ldmatrix(tile, index, trans):
        # .trans swaps 16-bit halves: on 32-bit elements it would split them, so float32 takes the plain form only
        _check_array(tile, "ldmatrix" + (".trans" if trans else ""), _SIXTEEN_BIT + (() if trans else (types.float32,)))
        sig = types.UniTuple(types.uint32, 4)(tile, index)
        op = "ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans else "") + ".shared.b16"

        def codegen(context, builder, sig, args):
            address = _shared_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            ftype = ir.FunctionType(ir.LiteralStructType([_I32] * 4), [_I32])
            asm = ir.InlineAsm(ftype, op + " {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r,~{memory}", side_effect=True)
            result = builder.call(asm, [address])
            parts = [builder.extract_value(result, j) for j in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    @intrinsic
    def ldmatrix_x4(typingctx, tile, index):
        return _ldmatrix(tile, index, False)

    @intrinsic
    def ldmatrix_x4_trans(typingctx, tile, index):
        return _ldmatrix(tile, index, True)

    def _cp_async(size, cache):
        """cp.async of ``size`` bytes, global to shared; ``cache``: .cg (L2 only, 16 bytes only) or .ca."""

        def typer(typingctx, tile, index, src, src_index):
            _check_array(tile, f"cp_async{size} (destination)", _COPYABLE)
            ok = isinstance(src, types.Array) and src.dtype in _COPYABLE and (src.ndim == 1 or src.layout == "C")
            if not ok:
                raise TypeError(f"cp_async{size} (source) needs a 1-D or C-contiguous array of {_COPYABLE}, got {src}")
            sig = types.void(tile, index, src, src_index)

            def codegen(context, builder, sig, args):
                dst = _shared_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
                source = _global_address(context, builder, sig.args[2], args[2], args[3], sig.args[3])
                ftype = ir.FunctionType(ir.VoidType(), [_I32, ir.IntType(64)])
                text = f"cp.async.{cache}.shared.global [$0], [$1], {size};"
                asm = ir.InlineAsm(ftype, text, "r,l,~{memory}", side_effect=True)
                builder.call(asm, [dst, source])
                return context.get_dummy_value()

            return sig, codegen

        return intrinsic(typer)

    cp_async16 = _cp_async(16, "cg")  # .cg: cache in L2 only (a tile is read once per block); 16 bytes, its only size
    cp_async8 = _cp_async(8, "ca")  # .ca (through L1): the form that takes 4 and 8 bytes
    cp_async4 = _cp_async(4, "ca")

    def bare_instruction(text):
        """An intrinsic's (signature, codegen) for one PTX instruction with no operands, void, with a memory
        clobber: the compiler moves no load or store across it (cp.async's commit and wait here; the
        dependent-launch intrinsics of zoo.device.dependent_launch)."""

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}", side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()

        return types.void(), codegen

    @intrinsic
    def cp_async_commit(typingctx):
        return bare_instruction("cp.async.commit_group;")

    @intrinsic
    def cp_async_wait_all(typingctx):
        return bare_instruction("cp.async.wait_group 0;")

    @intrinsic
    def cp_async_wait_group(typingctx, n):
        # the count is an immediate in the instruction: only a compile-time constant will do
        # (numba retries with the literal type when the plain one is refused)
        if not isinstance(n, types.IntegerLiteral):
            return None
        sig, codegen = bare_instruction(f"cp.async.wait_group {int(n.literal_value)};")
        return types.void(n), codegen


if backend.MLIR:  # numba-cuda-mlir compiles none of the above (llvmlite IR): the same instructions as inline PTX
    from zoo.device.inline_ptx import (  # noqa: F401, F811 (these names, for numba-cuda-mlir)
        cp_async4,
        cp_async8,
        cp_async16,
        cp_async_commit,
        cp_async_wait_all,
        cp_async_wait_group,
        ldmatrix_x4,
        ldmatrix_x4_trans,
        load_half2,
        load_half8,
        mma_16bit_f32,
        mma_bf16_f32,
        mma_f16_f32,
        mma_tf32_f32,
        store_half8,
        to_tf32,
    )
    from zoo.device.mlir_lowerings import pack_half2  # noqa: F811 (a bit cast: no inline PTX form)
