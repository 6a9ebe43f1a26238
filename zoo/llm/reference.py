"""The same model in float64 NumPy, token by token with its own KV cache: what the kernels must match.

It reads the weights back from the GPU (the int4 model's as stored: scale times code)
and computes every op in float64, rounding nothing, so the decoder's differences are
its own float16 activations and float32 sums.
"""

import numpy as np


class Reference:
    def __init__(self, weights, int4=False):
        self.config = c = weights.config
        host = lambda a: a.copy_to_host().astype(np.float64)  # noqa: E731
        matrix = (lambda lin: lin.dequantized()) if int4 else (lambda lin: host(lin.W))
        self.embedding = host(weights.embedding)
        self.layers = [
            {
                "attn_norm": host(layer.attn_norm),
                "qkv": matrix(layer.qkv),
                "o": matrix(layer.o),
                "mlp_norm": host(layer.mlp_norm),
                "gate_up": matrix(layer.gate_up),
                "down": matrix(layer.down),
            }
            for layer in weights.layers
        ]
        self.final_norm = host(weights.final_norm)
        self.lm_head = matrix(weights.lm_head)
        self.keys = [[] for _ in range(c.layers)]
        self.values = [[] for _ in range(c.layers)]
        self.frequencies = c.theta ** (-np.arange(0, c.head_size, 2, dtype=np.float64) / c.head_size)

    def _norm(self, h, weight):
        return h / np.sqrt((h * h).mean() + self.config.eps) * weight

    def _rope(self, x, position):
        half = x.shape[-1] // 2
        a = position * self.frequencies
        first, second = x[..., :half], x[..., half:]
        return np.concatenate([first * np.cos(a) - second * np.sin(a), second * np.cos(a) + first * np.sin(a)], -1)

    def step(self, token, position):
        """The logits after ``token`` at ``position`` (the positions before it must have been stepped)."""
        c = self.config
        h = self.embedding[token].copy()
        group = c.heads // c.kv_heads
        for i, layer in enumerate(self.layers):
            qkv = layer["qkv"] @ self._norm(h, layer["attn_norm"])
            q = self._rope(qkv[: c.q_size].reshape(c.heads, c.head_size), position)
            k = self._rope(qkv[c.q_size : c.q_size + c.kv_size].reshape(c.kv_heads, c.head_size), position)
            v = qkv[c.q_size + c.kv_size :].reshape(c.kv_heads, c.head_size)
            self.keys[i].append(k)
            self.values[i].append(v)
            keys, values = np.stack(self.keys[i], 1), np.stack(self.values[i], 1)  # kv_heads x positions x d
            out = np.empty((c.heads, c.head_size))
            for head in range(c.heads):
                scores = keys[head // group] @ q[head] / np.sqrt(c.head_size)
                p = np.exp(scores - scores.max())
                out[head] = (p / p.sum()) @ values[head // group]
            h = h + layer["o"] @ out.reshape(-1)
            gate_up = layer["gate_up"] @ self._norm(h, layer["mlp_norm"])
            g, u = gate_up[: c.intermediate], gate_up[c.intermediate :]
            h = h + layer["down"] @ (g / (1 + np.exp(-g)) * u)
        return self.lm_head @ self._norm(h, self.final_norm)

    def generate(self, first_token, count):
        """([every token, the first included], [the logits of each step]) of ``count`` greedy steps from position 0."""
        tokens, logits = [first_token], []
        for position in range(count):
            logits.append(self.step(tokens[-1], position))
            tokens.append(int(np.argmax(logits[-1])))
        return tokens, logits
