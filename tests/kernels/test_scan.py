"""Scan beyond the generic checks: second calls, many tiles, look-back state, per-step limits.

int32 exactness at every TEST_SIZES is the generic test's job (integer results compare exactly).
"""

import numpy as np
import pytest

import zoo
from zoo.bench import harness
from zoo.errors import OutOfRange
from zoo.kernels.scan import lookback, v04_three_kernel, v05_decoupled_lookback, v06_vectorized_warp_lookback
from zoo.runtime import buffers

SCAN = zoo.family("scan")
KINDS = SCAN.kinds


def _expect(variant, x, got):
    ref = SCAN.reference(x)
    ok, err, detail = harness.compare(got, ref, SCAN.tolerance(x.size))
    assert ok, f"{variant!r} at n = {x.size}: {detail}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("variant", SCAN.variants, ids=lambda v: v.name)
def test_second_call_with_new_inputs_is_right(variant, kind):
    # Same size twice (same cached scratch), different data: nothing left by the
    # first call (counter, flags, tile sums) may leak into the second.
    n = 700
    for seed in (11, 12):
        (x,) = SCAN.inputs(n, seed, kind)
        _expect(variant, x, variant(x))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "module",
    [v04_three_kernel, v05_decoupled_lookback, v06_vectorized_warp_lookback],
    ids=lambda m: m.__name__.rsplit(".", 1)[-1][:3],
)
def test_many_tiles_with_a_partial_last_one(module, kind):
    # Three tiles and a 3-element tail (repeated calls over several tiles: see the epoch test).
    variant = SCAN[module.__name__.rsplit(".", 1)[-1][:3]]
    (x,) = SCAN.inputs(3 * module.TILE + 3, 21, kind)
    _expect(variant, x, variant(x))


@pytest.mark.parametrize(
    "module", [v05_decoupled_lookback, v06_vectorized_warp_lookback], ids=lambda m: m.__name__.rsplit(".", 1)[-1][:3]
)
def test_lookback_leaves_counter_at_zero_and_flags_in_the_current_epoch(module):
    tiles = 3
    n = 2 * module.TILE + 1
    (x,) = SCAN.inputs(n, 5, "float32")
    SCAN[module.__name__.rsplit(".", 1)[-1][:3]](x)
    flags_array = buffers.scratch("lookback_flags", tiles, np.uint64, zero=True)
    epoch = lookback._EPOCHS[id(flags_array)]
    assert buffers.scratch("lookback_counter", 1, np.int32, zero=True).copy_to_host()[0] == 0, (
        "the last tile must reset the ticket counter"
    )
    flags = flags_array.copy_to_host()
    assert (flags >> np.uint64(32) == np.uint64((epoch << 2) | 2)).all(), "every tile must end INCLUSIVE, this epoch"
    prefixes = (flags & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    ends = np.cumsum(x.astype(np.float64))[np.minimum(np.arange(1, tiles + 1) * module.TILE, n) - 1]
    assert np.allclose(prefixes, ends, rtol=1e-5), "published inclusive prefixes are the tile-end sums"


def test_single_pass_steps_share_one_epoch_count_per_flags_array():
    # v05 and v06 reuse the same cached flags when their tile counts agree; each
    # call must raise the epoch, or one step would read the other's stale words
    # as current (the simulator, running blocks in order, could not show that).
    n5, n6 = 2 * v05_decoupled_lookback.TILE, 2 * v06_vectorized_warp_lookback.TILE
    flags = buffers.scratch("lookback_flags", 2, np.uint64, zero=True)
    seen = []
    for step, n in (("v05", n5), ("v06", n6), ("v05", n5)):
        (x,) = SCAN.inputs(n, len(seen), "int32")
        assert np.array_equal(SCAN[step](x), np.cumsum(x))
        seen.append(lookback._EPOCHS[id(flags)])
    assert seen[0] < seen[1] < seen[2]


@pytest.mark.parametrize("n", [1001, 2 * v06_vectorized_warp_lookback.TILE + 3])
def test_misaligned_view_takes_the_scalar_path(n):
    from numba import cuda

    (x,) = SCAN.inputs(n, 9, "float32")
    whole = cuda.to_device(x)
    view = whole[1:]  # starts 4 bytes past a 16-byte boundary
    assert not v06_vectorized_warp_lookback.aligned(view)
    got = SCAN["v06"](view).copy_to_host()
    _expect(SCAN["v06"], x[1:], got)


@pytest.mark.parametrize("name,limit", [("v01", 1024), ("v02", 2048), ("v03", 1 << 20)])
def test_one_block_steps_refuse_what_they_cannot_hold(name, limit):
    variant = SCAN[name]
    with pytest.raises(OutOfRange, match=str(limit)):
        variant.validate(np.zeros(limit + 1, np.float32))
    variant.validate(np.zeros(limit, np.float32))  # the limit itself is taken


def test_tolerance_grows_with_n_and_int32_is_exact():
    assert SCAN.tolerance(1) < SCAN.tolerance(1 << 20) < SCAN.tolerance((1 << 28) + 7) < 3e-3
    got = np.cumsum(np.ones(33, np.int32)).astype(np.int32)
    got[-1] += 1
    assert not harness.compare(got, np.arange(1, 34, dtype=np.float64), SCAN.tolerance(33))[0]
