"""Reduce beyond the generic checks: second calls, the single pass's counter, multi-level passes, limits.

int32 exactness at every TEST_SIZES is the generic test's job (integer results compare exactly).
"""

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.bench import harness
from zoo.errors import OutOfRange
from zoo.kernels.reduce import v01_interleaved_divergent, v08_warp_shuffle, v09_single_pass, v10_vector_loads
from zoo.runtime import buffers

REDUCE = zoo.family("reduce")
KINDS = REDUCE.kinds


def _expect(variant, x, got):
    ref = REDUCE.reference(x)
    ok, err, detail = harness.compare(got, ref, REDUCE.tolerance(x.size))
    assert ok, f"{variant!r} at n = {x.size}: {detail}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("variant", REDUCE.variants, ids=lambda v: v.name)
def test_second_call_with_new_inputs_is_right(variant, kind):
    # Same size twice (same cached partials and counter), different data: nothing
    # left by the first call may leak into the second.
    n = 515
    sums = []
    for seed in (11, 12):
        (x,) = REDUCE.inputs(n, seed, kind)
        got = variant(x)
        _expect(variant, x, got)
        sums.append(got[0])
    assert sums[0] != sums[1]  # the two inputs really differ


SINGLE_PASS = {"v09": "single_pass_counter", "v10": "vector_loads_counter"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("step", SINGLE_PASS)
def test_single_pass_counter_is_reset(step, kind):
    (x,) = REDUCE.inputs(4099, 3, kind)
    REDUCE[step](x)
    counter = buffers.scratch(SINGLE_PASS[step], 1, np.uint32, zero=True)  # the cached one
    assert counter.copy_to_host()[0] == 0


@pytest.mark.parametrize("module", [v09_single_pass, v10_vector_loads], ids=lambda m: m.__name__[-16:])
def test_single_pass_with_several_blocks(module):
    # sm_count() is 1 in the simulator: launch with a wider grid by hand so the
    # last-block-done path really combines several partials (and, at n = 1003, the tail).
    (x,) = REDUCE.inputs(1003, 5, "int32")
    d_x = cuda.to_device(x)
    out = cuda.to_device(np.zeros(1, np.int32))
    grid = 3
    partials = cuda.to_device(np.full(grid, -99, np.int32))
    counter = cuda.to_device(np.zeros(1, np.uint32))
    for _ in range(2):
        module.reduce_int32[grid, module.BLOCK](d_x, partials, counter, out)
        assert out.copy_to_host()[0] == x.astype(np.int64).sum()
        assert counter.copy_to_host()[0] == 0


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_vector_loads_on_a_view_that_is_not_16_byte_aligned(offset):
    (x,) = REDUCE.inputs(1030, 9, "int32")
    d_x = cuda.to_device(x)[offset:]  # starts 4, 8 or 12 bytes past a 16-byte boundary
    assert not v10_vector_loads.aligned(d_x)
    got = REDUCE["v10"](d_x)
    assert got[0] == x[offset:].astype(np.int64).sum()


def test_three_levels_of_partials():
    # Step 1 reduces BLOCK elements per block: BLOCK^2 + 1 elements need three launches.
    n = v01_interleaved_divergent.BLOCK**2 + 1
    (x,) = REDUCE.inputs(n, 7, "int32")
    assert REDUCE["v01"](x)[0] == x.astype(np.int64).sum()


@pytest.mark.parametrize(
    "module", [v08_warp_shuffle, v09_single_pass, v10_vector_loads], ids=lambda m: m.__name__[-16:]
)
def test_32_bit_steps_refuse_2_to_the_31(module):
    class Big:
        size = 1 << 31

    with pytest.raises(OutOfRange):
        module.validate(Big())
    module.validate(np.zeros(10, np.float32))


def test_tolerance_catches_one_dropped_element():
    for n in (31, 1000, 4099):
        (x,) = REDUCE.inputs(n, 0, "float32")
        ref = REDUCE.reference(x)
        dropped = np.array([x[1:].astype(np.float64).sum()])
        ok, _, _ = harness.compare(dropped, ref, REDUCE.tolerance(n))
        assert not ok, n
