"""A Llama-style decoder built from the zoo's own kernels: one token at a time, lever by lever (issue 66).

The families teach one kernel each; this package composes them into the model they
exist for, at Llama-3-8B's shapes (``config.LLAMA3_8B``) or a tiny one that runs in the
simulator (``config.TINY``):

    embedding gather -> for each layer: [rmsnorm (+ residual) -> QKV gemv -> rope -> KV cache
    -> decode attention -> O gemv -> rmsnorm (+ residual) -> gate_up gemv -> silu_mul -> down gemv]
    -> rmsnorm (+ residual) -> lm_head gemv -> argmax -> the next token's id, on the GPU

``weights`` makes random weights on the GPU from a seed (nothing is downloaded), in
float16 and in the gemv family's int4 (a float16 scale per 128 weights, packed once by
gemv's prepared-weights API). ``decode`` holds the model's few kernels of its own (the
KV cache append, a plain decode attention over grouped KV heads, the token's record)
and the ``Decoder``, which runs a token with the steps a ``Lever`` names: the
families' first steps launched one by one, fused projections, their last steps, the
whole token as one CUDA graph, int4 weights, the decode_attention family's last step
for the attention. ``prefill`` runs a prompt's tokens through the layers at once (the
linear layers as hgemm GEMMs on weights transposed once, the attention family's causal
forward pass), filling the cache and choosing the token after the prompt, where the
``Decoder`` goes on. ``batch`` decodes B sequences together (one GEMM a projection, or a
GEMV a sequence; the decode_attention family with the batch folded into its heads).
``tensor_parallel`` splits a token over R GPUs (each rank its heads and MLP rows, a
``Decoder`` on its shard, the partial sums added by the collectives family's ring or NCCL).
``reference`` is the same model in float64
NumPy, token by token, which the tiny model must match. ``torch_model`` is the same
model in PyTorch (eager, or ``torch.compile``) on the same weights, for the timings of
``python -m zoo decode`` and ``python -m zoo prefill``. ``zoo.tools.llm_budget`` (a tool
over the bench's results, so not here) predicts the model's memory and its decode, prefill
and training times on a measured GPU (``python -m zoo llm-budget``).
"""
