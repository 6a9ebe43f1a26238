"""Attention beyond the generic checks: large scores, the causal mask's first row, one position, a second call,
bad input refused before any launch, the torch row's absence, the traffic arithmetic, the causal skip and exp2.

In the simulator these run at small sizes; on a GPU the same file runs with

    ZOO_TARGET=gpu python -m pytest tests/kernels/test_attention.py -v
"""

import math
import sys

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.bench import harness
from zoo.device.approx import exp2_approx
from zoo.device.jit import jit
from zoo.errors import OutOfRange, Unavailable

ATTENTION = zoo.family("attention")
STEPS = ATTENTION.variants
SMALL = (2, 17, 64)  # two heads, a partial block of keys and of queries on every step
TINY = (2, 9, 64)  # the same in fewer positions: the simulator runs every thread of every block
# v09 to v11 change how v08's tiles arrive and when its MMAs are issued, not what they compute, and run 384 simulator
# threads a block (several times v07's time): in the simulator the edge cases below run up to v08, and v09 to v11 meet
# the generic sizes (one position among them) and test_hopper_steps_cross_query_and_key_blocks; on a GPU every step
# runs every test
EDGE_STEPS = STEPS if not zoo.SIMULATOR else [v for v in STEPS if v.number <= 8]


def _check(variant, Q, K, V, causal):
    out = variant(Q, K, V, causal=causal)
    ref = ATTENTION.reference(Q, K, V, causal=causal)
    ok, err, detail = harness.compare(out, ref, ATTENTION.tolerance(Q.shape))
    return out, ok, detail


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("variant", EDGE_STEPS, ids=lambda v: v.name)
def test_large_scores_give_finite_correct_rows(variant, causal):
    """Query rows scaled by 1000 give scores in the thousands: an unsafe exp overflows to inf and then NaN."""
    Q, K, V = ATTENTION.make_inputs(TINY, seed=7)
    Q[0, 3] *= np.float16(1000)
    Q[1, 8] *= np.float16(-1000)
    assert np.abs(ATTENTION.reference(Q, K, V)[0, 3]).max() > 0  # the reference copes (float64)
    scores = Q[0, 3].astype(np.float64) @ K[0].astype(np.float64).T / 8
    assert np.abs(scores).max() > 1000  # exp(1000) overflows float32 and float64 alike
    out, ok, detail = _check(variant, Q, K, V, causal)
    assert np.isfinite(out.astype(np.float32)).all()
    assert ok, detail


@pytest.mark.parametrize("variant", EDGE_STEPS, ids=lambda v: v.name)
def test_causal_first_row_is_the_first_value_row_exactly(variant):
    """Query 0 sees key 0 alone: its probability is 1 and O[0] = V[0], bit for bit in float16. Two q heads share one
    kv head (grouped KV heads): both rows 0 are kv head 0's V[0]."""
    Q, K, V = ATTENTION.make_inputs(TINY, seed=8, kind="gqa")
    assert K.shape[0] == 1
    out = variant(Q, K, V, causal=True)
    np.testing.assert_array_equal(out[:, 0], np.broadcast_to(V[0, 0], out[:, 0].shape))
    full = variant(Q, K, V)
    assert not np.array_equal(full[:, 0], np.broadcast_to(V[0, 0], out[:, 0].shape))  # unmasked, row 0 mixes V's rows


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("variant", EDGE_STEPS, ids=lambda v: v.name)
def test_one_position_returns_v(variant, d):
    """One key: every query row is V's row, its kv head's (2 q heads over 1 kv head) at d = 128."""
    Q, K, V = ATTENTION.make_inputs((2, 1, d), seed=9, kind="gqa" if d == 128 else "full")
    for causal in (False, True):
        np.testing.assert_array_equal(variant(Q, K, V, causal=causal), np.broadcast_to(V, Q.shape))


@pytest.mark.parametrize("variant", EDGE_STEPS, ids=lambda v: v.name)
def test_a_second_call_with_other_inputs_and_shapes_is_right(variant):
    """Kept buffers (v01's scores), cached kernels and a partial last block must not leak into the next call. The
    second call is d = 80 with 2 q heads over 1 kv head, causal: 10 chunks of 16 bytes a row (a partial last pass of
    the copies from v04 on), two and a half 32-column groups in v02 and v03."""
    for size, seed, kind, causal in (
        ((1, 20, 128), 1, "full", False),
        ((2, 17, 80), 2, "gqa", True),
        ((1, 9, 64), 3, "full", False),
    ):
        Q, K, V = ATTENTION.make_inputs(size, seed, kind=kind)
        _, ok, detail = _check(variant, Q, K, V, causal)
        assert ok, f"{size} {kind} causal={causal}: {detail}"


