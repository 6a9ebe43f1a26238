"""Hopper's warpgroup MMA from numba: ``wgmma``, shared-memory matrix descriptors, mbarriers and TMA.

``mma.sync`` (``zoo.device.mma``) is one warp multiplying operands it first loads into
registers. ``wgmma.mma_async`` is one *warpgroup* (four consecutive warps, 128
threads, the first a multiple of 4) multiplying a 64 x N x 16 problem whose A and B
the tensor cores read straight from shared memory, each named by a 64-bit *matrix
descriptor*; only the float32 accumulators live in registers, N / 2 per thread. It
is asynchronous: ``fence`` orders the registers before it, ``mma_async`` issues,
``commit_group`` closes a group of issued MMAs and ``wait_group(n, ...)`` waits
until at most n groups are still running. It exists on ``sm_90a`` only (the "a" is
the arch-specific target; ptxas refuses it for plain sm_90 with "Instruction
'wgmma.mma_async with floating point types' not supported on .target 'sm_90'"), so
a kernel that calls it is compiled with ``jit(arch_specific=True)``.

===========================================================  =============================================
``shared_address(arr, i)``                                    the 32-bit shared-window address of arr[i]
``first_tile(tiles)``                                         (index, address) of the first element of a
                                                              shared array on a 1024-byte boundary
``descriptor(address, leading, stride, swizzle)``             a matrix descriptor (uint64), fields below
``swizzle_128b(offset)``                                      a byte offset in a 1024-byte-aligned tile,
                                                              swizzled as SWIZZLE_128B stores it
``swizzled_chunk(row, chunk, rows)``                          the float16 index of a row's 16-byte chunk
                                                              in such a tile of 64-column blocks
``fence(acc, count)``                                         ``wgmma.fence.sync.aligned``
``mma_async(acc, first, N, desc_a, desc_b, accumulate,``      ``wgmma.mma_async.sync.aligned.m64nNkK``
``          trans_a, trans_b, kind)``                         ``.f32.kind.kind``: acc[first .. first + N/2)
                                                              += A (64 x K) @ B (K x N); accumulate 0
                                                              drops the old acc; trans_x 0 = K-major;
                                                              kind "f16", "bf16" (K 16), "tf32" (K 8) or
                                                              "e4m3" (K 32), a literal (K_OF)
``mma_async_a_regs(acc, first, N, a0, a1, a2, a3,``            the same with A from registers (the
``                 desc_b, accumulate, trans_b, kind)``         register-A form): a0 .. a3 are this
                                                              thread's four words of A's fragment (below);
                                                              kind "f16" or "bf16"
``commit_group()``, ``wait_group(n, acc, count)``             ``wgmma.commit_group`` / ``wait_group n``
``fence_proxy_async()``                                       ``fence.proxy.async.shared::cta``: generic
                                                              writes to shared memory (st.shared,
                                                              cp.async) become visible to wgmma and TMA
``mbarrier_init(bars, i, count)``                             ``mbarrier.init``: expects count arrivals
``fence_mbarrier_init()``                                     ``fence.mbarrier_init``: the inits are seen
                                                              by the copy engine's arrivals too
``mbarrier_arrive(bars, i)``                                  ``mbarrier.arrive``
``mbarrier_arrive_expect_tx(bars, i, nbytes)``                arrive, and expect nbytes from TMA
``mbarrier_try_wait(bars, i, parity)``                        1 once the phase of that parity completed
``mbarrier_wait(bars, i, parity)``                            the same, looped until it has
``cp_async_mbarrier_arrive(bars, i)``                         ``cp.async.mbarrier.arrive.noinc``: one of
                                                              the arrivals, made when this thread's
                                                              earlier ``cp.async`` copies have landed
``tma_load_2d(tile, i, tmap, col, row, bars, b)``             ``cp.async.bulk.tensor.2d``: one thread copies
                                                              a box of the matrix ``tmap`` describes, at
                                                              element (row, col), to tile[i]; the bytes
                                                              count down mbarrier b's transaction count
``tensormap_acquire(tmap)``                                   ``fence.proxy.tensormap::generic.acquire``
                                                              + ``prefetch.tensormap`` (a map in global
                                                              memory, written by a host copy)
``setmaxnreg_inc(n)``, ``setmaxnreg_dec(n)``                  ``setmaxnreg``: a warpgroup's register budget
                                                              (needs ``jit(launch_bounds=...)``: without
                                                              it ptxas drops the instruction, silently)
``named_barrier_sync(id, count)``                            ``bar.sync id, count``: wait until ``count``
                                                              threads (whole warps) arrived at barrier id
                                                              (1-15; 0 is ``syncthreads``'), this one too
``named_barrier_arrive(id, count)``                          ``bar.arrive id, count``: arrive, not wait
``tensor_map_2d(matrix, box_rows, box_cols,`` (host)         ``cuTensorMapEncodeTiled``, 128B swizzle: the
``              shape=None)``                                 map as a device array of 16 uint64 (shape:
                                                              of a flat matrix, given as rows, cols)
===========================================================  =============================================

``acc`` is a ``cuda.local.array`` of float32 and ``first``, ``N``, ``n``, ``count``,
``trans_a``, ``trans_b`` are compile-time constants, so the accumulators stay in
registers; ``fence`` and ``wait_group`` tie the first ``count`` of them to the
instruction, so that no read or write of an accumulator is scheduled across it
(what CUTLASS's ``warpgroup_fence_operand`` does). ``bars`` is a ``uint64`` shared
array; ``tile`` a shared array (ELEMENT[kind]) whose tiles start at ``first_tile``'s index
(CUDA aligns dynamic shared memory to 16 bytes only; the swizzle needs 1024).

The tensor map: in global memory, not a ``__grid_constant__`` parameter
------------------------------------------------------------------------
CUDA C passes a ``CUtensorMap`` by value as a ``const __grid_constant__`` kernel
parameter, which PTX declares ``.param .align 64 .b8 map[128]`` and addresses with
``cvta.param``. numba cannot declare that parameter: an array argument is 7 scalar
parameters and a ``UniTuple(uint64, 16)`` argument is 16 separate ``.param .u64``
(read from ``compile_ptx``'s output), nothing asks for 64-byte alignment, and numba
has no way to take a parameter's address (inline assembly cannot name the
parameter: its mangled name exists only after compilation). ptxas does accept a
tensor-map address made with ``cvta.param`` from the first of 16 ``.u64``
parameters (``UTMALDG`` in the SASS), but their 64-byte alignment is then nobody's
promise, and rewriting the 16 declarations into one aligned ``.b8[128]`` would
take a PTX rewriting step and a plan that passes one 128-byte parameter. The
CUDA Programming Guide's other way needs neither: the map lives in global memory
(``tensor_map_2d`` copies it there, 64-byte aligned as every allocation is) and
each block fences it once with ``fence.proxy.tensormap::generic.acquire`` before
the first copy (``tensormap_acquire``, which also prefetches it).

The matrix descriptor (PTX ISA, "Matrix Descriptor Format")
------------------------------------------------------------
Bits 0-13: start address >> 4; 16-29: leading dimension byte offset (LBO) >> 4;
32-45: stride dimension byte offset (SBO) >> 4; 49-51: base offset (0 here: every
tile starts on a 1024-byte boundary); 62-63: swizzle mode (0 none, 1 128B, 2 64B,
3 32B). With T = 8 float16 (16 bytes) and W the swizzle width in 16-byte units
(8 for 128B), the tile an operand reads is, in elements (CUTLASS's canonical GMMA
layouts, ``cute/atom/mma_traits_sm90_gmma.hpp``)::

    K-major  (trans 0), MN x K:  ((8, m), (T, 2)) : ((W T, SBO), (1, T))     rows W*16 bytes apart
    MN-major (trans 1), MN x K:  ((T, W, m), (8, k)) : ((1, T, LBO), (W T, SBO))

so K-major: row r at (r % 8) * 128 bytes + (r // 8) * SBO, k contiguous (LBO unused);
MN-major: 64 MN-elements contiguous (128 bytes), the next 64 at LBO, k rows 128
bytes apart, the next 8 k at SBO. Swizzling then XORs address bits 4-6 with bits
7-9 (``Swizzle<3,4,3>``) of the *absolute* shared address, hence 1024-byte tiles.
In bytes the K-major layout is the same for every kind: a 128-byte row holds 64
f16 or bf16, 32 tf32 or 128 e4m3, and an instruction's k slice is 32 bytes of it
(K_OF), so the descriptors of tf32 and e4m3 tiles are those of f16 K-major tiles.

The accumulator fragment of m64nNk16: thread t of the warpgroup (warp w = t // 32,
g = lane // 4, q = lane % 4) holds acc[4 j + 2 h + c] = D[16 w + g + 8 h, 8 j + 2 q + c]
for j < N / 8 and h, c in {0, 1}: each warp owns 16 rows, each 8-column slice is
laid out as ``mma.sync``'s C fragment (CUTLASS's ``CLayout_64xN``).

A from registers (``mma_async_a_regs``): the PTX ISA's register fragment of A for
m64nNk16 gives each warp 16 rows again, as four 32-bit words a thread, each two
16-bit elements, the lower column in the low half: a0 = A[16 w + g, 2 q .. 2 q + 1],
a1 = A[16 w + g + 8, 2 q ..], a2 = A[16 w + g, 8 + 2 q ..], a3 = A[16 w + g + 8, 8 + 2 q ..]
(``mma.sync``'s A fragment, CUTLASS's ``ALayout_64x16``). That is the accumulator
fragment of two 8-column slices, so the float32 results of one wgmma, rounded and
paired (``zoo.device.mma.pack_half2``), are the A operand of the next without a trip
through shared memory: ``wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16 d, {a0, a1,
a2, a3}, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b`` (no imm-trans-a:
registers have no major-ness). ``wgmma.fence`` must come between the writes of those
registers and the MMA that reads them, as for the accumulators.

In the simulator
----------------
The same names are Python with the instructions' meaning, so the steps run in
numba's simulator and their index arithmetic, descriptors and swizzles are checked
there. ``shared_address`` gives each shared array of a block a made-up address
(below 256 KiB, 16-byte aligned but never 1024: see ``first_tile``), and ``mma_async`` decodes the descriptors
exactly as above, reads the elements of its kind from those addresses (swizzle
applied; a tf32 without the 13 low mantissa bits its tensor core ignores), and
computes its thread's fragment (float64 products rounded to float32, as
``zoo.device.mma`` does; e4m3 adds as its tensor core does, every term aligned to
the largest one's exponent and cut toward zero below 13 fraction bits of it:
``zoo.simulator.hopper.truncating_sum``, which gives the errors an H100 measured).
It is deferred as on the GPU: the accumulators change at the ``wait_group`` that
retires the MMA, where the shared bytes it read are read again and must not have
changed (a tile refilled too early raises). Each thread
must ``fence`` after its last ``wait_group`` before the next ``mma_async``, and the
four warps of a warpgroup must issue the same descriptors (both raise otherwise).
``mma_async_a_regs`` gathers the 128 threads' words of A before any of them
computes its fragment (the ``.sync`` of the instruction: all of a warpgroup
issue it), so a thread missing from the warpgroup's MMA is a deadlock there.
mbarriers keep their phase, pending arrivals and transaction bytes, named barriers their
arrivals; ``tma_load_2d``
copies at once (zeros outside the matrix, as TMA fills) with the 128B swizzle and
completes its bytes on the barrier; ``cp.async`` has copied by the time it is
issued, so ``cp_async_mbarrier_arrive`` arrives at once. What the simulator cannot
check is that the hardware agrees with this reading of the PTX ISA:
``tests/device/test_wgmma.py`` runs one MMA of each layout on a GPU too.
"""

