"""The attention backward pass beyond the generic checks: the reference against finite differences of the forward,
each gradient on its own, garbage in out and a second call, wrong saved statistics caught, bad input refused before
any launch, the FLOP convention and the torch row's absence.

In the simulator these run at small sizes; on a GPU the same file runs with

    ZOO_TARGET=gpu python -m pytest tests/kernels/test_attention_backward.py -v
"""

import math
import sys

import numpy as np
import pytest

import zoo
from zoo.bench import harness
from zoo.errors import OutOfRange, Unavailable

BACKWARD = zoo.family("attention_backward")
FORWARD = zoo.family("attention")
STEPS = BACKWARD.variants
# The steps whose kernels the simulator runs here: the first and the last (every tensor-core idea in one kernel; the
# generic checks run each step at the family's sizes); a GPU runs every step.
RUN_STEPS = (STEPS[0], STEPS[-1]) if zoo.SIMULATOR else STEPS
TINY = (2, 9, 64)  # two heads, a partial tile of keys and of queries on every step


def _inputs(size, seed, kind="full", causal=False):
    """The family's inputs, with O and L of a causal forward where ``causal`` (the gqa kind's are of a full one)."""
    Q, K, V, O, dO, L = BACKWARD.inputs(size, seed, kind)
    if causal and kind != "causal":
        O, L = BACKWARD.module.forward(Q, K, V, causal=True)
        O, L = O.astype(np.float16), L.astype(np.float32)
    return Q, K, V, O, dO, L


def _errors(out, ref, bh):
    """The relative error of dQ, dK and dV, each against its own reference."""
    got = BACKWARD.module.gradients(np.asarray(out), bh)
    want = BACKWARD.module.gradients(ref, bh)
    return [harness.relative_error(g, w) for g, w in zip(got, want, strict=True)]


def test_the_reference_is_the_gradient_of_the_forward():
    """Central differences of loss = sum(O * dO), O the attention family's float64 forward, against the reference's
    dQ, dK and dV (2 q heads over 1 kv head, causal): the reference is what it claims to be, or every check is moot."""
    inputs = BACKWARD.inputs((2, 5, 8), 3, "gqa")
    Q, K, V, _, dO, _ = inputs
    ref = BACKWARD.reference(*inputs, causal=True)
    dQ, dK, dV = BACKWARD.module.gradients(ref, 2)

    def loss(q, k, v):
        return float((FORWARD.module.reference(q, k, v, causal=True) * dO).sum())

    x = [a.astype(np.float64) for a in (Q, K, V)]
    rng = np.random.default_rng(0)
    for which, grad in enumerate((dQ, dK, dV)):
        for _ in range(4):
            at = tuple(int(rng.integers(s)) for s in x[which].shape)
            up, down = [a.copy() for a in x], [a.copy() for a in x]
            up[which][at] += 1e-6
            down[which][at] -= 1e-6
            numeric = (loss(*up) - loss(*down)) / 2e-6
            assert math.isclose(numeric, grad[at], rel_tol=1e-5, abs_tol=1e-7), (which, at, numeric, grad[at])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("variant", RUN_STEPS, ids=lambda v: v.name)
def test_each_gradient_is_right_on_its_own(variant, causal):
    """dQ, dK and dV each within the tolerance of their own float64 reference, not only the three together."""
    inputs = BACKWARD.inputs(TINY, 4, "causal" if causal else "full")
    out = variant(*inputs, causal=causal)
    errors = _errors(out, BACKWARD.reference(*inputs, causal=causal), TINY[0])
    assert max(errors) <= BACKWARD.tolerance(TINY), errors


@pytest.mark.parametrize("variant", RUN_STEPS, ids=lambda v: v.name)
def test_large_scores_give_finite_correct_gradients(variant):
    """Query rows scaled by 1000 give scores in the thousands and L as large: P must come from exp(c s - L), never
    from exp(c s) / exp(L), which overflows to inf and then NaN. Causal, so that row 0's one key gives P = 1."""
    Q, K, V, _, dO, _ = BACKWARD.inputs(TINY, 9, "causal")
    Q[0, 3] *= np.float16(1000)
    Q[1, 0] *= np.float16(-1000)
    O, L = BACKWARD.module.forward(Q, K, V, causal=True)
    inputs = (Q, K, V, O.astype(np.float16), dO, L.astype(np.float32))
    assert np.abs(L).max() > 100
    out = variant(*inputs, causal=True)
    assert np.isfinite(out).all()
    ok, err, detail = harness.compare(out, BACKWARD.reference(*inputs, causal=True), BACKWARD.tolerance(TINY))
    assert ok, detail


