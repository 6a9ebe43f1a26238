"""A prompt's prefill (GEMMs, the forward attention) against the float64 NumPy model stepped token by token (issue 66).

In the simulator the tiny model with each family's first step (the last steps' wgmma kernels take minutes there);
on a GPU with the last steps this GPU runs too. Each test draws a fresh seeded prompt of an odd length, and checks
the last position's logits, the token chosen after the prompt, every position's K and V in the cache, and a decode
token taken from there.
"""

import numpy as np
import pytest
from model_checks import LOGITS_TOLERANCE, greedy, relative
from numba import cuda

import zoo
from zoo.llm import config, decode, prefill, reference, weights
from zoo.llm.weights import Weights

CACHE_TOLERANCE = 2e-3  # K and V rounded to float16 once after a float32 GEMM: 2^-11 at worst; measured 3e-4 to 5e-4
WHICH = ("first",) if zoo.SIMULATOR else ("first", "last")


@pytest.fixture(scope="module")
def tiny():
    return Weights(config.TINY, seed=1)


def _prompt(seed, length):
    return np.random.default_rng(seed).integers(0, config.TINY.vocab, length)


@pytest.mark.parametrize("which", WHICH)
def test_prefill_matches_the_model_stepped_token_by_token(tiny, which):
    prompt = _prompt(seed=5, length=5)
    decoder = decode.Decoder(tiny)
    run = prefill.Prefill(decoder, which)
    for attempt in range(2):  # right on the second call too, over a cache and outputs poisoned in between
        if attempt:
            poison = np.full(decoder.k_cache.shape, np.nan, np.float16)
            decoder.k_cache.copy_to_device(poison)
            decoder.v_cache.copy_to_device(poison)
            decoder.logits.copy_to_device(np.full(decoder.logits.shape, np.nan, np.float32))
        run.run(prompt)
        ref = reference.Reference(tiny)
        logits = [ref.step(int(token), position) for position, token in enumerate(prompt)]
        assert relative(decoder.logits.copy_to_host()[0], logits[-1]) < LOGITS_TOLERANCE, attempt
        other = reference.Reference(tiny)  # the check can fail: another prompt's logits are far off
        other_logits = [other.step(int(token), position) for position, token in enumerate(_prompt(6, prompt.size))]
        assert relative(decoder.logits.copy_to_host()[0], other_logits[-1]) > 0.1
        tokens, position = decoder.sequence()
        assert position == prompt.size and tokens[:-1].tolist() == prompt.tolist()
        assert greedy(logits[-1], tokens[-1]), attempt  # the token after the prompt: the greedy choice
        for cache, stored in ((decoder.k_cache, ref.keys), (decoder.v_cache, ref.values)):
            host = cache.copy_to_host()
            for layer in range(config.TINY.layers):
                want = np.stack(stored[layer], 1)  # kv heads x positions x d
                assert relative(host[layer, :, : prompt.size], want) < CACHE_TOLERANCE, (attempt, layer)
    # a decode token from where the second prefill left off reads the prompt's cache (the positions past it: NaN)
    decoder.generate(1, decode.lever("naive"))
    following = ref.step(int(tokens[-1]), prompt.size)
    assert relative(decoder.logits.copy_to_host()[0], following) < LOGITS_TOLERANCE
    assert greedy(following, decoder.sequence()[0][-1])


def test_a_prompt_of_one_token_is_the_first_decode_step(tiny):
    decoder = decode.Decoder(tiny)
    prefill.Prefill(decoder, "first").run([7])
    want = reference.Reference(tiny).step(7, 0)
    assert relative(decoder.logits.copy_to_host()[0], want) < LOGITS_TOLERANCE
    assert decoder.sequence()[1] == 1


@pytest.mark.parametrize(
    "prompt, message",
    [
        ([], "non-empty"),
        ([[1, 2]], "1-D"),
        ([0.5, 1.0], "token ids"),
        ([3, config.TINY.vocab], "must be in"),
        ([-1], "must be in"),
        ([1] * config.TINY.max_context, "pass the cache"),
    ],
)
def test_bad_prompts_are_refused_before_any_launch(tiny, prompt, message):
    decoder = decode.Decoder(tiny)
    before = decoder.k_cache.copy_to_host()
    run = prefill.Prefill(decoder, "first")
    with pytest.raises(ValueError, match=message):
        run.run(prompt)
    assert run.transposed is None and np.array_equal(decoder.k_cache.copy_to_host(), before)


def test_the_transpose_is_exact_at_sizes_of_no_whole_tile():
    rng = np.random.default_rng(3)
    for shape in ((1, 1), (33, 70), (65, 31)):
        W = rng.standard_normal(shape).astype(np.float16)
        assert np.array_equal(weights.transposed(cuda.to_device(W)).copy_to_host(), W.T)


def test_the_sweep_counts_the_flops_and_draws_its_rows():
    from zoo.kernels.argmax.sweeps import prefill as sweep
    from zoo.tools import llm_budget

    c = config.LLAMA3_8B
    linear = sum(r * k for r, k in llm_budget.linear_shapes(c)[:-1])  # every layer's matrices, not the lm_head's
    triangle = 2 * 2 * c.heads * c.head_size * 1024 * 1025 / 2 * c.layers  # QK^T and PV, keys up to each query
    assert sweep.flops(c, 1024) == pytest.approx(2 * linear * 1024 + triangle + 2 * c.vocab * c.hidden)
    rows = [
        {"row": "zoo prefill (hgemm v15)", "prompt": 1024, "tokens_per_s": 9000.0, "tflops": 150.0, "vs_torch": 0.9},
        {"row": "torch eager prefill", "prompt": 1024, "tokens_per_s": 10000.0, "tflops": 166.0, "vs_torch": 1.0},
        {"row": "zoo prefill (hgemm v15)", "prompt": 4096, "tokens_per_s": 8000.0, "tflops": 160.0, "vs_torch": None},
    ]
    assert sweep.findings(rows) == [
        "prompt of 1024: 9,000 tokens/s, 150 TFLOP/s, 0.90x PyTorch eager's speed",
        "prompt of 4096: 8,000 tokens/s, 160 TFLOP/s",
    ]
    pytest.importorskip("matplotlib")
    assert len(sweep.plot(rows, "GPU").axes[0].patches) == 3


@pytest.mark.skipif(zoo.SIMULATOR, reason="the last steps' wgmma kernels take minutes in the simulator: a GPU's test")
def test_the_sweep_rows_on_the_tiny_model():
    """prefill_rows' path (runs, timing, the split by kind) on the tiny model: the GPU run is not the first to
    execute it."""
    from zoo.kernels.argmax.sweeps import prefill as sweep

    rows = sweep.prefill_rows(config.TINY, [1, 9], 1, 1, lambda decoder: None)
    assert [r["prompt"] for r in rows] == [1, 9] and all(r["tokens_per_s"] > 0 for r in rows)
    assert "hgemm" in rows[1]["time_by_kind"] and "attention" in rows[1]["time_by_kind"]
