"""Tensor parallelism (zoo/llm/tensor_parallel.py) against the one-GPU model and float64 NumPy (issue 69).

In the simulator two ranks share the one simulated device, as the collectives family's ranks do: the shards, each
rank's launches and the ring's all-reduce between them run as they would on two GPUs, without the links. Each test
generates tokens and checks every rank's logits (the same on every rank: they add the same partial sums) against
the reference fed the same tokens.
"""

import numpy as np
import pytest
from model_checks import LOGITS_TOLERANCE, greedy, relative

import zoo
from zoo.llm import config, decode, reference, tensor_parallel
from zoo.llm.weights import Weights

LEVER = decode.lever("fused")  # the first steps: seconds in the simulator (the last steps' gemv takes a minute)


@pytest.fixture(scope="module")
def tiny():
    return Weights(config.TINY, seed=1)


def test_two_ranks_match_the_model(tiny):
    model = tensor_parallel.TensorParallel(tiny, 2)
    assert [s.config.heads for s in model.shards] == [2, 2] and model.shards[1].config.kv_heads == 1
    model.start(3)
    ref, tokens = reference.Reference(tiny), [3]
    for position in range(2):  # the second token attends over two cached positions of each rank's own KV head
        model.generate(1, LEVER)
        got = [d.logits.copy_to_host()[0] for d in model.decoders]
        want = ref.step(tokens[-1], position)
        assert relative(got[0], want) < LOGITS_TOLERANCE, position
        assert all(np.array_equal(g, got[0]) for g in got[1:])  # every rank added the same partials
        tokens.append(int(model.sequence()[0][-1]))
        assert greedy(want, tokens[-1]), position
    if zoo.SIMULATOR:  # the check can fail: another token's logits are far off
        assert relative(got[0], reference.Reference(tiny).step(7, 0)) > 0.1


def test_a_filled_context_is_the_one_gpu_model_s(tiny):
    """fill_context's stand-in keys and values: each rank's heads hold what the one-GPU model's same heads hold, so
    the split model's first logits after a filled context are the one-GPU model's (the sweep's check)."""
    plain = decode.Decoder(tiny, max_context=8)
    plain.fill_context(3, seed=1)
    plain.start(5, 3)
    plain.generate(1, LEVER)
    model = tensor_parallel.TensorParallel(tiny, 2, 8)
    model.fill_context(3, seed=1)
    model.start(5, 3)
    model.generate(1, LEVER)
    assert relative(model.logits.copy_to_host()[0], plain.logits.copy_to_host()[0]) < LOGITS_TOLERANCE
    for r, decoder in enumerate(model.decoders):  # rank r's one KV head is the model's head r
        assert np.array_equal(decoder.k_cache.copy_to_host()[:, 0, :3], plain.k_cache.copy_to_host()[:, r, :3])


def test_one_rank_is_the_one_gpu_decoder(tiny):
    model = tensor_parallel.TensorParallel(tiny, 1)
    model.start(5)
    model.generate(1, LEVER)
    plain = decode.Decoder(tiny)
    plain.start(5)
    plain.generate(1, LEVER)
    assert np.array_equal(model.logits.copy_to_host(), plain.logits.copy_to_host())


@pytest.mark.parametrize(
    "ranks, reduce, message",
    [(3, "ring", "do not divide the 4 query heads"), (0, "ring", "positive"), (2, "mpi", "reduce is")],
)
def test_bad_splits_are_refused(tiny, ranks, reduce, message):
    with pytest.raises(ValueError, match=message):
        tensor_parallel.TensorParallel(tiny, ranks, reduce=reduce)


def test_graph_and_int4_levers_are_refused(tiny):
    model = tensor_parallel.TensorParallel(tiny, 2)
    model.start(3)
    for name in ("CUDA graph", "int4"):
        with pytest.raises(ValueError, match="without a CUDA graph"):
            model.generate(1, decode.lever(name))
    with pytest.raises(ValueError, match="pass the cache"):
        model.generate(config.TINY.max_context, LEVER)
    assert model.sequence()[1] == 0  # nothing ran


def test_the_shards_are_the_model_split_by_heads_and_mlp_rows(tiny):
    c = config.TINY
    model = tensor_parallel.TensorParallel(tiny, 2)
    qkv, o = tiny.layers[0].qkv.W.copy_to_host(), tiny.layers[0].o.W.copy_to_host()
    s = model.shards[1].config
    shard = model.shards[1].layers[0]
    q_rows = qkv[s.q_size : 2 * s.q_size]  # rank 1's query heads
    k_rows = qkv[c.q_size + s.kv_size : c.q_size + 2 * s.kv_size]  # its KV head, within K's rows
    v_rows = qkv[c.q_size + c.kv_size + s.kv_size :]
    assert np.array_equal(shard.qkv.W.copy_to_host(), np.concatenate([q_rows, k_rows, v_rows]))
    assert np.array_equal(shard.o.W.copy_to_host(), o[:, s.q_size :])
    down = tiny.layers[0].down.W.copy_to_host()
    assert np.array_equal(shard.down.W.copy_to_host(), down[:, s.intermediate :])


def test_the_sweep_reads_its_rows():
    from zoo.kernels.argmax.sweeps import tensor_parallel as sweep

    rows = [
        {"ranks": 1, "gpus": 1, "reduce": "ring", "tokens_per_s": 150.0, "ms_per_token": 6.67,
         "allreduce_ms_per_token": 0.0, "vs_one_gpu": 1.0},
        {"ranks": 2, "gpus": 2, "reduce": "ring", "tokens_per_s": 200.0, "ms_per_token": 5.0,
         "allreduce_ms_per_token": 2.0, "vs_one_gpu": 1.33},
        {"ranks": 2, "gpus": 2, "reduce": "nccl", "tokens_per_s": 250.0, "ms_per_token": 4.0,
         "allreduce_ms_per_token": 1.0, "vs_one_gpu": 1.67},
    ]  # fmt: skip
    assert sweep.findings(rows) == [
        "2 ranks on 2 GPU(s), ring: 200.0 tokens/s, 1.33x one GPU; the all-reduces 2.00 ms of a token's 5.00 (40%)",
        "2 ranks on 2 GPU(s), nccl: 250.0 tokens/s, 1.67x one GPU; the all-reduces 1.00 ms of a token's 4.00 (25%)",
    ]
    pytest.importorskip("matplotlib")
    assert len(sweep.plot(rows, "GPUs").axes[0].lines) == 2


@pytest.mark.skipif(zoo.SIMULATOR, reason="timings: a GPU's test (the simulator's row is checked by test_cli's run)")
def test_the_sweep_rows_on_the_tiny_model():
    """tensor_parallel_rows' path (the one-GPU logits, each rank count's model, timing, the exchanges alone) on the
    tiny model: the GPU run is not the first to execute it."""
    from zoo.kernels.argmax.sweeps import tensor_parallel as sweep

    rows = sweep.tensor_parallel_rows(config.TINY, [1, 2], 4, 2, 1, 1000.0)
    assert [r["ranks"] for r in rows][:2] == [1, 2] and all(r["logits_error"] < LOGITS_TOLERANCE for r in rows)
    assert rows[0]["vs_one_gpu"] == 1.0 and rows[1]["allreduce_ms_per_token"] > 0
