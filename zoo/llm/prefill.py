"""A prompt's prefill: its P tokens through every layer at once, the linear layers as GEMMs on the tensor cores.

A decode token multiplies one vector by each weight matrix: a GEMV, whose time is the weights' bytes. A prompt's
P tokens are all known at once, so each layer multiplies a P x in matrix of activations by the weights: a GEMM,
with P times the flops for the same bytes, on the tensor cores (the hgemm family), bound by arithmetic from a few
hundred tokens on (``zoo llm-budget`` prints where). Attention is the attention family's forward pass over the
prompt, causal, with grouped KV heads. The other families take P rows as they take one: the embedding gathers P
rows, rmsnorm normalizes P rows, rope turns P tokens (a position each), silu_mul multiplies P rows.

Layouts. hgemm multiplies A (M x K) by B (K x N), both row-major: the activations are A (P x in), so the weights
must be B (in x out), the transpose of the gemv family's W (out x in). ``Weights.transposed`` makes that copy once,
on the GPU (16 GB more at Llama-3-8B), as a server keeps its weights in the layout its GEMM reads. Q and K are one GEMM
and V another, so that QK's output rows are (heads + kv_heads) x d, what rope reads; ``to_heads`` then moves Q, K
and V heads-major (heads x P x d, what attention reads) and writes K and V into the cache at positions 0 .. P - 1,
``to_tokens`` moves attention's output back to P x (heads x d) for the O projection.

The end: only the last position's row goes through the final norm and the lm_head (a GEMV: one row), and its argmax,
the first generated token, is left where a decode token reads it, with the position at P: the ``Decoder`` goes on.
"""

import numpy as np
from numba import cuda, int32, uint32
from numba.core.types import float16

from zoo.device.jit import jit
from zoo.llm.decode import advance, device_zeros, runnable_steps, time_by_kind

THREADS = 256  # to_heads and to_tokens: a thread an element
FAMILIES = ("embedding", "rmsnorm", "hgemm", "rope", "attention", "silu_mul", "gemv", "argmax")


@jit
def to_heads(qk, v, q_heads, k_heads, v_heads, k_cache, v_cache, layer):
    """Q, K (rotated, float16) and V (float32, rounded here) of every token, from token-major (qk: P x (heads +
    kv_heads) x d; v: P x kv_heads d) to heads-major (heads x P x d), K and V into the layer's cache too."""
    tokens, qk_heads, d = qk.shape
    heads, kv_heads = q_heads.shape[0], k_heads.shape[0]
    width = uint32((qk_heads + kv_heads) * d)  # a token's elements: Q, K, then V
    i = uint32(cuda.grid(1))
    if i < uint32(tokens) * width:
        p, rest = i // width, i % width  # consecutive threads, consecutive elements of a head: coalesced
        head, j = rest // uint32(d), rest % uint32(d)
        if head < heads:
            q_heads[head, p, j] = qk[p, head, j]
        elif head < qk_heads:
            h = head - uint32(heads)
            k_heads[h, p, j] = qk[p, head, j]
            k_cache[layer, h, p, j] = qk[p, head, j]
        else:
            h = head - uint32(qk_heads)
            x = float16(v[p, h * uint32(d) + j])
            v_heads[h, p, j] = x
            v_cache[layer, h, p, j] = x


