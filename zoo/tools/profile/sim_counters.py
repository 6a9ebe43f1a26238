"""Memory and divergence counters in numba's CUDA simulator: what Nsight Compute counts, without a GPU.

Inside ``with counting() as session:`` every kernel launch is watched and, when it
returns, summarised in ``session.launches`` (one :class:`LaunchCounts` each):

* global memory: warp requests and the 32-byte sectors they touch (coalescing:
  4 sectors for 32 lanes reading consecutive floats, 32 for 32 lanes reading a
  column);
* shared memory: warp requests and the wavefronts the 32 banks of 4 bytes need
  to serve them; a bank conflict is a wavefront beyond the ideal;
* atomics, apart from loads and stores;
* branches: where the lanes of one warp went to different source lines.

How an access is counted
------------------------
Every array a kernel sees in the simulator is a NumPy array behind numba's
``FakeCUDAArray``; inside the context its ``__getitem__`` and ``__setitem__`` are
swapped for ones that record (block, warp, lane, array, byte offset in the
allocation, width, load or store), and ``cuda.shared.array`` hands out its array
wrapped the same way. Outside the context nothing is swapped: ordinary runs pay
nothing. One warp *request* is one source instruction executed once by the
lanes of a warp: the accesses of one warp with the same array, direction,
source line and per-thread occurrence count of that line (the n-th time each
lane executed it). The simulator runs lanes as threads, not in lockstep, so the
occurrence count is what pairs the lanes' accesses.

zoo's wide accesses count as one access each, as the GPU executes them: a
``load_float4``/``store_float4`` (and the int and word forms) is one 16-byte
(or 4-byte) access, ``cp_async16`` one 16-byte load and one 16-byte store,
``ldmatrix`` one 16-byte row address per lane (the row that lane supplies), an
atomic one atomic access. What ``zoo.device.wgmma`` emulates is not counted:
wgmma reads shared memory through descriptors and TMA copies tiles, neither
through the load/store unit whose requests these counters (and ncu's) are.
The requests counted are the source's: where the compiler merges accesses, ncu
sees fewer, wider ones (sgemm v03 reads a row of its A tile with one LDS.128 a
four k, not four loads: 1.2 shared wavefronts a request on an H100 where this
counts 1.0; its every other figure agrees at the same size).

The GPU's rules
---------------
* Sectors: the distinct 32-byte pieces of the allocation a request touches
  (allocations start 256-byte aligned on the GPU; offsets here are from the
  start of the allocation).
* Banks: word w (4 bytes) of a shared array lives in bank w % 32, counted from
  the array's start (numba places each shared array on an aligned boundary).
  A request is served in phases: the whole warp for accesses of up to 4 bytes,
  each half-warp for 8- and 16-byte accesses. A phase takes as many wavefronts
  as the largest number of *distinct* words any one bank holds among its lanes
  (lanes reading the same word share it: a broadcast). A request's ideal is its
  phases' distinct words at 32 a wavefront (one a bank), at least one a phase;
  its bank conflicts are its wavefronts beyond that. Half-warps for 16-byte
  accesses, not the quarter-warps of older documentation: on an H100, ncu counts
  5 and 3 wavefronts a request for sgemm v06's and v07's 128-bit shared loads,
  which half-warps give and quarter-warps (6 and 4) do not.
* Divergence (``divergence=True``, the default): every line each simulated
  thread executes in the kernel and its device functions is traced
  (``sys.settrace``, only inside the context). A *divergent branch* is an
  executed line (its n-th execution) after which the lanes of a warp that
  executed it went on to different lines, or some ended the kernel and others
  did not. Threads per instruction is the lanes that executed a line's n-th
  execution, averaged over the warp's line executions (Nsight Compute's
  ``smsp__thread_inst_executed_per_inst_executed``, with source lines for
  instructions).

``keep_trace=True`` also keeps every access (``LaunchCounts.trace``) for the
mapping pictures (``zoo.tools.mapping``).
"""

import contextlib
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zoo.device import memory, mma, wgmma
from zoo.simulator import hopper

