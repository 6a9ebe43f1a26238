"""Decode of Llama-3-8B at batch 1 to 256: where the linear layers turn from memory-bound GEMVs into a GEMM (issue 66).

``zoo.llm.batch`` decodes B sequences together, each a token a step, after a context of
``--context`` positions each (random keys and values stand in for prompts'). Its matrices
are one GEMM a layer's projection (the hgemm family's last step on the weights transposed
once: every weight read once for the whole batch) or, at the smallest batches, one GEMV a
sequence (the gemv family: the weights read B times), so the rows show where the GEMM
pays. For each batch the command times ``--tokens`` steps and splits one step by kind of
kernel; from the matrices' share it gives their GB/s (the weights' bytes over their time)
and TFLOP/s (2 B flops a weight): while the GB/s hold near the copy's, a larger batch is
free; once the TFLOP/s near the GEMM's, the batch has passed the ridge and tokens a second
stop growing. The bandwidth limit of a row is its bytes a step (the weights once, every
sequence's cache) over the measured copy bandwidth. ``zoo llm-budget`` sets its prediction
beside the saved rows. In the simulator the tiny model's batch of three is checked against
the float64 NumPy model, sequence by sequence: correctness only.
"""

import gc

import numpy as np

from zoo.bench.checking import relative_error
from zoo.bench.sweeps import is_number

COMMAND = "batch"
HELP = "decode of Llama-3-8B at batch 1 to 256: tokens/s, and the matrices' GB/s and TFLOP/s (GEMV turning into GEMM)"
COLUMNS = (
    "matrices",
    "batch",
    "context",
    "ms_per_step",
    "tokens_per_s",
    "pct_of_limit",
    "matrices_ms",
    "matrices_gbs",
    "matrices_tflops",
    "time_by_kind",
)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
GEMV_BATCHES = 4  # the GEMV a sequence up to this batch: past it, B reads of the weights only lose further


