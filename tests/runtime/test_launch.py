"""The lean launch (zoo.runtime.launch) and CUDA graphs (zoo.runtime.graphs): the same results as numba's launch.

On a GPU every zoo kernel is launched through the driver with hand-packed parameters; these tests
check the packing of every kind of argument (arrays of each rank and layout, CuPy and numba arrays,
scalars of each type) against numba's own launch of the same kernel, the fallback for arguments it
does not pack, and graphs: replay equals an eager call, replaying other arrays is refused, nothing
leaks over 10,000 calls. In the simulator numba launches everything and graphs are refused.
"""

import os
import resource
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda, float32, float64, int64

import zoo
from zoo.device.dependent_launch import let_next_kernel_start, wait_for_previous_kernel
from zoo.device.jit import jit
from zoo.runtime import launch as lean_launch

GPU = pytest.mark.skipif(zoo.SIMULATOR, reason="the lean launch and graphs run on a GPU")


@jit
def affine_kernel(x, out, scale, offset, n, shift, wide, flag):
    """out[i] = x[i] * scale + offset + shift + wide (+1 when flag) for i < n: one argument of each kind."""
    i = cuda.grid(1)
    if i < n:
        # wide - 2^40 is 5 only if all 64 bits of wide arrived
        extra = float64(shift) + float64(wide - int64(1 << 40)) + (1.0 if flag else 0.0)
        out[i] = float32(x[i] * scale + offset + extra)


@jit
def rows_kernel(a, out):
    """out[r, c] = a[r, c] * 2 + r: a 2-D array, possibly a strided view."""
    r, c = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = a[r, c] * float32(2) + float32(r)


def _affine_args(x, out):
    return x, out, np.float32(1.5), np.float64(-0.25), np.uint32(x.size), np.int32(-7), np.int64((1 << 40) + 5), True


def _affine_reference(x):
    return (x.astype(np.float64) * 1.5 - 0.25 - 7 + 5 + 1).astype(np.float32)


@jit
def static_and_dynamic_shared_kernel(out):
    """out[i] = i + 3: through 1 KiB of static and the launch's dynamic shared memory (each thread its own word)."""
    static = cuda.shared.array(256, float32)
    dynamic = cuda.shared.array(0, float32)
    i = cuda.threadIdx.x
    static[i] = float32(i)
    dynamic[i + 12000] = static[i] + float32(3)  # near the end of 48 KiB: 12,000 words in
    out[i] = dynamic[i + 12000]


@GPU
def test_dynamic_shared_memory_past_48_kib_less_the_static_bytes_launches():
    """1 KiB of static shared memory plus 48 KiB of dynamic is past the 48 KiB a kernel may use without opting in:
    the lean launch opts in (it used to only above 48 KiB of dynamic, and this launch failed)."""
    import cupy

    out = cupy.full(256, np.nan, cupy.float32)
    static_and_dynamic_shared_kernel[1, 256, 0, 48 * 1024](out)
    np.testing.assert_array_equal(cupy.asnumpy(out), np.arange(256, dtype=np.float32) + 3)


@jit(dependent_launch=True)
def add_one_after_the_kernel_before(src, dst):
    """dst[i] = src[i] + 1, src being the output of the kernel before: each launch lets the next start at once,
    waits for the one before, and writes late, so a launch that read src without waiting would read it unwritten."""
    let_next_kernel_start()  # the next launch's blocks may start now, while this one runs
    wait_for_previous_kernel()  # the launch before has finished and written src
    i = cuda.grid(1)
    if i < dst.size:
        value = src[i]
        cuda.nanosleep(20000)  # the write comes late: the next launch, already started, must wait for it
        dst[i] = value + float32(1)


@GPU
@pytest.mark.parametrize("graph", [False, True])
def test_dependent_launches_each_read_what_the_one_before_wrote(graph):
    """40 dependent launches in a chain (a -> b, b -> a, ...), eagerly and from a CUDA graph: each reads the one
    before's output, so a launch that did not wait would leave a value short of 40."""
    import cupy

    from zoo.runtime import graphs

    assert add_one_after_the_kernel_before.lean.dependent_launch
    start = np.random.default_rng(3).integers(-1000, 1000, 4099).astype(np.float32)  # whole: every sum exact
    a, b = cupy.asarray(start), cupy.full(4099, np.nan, cupy.float32)

    def chain():
        for _ in range(20):
            add_one_after_the_kernel_before[33, 128](a, b)
            add_one_after_the_kernel_before[33, 128](b, a)

    if graph:
        captured = graphs.capture(chain)
        a.set(start)  # the capture ran nothing
        graphs.replay(captured)
    else:
        chain()
    np.testing.assert_array_equal(cupy.asnumpy(a), start + 40)


