"""Decode at batch B (zoo/llm/batch.py) against the float64 NumPy model, sequence by sequence (issue 66).

In the simulator the tiny model with each family's first step, its matrices as one GEMM a projection (three
sequences, two tokens) and as a GEMV a sequence (two sequences, one token); on a GPU with the last steps too. Each
sequence starts from its own token, so a sequence reading another's cache or row is caught.
"""

import numpy as np
import pytest
from model_checks import LOGITS_TOLERANCE, greedy, relative

import zoo
from zoo.llm import batch, config, reference
from zoo.llm.weights import Weights

FIRST = np.array([3, 50, 199, 7, 120])
# (matrices, sequences, tokens, steps, a second call): in the simulator the GEMM path's two tokens take a minute, so
# the second call is the GEMV path's (the decoder's own machinery is the same; hgemm's second call: test_hgemm)
CASES = [("hgemm", 3, 2, "first", False), ("gemv", 2, 1, "first", True)]
if not zoo.SIMULATOR:
    CASES += [("hgemm", 5, 3, "last", True), ("gemv", 3, 3, "last", True)]


@pytest.fixture(scope="module")
def tiny():
    return Weights(config.TINY, seed=1)


@pytest.mark.parametrize("matrices, size, count, which, again", CASES, ids=lambda v: str(v))
def test_every_sequence_matches_the_model_on_its_own(tiny, matrices, size, count, which, again):
    decoder = batch.BatchDecoder(tiny, size, matrices=matrices, which=which)
    first = FIRST[:size]
    refs = [reference.Reference(tiny) for _ in range(size)]
    decoder.start(first)
    tokens = [first.tolist()]
    for position in range(count):
        decoder.generate(1)
        got = decoder.logits.copy_to_host()
        if position == 0:  # the check can fail: sequence 0's logits are not those of sequence 1's token
            assert relative(got[0], reference.Reference(tiny).step(int(first[1]), 0)) > 0.1
        wants = [ref.step(tokens[-1][b], position) for b, ref in enumerate(refs)]  # each fed its own tokens
        for b, want in enumerate(wants):
            assert relative(got[b], want) < LOGITS_TOLERANCE, (b, position)
        tokens.append(decoder.sequences()[0][:, -1].tolist())
        assert all(greedy(want, tokens[-1][b]) for b, want in enumerate(wants)), position
    ours, position = decoder.sequences()
    assert position == count and ours[:, 0].tolist() == first.tolist()
    if not again:
        return
    # right on the second call too: the same start over poisoned logits gives the same first token
    decoder.logits.copy_to_device(np.full(decoder.logits.shape, np.nan, np.float32))
    decoder.start(first)
    decoder.generate(1)
    assert decoder.sequences()[0][:, 1].tolist() == ours[:, 1].tolist()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch": 0}, "positive number"),
        ({"batch": 2.5}, "positive number"),
        ({"batch": 2, "matrices": "cublas"}, "matrices are"),
        ({"batch": 2, "which": "middle"}, "which is"),
        ({"batch": 2, "max_context": 17}, "cache holds up to"),
    ],
)
def test_bad_configurations_are_refused(tiny, kwargs, message):
    with pytest.raises(ValueError, match=message):
        batch.BatchDecoder(tiny, **kwargs)


def test_bad_starts_and_lengths_are_refused_before_any_launch(tiny):
    decoder = batch.BatchDecoder(tiny, 2, max_context=4, matrices="gemv", which="first")
    for first, message in (([1], "one token id a sequence"), ([1, 200], "must be in"), ([0.5, 1.0], "integers")):
        with pytest.raises(ValueError, match=message):
            decoder.start(first)
    with pytest.raises(ValueError, match="outside the cache"):
        decoder.start([1, 2], position=4)
    decoder.start([1, 2], position=1)
    with pytest.raises(ValueError, match="pass the cache"):
        decoder.generate(3)
    assert not decoder._checked  # nothing was launched


def test_the_sweep_reads_its_rows():
    from zoo.kernels.argmax.sweeps import batch as sweep

    def row(matrices, b, tokens_per_s, tflops):
        return {"matrices": matrices, "batch": b, "tokens_per_s": tokens_per_s, "matrices_tflops": tflops}

    rows = [
        row("gemv (v10)", 1, 150.0, 0.5),
        row("hgemm (v15)", 1, 60.0, 0.2),
        row("gemv (v10)", 2, 75.0, 0.5),
        row("hgemm (v15)", 2, 120.0, 0.4),
        row("hgemm (v15)", 256, 9000.0, 420.0),
    ]
    assert sweep.findings(rows) == [
        "most tokens a second: 9,000 at batch 256 (420 TFLOP/s in the matrices)",
        "batch 1: one GEMM a projection at 0.40x the speed of a GEMV a sequence",
        "batch 2: one GEMM a projection at 1.60x the speed of a GEMV a sequence",
    ]
    pytest.importorskip("matplotlib")
    assert len(sweep.plot(rows, "GPU").axes[0].lines) == 2


@pytest.mark.skipif(zoo.SIMULATOR, reason="the last steps' wgmma kernels take minutes in the simulator: a GPU's test")
def test_the_sweep_rows_on_the_tiny_model():
    """batch_rows' path (a batch's decoder, its timing and split, the memory given back) on the tiny model: the GPU
    run is not the first to execute it."""
    from zoo.kernels.argmax.sweeps import batch as sweep

    rows = sweep.batch_rows(config.TINY, [1, 6], 4, 2, 1, 1000.0)
    assert [(r["matrices"].split()[0], r["batch"]) for r in rows] == [("gemv", 1), ("hgemm", 1), ("hgemm", 6)]
    assert all(r["tokens_per_s"] > 0 and "matrices" in r["time_by_kind"] for r in rows)