def add_arguments(parser):
    parser.add_argument("--batch", type=int, action="append", help=f"batch sizes (default {BATCHES})")
    parser.add_argument("--context", type=int, default=1024, help="positions already in each cache (default 1024)")
    parser.add_argument("--tokens", type=int, default=8, help="steps timed a batch (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="the weights' seed")


def _tiny_check(args):
    """The simulator's row: three sequences of the tiny model (first steps, one GEMM a projection), two tokens each,
    each sequence's logits against the float64 NumPy model fed the same tokens (the greedy tokens themselves may
    part at a near tie of two logits: float16 activations)."""
    from zoo.llm import batch, config, reference
    from zoo.llm.weights import Weights

    weights = Weights(config.TINY, seed=args.seed)
    decoder = batch.BatchDecoder(weights, 3, matrices="hgemm", which="first")
    tokens = np.array([3, 50, 199])
    decoder.start(tokens)
    references = [reference.Reference(weights) for _ in tokens]
    worst = 0.0
    for position in range(2):
        decoder.generate(1)
        ours = decoder.logits.copy_to_host()
        for b, ref in enumerate(references):
            want = ref.step(int(tokens[b]), position)
            worst = max(worst, relative_error(ours[b], want))
        tokens = decoder.sequences()[0][:, -1]
    verdict = "within" if worst < 5e-3 else "NOT within"
    return [{"matrices": f"hgemm, tiny model: logits {verdict} 5e-3 of float64 NumPy's ({worst:.1e})"}]


def measure(args):
    if args.simulator:
        return _tiny_check(args)
    from zoo.bench import ceilings
    from zoo.llm import config

    batches = sorted(set(args.batch or BATCHES))
    return batch_rows(config.LLAMA3_8B, batches, args.context, args.tokens, args.seed, ceilings.copy_bandwidth())


def batch_rows(c, batches, context, tokens, seed, copy_gbs):
    """The rows of the model of config ``c``: each batch through one GEMM a projection, the smallest also through a
    GEMV a sequence."""
    from numba import cuda

    from zoo.bench.timing import hold_gpu
    from zoo.llm.weights import Weights

    weights = Weights(c, seed=seed)
    rows = []
    for B in batches:
        for matrices in ("gemv", "hgemm") if B <= GEMV_BATCHES else ("hgemm",):
            try:
                rows.append(_batch_row(weights, B, matrices, context, tokens, seed, copy_gbs, hold_gpu))
            except Exception as e:  # out of memory at the largest batches, say: a row that says so, the others stand
                rows.append({"matrices": f"{matrices}: {type(e).__name__}: {e}"[:160], "batch": B, "context": context})
            gc.collect()  # this batch's caches (34 GB at 256 x 1024 positions) go before the next batch's come
            cuda.current_context().deallocations.clear()
    return rows


def _batch_row(weights, B, matrices, context, tokens, seed, copy_gbs, hold):
    """One batch's row: ``tokens`` steps timed, one split by kind."""

    from zoo.kernels.argmax.sweeps.decode import _shares, _timed
    from zoo.llm import batch

    c = weights.config
    decoder = batch.BatchDecoder(weights, B, max_context=context + tokens + 4, matrices=matrices)
    decoder.fill_context(seed)
    first = (min(128_000, c.vocab - 1) + np.arange(B)) % c.vocab  # any ids would do
    decoder.start(first, context)
    decoder.generate(2)  # compiles, transposes the weights (once for all batches), allocates
    decoder.start(first, context)
    seconds = _timed(decoder.generate, tokens)  # a step's seconds, the host's clock around every step
    decoder.start(first, context)
    spent = decoder.time_by_kind(hold)
    matrices_s = spent.get("matrices", 0.0) / 1e3
    linear = sum(lin.shape[0] * lin.shape[1] for lin in weights.linears)
    step_bytes = weights.bytes_per_token(int4=False) + B * 2 * c.layers * c.kv_size * 2 * (context + tokens / 2)
    return {
        "matrices": f"{matrices} ({decoder.steps[matrices].name})",
        "batch": B,
        "context": context,
        "ms_per_step": 1e3 * seconds,
        "tokens_per_s": B / seconds,
        "pct_of_limit": 100 * step_bytes / (copy_gbs * 1e9) / seconds,  # the weights once, K and V of every cache
        "matrices_ms": 1e3 * matrices_s,
        "matrices_gbs": 2 * linear / matrices_s / 1e9 if matrices_s else None,
        "matrices_tflops": 2 * B * linear / matrices_s / 1e12 if matrices_s else None,
        "time_by_kind": _shares(spent),
    }


def findings(rows):
    gemm = [r for r in rows if str(r.get("matrices", "")).startswith("hgemm") and is_number(r.get("tokens_per_s"))]
    out = []
    if gemm:
        best = max(gemm, key=lambda r: r["tokens_per_s"])
        out.append(
            f"most tokens a second: {best['tokens_per_s']:,.0f} at batch {best['batch']} "
            f"({best['matrices_tflops']:.0f} TFLOP/s in the matrices)"
        )
    by = {(str(r["matrices"]).split()[0], r["batch"]): r for r in rows if is_number(r.get("tokens_per_s"))}
    pays = [b for (kind, b) in by if kind == "gemv" and ("hgemm", b) in by]
    for b in sorted(pays):
        ratio = by[("hgemm", b)]["tokens_per_s"] / by[("gemv", b)]["tokens_per_s"]
        out.append(f"batch {b}: one GEMM a projection at {ratio:.2f}x the speed of a GEMV a sequence")
    return out


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for kind, style in (("hgemm", "o-"), ("gemv", "s--")):
        shown = sorted(
            (r for r in rows if str(r.get("matrices", "")).startswith(kind) and is_number(r.get("tokens_per_s"))),
            key=lambda r: r["batch"],
        )
        if shown:
            ax.plot([r["batch"] for r in shown], [r["tokens_per_s"] for r in shown], style, label=shown[0]["matrices"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch (sequences decoded together)")
    ax.set_ylabel("tokens per second, all sequences")
    ax.set_title(f"Llama-3-8B decode by batch, {device_name}")
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