@pytest.mark.parametrize("variant", RUN_STEPS, ids=lambda v: v.name)
def test_garbage_in_out_and_a_second_call_with_other_shapes(variant):
    """dQ is summed by atomics into out: a step must clear it first. out starts as garbage (not NaN, which the generic
    check's poison is), and the second call is d = 80 causal with 2 q heads over 1 kv head."""
    for size, seed, kind, causal in (((1, 9, 64), 1, "full", False), ((2, 9, 80), 2, "gqa", True)):
        inputs = _inputs(size, seed, kind, causal)
        shape, dtype = BACKWARD.output_for(*inputs, causal=causal)
        out = np.full(shape, 1e3, dtype)
        variant(*inputs, out=out, causal=causal)
        ok, err, detail = harness.compare(out, BACKWARD.reference(*inputs, causal=causal), BACKWARD.tolerance(size))
        assert ok, f"{size} {kind} causal={causal}: {detail}"


@pytest.mark.parametrize("variant", RUN_STEPS, ids=lambda v: v.name)
def test_wrong_saved_statistics_fail_the_check(variant):
    """The steps trust L and O: an L off by log 2 (every P halved) or an O of another input gives gradients the
    comparison rejects, so the check can fail."""
    inputs = BACKWARD.inputs(TINY, 5)
    ref = BACKWARD.reference(*inputs)
    Q, K, V, O, dO, L = inputs
    for wrong in ((Q, K, V, O, dO, L + np.float32(math.log(2))), (Q, K, V, O[::-1].copy(), dO, L)):
        ok, err, detail = harness.compare(variant(*wrong), ref, BACKWARD.tolerance(TINY))
        assert not ok and err > 10 * BACKWARD.tolerance(TINY), detail


@pytest.mark.parametrize(
    "bad,error,message",
    [
        (lambda Q, K, V, O, dO, L: (Q, K, V, O, dO, L.astype(np.float16)), TypeError, "L must be float32"),
        (lambda Q, K, V, O, dO, L: (Q, K, V, O[:, :-1], dO, L), ValueError, "O and dO must have Q's shape"),
        (lambda Q, K, V, O, dO, L: (Q, K, V, O, dO, L[:, :-1]), ValueError, "L its"),
        (lambda Q, K, V, O, dO, L: (Q, K[:, :-1], V[:, :-1], O, dO, L), ValueError, "share seq and d"),
        (lambda Q, K, V, O, dO, L: (Q, K, V, O, dO.astype(np.float32), L), TypeError, "dO must be float16"),
    ],
)
@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_bad_input_is_refused_before_any_launch(variant, bad, error, message, no_launch):
    inputs = BACKWARD.inputs(TINY, 0)
    with pytest.raises(error, match=message):
        variant(*(np.ascontiguousarray(a) for a in bad(*inputs)))


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: v.name)
def test_a_head_size_past_the_steps_is_out_of_range_before_any_launch(variant, no_launch):
    inputs = BACKWARD.inputs((1, 3, 264), 0)
    with pytest.raises(OutOfRange, match="got d = 264"):
        variant(*inputs)


def test_flops_are_two_and_a_half_forwards():
    """FlashAttention-2's convention: five n x n x d products against the forward's two, causal halved alike."""
    for size in ((32, 4096, 64), (3, 77, 128)):
        for causal in (False, True):
            assert BACKWARD.flops(size, causal=causal) == 2.5 * FORWARD.flops(size, causal=causal)


def test_the_torch_row_says_it_is_unavailable_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    inputs = BACKWARD.inputs(TINY, 0)
    with pytest.raises(Unavailable, match="PyTorch"):
        BACKWARD.module.torch_sdpa_backward(*inputs, None)


