"""Decode attention beyond the generic checks: a cache filled in part, new positions with their causal mask, splits
with keys and without, large scores, bad input refused before any launch.

In the simulator these run at small sizes; on a GPU the same file runs with

    ZOO_TARGET=gpu python -m pytest tests/kernels/test_decode_attention.py -v
"""

import sys

import numpy as np
import pytest

import zoo
from zoo.bench import harness
from zoo.errors import OutOfRange, Unavailable

DECODE = zoo.family("decode_attention")
STEPS = DECODE.variants


def _inputs(heads, kv_heads, queries, capacity, d, seed):
    rng = np.random.default_rng(seed)
    return tuple(
        rng.standard_normal(shape, dtype=np.float32).astype(np.float16)
        for shape in ((heads, queries, d), (kv_heads, capacity, d), (kv_heads, capacity, d))
    )


def _check(variant, Q, K, V, **params):
    out = variant(Q, K, V, **params)
    ok, _, detail = harness.compare(out, DECODE.reference(Q, K, V, **params), DECODE.tolerance(None))
    assert np.isfinite(out.astype(np.float32)).all()
    assert ok, detail
    return out


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_a_cache_filled_in_part_with_two_new_positions(variant):
    """Capacity 48, the positions from 38 on unfilled (NaN, which a step that read them would spread). Two new
    queries at length 33 see keys 0-31 and 0-32: every splitting step (the simulator's blocks of 32 keys, v04 on
    iterations of 16, 4 blocks an SM) ends its last split at key 32, so the first query's row has no key in that
    split (a partial max of -inf). Then one query at length 38: a partial last block, the NaN just past it."""
    Q, K, V = _inputs(1, 1, 2, 48, 64, seed=1)
    K[:, 38:] = V[:, 38:] = np.float16(np.nan)
    _check(variant, Q, K, V, length=33)
    _check(variant, np.ascontiguousarray(Q[:, 1:]), K, V, length=38)


@pytest.mark.parametrize("variant", [v for v in STEPS if v.name < "v04"], ids=lambda v: v.name)
def test_a_thousand_cached_positions(variant):
    """The issue's 1000 positions, one q head and one kv head: 32 blocks of the simulator's 32 keys, 4 splits (4
    blocks an SM), the last split's last block partial (1000 = 31 x 32 + 8). v04 and v05 shuffle every score, a
    rendezvous of 32 Python threads here: they take 1000 positions at GPU_TEST_SIZES."""
    _check(variant, *_inputs(1, 1, 1, 1000, 64, seed=3))


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_large_scores_give_finite_correct_rows(variant):
    Q, K, V = _inputs(2, 1, 1, 24, 128, seed=2)  # d = 128, the headline's
    Q[1] *= np.float16(1000)  # scores in the thousands: an unsafe exp overflows
    _check(variant, Q, K, V)


def test_the_splits_cover_the_cache_in_whole_blocks():
    v02 = DECODE["v02"].module
    threads, aim = DECODE.module.THREADS, v02.most_blocks()
    for rows, length in ((1, 1), (1, 10_000), (32, 8192), (32, 32768), (8, 100), (300, 5000)):
        count, chunk = v02.splits(rows, length)
        assert chunk % threads == 0 and (count - 1) * chunk < length <= count * chunk
        assert count == 1 or count * rows <= aim + rows  # about `aim` blocks, never many more
    v05 = DECODE["v05"].module  # at an H100's 132 SMs, four blocks an SM; whole iterations of 32 keys (d = 128)
    for kv, length in ((1, 1), (8, 8192), (8, 32768), (8, 100), (1, 10_000)):
        count, chunk = v05.splits(kv, length, 32, 528)
        assert chunk % 32 == 0 and (count - 1) * chunk < length <= count * chunk
        assert count == 1 or count * kv <= 528 + kv
    assert v05.splits(8, 8192, 32, 528) == (64, 128)  # 512 blocks at Llama-3-8B's 8 kv heads: one resident wave


@pytest.mark.parametrize(
    "change,error,message",
    [
        (lambda Q, K, V: ((Q, K[:, :-1], V), {}), ValueError, "one shape"),
        (lambda Q, K, V: ((Q[..., :32], K, V), {}), ValueError, "one shape"),
        (lambda Q, K, V: ((Q[:3], K, V), {}), ValueError, "whole number of groups"),
        (lambda Q, K, V: ((Q, K, V), {"length": 41}), ValueError, "between"),
        (lambda Q, K, V: ((np.concatenate([Q, Q], axis=1), K, V), {"length": 1}), ValueError, "between"),
        (lambda Q, K, V: ((Q, K, V), {"length": 2.0}), TypeError, "length must be an int"),
        (lambda Q, K, V: ((Q, K, V), {"length": True}), TypeError, "length must be an int"),
    ],
)
@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_bad_input_is_refused_before_any_launch(variant, change, error, message, no_launch):
    arrays, params = change(*_inputs(4, 2, 1, 40, 64, seed=0))
    with pytest.raises(error, match=message):
        variant(*(np.ascontiguousarray(a) for a in arrays), **params)


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_a_head_size_past_256_is_out_of_range(variant, no_launch):
    with pytest.raises(OutOfRange, match="d up to 256"):
        variant(*_inputs(2, 1, 1, 5, 264, seed=0))


