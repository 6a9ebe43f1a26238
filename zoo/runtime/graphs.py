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

A graph replays on the legacy default stream, ordered with the calls around it as
an eager call is; ``graph()`` does not wait for the GPU (``graph.synchronize()``
does). ``capture(fn, *args)`` and ``replay(graph)`` are the same two steps for a
step that keeps its own graphs (launch v04).
"""

import contextlib

from zoo.runtime import SIMULATOR, arrays
from zoo.runtime import launch as lean_launch


class GraphMismatch(ValueError):
    """A graph was called with arrays other than the ones it captured."""


def _describe(a):
    return (tuple(a.shape), str(a.dtype), _address(a))


def _address(a):
    data = getattr(a, "data", None)
    if data is not None and hasattr(data, "ptr"):  # CuPy
        return data.ptr
    return arrays.address(a)


def capture(fn, *args):
    """``fn(*args)`` recorded into a CUDA graph (a ``cupy.cuda.Graph``): nothing runs, each launch becomes a node.

    Everything queued before is finished first; the capture records a non-blocking stream of its own (never the
    legacy default stream, which cannot be captured), and zoo's launches on "stream 0" go to it meanwhile."""
    import cupy

    cupy.cuda.Device().synchronize()  # no earlier work may still be queued when the capture begins
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream, capturing(stream):  # CuPy's own operations and zoo's launches both go to the captured stream
        stream.begin_capture()
        try:
            fn(*args)
        finally:
            graph = stream.end_capture()
    return graph


def replay(graph):
    """Launch a captured graph on the legacy default stream, where zoo, numba and CuPy's default work run: it is
    ordered with the calls before and after it, as an eager call would be."""
    import cupy

    graph.launch(cupy.cuda.Stream.null)


class Graph:
    """A captured sequence of launches, replayed by calling it (see the module docstring)."""

    def __init__(self, fn, *arrays):
        if SIMULATOR:
            raise RuntimeError("CUDA graphs need a GPU: in the simulator, call the function itself")
        import cupy

        self.arrays = tuple(_describe(a) for a in arrays)
        fn(*arrays)  # eager: compiles and allocates what the capture must not
        self._graph = capture(fn, *arrays)
        self.stream = cupy.cuda.Stream.null  # where it replays (see replay)
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
        replay(self._graph)

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