@jit
def to_tokens(o_heads, out):
    """Attention's output from heads-major (heads x P x d) to token-major (P x heads d), the O projection's input."""
    heads, tokens, d = o_heads.shape
    width = uint32(heads * d)
    i = uint32(cuda.grid(1))
    if i < uint32(tokens) * width:
        p, rest = i // width, i % width  # consecutive threads, consecutive elements of a token's row
        out[p, rest] = o_heads[rest // uint32(d), p, rest % uint32(d)]


@jit
def set_position(position, at):
    """The decode position set on the GPU (``advance`` then moves it on by one)."""
    if cuda.grid(1) == 0:
        position[0] = int32(at)


class Prefill:
    """A prompt through the model at once, filling ``decoder``'s cache and leaving it at the prompt's end with the
    next token chosen. ``which`` picks each family's step: "first" or "last" (``decode.runnable_steps``)."""

    def __init__(self, decoder, which="last"):
        self.steps = runnable_steps(FAMILIES, which)
        self.decoder, self.which = decoder, which
        self.transposed = None  # the weights as hgemm's B (Weights.transposed), fetched on the first run
        self._buffers = {}  # by prompt length

    def buffers(self, n):
        """The buffers of a prompt of n tokens, made on its first run."""
        if n not in self._buffers:
            c = self.decoder.config
            d = c.head_size
            self._buffers[n] = {
                "ids": device_zeros(n, dtype=np.int32),
                "positions": cuda.to_device(np.arange(n, dtype=np.int32)),
                "residual": device_zeros(n, c.hidden),
                "nothing": device_zeros(n, c.hidden),  # layer 0's sublayer output: the stream is the embedding
                "normed": device_zeros(n, c.hidden, dtype=np.float16),
                "qk": device_zeros(n, c.heads + c.kv_heads, d),
                "v": device_zeros(n, c.kv_size),
                "qk16": device_zeros(n, c.heads + c.kv_heads, d, dtype=np.float16),
                "q_heads": device_zeros(c.heads, n, d, dtype=np.float16),
                "k_heads": device_zeros(c.kv_heads, n, d, dtype=np.float16),
                "v_heads": device_zeros(c.kv_heads, n, d, dtype=np.float16),
                "o_heads": device_zeros(c.heads, n, d, dtype=np.float16),
                "attention": device_zeros(n, c.q_size, dtype=np.float16),
                "o": device_zeros(n, c.hidden),
                "gate_up": device_zeros(n, 2 * c.intermediate),
                "act": device_zeros(n, c.intermediate, dtype=np.float16),
                "down": device_zeros(n, c.hidden),
            }
        return self._buffers[n]

    def check(self, prompt):
        """The prompt as int32 ids, or ValueError before any launch: ids in the vocabulary, at least one token,
        and room in the cache for the prompt and the token it chooses."""
        ids = np.asarray(prompt)
        d = self.decoder
        if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"a prompt is a non-empty 1-D array of token ids, got {ids.dtype} of shape {ids.shape}")
        if not 1 <= ids.size < d.max_context:
            raise ValueError(f"a prompt of {ids.size} tokens and its next token pass the cache's {d.max_context}")
        if ids.min() < 0 or ids.max() >= d.config.vocab:
            raise ValueError(f"token ids must be in 0 .. {d.config.vocab - 1}, got {ids.min()} .. {ids.max()}")
        return ids.astype(np.int32)

    def _validate(self, b):
        """Each family's checks and its step's own, on the first layer's arguments, before any launch."""
        s, t = self.steps, self.transposed[0]
        w = self.decoder.weights
        s["embedding"].validate(w.embedding, b["ids"])
        s["rmsnorm"].validate(b["nothing"], b["residual"], w.layers[0].attn_norm)
        for a, weight in ((b["normed"], t["qk"]), (b["normed"], t["v"]), (b["attention"], t["o"])):
            s["hgemm"].validate(a, weight)
        s["hgemm"].validate(b["act"], t["down"])
        s["rope"].validate(b["qk"], b["positions"])
        s["attention"].validate(b["q_heads"], b["k_heads"], b["v_heads"], causal=True)
        s["silu_mul"].validate(b["gate_up"])

    def run(self, prompt):
        """Fill the cache with the prompt's keys and values and choose the token after it (read it, with the
        prompt, from ``decoder.sequence()``)."""
        ids = self.check(prompt)
        n = ids.size
        if self.transposed is None:
            self.transposed = self.decoder.weights.transposed()
        b = self.buffers(n)
        self._validate(b)
        b["ids"].copy_to_device(ids)
        tokens = np.zeros(self.decoder.max_context, np.int32)
        tokens[:n] = ids
        self.decoder.tokens.copy_to_device(tokens)
        self.launch(b)

    def time_by_kind(self, prompt, hold=None):
        """{kind: device ms} of one prefill of ``prompt``'s launches (``decode.time_by_kind``), after a run that
        compiles, transposes the weights and allocates."""
        self.run(prompt)
        return time_by_kind(lambda mark: self.launch(self.buffers(len(prompt)), mark), hold)

    def launch(self, b, mark=None):
        """The prompt's launches (every buffer for its length in ``b``, the ids in ``b["ids"]``). ``mark(kind)``,
        where given, is called after each kind of kernel's launches (KINDS): a timer records an event there."""
        d, c, w, s = self.decoder, self.decoder.config, self.decoder.weights, self.steps
        mark = mark or (lambda kind: None)
        n = b["ids"].size
        gemm = s["hgemm"].module.launch
        norm = s["rmsnorm"].module.launch
        s["embedding"].module.launch(w.embedding, b["ids"], b["residual"])
        mark("embedding")
        delta = b["nothing"]
        qk_flat = b["qk"].reshape(n, (c.heads + c.kv_heads) * c.head_size)
        blocks = lambda count: (count + THREADS - 1) // THREADS  # noqa: E731
        for i, (layer, t) in enumerate(zip(w.layers, self.transposed, strict=True)):
            norm(delta, b["residual"], layer.attn_norm, b["normed"])
            mark("rmsnorm")
            gemm(b["normed"], t["qk"], qk_flat)  # P x (heads + kv_heads) d
            gemm(b["normed"], t["v"], b["v"])  # P x kv_heads d
            mark("hgemm")
            s["rope"].module.launch(b["qk"], b["positions"], b["qk16"])
            to_heads[blocks(n * (c.heads + 2 * c.kv_heads) * c.head_size), THREADS](
                b["qk16"], b["v"], b["q_heads"], b["k_heads"], b["v_heads"], d.k_cache, d.v_cache, np.int32(i)
            )
            mark("rope and layouts")
            s["attention"].module.launch(b["q_heads"], b["k_heads"], b["v_heads"], b["o_heads"], causal=True)
            mark("attention")
            to_tokens[blocks(n * c.q_size), THREADS](b["o_heads"], b["attention"])
            mark("rope and layouts")
            gemm(b["attention"], t["o"], b["o"])
            mark("hgemm")
            norm(b["o"], b["residual"], layer.mlp_norm, b["normed"])
            mark("rmsnorm")
            gemm(b["normed"], t["gate_up"], b["gate_up"])
            mark("hgemm")
            s["silu_mul"].module.launch(b["gate_up"], b["act"])
            mark("silu_mul")
            gemm(b["act"], t["down"], b["down"])
            mark("hgemm")
            delta = b["down"]
        last = slice(n - 1, n)  # the next token needs the last position's row alone
        norm(delta[last], b["residual"][last], w.final_norm, d.normed)
        s["gemv"].module.launch(w.lm_head.W, d.normed_flat, None, d.logits.reshape(c.vocab))
        s["argmax"].module.launch(d.logits, d.token)
        set_position[1, 32](d.position, np.int32(n - 1))  # the prompt's last position; advance moves on to n
        advance[1, 32](d.token, d.position, d.filled, d.tokens)
        mark("last row: norm, lm_head, argmax")
