"""What a step did in the simulator: memory accesses by warp, bank conflicts, atomics, shuffles, launches.

The simulator runs each CUDA thread as a Python thread, so it can watch every
access a kernel makes. ``observing()`` patches numba's simulator for the length of
one call and records, per thread, its global accesses (address and size), its
cp.async copies from global memory, its shared-memory accesses, its atomics,
shuffles and barriers, and every launch (grid, block, dynamic shared bytes,
stream). ``figures`` turns that into numbers a profiler would show: sectors per
warp request (coalescing), pieces of memory per warp-wide cp.async, ways per
shared access (bank conflicts), global loads per output element (reuse), and so on.

The k-th access of each lane of a warp is taken to be one warp-wide instruction,
as on the GPU when the lanes run the same code; lanes that diverge make that an
estimate. Only ``zoo.exercise`` uses it, in a process of its own.
"""

import threading
from collections import defaultdict
from contextlib import contextmanager

SECTOR = 32  # bytes: the unit global memory moves
BANKS = 32  # shared memory banks, 4 bytes wide

# figure: what it is, in a learner's words
FIGURES = {
    "launches": "kernel launches",
    "threads": "threads launched, all launches",
    "streams": "streams used (besides the default)",
    "global_loads": "elements loaded from global memory",
    "global_stores": "elements stored to global memory",
    "global_loads_per_output": "global loads per output element",
    "load_sectors_per_request": "sectors per warp load (4: one 128-byte line)",
    "copy_pieces_per_request": "pieces of global memory per warp-wide cp.async (1: the lanes' bytes in one piece)",
    "store_sectors_per_request": "sectors per warp store (4: one 128-byte line)",
    "shared_accesses": "shared-memory loads and stores",
    "shared_ways": "ways per shared access (1: no bank conflict)",
    "static_shared_bytes": "static shared bytes per block",
    "dynamic_shared_bytes": "dynamic shared bytes per block",
    "global_atomics": "atomics on global memory",
    "shared_atomics": "atomics on shared memory",
    "shuffles": "warp shuffles",
    "barriers_per_thread": "syncthreads per thread",
}

_current = None  # the Observation being recorded, or None
_installed = False


def describe(figure, extra=None):
    """A figure's name in words (the family's own FIGURES hold (fn, text) or fn with a docstring)."""
    if figure in FIGURES:
        return FIGURES[figure]
    fn = (extra or {}).get(figure)
    doc = (getattr(fn, "__doc__", None) or "").strip()
    return doc.splitlines()[0].rstrip(".") if doc else figure.replace("_", " ")


