"""The model's shapes: Llama-3-8B's, and a tiny one for the simulator; a bad configuration is refused here."""

from dataclasses import dataclass

GROUP = 128  # int4 weights: one float16 scale per 128 (the gemv family's int4 kind)


@dataclass(frozen=True)
class Config:
    hidden: int
    layers: int
    heads: int  # query heads
    kv_heads: int  # key and value heads: each serves heads // kv_heads query heads (grouped-query attention)
    head_size: int
    intermediate: int  # the MLP's width (SwiGLU: gate and up are each this wide)
    vocab: int
    max_context: int  # positions the KV cache holds
    theta: float = 500_000.0  # RoPE's base (the rope family's THETA)
    eps: float = 1e-5  # RMSNorm's (the rmsnorm family's EPS)

    @property
    def q_size(self):
        return self.heads * self.head_size

    @property
    def kv_size(self):
        return self.kv_heads * self.head_size

    @property
    def qkv_size(self):
        return self.q_size + 2 * self.kv_size

    def check(self):
        """ValueError for a configuration the model cannot run, before anything is allocated or launched."""
        if min(self.hidden, self.layers, self.heads, self.kv_heads, self.head_size, self.intermediate) < 1:
            raise ValueError(f"every size must be at least 1: {self}")
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.kv_heads} KV heads do not divide {self.heads} query heads")
        if self.head_size % 2:
            raise ValueError(f"RoPE turns pairs: the head size must be even, got {self.head_size}")
        if self.head_size > 128:
            raise ValueError(
                f"the decode attention holds a head in 128 threads: head size up to 128, got {self.head_size}"
            )
        if not 1 <= self.max_context <= 8192:
            raise ValueError(
                f"the decode attention's scores are in shared memory: up to 8192 positions, not {self.max_context}"
            )
        if self.vocab < 2:
            raise ValueError("a vocabulary of at least two tokens")
        return self


LLAMA3_8B = Config(
    hidden=4096, layers=32, heads=32, kv_heads=8, head_size=128, intermediate=14336, vocab=128_256, max_context=8192
)
# The tiny model: 2 layers, hidden 64, 4 heads and 2 KV heads; small enough for the simulator
TINY = Config(hidden=64, layers=2, heads=4, kv_heads=2, head_size=16, intermediate=96, vocab=200, max_context=16)
