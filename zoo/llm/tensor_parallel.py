"""Tensor parallelism: one token of the model on R GPUs, each holding 1/R of every layer (Megatron-LM's split).

A decode token reads every weight once, so R GPUs, each reading 1/R of the weights at its own bandwidth, could
take a token in 1/R of the time. The split that needs the fewest exchanges (Shoeybi et al., 2019):

    attention  QKV split by heads (columns of the product): rank r computes its H/R query heads and KV/R key and
               value heads, keeps the cache of those, and attends with them alone: heads never meet.
               O split by its input (rows of the product, the same heads' columns of W_o): rank r's product is a
               partial sum of the hidden vector, and an all-reduce adds the R partials.
    MLP        gate and up split by their outputs (I/R each), silu_mul on the rank's own share, down split by
               its input: again a partial sum, again an all-reduce.

Two all-reduces a layer, each of one hidden vector (16 KB at Llama-3-8B): at batch 1 the exchange is latency, not
bandwidth, 64 of them a token, and where each takes tens of microseconds they can cost more than the 1/R of the
weights saves: the sweep (``zoo tensor-parallel``) shows where. The embedding, the norms and the lm_head are
copied to every rank: each computes the same residual stream and the same next token, so no rank waits for
another's token. A rank is a ``decode.Decoder`` on its shard, run one phase at a time (``Decoder.token_phases``
stops after each partial sum); the ranks' phases are launched in turn and the partials summed between them,
through the collectives family's pipelined ring (its v04: the fastest step on one buffer) or NCCL. Ranks share a
GPU where there are fewer GPUs than ranks (``collectives.world``: the same launches and copies, no links), so the
code runs, and is checked, anywhere. fp16 weights, levers without a CUDA graph.
"""

import dataclasses

import numpy as np
from numba import cuda

import zoo
from zoo.llm.decode import Decoder
from zoo.llm.weights import Linear


@dataclasses.dataclass
class ShardLayer:
    """Rank r's share of a layer (``decode.Decoder`` reads a layer's six arrays by these names)."""

    attn_norm: object
    qkv: Linear
    o: Linear
    mlp_norm: object
    gate_up: Linear
    down: Linear


class ShardWeights:
    """Rank r's weights: its heads' rows of QKV and columns of O, its share of the MLP's rows of gate and up and
    columns of down, and copies of the embedding, the norms and the lm_head; the layout a ``Decoder`` reads."""

    def __init__(self, config, embedding, layers, final_norm, lm_head):
        self.config, self.embedding, self.layers = config, embedding, layers
        self.final_norm, self.lm_head = final_norm, lm_head
        self.quantized = False