@GPU
@pytest.mark.parametrize("n", [1, 31, 4099])
@pytest.mark.parametrize("library", ["cupy", "numba"])
def test_every_kind_of_scalar_is_packed_as_numba_packs_it(n, library):
    import cupy

    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    to = cupy.asarray if library == "cupy" else cuda.to_device
    dx, dout = to(x), to(np.full(n, np.nan, np.float32))
    launcher = affine_kernel[(n + 127) // 128, 128]
    for call in range(2):  # the second call reuses the plan and its slots
        launcher(*_affine_args(dx, dout))
        got = dout.get() if library == "cupy" else dout.copy_to_host()
        # the GPU contracts x * scale + offset into one FMA: a float32 rounding apart from the reference
        np.testing.assert_allclose(got, _affine_reference(x), rtol=1e-6, atol=1e-7, err_msg=f"call {call}")
    assert affine_kernel.lean._plans, "the lean launch made no plan: numba launched it"
    assert all(plan is not None for plan in affine_kernel.lean._plans.values())


@GPU
@pytest.mark.parametrize("view", ["whole", "rows", "columns", "every_other_row"])
def test_two_dimensional_arrays_and_strided_views(view):
    import cupy

    a = cupy.asarray(np.random.default_rng(1).standard_normal((37, 45)).astype(np.float32))
    a = {"whole": a, "rows": a[3:30], "columns": a[:, 5:40], "every_other_row": a[::2]}[view]
    out = cupy.full(a.shape, cupy.nan, cupy.float32)
    rows_kernel[((a.shape[0] + 7) // 8, (a.shape[1] + 7) // 8), (8, 8)](a, out)
    expected = cupy.asnumpy(a) * 2 + np.arange(a.shape[0], dtype=np.float32)[:, None]
    np.testing.assert_array_equal(cupy.asnumpy(out), expected)


@GPU
def test_a_host_array_falls_back_to_numba_with_one_note():
    x = np.arange(33, dtype=np.float32)
    out = np.zeros(33, np.float32)
    with pytest.warns(UserWarning, match="launched through numba"):
        rows_kernel[(5, 6), (8, 8)](x.reshape(3, 11), out.reshape(3, 11))  # numba copies host arrays both ways
    np.testing.assert_array_equal(out.reshape(3, 11), x.reshape(3, 11) * 2 + np.arange(3)[:, None])


@GPU
def test_numba_launch_can_be_chosen_and_gives_the_same_results():
    code = (
        "import numpy as np, zoo\n"
        "from zoo.device import launch\n"
        "f = zoo.family('vector_add')\n"
        "a, b = f.make_inputs(4099, 3)\n"
        "assert not launch.ENABLED\n"
        "assert (f['v02'](a, b) == a + b).all()\n"
        "print('ok')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ, ZOO_LAUNCH="numba"), capture_output=True, text=True
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


@GPU
@pytest.mark.parametrize(
    "family,size",
    [("vector_add", 4099), ("reduce", 1000), ("scan", 4099), ("softmax", (33, 1000)), ("sgemm", (70, 129, 31))],
)
def test_a_graph_replays_what_an_eager_call_computes(family, size):
    import cupy

    from zoo.bench import harness

    fam = zoo.family(family)
    step = fam.variants[-1]
    host = fam.inputs(size, 5)
    inputs = [cupy.asarray(h) for h in host]
    shape, dtype = fam.output_for(*host)
    out = cupy.empty(shape, dtype)
    graph = zoo.graph(lambda *arrays: step(*arrays[:-1], out=arrays[-1]), *inputs, out)
    out.fill(np.nan if np.dtype(dtype).kind == "f" else 7)  # poison: the replay must write every element
    graph(*inputs, out)
    graph.synchronize()
    ok, _, detail = harness.compare(cupy.asnumpy(out), fam.reference(*host), step.tolerance(size))  # sgemm's: TF32
    assert ok, detail
    assert graph.kernels, "the capture recorded no kernel"


@GPU
def test_a_graph_refuses_other_arrays():
    import cupy

    step = zoo.family("vector_add")["v02"]
    a, b, out = (cupy.ones(1000, cupy.float32) for _ in range(3))
    graph = zoo.graph(lambda x, y, o: step(x, y, out=o), a, b, out)
    for other in (cupy.ones(1000, cupy.float32), cupy.ones(999, cupy.float32), a[1:].copy()):
        with pytest.raises(zoo.runtime.graphs.GraphMismatch, match="replays the arrays it captured"):
            graph(other, b, out)
    with pytest.raises(ValueError, match="pass device arrays and out="):
        zoo.graph(lambda x, y: step(x, y), a, b)  # an allocation cannot be captured


@GPU
def test_ten_thousand_calls_leak_nothing():
    import cupy

    step = zoo.family("vector_add")["v02"]
    a, b, out = (cupy.ones(4099, cupy.float32) for _ in range(3))
    step(a, b, out=out)
    cupy.cuda.Device().synchronize()
    # this process's device memory (other test workers share the GPU): CuPy's pool and numba's allocations
    pool, context = cupy.get_default_memory_pool(), cuda.current_context()
    device_before = (pool.total_bytes(), len(context.memory_manager.allocations))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(10_000):
        step(a, b, out=out)
    cupy.cuda.Device().synchronize()
    device_after = (pool.total_bytes(), len(context.memory_manager.allocations))
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert device_after == device_before, f"(CuPy pool bytes, numba allocations): {device_before} -> {device_after}"
    assert rss_after - rss_before < 16 << 10, f"peak host memory grew by {rss_after - rss_before} KiB"
    np.testing.assert_array_equal(cupy.asnumpy(out), 2)


@pytest.mark.skipif(not zoo.SIMULATOR, reason="the simulator's behaviour")
def test_in_the_simulator_numba_launches_and_graphs_are_refused():
    assert affine_kernel.lean is None
    x = np.arange(5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    affine_kernel[1, 32](*_affine_args(x, out))
    np.testing.assert_allclose(out, _affine_reference(x), rtol=1e-6)
    with pytest.raises(RuntimeError, match="need a GPU"):
        zoo.graph(lambda: None)
    assert lean_launch.capture_stream is None
