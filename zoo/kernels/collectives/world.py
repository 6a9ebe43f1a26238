"""The ranks of an all-reduce: their devices, streams, events and buffers, and the copies between them.

What every step shares lives here, so that each step file shows its algorithm (what is
copied where, on which stream, after which event) and nothing else, as the pipeline
family's ``stages`` does for its steps.

Rank r lives on device r % D, D the GPUs present: one rank a GPU when there are as many
GPUs as ranks, several ranks sharing one otherwise (on a one-GPU machine, ranks 0, 1, 2
are three buffers on that GPU and their "peer" copies are device-to-device copies: the
same code and the same dependencies, run for real, without the links). In numba's
simulator, and in an offline compile (``zoo show --ptx``), every rank is on the one
device, streams run in order, and a copy between ranks is a plain array copy.

A ``Group`` of R ranks is made once per R and kept (``group(R)``); it holds:

* ``main[r]``: rank r's own stream. An all-reduce is ordered after the work queued
  there before it (``fork``) and the work queued there after it sees its result
  (``join``), the contract of NCCL's stream argument. Placement, collection and, in the
  training-step sweep, the compute run on it.
* named streams (``streams(name)``), events (``events(name, count)``) and device buffers
  (``buffers(name, n)``, ``buffer(name, rank, n)``), made on first use, reused, and
  replaced when the length changes: a thousand calls hold what one does.
* ``copy``: cudaMemcpyPeerAsync (through CuPy's runtime) between two ranks' buffers. Peer
  access is enabled, where the GPUs allow it, when the group is made (``peers`` says
  which pairs have it). Without it the copy is still right: the driver stages it
  through host memory, at the bus's speed.

``release()`` synchronizes and drops every group, buffer, stream and event; a call that
raises synchronizes its group's streams before the error leaves it, so no copy or kernel
still in flight touches a buffer afterwards.
"""

import atexit
import contextlib
import os

import numpy as np
from numba import cuda

from zoo import SIMULATOR
from zoo import device as zoo_device
from zoo.device.memory import address

ENV = "ZOO_RANKS"  # ranks the family's inputs have (default: one a GPU; 3 in the simulator), sharing GPUs if need be
SIMULATED_RANKS = 3  # ranks on the simulator's one device, and in an offline compile


def _real():
    """True on a real device (not the simulator, not the offline compile of ``zoo show --ptx``)."""
    return not SIMULATOR and not zoo_device.OFFLINE


def device_count():
    """GPUs the ranks are spread over: those present, or 1 in the simulator and offline."""
    return len(cuda.gpus) if _real() else 1


def ranks():
    """How many ranks the family's inputs have: ZOO_RANKS if set (ranks beyond the GPU count share GPUs, rank r on
    device r % D: on one GPU, ``ZOO_RANKS=2 python -m zoo profile collectives`` profiles the exchange's kernels),
    else one a GPU."""
    asked = os.environ.get(ENV, "").strip()
    if asked:
        if not asked.isdigit() or int(asked) < 1:
            raise ValueError(f"{ENV} must be a whole number of ranks >= 1, got {asked!r}")
        return int(asked)
    return device_count() if _real() else SIMULATED_RANKS


_PEERED = set()  # (device, peer) pairs whose access this process enabled


def enable_peer_access(devices):
    """{(a, b): whether device a reads and writes device b's memory directly}, for distinct devices."""
    found = {}
    if not _real():
        return found
    import cupy
    from cupy.cuda import runtime

    for a in devices:
        for b in devices:
            if a == b:
                continue
            found[(a, b)] = bool(runtime.deviceCanAccessPeer(a, b))
            if found[(a, b)] and (a, b) not in _PEERED:
                with cupy.cuda.Device(a):  # access is enabled for the current device
                    try:
                        runtime.deviceEnablePeerAccess(b)
                    except runtime.CUDARuntimeError as e:
                        if "AlreadyEnabled" not in str(e):  # enabled earlier in this process: fine
                            raise
                _PEERED.add((a, b))
    return found


