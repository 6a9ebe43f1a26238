"""The decoder: a token from the families' kernels, with the few kernels of the model's own, lever by lever.

A token at position p (``position``, on the GPU) reads its id (``token``, on the GPU: the
argmax of the token before) and leaves the next one's there, so a token is a sequence
of launches that never waits for the host and can be captured as one CUDA graph.

The model's own kernels: ``append_kv`` writes the token's rotated key and its value
into the float16 KV cache at p; ``attention_chunk`` is a plain attention of one query
over a chunk of the cache (grouped KV heads read by the query heads they serve), the
chunks spread over the GPU, and ``combine_chunks`` merges them by the online-softmax
rule (flash-decoding's plan); ``advance`` moves p on, keeps the length filled (p + 1,
on the GPU too) and records the new token.

A ``Lever`` names what a token runs: which step of each family (the first, the last),
whether the projections that share an input are fused into one GEMV (Q, K and V;
gate and up), whether the residual add is fused into the norm, whether the token is
replayed as a CUDA graph, whether the linear layers are int4, and whether the
attention is the decode_attention family's last step (one launch a layer on the
layer's cache, its length read on the GPU, so the graph replays it) in place of the
model's own two kernels.
"""

import math
from dataclasses import dataclass

import numpy as np
from numba import cuda, float32, int32, uint32
from numba.core.types import float16

import zoo
from zoo import SIMULATOR
from zoo.device.jit import jit
from zoo.device.warp import FULL_MASK

ATTENTION_THREADS = 128  # a block a query head and a chunk of the cache: four warps; a lane 4 of a head's 128 elements
WARPS = ATTENTION_THREADS // 32
CHUNK = 16 if SIMULATOR else 64  # positions a block takes (split-KV: the cache's chunks spread over the SMs)
KEYS_PER_WARP = CHUNK // WARPS
MAX_CONTEXT = 8192


@jit
def append_kv(qk, qkv, k_cache, v_cache, layer, position, heads, kv_heads, head_size):
    """K (rotated, float16) and V (float32, rounded here) of the token into the cache at its position."""
    i = uint32(cuda.grid(1))
    if i < kv_heads * head_size:
        head, d = i // head_size, i % head_size
        p = position[0]
        k_cache[layer, head, p, d] = qk[(heads + head) * head_size + d]
        v_cache[layer, head, p, d] = float16(qkv[(heads + kv_heads + head) * head_size + d])


@jit
def attention_chunk(qk, k_cache, v_cache, layer, position, maxima, sums, partial, group, head_size, scale):
    """One query head (blockIdx.x) against one chunk of CHUNK cached positions (blockIdx.y): the chunk's largest
    score, the sum of exp(score - largest) and the weighted sum of its values, for ``combine_chunks``.

    A warp takes CHUNK / WARPS keys; lane l holds q's elements 4l .. 4l + 3 and asks for all its keys' four elements
    before any sum (loads in flight together), then each key's 32 partial products meet by shuffles."""
    scores = cuda.shared.array(CHUNK, float32)
    t = uint32(cuda.threadIdx.x)
    lane, warp = t % uint32(32), t // uint32(32)
    head, chunk = uint32(cuda.blockIdx.x), uint32(cuda.blockIdx.y)
    kv = head // group  # grouped-query attention: `group` query heads share a KV head
    length = uint32(position[0]) + uint32(1)
    first = chunk * uint32(CHUNK)
    at = head * uint32(cuda.gridDim.y) + chunk  # this block's partial results
    if first >= length:  # a chunk past the token: nothing to add (every thread leaves, no barrier is waited on)
        if t == uint32(0):
            maxima[at] = float32(-3.4e38)
            sums[at] = float32(0)
        if t < head_size:
            partial[at * head_size + t] = float32(0)
        return
    q_at = head * head_size
    q = cuda.local.array(4, float32)  # constant indices only: registers
    for k in range(4):
        d = uint32(4) * lane + uint32(k)
        q[k] = float32(qk[q_at + d]) if d < head_size else float32(0)
    products = cuda.local.array(KEYS_PER_WARP, float32)
    for i in range(KEYS_PER_WARP):  # every key's loads first
        j = first + warp * uint32(KEYS_PER_WARP) + uint32(i)
        s = float32(0)
        if j < length:
            for k in range(4):
                d = uint32(4) * lane + uint32(k)
                if d < head_size:
                    s += q[k] * float32(k_cache[layer, kv, j, d])
        products[i] = s
    for i in range(KEYS_PER_WARP):  # then each key's sum over the warp
        s = products[i]
        for k in range(5):
            s += cuda.shfl_xor_sync(FULL_MASK, s, 16 >> k)
        if lane == uint32(0):
            j = first + warp * uint32(KEYS_PER_WARP) + uint32(i)
            scores[warp * uint32(KEYS_PER_WARP) + uint32(i)] = s * scale if j < length else float32(-3.4e38)
    cuda.syncthreads()  # the chunk's scores are in shared memory
    m = float32(-3.4e38)
    for i in range(CHUNK):
        m = max(m, scores[i])  # every thread the same maximum (a broadcast read)
    cuda.syncthreads()  # everyone has read the scores before they are replaced by exponentials
    if t < CHUNK:
        scores[t] = math.exp(scores[t] - m) if first + t < length else float32(0)
    cuda.syncthreads()  # the exponentials are written
    if t < head_size:
        acc = float32(0)
        total = float32(0)
        count = min(uint32(CHUNK), length - first)
        for i in range(count):  # consecutive threads, consecutive elements of a value
            p = scores[i]
            acc += p * float32(v_cache[layer, kv, first + uint32(i), t])
            total += p
        partial[at * head_size + t] = acc
        if t == uint32(0):
            maxima[at] = m
            sums[at] = total


