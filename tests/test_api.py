"""The public API: NumPy in gives NumPy out; device arrays in give the same kind out."""
import numpy as np
import pytest
from numba import cuda

import zoo
from zoo import harness


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
