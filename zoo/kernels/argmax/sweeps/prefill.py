"""A prompt's prefill of Llama-3-8B from the zoo's kernels: tokens a second and TFLOP/s, against PyTorch (issue 66).

``zoo.llm.prefill`` runs a prompt of P tokens through every layer at once: the linear
layers as GEMMs on the tensor cores (the hgemm family's last step this GPU runs, on the
weights transposed once), the attention family's causal forward pass with grouped KV
heads, and the embedding, rmsnorm, rope and silu_mul families on P rows. It leaves the
prompt's keys and values in the decoder's cache and the next token chosen, where
``zoo decode`` goes on. For each ``--prompt`` length this command times the prefill
(the median of ``--repeats`` runs, each waited for) and the same model in PyTorch
float16 on the same weights (``F.linear``, ``scaled_dot_product_attention`` with
``is_causal``), and compares the last position's logits and the token chosen. TFLOP/s
count the linear layers' 2 flops a weight a token and causal attention's 2 x 2 x P^2 / 2
x d a head and layer. ``zoo llm-budget`` reads the saved rows and sets its prediction
beside them. In the simulator the tiny model's prefill, with each family's first step,
is checked against the float64 NumPy model stepped token by token: correctness only.
"""

import statistics
import time

import numpy as np

from zoo.bench.checking import relative_error
from zoo.bench.sweeps import is_number

COMMAND = "prefill"
HELP = "a prompt's prefill of Llama-3-8B from the zoo's kernels (GEMMs, causal attention): tokens/s against PyTorch"
COLUMNS = (
    "row",
    "prompt",
    "ms",
    "tokens_per_s",
    "tflops",
    "vs_torch",
    "logits_error",
    "same_next_token",
    "time_by_kind",
)
PROMPTS = (1024, 4096, 8064)  # 8064 = 63 x 128: the longest whole number of GEMM tiles below the 8192-position cache


def add_arguments(parser):
    parser.add_argument("--prompt", type=int, action="append", help=f"prompt lengths (default {PROMPTS})")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs a length, the median kept (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="the weights' and the prompts' seed")


def flops(c, prompt):
    """The linear layers' 2 flops a weight a token, causal attention's QK^T and PV over the triangle, the lm_head on
    the last row."""
    layer = c.hidden * (c.qkv_size + c.q_size + 3 * c.intermediate)  # QKV, O, gate and up, down
    attention = 2 * 2 * c.heads * c.head_size * prompt * (prompt + 1) / 2
    return c.layers * (2 * layer * prompt + attention) + 2 * c.vocab * c.hidden


def _tiny_check(args):
    """The simulator's row: the tiny model's prefill (first steps) against the float64 NumPy model."""
    from zoo.llm import config, decode, prefill, reference
    from zoo.llm.weights import Weights

    weights = Weights(config.TINY, seed=args.seed)
    decoder = decode.Decoder(weights)
    prompt = np.random.default_rng(args.seed).integers(0, config.TINY.vocab, 5)
    prefill.Prefill(decoder, "first").run(prompt)
    ref = reference.Reference(weights)
    logits = [ref.step(int(token), position) for position, token in enumerate(prompt)]
    ours = decoder.logits.copy_to_host()[0]
    error = relative_error(ours, logits[-1])
    verdict = "within" if error < 5e-3 else "NOT within"  # the decoder's bound: float16 activations, float32 sums
    return [
        {
            "row": f"tiny model, first steps: logits {verdict} 5e-3 of float64 NumPy's",
            "prompt": 5,
            "logits_error": error,
        }
    ]


def _median_seconds(run, repeats):
    from numba import cuda

    times = []
    for _ in range(repeats):
        cuda.synchronize()
        start = time.perf_counter()
        run()
        cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(args):
    if args.simulator:
        return _tiny_check(args)
    from zoo.llm import config

    return prefill_rows(config.LLAMA3_8B, sorted(set(args.prompt or PROMPTS)), args.repeats, args.seed, _torch_model)