@pytest.mark.parametrize("variant", STEPS[1:], ids=lambda v: v.name)
def test_tensor_core_head_sizes_are_multiples_of_16_up_to_128(variant, no_launch):
    """mma's k is 16 columns, and dK and dV of a warp's 16 keys live in registers: past d = 128 they would spill."""
    for d in (16, 80, 128):
        variant.module.validate(*BACKWARD.inputs((1, 3, d), 0))
    for d in (72, 144, 256):
        with pytest.raises(OutOfRange, match=f"multiple of 16 up to 128.*got d = {d}"):
            variant.module.validate(*BACKWARD.inputs((1, 3, d), 0))


@pytest.mark.parametrize("variant", [BACKWARD["v02"], BACKWARD["v05"]], ids=lambda v: v.name)
def test_the_gpus_four_warps(variant, monkeypatch):
    """The simulator's blocks have 2 warps, the GPU's 4: with 4, two warps share each 16 queries of dQ (its columns
    split in two) and a block's 64 keys span two tiles of queries, which only this test runs before a GPU does. 2 q
    heads over 1 kv head, causal; v05's one head at 66 positions and d = 32 (dQ's halves 16 columns, added four at
    a time), its second block starting its walk at query 64 (v03's skip, v04's double buffer)."""
    step = variant.module
    build = step.build
    monkeypatch.setattr(step, "build", lambda d, **kw: build(d, WARPS=4, **kw))
    inputs = _inputs((1, 66, 32), 6, "causal") if variant.number == 5 else _inputs((2, 9, 64), 6, "gqa", causal=True)
    out = variant(*inputs, causal=True)
    errors = _errors(out, BACKWARD.reference(*inputs, causal=True), 2)
    assert max(errors) <= BACKWARD.tolerance(inputs[0].shape), errors


@pytest.mark.parametrize("variant", STEPS[2:] if not zoo.SIMULATOR else STEPS[2:3], ids=lambda v: v.name)
def test_the_causal_skip_skips_the_query_tiles_above_the_diagonal_and_stays_right(variant):
    """40 positions: the second block of keys (from key 32 in the simulator's blocks) starts at query tile 32, the
    first tile skipped; a skip one tile too far would drop the diagonal's pairs and fail."""
    inputs = BACKWARD.inputs((1, 40, 32), 7, "causal")
    out = variant(*inputs, causal=True)
    errors = _errors(out, BACKWARD.reference(*inputs, causal=True), 1)
    assert max(errors) <= BACKWARD.tolerance((1, 40, 32)), errors


# (step, size, kind, causal): the generic sizes fit in one tile of 64. In v06, 77 positions make two blocks of keys
# and two tiles of queries, the second of each partial; 130 causal make three, each block's walk starting at its
# diagonal tile; d = 128 with 2 q heads over 1 kv head walks the group's heads in turn and adds dQ in two 64-column
# blocks; d = 80 pads the tiles to 128 columns, the second block of dQ two-thirds padding.
CROSSING = [
    ("v06", (1, 77, 64), "full", False),
    ("v06", (1, 130, 64), "causal", True),
    ("v06", (2, 77, 128), "gqa", True),
    ("v06", (1, 70, 80), "full", False),
]


@pytest.mark.parametrize(
    "step,size,kind,causal", CROSSING, ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2]}-{c[3]}" for c in CROSSING]
)
def test_hopper_steps_cross_key_and_query_tiles(step, size, kind, causal):
    variant = BACKWARD[step]
    inputs = _inputs(size, 8, kind, causal=causal)
    out = variant(*inputs, causal=causal)
    errors = _errors(out, BACKWARD.reference(*inputs, causal=causal), size[0])
    assert max(errors) <= BACKWARD.tolerance(size), errors


@pytest.mark.parametrize("kind", BACKWARD.kinds)
def test_the_cupy_baseline_composes_the_right_gradients(kind, monkeypatch):
    """The baseline's ops (matmuls over grouped heads, the transposes of dS and P, the mask) run by NumPy, which has
    every function it calls: its reshapes are checked without a GPU. NumPy's float16 products stay within tolerance."""
    monkeypatch.setitem(sys.modules, "cupy", np)
    inputs = BACKWARD.inputs((4, 20, 32), 8, kind)
    params = BACKWARD.kind_params(kind)
    shape, dtype = BACKWARD.output_for(*inputs, **params)
    out = np.full(shape, np.nan, dtype)
    BACKWARD.module.baseline(*inputs, out, **params)
    errors = _errors(out, BACKWARD.reference(*inputs, **params), 4)
    assert max(errors) <= BACKWARD.tolerance((4, 20, 32)), errors
