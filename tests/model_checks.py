"""What the model's tests (tests/llm) compare with: a relative error, and a greedy choice allowed a near tie."""

import numpy as np

# The logits' relative norm error a float16 model reaches against float64 NumPy: it rounds its activations to float16
# five times a layer (2^-11 each at worst) and adds in float32; measured 4e-4 to 7e-4 on the tiny model. A lost head,
# a wrong position or another sequence's row is an error of order 1.
LOGITS_TOLERANCE = 5e-3


def relative(got, want):
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def greedy(want, chosen):
    """Whether ``chosen`` is the greedy choice of the reference's logits ``want``: their argmax, or a token within
    float16's reach of it (1e-3 of the largest magnitude), where two correct models may part."""
    return chosen == np.argmax(want) or want[chosen] >= want.max() - 1e-3 * np.abs(want).max()