@pytest.mark.parametrize(
    "bad,error,message",
    [
        (lambda Q, K, V: (Q, K[:, :-1], V[:, :-1]), ValueError, "share seq and d"),
        (lambda Q, K, V: (Q, K, V[:1]), ValueError, "K and V one shape"),
        (lambda Q, K, V: (Q, *(np.concatenate([a, a, a[:1]]) for a in (K, V))), ValueError, "whole number of groups"),
        (lambda Q, K, V: (Q[..., :0], K[..., :0], V[..., :0]), ValueError, "empty"),
        (lambda Q, K, V: (Q.astype(np.float32), K, V), TypeError, "must be float16"),
        (lambda Q, K, V: tuple(a.astype(np.float32) for a in (Q, K, V)), TypeError, "must be float16"),
        (lambda Q, K, V: (Q[0], K[0], V[0]), ValueError, "3 dimension"),
    ],
)
@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_bad_input_is_refused_before_any_launch(variant, bad, error, message, no_launch):
    Q, K, V = ATTENTION.make_inputs(SMALL, seed=0)
    with pytest.raises(error, match=message):
        variant(*(np.ascontiguousarray(a) for a in bad(Q, K, V)))


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_a_head_size_the_tiling_cannot_take_is_out_of_range_before_any_launch(variant, no_launch):
    """d = 72 (a multiple of 8, not 16) is for the steps up to v04; d = 264 is past every fused step's 256."""
    for d in (72, 264):
        Q, K, V = ATTENTION.make_inputs((1, 3, d), seed=0)
        takes = variant.number == 1 or (d == 72 and variant.number <= 4)
        if takes:
            variant.module.validate(Q, K, V)
            continue
        with pytest.raises(OutOfRange, match=f"takes .* up to 256.*got d = {d}"):
            variant(Q, K, V)


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_a_head_size_no_tile_divides(variant):
    """d = 24: 16 columns and 8 (v01's second tile and v04's last 8-column group partial, v02's and v03's one
    32-column group three quarters used), 9 positions. From v05 on (mma's k of 16) it is out of range, before any
    launch."""
    Q, K, V = ATTENTION.make_inputs((2, 9, 24), seed=15)
    if variant.number >= 5:
        with pytest.raises(OutOfRange, match="multiple of 16 up to 256.*got d = 24"):
            variant.module.validate(Q, K, V)
        return
    _, ok, detail = _check(variant, Q, K, V, causal=False)
    assert ok, detail


@pytest.mark.parametrize("variant", [ATTENTION[s] for s in ("v02", "v03", "v05", "v07")], ids=lambda v: v.name)
def test_head_size_256_with_grouped_kv_heads(variant):
    """d = 256, the fused steps' largest: 2 q heads over 1 kv head, 3 positions. v05 and v07 re-read Q's fragments each
    block of keys past d = 128 (v06 as v07 does). v01, v04 and v06 are checked at d = 256 on the GPU (GPU_TEST_SIZES),
    where every step is; here v01 and v04 meet a partial column tile at d = 24."""
    Q, K, V = ATTENTION.make_inputs((2, 3, 256), seed=14, kind="gqa")
    assert K.shape[0] == 1
    _, ok, detail = _check(variant, Q, K, V, causal=False)
    assert ok, detail


HOPPER_STEPS = [v for v in STEPS if v.number >= 8]  # wgmma from v08 on: 64 query rows a warpgroup


@pytest.mark.parametrize(
    "size,kind,causal",
    [((1, 77, 64), "full", False), ((1, 77, 64), "full", True), ((4, 31, 128), "gqa", True)],
    ids=["77-full", "77-causal", "31x128-gqa-causal"],
)
@pytest.mark.parametrize("variant", HOPPER_STEPS, ids=lambda v: v.name)
def test_hopper_steps_cross_query_and_key_blocks(variant, size, kind, causal):
    """77 positions: two blocks of 64 query rows and two of the simulator's 64 keys, the second of each partial, the
    diagonal's block masked and the one above it skipped; d = 128 with 4 q heads over 1 kv head, causal."""
    Q, K, V = ATTENTION.make_inputs(size, seed=21, kind=kind)
    _, ok, detail = _check(variant, Q, K, V, causal)
    assert ok, detail