def prefill_rows(c, prompts, repeats, seed, torch_model):
    """The rows of the model of config ``c`` at each prompt length: the zoo's prefill, and PyTorch's where
    ``torch_model(decoder)`` gives a model (None, or an exception, leaves its rows out)."""
    from zoo.bench.timing import hold_gpu
    from zoo.kernels.argmax.sweeps.decode import _shares
    from zoo.llm import decode, prefill
    from zoo.llm.weights import Weights

    weights = Weights(c, seed=seed)
    decoder = decode.Decoder(weights, max_context=min(c.max_context, max(prompts) + 1))
    run = prefill.Prefill(decoder, "last")
    try:
        model = torch_model(decoder)
    except Exception as e:  # PyTorch missing or broken: the zoo's rows still count, with nothing to compare
        model = None
        print(f"zoo prefill: no PyTorch rows ({type(e).__name__}: {e})")
    rows = []
    names = ", ".join(f"{name} {step.name}" for name, step in run.steps.items() if name in ("hgemm", "attention"))
    for n in prompts:
        prompt = np.random.default_rng(seed + n).integers(0, c.vocab, n)
        run.run(prompt)  # compiles, transposes the weights once, allocates this length's buffers
        ours, next_token = decoder.logits.copy_to_host()[0], int(decoder.sequence()[0][-1])
        buffers = run.buffers(n)
        seconds = _median_seconds(lambda buffers=buffers: run.launch(buffers), repeats)
        rows.append(
            {
                "row": f"zoo prefill ({names})",
                "prompt": n,
                "ms": 1e3 * seconds,
                "tokens_per_s": n / seconds,
                "tflops": flops(c, n) / seconds / 1e12,
                "time_by_kind": _shares(run.time_by_kind(prompt, hold_gpu)),
            }
        )
        if model is not None:
            theirs, their_token, their_seconds = _torch_prefill(model, prompt, repeats)
            rows[-1]["logits_error"] = relative_error(ours, theirs)
            rows[-1]["same_next_token"] = next_token == their_token
            rows[-1]["vs_torch"] = their_seconds / seconds
            rows.append(
                {
                    "row": "torch eager prefill (F.linear, SDPA is_causal)",
                    "prompt": n,
                    "ms": 1e3 * their_seconds,
                    "tokens_per_s": n / their_seconds,
                    "tflops": flops(c, n) / their_seconds / 1e12,
                    "vs_torch": 1.0,
                }
            )
    return rows


def _torch_model(decoder):
    from zoo.llm.torch_model import TorchModel

    return TorchModel(decoder)


def _torch_prefill(model, prompt, repeats):
    """(PyTorch's last logits, its next token, the median seconds of its prefill)."""
    import torch

    ids = torch.as_tensor(prompt, device="cuda")
    with torch.no_grad():
        token, logits = model.prefill(ids)  # warm: cuBLAS's handles, the kernels' first loads
        seconds = _median_seconds(lambda: model.prefill(ids), repeats)
    return logits[0].float().cpu().numpy(), int(token[0]), seconds


def findings(rows):
    out = []
    for r in rows:
        if str(r.get("row", "")).startswith("zoo") and is_number(r.get("tokens_per_s")):
            against = f", {r['vs_torch']:.2f}x PyTorch eager's speed" if is_number(r.get("vs_torch")) else ""
            out.append(
                f"prompt of {r['prompt']}: {r['tokens_per_s']:,.0f} tokens/s, {r['tflops']:.0f} TFLOP/s{against}"
            )
    return out


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    shown = [r for r in rows if is_number(r.get("tokens_per_s"))]
    prompts = sorted({r["prompt"] for r in shown})
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len({r["row"] for r in shown}))
    for k, name in enumerate(sorted({r["row"] for r in shown})):
        by = {r["prompt"]: r["tokens_per_s"] for r in shown if r["row"] == name}
        xs = [i + k * width for i, p in enumerate(prompts) if p in by]
        ax.bar(xs, [by[p] for p in prompts if p in by], width, label=name)
    ax.set_xticks([i + width * (len({r["row"] for r in shown}) - 1) / 2 for i in range(len(prompts))])
    ax.set_xticklabels([str(p) for p in prompts])
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("tokens per second")
    ax.set_title(f"Llama-3-8B prefill, {device_name}")
    if shown:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
