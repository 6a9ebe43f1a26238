"""Argmax beyond the generic checks: equal maxima give the first index, within a thread, a warp and across chunks."""

import numpy as np
import pytest

import zoo
from zoo.kernels.argmax import CHUNK

ARGMAX = zoo.family("argmax")


@pytest.mark.parametrize("variant", list(ARGMAX), ids=lambda v: v.name)
def test_equal_maxima_give_the_first_index(variant):
    cols = CHUNK + 70  # two chunks for v02
    logits = np.zeros((4, cols), np.float32)
    logits[0, [5, 5 + 64, cols - 1]] = 3.0  # one thread's share twice (stride 64 or more), and the last chunk
    logits[1, [cols - 1, CHUNK]] = 2.0  # both in the second chunk
    logits[2, [1, 0]] = 1.0  # lanes 0 and 1 of one warp
    logits[3] = -1.0  # all equal: index 0
    assert variant(logits).tolist() == [5, CHUNK, 0, 0]