@pytest.mark.skipif(zoo.SIMULATOR, reason="needs a GPU: the issue's sizes (1 to 4099 positions, d up to 256)")
@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_grouped_kv_heads_with_the_causal_mask_at_gpu_sizes(variant):
    """The gqa kind with the causal mask at every GPU_TEST_SIZES (the generic checks run each kind alone)."""
    for i, size in enumerate(ATTENTION.GPU_TEST_SIZES):
        Q, K, V = ATTENTION.make_inputs(size, seed=200 + i, kind="gqa")
        try:
            variant.module.validate(Q, K, V, causal=True)
        except OutOfRange:
            continue  # a size the step does not take (v02's length limit): the generic checks test the refusal
        _, ok, detail = _check(variant, Q, K, V, causal=True)
        assert ok, f"{size} ({K.shape[0]} kv heads): {detail}"


@pytest.mark.parametrize("causal", ["yes", 1, None])
def test_causal_must_be_a_bool(causal, no_launch):
    Q, K, V = ATTENTION.make_inputs(SMALL, seed=0)
    with pytest.raises(TypeError, match="causal must be True or False"):
        ATTENTION["v07"](Q, K, V, causal=causal)


def test_sizes_past_the_index_and_shared_memory_limits_are_out_of_range():
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (2**20, 4096, 64), (0, 0, 0))
    with pytest.raises(OutOfRange, match="2\\^32"):
        ATTENTION["v07"].module.validate(huge, huge, huge)
    long = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (1, 70_000, 64), (0, 0, 0))
    with pytest.raises(OutOfRange, match="BH n\\^2"):
        ATTENTION["v01"].module.validate(long, long, long)
    v02 = ATTENTION["v02"].module
    limit = v02.max_seq(64)
    optin = zoo.device.properties().get("shared_bytes_per_block_optin") or v02.HOPPER_OPTIN
    staged = v02.ROWS * 64 * 4  # the block's query rows, float32
    assert staged + v02.ROWS * limit * 4 <= optin < staged + v02.ROWS * (limit + 1) * 4  # one more would not fit
    if not zoo.SIMULATOR:
        assert 5_000 < limit < 8_000  # 8 rows of float32 scores in an H100's (or A100's) opt-in shared memory
    at_limit = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (1, limit, 64), (0, 0, 0))
    v02.validate(at_limit, at_limit, at_limit)
    past = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (1, limit + 1, 64), (0, 0, 0))
    with pytest.raises(OutOfRange, match=f"at most {limit}"):
        v02.validate(past, past, past)


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_a_device_array_off_a_16_byte_boundary(variant):
    """v04 on copy 16 bytes at a time: a view that starts 2 bytes into a buffer is refused, not read misaligned."""
    Q, K, V = ATTENTION.make_inputs((1, 5, 64), seed=6)
    buffer = cuda.to_device(np.concatenate([np.zeros(1, np.float16), Q.ravel()]))
    shifted = buffer[1:].reshape(Q.shape)  # C-contiguous, 2 bytes past a boundary
    if variant.number < 4:  # element-wise loads: any address will do
        out = variant(shifted, cuda.to_device(K), cuda.to_device(V)).copy_to_host()
        np.testing.assert_array_equal(out, variant(Q, K, V))
        return
    with pytest.raises(ValueError, match="16-byte boundary"):
        variant(shifted, cuda.to_device(K), cuda.to_device(V))


def test_the_torch_row_is_unavailable_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    Q, K, V = ATTENTION.make_inputs(SMALL, seed=0)
    with pytest.raises(Unavailable, match="PyTorch"):
        ATTENTION.module.torch_sdpa(Q, K, V, np.empty_like(Q))
    assert "torch sdpa" in ATTENTION.baselines


