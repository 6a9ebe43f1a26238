"""The model from the zoo's kernels against the same model in float64 NumPy, token by token (issue 66).

In the simulator: the tiny model (2 layers, hidden 64, 4 heads, 2 KV heads) in float16 with the model's own
attention, and in int4 with decode_attention's last step, with the families' first steps (the fast steps' gemv takes
seconds a call there); on a GPU every lever, the CUDA graphs' included. Each test generates a few tokens greedily
and checks, at every position, the logits against the reference's for the same tokens and the argmax against the
reference's own choice.
"""

import dataclasses

import numpy as np
import pytest

import zoo
from zoo.llm import config, decode, reference
from zoo.llm.weights import Weights

TOKENS = 2 if zoo.SIMULATOR else 4  # positions 0 and 1: the second token attends over two keys
# Logits' relative norm error: the decoder rounds its activations to float16 five times a layer (2^-11 each at
# worst) and adds in float32; measured 4e-4 to 7e-4 on the tiny model. A lost head or a wrong position is O(1).
LOGITS_TOLERANCE = 5e-3


@pytest.fixture(scope="module")
def tiny():
    weights = Weights(config.TINY, seed=1)
    weights.quantize(keep_plain=True)
    return weights


def _check(weights, lever, tokens=TOKENS):
    decoder = decode.Decoder(weights)
    decoder.start(3)
    ref = reference.Reference(weights, int4=lever.int4)
    errors = []
    for position in range(tokens):
        decoder.generate(1, lever)
        fed = int(decoder.tokens.copy_to_host()[position])
        want = ref.step(fed, position)
        got = decoder.logits.copy_to_host()[0]
        errors.append(np.linalg.norm(got - want) / np.linalg.norm(want))
    ours, position = decoder.sequence()
    theirs, _ = reference.Reference(weights, int4=lever.int4).generate(3, tokens)
    assert position == tokens and ours.tolist() == theirs, f"{lever.name}: tokens {ours.tolist()} != {theirs}"
    assert max(errors) < LOGITS_TOLERANCE, f"{lever.name}: logits' relative errors {errors}"


SIMULATED = [
    decode.lever("naive"),  # the model's own attention
    # the ladder's last lever with the first steps: int4 and decode_attention's last step (its length on the GPU)
    dataclasses.replace(decode.lever("fused"), name="int4, decode attention, first steps", int4=True,
                        family_attention=True),
]  # fmt: skip


@pytest.mark.parametrize("lever", SIMULATED if zoo.SIMULATOR else decode.LEVERS, ids=lambda lever: lever.name)
def test_tiny_model_matches_float64_numpy_token_by_token(tiny, lever):
    _check(tiny, lever)


def test_a_wrong_weight_is_caught(tiny):
    """The check can fail: the reference of other weights disagrees."""
    other = Weights(config.TINY, seed=2)
    decoder = decode.Decoder(tiny)
    decoder.start(3)
    decoder.generate(1, decode.lever("naive"))
    want = reference.Reference(other).step(3, 0)
    got = decoder.logits.copy_to_host()[0]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) > 0.1


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kv_heads": 3}, "do not divide"),
        ({"head_size": 15}, "even"),
        ({"max_context": 10_000}, "8192"),
    ],
)
def test_bad_configurations_are_refused_before_anything_runs(change, message):
    with pytest.raises(ValueError, match=message):
        Weights(dataclasses.replace(config.TINY, **change))


def test_a_context_beyond_the_cache_is_refused(tiny):
    decoder = decode.Decoder(tiny, max_context=4)
    with pytest.raises(ValueError, match="outside the cache"):
        decoder.start(3, position=4)
    decoder.start(3, position=1)
    with pytest.raises(ValueError, match="pass the cache"):
        decoder.generate(3, decode.lever("naive"))
    with pytest.raises(ValueError, match="cache holds up to"):
        decode.Decoder(tiny, max_context=17)


def test_decode_sweep_findings_and_plot_read_its_rows():
    from zoo.kernels.argmax.sweeps import decode as sweep

    rows = [
        {"lever": "CUDA graph", "tokens_per_s": 150.0, "pct_of_limit": 80.0, "limit_tokens_per_s": 187.5,
         "gb_per_token": 16.1, "vs_torch_eager": 1.4},
        {"lever": "int4", "tokens_per_s": 450.0, "pct_of_limit": 75.0, "limit_tokens_per_s": 600.0,
         "gb_per_token": 4.4, "vs_torch_eager": 4.2},
        {"lever": "torch.compile (60 s to compile)", "tokens_per_s": 140.0, "pct_of_limit": 75.0,
         "limit_tokens_per_s": 187.5, "gb_per_token": 16.1, "vs_torch_eager": 1.3},
        {"lever": "naive, tiny model: tokens same as float64 NumPy's", "tokens_per_s": None},
        {"lever": "prefill of the 1024-token prompt (hgemm v16)", "tokens_per_s": 40000.0, "ms_per_token": 0.025},
    ]  # fmt: skip
    found = sweep.findings(rows)
    assert found[0] == "prefill of the 1024-token prompt (hgemm v16): 40,000 tokens/s"
    assert found[1].startswith("CUDA graph: 150.0 tokens/s, 80% of its bandwidth limit")
    assert "4.20x PyTorch fp16 eager" in found[2] and "1.07x" in found[3]
    assert sweep.kinds_ms("gemv 5.51 ms 75%, rope and cache 0.273 ms 4%") == {"gemv": 5.51, "rope and cache": 0.273}
    assert sweep.kinds_ms("") == {} and sweep.kinds_ms(None) == {}
    rows[0]["time_by_kind"] = "gemv 5.51 ms 75%, attention 0.9 ms 12%"
    rows[1]["time_by_kind"] = "gemv 2.28 ms 56%, attention 0.88 ms 22%, rmsnorm 0.48 ms 12%"
    pytest.importorskip("matplotlib")
    tokens, split = sweep.plot(rows, "GPU").axes
    assert len(tokens.patches) == 3 and len(split.patches) == 2 * 3  # two levers split, three kinds each


@pytest.mark.skipif(zoo.SIMULATOR, reason="a GPU's test: about 10 s of CPU in the simulator (run there once, by hand)")
def test_decode_sweep_ladder_rows_on_the_tiny_model():
    """The ladder's code path (a lever's warm-up, restart, timing, tokens, comparison) on the tiny model, with a
    stand-in for PyTorch's rows: the GPU run is not the first to execute it."""
    import argparse

    from zoo.kernels.argmax.sweeps import decode as sweep

    args = argparse.Namespace(tokens=1, context=1, naive_tokens=1, levers="naive", seed=1, compile=False)

    def stand_in(decoder, first_token, args, row):
        logits = np.ones(decoder.config.vocab, np.float32)
        return [row("torch eager", 0.5, False, [first_token, 7])], [first_token, 7], logits

    rows = sweep.ladder(config.TINY, args, 1.0, stand_in)
    assert [r["lever"] for r in rows][:2] == ["naive", "torch eager"]
    assert rows[2]["lever"].startswith("prefill of the 1-token prompt") and rows[2]["tokens_per_s"] > 0
    assert rows[0]["tokens"].split()[0] == str(config.TINY.vocab - 1) and rows[0]["same_tokens_as_torch"].endswith("/2")
    assert rows[1]["vs_torch_eager"] == 1.0 and rows[0]["gb_per_token"] == rows[1]["gb_per_token"]
