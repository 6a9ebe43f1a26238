"""The same model in PyTorch, float16, on the same weights and the same KV cache (shared, not copied).

What a PyTorch user would write for the decoder of ``decode``: ``F.linear`` in float16, ``rms_norm`` and RoPE in
float32, ``scaled_dot_product_attention`` over the cache with grouped KV heads. The residual stream is float32 as
the zoo's. The position is a tensor on the GPU and the attention masks the cache past it, so a token has fixed
shapes: ``compiled`` wraps the step in ``torch.compile(mode="reduce-overhead")`` (CUDA graphs), the rows the issue
compares with. The weights and the cache are the module's buffers, which ``torch.compile``'s CUDA graphs take as
static (their addresses fixed, their writes allowed). Needs PyTorch.
"""

import torch


class TorchModel(torch.nn.Module):
    def __init__(self, decoder):
        super().__init__()
        as_tensor = lambda a: torch.as_tensor(a, device="cuda")  # noqa: E731  (numba's arrays: the same memory)
        w, c = decoder.weights, decoder.config
        self.config = c
        buffers = {
            "embedding": as_tensor(w.embedding),
            "final_norm": as_tensor(w.final_norm).float(),
            "lm_head": as_tensor(w.lm_head.W),
            "k_cache": as_tensor(decoder.k_cache),
            "v_cache": as_tensor(decoder.v_cache),
            "slots": torch.arange(decoder.max_context, device="cuda"),
            "frequencies": c.theta
            ** (-torch.arange(0, c.head_size, 2, device="cuda", dtype=torch.float32) / c.head_size),
        }
        for i, layer in enumerate(w.layers):
            buffers[f"attn_norm{i}"] = as_tensor(layer.attn_norm).float()
            buffers[f"qkv{i}"] = as_tensor(layer.qkv.W)
            buffers[f"o{i}"] = as_tensor(layer.o.W)
            buffers[f"mlp_norm{i}"] = as_tensor(layer.mlp_norm).float()
            buffers[f"gate_up{i}"] = as_tensor(layer.gate_up.W)
            buffers[f"down{i}"] = as_tensor(layer.down.W)
        for name, tensor in buffers.items():
            self.register_buffer(name, tensor, persistent=False)

    def _layer(self, i):
        """Layer i's weights: the attention's norm, QKV and O, the MLP's norm, gate_up and down."""
        names = ("attn_norm", "qkv", "o", "mlp_norm", "gate_up", "down")
        return tuple(getattr(self, f"{name}{i}") for name in names)

    def _rope(self, x, position):
        half = self.config.head_size // 2
        a = position.float() * self.frequencies
        cos, sin = torch.cos(a), torch.sin(a)
        first, second = x[..., :half].float(), x[..., half:].float()
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1).half()

    def forward(self, token, position):
        """(the next token's id, the logits) after ``token`` at ``position`` (tensors of one); writes K and V."""
        c = self.config
        F = torch.nn.functional
        h = self.embedding[token].float()  # 1 x hidden
        mask = (self.slots <= position)[None, None, None, :]  # the cache up to the token
        for i in range(c.layers):
            attn_norm, qkv_w, o_w, mlp_norm, gate_up_w, down_w = self._layer(i)
            x = F.rms_norm(h, (c.hidden,), attn_norm, c.eps).half()
            qkv = F.linear(x, qkv_w)[0]
            q = self._rope(qkv[: c.q_size].view(c.heads, c.head_size), position)
            k = self._rope(qkv[c.q_size : c.q_size + c.kv_size].view(c.kv_heads, c.head_size), position)
            v = qkv[c.q_size + c.kv_size :].view(c.kv_heads, c.head_size)
            self.k_cache[i].index_copy_(1, position, k[:, None, :])
            self.v_cache[i].index_copy_(1, position, v[:, None, :])
            attention = F.scaled_dot_product_attention(
                q[None, :, None, :], self.k_cache[i][None], self.v_cache[i][None], attn_mask=mask, enable_gqa=True
            )
            h = h + F.linear(attention.reshape(1, c.q_size), o_w).float()
            x = F.rms_norm(h, (c.hidden,), mlp_norm, c.eps).half()
            gate_up = F.linear(x, gate_up_w)
            h = h + F.linear(F.silu(gate_up[:, : c.intermediate]) * gate_up[:, c.intermediate :], down_w).float()
        logits = F.linear(F.rms_norm(h, (c.hidden,), self.final_norm, c.eps).half(), self.lm_head).float()
        return logits.argmax(dim=-1), logits

    def prefill(self, ids):
        """(the next token's id, the last position's logits) after the prompt ``ids`` (a tensor of P token ids, from
        position 0): every position at once, the linear layers as GEMMs, causal attention over the prompt; writes K
        and V at positions 0 .. P - 1."""
        c = self.config
        F = torch.nn.functional
        n = ids.shape[0]
        positions = self.slots[:n, None, None]  # a token's position, against its heads and pairs
        h = self.embedding[ids].float()  # P x hidden
        for i in range(c.layers):
            attn_norm, qkv_w, o_w, mlp_norm, gate_up_w, down_w = self._layer(i)
            x = F.rms_norm(h, (c.hidden,), attn_norm, c.eps).half()
            qkv = F.linear(x, qkv_w)  # P x qkv_size
            q = self._rope(qkv[:, : c.q_size].view(n, c.heads, c.head_size), positions).transpose(0, 1)
            k = self._rope(qkv[:, c.q_size : c.q_size + c.kv_size].view(n, c.kv_heads, c.head_size), positions)
            v = qkv[:, c.q_size + c.kv_size :].view(n, c.kv_heads, c.head_size)
            k, v = k.transpose(0, 1), v.transpose(0, 1)  # heads x P x d
            self.k_cache[i][:, :n] = k
            self.v_cache[i][:, :n] = v
            attention = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True, enable_gqa=True)
            h = h + F.linear(attention[0].transpose(0, 1).reshape(n, c.q_size), o_w).float()
            x = F.rms_norm(h, (c.hidden,), mlp_norm, c.eps).half()
            gate_up = F.linear(x, gate_up_w)
            h = h + F.linear(F.silu(gate_up[:, : c.intermediate]) * gate_up[:, c.intermediate :], down_w).float()
        logits = F.linear(F.rms_norm(h[-1:], (c.hidden,), self.final_norm, c.eps).half(), self.lm_head).float()
        return logits.argmax(dim=-1), logits

    def compiled(self):
        """The model through ``torch.compile(mode="reduce-overhead")``: compiled on its first calls."""
        return torch.compile(self, mode="reduce-overhead", fullgraph=True)

    def generate(self, first_token, position, count, step=None):
        """``count`` greedy tokens from ``first_token`` at ``position``: the list of tokens, first included."""
        step = step or self
        token = torch.tensor([first_token], device="cuda")
        where = torch.tensor([position], device="cuda")
        tokens = [token]
        for _ in range(count):
            token = step(token, where)[0].clone()  # a CUDA graph's output is overwritten by its next replay
            where = where + 1
            tokens.append(token)
        return torch.cat(tokens).tolist()