from zoo.device.jit import jit
from zoo.device.wgmma_forms import K_OF, TILE_ALIGN, TRANSPOSABLE, check_mma_form, check_register_a_form
from zoo.runtime import SIMULATOR, backend
from zoo.runtime.backend import float16, float32, uint8, uint16, uint32, uint64
from zoo.runtime.tensor_map import TENSOR_MAP_WORDS, tensor_map_2d  # noqa: F401 (the host side, for the steps)

SWIZZLE_NONE, SWIZZLE_128B, SWIZZLE_64B, SWIZZLE_32B = 0, 1, 2, 3  # the descriptor's bits 62-63
# K_OF (K of one instruction by kind), TRANSPOSABLE and TILE_ALIGN come from zoo.device.wgmma_forms, which both
# backends' intrinsics share. ELEMENT is the dtype a kernel's shared tiles hold for each kind: bfloat16 and e4m3 travel
# as their bits (uint16, uint8), tf32 as the float32 it is read from (the tensor core ignores the low 13 bits of its
# mantissa).
ELEMENT = {"f16": float16, "bf16": uint16, "tf32": float32, "e4m3": uint8}
SWIZZLE_BYTES = {SWIZZLE_NONE: 16, SWIZZLE_128B: 128, SWIZZLE_64B: 64, SWIZZLE_32B: 32}  # a row of the pattern
# cuda.shared.array(0, ..., alignment=SWIZZLE_ALIGN) promises the compiler a 1024-byte-aligned dynamic array, so
# first_tile's skew folds to 0. Only a kernel with no static shared array may pass it: the driver starts dynamic
# shared memory right after the static arrays (measured on an H100: 64 bytes of mbarriers at 0x400, the dynamic
# array at 0x440), whatever alignment it declares. The simulator refuses the argument (first_tile is exact there).
SWIZZLE_ALIGN = None if SIMULATOR else TILE_ALIGN


