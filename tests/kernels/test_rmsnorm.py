"""RMSNorm beyond the generic checks: the residual stream is updated in place, and each path is the one taken."""

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.kernels.rmsnorm import v03_row_in_registers

RMSNORM = zoo.family("rmsnorm")


@pytest.mark.parametrize("variant", list(RMSNORM), ids=lambda v: v.name)
@pytest.mark.parametrize("size", [(2, 36), (1, 7)], ids=str)
def test_residual_becomes_the_sum_in_place(variant, size):
    x, residual, weight = RMSNORM.make_inputs(size, 3)
    d_residual = cuda.to_device(residual)
    out = cuda.to_device(np.full(x.shape, np.nan, np.float16))
    variant.module.launch(cuda.to_device(x), d_residual, cuda.to_device(weight), out)
    np.testing.assert_allclose(d_residual.copy_to_host(), x + residual, rtol=1e-6)
    np.testing.assert_allclose(out.copy_to_host(), RMSNORM.reference(x, residual, weight), rtol=2e-3, atol=1e-3)


def test_registers_take_whole_vectors_that_fit():
    x, residual, weight = RMSNORM.make_inputs((1, v03_row_in_registers.MAX_COLS), 0)
    out = np.empty(x.shape, np.float16)
    assert v03_row_in_registers.takes(x, residual, weight, out)
    x, residual, weight = RMSNORM.make_inputs((1, v03_row_in_registers.MAX_COLS + 4), 0)
    assert not v03_row_in_registers.takes(x, residual, weight, np.empty(x.shape, np.float16))
    x, residual, weight = RMSNORM.make_inputs((1, 30), 0)
    assert not v03_row_in_registers.takes(x, residual, weight, np.empty(x.shape, np.float16))


def test_mismatched_shapes_are_refused_before_a_launch():
    x, residual, weight = RMSNORM.make_inputs((2, 8), 0)
    with pytest.raises(ValueError, match="weight has"):
        RMSNORM["v03"](x, residual, weight[:4])
    with pytest.raises(ValueError, match="residual"):
        RMSNORM["v03"](x, residual[:1], weight)
