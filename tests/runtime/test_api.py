"""The public API: NumPy in gives NumPy out; device arrays in give the same kind out."""

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.bench import harness


def test_numpy_in_numpy_out():
    fam = zoo.family("vector_add")
    a, b = fam.make_inputs(1000, seed=4)
    out = fam[2](a, b)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    assert harness.compare(out, fam.reference(a, b), fam.TOLERANCE)[0]


def test_numba_device_arrays_stay_on_the_device():
    fam = zoo.family("reverse")
    (x,) = fam.make_inputs(1000, seed=4)
    out = fam["v03"](cuda.to_device(x))
    assert not isinstance(out, np.ndarray) and hasattr(out, "copy_to_host")
    assert np.array_equal(out.copy_to_host(), x[::-1])


def test_out_given_is_filled_and_returned():
    fam = zoo.family("vector_add")
    a, b = fam.make_inputs(33, seed=5)
    out = np.full(33, np.nan, np.float32)
    assert fam[1](a, b, out=out) is out
    assert harness.compare(out, fam.reference(a, b), fam.TOLERANCE)[0]


@pytest.mark.skipif(zoo.SIMULATOR, reason="CuPy needs a GPU")
@pytest.mark.parametrize("name", ["vector_add", "reverse", "sgemm"])
def test_cupy_in_cupy_out(name):
    import cupy

    fam = zoo.family(name)
    size = (1000, 777, 333) if name == "sgemm" else 100_003
    inputs = fam.make_inputs(size, seed=6)
    variant = fam.variants[-1] if not fam.variants[-1].demonstration else fam.variants[-2]
    out = variant(*(cupy.asarray(a) for a in inputs))
    assert isinstance(out, cupy.ndarray)
    assert harness.compare(out.get(), fam.reference(*inputs), fam.TOLERANCE)[0]


@pytest.mark.skipif(zoo.SIMULATOR, reason="CuPy needs a GPU")
def test_a_cupy_array_gets_one_view_which_never_keeps_it_alive():
    import gc
    import weakref

    import cupy

    from zoo.runtime import arrays

    x = cupy.arange(1000, dtype=cupy.float32)
    view = arrays.cupy_view(x)
    assert arrays.cupy_view(x) is view  # the second call reuses it
    x.shape = (10, 100)  # reshaped in place: same array, same pointer, new layout
    assert arrays.cupy_view(x) is not view and arrays.cupy_view(x).shape == (10, 100)
    alive = weakref.ref(x)
    del x, view
    gc.collect()
    assert alive() is None  # neither the cache nor the view held it
    assert not [k for k, entry in arrays._VIEWS.items() if entry[0]() is None]  # its entry went with it
    y = cupy.arange(500, dtype=cupy.float32)  # likely the freed block, perhaps the same id: a view of its own
    np.testing.assert_array_equal(arrays.cupy_view(y).copy_to_host(), np.arange(500, dtype=np.float32))


@pytest.mark.skipif(zoo.SIMULATOR, reason="CuPy needs a GPU")
def test_a_call_on_cupy_arrays_neither_waits_for_the_device_nor_runs_before_earlier_work():
    """Queued behind a kernel that holds the GPU for 100 ms, the call returns while the GPU is still asleep, and its
    result is right once the queue has drained (it ran after the work queued before it), twice."""
    import cupy

    fam = zoo.family("vector_add")
    a, b = fam.make_inputs(100_003, seed=7)
    ca, cb = cupy.asarray(a), cupy.asarray(b)
    out = cupy.full(a.shape, cupy.nan, cupy.float32)
    fam["v02"](ca, cb, out=out)  # compiles (the host waits for that, not for the GPU)
    harness.hold_gpu(1000)
    cuda.synchronize()
    out.fill(cupy.nan)
    for _ in range(2):
        harness.hold_gpu(100_000)
        queued = cuda.event()
        queued.record()
        fam["v02"](ca, cb, out=out)
        assert not queued.query(), "the call waited for the sleeping kernel"
        cuda.synchronize()
        assert harness.compare(out.get(), fam.reference(a, b), fam.TOLERANCE)[0]
        out.fill(cupy.nan)