SECTOR = 32  # bytes of a global memory sector
BANKS = 32  # shared memory banks, 4 bytes wide
BANK_WIDTH = 4
WARP = 32
PHASE_LANES = {1: 32, 2: 32, 4: 32, 8: 16, 16: 16}  # lanes served together, by bytes per lane (see wavefronts_of)
LINE_BITS = 16  # a traced line is id(code) << LINE_BITS | line number (one int64: ids are below 2^47)
EXIT_LINE = -1  # the "next line" of a lane that finished the kernel

_session = None  # the Session in progress, or None


# -- per request arithmetic ---------------------------------------------------------------
def sectors_of(accesses):
    """Distinct 32-byte sectors touched by [(lane, offset, width), ...]."""
    found = set()
    for _, offset, width in accesses:
        found.update(range(offset // SECTOR, (offset + width - 1) // SECTOR + 1))
    return len(found)


def wavefronts_of(accesses):
    """(wavefronts, ideal) of one shared-memory request [(lane, offset, width), ...] (module docstring)."""
    width = max(w for _, _, w in accesses)
    per_phase = PHASE_LANES.get(width, 8)
    phases = {}
    for lane, offset, w in accesses:
        banks = phases.setdefault(lane // per_phase, {})
        for word in range(offset // BANK_WIDTH, (offset + w - 1) // BANK_WIDTH + 1):
            banks.setdefault(word % BANKS, set()).add(word)
    wavefronts = sum(max(len(words) for words in banks.values()) for banks in phases.values())
    # the ideal: a phase's distinct words, 32 (one per bank) a wavefront; a 16-byte phase of 16 lanes needs two
    ideal = sum(-(-len(set().union(*banks.values())) // BANKS) for banks in phases.values())
    return wavefronts, ideal


# -- what one launch counted --------------------------------------------------------------
@dataclass
class Traffic:
    """Requests of one kind (global loads, shared stores, ...) and what they cost."""

    requests: int = 0
    sectors: int = 0  # global and atomics: 32-byte sectors touched
    bytes: int = 0  # global and atomics: distinct bytes the lanes asked for
    wavefronts: int = 0  # shared: wavefronts the banks needed
    ideal: int = 0  # shared: wavefronts without conflicts

    def add(self, other):
        self.requests += other.requests
        self.sectors += other.sectors
        self.bytes += other.bytes
        self.wavefronts += other.wavefronts
        self.ideal += other.ideal

    @property
    def sectors_per_request(self):
        return self.sectors / self.requests if self.requests else None

    @property
    def bytes_per_sector(self):
        """Useful bytes of each sector moved: 32 when every byte of every sector was asked for."""
        return self.bytes / self.sectors if self.sectors else None

    @property
    def wavefronts_per_request(self):
        return self.wavefronts / self.requests if self.requests else None

    @property
    def conflicts(self):
        return self.wavefronts - self.ideal

    @property
    def conflicts_per_request(self):
        return self.conflicts / self.requests if self.requests else None


KINDS = ("global_load", "global_store", "global_atomic", "shared_load", "shared_store", "shared_atomic")
_KIND = {
    ("global", "ld"): "global_load",
    ("global", "st"): "global_store",
    ("global", "atom"): "global_atomic",
    ("shared", "ld"): "shared_load",
    ("shared", "st"): "shared_store",
    ("shared", "atom"): "shared_atomic",
}


@dataclass
class ArrayInfo:
    """An allocation a launch touched: its name in the kernel, memory space, dtype and shape."""

    name: str
    space: str
    dtype: np.dtype
    shape: tuple


@dataclass
class LaunchCounts:
    """What one kernel launch did to memory and to its warps' control flow."""

    kernel: str
    grid: tuple
    block: tuple
    traffic: dict = field(default_factory=lambda: {k: Traffic() for k in KINDS})
    divergent_branches: int = 0
    warp_lines: int = 0  # line executions counted once per warp
    thread_lines: int = 0  # line executions counted once per lane
    traced: bool = False  # whether lines were traced (divergence counted)
    arrays: dict = field(default_factory=dict)  # allocation key -> ArrayInfo
    trace: list = None  # with keep_trace: (block, warp, lane, array key, op, offset, width, request)

    @property
    def threads_per_instruction(self):
        return self.thread_lines / self.warp_lines if self.warp_lines else None

    def add(self, other):
        for k in KINDS:
            self.traffic[k].add(other.traffic[k])
        self.divergent_branches += other.divergent_branches
        self.warp_lines += other.warp_lines
        self.thread_lines += other.thread_lines
        self.traced |= other.traced

    def __getattr__(self, name):  # counts.global_load etc.
        traffic = self.__dict__.get("traffic")
        if traffic is not None and name in traffic:
            return traffic[name]
        raise AttributeError(name)


def total(launches, kernel=None):
    """One LaunchCounts summing ``launches`` (those of ``kernel`` when named)."""
    picked = [c for c in launches if kernel is None or c.kernel == kernel]
    out = LaunchCounts(kernel or "+".join(dict.fromkeys(c.kernel for c in picked)), (0, 0, 0), (0, 0, 0))
    for c in picked:
        out.add(c)
    return out


def busiest(launches):
    """The launch with the most memory requests (a multi-pass step's first, largest pass)."""
    return max(launches, key=lambda c: sum(t.requests for t in c.traffic.values()), default=None)


# -- the recording side --------------------------------------------------------------------
class _Launch:
    """A launch being recorded."""

    def __init__(self, code, grid, block, keep_trace, traced):
        self.code = code  # the kernel function's code: its frame returning is a lane's exit
        self.counts = LaunchCounts(code.co_name, tuple(grid), tuple(block), traced=traced)
        self.grid = tuple(grid)
        self.accesses = []  # (block, warp, lane, site, occurrence, array key, op, offset, width)
        self.keep_trace = keep_trace
        self.views = {}  # id(ndarray) -> (ndarray, allocation key, offset of its first element)
        self.names = {}  # allocation key -> ArrayInfo
        self.lanes = []  # (thread id, blockIdx, [line, line, ...]) of each lane that finished, with lines traced

    def block_index(self, block_idx):
        gx, gy, _ = self.grid
        return block_idx.x + gx * (block_idx.y + gy * block_idx.z)

    def finish(self):
        counts = self.counts
        requests = {}
        for block, warp, lane, site, occurrence, key, op, offset, width in self.accesses:
            requests.setdefault((block, warp, site, occurrence, key, op), []).append((lane, offset, width))
        order = {}
        for request_key, lanes in requests.items():
            block, warp, _, _, key, op = request_key
            info = self.names[key]
            t = counts.traffic[_KIND[info.space, op]]
            t.requests += 1
            if info.space == "shared" and op != "atom":
                w, ideal = wavefronts_of(lanes)
                t.wavefronts += w
                t.ideal += ideal
            else:
                t.sectors += sectors_of(lanes)
                t.bytes += len({b for _, offset, width in lanes for b in range(offset, offset + width)})
            order[request_key] = len(order)
        by_warp = {}
        for tid, block_idx, lines in self.lanes:
            by_warp.setdefault((self.block_index(block_idx), tid // WARP), []).append(lines)
        for lanes in by_warp.values():
            divergent, warp_lines, thread_lines = _branches(lanes)
            counts.divergent_branches += divergent
            counts.warp_lines += warp_lines
            counts.thread_lines += thread_lines
        counts.arrays = dict(self.names)
        if self.keep_trace:
            counts.trace = [
                (block, warp, lane, key, op, offset, width, order[block, warp, site, occurrence, key, op])
                for block, warp, lane, site, occurrence, key, op, offset, width in self.accesses
            ]
        return counts


def _branches(lanes):
    """(divergent branches, line executions of the warp, line executions of its lanes) from the lines
    each lane of one warp executed, in order (see the module docstring)."""
    line, occurrence, following = [], [], []
    for lines in lanes:
        if not lines:
            continue
        ids = np.array(lines, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        ranked = ids[order]
        first = np.r_[True, ranked[1:] != ranked[:-1]]  # where each line's run of executions starts
        position = np.arange(ids.size)
        n = np.empty_like(ids)
        n[order] = position - np.maximum.accumulate(np.where(first, position, 0))  # the n-th execution, from 0
        line.append(ids)
        occurrence.append(n)
        following.append(np.r_[ids[1:], EXIT_LINE])
    if not line:
        return 0, 0, 0
    executed = np.stack([np.concatenate(line), np.concatenate(occurrence)], axis=1)
    branches = np.unique(np.concatenate([executed, np.concatenate(following)[:, None]], axis=1), axis=0)
    distinct, nexts = np.unique(branches[:, :2], axis=0, return_counts=True)
    return int(np.count_nonzero(nexts > 1)), len(distinct), len(executed)


class Session:
    """What ``counting()`` yields: the launches counted so far, in order."""

    def __init__(self, divergence, keep_trace):
        self.divergence = divergence
        self.keep_trace = keep_trace
        self.launches = []
        self.current = None
        # ids of the code objects of the kernels and device functions launched: a code object's own hash
        # is computed from its whole contents on every lookup, far too slow for one lookup per traced line
        self.codes = set()
        self.kept = []  # those code objects, kept alive while their ids are in use
        self.shared = set()  # allocation keys of shared arrays


def _files():
    """The files whose frames are the simulator's machinery or zoo's emulation of an instruction, not kernel code."""
    from numba.cuda.simulator import kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    files = (kernelapi, devicearray, memory, mma, wgmma, hopper)
    return {module.__file__ for module in files} | {__file__}


def _wide_ops():
    """{id of a code object: bytes one call accesses per array (None: an atomic, 'rows': ldmatrix, 'skip': not a
    load or store of the LSU: wgmma reads shared memory through descriptors, TMA copies by the tensor map)}."""
    import types

    from numba.cuda.simulator import kernelapi

    wide = {}
    for fn, width in (
        (memory.load_float4, 16),
        (memory.store_float4, 16),
        (memory.load_word, 4),
        (memory.store_word, 4),
        (memory.load_words4, 16),
        (memory.store_words4, 16),
        (mma.load_half2, 4),
        (mma.load_half8, 16),
        (mma.store_half8, 16),
        (mma.cp_async16, 16),
        (mma._ldmatrix, "rows"),
    ):
        wide[id(fn.__code__)] = width
    for name, fn in vars(kernelapi.FakeCUDAAtomic).items():
        if callable(fn) and not name.startswith("__"):
            wide[id(fn.__code__)] = None
    for module in (wgmma, hopper):  # wgmma's helpers and the simulator's model of its instructions
        for fn in vars(module).values():
            if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:
                wide[id(fn.__code__)] = "skip"
    return wide  # keyed by id: these functions live as long as their modules


_FILES = None
_WIDE = None


def _ndarray(obj):
    """The NumPy array behind a kernel's view of an array (numba's fake device arrays, or NumPy's own)."""
    while not isinstance(obj, np.ndarray):
        inner = obj.__dict__.get("_item") or obj.__dict__.get("_ary")
        if inner is None:
            return None
        obj = inner
    return obj


def _allocation(ary):
    """(allocation key, byte offset of ary's first element in it): the key is the root buffer's address."""
    root = ary
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = root.__array_interface__["data"][0]
    return start, ary.__array_interface__["data"][0] - start


def _offset(ary, index):
    """Byte offset of element ``index`` from ary's first element, or None when index is no single element."""
    shape, strides = ary.shape, ary.strides
    if isinstance(index, tuple):
        if len(index) != len(shape):
            return None
    else:
        if len(shape) != 1:
            return None
        index = (index,)
    offset = 0
    for i, n, s in zip(index, shape, strides, strict=True):
        if not isinstance(i, (int, np.integer)):
            return None
        i = int(i)
        offset += (i + n if i < 0 else i) * s
    return offset


def _record(ary, index, op):
    """Record one element access of a simulated thread (called only inside ``counting``)."""
    launch = _session.current if _session is not None else None
    thread = threading.current_thread()
    tid = getattr(thread, "thread_id", None)
    if launch is None or tid is None:
        return  # host code, or no launch being watched
    frame = sys._getframe(2)  # the code that indexed the array (0: here, 1: the swapped __getitem__)
    wide = None
    while frame.f_code.co_filename in _FILES:
        if id(frame.f_code) in _WIDE:
            wide = frame
        frame = frame.f_back
    width = ary.itemsize
    if wide is not None:  # one access of a wide instruction: count the instruction once per lane
        spec = _WIDE[id(wide.f_code)]
        if spec == "skip":
            return
        state = thread.__dict__.get("_zoo_wide")
        if state is None or state[0] is not wide:
            state = thread._zoo_wide = (wide, set())
        if spec == "rows":  # ldmatrix: this lane supplies one 16-byte row address; what it reads is others'
            if state[1]:
                return
            state[1].add("rows")
            ary = _ndarray(wide.f_locals["tile"]).reshape(-1)
            index, op, width = int(wide.f_locals["i"]), "ld", 16
        else:
            if spec is None:  # an atomic: its read and its write are one access
                op, spec = "atom", ary.itemsize
            seen = (_view(launch, ary, frame)[1], op)
            if seen in state[1]:
                return
            state[1].add(seen)
            width = spec
    element = _offset(ary, index)
    if element is None:
        return
    _, key, start = _view(launch, ary, frame)
    offset = start + element
    if width > ary.itemsize:
        offset -= offset % width  # a wide access starts on its own alignment
    site = (id(frame.f_code), frame.f_lineno)
    counters = thread.__dict__.get("_zoo_occurrences")
    if counters is None:
        counters = thread._zoo_occurrences = {}
    count_key = (site, key, op)
    occurrence = counters[count_key] = counters.get(count_key, 0) + 1
    launch.accesses.append(
        (launch.block_index(thread.blockIdx), tid // WARP, tid % WARP, site, occurrence, key, op, offset, width)
    )


def _view(launch, ary, frame):
    """(ary, allocation key, byte offset of ary's first element in the allocation), cached per array."""
    view = launch.views.get(id(ary))
    if view is None or view[0] is not ary:
        key, start = _allocation(ary)
        view = launch.views[id(ary)] = (ary, key, start)
        if key not in launch.names:
            launch.names[key] = _describe(ary, key, frame)
    return view


def _describe(ary, key, frame):
    """ArrayInfo of a newly seen allocation, named after the kernel variable that holds it."""
    space = "shared" if key in _session.shared else "global"
    root = ary
    while isinstance(root.base, np.ndarray):
        root = root.base
    names = []
    f = frame
    while f is not None and not names:  # the innermost kernel or device function frame that holds it
        if id(f.f_code) in _session.codes:
            for var, value in f.f_locals.items():
                try:
                    found = _ndarray(value)
                except Exception:  # a local that is no array
                    found = None
                if found is not None and _allocation(found)[0] == key:
                    names.append(var)  # every name it goes by there (sgemm passes out as C too)
        f = f.f_back
    return ArrayInfo(" = ".join(names) or f"{space}@{key:x}", space, root.dtype, root.shape)


def _lane_tracer(thread):
    """The line tracer of one simulated thread. It only appends the line (the code object's id and the line
    number in one integer); the list goes to the launch when the kernel's frame returns."""
    lines = []
    append = lines.append

    def trace(frame, event, arg):
        if event == "line":
            append(id(frame.f_code) << LINE_BITS | frame.f_lineno)
        elif event == "return" and _session is not None and frame.f_code is _session.current.code:
            _session.current.lanes.append((thread.thread_id, thread.blockIdx, lines))
        return trace

    return trace


def _trace_calls(frame, event, arg):
    """The global tracer of simulated threads: trace only kernel and device-function frames."""
    if event == "call" and _session is not None and id(frame.f_code) in _session.codes:
        thread = threading.current_thread()
        if getattr(thread, "thread_id", None) is None or _session.current is None:
            return None
        tracer = thread.__dict__.get("_zoo_tracer")
        if tracer is None:
            tracer = thread._zoo_tracer = _lane_tracer(thread)
        return tracer
    return None


# -- the context --------------------------------------------------------------------------
@contextlib.contextmanager
def counting(memory=True, divergence=True, keep_trace=False):
    """Count memory requests and divergent branches of every kernel launched inside; yields a Session.

    Only one counting context at a time; numba.cuda must be the simulator. Everything it
    swaps in is swapped back on exit. ``count`` below is faster when both are wanted."""
    global _session, _FILES, _WIDE
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    if _session is not None:
        raise RuntimeError("zoo.tools.profile.sim_counters.counting() is already active")
    if _FILES is None:
        _FILES, _WIDE = _files(), _wide_ops()
    session = Session(divergence, keep_trace)
    fake = devicearray.FakeCUDAArray
    saved = {
        (fake, "__getitem__"): fake.__getitem__,
        (fake, "__setitem__"): fake.__setitem__,
        (kernelapi.FakeCUDAShared, "array"): kernelapi.FakeCUDAShared.array,
        (kernel.FakeCUDAKernel, "__call__"): kernel.FakeCUDAKernel.__call__,
    }
    get, put, shared_array, call = saved.values()
    swapped = dict(saved) if memory else {(kernel.FakeCUDAKernel, "__call__"): call}

    def getitem(self, index):
        value = get(self, index)
        if type(value) is not fake:
            _record(self._ary, index, "ld")
        return value

    def setitem(self, index, value):
        put(self, index, value)
        _record(self._ary, index, "st")

    def counted_shared_array(self, shape, dtype, alignment=None):
        # zoo's lock-protected version keys the array by its caller's line: the kernel is 2 frames up
        ary = shared_array(self, shape, dtype, alignment, caller_depth=2)
        session.shared.add(_allocation(ary)[0])
        return devicearray.FakeWithinKernelCUDAArray(fake(ary))

    def counted_call(self, *args):
        if id(self.fn.__code__) not in session.codes:
            session.kept.append(self.fn.__code__)
            session.codes.add(id(self.fn.__code__))
        if self._device or kernel._kernel_context is not None:  # a device function, inside a kernel
            return call(self, *args)
        from numba.cuda.errors import normalize_kernel_dimensions

        grid, block = normalize_kernel_dimensions(self.grid_dim, self.block_dim)
        session.current = _Launch(self.fn.__code__, grid, block, session.keep_trace, session.divergence)
        try:
            result = call(self, *args)
            session.launches.append(session.current.finish())
        finally:
            session.current = None
        return result

    previous_trace = threading.gettrace()
    if memory:
        fake.__getitem__, fake.__setitem__ = getitem, setitem
        kernelapi.FakeCUDAShared.array = counted_shared_array
    kernel.FakeCUDAKernel.__call__ = counted_call
    if divergence:
        threading.settrace(_trace_calls)
    _session = session
    try:
        yield session
    finally:
        _session = None
        threading.settrace(previous_trace)
        for (cls, name), value in swapped.items():
            setattr(cls, name, value)


def count(run, memory=True, divergence=True, keep_trace=False):
    """Call ``run()`` with counting on; returns the LaunchCounts of the kernels it launched, in order.

    With both memory and divergence it calls ``run`` twice, once for each: Python 3.11 runs every
    line of a traced thread on its slow path, and the memory bookkeeping is Python too, so one run
    that does both takes about twice as long as the two runs (sgemm v06 at 128x128x16: 9 s, 5 s)."""
    if not (memory and divergence):
        with counting(memory, divergence, keep_trace) as session:
            run()
        return session.launches
    with counting(memory=True, divergence=False, keep_trace=keep_trace) as accesses:
        run()
    with counting(memory=False, divergence=True) as lines:
        run()
    if [c.kernel for c in accesses.launches] != [c.kernel for c in lines.launches]:
        raise RuntimeError("the two counting runs launched different kernels: is the step deterministic?")
    for counts, traced in zip(accesses.launches, lines.launches, strict=True):
        counts.divergent_branches = traced.divergent_branches
        counts.warp_lines, counts.thread_lines, counts.traced = traced.warp_lines, traced.thread_lines, True
    return accesses.launches


def relative_path(code):
    """A code object's file, relative to the repository when inside it (for messages)."""
    path = Path(code.co_filename)
    try:
        return path.relative_to(Path(__file__).resolve().parents[3]).as_posix()
    except ValueError:
        return path.name