@jit
def combine_chunks(maxima, sums, partial, out, chunks, head_size):
    """A query head's chunks merged (the online-softmax rule): out = sum_c acc_c e^(m_c - M) / sum_c l_c e^(m_c - M)."""
    head, t = uint32(cuda.blockIdx.x), uint32(cuda.threadIdx.x)
    if t < head_size:
        first = head * chunks
        m = float32(-3.4e38)
        for c in range(chunks):
            m = max(m, maxima[first + c])
        acc = float32(0)
        total = float32(0)
        for c in range(chunks):
            w = math.exp(maxima[first + c] - m)
            acc += partial[(first + c) * head_size + t] * w
            total += sums[first + c] * w
        out[head * head_size + t] = float16(acc / total)


def device_zeros(*shape, dtype=np.float32):
    """A device array of zeros: the model's buffers, made once (the decoder's, the prefill's, the batch's)."""
    return cuda.to_device(np.zeros(shape, dtype))


@jit
def advance(token, position, filled, tokens):
    """The next position, the positions the next token's attention reads (p + 1), and the token chosen for it
    recorded there."""
    if cuda.grid(1) == 0:
        p = position[0] + int32(1)
        position[0] = p
        filled[0] = p + int32(1)
        if p < tokens.size:
            tokens[p] = token[0]


def time_by_kind(run, hold=None):
    """{kind: device ms} of ``run(mark)``, timed between events recorded where it calls ``mark(kind)`` (after each
    kind of kernel's launches); ``hold(us)``, where given, queues a kernel that keeps the GPU busy while the host
    queues the launches, so that no gap of the host's is counted."""
    events = []

    def mark(kind):
        event = cuda.event()
        event.record()
        events.append((kind, event))

    if hold is not None:
        hold(50_000)  # 50 ms: longer than the host takes to queue a naive token's 600 launches
    mark("start")
    run(mark)
    cuda.synchronize()
    spent = {}
    for (_, before), (kind, after) in zip(events, events[1:], strict=False):
        spent[kind] = spent.get(kind, 0.0) + before.elapsed_time(after)
    return spent


@dataclass(frozen=True)
class Lever:
    """What a token runs (see the module docstring)."""

    name: str
    step: str  # "first" or "last": which step of each family
    fused_projections: bool
    fused_norm: bool  # the residual add inside the norm (the rmsnorm family from its fused step on)
    graph: bool
    int4: bool
    about: str
    family_attention: bool = False  # decode_attention's last step in place of attention_chunk and combine_chunks


LEVERS = (
    Lever("naive", "first", fused_projections=False, fused_norm=False, graph=False, int4=False,
          about="each family's first step, Q K V and gate up apart, launched one by one"),
    Lever("fused", "first", fused_projections=True, fused_norm=True, graph=False, int4=False,
          about="Q K V in one GEMV, gate and up in one, the add inside the norm"),
    Lever("fast steps", "last", fused_projections=True, fused_norm=True, graph=False, int4=False,
          about="each family's last step (gemv's split-k, float4 loads, ...)"),
    Lever("CUDA graph", "last", fused_projections=True, fused_norm=True, graph=True, int4=False,
          about="the whole token captured once, replayed as one graph"),
    Lever("int4", "last", fused_projections=True, fused_norm=True, graph=True, int4=True,
          about="int4 weights (a scale per 128) through gemv's packed tensor-core ring"),
    Lever("decode attention", "last", fused_projections=True, fused_norm=True, graph=True, int4=True,
          family_attention=True,
          about="the decode_attention family's last step (one launch, 16-byte loads, the length read on the GPU)"),
)  # fmt: skip
# The attention lever comes last: the ladder is cumulative and the order ends with it, and once int4 has cut
# the weights' bytes fourfold the cache is a larger share of what a token reads, so its row shows the attention best.


