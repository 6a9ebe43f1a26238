"""The simulator's threads: ``install()`` patches numba's simulator (idempotent) with the warp intrinsics
(``zoo.simulator.warps``), a pool of Python threads reused block after block, and shared arrays made once per
block; ``settle_process`` sets a process up for them (short GIL hand-offs, one CPU).
"""

import os
import sys
import threading
import time

import numpy as np

from zoo.simulator.warps import _METHODS, _Warp

# The simulator runs each CUDA thread as a Python thread. A barrier or a warp rendezvous wakes its
# waiters, which then take the GIL one after another; at Python's default switch interval (5 ms) a
# running thread keeps it that long before handing over. 1 ms made simulator checks of reduce, scan,
# sgemm and hgemm steps 1.6x faster in one process on a 2-core machine (shorter intervals gain no
# more); with a pytest worker on every core the whole suite gained about 6%.
SWITCH_INTERVAL_S = 0.001

# the CPUs this process could run on when zoo was imported, before settle_process kept it to one
START_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def settle_process(slot=None, cpus=None):
    """Set this process up for the simulator's threads: short GIL hand-offs, and all of them on one CPU.

    Only the thread holding the GIL runs, so the simulator gains nothing from a second CPU, and pays for it:
    every hand-off (a lane that waits in a warp rendezvous or at a barrier gives the GIL to the next) wakes
    a thread the OS may have put on another CPU, an inter-processor wake-up, where on one CPU it is a plain
    context switch. Measured on a 2-core machine, hgemm v07's check at 70 x 129 x 31: 4.8 s spread over both
    CPUs, 3.8 s on one; two such checks at once (two pytest workers) 7.0 and 6.9 s each spread, 4.6 and 2.9
    s each on a CPU of its own. ``slot`` picks the CPU among those the process may use (a pytest worker's
    number, so that workers take different CPUs); None takes the process id. ``cpus`` names the CPUs to pick
    from (default: those the process may use now; a process started by a settled one inherits its one CPU, so
    zoo run's workers pick among their parent's ``START_CPUS``). Tests and the CLI call it."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if not hasattr(os, "sched_setaffinity"):  # Linux only: elsewhere the threads stay where the OS puts them
        return
    cpus = sorted(cpus or os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[(os.getpid() if slot is None else slot) % len(cpus)]})


def install():
    """Patch the simulator (idempotent). numba.cuda must be the simulator."""
    from numba.cuda.simulator import kernel, kernelapi

    if getattr(kernelapi.FakeCUDAModule, "_zoo_patched", False):
        return
    for fn in _METHODS:
        setattr(kernelapi.FakeCUDAModule, fn.__name__, fn)

    pool = _BlockThreads(_pooled_thread_class(kernel))

    def manager_run(self, grid_point, *args):
        # Warp state for this block, made before any of its threads starts.
        n = int(np.prod(self._block_dim))
        block = tuple(int(i) for i in grid_point)
        self._zoo_warps = [_Warp(f"block {block} warp {w}", min(32, n - 32 * w)) for w in range((n + 31) // 32)]
        return pool.run(self, grid_point, args)

    kernel.BlockManager.run = manager_run
    kernelapi.FakeCUDAShared.array = _shared_array_once(kernelapi.FakeCUDAShared.array, kernelapi)
    kernelapi.FakeCUDAModule._zoo_patched = True


def _pooled_thread_class(kernel):
    """numba's ``BlockThread`` made reusable: one Python thread runs one CUDA thread of block after block.

    numba starts a Python thread for every CUDA thread of every block, and ``Thread.start`` waits for the new
    thread to take the GIL and say it runs: about 120 us a thread on a 2-core machine, 30 ms of a 256-thread
    block that does nothing else (measured). A pooled thread is started once and then waits for its next
    block. Everything a block leaves on its thread goes before the next one: the barrier and abort state, the
    exception, the block's call and manager, and every ``_zoo_*`` attribute (the per-thread state of zoo's
    simulator code: wgmma fragments, counters, line tracers), so an idle thread keeps no array alive."""

    class PooledBlockThread(kernel.BlockThread):
        def __init__(self):
            threading.Thread.__init__(self, daemon=True)
            self.syncthreads_event = threading.Event()
            self._go = threading.Event()
            self._job = None
            self.retired = False
            self.finished = True

        def assign(self, manager, grid_point, block_point, job):
            self._manager = manager
            self.debug = manager._debug
            self.blockIdx = kernel.Dim3(*grid_point)
            self.threadIdx = kernel.Dim3(*block_point)
            dim = kernel.Dim3(*manager._block_dim)
            self.thread_id = self.threadIdx.x + dim.x * (self.threadIdx.y + dim.y * self.threadIdx.z)
            self.exception = None
            self.abort = False
            self.syncthreads_blocked = False
            self.syncthreads_event.clear()
            self.finished = False
            self._job = job
            self._go.set()

        def retire(self):
            """Leave the pool: end after the block in hand (a block that raised may still be running)."""
            self.retired = True
            self._job = None
            self._go.set()

        def run(self):
            while True:
                self._go.wait()
                self._go.clear()
                if self._job is None:
                    return
                # a new thread inherits the tracer and profiler set with threading.settrace (zoo.tools.profile's
                # sim_counters installs one for its counts); a pooled thread started before that takes them per block
                sys.settrace(threading.gettrace())
                sys.setprofile(threading.getprofile())
                try:
                    self._run_job(self._job)
                finally:
                    sys.settrace(None)
                    sys.setprofile(None)
                    self._manager._zoo_warps[self.thread_id // 32].leave(self.thread_id % 32)
                    self._forget_the_block()
                    self.finished = True
                if self.retired:
                    return

        def _forget_the_block(self):
            """Drop what would keep the block's arrays alive while this thread waits: the kernel call (it holds
            the arguments), the block's manager and the ``_zoo_*`` state (a frame of the kernel, counters)."""
            self._job = None
            self._manager = None
            for name in [k for k in self.__dict__ if k.startswith("_zoo_")]:
                del self.__dict__[name]

        def _run_job(self, job):  # numba's BlockThread.run: the error names the thread and the block
            try:
                if self.debug:
                    np.seterr(divide="raise")
                job()
            except Exception as e:
                where = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
                self.exception = (type(e)(f"{where}: {e}" if str(e) else where), sys.exc_info()[2])

    return PooledBlockThread


