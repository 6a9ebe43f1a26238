"""The capstone's decode split across GPUs: tokens a second at 1, 2, 4 and 8 ranks, the ring against NCCL (issue 69).

``zoo.llm.tensor_parallel`` splits Llama-3-8B as Megatron-LM does: each rank holds its
share of every layer's heads and MLP rows, and two all-reduces a layer (one hidden vector
each, 16 KB) add the ranks' partial sums, through the collectives family's ring (v04) or
NCCL. For each rank count (powers of two up to the GPUs present, ``--ranks`` to choose;
ranks share a GPU where there are fewer GPUs) it times ``--tokens`` tokens of the fast
steps lever after a context of ``--context`` positions, and the token's 64 all-reduces
alone on buffers of the same size (their share of the token: latency, at 16 KB), and
compares rank 0's first logits with the one-GPU decoder's on the same weights. The
bandwidth limit of a split token is a rank's bytes (its 1/R of the layers' weights and
cache, the copies of the embedding's row, the norms and the lm_head) over the copy
bandwidth: the replicated lm_head (1 GB of the 16) bounds the speedup below R. In the
simulator two ranks of the tiny model are checked against the one-GPU decoder: correctness
only.
"""

import time

from zoo.bench.checking import relative_error
from zoo.bench.sweeps import is_number

COMMAND = "tensor-parallel"
HELP = "Llama-3-8B decode split over 1 to 8 GPUs (Megatron's split): tokens/s, the all-reduces' share, ring vs NCCL"
COLUMNS = (
    "ranks",
    "gpus",
    "reduce",
    "tokens_per_s",
    "ms_per_token",
    "allreduce_ms_per_token",
    "vs_one_gpu",
    "pct_of_limit",
    "logits_error",
)


def add_arguments(parser):
    parser.add_argument("--ranks", type=int, action="append", help="rank counts (default 1, 2, 4, 8 up to the GPUs)")
    parser.add_argument("--context", type=int, default=1024, help="positions already in the cache (default 1024)")
    parser.add_argument("--tokens", type=int, default=16, help="tokens timed a row (default 16)")
    parser.add_argument("--seed", type=int, default=0, help="the weights' seed")


def _first_logits(model, first_token, context, lever):
    model.start(first_token, context)
    model.generate(1, lever)
    return model.logits.copy_to_host()[0]


def _synchronize(devices):
    """Wait for every GPU of the ranks (their kernels run on each device's default stream)."""
    from numba import cuda

    for gpu in sorted(set(devices)):
        with cuda.gpus[gpu]:
            cuda.synchronize()


def measure(args):
    from zoo.kernels.collectives import world
    from zoo.llm import config, decode, tensor_parallel
    from zoo.llm.weights import Weights

    if args.simulator:
        weights = Weights(config.TINY, seed=args.seed)
        lever = decode.lever("fused")
        one = decode.Decoder(weights)
        want = _first_logits(one, 3, 0, lever)
        got = _first_logits(tensor_parallel.TensorParallel(weights, 2), 3, 0, lever)
        return [
            {"ranks": 2, "gpus": 1, "reduce": "ring (tiny model, simulator)", "logits_error": relative_error(got, want)}
        ]
    from zoo.bench import ceilings

    c = config.LLAMA3_8B
    gpus = world.device_count()
    counts = sorted(set(args.ranks or [r for r in (1, 2, 4, 8) if r <= max(2, gpus)]))
    return tensor_parallel_rows(c, counts, args.context, args.tokens, args.seed, ceilings.copy_bandwidth())