def test_v03_refuses_more_rows_a_kv_head_than_it_keeps_in_registers(no_launch):
    DECODE["v03"].module.validate(*_inputs(16, 1, 1, 5, 64, seed=0))  # 16 rows: at the limit
    with pytest.raises(OutOfRange, match="at most 16, got 32"):
        DECODE["v03"](*_inputs(16, 1, 2, 5, 64, seed=0))


def test_the_torch_row_is_unavailable_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    Q, K, V = _inputs(4, 2, 1, 40, 64, seed=0)
    with pytest.raises(Unavailable, match="PyTorch"):
        DECODE.module.torch_sdpa(Q, K, V, np.empty_like(Q))


def test_flops_and_bytes_at_llama_3_8b():
    size = (32, 8, 8192, 128)
    assert DECODE.bytes_moved(size) == 2 * 2 * 8 * 8192 * 128 + 4 * 32 * 128  # 33.5 MB of cache, 16 KB of q and o
    assert DECODE.flops(size) == 4 * 32 * 8192 * 128


VECTOR_STEPS = [DECODE["v04"], DECODE["v05"], DECODE["v06"]]  # the steps that read the cache 16 bytes a load


@pytest.mark.parametrize("variant", VECTOR_STEPS, ids=lambda v: v.name)
def test_a_head_size_of_no_whole_16_byte_pieces_or_more_rows_than_registers_is_out_of_range(variant, no_launch):
    with pytest.raises(OutOfRange, match="d a multiple of 8, got 36"):
        variant(*_inputs(2, 1, 1, 5, 36, seed=0))
    variant.module.validate(*_inputs(8, 1, 1, 5, 64, seed=0))  # 8 rows: at the limit
    with pytest.raises(OutOfRange, match="at most 8, got 16"):
        variant(*_inputs(8, 1, 2, 5, 64, seed=0))


@pytest.mark.parametrize("variant", VECTOR_STEPS, ids=lambda v: v.name)
def test_a_cache_that_does_not_start_on_16_bytes_is_refused(variant, no_launch):
    from numba import cuda

    Q, K, V = _inputs(2, 1, 1, 9, 64, seed=0)
    shifted = cuda.to_device(np.concatenate([K.reshape(-1), K.reshape(-1)[:1]]))[1:].reshape(K.shape)
    with pytest.raises(ValueError, match="16-byte boundary"):
        variant(cuda.to_device(Q), shifted, cuda.to_device(V))


def test_v05_leaves_every_ticket_drawn_for_the_next_call():
    """The last block of each kv head resets its counter: a second call (the next token) merges at the right
    block again, and the counters read zero between calls."""
    from numba import cuda

    v05 = DECODE["v05"].module
    Q, K, V = _inputs(2, 2, 1, 17, 64, seed=4)  # two splits a kv head in the simulator: 16 keys and 1
    first = _check(DECODE["v05"], Q, K, V)
    _, _, most, _ = v05.plan(2, 1, 64, 2, 17, v05.most_blocks())
    tickets = v05.buffers(most, 64, 2, cuda.device_array)[2]  # the counters the call used
    assert not tickets.copy_to_host().any()
    np.testing.assert_array_equal(_check(DECODE["v05"], Q, K, V), first)


def test_v06_reads_the_length_from_the_device_and_a_second_call_at_another_length_is_right():
    """One device length array and one out, two calls, as a model's replayed graph makes them: capacity 48 in three
    splits of 16 (the simulator's iterations of 16 keys, 4 blocks), NaN from 40 on. At 17 the third split holds no key
    and must leave without drawing a ticket (else no block merges and out keeps its NaN); at 40, all three merge."""
    from numba import cuda

    Q, K, V = _inputs(2, 1, 1, 48, 64, seed=5)
    K[:, 40:] = V[:, 40:] = np.float16(np.nan)
    length = cuda.to_device(np.array([17], np.int32))
    out = cuda.to_device(np.full(Q.shape, np.nan, np.float16))
    arrays = [cuda.to_device(a) for a in (Q, K, V)]
    for filled in (17, 40):
        length.copy_to_device(np.array([filled], np.int32))
        DECODE["v06"](*arrays, length=length, out=out)
        ok, _, detail = harness.compare(out.copy_to_host(), DECODE.reference(Q, K, V, length=filled), DECODE.TOLERANCE)
        assert ok, f"length {filled} on the device: {detail}"


@pytest.mark.parametrize(
    "length,message",
    [
        (lambda cuda: cuda.to_device(np.array([3], np.int64)), "one-element int32"),
        (lambda cuda: cuda.to_device(np.array([3, 4], np.int32)), "one-element int32"),
        (lambda cuda: np.array([3], np.int32), "length must be an int"),
    ],
)
def test_a_device_length_of_another_form_is_refused_and_earlier_steps_refuse_one(length, message, no_launch):
    from numba import cuda

    arrays = _inputs(2, 1, 1, 9, 64, seed=0)
    with pytest.raises(TypeError, match=message):
        DECODE["v06"](*arrays, length=length(cuda))
    with pytest.raises(TypeError, match="v05 plans its launch from the length on the host"):
        DECODE["v05"](*arrays, length=cuda.to_device(np.array([3], np.int32)))
