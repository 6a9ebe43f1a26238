"""``zoo.device.wgmma``'s instructions for numba-cuda-mlir (``ZOO_BACKEND=numba-cuda-mlir`` only).

The same instructions as numba-cuda's versions, under the same names and meaning (``zoo.device.wgmma``'s docstring
says what each does). Most are LLVM inline assembly through ``zoo.device.mlir_lowerings.asm``, as numba-cuda writes
them, because two things ``experimental.inline_ptx`` cannot say matter here: ``wgmma.mma_async`` reads and writes its
accumulators in the same registers (tied operands, ``"0"``, ``"1"``, ...; ``fence`` and ``wait_group`` tie them the
same way, so that no access to an accumulator moves across them), and every one of them orders memory (a ``~{memory}``
clobber: shared-memory stores must not move across a proxy fence, an mbarrier arrive or a TMA copy).

A shared element's address is ``cvta.to.shared`` of its generic one (``inline_ptx.element_address``); an array's
element size comes from its type, since ``arr.itemsize`` does not compile there (``first_tile``). Each instruction's
constant operands (counts, N, kind, transposes) are literals when the kernel is typed and go into its text.
"""

from numba_cuda_mlir.extending import overload, typing_registry
from numba_cuda_mlir.numba_cuda import types

from zoo.device.inline_ptx import element_address, uint32
from zoo.device.mlir_lowerings import asm, asm_on

# zoo.device.wgmma's (which imports this module, so they come from the module both share): K of one instruction by
# kind, the kinds that may be read MN-major, a swizzled tile's start, and the checks of an instruction's form
from zoo.device.wgmma_forms import K_OF, TILE_ALIGN, TRANSPOSABLE, check_mma_form, check_register_a_form  # noqa: F401


def _stub(name):
    def function(*args):
        raise NotImplementedError(f"{name} runs in a kernel compiled by numba-cuda-mlir")

    function.__name__ = function.__qualname__ = name
    return function


def _overload(name, inline="never"):
    stub = _stub(name)
    return stub, overload(stub, typing_registry=typing_registry, inline=inline)


def _literal(*values):
    return all(isinstance(v, types.IntegerLiteral) for v in values)


# -- addresses ---------------------------------------------------------------------------------------------------
shared_address, _shared_address = _overload("shared_address")


@_shared_address
def _shared_address_impl(arr, index):
    text = "{ .reg .u64 s; cvta.to.shared.u64 s, $1; cvt.u32.u64 $0, s; }"
    return lambda arr, index: uint32(asm(text, "=r,l", element_address(arr, index)))


first_tile, _first_tile = _overload("first_tile", inline="always")


@_first_tile
def _first_tile_impl(tiles):
    size, align = tiles.dtype.bitwidth // 8, TILE_ALIGN

    def impl(tiles):
        address = shared_address(tiles, 0)
        skew = (uint32(align) - address % uint32(align)) % uint32(align)
        return skew // uint32(size), address + skew

    return impl


# -- wgmma -------------------------------------------------------------------------------------------------------
def _check_acc(acc, what):
    if not (isinstance(acc, types.Array) and acc.ndim == 1 and acc.dtype == types.float32):
        raise TypeError(f"{what}: the accumulators are a 1-D float32 local array, got {acc}")


def _tied(count):
    """LLVM's constraints of ``text`` with acc[0 .. count) tied to it (``asm_on``: read and written in place)."""
    return ",".join(["=f"] * count + [str(i) for i in range(count)] + ["~{memory}"])


fence, _fence = _overload("fence", inline="always")


@_fence
def _fence_impl(acc, count):
    if not _literal(count):
        return None
    _check_acc(acc, "wgmma.fence")
    text = "wgmma.fence.sync.aligned;"
    constraints = _tied(count.literal_value)
    return lambda acc, count: asm_on(text, constraints, acc, 0)


wait_group, _wait_group = _overload("wait_group", inline="always")


@_wait_group
def _wait_group_impl(n, acc, count):
    if not _literal(n, count):
        return None
    _check_acc(acc, "wgmma.wait_group")
    text = f"wgmma.wait_group.sync.aligned {n.literal_value};"
    constraints = _tied(count.literal_value)
    return lambda n, acc, count: asm_on(text, constraints, acc, 0)


