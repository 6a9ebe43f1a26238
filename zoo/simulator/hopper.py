"""Hopper's asynchronous machinery as Python, for the simulator: ``zoo.device.wgmma``'s names in numba's simulator.

A block's shared arrays get made-up addresses in a 256 KiB window (16 bytes past a 1024-byte boundary, as CUDA
promises only 16), which the matrix descriptors name; ``mma_async`` decodes a descriptor as the PTX ISA's "Matrix
Descriptor Format" says (swizzle included), reads the elements of its kind there (f16, bf16, tf32, e4m3), and
computes its thread's fragment of the product (for e4m3 with the tensor core's truncating addition,
``truncating_sum``), deferred as on the GPU: the accumulators change at the
``wait_group`` that retires the MMA, where the bytes it read must not have changed; ``mma_async_a_regs`` gathers
A from the 128 threads' words first. mbarriers keep their phase, pending arrivals and transaction bytes;
``tma_load_2d`` copies a box at once, swizzled, and completes its bytes on the barrier; a tensor map is a key to the
matrix (``tensor_map``). ``zoo.device.wgmma``'s docstring says what each name means on the GPU.
"""

import functools
import itertools
import threading

import numpy as np

from zoo.simulator import warps
from zoo.simulator.warps import POLL_S

# the PTX ISA's figures this model reads descriptors and boxes by (zoo.device.wgmma names them for the kernels)
TILE_ALIGN = 1024  # bytes: where the 128B swizzle's XOR pattern starts; a TMA box lands on such a boundary
SWIZZLE_BYTES = {0: 16, 1: 128, 2: 64, 3: 32}  # a descriptor's swizzle mode (bits 62-63) -> bytes in a pattern row
TENSOR_MAP_WORDS = 16  # a CUtensorMap is 128 bytes


SHARED_WINDOW = 256 * 1024  # addresses a descriptor's 14-bit field reaches (>> 4)


class _Region:
    __slots__ = ("address", "real", "nbytes", "raw")

    def __init__(self, address, arr):
        self.address, self.real, self.nbytes = address, arr.__array_interface__["data"][0], arr.nbytes
        self.raw = arr.reshape(-1).view(np.uint8)  # the bytes behind the made-up addresses


class _Barrier:
    __slots__ = ("expected", "pending", "tx", "phase")

    def __init__(self, count):
        self.expected, self.pending, self.tx, self.phase = count, count, 0, 0


