"""Bad input gets a clear TypeError or ValueError before any launch."""

import numpy as np
import pytest

import zoo
from zoo.errors import OutOfRange
from zoo.runtime import arrays

# Any launch during these tests fails the test: errors must come first (conftest's no_launch)
pytestmark = pytest.mark.usefixtures("no_launch")


def _first_real_variant(fam):
    return next(v for v in fam if not v.demonstration)


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
class TestEveryFamily:
    def inputs(self, fam, size=33):
        return list(fam.make_inputs(size, seed=3))

    def test_wrong_dtype(self, fam):
        bad = [a.astype(np.float64) for a in self.inputs(fam)]
        with pytest.raises(TypeError, match=f"must be {fam.dtypes[0]}"):
            _first_real_variant(fam)(*bad)

    def test_non_contiguous(self, fam):
        inputs = self.inputs(fam)
        doubled = np.repeat(inputs[0], 2, axis=-1)
        inputs[0] = doubled[..., ::2]
        assert not inputs[0].flags.c_contiguous
        with pytest.raises(ValueError, match="not C-contiguous"):
            _first_real_variant(fam)(*inputs)

    def test_empty(self, fam):
        inputs = self.inputs(fam)
        inputs[0] = inputs[0][..., :0]
        with pytest.raises(ValueError, match="empty"):
            _first_real_variant(fam)(*inputs)

    def test_wrong_ndim(self, fam):
        inputs = self.inputs(fam)
        inputs[0] = inputs[0][None]
        with pytest.raises(ValueError, match="dimension"):
            _first_real_variant(fam)(*inputs)

    def test_not_an_array(self, fam):
        inputs = self.inputs(fam)
        inputs[0] = inputs[0].tolist()
        with pytest.raises(TypeError, match="expected a NumPy, CuPy or numba device array"):
            _first_real_variant(fam)(*inputs)

    def test_too_many_arrays(self, fam):
        inputs = self.inputs(fam)
        with pytest.raises(TypeError, match="takes arrays"):
            _first_real_variant(fam)(*inputs, *inputs, *inputs)

    def test_out_of_wrong_shape(self, fam):
        inputs = self.inputs(fam)
        shape, dtype = fam.output_for(*inputs)
        with pytest.raises(ValueError, match="out must be"):
            _first_real_variant(fam)(*inputs, out=np.empty((1,) + tuple(shape), dtype))


def test_mismatched_shapes():
    a, b = zoo.family("vector_add").make_inputs(33, seed=0)
    with pytest.raises(ValueError, match="same shape"):
        zoo.family("vector_add")[1](a, b[:-1])


def test_mixed_host_and_device_arrays():
    from numba import cuda

    a, b = zoo.family("vector_add").make_inputs(33, seed=0)
    with pytest.raises(TypeError, match="mixed kinds"):
        zoo.family("vector_add")[1](a, cuda.to_device(b))


@pytest.mark.parametrize("variant,limit", [("v01", 64), ("v02", 1024)])
def test_one_block_kernels_refuse_more_than_a_block(variant, limit):
    rev = zoo.family("reverse")
    (x,) = rev.make_inputs(limit + 1, seed=0)
    with pytest.raises(OutOfRange, match=f"at most {limit}"):
        rev[variant](x)
    assert issubclass(OutOfRange, ValueError)


def test_poison_values_are_never_a_real_result():
    assert np.isnan(arrays.poison_value(np.float32))
    assert arrays.poison_value(np.int32) == np.iinfo(np.int32).min
    assert arrays.poison_value(np.uint32) == np.iinfo(np.uint32).max


def test_a_required_array_given_as_none():
    A, B = zoo.family("sgemm").make_inputs((5, 6, 7), seed=0)
    with pytest.raises(TypeError, match="A is required, got None"):
        zoo.family("sgemm")["v01"](None, B)


@pytest.mark.parametrize("alpha", ["2", None, True])
def test_scalars_that_are_not_real_numbers(alpha):
    A, B = zoo.family("sgemm").make_inputs((5, 6, 7), seed=0)
    with pytest.raises(TypeError, match="alpha must be a real number"):
        zoo.family("sgemm")["v01"](A, B, alpha=alpha)


def test_a_read_only_out_is_refused_before_the_launch():
    a, b = zoo.family("vector_add").make_inputs(33, seed=0)
    out = np.empty(33, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        zoo.family("vector_add")[1](a, b, out=out)