def lever(name):
    for choice in LEVERS:
        if choice.name == name:
            return choice
    raise ValueError(f"no lever {name!r}: {', '.join(choice.name for choice in LEVERS)}")


def _last_attention_step():
    family = zoo.family("decode_attention")
    return family[len(family)]


def runnable_steps(names, which):
    """{family: step} for the families ``names``: each one's first step, or its last one that this GPU runs (on a
    GPU older than Hopper, hgemm and attention stop before their wgmma steps); ValueError for another ``which``, or
    a family no step of which runs here."""
    if which not in ("first", "last"):
        raise ValueError(f"which is 'first' or 'last', not {which!r}")
    chosen = {}
    for name in names:
        fam = zoo.family(name)
        runs = [v for v in fam if not v.demonstration and v.unsupported() is None]
        if not runs:
            raise ValueError(f"no step of {name} runs here: {fam[len(fam)].unsupported()}")
        chosen[name] = runs[0] if which == "first" else runs[-1]
    return chosen


def _steps(which):
    """{family: the step module a token launches}: each family's first or last step."""
    steps = {}
    for name in ("embedding", "rmsnorm", "gemv", "rope", "silu_mul", "argmax"):
        fam = zoo.family(name)
        steps[name] = fam[1 if which == "first" else len(fam)].module
    steps["decode_attention"] = _last_attention_step().module  # the one whose launch a graph replays (v06 on)
    if which == "first":  # the first rmsnorm step is unfused: the fused lever names its next
        steps["rmsnorm_fused"] = zoo.family("rmsnorm")[2].module
    else:
        steps["rmsnorm_fused"] = steps["rmsnorm"]
    return steps


