"""Warp-level intrinsics for numba's CUDA simulator: ``install`` (``zoo.simulator.threads``) adds them.

numba's simulator (NUMBA_ENABLE_CUDASIM=1) runs every CUDA thread as a Python
thread, one block at a time, but has none of the warp intrinsics. ``install()``
adds them to the simulator's fake ``cuda`` module, so kernels written against
numba's real API run unchanged:

    shfl_sync  shfl_up_sync  shfl_down_sync  shfl_xor_sync  syncwarp
    ballot_sync  all_sync  any_sync  eq_sync  match_any_sync  match_all_sync
    activemask  lanemask_lt

The model
---------
Lane = linear thread index in the block % 32, warp = index // 32, as on the GPU.
Each block gets one ``_Warp`` per warp: a lock with a condition variable, the
mask of *live* lanes (lanes that exist - a partial last warp has fewer than 32 -
and have not exited), and the *rendezvous* in progress, keyed by the mask the
lanes passed.

A collective call is one rendezvous: each lane deposits its value and waits
until every live lane named in the mask has deposited; then the rendezvous
closes (it leaves the pending table, so the next call with that mask starts a
fresh one) and each lane computes its own result from all deposited values.
Exited lanes are not waited for: a finishing thread, normally or by exception,
leaves its warp's live mask and wakes the waiters. Different masks in one warp
(lanes 0-15 with 0x0000FFFF, lanes 16-31 with 0xFFFF0000) are separate
rendezvous and proceed concurrently.

Choices where CUDA says "undefined" or the simulator cannot see the hardware
----------------------------------------------------------------------------
- A lane must name itself in ``mask`` (CUDA requires it); here it is an error.
- Lanes that meet in one rendezvous must call the same family of intrinsic
  (shuffle, vote, match, syncwarp); mixing them is an error here.
- A shuffle whose source lane did not take part (not in the mask, exited, or
  beyond a partial warp) returns the caller's own value. CUDA: undefined (an
  H200 returned 0 there); do not rely on either.
- ``activemask()`` returns the warp's live lanes. The simulator cannot see
  divergence, so lanes that are alive but in another branch still count.
- Shuffle offsets and lane numbers use their low 5 bits, as PTX's ``shfl.sync``
  does (bval = b[4:0]): ``shfl_down_sync(m, v, 33)`` acts like delta 1, and
  ``shfl_xor_sync`` always reads a lane inside the warp.
- Masks are returned as unsigned 32-bit Python ints. On the GPU numba types
  ``ballot_sync`` and ``match_*_sync`` as int32 (lane 31 makes them negative)
  and ``all_sync``/``any_sync``/``eq_sync`` as booleans; here they give 1 or 0.
  Store masks in uint32 arrays to get the same bits on both.

No hangs: a waiting lane polls its thread's ``abort`` flag (set when another
thread of the block raised). When every live lane of a warp waits in a
rendezvous that cannot complete, the warp is deadlocked and all of its waiters
raise at once; a wait that lasts ``DEADLOCK_S`` with no lane arriving (e.g. a lane stuck in
``syncthreads`` while its warp waits for it) raises too.
"""

import threading
import time

import numpy as np

FULL_MASK = 0xFFFFFFFF  # every lane of the warp (zoo.device.warp's name for it)

POLL_S = 0.05  # how often a waiting lane looks at the abort flag

# Longest wait in one collective with no lane arriving before giving up (a true deadlock of the whole warp is caught
# at once, above; this is for a lane stuck elsewhere, at a barrier say). 300 s, not 60: on a loaded 2-CPU machine, a
# 1024-thread scan block whose process has one CPU waited over 60 s for a shuffle's last lanes and failed a test.
DEADLOCK_S = 300.0


class Patience:
    """A waiter's deadline that starts over whenever what it waits on moves: ``exhausted(progress)`` is True once
    DEADLOCK_S have passed with ``progress`` (lanes arrived; an mbarrier's phase, arrivals and bytes) unchanged.
    A slow block keeps making progress and is never timed out; a stuck one stops, and is."""

    def __init__(self, progress):
        self.progress, self.until = progress, time.monotonic() + DEADLOCK_S

    def exhausted(self, progress):
        now = time.monotonic()
        if progress != self.progress:  # something arrived: slow, not stuck; the wait starts over
            self.progress, self.until = progress, now + DEADLOCK_S
        return now > self.until


def _lanes(mask):
    """Lane numbers whose bit is set in mask, ascending."""
    return [lane for lane in range(32) if mask >> lane & 1]


class _Rendezvous:
    """One collective call in progress: who has arrived and what they brought."""

    def __init__(self, kind):
        self.kind = kind
        self.arrived = 0  # bitmask of lanes that have deposited
        self.values = [None] * 32
        self.closed = False