def tensor_parallel_rows(c, counts, context, tokens, seed, copy_gbs):
    """The rows of the model of config ``c`` at each rank count, through the ring and (where it runs) NCCL."""
    from numba import cuda

    from zoo.kernels.collectives import library, world
    from zoo.llm import decode, tensor_parallel
    from zoo.llm.weights import Weights

    lever = decode.lever("fast steps")
    weights = Weights(c, seed=seed)
    first_token = min(128_000, c.vocab - 1)
    one = decode.Decoder(weights, max_context=context + tokens + 4)
    one.fill_context(context, seed)
    want = _first_logits(one, first_token, context, lever)
    del one
    rows, baseline = [], None
    for ranks in counts:
        group = world.group(ranks)
        reduces = ["ring"] + (["nccl"] if ranks > 1 and library.available(group.devices)[0] else [])
        for reduce in reduces:
            model = tensor_parallel.TensorParallel(weights, ranks, context + tokens + 4, reduce=reduce)
            model.fill_context(context, seed)
            got = _first_logits(model, first_token, context, lever)  # compiles; the logits checked
            model.start(first_token, context)
            _synchronize(group.devices)
            began = time.perf_counter()
            model.generate(tokens, lever)
            _synchronize(group.devices)
            seconds = (time.perf_counter() - began) / tokens
            _synchronize(group.devices)
            began = time.perf_counter()
            model.exchanges()  # the token's 64 sums of a hidden vector alone
            _synchronize(group.devices)
            exchange = time.perf_counter() - began
            shard = tensor_parallel.shard_config(c, ranks)
            split = sum(2 * r * k for r, k in ((shard.qkv_size, c.hidden), (c.hidden, shard.q_size)))
            split = c.layers * (split + 2 * 3 * shard.intermediate * c.hidden)  # QKV, O, gate, up, down in fp16
            replicated = 2 * c.vocab * c.hidden + 2 * c.hidden * (2 * c.layers + 2)  # lm_head, norms, a row
            cache = 2 * c.layers * shard.kv_size * 2 * context
            if ranks == 1:
                baseline = seconds
            rows.append(
                {
                    "ranks": ranks,
                    "gpus": len(set(group.devices)),
                    "reduce": reduce,
                    "tokens_per_s": 1 / seconds,
                    "ms_per_token": 1e3 * seconds,
                    "allreduce_ms_per_token": 1e3 * exchange if ranks > 1 else 0.0,
                    "vs_one_gpu": baseline / seconds if baseline else None,
                    "pct_of_limit": 100 * (split + replicated + cache) / (copy_gbs * 1e9) / seconds,
                    "logits_error": relative_error(got, want),
                }
            )
            del model
            cuda.current_context().deallocations.clear()
    return rows


def findings(rows):
    out = []
    for r in rows:
        if is_number(r.get("tokens_per_s")) and r.get("ranks", 1) > 1:
            share = r["allreduce_ms_per_token"] / r["ms_per_token"] if is_number(r.get("allreduce_ms_per_token")) else 0
            speed = f"{r['vs_one_gpu']:.2f}x one GPU" if is_number(r.get("vs_one_gpu")) else "no one-GPU row"
            out.append(
                f"{r['ranks']} ranks on {r['gpus']} GPU(s), {r['reduce']}: {r['tokens_per_s']:.1f} tokens/s, {speed}; "
                f"the all-reduces {r['allreduce_ms_per_token']:.2f} ms of a token's {r['ms_per_token']:.2f} "
                f"({100 * share:.0f}%)"
            )
    return out


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for reduce, style in (("ring", "o-"), ("nccl", "s--")):
        shown = sorted(
            (r for r in rows if r.get("reduce") == reduce and is_number(r.get("tokens_per_s"))),
            key=lambda r: r["ranks"],
        )
        if shown:
            ax.plot([r["ranks"] for r in shown], [r["tokens_per_s"] for r in shown], style, label=reduce)
    ax.set_xlabel("ranks (GPUs, where as many are present)")
    ax.set_ylabel("tokens per second")
    ax.set_title(f"Llama-3-8B decode, tensor parallel, {device_name}")
    if ax.lines:
        ax.legend()
    fig.tight_layout()
    return fig