class Decoder:
    """The model's buffers on the GPU and a token's launches under a lever; ``generate`` runs tokens."""

    def __init__(self, weights, max_context=None):
        self.weights = weights
        self.config = c = weights.config
        self.max_context = max_context or c.max_context
        if not 1 <= self.max_context <= min(MAX_CONTEXT, c.max_context):
            raise ValueError(
                f"the cache holds up to {min(MAX_CONTEXT, c.max_context)} positions, asked {self.max_context}"
            )
        self.token = device_zeros(1, dtype=np.int32)
        self.position = device_zeros(1, dtype=np.int32)
        self.filled = cuda.to_device(np.ones(1, np.int32))  # positions the token's attention reads: position + 1
        self.tokens = device_zeros(self.max_context, dtype=np.int32)
        self.residual = device_zeros(1, c.hidden)
        self.nothing = device_zeros(1, c.hidden)  # layer 0's sublayer output: the stream is the embedding
        self.normed = device_zeros(1, c.hidden, dtype=np.float16)
        self.qkv = device_zeros(c.qkv_size)
        self.qk = device_zeros(1, c.heads + c.kv_heads, c.head_size, dtype=np.float16)
        cache = (c.layers, c.kv_heads, self.max_context, c.head_size)
        self.k_cache, self.v_cache = device_zeros(*cache, dtype=np.float16), device_zeros(*cache, dtype=np.float16)
        self.attention = device_zeros(c.q_size, dtype=np.float16)
        self.chunks = -(-self.max_context // CHUNK)  # every chunk of the cache: those past the token leave at once
        self.maxima = device_zeros(c.heads * self.chunks)
        self.sums = device_zeros(c.heads * self.chunks)
        self.partial = device_zeros(c.heads * self.chunks * c.head_size)
        self.o = device_zeros(1, c.hidden)
        self.gate_up = device_zeros(1, 2 * c.intermediate)
        self.act = device_zeros(1, c.intermediate, dtype=np.float16)
        self.down = device_zeros(1, c.hidden)
        self.logits = device_zeros(1, c.vocab)
        # views made once: numba's reshape costs host time at every call
        self.normed_flat = self.normed.reshape(c.hidden)
        self.qk_in = self.qkv[: (c.heads + c.kv_heads) * c.head_size].reshape(1, c.heads + c.kv_heads, c.head_size)
        self.qk_flat = self.qk.reshape(self.qk.size)
        self.act_flat = self.act.reshape(c.intermediate)
        self.flat = {id(a): a.reshape(a.size) for a in (self.o, self.gate_up, self.down, self.logits)}
        # decode_attention's layout: q as (q heads, 1 position, d), the first rows of qk (contiguous: no copy); a
        # layer's cache as (kv heads, capacity, d), the layer's own contiguous block; o as (q heads, 1, d)
        self.q_rows = self.qk.reshape(c.heads + c.kv_heads, 1, c.head_size)[: c.heads]
        self.attention_rows = self.attention.reshape(c.heads, 1, c.head_size)
        self.layer_caches = [(self.k_cache[i], self.v_cache[i]) for i in range(c.layers)]
        self._family_attention_checked = False
        self._graphs = {}

    # -- one token ---------------------------------------------------------------------------------------------
    def _linear(self, linear, x, out, lever, steps):
        out_flat = self.flat[id(out)] if id(out) in self.flat else out
        if lever.int4:
            steps["gemv"].launch(linear.packed[0], x, linear.packed[1], out_flat)
        elif lever.fused_projections:
            steps["gemv"].launch(linear.W, x, None, out_flat)
        else:
            for first, last in linear.slices():  # a GEMV a projection, on its rows of the fused matrix
                steps["gemv"].launch(linear.W[first:last], x, None, out_flat[first:last])

    def _norm(self, delta, weight, lever, steps):
        norm = steps["rmsnorm_fused" if lever.fused_norm else "rmsnorm"]
        norm.launch(delta, self.residual, weight, self.normed)

    def token_step(self, lever, steps=None, mark=None):
        """Launch one token's kernels: the token at ``position`` in, the next token's id in ``token``. ``mark(kind)``,
        where given, is called after each kind of kernel's launches (KINDS): a timer records an event there."""
        for _ in self.token_phases(lever, steps, mark):
            pass  # one GPU: each sublayer's output is already the whole sum

    def token_phases(self, lever, steps=None, mark=None):
        """``token_step``'s launches, stopping after each sublayer's output projection (O, then down) to yield that
        output, a float32 vector of ``hidden``, before the residual add reads it: a tensor-parallel rank holds a
        partial sum there, which the ranks add up before going on (``tensor_parallel``)."""
        c, w = self.config, self.weights
        steps = steps or _steps(lever.step)
        mark = mark or (lambda kind: None)
        if lever.family_attention:
            self._check_family_attention()
        steps["embedding"].launch(w.embedding, self.token, self.residual)
        mark("embedding")
        delta = self.nothing
        group, scale = c.heads // c.kv_heads, np.float32(1 / np.sqrt(c.head_size))
        kv_threads = c.kv_heads * c.head_size
        chunks = self.chunks
        for i, layer in enumerate(w.layers):
            self._norm(delta, layer.attn_norm, lever, steps)
            mark("rmsnorm")
            self._linear(layer.qkv, self.normed_flat, self.qkv, lever, steps)
            mark("gemv")
            steps["rope"].launch(self.qk_in, self.position, self.qk)
            append_kv[(kv_threads + 127) // 128, 128](
                self.qk_flat, self.qkv, self.k_cache, self.v_cache, np.int32(i), self.position,
                np.uint32(c.heads), np.uint32(c.kv_heads), np.uint32(c.head_size),
            )  # fmt: skip
            mark("rope and cache")
            if lever.family_attention:  # one launch on the layer's cache; the length is read on the GPU
                steps["decode_attention"].launch(
                    self.q_rows, *self.layer_caches[i], self.attention_rows, length=self.filled
                )
            else:
                attention_chunk[(c.heads, chunks), ATTENTION_THREADS](
                    self.qk_flat, self.k_cache, self.v_cache, np.int32(i), self.position, self.maxima, self.sums,
                    self.partial, np.uint32(group), np.uint32(c.head_size), scale,
                )  # fmt: skip
                combine_chunks[c.heads, ATTENTION_THREADS](
                    self.maxima, self.sums, self.partial, self.attention, np.uint32(chunks), np.uint32(c.head_size)
                )
            mark("attention")
            self._linear(layer.o, self.attention, self.o, lever, steps)
            mark("gemv")
            yield self.flat[id(self.o)]
            self._norm(self.o, layer.mlp_norm, lever, steps)
            mark("rmsnorm")
            self._linear(layer.gate_up, self.normed_flat, self.gate_up, lever, steps)
            mark("gemv")
            steps["silu_mul"].launch(self.gate_up, self.act)
            mark("silu_mul")
            self._linear(layer.down, self.act_flat, self.down, lever, steps)
            mark("gemv")
            yield self.flat[id(self.down)]
            delta = self.down
        self._norm(delta, w.final_norm, lever, steps)
        mark("rmsnorm")
        self._linear(w.lm_head, self.normed_flat, self.logits, lever, steps)
        mark("gemv")
        steps["argmax"].launch(self.logits, self.token)
        advance[1, 32](self.token, self.position, self.filled, self.tokens)
        mark("argmax")

    def _check_family_attention(self):
        """decode_attention's checks (the family's and its last step's own) on the model's views, once: a token
        launches the step's ``launch`` directly, as it does every family's, so a head size the step cannot take is
        refused here, before any launch of the token."""
        if not self._family_attention_checked:
            _last_attention_step().validate(self.q_rows, *self.layer_caches[0], length=self.filled)
            self._family_attention_checked = True

    def time_by_kind(self, lever, hold=None):
        """{kind: device ms} of one eager token under ``lever`` (its graph's kernels are the same): see
        ``time_by_kind``, the function."""
        steps = _steps(lever.step)
        return time_by_kind(lambda mark: self.token_step(lever, steps, mark), hold)

    # -- a sequence --------------------------------------------------------------------------------------------
    def start(self, first_token, position=0):
        """Begin at ``position`` with ``first_token``: the cache's first ``position`` entries are taken as they are
        (a prompt's, or ``fill_context``'s stand-in)."""
        if not 0 <= position < self.max_context:
            raise ValueError(f"position {position} is outside the cache's {self.max_context}")
        if not 0 <= first_token < self.config.vocab:
            raise ValueError(f"token {first_token} is outside the vocabulary of {self.config.vocab}")
        self.position.copy_to_device(np.array([position], np.int32))
        self.filled.copy_to_device(np.array([position + 1], np.int32))
        self.token.copy_to_device(np.array([first_token], np.int32))
        tokens = np.zeros(self.max_context, np.int32)
        tokens[position] = first_token
        self.tokens.copy_to_device(tokens)

    def fill_context(self, length, seed=0, first_head=0):
        """Random keys and values at the cache's first ``length`` positions: a stand-in for a prompt's, whose
        values do not change what a decode step reads or costs. Each KV head's values follow from the seed and the
        head's number in the whole model, ``first_head`` plus its own (a tensor-parallel rank's heads start there),
        so a split model's caches hold what the one-GPU model's does."""
        from zoo.llm.weights import fill_uniform

        if not 0 <= length <= self.max_context:
            raise ValueError(f"a context of {length} is outside the cache's {self.max_context} positions")
        if length == 0:
            return
        for cache, salt in ((self.k_cache, 1), (self.v_cache, 2)):
            for layer in range(self.config.layers):
                for head in range(self.config.kv_heads):
                    block = cache[layer, head, :length, :].reshape(length * self.config.head_size)
                    fill_uniform[(block.size + 255) // 256, 256](
                        block,
                        np.uint32(seed * 7919 + salt * 104729 + layer * 131 + first_head + head),
                        np.float32(0),
                        np.float32(1),
                    )

    def generate(self, count, lever):
        """Run ``count`` tokens under ``lever``; the tokens so far stay in ``tokens`` (read with ``sequence``)."""
        if int(self.position.copy_to_host()[0]) + count >= self.max_context:
            raise ValueError(f"{count} more tokens pass the cache's {self.max_context} positions")
        if lever.int4 and not self.weights.quantized:
            raise ValueError("the int4 lever needs the weights quantized first (Weights.quantize)")
        steps = _steps(lever.step)
        if lever.graph:
            graph = self._graphs.get(lever)
            if graph is None:  # captured once (after one eager token, which compiles and allocates): a token
                # run eagerly first moves the position on, so the capture starts where it stands
                graph = self._graphs[lever] = zoo.graph(lambda: self.token_step(lever, steps))
                count -= 1  # the eager run of zoo.graph made one token
            for _ in range(count):
                graph()
        else:
            for _ in range(count):
                self.token_step(lever, steps)

    def sequence(self):
        """(the tokens so far on the host, the position)."""
        p = int(self.position.copy_to_host()[0])
        return self.tokens.copy_to_host()[: p + 1], p
