"""The program ``zoo profile`` runs under Nsight Compute: each step called once, profiled alone.

    python -m zoo.tools.profile.target FAMILY SIZE STEP [STEP ...]

For each step it makes the family's inputs at SIZE on the device, calls the step
once outside the profiler (compilation, first-call allocations, a CUDA graph's
capture), then opens the profiler (``cuProfilerStart``; ncu runs with
``--profile-from-start off``), launches a one-thread marker kernel, calls the step
once more, waits and closes it. ncu therefore sees, per step, the marker and then
exactly the kernels of one call; ``zoo.tools.profile.split_steps`` cuts its rows at the
markers. A loop of many launches is profiled for its first
``zoo.tools.profile.LAUNCHES_PER_STEP`` launches. Each step is reported on stdout as one
line, ``ZOO-PROFILE {json}``: the step, and how many zoo kernels its call launched
(or why it was skipped, and whether its marker was launched before it failed).
"""

import json
import sys

import numpy as np
from numba import cuda
from numba.cuda import dispatcher as numba_dispatcher

import zoo
from zoo.bench import harness, results
from zoo.device import jit as zoo_jit
from zoo.errors import OutOfRange
from zoo.tools.profile import ncu


@zoo_jit.jit
def zoo_profile_step_marker(flag):
    if cuda.grid(1) == 0:
        flag[0] = 1


def _on_every_gpu(action):
    """``action()`` with each GPU's context current in turn: cuProfilerStart, cuProfilerStop and synchronize act on
    the current context only, and a step spread over several GPUs (collectives) launches on each one's."""
    for gpu in cuda.gpus:
        with gpu:
            action()


def _profiler(on):
    """Open (or close) the profiler on every GPU."""
    _on_every_gpu(cuda.profile_start if on else cuda.profile_stop)


def _report(**fields):
    print(ncu.TARGET_LINE + json.dumps(fields), flush=True)


class _Cap:
    """Stops the profiler before a step's launch number ``limit`` + 1 (the launches go on, unprofiled). Counts the
    zoo's kernels and the kernels a step launches through numba's own dispatcher (launch v01, v02) alike; a zoo
    launch that falls back to numba's launch counts once."""

    def __init__(self, limit):
        self.limit = limit
        self.count = 0
        self.inside_zoo_launch = False
        self.original = zoo_jit.Kernel.__getitem__
        self.numba_call = getattr(numba_dispatcher, "_LaunchConfiguration", None)
        self.numba_original = self.numba_call.__call__ if self.numba_call else None

    def tick(self):
        self.count += 1
        if self.count == self.limit + 1:
            _profiler(False)

    def __enter__(self):
        cap, original, numba_original = self, self.original, self.numba_original

        def getitem(kernel, config):
            launcher = original(kernel, config)

            def counted(*args):
                cap.tick()
                cap.inside_zoo_launch = True
                try:
                    return launcher(*args)
                finally:
                    cap.inside_zoo_launch = False

            return counted

        def numba_counted(configured, *args):
            if not cap.inside_zoo_launch:
                cap.tick()
            return numba_original(configured, *args)

        zoo_jit.Kernel.__getitem__ = getitem
        if self.numba_call:  # a numba without this class: only the zoo's launches are capped
            self.numba_call.__call__ = numba_counted
        return self

    def __exit__(self, *exc):
        zoo_jit.Kernel.__getitem__ = self.original
        if self.numba_call:
            self.numba_call.__call__ = self.numba_original


def profile_step(variant, size, kind, flag, progress):
    fam = variant.family
    host_inputs = fam.inputs(size, 0, kind)
    try:
        _, (shape, dtype) = variant.validate(*host_inputs)
    except OutOfRange as e:
        _report(step=variant.name, skipped=str(e) or "out of range")
        return
    sets, out = harness.benchmark_buffers(variant, host_inputs, shape, dtype)
    variant.launch(sets[0], out)  # compile, allocate, capture: outside the profiler
    cuda.synchronize()
    before = zoo_jit.launch_count()
    with _Cap(ncu.LAUNCHES_PER_STEP) as cap:
        _profiler(True)
        zoo_profile_step_marker[1, 1](flag)
        progress["marked"] = True  # ncu has this step's marker: its rows (if any) follow it
        cap.count = 0  # the marker is not the step's
        variant.launch(sets[0], out)
        _on_every_gpu(cuda.synchronize)  # every GPU's kernels have run before the profiler closes
        _profiler(False)
    _report(step=variant.name, zoo_launches=zoo_jit.launch_count() - before - 1)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3:
        print("usage: python -m zoo.tools.profile.target FAMILY SIZE STEP [STEP ...]", file=sys.stderr)
        return 2
    if zoo.SIMULATOR:
        print("zoo.tools.profile.target runs on a GPU (ZOO_TARGET=gpu)", file=sys.stderr)
        return 2
    fam = zoo.family(argv[0])
    size, kind = results.parse_case(argv[1])
    flag = cuda.device_array(1, np.int32)
    zoo_profile_step_marker[1, 1](flag)  # compiled before the profiler opens
    cuda.synchronize()
    for name in argv[2:]:
        variant, progress = fam[name], {}
        try:
            profile_step(variant, size, kind, flag, progress)
        except Exception as e:  # one step failing (out of memory, an old GPU) leaves the others' rows
            _profiler(False)
            why = f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            _report(step=variant.name, skipped=why, marked=progress.get("marked", False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
