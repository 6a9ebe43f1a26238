"""zoo.device.memory: 32-bit and 128-bit access to C-contiguous arrays of any rank by flat element index."""

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.device.jit import jit
from zoo.device.memory import load_flat, load_float4, store_flat, store_float4


@jit
def _copy_rows_reversed(src, dst, n):
    """dst's flat element i gets src's flat element n - 1 - i, through both access widths: the first
    threads move four at a time where both sides are whole float4, the rest one at a time."""
    i = cuda.grid(1)
    quads = n // 4
    if i < quads and n % 4 == 0:
        a, b, c, d = load_float4(src, n - 4 * (i + 1))  # a multiple of 4 when n is
        store_float4(dst, 4 * i, d, c, b, a)
    elif n % 4 != 0 and i < n:
        store_flat(dst, i, load_flat(src, n - 1 - i))


@pytest.mark.parametrize("shape", [(3, 8), (5, 7), (1, 1), (2, 3, 4)], ids=lambda s: "x".join(map(str, s)))
def test_flat_access_reads_and_writes_any_rank_by_flat_index(shape):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    out = cuda.to_device(np.full(shape, np.nan, np.float32))
    n = x.size
    _copy_rows_reversed[(n + 31) // 32, 32](cuda.to_device(x), out, n)
    assert np.array_equal(out.copy_to_host().ravel(), x.ravel()[::-1])


@pytest.mark.skipif(not zoo.SIMULATOR, reason="on a GPU a misaligned float4 is undefined, not an error")
def test_the_simulator_refuses_a_float4_off_a_16_byte_boundary():
    x = np.zeros((2, 6), np.float32)
    with pytest.raises(IndexError, match="not 16-byte aligned"):
        load_float4(x, 2)
    with pytest.raises(IndexError, match="not 16-byte aligned"):
        store_float4(x, 6, 1.0, 2.0, 3.0, 4.0)
    assert load_float4(x, 4) == (0.0, 0.0, 0.0, 0.0)  # a flat index into a 2-D array: row 0, columns 4-5 and row 1


def test_aligned_reads_the_first_element_address_of_host_and_device_arrays():
    from numba import cuda

    from zoo.device.memory import aligned

    base = np.zeros(12, np.float32)
    start = (-base.ctypes.data % 16) // 4  # the first element of base on a 16-byte boundary
    assert aligned(base[start:]) and not aligned(base[start + 1 :])
    device = cuda.to_device(np.zeros(12, np.float32))  # allocations start on at least 16 bytes
    assert aligned(device) and not aligned(device[1:])  # a view 4 bytes past the start