mma_async, _mma_async = _overload("mma_async", inline="always")


@_mma_async
def _mma_async_impl(acc, first, n, desc_a, desc_b, accumulate, trans_a, trans_b, kind):
    if not (_literal(first, n, trans_a, trans_b) and isinstance(kind, types.StringLiteral)):
        return None
    _check_acc(acc, "wgmma.mma_async")
    N, form = n.literal_value, kind.literal_value
    ta, tb = trans_a.literal_value, trans_b.literal_value
    check_mma_form(N, form, ta, tb)
    count, start = N // 2, first.literal_value
    registers = ", ".join(f"${i}" for i in range(count))
    transposes = f", {ta}, {tb}" if form in TRANSPOSABLE else ""
    text = (
        "{\n.reg .pred p;\n"
        f"setp.ne.b32 p, ${count + 2}, 0;\n"  # accumulate: D = A B + D, else D = A B
        f"wgmma.mma_async.sync.aligned.m64n{N}k{K_OF[form]}.f32.{form}.{form} {{{registers}}}, ${count}, "
        f"${count + 1}, p, 1, 1{transposes};\n}}"
    )
    constraints = ",".join(["=f"] * count + ["l", "l", "r"] + [str(i) for i in range(count)] + ["~{memory}"])

    def impl(acc, first, n, desc_a, desc_b, accumulate, trans_a, trans_b, kind):
        asm_on(text, constraints, acc, start, desc_a, desc_b, uint32(accumulate))

    return impl


mma_async_a_regs, _mma_async_a_regs = _overload("mma_async_a_regs", inline="always")


@_mma_async_a_regs
def _mma_async_a_regs_impl(acc, first, n, a0, a1, a2, a3, desc_b, accumulate, trans_b, kind):
    if not (_literal(first, n, trans_b) and isinstance(kind, types.StringLiteral)):
        return None
    _check_acc(acc, "wgmma.mma_async")
    N, form = n.literal_value, kind.literal_value
    check_register_a_form(N, form)
    count, start, tb = N // 2, first.literal_value, trans_b.literal_value
    registers = ", ".join(f"${i}" for i in range(count))
    a_words = ", ".join(f"${count + i}" for i in range(4))
    text = (
        "{\n.reg .pred p;\n"
        f"setp.ne.b32 p, ${count + 5}, 0;\n"  # accumulate: D = A B + D, else D = A B
        f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{form}.{form} {{{registers}}}, {{{a_words}}}, "
        f"${count + 4}, p, 1, 1, {tb};\n}}"
    )
    constraints = ",".join(["=f"] * count + ["r"] * 4 + ["l", "r"] + [str(i) for i in range(count)] + ["~{memory}"])

    def impl(acc, first, n, a0, a1, a2, a3, desc_b, accumulate, trans_b, kind):
        words = uint32(a0), uint32(a1), uint32(a2), uint32(a3)
        asm_on(text, constraints, acc, start, words[0], words[1], words[2], words[3], desc_b, uint32(accumulate))

    return impl


def _bare(name, text):
    """A function of no arguments that runs ``text``, ordered with every memory access around it."""
    function, register = _overload(name, inline="always")

    @register
    def _impl():
        return lambda: asm(text, "~{memory}")

    return function


commit_group = _bare("commit_group", "wgmma.commit_group.sync.aligned;")
fence_proxy_async = _bare("fence_proxy_async", "fence.proxy.async.shared::cta;")
fence_mbarrier_init = _bare("fence_mbarrier_init", "fence.mbarrier_init.release.cluster;")


def _setmaxnreg(direction):
    function, register = _overload(f"setmaxnreg_{direction}", inline="always")

    @register
    def _impl(n):
        if not _literal(n):
            return None
        text = f"setmaxnreg.{direction}.sync.aligned.u32 {n.literal_value};"
        return lambda n: asm(text, "~{memory}")

    return function


setmaxnreg_inc = _setmaxnreg("inc")
setmaxnreg_dec = _setmaxnreg("dec")