def descriptor(address, leading_bytes, stride_bytes, swizzle):
    """The 64-bit shared-memory matrix descriptor of a tile at ``address`` (bytes; the fields drop 4 bits)."""
    return (
        uint64((address >> uint32(4)) & uint32(0x3FFF))
        | uint64((leading_bytes >> uint32(4)) & uint32(0x3FFF)) << uint64(16)
        | uint64((stride_bytes >> uint32(4)) & uint32(0x3FFF)) << uint64(32)
        | uint64(swizzle) << uint64(62)
    )


def swizzle_128b(offset):
    """Byte ``offset`` into a 1024-byte-aligned tile, moved as SWIZZLE_128B moves it: the 16-byte chunk
    (bits 4-6) XOR the row within its 8-row group of 128-byte rows (bits 7-9)."""
    return offset ^ ((offset >> uint32(3)) & uint32(0x70))


def swizzled_chunk(row, chunk, rows):
    """The float16 element index, from a tile's start, of 16-byte chunk ``chunk`` of row ``row`` in a tile stored
    as 64-column blocks of ``rows`` 128-byte rows each (the layout wgmma's SWIZZLE_128B descriptors read): column
    block chunk // 8, then the row's 128 bytes with the chunk moved by ``swizzle_128b``."""
    in_block = swizzle_128b(row * uint32(128) + chunk % uint32(8) * uint32(16))
    return (chunk // uint32(8) * (uint32(rows) * uint32(128)) + in_block) // uint32(2)


def first_tile(tiles):
    """(element index, shared address) of the first 1024-byte boundary in the shared array ``tiles``.

    The swizzle is a function of the absolute address, so a tile stored with ``swizzle_128b`` of offsets from
    its start must start where the pattern does. CUDA promises dynamic shared memory 16-byte alignment, not
    the 1024 an array may declare: a kernel asks for TILE_ALIGN bytes more and starts its tiles here."""
    address = shared_address(tiles, 0)
    skew = (uint32(TILE_ALIGN) - address % uint32(TILE_ALIGN)) % uint32(TILE_ALIGN)
    return skew // uint32(tiles.itemsize), address + skew


if not SIMULATOR:  # device functions on the GPU; in the simulator plain Python (a device-function call costs more)
    descriptor = jit(device=True, forceinline=True)(descriptor)
    swizzle_128b = jit(device=True, forceinline=True)(swizzle_128b)
    swizzled_chunk = jit(device=True, forceinline=True)(swizzled_chunk)
    first_tile = jit(device=True, forceinline=True)(first_tile)


if SIMULATOR:  # Python with the instructions' meaning ("In the simulator", above)
    from zoo.simulator.hopper import (  # noqa: F401
        commit_group,
        cp_async_mbarrier_arrive,
        fence,
        fence_mbarrier_init,
        fence_proxy_async,
        mbarrier_arrive,
        mbarrier_arrive_expect_tx,
        mbarrier_init,
        mbarrier_try_wait,
        mbarrier_wait,
        mma_async,
        mma_async_a_regs,
        named_barrier_arrive,
        named_barrier_sync,
        setmaxnreg_dec,
        setmaxnreg_inc,
        shared_address,
        tensormap_acquire,
        tma_load_2d,
        wait_group,
    )

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    from zoo.device.memory import element_pointer

    _I32 = ir.IntType(32)
    _I64 = ir.IntType(64)
    _F32 = ir.FloatType()

    def _shared_address(context, builder, arrty, arr, index, indexty):
        """The 32-bit shared-window address of arr[index] (numba hands out generic pointers)."""
        element = element_pointer(context, builder, arrty, arr, index, indexty)
        generic = builder.bitcast(element, ir.IntType(8).as_pointer(element.type.addrspace))
        shared = builder.addrspacecast(generic, ir.IntType(8).as_pointer(3))
        return builder.ptrtoint(shared, _I32)

    def _global_address(context, builder, arrty, arr):
        data = context.make_array(arrty)(context, builder, arr).data
        return builder.ptrtoint(data, _I64)

    def _literal(*values):
        return all(isinstance(v, types.IntegerLiteral) for v in values)

    def _check_acc(acc, what):
        if not (isinstance(acc, types.Array) and acc.ndim == 1 and acc.dtype == types.float32):
            raise TypeError(f"{what}: the accumulators are a 1-D float32 local array, got {acc}")

    def _acc_pointers(context, builder, arrty, arr, first, count):
        data = context.make_array(arrty)(context, builder, arr).data
        return [builder.gep(data, [ir.Constant(_I64, first + i)]) for i in range(count)]

    def _tied(text, acc, count):
        """An asm statement ``text`` with acc[0 .. count) tied to it (read and written, "+f")."""
        _check_acc(acc, text.split()[0])

        def codegen(context, builder, sig, args):
            pointers = _acc_pointers(context, builder, sig.args[0], args[0], 0, count)
            values = [builder.load(p) for p in pointers]
            ftype = ir.FunctionType(ir.LiteralStructType([_F32] * count), [_F32] * count)
            constraints = ",".join(["=f"] * count + [str(i) for i in range(count)]) + ",~{memory}"
            result = builder.call(ir.InlineAsm(ftype, text, constraints, side_effect=True), values)
            for i, p in enumerate(pointers):
                builder.store(builder.extract_value(result, i), p)
            return context.get_dummy_value()

        return codegen

    @intrinsic
    def fence(typingctx, acc, count):
        if not _literal(count):
            return None
        return types.void(acc, count), _tied("wgmma.fence.sync.aligned;", acc, count.literal_value)

    @intrinsic
    def wait_group(typingctx, n, acc, count):
        if not _literal(n, count):
            return None
        text = f"wgmma.wait_group.sync.aligned {n.literal_value};"
        tied = _tied(text, acc, count.literal_value)

        def codegen(context, builder, sig, args):  # acc is the second argument here
            return tied(context, builder, types.void(sig.args[1]), [args[1]])

        return types.void(n, acc, count), codegen

    @intrinsic
    def mma_async(typingctx, acc, first, n, desc_a, desc_b, accumulate, trans_a, trans_b, kind):
        if not (_literal(first, n, trans_a, trans_b) and isinstance(kind, types.StringLiteral)):
            return None
        _check_acc(acc, "wgmma.mma_async")
        N, form = n.literal_value, kind.literal_value
        ta, tb = trans_a.literal_value, trans_b.literal_value
        check_mma_form(N, form, ta, tb)
        count = N // 2
        start = first.literal_value
        sig = types.void(acc, first, n, types.uint64, types.uint64, types.uint32, trans_a, trans_b, kind)
        registers = ", ".join(f"${i}" for i in range(count))
        transposes = f", {ta}, {tb}" if form in TRANSPOSABLE else ""  # the other forms take no imm-trans operands
        text = (
            "{\n.reg .pred p;\n"
            f"setp.ne.b32 p, ${count + 2}, 0;\n"  # accumulate: D = A B + D, else D = A B
            f"wgmma.mma_async.sync.aligned.m64n{N}k{K_OF[form]}.f32.{form}.{form} {{{registers}}}, ${count}, "
            f"${count + 1}, p, 1, 1{transposes};\n}}"
        )
        constraints = ",".join(["=f"] * count + ["l", "l", "r"] + [str(i) for i in range(count)]) + ",~{memory}"

        def codegen(context, builder, sig, args):
            pointers = _acc_pointers(context, builder, sig.args[0], args[0], start, count)
            values = [builder.load(p) for p in pointers]
            ftype = ir.FunctionType(ir.LiteralStructType([_F32] * count), [_I64, _I64, _I32] + [_F32] * count)
            # side effects and a memory clobber: it reads shared memory, which LLVM must not move stores across
            asm = ir.InlineAsm(ftype, text, constraints, side_effect=True)
            result = builder.call(asm, [args[3], args[4], args[5]] + values)
            for i, p in enumerate(pointers):
                builder.store(builder.extract_value(result, i), p)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def mma_async_a_regs(typingctx, acc, first, n, a0, a1, a2, a3, desc_b, accumulate, trans_b, kind):
        if not (_literal(first, n, trans_b) and isinstance(kind, types.StringLiteral)):
            return None
        _check_acc(acc, "wgmma.mma_async")
        N, form = n.literal_value, kind.literal_value
        check_register_a_form(N, form)
        count = N // 2
        start = first.literal_value
        tb = trans_b.literal_value
        words = (types.uint32,) * 4
        sig = types.void(acc, first, n, *words, types.uint64, types.uint32, trans_b, kind)
        registers = ", ".join(f"${i}" for i in range(count))
        a_words = ", ".join(f"${count + i}" for i in range(4))
        text = (
            "{\n.reg .pred p;\n"
            f"setp.ne.b32 p, ${count + 5}, 0;\n"  # accumulate: D = A B + D, else D = A B
            f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{form}.{form} {{{registers}}}, {{{a_words}}}, "
            f"${count + 4}, p, 1, 1, {tb};\n}}"
        )
        constraints = ",".join(["=f"] * count + ["r"] * 4 + ["l", "r"] + [str(i) for i in range(count)]) + ",~{memory}"

        def codegen(context, builder, sig, args):
            pointers = _acc_pointers(context, builder, sig.args[0], args[0], start, count)
            values = [builder.load(p) for p in pointers]
            ftype = ir.FunctionType(ir.LiteralStructType([_F32] * count), [_I32] * 4 + [_I64, _I32] + [_F32] * count)
            inputs = [context.cast(builder, v, t, types.uint32) for v, t in zip(args[3:7], sig.args[3:7], strict=True)]
            asm = ir.InlineAsm(ftype, text, constraints, side_effect=True)
            result = builder.call(asm, inputs + [args[7], args[8]] + values)
            for i, p in enumerate(pointers):
                builder.store(builder.extract_value(result, i), p)
            return context.get_dummy_value()

        return sig, codegen

    def _bare(text, argtypes=(), constraints=""):
        """A void asm statement with a memory clobber over scalar operands already cast to argtypes."""

        def codegen(context, builder, sig, args):
            llvm = [context.get_value_type(t) for t in argtypes]
            ftype = ir.FunctionType(ir.VoidType(), llvm)
            clobber = (constraints + "," if constraints else "") + "~{memory}"
            values = [context.cast(builder, v, t, want) for v, t, want in zip(args, sig.args, argtypes, strict=False)]
            builder.call(ir.InlineAsm(ftype, text, clobber, side_effect=True), values)
            return context.get_dummy_value()

        return codegen

    @intrinsic
    def commit_group(typingctx):
        return types.void(), _bare("wgmma.commit_group.sync.aligned;")

    @intrinsic
    def fence_proxy_async(typingctx):
        return types.void(), _bare("fence.proxy.async.shared::cta;")

    @intrinsic
    def fence_mbarrier_init(typingctx):
        return types.void(), _bare("fence.mbarrier_init.release.cluster;")

    @intrinsic
    def setmaxnreg_inc(typingctx, n):
        if not _literal(n):
            return None
        return types.void(n), _bare(f"setmaxnreg.inc.sync.aligned.u32 {n.literal_value};")

    @intrinsic
    def setmaxnreg_dec(typingctx, n):
        if not _literal(n):
            return None
        return types.void(n), _bare(f"setmaxnreg.dec.sync.aligned.u32 {n.literal_value};")

    @intrinsic
    def named_barrier_sync(typingctx, barrier, count):
        sig = types.void(types.uint32, types.uint32)
        return sig, _bare("bar.sync $0, $1;", (types.uint32, types.uint32), "r,r")

    @intrinsic
    def named_barrier_arrive(typingctx, barrier, count):
        sig = types.void(types.uint32, types.uint32)
        return sig, _bare("bar.arrive $0, $1;", (types.uint32, types.uint32), "r,r")

    @intrinsic
    def shared_address(typingctx, arr, index):
        sig = types.uint32(arr, index)

        def codegen(context, builder, sig, args):
            return _shared_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])

        return sig, codegen

    def _on_barrier(text, extra_types=(), extra_constraints=(), returns=None):
        """Codegen of an asm statement on mbarrier bars[i] (its shared address is $0, or $1 after an output)
        with extra scalar inputs."""

        def codegen(context, builder, sig, args):
            bar = _shared_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            extras = [
                context.cast(builder, v, t, e) for v, t, e in zip(args[2:], sig.args[2:], extra_types, strict=True)
            ]
            llvm = [_I32] + [context.get_value_type(e) for e in extra_types]
            out = [] if returns is None else [returns]
            ftype = ir.FunctionType(ir.VoidType() if returns is None else context.get_value_type(returns), llvm)
            constraints = ",".join(["=r"] * len(out) + ["r"] + list(extra_constraints) + ["~{memory}"])
            result = builder.call(ir.InlineAsm(ftype, text, constraints, side_effect=True), [bar] + extras)
            return context.get_dummy_value() if returns is None else result

        return codegen

    def _check_bars(bars):
        if not (isinstance(bars, types.Array) and bars.dtype == types.uint64 and bars.ndim == 1):
            raise TypeError(f"mbarriers live in a 1-D uint64 shared array, got {bars}")

    @intrinsic
    def mbarrier_init(typingctx, bars, i, count):
        _check_bars(bars)
        return types.void(bars, i, types.uint32), _on_barrier(
            "mbarrier.init.shared::cta.b64 [$0], $1;", (types.uint32,), ("r",)
        )

    @intrinsic
    def mbarrier_arrive(typingctx, bars, i):
        _check_bars(bars)
        # the state it returns (for mbarrier.test_wait) goes to a register of its own scope
        text = "{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [$0];\n}"
        return types.void(bars, i), _on_barrier(text)

    @intrinsic
    def mbarrier_arrive_expect_tx(typingctx, bars, i, nbytes):
        _check_bars(bars)
        text = "{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [$0], $1;\n}"
        return types.void(bars, i, types.uint32), _on_barrier(text, (types.uint32,), ("r",))

    @intrinsic
    def cp_async_mbarrier_arrive(typingctx, bars, i):
        _check_bars(bars)
        return types.void(bars, i), _on_barrier("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];")

    @intrinsic
    def mbarrier_try_wait(typingctx, bars, i, parity):
        _check_bars(bars)
        text = (
            "{\n.reg .pred done;\nmbarrier.try_wait.parity.shared::cta.b64 done, [$1], $2;\nselp.u32 $0, 1, 0, done;\n}"
        )
        return types.uint32(bars, i, types.uint32), _on_barrier(text, (types.uint32,), ("r",), returns=types.uint32)

    @intrinsic
    def mbarrier_wait(typingctx, bars, i, parity):
        _check_bars(bars)
        # labels are local to the braces, so the statement may be inlined many times
        text = (
            "{\n.reg .pred done;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n@!done bra WAIT;\n}"
        )
        return types.void(bars, i, types.uint32), _on_barrier(text, (types.uint32,), ("r",))

    def _check_map(tmap):
        if not (isinstance(tmap, types.Array) and tmap.dtype == types.uint64 and tmap.ndim == 1):
            raise TypeError(f"a tensor map is the 16-word uint64 device array tensor_map_2d makes, got {tmap}")

    @intrinsic
    def tensormap_acquire(typingctx, tmap):
        _check_map(tmap)
        sig = types.void(tmap)

        def codegen(context, builder, sig, args):
            at = _global_address(context, builder, sig.args[0], args[0])
            # the host wrote the map (a copy to the device): order that write before the TMA unit reads it; .sys,
            # as the CUDA Programming Guide's example of a map in global memory copied with cudaMemcpy says
            text = "fence.proxy.tensormap::generic.acquire.sys [$0], 128;\nprefetch.tensormap [$0];"
            ftype = ir.FunctionType(ir.VoidType(), [_I64])
            builder.call(ir.InlineAsm(ftype, text, "l,~{memory}", side_effect=True), [at])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def tma_load_2d(typingctx, tile, index, tmap, col, row, bars, b):
        _check_map(tmap)
        _check_bars(bars)
        sig = types.void(tile, index, tmap, types.uint32, types.uint32, bars, b)

        def codegen(context, builder, sig, args):
            dst = _shared_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            at = _global_address(context, builder, sig.args[2], args[2])
            bar = _shared_address(context, builder, sig.args[5], args[5], args[6], sig.args[6])
            text = (
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                "[$0], [$1, {$2, $3}], [$4];"
            )
            ftype = ir.FunctionType(ir.VoidType(), [_I32, _I64, _I32, _I32, _I32])
            asm = ir.InlineAsm(ftype, text, "r,l,r,r,r,~{memory}", side_effect=True)
            builder.call(asm, [dst, at, args[3], args[4], bar])
            return context.get_dummy_value()

        return sig, codegen


if backend.MLIR:  # numba-cuda-mlir compiles none of the above (llvmlite IR): the same instructions, its lowering
    from zoo.device.mlir_wgmma import (  # noqa: F401, F811 (these names, for numba-cuda-mlir)
        commit_group,
        cp_async_mbarrier_arrive,
        fence,
        fence_mbarrier_init,
        fence_proxy_async,
        first_tile,
        mbarrier_arrive,
        mbarrier_arrive_expect_tx,
        mbarrier_init,
        mbarrier_try_wait,
        mbarrier_wait,
        mma_async,
        mma_async_a_regs,
        setmaxnreg_dec,
        setmaxnreg_inc,
        shared_address,
        tensormap_acquire,
        tma_load_2d,
        wait_group,
    )
