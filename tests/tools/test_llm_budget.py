"""zoo llm-budget's arithmetic: Llama-3-8B's known sizes, the roofline's two sides meeting at the ridge, the rates
read from a results file, and bad input refused."""

import json

import pytest

import zoo
from zoo.llm import config
from zoo.tools import llm_budget as budget

C = config.LLAMA3_8B
FIRST_GEMV, LAST_GEMV = zoo.family("gemv")[1].name, list(zoo.family("gemv"))[-1].name
RATES = budget.Rates("test GPU", 3000.0, "copy", 600.0, "gemm", {"fp16": 2500.0}, {"fp16": "gemv"})


def test_llama3_8b_has_its_known_sizes():
    assert budget.parameters(C) == 8_030_261_248  # Llama-3-8B: 8.03 B parameters, embedding and lm_head untied
    assert budget.kv_bytes_per_position(C) == 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads of 128, fp16
    assert budget.memory(C, 1, 8192, "fp16")["kv_cache"] == 2**30  # 8k positions: 1 GiB
    fp16, int4 = budget.weight_bytes(C, "fp16"), budget.weight_bytes(C, "int4")
    assert fp16 == pytest.approx(2 * budget.parameters(C))
    linear = sum(r * k for r, k in budget.linear_shapes(C))
    assert int4 - (fp16 - 2 * linear) == pytest.approx(linear / 2 + 2 * linear / config.GROUP)  # 4 bits + a scale


def test_decode_is_the_weights_read_at_batch_one_and_the_flops_past_the_ridge():
    one = budget.decode_step(C, RATES, 1, 1024, "fp16")
    linear = sum(r * k for r, k in budget.linear_shapes(C))
    assert one["matrices_s"] == pytest.approx(2 * linear / 2500e9)  # gemv's fp16 rate: the copy's is not used
    assert one["attention_s"] == pytest.approx(1024 * budget.kv_bytes_per_position(C) / 3000e9)
    ridge = one["ridge_batch"]
    assert ridge == pytest.approx(240)  # 600 TFLOP/s over 2.5 TB/s, 2 bytes and 2 flops a weight a sequence
    far = budget.decode_step(C, RATES, int(4 * ridge), 1, "fp16")
    assert far["matrices_s"] == pytest.approx(2 * int(4 * ridge) * linear / 600e12)  # compute-bound: the flops
    near = budget.decode_step(C, RATES, int(ridge) - 10, 1, "fp16")
    assert near["matrices_s"] >= one["matrices_s"] * 0.999  # below the ridge, never less than reading the weights


def test_training_state_is_16_bytes_a_parameter():
    t = budget.training(C, RATES, 1e9, 80e9)
    assert t["state_bytes"] == 16 * budget.parameters(C)
    assert t["largest_parameters"] == 5e9  # the largest model whose Adam state fits an 80 GB H100
    assert t["seconds"] == pytest.approx(6 * budget.parameters(C) * 1e9 / 600e12)


def _results(tmp_path, families):
    (tmp_path / "gpu.json").write_text(
        json.dumps({"device": {"name": "A GPU", "memory_bytes": 10e9}, "families": families})
    )
    return tmp_path


def test_rates_come_from_the_results_the_largest_copy_and_the_best_correct_steps(tmp_path):
    def row(**rate):  # a results row: checked, its ratio to the baseline as fast as its rate (one size, one run)
        return {"correct": True, "ratio": next(iter(rate.values())), **rate}

    families = {
        "rmsnorm": {"4096x4096": {"copy_ceiling": row(gbps=3300.0, ms=0.02)}},  # in the L2: not DRAM's rate
        "vector_add": {"268435456": {"copy_ceiling": row(gbps=2900.0, ms=1.0)}},
        "hgemm": {
            "4096": {"v15_grouped_tiles": row(gflops=650_000.0), "baseline": row(gflops=700_000.0)},
            "4096@bfloat16": {"v15_grouped_tiles": row(gflops=660_000.0)},
        },
        "gemv": {
            f"{s}@fp16": {LAST_GEMV: row(gbps=g), FIRST_GEMV: row(gbps=100.0)}
            for s, g in (("8192x8192", 2800.0), ("4096x14336", 2600.0), ("14336x4096", 2700.0))
        },
    }
    rates = budget.rates_from_results("gpu", _results(tmp_path, families))
    assert (rates.copy_gbs, rates.copy_from) == (2900.0, "vector_add copy_ceiling at 268435456")
    assert rates.gemm_tflops == 650.0  # a step's, in fp16: not the library's, not bfloat16's
    assert rates.weights_gbs("fp16") == 2700.0 and "14336x4096" in rates.gemv_from["fp16"]  # the median shape
    assert rates.weights_gbs("int4") == 2900.0  # not measured: the copy's
    assert rates.memory_bytes == 10e9  # the device's memory as the results file records it
    lines = "\n".join(budget.report(C, rates, "gpu", 1, 1024, 1024, 1e9))
    assert "fp16: weights 16.06 GB" in lines and "does NOT fit in 10.00 GB" in lines  # 8 B parameters in 2 bytes
    assert "int4: weights" in lines and "(fits in 10.00 GB)" in lines


