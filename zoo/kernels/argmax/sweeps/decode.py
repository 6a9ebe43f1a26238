"""Greedy decoding of a Llama-style model built from the zoo's kernels: tokens a second, lever by lever (issue 66).

``zoo.llm`` composes the families (embedding, rmsnorm, gemv, rope, silu_mul, argmax;
decode_attention in the last lever) and a decode attention of its own into Llama-3-8B's
decoder, with random weights made on the GPU from a seed. This command generates
``--tokens`` tokens greedily at batch 1 after a prompt of ``--context`` random token ids,
which the prefill (``zoo.llm.prefill``: hgemm's and attention's last steps this GPU runs)
puts in the KV cache first, its tokens a second a row of their own; then, once per lever:

    naive        each family's first step, Q K V and gate up as separate GEMVs, one launch at a time
    fused        Q K V in one GEMV, gate and up in one, the residual add inside the norm
    fast steps   each family's last step (gemv's split-k fp16 kernel, float4 loads, ...)
    CUDA graph   the whole token (about 450 launches) captured once and replayed as one graph
    int4         the linear layers in int4 with a scale per 128, gemv's packed tensor-core ring
    decode attention  the decode_attention family's last step in place of the model's own two attention
                 kernels: one launch a layer, its length read on the GPU, so the graph replays it

and the same model in PyTorch float16 on the same weights and cache, eager and (``--compile``)
with ``torch.compile(mode="reduce-overhead")``. Each row gives tokens a second, and the
share of the bandwidth limit: the bytes a token must read (every weight once, the KV cache
up to the token) over the measured device-to-device copy bandwidth, and the device time of
one token split by kind of kernel (gemv, attention, rmsnorm, ...: events between the kinds,
the token queued behind a kernel that holds the GPU, so the host's gaps are not in it). The tokens each row
generated are compared with the fp16 PyTorch model's, and the first token's logits with its
logits (relative norm error). The picture sets each lever's tokens a second beside its
bandwidth limit, and its token's device time by kind of kernel beside the bandwidth floor:
what is left above the floor, and in which kernels. In the simulator the tiny model runs
two tokens of the naive lever and checks them against the float64 NumPy reference:
correctness only.
"""

import time

import numpy as np

from zoo.bench.checking import relative_error
from zoo.bench.sweeps import is_number

COMMAND = "decode"
HELP = "greedy decoding of Llama-3-8B from the zoo's kernels, lever by lever: tokens/s, % of the bandwidth limit"
COLUMNS = (
    "lever",
    "tokens_per_s",
    "ms_per_token",
    "pct_of_limit",
    "vs_torch_eager",
    "gb_per_token",
    "limit_tokens_per_s",
    "same_tokens_as_torch",
    "logits_error",
    "time_by_kind",
    "tokens",
)
TOKENS_SHOWN = 8


def add_arguments(parser):
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated a lever (default 32)")
    parser.add_argument("--context", type=int, default=1024, help="positions already in the cache (default 1024)")
    parser.add_argument("--naive-tokens", type=int, default=4, help="tokens of the two first-step levers (default 4)")
    parser.add_argument("--levers", default="all", help="comma-separated lever names, or all")
    parser.add_argument("--seed", type=int, default=0, help="the weights' seed")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile(mode='reduce-overhead')")


def _tiny_check(args):
    """The simulator's row: two tokens of the tiny model's naive lever against the float64 NumPy reference."""
    from zoo.llm import config, decode, reference
    from zoo.llm.weights import Weights

    weights = Weights(config.TINY, seed=args.seed)
    decoder = decode.Decoder(weights)
    decoder.start(3)
    decoder.generate(2, decode.lever("naive"))
    ours, _ = decoder.sequence()
    theirs, _ = reference.Reference(weights).generate(3, 2)
    verdict = "same as" if ours.tolist() == theirs else "DIFFERENT from"
    return [{"lever": f"naive, tiny model: tokens {verdict} float64 NumPy's", "tokens": " ".join(map(str, ours))}]


def _timed(run, count):
    from numba import cuda

    cuda.synchronize()
    start = time.perf_counter()
    run(count)
    cuda.synchronize()
    return (time.perf_counter() - start) / count


def measure(args):
    if args.simulator:
        return _tiny_check(args)
    from zoo.bench import ceilings
    from zoo.llm import config

    return ladder(config.LLAMA3_8B, args, ceilings.copy_bandwidth(), _torch_rows)