class Group:
    """R ranks, rank r on device r % D: streams, events and buffers per rank, and copies between them."""

    def __init__(self, ranks):
        if int(ranks) < 1:
            raise ValueError(f"a group has at least one rank, got {ranks}")
        self.ranks = int(ranks)
        self.devices = tuple(r % device_count() for r in range(self.ranks))
        self.peers = enable_peer_access(sorted(set(self.devices)))
        self._streams, self._events, self._buffers = {}, {}, {}

    def __repr__(self):
        return f"<Group of {self.ranks} ranks on devices {self.devices}>"

    @property
    def main(self):
        """[rank r's own stream]: what an all-reduce is ordered after, and what is ordered after it."""
        return self.streams("main")

    @property
    def forked(self):
        """[event of rank r]: recorded on main[r] by ``fork``, the point an all-reduce starts from on that rank."""
        return [row[0] for row in self.events("fork", 1)]

    # -- where work runs ---------------------------------------------------------------------------------
    def on(self, rank):
        """Make rank's device current (a kernel launches on the current device): ``with group.on(r):``."""
        if not _real():
            return contextlib.nullcontext()
        return cuda.gpus[self.devices[rank]]

    def streams(self, name):
        """[stream of rank r] for this name: created on each rank's device on first use, then kept."""
        found = self._streams.get(name)
        if found is None:
            found = []
            for r in range(self.ranks):
                with self.on(r):
                    found.append(self._new_stream())
            self._streams[name] = found
        return found

    def events(self, name, count):
        """[rank][i] for i < count: events on each rank's device (no timing: cheaper to record and wait on)."""
        found = self._events.setdefault(name, [[] for _ in range(self.ranks)])
        for r in range(self.ranks):
            if len(found[r]) < count:
                with self.on(r):
                    found[r].extend(self._new_event() for _ in range(count - len(found[r])))
        return found

    def buffer(self, name, rank, n):
        """A float32 device array of n (at least 1) elements on rank's device, kept under (name, rank) while n stays."""
        key, n = (name, rank), max(int(n), 1)
        found = self._buffers.get(key)
        if found is None or found.size != n:
            self._buffers.pop(key, None)  # the old one is freed once nothing holds it
            with self.on(rank):
                found = self._buffers[key] = self._new_buffer(n)
        return found

    def buffers(self, name, n):
        """[rank r's buffer of n floats] under this name."""
        return [self.buffer(name, r, n) for r in range(self.ranks)]

    def buffers_at_least(self, name, n):
        """[rank r's buffer of at least n floats] under this name: kept until a call needs more, never shrunk (work
        queued earlier may still be using it)."""
        found = [self._buffers.get((name, r)) for r in range(self.ranks)]
        if any(b is None or b.size < n for b in found):
            return self.buffers(name, n)
        return found

    def drop(self, *names):
        """Forget the buffers (device and pinned) kept under these names: they are freed once nothing holds them."""
        for key in [k for k in self._buffers if k[0] in names or (k[0] == "pinned" and k[1] in names)]:
            del self._buffers[key]

    def pinned(self, name, shape):
        """A page-locked float32 host array of this shape, kept under name while the shape stays."""
        key = ("pinned", name)
        found = self._buffers.get(key)
        if found is None or found.shape != tuple(shape):
            self._buffers.pop(key, None)
            found = self._buffers[key] = cuda.pinned_array(tuple(shape), np.float32)
        return found

    # what the kept objects are made of (a test's recording group makes others: tests/kernels/test_collectives.py)
    def _new_stream(self):
        return cuda.stream()

    def _new_event(self):
        return cuda.event() if SIMULATOR else cuda.event(timing=False)  # the simulator's events take no arguments

    def _new_buffer(self, n):
        return cuda.device_array(n, np.float32)

    # -- ordering with the main streams --------------------------------------------------------------------
    def fork(self, *stream_lists):
        """Order the given per-rank streams after the work queued so far on each rank's main stream.

        ``forked[r]`` marks that point: another rank's stream that reads rank r's buffer waits on it."""
        forked, main = self.forked, self.main
        for r in range(self.ranks):
            forked[r].record(main[r])
            for streams in stream_lists:
                forked[r].wait(streams[r])

    def join(self, *stream_lists):
        """Order the work queued on every main stream from now on after everything queued on the given streams.

        On every rank's streams, not only its own: another rank's stream may still be reading this rank's
        buffer (an all-gather's last copy out of it), and the next thing main does may be to overwrite it."""
        count = len(stream_lists)
        ends = [row[:count] for row in self.events("join", count)]  # ends[r][i]: stream_lists[i][r] is done
        for r in range(self.ranks):
            for end, streams in zip(ends[r], stream_lists, strict=True):
                end.record(streams[r])
        for main in self.main:
            for row in ends:
                for end in row:
                    end.wait(main)

    def synchronize(self):
        """Wait for every stream of the group (the host blocks)."""
        for streams in self._streams.values():
            for s in streams:
                s.synchronize()

    # -- copies ----------------------------------------------------------------------------------------------
    def copy(self, count, dst, src, stream):
        """Copy ``count`` float32 from ``src`` to ``dst``, each a (rank, device array, first element), on stream.

        cudaMemcpyPeerAsync: the copy engine moves the bytes over the link between the two GPUs (NVLink, or
        PCIe), directly when peer access is on. No host wait, no view of the arrays (a numba slice costs
        more host time than the copy's issue)."""
        (dst_rank, dst_array, dst_start), (src_rank, src_array, src_start) = dst, src
        if count <= 0:
            return
        if not _real():  # the simulator and the offline compile: every rank on one device
            dst_array[dst_start : dst_start + count].copy_to_device(src_array[src_start : src_start + count])
            return
        from cupy.cuda import runtime

        runtime.memcpyPeerAsync(
            address(dst_array) + 4 * int(dst_start),
            self.devices[dst_rank],
            address(src_array) + 4 * int(src_start),
            self.devices[src_rank],
            4 * int(count),
            handle(stream),
        )

    def place(self, x, name="data", start=0, stop=None):
        """Copy rows x[r, start:stop] (host) into rank r's buffer ``name`` on its main stream; returns the buffers."""
        bufs = self.buffers(name, x.shape[1])
        stop = x.shape[1] if stop is None else stop
        for r in range(self.ranks):
            with self.on(r):
                bufs[r][start:stop].copy_to_device(x[r, start:stop], stream=self.main[r])
        return bufs

    def collect(self, bufs, out):
        """Copy each rank's buffer into out[r] (host) on its main stream, then wait for every main stream."""
        for r in range(self.ranks):
            with self.on(r):
                bufs[r].copy_to_host(out[r], stream=self.main[r])
        for s in self.main:
            s.synchronize()
        return out

    def release(self):
        """Wait for the group's streams, then drop its buffers, events and streams (made again if used again)."""
        self.synchronize()
        self._buffers.clear()
        self._events.clear()
        self._streams.clear()


