"""Scan beyond the generic checks: second calls, many tiles, exact int32, per-step limits."""
import numpy as np
import pytest

import zoo
from zoo import harness
from zoo.errors import OutOfRange
from zoo.kernels.scan import v04_three_kernel, v05_decoupled_lookback

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
    n = 1000
    for seed in (11, 12, 13):
        (x,) = SCAN.inputs(n, seed, kind)
        _expect(variant, x, variant(x))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("module", [v04_three_kernel, v05_decoupled_lookback], ids=lambda m: m.__name__[-20:])
def test_many_tiles_with_a_partial_last_one(module, kind):
    # Five tiles and a 3-element tail; twice, so the look-back meets flags of an earlier epoch.
    variant = SCAN[module.__name__.rsplit(".", 1)[-1][:3]]
    n = 5 * module.TILE + 3
    for seed in (21, 22):
        (x,) = SCAN.inputs(n, seed, kind)
        _expect(variant, x, variant(x))


def test_lookback_leaves_counter_at_zero_and_flags_in_the_current_epoch():
    from zoo.kernels.scan import parts

    m = v05_decoupled_lookback
    n = 3 * m.TILE + 1
    (x,) = SCAN.inputs(n, 5, "float32")
    SCAN["v05"](x)
    tiles = 4
    counter = parts.scratch("lookback_counter", 1, np.int32).copy_to_host()
    flags = parts.scratch("lookback_flags", tiles, np.uint64).copy_to_host()
    epoch = m._EPOCHS[id(parts.scratch("lookback_flags", tiles, np.uint64))]
    assert counter[0] == 0, "the last tile must reset the ticket counter"
    tags = flags >> np.uint64(32)
    assert (tags == np.uint64((epoch << 2) | 2)).all(), "every tile must end INCLUSIVE in this epoch"
    prefixes = (flags & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    ends = np.cumsum(x.astype(np.float64))[np.minimum(np.arange(1, tiles + 1) * m.TILE, n) - 1]
    assert np.allclose(prefixes, ends, rtol=1e-5), "published inclusive prefixes are the tile-end sums"


def test_int32_is_exact_with_negative_values():
    (x,) = SCAN.inputs(4099, 3, "int32")
    assert (x < 0).any()
    for v in SCAN.variants:
        try:
            got = v(x)
        except OutOfRange:
            continue
        assert got.dtype == np.int32
        assert np.array_equal(got, np.cumsum(x.astype(np.int64))), v.name


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