class Observation:
    """Everything one call did, in the simulator."""

    def __init__(self):
        self.launches = []  # dicts: kernel, grid, block, threads, dynamic_shared, stream
        self.global_records = []  # (launch, block, thread, k, store, address, itemsize, allocation's address)
        self.shared_records = []  # (launch, block, thread, k, array, word)
        self.copy_records = []  # cp.async from global memory: (launch, block, thread, k, address, bytes)
        self.static_shared = {}  # (launch, array id) -> bytes
        self.global_atomics = 0
        self.shared_atomics = 0
        self.shuffles = 0
        self.barriers = 0
        self.copy_streams = set()
        self.launch_streams = set()
        self.roles = []  # (start address, end address, name, itemsize)

    # -- while a kernel runs ------------------------------------------------------------------------
    def _counter(self, t, name):
        k = getattr(t, name, 0)
        setattr(t, name, k + 1)
        return k

    def global_access(self, t, ary, idx, store):
        offset = _offset(ary, idx)
        if offset is None:
            return
        k = self._counter(t, "_zoo_k_store" if store else "_zoo_k_load")
        address = ary.__array_interface__["data"][0] + offset
        self.global_records.append(
            (len(self.launches), tuple(t.blockIdx), t.thread_id, k, store, address, ary.itemsize, _root(ary))
        )

    def async_copy(self, t, src, j, size):
        """A cp.async of ``size`` bytes from element ``j`` of ``src`` (flat), by thread ``t``."""
        host = getattr(src, "_ary", src)
        k = self._counter(t, "_zoo_k_copy")
        address = host.__array_interface__["data"][0] + int(j) * host.itemsize
        self.copy_records.append((len(self.launches), tuple(t.blockIdx), t.thread_id, k, address, size))

    def shared_access(self, t, ary, idx):
        offset = _offset(ary, idx)
        if offset is None:
            return
        k = self._counter(t, "_zoo_k_shared")
        address = ary.__array_interface__["data"][0] + offset
        self.shared_records.append(
            (len(self.launches), tuple(t.blockIdx), t.thread_id, k, ary._zoo_key, (address - ary._zoo_key) // 4)
        )

    # -- after ------------------------------------------------------------------------------------
    def role_of(self, address):
        """(role name, element index) of a global address, or (None, None)."""
        for start, end, name, itemsize in self.roles:
            if start <= address < end:
                return name, (address - start) // itemsize
        return None, None

    def warp_requests(self, store=None):
        """{(launch, block, warp, k, store): [(lane, address, itemsize, allocation)]}: the warp-wide accesses."""
        groups = defaultdict(list)
        for launch, block, tid, k, is_store, address, itemsize, root in self.global_records:
            if store is None or is_store == store:
                groups[(launch, block, tid // 32, k, is_store)].append((tid % 32, address, itemsize, root))
        return groups


def _root(ary):
    """The address of the allocation an array views: sectors count from there (cudaMalloc aligns to 256 bytes;
    NumPy, which holds the simulator's device memory, does not)."""
    while isinstance(getattr(ary, "base", None), type(ary)):
        ary = ary.base
    return ary.__array_interface__["data"][0]


def _offset(ary, idx):
    """Byte offset of ary[idx] for an integer index or tuple of them (None for slices and the like)."""
    try:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != ary.ndim:
            return None
        offset = 0
        for i, n, stride in zip(idx, ary.shape, ary.strides, strict=True):
            i = int(i)
            if i < 0:
                i += n
            if not 0 <= i < n:
                return None  # out of bounds: numpy raises in a moment, the learner hears of it then
            offset += i * stride
        return offset
    except (TypeError, ValueError):
        return None


def _block_thread():
    from numba.cuda.simulator.kernel import BlockThread

    t = threading.current_thread()
    return t if isinstance(t, BlockThread) and not getattr(t, "_zoo_atomic", False) else None


def install():
    """Patch numba's simulator so that ``observing()`` can record (idempotent; does nothing until then)."""
    global _installed
    if _installed:
        return
    import numpy as np
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    fake = devicearray.FakeCUDAArray
    get, put = fake.__getitem__, fake.__setitem__

    def getitem(self, idx):
        if _current is not None and (t := _block_thread()) is not None:
            _current.global_access(t, self._ary, idx, store=False)
        return get(self, idx)

    def setitem(self, idx, value):
        if _current is not None and (t := _block_thread()) is not None:
            _current.global_access(t, self._ary, idx, store=True)
        return put(self, idx, value)

    fake.__getitem__, fake.__setitem__ = getitem, setitem

    from zoo.device import mma  # cp.async copies without indexing the source: recorded where the simulator copies

    if mma.SIMULATOR:
        copy_bytes = mma._cp_async

        def cp_async(tile, i, src, j, size):
            if _current is not None and (t := _block_thread()) is not None:
                _current.async_copy(t, src, j, size)
            return copy_bytes(tile, i, src, j, size)

        mma._cp_async = cp_async

    for name in ("copy_to_device", "copy_to_host"):
        original = getattr(fake, name)

        def copy(self, *args, _original=original, **kwargs):
            stream = kwargs.get("stream", args[1] if len(args) > 1 else 0)
            if _current is not None and stream:
                _current.copy_streams.add(id(stream))
            return _original(self, *args, **kwargs)

        setattr(fake, name, copy)

    class Shared(np.ndarray):
        """A shared array that reports each element access of a simulated thread."""

        def __array_finalize__(self, obj):
            self._zoo_key = getattr(obj, "_zoo_key", 0)  # the address of the allocation it views

        def __getitem__(self, idx):
            if _current is not None and (t := _block_thread()) is not None:
                _current.shared_access(t, self, idx)
            return np.ndarray.__getitem__(self, idx)

        def __setitem__(self, idx, value):
            if _current is not None and (t := _block_thread()) is not None:
                _current.shared_access(t, self, idx)
            return np.ndarray.__setitem__(self, idx, value)

    shared_array = kernelapi.FakeCUDAShared.array  # zoo.simulator's locked lookup, installed when zoo was imported

    def observed_shared(self, shape, dtype, alignment=None, caller_depth=1):
        # the lookup keys the array by the kernel's line: one frame further up than whoever called this wrapper
        a = shared_array(self, shape, dtype, alignment, caller_depth=caller_depth + 1)
        if _current is None or not isinstance(a, np.ndarray):
            return a
        view = a.view(Shared)
        base = a.__array_interface__["data"][0]
        view._zoo_key = base
        if shape != 0:
            _current.static_shared[(len(_current.launches), base)] = a.nbytes
        return view

    kernelapi.FakeCUDAShared.array = observed_shared

    for name in ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin", "cas"):
        original = getattr(kernelapi.FakeCUDAAtomic, name, None)
        if original is None:
            continue

        def atomic(self, array, *args, _original=original):
            t = threading.current_thread()
            if _current is not None:
                if isinstance(array, np.ndarray):
                    _current.shared_atomics += 1
                else:
                    _current.global_atomics += 1
            t._zoo_atomic = True
            try:
                return _original(self, array, *args)
            finally:
                t._zoo_atomic = False

        setattr(kernelapi.FakeCUDAAtomic, name, atomic)

    for name in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"):
        original = getattr(kernelapi.FakeCUDAModule, name, None)
        if original is None:
            continue

        def shuffle(self, *args, _original=original):
            if _current is not None:
                _current.shuffles += 1
            return _original(self, *args)

        setattr(kernelapi.FakeCUDAModule, name, shuffle)

    syncthreads = kernel.BlockThread.syncthreads

    def counted_syncthreads(self):
        if _current is not None:
            _current.barriers += 1
        return syncthreads(self)

    kernel.BlockThread.syncthreads = counted_syncthreads

    configure, call = kernel.FakeCUDAKernel.__getitem__, kernel.FakeCUDAKernel.__call__

    def observed_configure(self, configuration):
        self._zoo_stream = configuration[2] if len(configuration) > 2 else 0
        return configure(self, configuration)

    def observed_call(self, *args):
        if _current is not None and not self._device and kernel._get_kernel_context() is None:
            grid, block = self.grid_dim, self.block_dim
            stream = getattr(self, "_zoo_stream", 0)
            if stream:
                _current.launch_streams.add(id(stream))
            _current.launches.append(
                {
                    "kernel": getattr(self.fn, "__name__", "?"),
                    "grid": tuple(grid),
                    "block": tuple(block),
                    "threads": int(np.prod(grid)) * int(np.prod(block)),
                    "dynamic_shared": int(self.dynshared_size or 0),
                }
            )
        return call(self, *args)

    kernel.FakeCUDAKernel.__getitem__ = observed_configure
    kernel.FakeCUDAKernel.__call__ = observed_call
    _installed = True


@contextmanager
def observing(roles=()):
    """Record what the simulator runs inside the block; yields the Observation.

    ``roles``: (name, array) pairs (the inputs and the output as the kernel gets them), so
    that a global address can be told as 'x[17]'."""
    import numpy as np

    global _current
    install()
    obs = Observation()
    for name, a in roles:
        if a is None:
            continue
        host = getattr(a, "_ary", a)
        if isinstance(host, np.ndarray):
            start = host.__array_interface__["data"][0]
            obs.roles.append((start, start + host.nbytes, name, host.itemsize))
    _current = obs
    try:
        yield obs
    finally:
        _current = None


def _mean(values):
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def figures(obs, output_elements, extra=None):
    """{figure: value} of an observation (and the family's own figures, ``extra``: {name: fn(obs)})."""
    loads = [r for r in obs.global_records if not r[4]]
    stores = [r for r in obs.global_records if r[4]]
    requests = obs.warp_requests()

    def sectors(store):
        return _mean(
            len({(root, (address - root) // SECTOR) for _, address, _, root in group})
            for key, group in requests.items()
            if key[4] == store
        )

    copies = defaultdict(list)  # a warp's k-th cp.async: its lanes' (address, bytes)
    for launch, block, tid, k, address, size in obs.copy_records:
        copies[(launch, block, tid // 32, k)].append((address, size))

    def pieces(spans):  # runs of bytes with no gap between them
        ends = sorted((a, a + n) for a, n in spans)
        return 1 + sum(1 for (_, end), (start, _) in zip(ends, ends[1:], strict=False) if start > end)

    shared = defaultdict(set)
    for launch, block, tid, k, array, word in obs.shared_records:
        shared[(launch, block, tid // 32, k)].add((array, word))
    ways = []
    for words in shared.values():
        per_bank = defaultdict(int)
        for _, word in words:
            per_bank[word % BANKS] += 1
        ways.append(max(per_bank.values()))
    threads = sum(launch["threads"] for launch in obs.launches)
    found = {
        "launches": len(obs.launches),
        "threads": threads,
        "streams": len(obs.launch_streams | obs.copy_streams),
        "global_loads": len(loads),
        "global_stores": len(stores),
        "global_loads_per_output": len(loads) / max(output_elements, 1),
        "load_sectors_per_request": sectors(False),
        "store_sectors_per_request": sectors(True),
        "copy_pieces_per_request": _mean(pieces(spans) for spans in copies.values()),
        "shared_accesses": len(obs.shared_records),
        "shared_ways": _mean(ways),
        "static_shared_bytes": max(_per_launch(obs.static_shared).values(), default=0),
        "dynamic_shared_bytes": max((launch["dynamic_shared"] for launch in obs.launches), default=0),
        "global_atomics": obs.global_atomics,
        "shared_atomics": obs.shared_atomics,
        "shuffles": obs.shuffles,
        "barriers_per_thread": obs.barriers / max(threads, 1),
    }
    for name, fn in (extra or {}).items():
        found[name] = float(fn(obs))
    return found


def _per_launch(static_shared):
    """{launch: bytes of static shared memory its blocks declared}."""
    totals = defaultdict(int)
    for (launch, _), nbytes in static_shared.items():
        totals[launch] += nbytes
    return totals