class _SharedSpace:
    """A block's shared arrays at made-up addresses, its mbarriers and the wgmma each warpgroup issued."""

    def __init__(self):
        self.cond = threading.Condition()
        self.regions = []
        self.next = TILE_ALIGN  # as on Hopper, the first KiB of the window is the system's
        self.barriers = {}
        self.issued = {}  # (warpgroup, n-th mma_async) -> what its first thread issued

    def address(self, arr, index):
        arr = np.asarray(arr)
        real = arr.__array_interface__["data"][0]
        with self.cond:
            for r in self.regions:
                if r.real <= real < r.real + r.nbytes:
                    return r.address + real - r.real + int(index) * arr.itemsize
            if not arr.flags.c_contiguous:
                raise ValueError("shared_address takes a contiguous shared array")
            # 16 bytes past a 1024-byte boundary and more for each array, as CUDA promises only 16: a kernel that
            # takes 1024-byte alignment for granted (instead of first_tile) swizzles wrongly here
            region = _Region(self.next + 16 * (len(self.regions) + 1), arr)
            self.next = -(-(region.address + max(arr.nbytes, 1)) // TILE_ALIGN) * TILE_ALIGN
            if self.next > SHARED_WINDOW:
                raise MemoryError("more shared memory than a descriptor can address (256 KiB)")
            self.regions.append(region)
            return region.address + int(index) * arr.itemsize

    def region(self, lo, hi, what):
        """The region holding bytes [lo, hi); IndexError names ``what`` reached outside every array."""
        for r in self.regions:
            if r.address <= lo and hi <= r.address + r.nbytes:
                return r
        raise IndexError(f"{what} reaches shared bytes {lo:#x}..{hi:#x}, outside every shared array")

    def read_bits(self, addresses, what, nbytes=2):
        """The bits of the ``nbytes``-byte elements (little-endian, as uint32) at these byte addresses."""
        r = self.region(int(addresses.min()), int(addresses.max()) + nbytes, what)
        at = addresses - r.address
        bits = r.raw[at].astype(np.uint32)
        for b in range(1, nbytes):
            bits |= r.raw[at + b].astype(np.uint32) << np.uint32(8 * b)
        return bits

    def write_bytes(self, addresses, data, what):
        """data (uint8, one row of bytes per address) written from each address on."""
        r = self.region(int(addresses.min()), int(addresses.max()) + data.shape[-1], what)
        at = addresses - r.address
        for b in range(data.shape[-1]):
            r.raw[at + b] = data[..., b]

    def barrier(self, address):
        found = self.barriers.get(address)
        if found is None:
            raise RuntimeError(f"mbarrier at shared address {address:#x} used before mbarrier_init")
        return found

    def complete(self, bar, arrivals, tx):
        """Arrivals and transaction bytes on ``bar`` (lock held); the phase flips when both reach 0."""
        bar.pending -= arrivals
        bar.tx += tx
        if bar.pending < 0:
            raise RuntimeError("mbarrier: more arrivals than its count in one phase")
        if bar.pending == 0 and bar.tx == 0:
            bar.phase += 1
            bar.pending = bar.expected
            self.cond.notify_all()


_SPACES_LOCK = threading.Lock()


def _space():
    manager = threading.current_thread()._manager
    space = getattr(manager, "_zoo_shared_space", None)
    if space is None:
        with _SPACES_LOCK:
            space = getattr(manager, "_zoo_shared_space", None)
            if space is None:
                space = manager._zoo_shared_space = _SharedSpace()
    return space


class _ThreadState:
    __slots__ = ("fenced", "issued", "open", "groups", "shadow")

    def __init__(self):
        self.fenced = False
        self.issued = 0  # mma_async calls so far
        self.open = []  # issued, not yet committed
        self.groups = []  # committed groups, oldest first
        self.shadow = {}  # id(acc) -> the values acc will hold once everything issued has retired


def _thread():
    t = threading.current_thread()
    state = getattr(t, "_zoo_wgmma", None)
    if state is None:
        block = t._manager._block_dim
        if int(np.prod(block)) % 128:
            raise RuntimeError(f"wgmma needs whole warpgroups of 128 threads; the block is {tuple(block)}")
        state = t._zoo_wgmma = _ThreadState()
    return t, state


def shared_address(arr, index):
    return np.uint32(_space().address(arr, index))


# -- reading an operand through its descriptor ------------------------------------------------------------
def _swizzled(address, width):
    """Absolute byte addresses as the hardware's swizzle moves them (width: bytes in a row of the pattern)."""
    if width == 16:
        return address
    mask = (width // 16 - 1) << 4  # 128B: bits 4-6; 64B: 4-5; 32B: bit 4
    return address ^ ((address >> 3) & mask)


@functools.lru_cache(maxsize=4096)
def operand_addresses(desc, rows, trans, nbytes=2):
    """Byte addresses of an MN x K operand (rows = MN, K = 32 bytes of ``nbytes``-byte elements) that ``desc``
    describes; trans 0 is K-major (the only layout of 4- and 1-byte elements)."""
    desc = int(desc)
    start = (desc & 0x3FFF) << 4
    leading = ((desc >> 16) & 0x3FFF) << 4
    stride = ((desc >> 32) & 0x3FFF) << 4
    if (desc >> 49) & 7:
        raise NotImplementedError("a descriptor with a non-zero base offset (a tile not 1024-byte aligned)")
    width = SWIZZLE_BYTES[(desc >> 62) & 3]
    mn = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(32 // nbytes, dtype=np.int64)[None, :]
    if not trans:  # K-major: rows of `width` bytes (16 without swizzle), groups of 8 rows SBO apart
        kb = k * nbytes  # k's byte in the row: an instruction reads 32 bytes of each row
        if width == 16:  # core matrices 8 x 16 bytes: the two 16-byte halves of k LBO apart
            offset = (mn % 8) * 16 + (mn // 8) * stride + kb % 16 + (kb // 16) * leading
        else:
            offset = (mn % 8) * width + (mn // 8) * stride + kb
    elif nbytes != 2:
        raise ValueError("only 16-bit operands may be MN-major (trans 1)")
    elif width == 16:  # MN-major, no swizzle: 8 MN-elements contiguous, SBO to the next 8, k rows 16 B, LBO
        offset = (mn % 8) * 2 + (mn // 8) * stride + (k % 8) * 16 + (k // 8) * leading
    else:  # MN-major: width bytes of MN contiguous, LBO to the next; k rows `width` bytes apart, SBO per 8
        per_row = width // 2
        offset = (mn % per_row) * 2 + (mn // per_row) * leading + (k % 8) * width + (k // 8) * stride
    absolute = start + offset
    if width > 16 and start % 16:
        raise ValueError("a descriptor's start address must be 16-byte aligned")
    found = _swizzled(absolute, width)
    found.flags.writeable = False  # cached: shared by every thread that issues this descriptor
    return found


class _Op:
    __slots__ = ("acc", "first", "values", "reads")

    def __init__(self, acc, first, values, reads):
        self.acc, self.first, self.values, self.reads = acc, first, values, reads


@functools.lru_cache(maxsize=1024)
def _fragment_rows_cols(thread_id, n):
    lane, warp = thread_id % 32, thread_id % 128 // 32
    g, q = lane // 4, lane % 4
    rows = np.array([16 * warp + g, 16 * warp + g + 8])
    cols = (8 * np.arange(n // 8)[:, None] + 2 * q + np.arange(2)[None, :]).reshape(-1)  # 8j + 2q + c
    return rows, cols


def _e4m3_table():
    """The 256 values of float8 e4m3 (OCP's E4M3FN: bias 7, no infinities, S.1111.111 NaN), by bit pattern."""
    bits = np.arange(256)
    exponent, mantissa = bits >> 3 & 15, bits & 7
    magnitude = np.where(exponent == 0, mantissa / 8 * 2.0**-6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    magnitude[(bits & 0x7F) == 0x7F] = np.nan
    return np.where(bits & 0x80, -magnitude, magnitude)


E4M3 = _e4m3_table()
# mma_async's kinds: (bytes of an element, its value as float64 from its bits (uint32))
KINDS = {
    "f16": (2, lambda bits: bits.astype(np.uint16).view(np.float16).astype(np.float64)),
    "bf16": (2, lambda bits: (bits << np.uint32(16)).view(np.float32).astype(np.float64)),
    "tf32": (4, lambda bits: (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)),  # low 13 ignored
    "e4m3": (1, lambda bits: E4M3[bits]),
}
TRUNCATING = ("e4m3",)  # the kinds whose tensor core adds as truncating_sum does (below); the others add exactly
ALIGNED_FRACTION_BITS = 13  # what an e4m3 instruction keeps of each term, below the largest term's leading bit


def truncating_sum(terms):
    """Sums over the last axis as Hopper's e4m3 wgmma adds one instruction's 32 products and the incoming accumulator
    (fp8gemm's spec; DeepSeek-V3's report): every term aligned to the exponent of the largest, the bits below
    ALIGNED_FRACTION_BITS fraction bits of that exponent cut toward zero, then added. The aligned terms are multiples
    of one power of two below 2^(e + 1), so their float64 sum is exact and so is its float32 (at most 33 terms: 20
    significant bits). With 13 bits this model gives the errors an H100 measured: 1.33e-3 and 2.05e-3 for fp8gemm v01
    at 4096^3 and 8192^3 (the model 1.32e-3 and 2.05e-3 on 32 x 64 of those inner products), 2.2e-4 for
    test_wgmma's one e4m3 stage (the model 2.3e-4); with 14 bits it gives half of each."""
    largest = np.abs(terms).max(axis=-1, keepdims=True)
    exponent = np.frexp(largest)[1] - 1  # the largest term's leading bit is 2^exponent (frexp's mantissa: [0.5, 1))
    quantum = np.ldexp(1.0, exponent - ALIGNED_FRACTION_BITS)
    return (np.trunc(terms / quantum) * quantum).sum(axis=-1)


class _Products:
    """An instruction's operands where its kind truncates: each thread sums its own terms (truncating_sum needs the
    incoming accumulator, which is the thread's), so the warpgroup shares the operands, not their sums."""

    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b  # 64 x K and N x K, float64

    def terms(self, rows, cols):
        """products[r, c, k] = A[rows[r], k] B[k, cols[c]]: exact in float64 (e4m3 has 4 significant bits)."""
        return self.a[rows][:, None, :] * self.b[cols][None, :, :]


def fence(acc, count):
    _thread()[1].fenced = True


def mma_async(acc, first, n, desc_a, desc_b, accumulate, trans_a, trans_b, kind):
    t, state = _thread()
    if not state.fenced:
        raise RuntimeError("wgmma.mma_async without a wgmma.fence since this thread's last wait_group")
    if kind not in KINDS:
        raise ValueError(f"wgmma.mma_async: kind is one of {', '.join(KINDS)}, not {kind!r}")
    nbytes, decode = KINDS[kind]
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma m64nNk{32 // nbytes} takes N = 8, 16, ..., 256, not {n}")
    if nbytes != 2 and (trans_a or trans_b):
        raise ValueError(f"wgmma .{kind} reads A and B K-major only: trans_a and trans_b must be 0")
    space = _space()
    issued = (int(first), int(n), int(desc_a), int(desc_b), bool(accumulate), int(trans_a), int(trans_b), kind)
    key = (t.thread_id // 128, state.issued)  # the warpgroup's n-th MMA
    state.issued += 1
    with space.cond:
        seen = space.issued.get(key)
        if seen is None:  # the first thread of the warpgroup here reads the operands for all of them
            a_at = operand_addresses(int(desc_a), 64, int(trans_a), nbytes)
            b_at = operand_addresses(int(desc_b), int(n), int(trans_b), nbytes)
            a_bits = space.read_bits(a_at, "wgmma operand A", nbytes)
            b_bits = space.read_bits(b_at, "wgmma operand B", nbytes)
            a, b = decode(a_bits), decode(b_bits)
            product = _Products(a, b) if kind in TRUNCATING else a @ b.T  # D = A B, 64 x N, in float64
            seen = space.issued[key] = (issued, ((a_at, a_bits, nbytes), (b_at, b_bits, nbytes)), product)
    if seen[0] != issued:
        raise RuntimeError(
            f"thread {t.thread_id}: its warpgroup issued wgmma {seen[0]}, this thread {issued} "
            "(.sync.aligned: the same instruction, descriptors included, in every thread)"
        )
    _retire_later(state, acc, first, n, seen[2], seen[1], accumulate, t.thread_id)


def _retire_later(state, acc, first, n, product, reads, accumulate, thread_id):
    """This thread's fragment of ``product`` (64 x N, float64), added to acc[first ..] (or not: ``accumulate``) when
    the wait_group that retires it comes; ``reads`` are the shared bytes it read, checked unchanged then."""
    rows, cols = _fragment_rows_cols(thread_id % 128, int(n))
    count = n // 2
    shadow = state.shadow.get(id(acc))
    old = (shadow if shadow is not None else np.asarray(acc, dtype=np.float32))[first : first + count]
    incoming = old.astype(np.float64) if accumulate else np.zeros(count)
    # acc[4 j + 2 h + c] is D[row h, column 8 j + 2 q + c]: this thread's [h, 2 j + c], moved to [j, h, c]
    if isinstance(product, _Products):  # each term cut as the tensor core aligns it, the accumulator one of them
        terms = product.terms(rows, cols)  # 2 x N/4 x K
        terms = terms.reshape(2, n // 8, 2, -1).transpose(1, 0, 2, 3).reshape(count, -1)
        values = truncating_sum(np.concatenate([incoming[:, None], terms], axis=1)).astype(np.float32)
    else:  # float64 sums of exact products, rounded once to float32
        fragment = product[rows][:, cols].reshape(2, n // 8, 2).transpose(1, 0, 2).reshape(-1)
        values = (fragment + incoming).astype(np.float32)
    if shadow is None:
        shadow = state.shadow[id(acc)] = np.array(acc, dtype=np.float32)
    shadow[first : first + count] = values
    state.open.append(_Op(acc, first, values, reads))


class _RegisterA:
    """One register-A wgmma of a warpgroup while its threads bring their words of A."""

    __slots__ = ("issued", "a_bits", "arrived", "product", "reads")

    def __init__(self, issued):
        self.issued, self.arrived, self.product, self.reads = issued, 0, None, None
        self.a_bits = np.zeros((64, 16), np.uint32)  # A's 16-bit elements, as the threads' words hold them


def mma_async_a_regs(acc, first, n, a0, a1, a2, a3, desc_b, accumulate, trans_b, kind):
    """``mma_async`` with A (64 x 16) from the warpgroup's registers: this thread's four words hold
    A[16 w + g + 8 h, 8 c + 2 q + e] in word 2 c + h, element e (e = 0 the low half)."""
    t, state = _thread()
    if not state.fenced:
        raise RuntimeError("wgmma.mma_async without a wgmma.fence since this thread's last wait_group")
    if kind not in ("f16", "bf16"):
        raise ValueError(f"mma_async_a_regs: kind is one of f16, bf16 (A as pairs of 16-bit elements), not {kind!r}")
    nbytes, decode = KINDS[kind]
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma m64nNk16 takes N = 8, 16, ..., 256, not {n}")
    space = _space()
    issued = ("a in registers", int(first), int(n), int(desc_b), bool(accumulate), int(trans_b), kind)
    key = (t.thread_id // 128, state.issued)  # the warpgroup's n-th MMA, whichever form
    state.issued += 1
    lane, warp = t.thread_id % 32, t.thread_id % 128 // 32
    row, col = 16 * warp + lane // 4, 2 * (lane % 4)
    with space.cond:
        record = space.issued.get(key)
        if record is None:
            record = space.issued[key] = _RegisterA(issued)
        if not isinstance(record, _RegisterA) or record.issued != issued:
            seen = record.issued if isinstance(record, _RegisterA) else record[0]
            raise RuntimeError(
                f"thread {t.thread_id}: its warpgroup issued wgmma {seen}, this thread {issued} "
                "(.sync.aligned: the same instruction, descriptors included, in every thread)"
            )
        for word, (dr, dc) in zip((a0, a1, a2, a3), ((0, 0), (8, 0), (0, 8), (8, 8)), strict=True):
            word = int(word)
            record.a_bits[row + dr, col + dc] = word & 0xFFFF
            record.a_bits[row + dr, col + dc + 1] = word >> 16
        record.arrived += 1
        if record.arrived == 128:  # the last thread's words are in: the product, for all of them
            b_at = operand_addresses(int(desc_b), int(n), int(trans_b), nbytes)
            b_bits = space.read_bits(b_at, "wgmma operand B", nbytes)
            record.product = decode(record.a_bits) @ decode(b_bits).T  # D = A B, 64 x N, in float64
            record.reads = ((b_at, b_bits, nbytes),)
            space.cond.notify_all()
        patience = warps.Patience(record.arrived)
        while record.product is None:  # .sync: the warpgroup's other threads are on their way to this MMA
            if t.abort:
                raise RuntimeError("wgmma.mma_async: aborted, another thread raised")
            if patience.exhausted(record.arrived):
                raise RuntimeError(
                    f"wgmma.mma_async with A in registers: {record.arrived} of the warpgroup's 128 threads issued "
                    f"it in {warps.DEADLOCK_S:.0f} s (a thread of the warpgroup skipped it?)"
                )
            space.cond.wait(POLL_S)
    _retire_later(state, acc, first, n, record.product, record.reads, accumulate, t.thread_id)


def commit_group():
    _, state = _thread()
    state.groups.append(state.open)
    state.open = []


def wait_group(n, acc, count):
    _, state = _thread()
    space = _space()
    while len(state.groups) > int(n):
        for op in state.groups.pop(0):
            for at, bits, nbytes in op.reads:
                if not np.array_equal(space.read_bits(at, "wgmma operand", nbytes), bits):
                    raise RuntimeError(
                        "shared memory that a wgmma.mma_async reads changed before the wait_group that "
                        "retires it (a tile overwritten while the tensor cores may still read it)"
                    )
            op.acc[op.first : op.first + len(op.values)] = op.values
    if not state.open and not state.groups:
        state.shadow.clear()
    state.fenced = False


def fence_proxy_async():
    pass


def fence_mbarrier_init():
    pass


def setmaxnreg_inc(n):
    pass


def setmaxnreg_dec(n):
    pass


# -- mbarriers ---------------------------------------------------------------------------------------------
def mbarrier_init(bars, i, count):
    space = _space()
    address = space.address(bars, i)
    with space.cond:
        space.barriers[address] = _Barrier(int(count))


def _arrive(bars, i, tx):
    space = _space()
    address = space.address(bars, i)
    with space.cond:
        space.complete(space.barrier(address), 1, int(tx))


def mbarrier_arrive(bars, i):
    _arrive(bars, i, 0)


def mbarrier_arrive_expect_tx(bars, i, nbytes):
    _arrive(bars, i, nbytes)


def cp_async_mbarrier_arrive(bars, i):
    _arrive(bars, i, 0)  # the simulator's cp.async has copied already


def _phase_done(bar, parity):
    return bar.phase % 2 != int(parity)  # the phase of that parity is the one before the current


def mbarrier_try_wait(bars, i, parity):
    space = _space()
    address = space.address(bars, i)
    with space.cond:
        bar = space.barrier(address)
        if not _phase_done(bar, parity):
            space.cond.wait(POLL_S / 50)  # try_wait itself waits a while before it answers no
        return np.uint32(_phase_done(bar, parity))


def mbarrier_wait(bars, i, parity):
    me = threading.current_thread()
    space = _space()
    address = space.address(bars, i)
    with space.cond:
        bar = space.barrier(address)
        patience = warps.Patience((bar.phase, bar.pending, bar.tx))  # an arrival or bytes landing: progress
        while not _phase_done(bar, parity):
            if me.abort:
                raise RuntimeError("mbarrier wait: aborted, another thread raised")
            if patience.exhausted((bar.phase, bar.pending, bar.tx)):
                raise RuntimeError(
                    f"mbarrier at {address:#x}: waited {warps.DEADLOCK_S:.0f} s with no arrival for the phase "
                    f"of parity {parity} ({bar.pending} arrivals and {bar.tx} bytes missing; deadlock?)"
                )
            space.cond.wait(POLL_S)


# -- named barriers (bar.sync, bar.arrive) ------------------------------------------------------------------
class _NamedBarrier:
    __slots__ = ("count", "arrived", "generation")

    def __init__(self, count):
        self.count, self.arrived, self.generation = count, 0, 0


def _named_arrive(barrier, count, wait):
    """An arrival at named barrier ``barrier`` of ``count`` threads; ``wait``: until the count is reached."""
    me = threading.current_thread()
    space = _space()
    if not 0 < int(barrier) < 16 or int(count) % 32:
        raise ValueError(
            f"bar.sync/bar.arrive: barrier 1-15 (0 is syncthreads') and whole warps, got {barrier}, {count}"
        )
    with space.cond:
        named = space.barriers.setdefault(("named", int(barrier)), _NamedBarrier(int(count)))
        if named.count != int(count):
            raise RuntimeError(f"named barrier {barrier}: {count} threads here, {named.count} in its other arrivals")
        generation = named.generation
        named.arrived += 1
        if named.arrived == named.count:
            named.arrived, named.generation = 0, generation + 1
            space.cond.notify_all()
            return
        patience = warps.Patience(named.arrived)
        while wait and named.generation == generation:
            if me.abort:
                raise RuntimeError("bar.sync: aborted, another thread raised")
            if patience.exhausted(named.arrived):
                raise RuntimeError(
                    f"bar.sync {barrier}, {count}: {named.arrived} threads arrived in {warps.DEADLOCK_S:.0f} s "
                    "(deadlock?)"
                )
            space.cond.wait(POLL_S)


def named_barrier_sync(barrier, count):
    _named_arrive(barrier, count, True)


def named_barrier_arrive(barrier, count):
    _named_arrive(barrier, count, False)


# -- TMA ---------------------------------------------------------------------------------------------------
_TENSOR_MAPS = {}
_map_keys = itertools.count(1)


def tensor_map(matrix, rows, cols, box_rows, box_cols):
    """The simulator's tensor map: 16 words, the first a key to the matrix and the box ``tma_load_2d`` reads."""
    key = next(_map_keys)
    if len(_TENSOR_MAPS) >= 256:  # a map lives as long as a few launches need it
        del _TENSOR_MAPS[next(iter(_TENSOR_MAPS))]
    _TENSOR_MAPS[key] = (matrix, rows, cols, box_rows, box_cols)
    words = np.zeros(TENSOR_MAP_WORDS, np.uint64)
    words[0] = key  # the simulator's map: a key to the matrix and the box
    return words


def tensormap_acquire(tmap):
    pass


def tma_load_2d(tile, index, tmap, col, row, bars, b):
    matrix, rows, cols, box_rows, box_cols = _TENSOR_MAPS[int(tmap[0])]
    matrix = np.asarray(getattr(matrix, "_ary", matrix)).reshape(rows, cols)  # a device array wraps a NumPy one
    space = _space()
    dst = space.address(tile, index)
    if dst % TILE_ALIGN:
        raise ValueError(f"a 128B-swizzled TMA box must land on a 1024-byte boundary, not {dst:#x}")
    row, col = int(row), int(col)
    box = np.zeros((box_rows, box_cols), matrix.dtype)  # TMA fills what lies outside the matrix with zeros
    inside = matrix[max(row, 0) : row + box_rows, max(col, 0) : col + box_cols]
    box[max(-row, 0) : max(-row, 0) + inside.shape[0], max(-col, 0) : max(-col, 0) + inside.shape[1]] = inside
    size = box.itemsize
    r = np.arange(box_rows)[:, None]
    c = np.arange(box_cols)[None, :]
    at = _swizzled(dst + r * (box_cols * size) + c * size, 128)  # an element never straddles a 16-byte chunk
    space.write_bytes(at.reshape(-1), box.reshape(-1, 1).view(np.uint8), "tma_load_2d")
    bar_address = space.address(bars, b)
    with space.cond:
        space.complete(space.barrier(bar_address), 0, -box.nbytes)
