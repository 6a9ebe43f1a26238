"""Decode at batch B: B sequences take a token each per step, every weight read once for all of them.

At batch 1 a step multiplies one vector by each weight matrix (a GEMV) and its time is the weights' bytes. B
sequences decoded together multiply a B x in matrix by each weight matrix: the same bytes, B times the flops. While
B is small the step still costs the bytes, so tokens a second grow with B for free; past the ridge (the batch where
the flops take as long as the bytes, a few hundred for fp16 on a Hopper: ``zoo llm-budget`` prints it) the step
costs the flops and tokens a second stop growing. That is single-user against many-user serving: the same GPU, the
same weights, many times the tokens.

Each matrix is either B GEMVs (``matrices="gemv"``: the gemv family, a launch a sequence, B reads of the weights)
or one GEMM (``matrices="hgemm"``: the hgemm family on ``Weights.transposed``, one read), so the sweep shows where
the GEMM pays. The attention reads each sequence's own cache: the batch folds into the heads (B x heads query heads
over B x kv_heads cache heads: the decode_attention family's layout), one launch a layer of that family's last step,
which reads the length on the GPU. The other families take B rows. Every sequence stands at the same position (one
length for the attention: a batch of equal contexts, as a benchmark makes it); each has its own tokens.
"""

import numpy as np
from numba import cuda, int32, uint32
from numba.core.types import float16

import zoo
from zoo.device.jit import jit
from zoo.llm.decode import MAX_CONTEXT, device_zeros, runnable_steps, time_by_kind

THREADS = 256
FAMILIES = ("embedding", "rmsnorm", "hgemm", "gemv", "rope", "silu_mul", "argmax")


@jit
def batch_append(qk, v, q_rows, k_cache, v_cache, layer, positions):
    """Each sequence's rotated Q into q_rows (B heads x 1 x d), its rotated K and its V (float32, rounded here) into
    its own cache heads (sequence b's kv head h is cache head b kv_heads + h) at its position."""
    batch, qk_heads, d = qk.shape
    kv_heads = k_cache.shape[1] // batch
    heads = qk_heads - kv_heads
    width = uint32((qk_heads + kv_heads) * d)  # a sequence's elements: Q, K, then V
    i = uint32(cuda.grid(1))
    if i < uint32(batch) * width:
        b, rest = i // width, i % width  # consecutive threads, consecutive elements of a head: coalesced
        head, j = rest // uint32(d), rest % uint32(d)
        p = positions[b]
        if head < heads:
            q_rows[b * uint32(heads) + head, 0, j] = qk[b, head, j]
        elif head < qk_heads:
            k_cache[layer, b * uint32(kv_heads) + head - uint32(heads), p, j] = qk[b, head, j]
        else:
            h = head - uint32(qk_heads)
            v_cache[layer, b * uint32(kv_heads) + h, p, j] = float16(v[b, h * uint32(d) + j])


@jit
def advance_batch(chosen, positions, filled, tokens):
    """Every sequence one position on (its rope position; the length the attention reads, p + 1) with the token
    chosen for it recorded there."""
    b = cuda.grid(1)
    if b < positions.size:
        p = positions[b] + int32(1)
        positions[b] = p
        if p < tokens.shape[1]:
            tokens[b, p] = chosen[b]
        if b == 0:
            filled[0] = p + int32(1)  # the same for every sequence: they stand at one position


def steps(which):
    """{family: the step a batch token launches}: each family's first step, or its last one this GPU runs
    (``decode.runnable_steps``); the decode_attention family's last step always (its length read on the GPU, its
    batch folded into the heads)."""
    chosen = runnable_steps(FAMILIES, which)
    attention = zoo.family("decode_attention")
    chosen["decode_attention"] = attention[len(attention)]
    return chosen