def test_traffic_and_flops_arithmetic():
    """v01 moves 20 bytes per score through DRAM beyond the 8 BH n d the fused steps need."""
    v01 = ATTENTION["v01"].module
    size = (32, 4096, 64)
    assert v01.score_bytes(size) == 20 * 32 * 4096**2 == 10_737_418_240
    assert ATTENTION.bytes_moved(size) == 8 * 32 * 4096 * 64 == 67_108_864
    assert v01.score_bytes(size) / ATTENTION.bytes_moved(size) == 160  # 20 n / (8 d)
    assert ATTENTION.flops(size) == 4 * 32 * 4096**2 * 64
    assert ATTENTION.flops((1, 5, 64), causal=True) == 4 * 64 * 15  # 15 pairs j <= i of 5 positions
    assert ATTENTION.kind_params("causal") == {"causal": True} and ATTENTION.kind_params("full") == {}


def test_reference_against_the_formula():
    Q, K, V = ATTENTION.make_inputs((1, 5, 64), seed=4)
    q, k, v = (a[0].astype(np.float64) for a in (Q, K, V))
    s = q @ k.T / 8
    p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ATTENTION.reference(Q, K, V)[0], p @ v, rtol=1e-12)
    s[np.triu_indices(5, 1)] = -np.inf
    p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ATTENTION.reference(Q, K, V, causal=True)[0], p @ v, rtol=1e-12)


@pytest.mark.parametrize("group", [1, 2, 3, 5])
def test_the_causal_grid_visits_every_head_and_query_block_once(group):
    """v07's causal 1-D grid in groups of heads, a smaller first group when they do not divide: three heads of three
    query blocks each (80 positions) in groups of 1, 2 (1 + 2), 3 (all of them) and more than the heads."""
    Q, K, V = ATTENTION.make_inputs((3, 80 if zoo.SIMULATOR else 150, 64), seed=11)
    out = cuda.to_device(np.full(Q.shape, np.nan, np.float16))  # poisoned: a block never run leaves NaN rows
    ATTENTION["v07"].module.launch(*(cuda.to_device(a) for a in (Q, K, V)), out, causal=True, group=group)
    ok, _, detail = harness.compare(
        out.copy_to_host(), ATTENTION.reference(Q, K, V, causal=True), ATTENTION.tolerance(Q.shape)
    )
    assert ok, detail


def test_a_causal_group_holds_half_the_l2s_worth_of_k_and_v():
    v07 = ATTENTION["v07"].module
    l2_bytes = zoo.device.properties().get("l2_bytes") or zoo.device.HOPPER["l2_bytes"]
    assert v07.heads_per_group(4096, 128) == l2_bytes // 2 // (4096 * 128 * 4)  # 12 on an H100's 50 MiB
    assert v07.heads_per_group(2**20, 128) == 1  # one head's K and V past half the L2: a head at a time


@pytest.mark.skipif(not zoo.SIMULATOR, reason="counts the emulated mma calls: the simulator's Python functions")
def test_the_causal_step_skips_the_key_blocks_above_the_diagonal(monkeypatch):
    """With the simulator's 32 x 32 blocks, 64 positions are 2 x 2 blocks: causal, block (0, 1) is never computed."""
    module = ATTENTION["v07"].module
    calls = []
    real = module.mma_f16_f32
    monkeypatch.setattr(module, "mma_f16_f32", lambda *regs: calls.append(1) or real(*regs))
    counts = {}
    for causal in (False, True):
        calls.clear()
        Q, K, V = ATTENTION.make_inputs((1, 64, 64), seed=5)
        _, ok, detail = _check(ATTENTION["v07"], Q, K, V, causal)
        assert ok, detail
        counts[causal] = len(calls)
    assert counts[True] * 4 == counts[False] * 3  # 3 of the 4 block pairs


@jit
def exp2_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = exp2_approx(x[i])


def test_exp2_approx_matches_exp2_and_sends_minus_infinity_to_zero():
    x = np.array([-np.inf, -200.0, -30.5, -1.0, 0.0, 1e-7, 0.5, 3.25, 20.0, 100.0], np.float32)
    out = np.full_like(x, np.nan)
    exp2_kernel[1, 32](x, out)
    assert out[0] == 0 and out[1] == 0  # below 2^-126 the hardware flushes to zero (the simulator keeps 6e-61)
    assert out[4] == 1.0
    np.testing.assert_allclose(out[2:], np.exp2(x[2:].astype(np.float64)), rtol=2e-6)
    assert math.isfinite(out[-1])