def shard_config(c, ranks):
    """A rank's model: H/R query heads, KV/R key and value heads, I/R of the MLP; ValueError where R does not divide
    them."""
    for name, count in (("query heads", c.heads), ("KV heads", c.kv_heads), ("MLP width", c.intermediate)):
        if count % ranks:
            raise ValueError(f"{ranks} ranks do not divide the {count} {name}: each rank takes an equal share")
    share = {"heads": c.heads // ranks, "kv_heads": c.kv_heads // ranks, "intermediate": c.intermediate // ranks}
    return dataclasses.replace(c, **share)


def _rows(host, ranges):
    """The rows of ``ranges`` (each (first, last)) of a host matrix, stacked: a contiguous copy."""
    return np.ascontiguousarray(np.concatenate([host[a:b] for a, b in ranges]))


def shard(weights, ranks, group):
    """[ShardWeights of rank r on its device] for the ``ranks`` ranks of ``group``: each layer's matrices are copied
    to the host once and each rank's share sent to its device; the replicated arrays once a device."""
    c, s = weights.config, shard_config(weights.config, ranks)
    replicated = {}  # device -> (embedding, final_norm, lm_head W, per-layer norms)
    for r in range(ranks):
        device = group.devices[r]
        if device not in replicated:
            with group.on(r):
                replicated[device] = (
                    cuda.to_device(weights.embedding.copy_to_host()),
                    cuda.to_device(weights.final_norm.copy_to_host()),
                    Linear.of(cuda.to_device(weights.lm_head.W.copy_to_host())),
                    [
                        (cuda.to_device(lay.attn_norm.copy_to_host()), cuda.to_device(lay.mlp_norm.copy_to_host()))
                        for lay in weights.layers
                    ],
                )
    layers = [[] for _ in range(ranks)]
    for i, layer in enumerate(weights.layers):
        qkv, o = layer.qkv.W.copy_to_host(), layer.o.W.copy_to_host()
        gate_up, down = layer.gate_up.W.copy_to_host(), layer.down.W.copy_to_host()
        for r in range(ranks):
            q = (r * s.q_size, (r + 1) * s.q_size)  # rank r's query heads: rows of W_qkv, columns of W_o
            kv = (r * s.kv_size, (r + 1) * s.kv_size)  # its key and value heads, within K's rows and V's
            mlp = (r * s.intermediate, (r + 1) * s.intermediate)  # its share of gate's rows, up's, down's columns
            k_at, v_at = c.q_size, c.q_size + c.kv_size  # where K's rows and V's start in W_qkv
            qkv_rows = [q, (k_at + kv[0], k_at + kv[1]), (v_at + kv[0], v_at + kv[1])]
            gate_up_rows = [mlp, (c.intermediate + mlp[0], c.intermediate + mlp[1])]
            attn_norm, mlp_norm = replicated[group.devices[r]][3][i]
            with group.on(r):
                layers[r].append(
                    ShardLayer(
                        attn_norm,
                        Linear.of(cuda.to_device(_rows(qkv, qkv_rows)), parts=(s.q_size, s.kv_size, s.kv_size)),
                        Linear.of(cuda.to_device(np.ascontiguousarray(o[:, q[0] : q[1]]))),
                        mlp_norm,
                        Linear.of(cuda.to_device(_rows(gate_up, gate_up_rows)), parts=(s.intermediate,) * 2),
                        Linear.of(cuda.to_device(np.ascontiguousarray(down[:, mlp[0] : mlp[1]]))),
                    )
                )
    shards = []
    for r in range(ranks):
        embedding, final_norm, lm_head, _ = replicated[group.devices[r]]
        shards.append(ShardWeights(s, embedding, layers[r], final_norm, lm_head))
    return shards


class TensorParallel:
    """The model on ``ranks`` ranks (a ``Decoder`` each, on its shard), their partial sums added by ``reduce``:
    "ring" (the collectives family's v04) or "nccl"."""

    def __init__(self, weights, ranks, max_context=None, reduce="ring"):
        from zoo.kernels.collectives import world

        if not isinstance(ranks, (int, np.integer)) or ranks < 1:
            raise ValueError(f"ranks is a positive number, got {ranks!r}")
        if reduce not in ("ring", "nccl"):
            raise ValueError(f"reduce is 'ring' (the collectives family's v04) or 'nccl', not {reduce!r}")
        shard_config(weights.config, int(ranks))  # a split that does not divide is refused before any copy
        self.ranks, self.reduce = int(ranks), reduce
        self.group = world.group(self.ranks)
        if reduce == "nccl" and self.ranks > 1:
            from zoo.kernels.collectives import library

            ok, why = library.available(self.group.devices)
            if not ok:
                raise ValueError(f"the NCCL reduce cannot run here: {why}")
        self.shards = shard(weights, self.ranks, self.group)
        self.decoders = []
        for r, s in enumerate(self.shards):
            with self.group.on(r):
                self.decoders.append(Decoder(s, max_context))
        self.config = weights.config

    def sum_partials(self, partials):
        """Every rank's partial hidden vector replaced by the sum of all of them, in place, on the GPUs."""
        if self.ranks == 1:
            return
        if self.reduce == "ring":
            zoo.family("collectives")["v04"].module.allreduce(self.group, partials)
        else:
            from zoo.device.memory import address
            from zoo.kernels.collectives import library, world

            handles = [world.handle(s) for s in self.group.main]
            library.nccl_allreduce(self.group.devices, [address(p) for p in partials], partials[0].size, handles)

    def token_step(self, lever):
        """One token on every rank: each rank's launches up to its next partial sum, in turn, then the sum."""
        phases = []
        for r, decoder in enumerate(self.decoders):
            with self.group.on(r):
                phases.append(decoder.token_phases(lever))
        while True:
            partials = []
            for r, rank_phases in enumerate(phases):
                with self.group.on(r):
                    partials.append(next(rank_phases, None))
            if partials[0] is None:  # every rank has launched its whole token
                return
            self.sum_partials(partials)

    def exchanges(self):
        """A token's all-reduces alone (two a layer) on the ranks' O outputs, whose values they overwrite: what the
        split adds to a token, for the sweep's timing."""
        partials = [decoder.flat[id(decoder.o)] for decoder in self.decoders]
        for _ in range(2 * self.config.layers):
            self.sum_partials(partials)

    def start(self, first_token, position=0):
        for r, decoder in enumerate(self.decoders):
            with self.group.on(r):
                decoder.start(first_token, position)

    def fill_context(self, length, seed=0):
        """Each rank's cache (its own KV heads) filled as ``Decoder.fill_context`` fills the one-GPU model's heads."""
        for r, decoder in enumerate(self.decoders):
            with self.group.on(r):
                decoder.fill_context(length, seed, first_head=r * decoder.config.kv_heads)

    def generate(self, count, lever):
        if lever.graph or lever.int4:
            raise ValueError(f"tensor parallelism runs fp16 levers without a CUDA graph, not {lever.name!r}")
        position = int(self.decoders[0].position.copy_to_host()[0])
        if position + count >= self.decoders[0].max_context:
            raise ValueError(f"{count} more tokens pass the cache's {self.decoders[0].max_context} positions")
        for _ in range(count):
            self.token_step(lever)

    def sequence(self):
        """Rank 0's tokens and position: every rank holds the same."""
        return self.decoders[0].sequence()

    @property
    def logits(self):
        return self.decoders[0].logits