def ladder(c, args, copy_gbs, torch_rows):
    """The rows of every lever and of ``torch_rows(decoder, first_token, args, row)`` -> (rows, its tokens, its first
    logits), for the model of config ``c`` with ``copy_gbs`` GB/s of copy bandwidth."""
    from numba import cuda

    from zoo import SIMULATOR
    from zoo.llm import decode
    from zoo.llm.weights import Weights

    hold = None
    if not SIMULATOR:
        from zoo.bench.timing import hold_gpu as hold

    first_token = min(128_000, c.vocab - 1)  # Llama 3's <|begin_of_text|>: any id would do
    weights = Weights(c, seed=args.seed)
    weights.quantize()
    decoder = decode.Decoder(weights, max_context=args.context + args.tokens + 4)
    prompt_rows = _prefill(decoder, args) if args.context else []
    kv_bytes = 2 * c.layers * c.kv_size * 2 * (args.context + args.tokens / 2)  # K and V, float16, the mean context

    def row(name, seconds, int4, tokens):
        gb = (weights.bytes_per_token(int4) + kv_bytes) / 1e9
        limit = copy_gbs / gb
        return {
            "lever": name,
            "tokens_per_s": 1 / seconds,
            "ms_per_token": 1e3 * seconds,
            "pct_of_limit": 100 / seconds / limit,
            "gb_per_token": gb,
            "limit_tokens_per_s": limit,
            "tokens": " ".join(map(str, tokens[:TOKENS_SHOWN])),
            "_tokens": tokens,
        }

    # PyTorch first: its tokens and first logits are what every lever is compared with (its writes of the cache
    # past the context are overwritten by each run)
    try:
        reference_rows, reference_tokens, reference_logits = torch_rows(decoder, first_token, args, row)
    except Exception as e:  # PyTorch missing or broken: the zoo's rows still count, with nothing to compare
        reference_rows, reference_tokens, reference_logits = [], [], None
        print(f"zoo decode: no PyTorch rows ({type(e).__name__}: {e})")
    rows = []
    chosen = decode.LEVERS if args.levers == "all" else [decode.lever(n.strip()) for n in args.levers.split(",")]
    for lever in chosen:
        count = args.naive_tokens if lever.step == "first" else args.tokens
        decoder.start(first_token, args.context)
        decoder.generate(2, lever)  # compiles every kernel, captures the graph
        decoder.start(first_token, args.context)
        decoder.generate(1, lever)
        ours = decoder.logits.copy_to_host()[0]
        error = None
        if reference_logits is not None:
            error = relative_error(ours, reference_logits)
        decoder.start(first_token, args.context)
        seconds = _timed(lambda n, lever=lever: decoder.generate(n, lever), count)
        tokens, _ = decoder.sequence()
        r = row(lever.name, seconds, lever.int4, tokens[args.context :].tolist())
        r["logits_error"] = error
        decoder.start(first_token, args.context)
        r["time_by_kind"] = _shares(decoder.time_by_kind(lever, hold))
        rows.append(r)
        cuda.synchronize()
    rows += reference_rows
    eager = next((r["tokens_per_s"] for r in reference_rows if r["lever"] == "torch eager"), None)
    for r in rows:
        r["vs_torch_eager"] = r["tokens_per_s"] / eager if eager and r.get("tokens_per_s") else None
        n = min(len(r["_tokens"]), len(reference_tokens))
        same = sum(a == b for a, b in zip(r["_tokens"][:n], reference_tokens[:n], strict=True))
        r["same_tokens_as_torch"] = f"{same}/{n}"
        del r["_tokens"]
    return rows + prompt_rows


def _prefill(decoder, args):
    """The context is a prompt's: ``args.context`` random token ids through the prefill (each family's last step this
    GPU runs), its keys and values left in the cache for every lever's tokens. Its row: tokens a second of the
    prefill alone, timed over three runs after the first (which compiles and transposes the weights)."""
    from zoo.llm import prefill

    prompt = np.random.default_rng(args.seed).integers(0, decoder.config.vocab, args.context)
    run = prefill.Prefill(decoder, "last")
    run.run(prompt)
    buffers = run.buffers(args.context)
    seconds = _timed(lambda n: [run.launch(buffers) for _ in range(n)], 3)
    decoder.weights.drop_transposed()  # 16 GB at Llama-3-8B that no lever reads
    names = ", ".join(f"{name} {step.name}" for name, step in run.steps.items() if name in ("hgemm", "attention"))
    return [
        {
            "lever": f"prefill of the {args.context}-token prompt ({names})",
            "tokens_per_s": args.context / seconds,
            "ms_per_token": 1e3 * seconds / args.context,
        }
    ]


def _shares(spent):
    """'gemv 4.91 ms 90%, attention ...': each kind's device time in a token and its share, largest first."""
    total = sum(spent.values()) or 1.0
    return ", ".join(
        f"{k} {ms:.3g} ms {100 * ms / total:.0f}%" for k, ms in sorted(spent.items(), key=lambda kv: -kv[1])
    )


