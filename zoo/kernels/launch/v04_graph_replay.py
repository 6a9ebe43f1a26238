"""The loop of launches captured once into a CUDA graph, then replayed with one driver call a call.

Changes:
    v03's loop (copied here: v01's kernel through the lean launch), recorded
    once instead of issued every call. The first call on a pair of arrays runs
    the loop (compiling, computing the result), then captures it on a side
    stream into a graph of STEPS kernel nodes, kept under the arrays' addresses
    and size. Later calls on the same arrays replay it on the default stream. A
    graph bakes each launch's parameters (the addresses): other arrays are a new
    capture, paid once for them. In the simulator (no graphs), in a compile-only
    dry run and where numba rather than the lean launch launches the kernel
    (ZOO_LAUNCH=numba), it runs the loop as it is.

Why it is faster:
    The host issues one graph launch for the STEPS kernels: no Python, no packing
    and no driver call per kernel, and the GPU starts each node as the one before
    ends, with shorter gaps than separate launches leave. What is left is the
    kernels' own time plus one launch.
"""

import zoo.device
from zoo import SIMULATOR
from zoo.device.jit import Kernel
from zoo.device.memory import address
from zoo.kernels.launch import STEPS
from zoo.kernels.launch import v01_numba_dispatcher as v01
from zoo.runtime.graphs import capture, replay

BASE = "v01"

affine = Kernel(v01.affine)  # v01's dispatcher, launched by zoo.runtime.launch (v03)

MAX_GRAPHS = 64  # graphs kept: zoo run rotates up to 16 input sets, each a capture of its own
_GRAPHS = {}  # (address of x, address of out, n) -> the captured loop on those arrays


def loop(x, out):
    """v03's launch: STEPS launches of the kernel, each through the lean launch."""
    blocks = (out.size + v01.THREADS_PER_BLOCK - 1) // v01.THREADS_PER_BLOCK
    launcher = affine[blocks, v01.THREADS_PER_BLOCK]
    launcher(x, out)
    for _ in range(STEPS - 1):
        launcher(out, out)


def launch(x, out):
    # zoo.device.OFFLINE: a compile-only dry run (no device to capture on); lean None: numba launches, uncapturable
    if SIMULATOR or zoo.device.OFFLINE or affine.lean is None:  # no CUDA graphs there
        loop(x, out)
        return
    key = (address(x), address(out), out.size)  # what the graph bakes in
    graph = _GRAPHS.get(key)
    if graph is None:
        loop(x, out)  # this call's result, and the kernel compiled before any capture
        if len(_GRAPHS) >= MAX_GRAPHS:
            _GRAPHS.clear()
        _GRAPHS[key] = capture(loop, x, out)  # the loop recorded: each launch a node, nothing run
        return
    replay(graph)  # on the default stream: ordered with the copies and launches around the call
