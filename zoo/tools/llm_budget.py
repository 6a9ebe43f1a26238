"""What a model needs on a GPU, and how long its work takes there, from the zoo's own measurements (``zoo llm-budget``).
A tool over the bench's results (it ranks their steps as the pages do), so it sits above the bench and the model.

Everything here is arithmetic on two kinds of input, each said where it is used:

- the model's shapes (``config.Config``): its parameters, the bytes its weights take in fp16 or in the gemv family's
  int4 (a float16 scale per 128 weights), the KV cache's bytes per position;
- two rates this GPU measured, read from ``results/<gpu>.json`` (so a machine without a GPU can ask about one that
  was measured): a copy (the ``copy_ceiling`` row that moved the most bytes, far past the L2 cache: what
  memory-bound work can reach), the gemv family's best step in fp16 and in int4 (the median over the shapes it
  was measured at: what a token's matrix reads reach), and the zoo's best fp16 GEMM (hgemm's best step: what
  compute-bound work can reach).

Two more, where the results file holds them: the attention family's best causal step at the model's head size (the
prefill's attention), and the launch family's CUDA graph of small dependent kernels (v04_graph_replay: the time a
kernel takes on the GPU when nothing else does, a decode step's floor for each of its small kernels).

A decode token at batch B reads every weight once and each sequence's KV cache, and multiplies B vectors by every
weight matrix: each matrix takes the longer of its bytes over gemv's rate and its 2 B flops per weight over the
GEMM rate (the roofline; the batch where the two meet is the ridge, where GEMV turns into GEMM). Its other kernels
(two norms, rope, the cache's append, attention and silu_mul a layer; the embedding, the last norm, argmax and the
position's advance) move a few vectors each, so each costs the kernel floor. A prompt's prefill is compute: 2 flops
per weight per token at the GEMM rate (the lm_head on the last position only), causal attention's 2 x 2 x n^2 / 2 x
d flops per head and layer at attention's rate; and the bytes its elementwise kernels read and write (the norms,
rope and the layouts, silu_mul: ``prefill_traffic``) at the copy rate. The saved ``zoo decode``, ``zoo batch`` and
``zoo prefill`` rows are set beside the predictions.
Training with Adam in mixed precision keeps 16 bytes a parameter (fp16 weights and gradients, float32 master
weights and two moments) and does 6 flops per parameter per token. Activations are left out where the
sentence says so: at decode they are a few MB, in training they depend on checkpointing.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import zoo
from zoo.bench import strongest
from zoo.llm.config import GROUP, Config

FP16 = 2  # bytes
TRAIN_BYTES_PER_PARAM = 16  # fp16 weights 2 + fp16 gradients 2 + float32 master weights 4 + Adam's two moments 8
TRAIN_FLOPS_PER_PARAM = 6  # per token: 2 forward, 4 backward
CHINCHILLA_TOKENS_PER_PARAM = 20  # the compute-optimal data for a model of P parameters (Hoffmann et al., 2022)
YEAR_S = 365.25 * 24 * 3600
RESULTS = Path(__file__).resolve().parents[2] / "results"
LAUNCH_SIZE, GRAPH_STEP = 4096, "v04_graph_replay"  # the launch family's loop of small kernels, as a CUDA graph


@dataclass(frozen=True)
class Rates:
    """A GPU's measured rates, with where each came from."""

    device: str
    copy_gbs: float  # GB/s, bytes read + written, of the copy row that moved the most bytes
    copy_from: str
    gemm_tflops: float  # TFLOP/s of the zoo's best fp16 GEMM
    gemm_from: str
    gemv_gbs: dict  # {format: GB/s the gemv family's best step reads that format's weights at}, where measured
    gemv_from: dict
    memory_bytes: float | None = None  # the GPU's memory, as its results file records it (None where it does not)
    attention_tflops: float | None = None  # the attention family's best causal step at the model's head size
    attention_from: str = "not measured: the GEMM rate instead"
    kernel_floor_s: float = 0.0  # seconds a small dependent kernel takes in a CUDA graph (launch v04)
    kernel_floor_from: str = "not measured: no floor"

    def weights_gbs(self, fmt):
        """GB/s a token's matrices are read at in ``fmt``: the gemv family's, else the copy's."""
        return self.gemv_gbs.get(fmt, self.copy_gbs)