def _torch_rows(decoder, first_token, args, row):
    """PyTorch's rows: eager, and torch.compile with --compile; its tokens and first logits."""
    import torch

    from zoo.llm.torch_model import TorchModel

    model = TorchModel(decoder)
    with torch.no_grad():
        _, logits = model(torch.tensor([first_token], device="cuda"), torch.tensor([args.context], device="cuda"))
        first_logits = logits[0].cpu().numpy()
        model.generate(first_token, args.context, 2)  # warm: cuBLAS's handles, the kernels' first loads
        seconds = _timed(lambda n: model.generate(first_token, args.context, n), args.tokens)
        tokens = model.generate(first_token, args.context, args.tokens)
        rows = [row("torch eager", seconds, False, tokens) | {"logits_error": 0.0}]
        if args.compile:
            try:
                start = time.perf_counter()
                compiled = model.compiled()
                model.generate(first_token, args.context, 3, step=compiled)  # compiles, records the graphs
                compile_s = time.perf_counter() - start
                seconds = _timed(lambda n: model.generate(first_token, args.context, n, step=compiled), args.tokens)
                found = model.generate(first_token, args.context, args.tokens, step=compiled)
                rows.append(row(f"torch.compile ({compile_s:.0f} s to compile)", seconds, False, found))
            except Exception as e:  # the eager rows stand; the failure is a row of its own
                rows.append(
                    {"lever": "torch.compile failed", "tokens": f"{type(e).__name__}: {e}"[:200], "_tokens": []}
                )
    return rows, tokens, first_logits


def findings(rows):
    by = {r["lever"]: r for r in rows if is_number(r.get("tokens_per_s"))}
    out = [f"{name}: {r['tokens_per_s']:,.0f} tokens/s" for name, r in by.items() if name.startswith("prefill")]
    for name in ("CUDA graph", "int4", "decode attention"):
        r = by.get(name)
        if r:
            out.append(
                f"{name}: {r['tokens_per_s']:.1f} tokens/s, {r['pct_of_limit']:.0f}% of its bandwidth limit "
                f"({r['limit_tokens_per_s']:.1f} tokens/s at {r['gb_per_token']:.2f} GB a token), "
                f"{r['vs_torch_eager']:.2f}x PyTorch fp16 eager"
            )
    compiled = [r for n, r in by.items() if n.startswith("torch.compile")]
    if compiled and "CUDA graph" in by:
        ratio = by["CUDA graph"]["tokens_per_s"] / compiled[0]["tokens_per_s"]
        out.append(f"fp16 zoo (CUDA graph) against torch.compile: {ratio:.2f}x its tokens a second")
    return out


def kinds_ms(text):
    """{kind: ms} from a row's time_by_kind ('gemv 5.51 ms 75%, rope and cache 0.27 ms 4%, ...'), {} where empty."""
    found = {}
    for part in (text or "").split(", "):
        words = part.split()
        if len(words) >= 4 and words[-2] == "ms" and is_number(_float(words[-3])):
            found[" ".join(words[:-3])] = float(words[-3])
    return found


def _float(text):
    try:
        return float(text)
    except ValueError:
        return None


def plot(rows, device_name):
    """Two panels: tokens a second of each lever against its bandwidth limit; and a token's device time split by
    kind of kernel, against the bandwidth floor (the bytes a token reads over the copy's rate)."""
    import matplotlib.pyplot as plt

    shown = [r for r in rows if is_number(r.get("tokens_per_s")) and not str(r["lever"]).startswith("prefill")]
    fig, (ax, split) = plt.subplots(1, 2, figsize=(14, 0.45 * len(shown) + 1.8))
    names = [r["lever"] for r in shown]
    ax.barh(names, [r["tokens_per_s"] for r in shown], color="tab:blue")
    for i, r in enumerate(shown):
        if is_number(r.get("limit_tokens_per_s")):
            ax.plot([r["limit_tokens_per_s"]] * 2, [i - 0.4, i + 0.4], color="black", lw=2)
    ax.invert_yaxis()
    ax.set_xlabel("tokens per second (black: the bandwidth limit of the row's bytes)")
    ax.set_title(f"Llama-3-8B decode at batch 1, {device_name}")

    split_rows = [(r, kinds_ms(r.get("time_by_kind"))) for r in shown]
    split_rows = [(r, k) for r, k in split_rows if k]
    kinds = sorted(
        {kind for _, k in split_rows for kind in k}, key=lambda kind: -sum(k.get(kind, 0) for _, k in split_rows)
    )
    floors = [1e3 / r["limit_tokens_per_s"] for r, _ in split_rows if is_number(r.get("limit_tokens_per_s"))]
    right = 2.5 * max(floors) if floors else None  # the slow levers (one launch at a time) run off this scale
    colors = plt.get_cmap("tab10")
    for i, (r, k) in enumerate(split_rows):
        left = 0.0
        for j, kind in enumerate(kinds):
            ms = k.get(kind, 0.0)
            split.barh(i, ms, left=left, color=colors(j % 10), label=kind if i == 0 else None)
            left += ms
        if is_number(r.get("limit_tokens_per_s")):
            split.plot([1e3 / r["limit_tokens_per_s"]] * 2, [i - 0.4, i + 0.4], color="black", lw=2)
        if right is not None and left > right:
            split.text(right, i, f" {left:,.0f} ms ", ha="right", va="center", color="white", fontsize=8)
    split.set_yticks(range(len(split_rows)), [r["lever"] for r, _ in split_rows])
    split.invert_yaxis()
    if right is not None:
        split.set_xlim(0, right)
    split.set_xlabel("device ms a token, by kind of kernel (black: the bandwidth floor)")
    split.set_title("where a token's time goes")
    if split_rows:
        split.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
