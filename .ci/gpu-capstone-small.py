"""Every kernel of the capstone once at small irregular sizes, in one process: what compute-sanitizer runs.

Each step of embedding, rmsnorm, rope, silu_mul and argmax at its family's TEST_SIZES (harness.check against the
float64 reference), then two tokens of the tiny model at the naive lever and one at the last steps (the model's own
kernels: weights' fill and quantization, cache append, split decode attention and its merge, the token's record),
and a prompt of 7 tokens through the prefill with the first and the last steps (the weights' transpose, the moves
to and from heads-major, hgemm's and attention's kernels on the model's shapes), and a batch of three sequences
through one GEMM a projection and through a GEMV a sequence (the batch's cache append and step). Exits 1 on any
wrong result.
"""

import sys

import numpy as np

import zoo
from zoo.bench import checking
from zoo.llm import batch, config, decode, prefill, reference
from zoo.llm.weights import Weights

FAMILIES = ("embedding", "rmsnorm", "rope", "silu_mul", "argmax")

failed = 0
for name in FAMILIES:
    fam = zoo.family(name)
    for step in fam:
        for i, (size, kind) in enumerate(fam.test_cases()):
            result = checking.check(step, size, seed=100 + i, kind=kind)
            if not result.ok:
                print(f"FAILED {name}/{step.name} at {size}: {result.detail}")
                failed += 1
weights = Weights(config.TINY, seed=1)
weights.quantize()
for lever, count in ((decode.lever("naive"), 2), (decode.lever("fast steps"), 1)):
    decoder = decode.Decoder(weights)
    decoder.start(3)
    decoder.generate(count, lever)
    ours, _ = decoder.sequence()
    theirs, _ = reference.Reference(weights).generate(3, count)
    if ours.tolist() != theirs:
        print(f"FAILED tiny model, {lever.name}: {ours.tolist()} != {theirs}")
        failed += 1
prompt = np.random.default_rng(7).integers(0, config.TINY.vocab, 7)
ref = reference.Reference(weights)
logits = [ref.step(int(token), position) for position, token in enumerate(prompt)][-1]
for which in ("first", "last"):
    decoder = decode.Decoder(weights)
    prefill.Prefill(decoder, which).run(prompt)
    ours = decoder.logits.copy_to_host()[0]
    error = np.linalg.norm(ours - logits) / np.linalg.norm(logits)
    if error > 5e-3 or decoder.sequence()[0][-1] != np.argmax(logits):
        print(f"FAILED tiny model's prefill, {which} steps: logits' error {error:.2e}")
        failed += 1
first = np.array([3, 50, 199])
for matrices in ("hgemm", "gemv"):
    decoder = batch.BatchDecoder(weights, 3, matrices=matrices)
    decoder.start(first)
    decoder.generate(1)
    ours = decoder.logits.copy_to_host()
    for b, token in enumerate(first):
        want = reference.Reference(weights).step(int(token), 0)
        error = np.linalg.norm(ours[b] - want) / np.linalg.norm(want)
        if error > 5e-3:
            print(f"FAILED tiny model's batch, {matrices}, sequence {b}: logits' error {error:.2e}")
            failed += 1
print(f"capstone small: {'all correct' if not failed else f'{failed} FAILED'}")
sys.exit(1 if failed else 0)