# -- mbarriers and TMA -------------------------------------------------------------------------------------------
def _check_bars(bars):
    if not (isinstance(bars, types.Array) and bars.dtype == types.uint64 and bars.ndim == 1):
        raise TypeError(f"mbarriers live in a 1-D uint64 shared array, got {bars}")


def _check_map(tmap):
    if not (isinstance(tmap, types.Array) and tmap.dtype == types.uint64 and tmap.ndim == 1):
        raise TypeError(f"a tensor map is the 16-word uint64 device array tensor_map_2d makes, got {tmap}")


mbarrier_init, _mbarrier_init = _overload("mbarrier_init", inline="always")


@_mbarrier_init
def _mbarrier_init_impl(bars, i, count):
    _check_bars(bars)
    text = "mbarrier.init.shared::cta.b64 [$0], $1;"
    return lambda bars, i, count: asm(text, "r,r,~{memory}", shared_address(bars, i), uint32(count))


mbarrier_arrive, _mbarrier_arrive = _overload("mbarrier_arrive", inline="always")


@_mbarrier_arrive
def _mbarrier_arrive_impl(bars, i):
    _check_bars(bars)
    text = "{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [$0];\n}"
    return lambda bars, i: asm(text, "r,~{memory}", shared_address(bars, i))


mbarrier_arrive_expect_tx, _mbarrier_arrive_expect_tx = _overload("mbarrier_arrive_expect_tx", inline="always")


@_mbarrier_arrive_expect_tx
def _mbarrier_arrive_expect_tx_impl(bars, i, nbytes):
    _check_bars(bars)
    text = "{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [$0], $1;\n}"
    return lambda bars, i, nbytes: asm(text, "r,r,~{memory}", shared_address(bars, i), uint32(nbytes))


cp_async_mbarrier_arrive, _cp_async_mbarrier_arrive = _overload("cp_async_mbarrier_arrive", inline="always")


@_cp_async_mbarrier_arrive
def _cp_async_mbarrier_arrive_impl(bars, i):
    _check_bars(bars)
    text = "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];"
    return lambda bars, i: asm(text, "r,~{memory}", shared_address(bars, i))


mbarrier_try_wait, _mbarrier_try_wait = _overload("mbarrier_try_wait", inline="always")


@_mbarrier_try_wait
def _mbarrier_try_wait_impl(bars, i, parity):
    _check_bars(bars)
    text = "{\n.reg .pred done;\nmbarrier.try_wait.parity.shared::cta.b64 done, [$1], $2;\nselp.u32 $0, 1, 0, done;\n}"
    return lambda bars, i, parity: uint32(asm(text, "=r,r,r,~{memory}", shared_address(bars, i), uint32(parity)))


mbarrier_wait, _mbarrier_wait = _overload("mbarrier_wait", inline="always")


@_mbarrier_wait
def _mbarrier_wait_impl(bars, i, parity):
    _check_bars(bars)
    # labels are local to the braces, so the statement may be inlined many times
    text = "{\n.reg .pred done;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n@!done bra WAIT;\n}"
    return lambda bars, i, parity: asm(text, "r,r,~{memory}", shared_address(bars, i), uint32(parity))


tensormap_acquire, _tensormap_acquire = _overload("tensormap_acquire", inline="always")


@_tensormap_acquire
def _tensormap_acquire_impl(tmap):
    _check_map(tmap)
    # the map's generic address is its global one (zoo.device.wgmma: why .sys)
    text = "fence.proxy.tensormap::generic.acquire.sys [$0], 128;\nprefetch.tensormap [$0];"
    return lambda tmap: asm(text, "l,~{memory}", element_address(tmap, 0))


tma_load_2d, _tma_load_2d = _overload("tma_load_2d", inline="always")


@_tma_load_2d
def _tma_load_2d_impl(tile, index, tmap, col, row, bars, b):
    _check_map(tmap)
    _check_bars(bars)
    text = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];"

    def impl(tile, index, tmap, col, row, bars, b):
        dst, bar = shared_address(tile, index), shared_address(bars, b)
        asm(text, "r,l,r,r,r,~{memory}", dst, element_address(tmap, 0), uint32(col), uint32(row), bar)

    return impl