def linear_shapes(c: Config):
    """(rows, columns) of every weight matrix a token multiplies by: each layer's QKV, O, gate and up, down; then
    the lm_head."""
    layer = [(c.qkv_size, c.hidden), (c.hidden, c.q_size), (2 * c.intermediate, c.hidden), (c.hidden, c.intermediate)]
    return layer * c.layers + [(c.vocab, c.hidden)]


def parameters(c: Config) -> int:
    """Every parameter: the weight matrices, the embedding table (not tied to the lm_head) and the norms."""
    return sum(r * k for r, k in linear_shapes(c)) + c.vocab * c.hidden + c.hidden * (2 * c.layers + 1)


def matrix_bytes(rows: int, columns: int, fmt: str) -> float:
    """Bytes of one weight matrix: fp16, or int4 with a float16 scale per GROUP weights of a row."""
    if fmt == "fp16":
        return FP16 * rows * columns
    return rows * columns / 2 + FP16 * rows * -(-columns // GROUP)


def weight_bytes(c: Config, fmt: str) -> float:
    """The weights in memory: the matrices in ``fmt``, the embedding table and the norms in fp16."""
    return sum(matrix_bytes(r, k, fmt) for r, k in linear_shapes(c)) + FP16 * (c.vocab + 2 * c.layers + 1) * c.hidden


def small_kernels(c: Config) -> int:
    """The kernels of a decode step besides its matrices: two norms, rope, the cache's append, attention and
    silu_mul a layer (decode attention's one launch: the ladder's last lever), then the embedding, the last norm,
    argmax and the position's advance."""
    return 6 * c.layers + 4


def prefill_traffic(c: Config, tokens: int) -> int:
    """Bytes the prefill's elementwise kernels read and write (the matrices' own are the GEMMs'): a layer's two
    norms (the float32 residual and sublayer output read, the residual and the float16 normed rows written: 14 bytes a
    hidden element), rope and the layouts (the float32 QKV read, float16 Q, K and V heads and the cache written;
    attention's output moved back: 6 bytes a QKV element, 4 a KV and 4 a Q element), silu_mul (float32 gate and up
    read, float16 written: 10 bytes an intermediate element), for every token and layer."""
    per_token = 2 * 14 * c.hidden + 6 * c.qkv_size + 4 * c.kv_size + 4 * c.q_size + 10 * c.intermediate
    return c.layers * tokens * per_token


def kv_bytes_per_position(c: Config) -> int:
    """K and V of one position in every layer, fp16."""
    return 2 * c.layers * c.kv_size * FP16


def decode_step(c: Config, rates: Rates, batch: int, context: int, fmt: str) -> dict:
    """Seconds of one decode step (a token for each of ``batch`` sequences at ``context`` positions each), split into
    the weight matrices (each the longer of its bytes at gemv's rate and its flops at the GEMM rate) and the
    attention's cache read at the copy rate; with the batch where the matrices turn compute-bound (the ridge)."""
    bandwidth, flop_rate = rates.copy_gbs * 1e9, rates.gemm_tflops * 1e12
    reads = rates.weights_gbs(fmt) * 1e9
    floor = rates.kernel_floor_s
    matrices = sum(
        max(matrix_bytes(r, k, fmt) / reads, 2 * batch * r * k / flop_rate, floor) for r, k in linear_shapes(c)
    )
    attention = batch * context * kv_bytes_per_position(c) / bandwidth
    others = small_kernels(c) * floor  # a few vectors each: the floor, whatever the batch's few KB
    bytes_per_weight = weight_bytes(c, fmt) / parameters(c)
    return {
        "seconds": matrices + attention + others,
        "matrices_s": matrices,
        "attention_s": attention,
        "others_s": others,
        "ridge_batch": flop_rate * bytes_per_weight / (2 * reads),
    }


def prefill_seconds(c: Config, rates: Rates, tokens: int) -> float:
    """A prompt of ``tokens``: 2 flops per weight of every layer per token and the lm_head on the last position
    alone (the next token's logits; ``zoo prefill`` computes no more) at the GEMM rate; causal attention's QK^T and
    PV, 2 x 2 x d flops per pair of positions, half the pairs (the mask), per head and layer, at attention's rate
    (the GEMM's where none was measured); the elementwise kernels' bytes (``prefill_traffic``) at the copy rate."""
    *layers, (vocab, hidden) = linear_shapes(c)
    linear = 2 * tokens * sum(r * k for r, k in layers) + 2 * vocab * hidden
    attention = c.layers * c.heads * 2 * 2 * c.head_size * tokens * tokens / 2
    attention_rate = rates.attention_tflops or rates.gemm_tflops
    return (
        linear / (rates.gemm_tflops * 1e12)
        + attention / (attention_rate * 1e12)
        + prefill_traffic(c, tokens) / (rates.copy_gbs * 1e9)
    )


def memory(c: Config, batch: int, context: int, fmt: str) -> dict:
    """Bytes of the weights and of the KV cache for ``batch`` sequences of ``context`` positions."""
    return {"weights": weight_bytes(c, fmt), "kv_cache": batch * context * kv_bytes_per_position(c)}


def training(c: Config, rates: Rates, tokens: int, gpu_bytes: float) -> dict:
    """Adam in mixed precision: the bytes of the model's state, the largest model whose state fits ``gpu_bytes``,
    and the seconds of ``tokens`` tokens at the GEMM rate (activations not counted)."""
    n = parameters(c)
    return {
        "state_bytes": TRAIN_BYTES_PER_PARAM * n,
        "largest_parameters": gpu_bytes / TRAIN_BYTES_PER_PARAM,
        "seconds": TRAIN_FLOPS_PER_PARAM * n * tokens / (rates.gemm_tflops * 1e12),
    }


def pretraining_years(parameters_count: float, rates: Rates) -> float:
    """Years one GPU takes to train a model of ``parameters_count`` on 20 tokens a parameter (Chinchilla's
    compute-optimal data), 6 flops a parameter a token at the GEMM rate: the compute alone, every other cost left
    out, so a floor."""
    flops = TRAIN_FLOPS_PER_PARAM * parameters_count * CHINCHILLA_TOKENS_PER_PARAM * parameters_count
    return flops / (rates.gemm_tflops * 1e12) / YEAR_S


def rates_from_results(slug: str, results_dir: Path = RESULTS, head_size: int = 128) -> Rates:
    """The copy rate, gemv's fp16 and int4 rates and the best fp16 GEMM rate ``results/<slug>.json`` recorded, each
    step's the fastest correct one of its size (``strongest.best_step``); ValueError naming what is missing."""
    path = results_dir / f"{slug}.json"
    if not path.exists():
        known = sorted(p.stem for p in results_dir.glob("*.json"))
        raise ValueError(f"no results for {slug!r} in {results_dir}: measured GPUs are {known}")
    data = json.loads(path.read_text())
    copies = [  # (bytes moved, GB/s, where): the largest copy, far past the L2 cache, is DRAM's rate
        (row["gbps"] * row["ms"] * 1e6, row["gbps"], f"{family} copy_ceiling at {size}")
        for family, sizes in data["families"].items()
        for size, rows in sizes.items()
        if (row := rows.get("copy_ceiling", {})).get("gbps") and row.get("ms") and row.get("correct") is not False
    ]
    if not copies:
        raise ValueError(f"{path.name} has no copy_ceiling row: `zoo run vector_add --save` on that GPU records one")
    hgemm, gemv = zoo.family("hgemm"), zoo.family("gemv")
    gemms = [  # the fastest correct step of each fp16 size (the model's precision: not bfloat16's)
        (best[1]["gflops"], f"hgemm {best[0]} at {size}")
        for size, rows in data["families"].get("hgemm", {}).items()
        if "@" not in size and (best := strongest.best_step(hgemm, rows)) and best[1].get("gflops")
    ]
    if not gemms:
        raise ValueError(f"{path.name} has no correct hgemm step: `zoo run hgemm --save` on that GPU records them")
    gemv_gbs, gemv_from = {}, {}
    for fmt in ("fp16", "int4"):  # each measured shape's best step, then the median over the shapes
        best = sorted(
            (found[1]["gbps"], f"{found[0]} at {size}")
            for size, rows in data["families"].get("gemv", {}).items()
            if size.endswith(f"@{fmt}") and (found := strongest.best_step(gemv, rows)) and found[1].get("gbps")
        )
        if best:
            gemv_gbs[fmt], gemv_from[fmt] = best[len(best) // 2][0], "gemv " + best[len(best) // 2][1]
    copy, gemm = max(copies), max(gemms)
    device = data.get("device", {})
    extra = {}
    attention = zoo.family("attention")
    causal = [  # the fastest correct causal step at the model's head size, its TFLOP/s
        (best[1]["gflops"] / 1e3, f"attention {best[0]} at {size}")
        for size, rows in data["families"].get("attention", {}).items()
        if size.endswith(f"x{head_size}@causal")
        and (best := strongest.best_step(attention, rows))
        and best[1].get("gflops")
    ]
    if causal:
        extra["attention_tflops"], extra["attention_from"] = max(causal)
    graph = data["families"].get("launch", {}).get(str(LAUNCH_SIZE), {}).get(GRAPH_STEP, {})
    steps = zoo.family("launch").module.GPU_STEPS  # kernels a saved call runs (the simulator's are never saved)
    if graph.get("ms") and graph.get("correct") is not False:  # a call is that many dependent kernels in one graph
        extra["kernel_floor_s"] = graph["ms"] / 1e3 / steps
        extra["kernel_floor_from"] = f"launch {GRAPH_STEP} at {LAUNCH_SIZE}, {steps} kernels a call"
    return Rates(
        device.get("name", slug),
        copy[1],
        copy[2],
        gemm[0] / 1e3,
        gemm[1],
        gemv_gbs,
        gemv_from,
        device.get("memory_bytes"),
        **extra,
    )


def _gb(n):
    return f"{n / 1e9:,.2f} GB"


def _saved_rows(slug, command, results_dir):
    """The rows of ``zoo <command>`` saved for this GPU (results/sweeps/<slug>-<command>.csv), or [] where none were."""
    import csv

    path = results_dir / "sweeps" / f"{slug}-{command}.csv"
    return list(csv.DictReader(path.read_text().splitlines())) if path.exists() else []


def measured_decode(slug: str, c: Config, rates: Rates, context: int, results_dir: Path = RESULTS):
    """[(lever, format, measured tokens/s, predicted tokens/s)] for the rows of ``zoo decode`` saved for this GPU
    (batch 1); a row whose token reads nearer int4's bytes than fp16's is int4's."""
    rows = []
    for r in _saved_rows(slug, "decode", results_dir):
        try:
            measured, gb = float(r["tokens_per_s"]), float(r["gb_per_token"])
        except (KeyError, ValueError):
            continue
        fmt = "int4" if gb * 1e9 < (weight_bytes(c, "fp16") + weight_bytes(c, "int4")) / 2 else "fp16"
        predicted = 1 / decode_step(c, rates, 1, context, fmt)["seconds"]
        rows.append((r["lever"], fmt, measured, predicted))
    return rows


def measured_prefill(slug: str, c: Config, rates: Rates, results_dir: Path = RESULTS):
    """[(prompt, measured tokens/s, predicted tokens/s)] for the zoo's rows of ``zoo prefill`` saved for this GPU."""
    rows = []
    for r in _saved_rows(slug, "prefill", results_dir):
        try:
            prompt, measured = int(r["prompt"]), float(r["tokens_per_s"])
        except (KeyError, ValueError):
            continue
        if r.get("row", "").startswith("zoo"):
            rows.append((prompt, measured, prompt / prefill_seconds(c, rates, prompt)))
    return rows


def measured_batches(slug: str, c: Config, rates: Rates, results_dir: Path = RESULTS):
    """[(matrices, batch, measured tokens/s, predicted tokens/s)] for the rows of ``zoo batch`` saved for this GPU
    whose weights are read once a step: one GEMM a projection at every batch, a GEMV at batch 1 (a GEMV a sequence
    reads them B times, which the prediction does not)."""
    rows = []
    for r in _saved_rows(slug, "batch", results_dir):
        try:
            batch, context, measured = int(r["batch"]), int(r["context"]), float(r["tokens_per_s"])
        except (KeyError, ValueError):
            continue
        matrices = r.get("matrices", "").split(" ")[0]
        if matrices == "hgemm" or batch == 1:
            rows.append((matrices, batch, measured, batch / decode_step(c, rates, batch, context, "fp16")["seconds"]))
    return rows


def report(c: Config, rates: Rates, slug: str, batch: int, context: int, prompt: int, train_tokens: float) -> list:
    """The lines ``zoo llm-budget`` prints: the rates and where they came from, memory, decode, prefill, training,
    and the saved decode ladder against its prediction."""
    if min(batch, context, prompt) < 1 or train_tokens <= 0:
        raise ValueError(f"batch, context, prompt and training tokens must be positive: {batch}, {context}, {prompt}")
    gpu_bytes = rates.memory_bytes
    lines = [
        f"{rates.device}, from results/{slug}.json:",
        f"  copy {rates.copy_gbs:,.0f} GB/s ({rates.copy_from}); best fp16 GEMM {rates.gemm_tflops:,.1f} TFLOP/s "
        f"({rates.gemm_from})",
    ]
    for fmt in ("fp16", "int4"):
        where = rates.gemv_from.get(fmt, "not measured: the copy's rate instead")
        lines.append(f"  {fmt} weights read at {rates.weights_gbs(fmt):,.0f} GB/s ({where})")
    attention = f"{rates.attention_tflops:,.1f} TFLOP/s" if rates.attention_tflops else "-"
    lines.append(
        f"  causal attention {attention} ({rates.attention_from}); a small kernel in a CUDA graph "
        f"{1e6 * rates.kernel_floor_s:,.2f} us ({rates.kernel_floor_from})"
    )
    lines.append(f"model: {parameters(c) / 1e9:,.2f} B parameters, {c.layers} layers, hidden {c.hidden}")
    for fmt in ("fp16", "int4"):
        m = memory(c, batch, context, fmt)
        total = m["weights"] + m["kv_cache"]
        fits = "" if gpu_bytes is None else f" ({'fits' if total < gpu_bytes else 'does NOT fit'} in {_gb(gpu_bytes)})"
        step = decode_step(c, rates, batch, context, fmt)
        lines += [
            f"{fmt}: weights {_gb(m['weights'])} + KV cache {_gb(m['kv_cache'])} (batch {batch} x {context} positions)"
            f" = {_gb(total)}{fits}, activations not counted (a few MB at decode)",
            f"  decode at batch {batch}: {1e3 * step['seconds']:,.2f} ms a step, {batch / step['seconds']:,.0f} "
            f"tokens/s (matrices {1e3 * step['matrices_s']:,.2f} ms, attention's cache {1e3 * step['attention_s']:,.2f}"
            f" ms, {small_kernels(c)} small kernels {1e3 * step['others_s']:,.2f} ms); the matrices turn compute-bound "
            f"from batch {step['ridge_batch']:,.0f}",
        ]
    seconds = prefill_seconds(c, rates, prompt)
    lines.append(
        f"prefill of {prompt} tokens (matrices at the GEMM rate, attention at its own, "
        f"{_gb(prefill_traffic(c, prompt))} of elementwise traffic at the copy's): {1e3 * seconds:,.1f} ms, "
        f"{prompt / seconds:,.0f} tokens/s"
    )
    t = training(c, rates, train_tokens, gpu_bytes or 80e9)  # a file without the device's memory: an 80 GB card's
    lines += [
        f"training (Adam, mixed precision, {TRAIN_BYTES_PER_PARAM} bytes a parameter, activations not counted): "
        f"state {_gb(t['state_bytes'])}; the largest model whose state fits {_gb(gpu_bytes or 80e9)}: "
        f"{t['largest_parameters'] / 1e9:,.1f} B parameters",
        f"  {train_tokens:,.0f} tokens at the GEMM rate ({TRAIN_FLOPS_PER_PARAM} flops a parameter a token): "
        f"{t['seconds'] / 3600:,.2f} hours on one GPU",
        f"  a 16 B model on {CHINCHILLA_TOKENS_PER_PARAM} tokens a parameter (Chinchilla's compute-optimal data, "
        f"320 B tokens): {pretraining_years(16e9, rates):,.1f} years on one GPU at the GEMM rate, compute alone",
    ]
    prefills = measured_prefill(slug, c, rates)
    if prefills:
        lines.append(f"the saved prefills (results/sweeps/{slug}-prefill.csv) against this prediction:")
        lines += [
            f"  prompt {n:6,d}: {m:10,.0f} tokens/s measured, {p:10,.0f} predicted ({100 * m / p:.0f}%)"
            for n, m, p in prefills
        ]
    batches = measured_batches(slug, c, rates)
    if batches:
        lines.append(f"the saved batch sweep (results/sweeps/{slug}-batch.csv, fp16) against this prediction:")
        lines += [
            f"  batch {b:4d}, {kind:5s}: {m:10,.0f} tokens/s measured, {p:10,.0f} predicted ({100 * m / p:.0f}%)"
            for kind, b, m, p in batches
        ]
    ladder = measured_decode(slug, c, rates, context)
    if ladder:
        lines.append(f"the saved decode ladder (results/sweeps/{slug}-decode.csv, batch 1) against this prediction:")
        lines += [
            f"  {lever:22s} {fmt}: {m:8,.1f} tokens/s measured, {p:8,.1f} predicted ({100 * m / p:.0f}%)"
            for lever, fmt, m, p in ladder
        ]
    return lines