class _BlockThreads:
    """The pool of simulator threads, and numba's ``BlockManager.run`` on them with one more change: the loop
    that watches the block's threads yields the GIL after each pass over them.

    The loop watches the block's threads: when every live thread waits at ``syncthreads`` it releases them
    all, and it re-raises a thread's exception. numba's loop never sleeps, so it held the GIL for most of each
    switch interval, polling ``is_alive`` on every thread (485,000 calls in one 7.7 s hgemm check of 34
    blocks) while the threads it waits for could not run. ``time.sleep(0)`` after each pass hands the GIL
    to them."""

    def __init__(self, thread_class):
        self.thread_class = thread_class
        self.idle = []
        self.lock = threading.Lock()  # one block at a time on the pool; a second host thread gets fresh threads

    def started(self, count):
        """``count`` new threads, started: each waits for its first block."""
        threads = [self.thread_class() for _ in range(count)]
        for t in threads:
            t.start()
        return threads

    def run(self, manager, grid_point, args):
        n = int(np.prod(manager._block_dim))
        if not self.lock.acquire(blocking=False):
            threads = self.started(n)
            try:
                return self._run(manager, grid_point, args, threads)
            finally:
                for t in threads:
                    t.retire()
        try:
            self.idle += self.started(n - len(self.idle)) if len(self.idle) < n else []
            threads, self.idle = self.idle[:n], self.idle[n:]
            try:
                self._run(manager, grid_point, args, threads)
            except BaseException:
                for t in threads:  # threads of a block that raised may still run its code: start afresh
                    t.retire()
                raise
            self.idle = threads + self.idle
        finally:
            self.lock.release()

    @staticmethod
    def _run(manager, grid_point, args, threads):
        def job():
            manager._f(*args)

        for t, block_point in zip(threads, np.ndindex(*manager._block_dim), strict=True):
            t.assign(manager, grid_point, block_point, job)
        live, blocked = set(threads), set()
        while live:
            for t in live:
                if t.syncthreads_blocked:
                    blocked.add(t)
                elif t.exception:  # stop the others where they wait, then raise the first error seen
                    for other in threads:
                        other.abort = True
                        other.syncthreads_blocked = False
                        other.syncthreads_event.set()
                    raise t.exception[0].with_traceback(t.exception[1])
            if live == blocked:  # every live thread waits at the barrier: release them together
                for t in blocked:
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
                blocked = set()
            live = {t for t in live if not t.finished}
            time.sleep(0)  # let the block's threads run: they need the GIL to reach the barrier or finish
        for t in threads:  # an error raised after the last pass
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])


def _shared_array_once(original, kernelapi):
    """The simulator's ``cuda.shared.array`` without its race.

    numba's simulator gives every thread of a block the same NumPy array for one
    ``cuda.shared.array`` line by looking the line up in a dict and, when it is
    missing, creating ``np.empty`` and storing it: check, then set, with no lock.
    A thread switch between the two lets a second thread create a second array,
    so some threads of the block write shared memory that the others never see,
    and read uninitialised memory instead (seen as sgemm v06 errors of 1e21, about
    one run in three under a short ``sys.setswitchinterval``). Here the lookup and
    the creation are one step under a lock. The key is the caller's file and line,
    as in numba (``sys._getframe(1)`` is the kernel's frame: this function is the
    method the kernel calls; ``caller_depth`` says how many frames up the kernel is when
    another wrapper calls this one, as ``zoo.tools.profile.sim_counters`` does).
    """
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None, caller_depth=1):
        if alignment is not None or shape == 0:  # refused, or dynamic shared memory: no lookup
            return original(self, shape, dtype, alignment)
        caller = sys._getframe(caller_depth)
        key = (caller.f_code.co_filename, caller.f_lineno)
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        with lock:
            found = self._allocations.get(key)
            if found is None:
                found = self._allocations[key] = np.empty(shape, dtype)
        return found

    return array
