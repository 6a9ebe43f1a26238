"""CUDA graphs of zoo calls: capture a sequence of launches once, replay it for about a microsecond a kernel.

Each zoo call costs the host several microseconds (validation, the launch), and a
loop of small kernels runs at the host's pace. A CUDA graph records the launches
once and replays them with one driver call, as ``torch.compile``'s
"reduce-overhead" mode does:

    graph = zoo.graph(lambda x, y, out: add(x, y, out=out), x, y, out)   # runs once, then captures
    for _ in range(1000):
        graph()                      # replays on the captured arrays
    graph(x, y, out)                 # the same, checking that these are the captured arrays

The function runs once eagerly first (numba compiles, cached buffers are
allocated: neither may happen inside a capture), then once more inside a stream
capture, and each launch it makes is recorded rather than run. A graph bakes in
its arguments (addresses, shapes, the launch configuration the host chose), so
calling it with arrays of another shape, dtype or address raises ``GraphMismatch``
rather than computing on the old ones. What can be captured: zoo calls on CuPy
(or numba) device arrays with ``out`` given, and CuPy operations; not host
arrays (a copy from the host is not a launch) and not an allocation.

``graph.stream`` is the CuPy stream it replays on; ``graph()`` does not wait for
the GPU (``graph.synchronize()`` or ``cupy.cuda.Device().synchronize()`` does).
"""

import contextlib

from zoo import SIMULATOR
from zoo.device import launch as lean_launch


class GraphMismatch(ValueError):
    """A graph was called with arrays other than the ones it captured."""


def _describe(a):
    return (tuple(a.shape), str(a.dtype), _address(a))


def _address(a):
    data = getattr(a, "data", None)
    if data is not None and hasattr(data, "ptr"):  # CuPy
        return data.ptr
    from zoo.device.memory import address

    return address(a)


class Graph:
    """A captured sequence of launches, replayed by calling it (see the module docstring)."""

    def __init__(self, fn, *arrays):
        if SIMULATOR:
            raise RuntimeError("CUDA graphs need a GPU: in the simulator, call the function itself")
        import cupy

        self.arrays = tuple(_describe(a) for a in arrays)
        fn(*arrays)  # eager: compiles and allocates what the capture must not
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.stream.synchronize()
        cupy.cuda.Device().synchronize()
        with self.stream, capturing(self.stream):
            self.stream.begin_capture()
            try:
                fn(*arrays)
            finally:
                self._graph = self.stream.end_capture()
        self.kernels = self._count_nodes()

    def _count_nodes(self):
        try:
            from cuda.bindings import runtime

            err, _, count = runtime.cudaGraphGetNodes(self._graph.graph, 0)  # CuPy's Graph keeps its cudaGraph_t
            return int(count) if int(err) == 0 else None
        except Exception:  # an older CuPy without .graph: the count is only informative
            return None

    def __call__(self, *arrays):
        if arrays:
            given = tuple(_describe(a) for a in arrays)
            if given != self.arrays:
                raise GraphMismatch(
                    "a graph replays the arrays it captured (their shape, dtype and address are baked into "
                    f"its launches): captured {self._show(self.arrays)}, given {self._show(given)}; capture a new "
                    "graph for these arrays"
                )
        self._graph.launch(self.stream)

    replay = __call__

    def synchronize(self):
        self.stream.synchronize()

    @staticmethod
    def _show(described):
        return ", ".join(f"{dtype}{list(shape)}@{addr:#x}" for shape, dtype, addr in described)


def graph(fn, *arrays):
    """Capture ``fn(*arrays)`` into a CUDA graph (after one eager call) and return the replayable ``Graph``."""
    return Graph(fn, *arrays)


@contextlib.contextmanager
def capturing(stream):
    """While inside, zoo's launches go to ``stream`` (a CuPy stream being captured) instead of the default stream."""
    previous = lean_launch.capture_stream
    lean_launch.capture_stream = stream.ptr
    try:
        yield
    finally:
        lean_launch.capture_stream = previous
