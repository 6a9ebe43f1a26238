"""Sort beyond the generic checks: the float order the spec states, ties kept in order, second calls, bad input.

The generic test checks every step on the family's inputs (which hold duplicates, -0.0, infinities and one NaN
payload); here, hand-made keys at the edges of the order, small enough for the simulator's seconds.
"""

import numpy as np
import pytest

import zoo
from zoo.bench import harness
from zoo.errors import OutOfRange
from zoo.kernels import sort as sort_spec
from zoo.kernels.sort import v01_bitonic_block

SORT = zoo.family("sort")
STEPS = [v for v in SORT if not v.demonstration]


def _expect(variant, keys, values=None):
    got = variant(keys) if values is None else variant(keys, values)
    ok, _, detail = harness.compare(got, SORT.reference(keys, values), 0)
    assert ok, f"{variant!r} at n = {keys.size}: {detail}"


def _edge_keys():
    """Every kind of float the order names, twice or more, and a run of one repeated key: 40 keys."""
    nan = np.float32(np.nan)
    negative_nan = np.uint32(0xFFC0BEEF).view(np.float32)  # a NaN with its sign bit set, and a payload
    smallest = np.uint32(1).view(np.float32)  # the smallest subnormal
    edges = [nan, -0.0, 0.0, np.inf, -np.inf, negative_nan, smallest, -smallest, -0.0, 0.0, 1.5, -1.5, nan]
    keys = np.array(edges + [2.5] * 14 + edges, np.float32)
    return keys


@pytest.mark.parametrize("kind", SORT.kinds)
def test_the_reference_order_is_numpys_stable_argsort(kind):
    # The spec sorts unique (word, index) pairs for speed; NumPy's own stable argsort is the order it must give.
    for keys in (_edge_keys(), SORT.inputs(5000, 3, kind)[0]):
        assert np.array_equal(sort_spec.stable_order(keys), np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_float_order_keeps_ties_zeros_and_nans_in_input_order(variant):
    # Values 0, 1, 2 ...: the sorted values are the permutation, so -0.0 before or after +0.0, or NaNs swapped
    # among themselves, or the run of 2.5 reordered, all show as a wrong value.
    keys = _edge_keys()
    _expect(variant, keys, np.arange(keys.size, dtype=np.int32))


def test_keys_alone_hold_the_input_bits():
    # Keys are moved, not rebuilt from their sort words: -0.0 stays -0.0 and a NaN keeps its sign and payload.
    keys = _edge_keys()
    got = SORT["v06"](keys)
    expected = keys[np.argsort(keys, kind="stable")]
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_all_equal_uint32_keys_keep_their_values_in_order():
    keys = np.full(140, 0xFFFFFFFF, np.uint32)  # the largest word: the pad of the bitonic steps is larger still
    _expect(SORT["v02"], keys, np.arange(140, dtype=np.int32)[::-1].copy())
    _expect(SORT["v05"], keys, np.arange(140, dtype=np.int32)[::-1].copy())


@pytest.mark.parametrize("step", ["v05", "v06"])
def test_second_call_with_new_inputs_is_right(step):
    # The ticket counters, the digit counters and the look-back flags are kept between calls: the second call
    # (same size, other keys) must start from clean state.
    for seed in (11, 12):
        keys, values = SORT.inputs(140, seed, "pairs")
        _expect(SORT[step], keys, values)


def test_bad_input_is_refused_before_any_launch():
    step = SORT["v06"]
    keys = np.arange(10, dtype=np.float32)
    with pytest.raises(TypeError, match="keys must be"):
        step(keys.astype(np.float64))
    with pytest.raises(ValueError, match="not C-contiguous"):
        step(np.arange(20, dtype=np.float32)[::2])
    with pytest.raises(TypeError, match="values must be"):
        step(keys, keys)
    with pytest.raises(ValueError, match="values must match keys"):
        step(keys, np.arange(9, dtype=np.int32))


def test_one_bitonic_block_refuses_more_keys_than_it_holds():
    with pytest.raises(OutOfRange, match="one block"):
        SORT["v01"](np.zeros(v01_bitonic_block.BLOCK_KEYS + 1, np.float32))


@pytest.mark.skipif(zoo.SIMULATOR, reason="a million keys: on a GPU only")
@pytest.mark.parametrize("variant", STEPS[1:], ids=lambda v: v.name)
def test_a_million_edge_keys_twice(variant):
    # The edge keys tiled to 1,000,003 (every tile meets NaNs, zeros and a long run of ties), sorted twice.
    keys = np.resize(_edge_keys(), 1_000_003)
    for values in (np.arange(keys.size, dtype=np.int32), np.arange(keys.size, dtype=np.int32)[::-1].copy()):
        _expect(variant, keys, values)
    _expect(variant, keys)  # bit for bit where the NaNs with payloads belong