class _Warp:
    """Shared state of one warp of the block being simulated."""

    def __init__(self, name, nlanes):
        self.name = name
        self.cond = threading.Condition()
        self.live = (1 << nlanes) - 1
        self.pending = {}  # mask -> _Rendezvous
        self.deadlock = None  # error message once detected

    def exchange(self, lane, mask, kind, value):
        """Deposit value for lane, wait for the others named in mask, return the
        closed rendezvous (its ``arrived`` and ``values`` are final)."""
        mask = int(mask) & FULL_MASK
        if not mask >> lane & 1:
            raise RuntimeError(
                f"{kind} in {self.name}, lane {lane}: mask 0x{mask:08x} does not "
                "name the calling lane (CUDA requires it)"
            )
        me = threading.current_thread()
        with self.cond:
            rv = self.pending.get(mask)
            if rv is None:
                rv = self.pending[mask] = _Rendezvous(kind)
            elif rv.kind != kind:
                raise RuntimeError(
                    f"{self.name}, lane {lane}: {kind} meets {rv.kind} with mask "
                    f"0x{mask:08x}; lanes {_lanes(rv.arrived)} are in {rv.kind}"
                )
            rv.arrived |= 1 << lane
            rv.values[lane] = value
            self._settle()
            patience = Patience(rv.arrived)
            while not rv.closed:
                if self.deadlock:
                    raise RuntimeError(self.deadlock)
                if me.abort:
                    raise RuntimeError(f"{kind} in {self.name}: aborted, another thread raised")
                if patience.exhausted(rv.arrived):
                    raise RuntimeError(
                        f"{kind} in {self.name}, mask 0x{mask:08x}: waited {DEADLOCK_S:.0f} s with no lane arriving "
                        f"for lanes {_lanes(mask & self.live & ~rv.arrived)} (deadlock?)"
                    )
                self.cond.wait(POLL_S)
        return rv

    def leave(self, lane):
        """A thread finished: stop waiting for it."""
        with self.cond:
            self.live &= ~(1 << lane)
            self._settle()

    def _settle(self):
        """Close each rendezvous that every live lane of its mask has reached,
        detect deadlock, wake the waiters. Called with the lock held."""
        for mask, rv in list(self.pending.items()):
            if mask & self.live & ~rv.arrived == 0:
                rv.closed = True
                del self.pending[mask]
        waiting = 0
        for rv in self.pending.values():
            waiting |= rv.arrived
        if self.pending and self.live & ~waiting == 0:
            # Every live lane waits and none of the rendezvous can close.
            stuck = "; ".join(
                f"{rv.kind} mask 0x{m:08x}: lanes {_lanes(rv.arrived & self.live)} wait "
                f"for {_lanes(m & self.live & ~rv.arrived)}"
                for m, rv in self.pending.items()
            )
            self.deadlock = f"warp deadlock in {self.name}: {stuck}"
        self.cond.notify_all()


def _here():
    """The calling simulated thread's warp state and lane."""
    t = threading.current_thread()
    return t._manager._zoo_warps[t.thread_id // 32], t.thread_id % 32


def _shuffle(mask, value, src_of):
    """Common part of the four shuffles: src_of(lane) is the PTX source lane j,
    or None when j is out of range (then the caller keeps its own value)."""
    warp, lane = _here()
    rv = warp.exchange(lane, mask, "shuffle", value)
    src = src_of(lane)
    if src is None or not rv.arrived >> src & 1:
        return value  # out of range, or the source lane did not take part
    return rv.values[src]


def _vote(mask, predicate):
    """Predicates (as bools) of the lanes that took part, by lane."""
    warp, lane = _here()
    rv = warp.exchange(lane, mask, "vote", bool(predicate))
    return {i: rv.values[i] for i in _lanes(rv.arrived)}


def _match_key(value):
    """What match_*_sync compares: the bits of floats (so -0.0 != 0.0 and equal
    NaNs match, as in PTX), the value of integers."""
    a = np.asarray(value)
    if a.dtype.kind == "f":
        return int(a.view(f"u{a.itemsize}"))
    return int(value)


def _match(mask, value):
    """Mask of participating lanes holding the caller's value, and all lanes' masks."""
    warp, lane = _here()
    rv = warp.exchange(lane, mask, "match", _match_key(value))
    same = 0
    for i in _lanes(rv.arrived):
        if rv.values[i] == rv.values[lane]:
            same |= 1 << i
    return same, rv.arrived


def shfl_sync(self, mask, value, src_lane):
    src = int(src_lane) & 31
    return _shuffle(mask, value, lambda lane: src)


def shfl_up_sync(self, mask, value, delta):
    d = int(delta) & 31
    return _shuffle(mask, value, lambda lane: lane - d if lane - d >= 0 else None)


def shfl_down_sync(self, mask, value, delta):
    d = int(delta) & 31
    return _shuffle(mask, value, lambda lane: lane + d if lane + d <= 31 else None)


def shfl_xor_sync(self, mask, value, lane_mask):
    m = int(lane_mask) & 31
    return _shuffle(mask, value, lambda lane: lane ^ m)


def syncwarp(self, mask=FULL_MASK):
    warp, lane = _here()
    warp.exchange(lane, mask, "syncwarp", None)


def ballot_sync(self, mask, predicate):
    return sum(1 << i for i, p in _vote(mask, predicate).items() if p)


def all_sync(self, mask, predicate):
    return int(all(_vote(mask, predicate).values()))


def any_sync(self, mask, predicate):
    return int(any(_vote(mask, predicate).values()))


def eq_sync(self, mask, predicate):
    return int(len(set(_vote(mask, predicate).values())) == 1)


def match_any_sync(self, mask, value):
    return _match(mask, value)[0]


def match_all_sync(self, mask, value):
    same, arrived = _match(mask, value)
    return (arrived, 1) if same == arrived else (0, 0)


def activemask(self):
    warp, _ = _here()
    return warp.live


def lanemask_lt(self):
    _, lane = _here()
    return (1 << lane) - 1


_METHODS = (
    shfl_sync,
    shfl_up_sync,
    shfl_down_sync,
    shfl_xor_sync,
    syncwarp,
    ballot_sync,
    all_sync,
    any_sync,
    eq_sync,
    match_any_sync,
    match_all_sync,
    activemask,
    lanemask_lt,
)