class BatchDecoder:
    """B sequences of the model decoded together: their buffers, caches and a step's launches (see the module)."""

    def __init__(self, weights, batch, max_context=None, matrices="hgemm", which="last"):
        c = weights.config
        if not isinstance(batch, (int, np.integer)) or batch < 1:
            raise ValueError(f"a batch is a positive number of sequences, got {batch!r}")
        if matrices not in ("hgemm", "gemv"):
            raise ValueError(f"matrices are 'hgemm' (one GEMM) or 'gemv' (a GEMV a sequence), not {matrices!r}")
        self.steps = steps(which)  # ValueError for a which that is neither first nor last
        self.max_context = max_context or c.max_context
        if not 1 <= self.max_context <= min(MAX_CONTEXT, c.max_context):
            raise ValueError(
                f"the cache holds up to {min(MAX_CONTEXT, c.max_context)} positions, asked {self.max_context}"
            )
        self.weights, self.config, self.batch, self.matrices = weights, c, int(batch), matrices
        B, d = self.batch, c.head_size
        self.token = device_zeros(B, dtype=np.int32)  # each sequence's token: the step's input, then its argmax
        self.positions = device_zeros(B, dtype=np.int32)
        self.filled = cuda.to_device(np.ones(1, np.int32))  # positions the attention reads: position + 1
        self.tokens = device_zeros(B, self.max_context, dtype=np.int32)
        self.residual = device_zeros(B, c.hidden)
        self.nothing = device_zeros(B, c.hidden)  # layer 0's sublayer output: the stream is the embedding
        self.normed = device_zeros(B, c.hidden, dtype=np.float16)
        self.qk = device_zeros(B, c.heads + c.kv_heads, d)
        self.qk_flat = self.qk.reshape(B, (c.heads + c.kv_heads) * d)  # views made once: a reshape costs host time
        self.v = device_zeros(B, c.kv_size)
        self.qk16 = device_zeros(B, c.heads + c.kv_heads, d, dtype=np.float16)
        cache = (c.layers, B * c.kv_heads, self.max_context, d)
        self.k_cache, self.v_cache = device_zeros(*cache, dtype=np.float16), device_zeros(*cache, dtype=np.float16)
        self.layer_caches = [(self.k_cache[i], self.v_cache[i]) for i in range(c.layers)]
        self.q_rows = device_zeros(
            B * c.heads, 1, d, dtype=np.float16
        )  # decode_attention's q: (B heads, 1 position, d)
        self.attention_rows = device_zeros(B * c.heads, 1, d, dtype=np.float16)
        self.attention = self.attention_rows.reshape(B, c.q_size)  # the same memory: the O projection's input
        self.o = device_zeros(B, c.hidden)
        self.gate_up = device_zeros(B, 2 * c.intermediate)
        self.act = device_zeros(B, c.intermediate, dtype=np.float16)
        self.down = device_zeros(B, c.hidden)
        self.logits = device_zeros(B, c.vocab)
        self._rows = {}  # the gemv path's row views, made once a buffer
        self._matrices = None
        self._checked = False

    # -- one step ----------------------------------------------------------------------------------------------
    def _weights(self):
        """[per layer {name: (W, W^T)}] and the lm_head's (W, W^T): gemv reads W, hgemm W^T (made once, on the first
        step of the hgemm path)."""
        if self._matrices is None:
            w, c = self.weights, self.config
            qk = c.q_size + c.kv_size
            gemm = self.matrices == "hgemm"
            t = w.transposed() if gemm else [dict.fromkeys(("qk", "v", "o", "gate_up", "down")) for _ in w.layers]
            layers = [
                {
                    "qk": (layer.qkv.W[:qk], t[i]["qk"]),
                    "v": (layer.qkv.W[qk:], t[i]["v"]),
                    "o": (layer.o.W, t[i]["o"]),
                    "gate_up": (layer.gate_up.W, t[i]["gate_up"]),
                    "down": (layer.down.W, t[i]["down"]),
                }
                for i, layer in enumerate(w.layers)
            ]
            self._matrices = (layers, (w.lm_head.W, w.lm_head_transposed() if gemm else None))
        return self._matrices

    def _row_views(self, a):
        if id(a) not in self._rows:
            self._rows[id(a)] = [a[b] for b in range(self.batch)]
        return self._rows[id(a)]

    def _linear(self, pair, x, out):
        W, W_t = pair
        if self.matrices == "hgemm":
            self.steps["hgemm"].module.launch(x, W_t, out)  # (B x in) @ (in x out): one read of the weights
        else:
            gemv = self.steps["gemv"].module.launch
            for row_x, row_out in zip(self._row_views(x), self._row_views(out), strict=True):
                gemv(W, row_x, None, row_out)  # a GEMV a sequence: the weights read B times

    def _check(self):
        """The families' checks and their steps' own on the step's arguments, once, before its first launch."""
        if self._checked:
            return
        s, (layers, lm_head) = self.steps, self._weights()
        w = self.weights
        s["embedding"].validate(w.embedding, self.token)
        s["rmsnorm"].validate(self.nothing, self.residual, w.final_norm)
        if self.matrices == "hgemm":
            for x, (_, W_t) in ((self.normed, layers[0]["qk"]), (self.attention, layers[0]["o"])):
                s["hgemm"].validate(x, W_t)
            s["hgemm"].validate(self.act, layers[0]["down"][1])
            s["hgemm"].validate(self.normed, lm_head[1])
        s["rope"].validate(self.qk, self.positions)
        s["decode_attention"].validate(self.q_rows, *self.layer_caches[0], length=self.filled)
        s["silu_mul"].validate(self.gate_up)
        s["argmax"].validate(self.logits)
        self._checked = True

    def token_step(self, mark=None):
        """Launch one step: every sequence's token at its position in, its next token's id in ``token``.
        ``mark(kind)``, where given, is called after each kind of kernel's launches (``decode.time_by_kind``)."""
        c, w, s = self.config, self.weights, self.steps
        mark = mark or (lambda kind: None)
        self._check()
        layers, lm_head = self._weights()
        norm = s["rmsnorm"].module.launch
        s["embedding"].module.launch(w.embedding, self.token, self.residual)
        mark("embedding")
        delta = self.nothing
        append_blocks = (self.batch * (c.heads + 2 * c.kv_heads) * c.head_size + THREADS - 1) // THREADS
        for i, (layer, m) in enumerate(zip(w.layers, layers, strict=True)):
            norm(delta, self.residual, layer.attn_norm, self.normed)
            mark("rmsnorm")
            self._linear(m["qk"], self.normed, self.qk_flat)
            self._linear(m["v"], self.normed, self.v)
            mark("matrices")
            s["rope"].module.launch(self.qk, self.positions, self.qk16)
            batch_append[append_blocks, THREADS](
                self.qk16, self.v, self.q_rows, self.k_cache, self.v_cache, np.int32(i), self.positions
            )
            mark("rope and cache")
            s["decode_attention"].module.launch(
                self.q_rows, *self.layer_caches[i], self.attention_rows, length=self.filled
            )
            mark("attention")
            self._linear(m["o"], self.attention, self.o)
            mark("matrices")
            norm(self.o, self.residual, layer.mlp_norm, self.normed)
            mark("rmsnorm")
            self._linear(m["gate_up"], self.normed, self.gate_up)
            mark("matrices")
            s["silu_mul"].module.launch(self.gate_up, self.act)
            mark("silu_mul")
            self._linear(m["down"], self.act, self.down)
            mark("matrices")
            delta = self.down
        norm(delta, self.residual, w.final_norm, self.normed)
        mark("rmsnorm")
        self._linear(lm_head, self.normed, self.logits)
        mark("matrices")
        s["argmax"].module.launch(self.logits, self.token)
        advance_batch[(self.batch + 31) // 32, 32](self.token, self.positions, self.filled, self.tokens)
        mark("argmax")

    def time_by_kind(self, hold=None):
        """{kind: device ms} of one step (``decode.time_by_kind``)."""
        return time_by_kind(self.token_step, hold)

    # -- sequences ---------------------------------------------------------------------------------------------
    def start(self, first_tokens, position=0):
        """Begin every sequence at ``position`` with its token of ``first_tokens`` (one a sequence); the caches'
        first ``position`` entries are taken as they are (``fill_context``'s stand-in for prompts)."""
        first = np.asarray(first_tokens)
        if first.shape != (self.batch,) or not np.issubdtype(first.dtype, np.integer):
            raise ValueError(f"one token id a sequence: {self.batch} integers, got {first.dtype} {first.shape}")
        if first.min() < 0 or first.max() >= self.config.vocab:
            raise ValueError(f"token ids must be in 0 .. {self.config.vocab - 1}, got {first.min()} .. {first.max()}")
        if not 0 <= position < self.max_context:
            raise ValueError(f"position {position} is outside the cache's {self.max_context}")
        self.token.copy_to_device(first.astype(np.int32))
        self.positions.copy_to_device(np.full(self.batch, position, np.int32))
        self.filled.copy_to_device(np.array([position + 1], np.int32))
        tokens = np.zeros((self.batch, self.max_context), np.int32)
        tokens[:, position] = first
        self.tokens.copy_to_device(tokens)

    def fill_context(self, seed=0):
        """Random keys and values in the whole cache: a stand-in for prompts' (what a step reads and costs does not
        depend on their values; the attention reads the first ``filled`` positions, the steps overwrite theirs)."""
        from zoo.llm.weights import THREADS as FILL_THREADS
        from zoo.llm.weights import fill_uniform

        for cache, salt in ((self.k_cache, 1), (self.v_cache, 2)):
            flat = cache.reshape(cache.size)
            fill_uniform[(flat.size + FILL_THREADS - 1) // FILL_THREADS, FILL_THREADS](
                flat, np.uint32(seed * 7919 + salt), np.float32(0), np.float32(1)
            )

    def generate(self, count):
        """``count`` steps: every sequence ``count`` tokens on (read them with ``sequences``)."""
        if int(self.positions.copy_to_host()[0]) + count >= self.max_context:
            raise ValueError(f"{count} more tokens pass the cache's {self.max_context} positions")
        for _ in range(count):
            self.token_step()

    def sequences(self):
        """(every sequence's tokens so far on the host, B x (p + 1), and the position p)."""
        p = int(self.positions.copy_to_host()[0])
        return self.tokens.copy_to_host()[:, : p + 1], p