def handle(stream):
    """The driver handle of a numba stream, as an int."""
    found = getattr(stream, "handle", 0)
    return int(getattr(found, "value", found) or 0)


_GROUPS = {}


def group(count):
    """The group of ``count`` ranks, made once and kept (per allocator: an offline compile gets its own)."""
    key = (int(count), cuda.device_array)
    found = _GROUPS.get(key)
    if found is None:
        _release_at_exit()
        found = _GROUPS[key] = Group(count)
    return found


def release():
    """Release every group (streams synchronized, then buffers, events and streams dropped)."""
    while _GROUPS:
        _, g = _GROUPS.popitem()
        g.release()


_exit_registered = False


def _release_at_exit():
    """Register ``_at_exit`` once, when the first group is made: a process that only imports this module
    (``zoo list``) must not touch the GPUs at exit."""
    global _exit_registered
    if not _exit_registered:
        atexit.register(_at_exit)
        _exit_registered = True


def _at_exit():
    """Release every group, then free what numba still holds on each GPU with that GPU's context current.

    numba frees a GPU's memory, streams and modules in batches, with whatever context is current. At exit
    the batch still pending for a second GPU was freed under the first GPU's context, and the driver
    crashed the process (``zoo run collectives`` on two H100s: segmentation fault or abort in numba's
    ``module_unload``, after the run had saved its figures). Freed here, GPU by GPU, it exits cleanly."""
    release()
    if not _real():
        return
    for gpu in cuda.gpus:
        with gpu:
            cuda.synchronize()
            cuda.current_context().deallocations.clear()


# -- host arrays in, host arrays out ------------------------------------------------------------------------------
def check_run(x, out):
    """TypeError or ValueError before anything is enqueued: run() is also called past the registry's checks."""
    if not (isinstance(x, np.ndarray) and isinstance(out, np.ndarray)):
        raise TypeError("run() takes NumPy arrays: x, a stack of each rank's buffer (ranks, n), and out")
    if x.dtype != np.float32 or x.ndim != 2 or x.size == 0 or not x.flags.c_contiguous:
        raise ValueError(f"x must be a non-empty C-contiguous float32 (ranks, n) stack, got {x.dtype}{x.shape}")
    if out.dtype != np.float32 or out.shape != x.shape or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError(
            f"out must be a writeable C-contiguous float32 array of shape {x.shape} (every rank's copy of the "
            f"sum), got {out.dtype}{out.shape}"
        )


def run(x, out, allreduce, **params):
    """out[r] = the sum over ranks of x (host arrays): place each row on its rank's device, ``allreduce(group,
    buffers, **params)``, copy every rank's result back. Returns out once it is written."""
    check_run(x, out)
    g = group(x.shape[0])
    try:
        bufs = g.place(x)
        allreduce(g, bufs, **params)
        return g.collect(bufs, out)
    except BaseException:
        g.synchronize()  # nothing still in flight may touch a buffer once the error has left
        raise