def test_attention_s_rate_and_the_kernel_floor_come_from_their_families(tmp_path):
    """The prefill's attention at the attention family's best causal step of the model's head size, and a decode
    step's small kernels at the launch family's CUDA graph of 256 dependent kernels, where the results hold them."""

    def row(**rate):
        return {"correct": True, "ratio": next(iter(rate.values())), **rate}

    families = {
        "vector_add": {"268435456": {"copy_ceiling": row(gbps=3000.0, ms=1.0)}},
        "hgemm": {"4096": {"v15_grouped_tiles": row(gflops=600_000.0)}},
        "attention": {
            "32x4096x128@causal": {"v09_tma_producer": row(gflops=400_000.0), "v08_wgmma": row(gflops=300_000.0)},
            "32x4096x64@causal": {"v09_tma_producer": row(gflops=500_000.0)},  # another head size: not the model's
        },
        "launch": {"4096": {"v04_graph_replay": row(ms=0.256), "v03_lean_launch": row(ms=2.0)}},
    }
    rates = budget.rates_from_results("gpu", _results(tmp_path, families), head_size=128)
    assert rates.attention_tflops == 400.0 and "32x4096x128@causal" in rates.attention_from
    assert rates.kernel_floor_s == pytest.approx(1e-6)  # 0.256 ms for 256 kernels
    one = budget.decode_step(C, rates, 1, 1024, "fp16")
    assert one["others_s"] == pytest.approx(budget.small_kernels(C) * 1e-6) and budget.small_kernels(C) == 196
    assert one["seconds"] == pytest.approx(one["matrices_s"] + one["attention_s"] + one["others_s"])
    *layers, (vocab, hidden) = budget.linear_shapes(C)
    attention = C.layers * C.heads * 2 * 2 * C.head_size * 4096**2 / 2
    linear = 2 * 4096 * sum(r * k for r, k in layers) + 2 * vocab * hidden
    want = linear / 600e12 + attention / 400e12 + budget.prefill_traffic(C, 4096) / 3000e9
    assert budget.prefill_seconds(C, rates, 4096) == pytest.approx(want)
    bare = budget.rates_from_results("gpu", _results(tmp_path, {k: families[k] for k in ("vector_add", "hgemm")}))
    assert (bare.attention_tflops, bare.kernel_floor_s) == (None, 0.0)  # not measured: the GEMM rate, no floor


def test_missing_results_are_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="measured GPUs are"):
        budget.rates_from_results("nope", tmp_path)
    with pytest.raises(ValueError, match="no copy_ceiling row"):
        budget.rates_from_results("gpu", _results(tmp_path, {}))
    with pytest.raises(ValueError, match="must be positive"):
        budget.report(C, RATES, "gpu", 0, 1024, 1024, 1e9)


def test_the_command_reads_a_measured_gpu_without_one(zoo_cli):
    r = zoo_cli("llm-budget", "--gpu", "nvidia-h100-80gb-hbm3", "--batch", "4", "--context", "8192")
    assert r.returncode == 0, r.stderr
    assert "8.03 B parameters" in r.stdout and "KV cache 4.29 GB (batch 4 x 8192 positions)" in r.stdout
    assert "the matrices turn compute-bound from batch" in r.stdout
    bad = zoo_cli("llm-budget", "--gpu", "nvidia-h100-80gb-hbm3", "--batch", "0")
    assert bad.returncode == 2 and "must be positive" in bad.stderr


def test_the_saved_prefills_are_set_beside_the_prediction(tmp_path):
    c = config.LLAMA3_8B
    *layers, (vocab, hidden) = budget.linear_shapes(c)
    flops = (
        2 * 1024 * sum(r * k for r, k in layers) + 2 * vocab * hidden + c.layers * c.heads * 2 * 2 * 128 * 1024**2 / 2
    )
    traffic = budget.prefill_traffic(c, 1024)
    assert traffic == 32 * 1024 * (28 * 4096 + 6 * 6144 + 4 * 1024 + 4 * 4096 + 10 * 14336)  # 10.3 GB at 1024 tokens
    seconds = flops / 600e12 + traffic / 3000e9  # the lm_head on one row; attention at the GEMM rate, none measured
    assert budget.prefill_seconds(c, RATES, 1024) == pytest.approx(seconds)
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "gpu-prefill.csv").write_text(
        "row,prompt,tokens_per_s\nzoo prefill (hgemm v15),1024,25000\ntorch eager prefill,1024,30000\n"
    )
    [(prompt, measured, predicted)] = budget.measured_prefill("gpu", c, RATES, tmp_path)  # the zoo's row alone
    assert (prompt, measured) == (1024, 25000.0) and predicted == pytest.approx(1024 / seconds)
    assert budget.measured_prefill("other", c, RATES, tmp_path) == []


def test_the_saved_batches_are_set_beside_the_prediction(tmp_path):
    c = config.LLAMA3_8B
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "gpu-batch.csv").write_text(
        "matrices,batch,context,tokens_per_s\n"
        "gemv (v10),1,1024,150\nhgemm (v15),1,1024,60\ngemv (v10),2,1024,75\nhgemm (v15),64,1024,5000\n"
    )
    found = budget.measured_batches("gpu", c, RATES, tmp_path)
    assert [(kind, b, m) for kind, b, m, _ in found] == [("gemv", 1, 150.0), ("hgemm", 1, 60.0), ("hgemm", 64, 5000.0)]
    predicted = {b: p for _, b, _, p in found}
    assert predicted[64] == pytest.approx(64 / budget.decode_step(c, RATES, 64, 1024, "fp16")["seconds"])
    assert predicted[64] > 30 * predicted[1]  # below the ridge a batch is nearly free


def test_a_16b_model_s_pretraining_takes_years_on_one_gpu():
    years = budget.pretraining_years(16e9, RATES)  # 6 x 16e9 x 320e9 flops at 600 TFLOP/s
    assert years == pytest.approx(6 * 16e9 * 320e9 / 600e12 / (365.25 * 86400))
    assert 1.5 < years < 1.7
    assert "a 16 B model on 20 tokens a parameter" in "\n".join(budget.report(C, RATES, "gpu", 1, 1024, 1024, 1e9))
