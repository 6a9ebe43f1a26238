"""RoPE beyond the generic checks: a known rotation, and the dot product that depends on relative position only."""

import numpy as np
import pytest

import zoo

ROPE = zoo.family("rope")


@pytest.mark.parametrize("variant", list(ROPE), ids=lambda v: v.name)
def test_first_pair_turns_by_the_position(variant):
    d = 8
    x = np.zeros((2, 1, d), np.float32)
    x[:, 0, 0] = 1.0  # the unit vector of pair 0's first element: it turns by p radians (f_0 = 1)
    positions = np.array([0, 1], np.int32)
    y = variant(x, positions).astype(np.float64)
    np.testing.assert_allclose(y[0, 0], x[0, 0], atol=1e-3)
    assert y[1, 0, 0] == pytest.approx(np.cos(1.0), abs=1e-3)
    assert y[1, 0, d // 2] == pytest.approx(np.sin(1.0), abs=1e-3)


def test_scores_depend_on_relative_position_only():
    (q, k) = (ROPE.make_inputs((1, 1, 16), seed)[0] for seed in (1, 2))
    step = ROPE[len(ROPE)]

    def score(p_q, p_k):
        rq = step(q, np.array([p_q], np.int32)).astype(np.float64)
        rk = step(k, np.array([p_k], np.int32)).astype(np.float64)
        return float((rq * rk).sum())

    assert score(10, 3) == pytest.approx(score(107, 100), abs=2e-2)
    assert abs(score(10, 3) - score(10, 4)) > 2e-2  # and it does depend on it


def test_odd_heads_are_refused():
    x, positions = ROPE.make_inputs((2, 1, 6), 0)
    with pytest.raises(ValueError, match="even"):
        ROPE["v01"](x[..., :5].copy(), positions)
