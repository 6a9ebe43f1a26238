"""GPU probe of attention's Hopper steps (v08 on: wgmma, TMA, a producer warpgroup, overlap), issue 65.

    python3 .ci/gpu-hopper.py time     v07, the Hopper steps and torch sdpa at 32 x 4096 x {64, 128}, full and causal:
                                       each step checked at 4 x 77 x d against float64 first, then a table of ms,
                                       TFLOP/s and % of torch sdpa (device time, zoo.bench.harness.time_launches)
    python3 .ci/gpu-hopper.py tune     the last Hopper step with (keys per block, stages) in SHAPES at the same sizes,
                                       each checked at 4 x 77 x d first: ms, TFLOP/s and % of torch sdpa
    python3 .ci/gpu-hopper.py small    the Hopper steps once at small sizes (the sanitizers' run): d 80 over 1 kv head
                                       causal, d 256 over 1 kv head, d 128 at 150 positions causal, d 64 at 300

Writes hopper-probe.json under $OUT when OUT is set.
"""

import json
import os
import sys

import zoo
from zoo.bench import harness
from zoo.device.memory import flat_view
from zoo.errors import OutOfRange, Unavailable

ATT = zoo.family("attention")
HOPPER_STEPS = [v.name for v in ATT if v.number >= 8]
SIZES = ((32, 4096, 64), (32, 4096, 128))
SHAPES = ((64, 2), (64, 4), (128, 2), (128, 3), (128, 4))  # (keys per block, stages) for tune; past 227 KiB: skipped


def timed(fn, *args, **kwargs):
    """Median device milliseconds of fn(*args, **kwargs)."""
    return harness.time_launches(lambda i: fn(*args, **kwargs), budget_s=0.5).median_ms


def time_steps():
    import cupy

    rows = []
    print(f"{'d':>4} {'kind':6} {'step':10} {'ms':>8} {'TFLOP/s':>8} {'% sdpa':>7}  check at 4x77")
    for size in SIZES:
        d = size[2]
        Q, K, V = (cupy.asarray(a) for a in ATT.make_inputs(size, 0))
        out = cupy.empty(Q.shape, cupy.float16)
        small = ATT.make_inputs((4, 77, d), 2)
        for causal in (False, True):
            kind = "causal" if causal else "full"
            try:
                sdpa = timed(ATT.module.torch_sdpa, Q, K, V, out, causal=causal)
            except Unavailable as e:
                sdpa = None
                print(f"no torch row: {e}")
            for step in ["v07", *HOPPER_STEPS, "torch sdpa"]:
                if step == "torch sdpa":
                    ms, check = sdpa, "-"
                else:
                    try:
                        got = ATT[step](*small, causal=causal)
                    except OutOfRange as e:
                        print(f"{d:4d} {kind:6} {step:10} out of range: {e}")
                        continue
                    ok, err, _ = harness.compare(got, ATT.reference(*small, causal=causal), ATT.TOLERANCE)
                    check = f"{'ok' if ok else 'WRONG'} {err:.1e}"
                    ms = timed(ATT[step].launch, (Q, K, V), out, causal=causal)
                if ms is None:
                    continue
                rate = ATT.flops(size, causal=causal) / ms / 1e9
                share = f"{100 * sdpa / ms:6.0f}%" if sdpa else "      -"
                print(f"{d:4d} {kind:6} {step:10} {ms:8.3f} {rate:8.0f} {share}  {check}", flush=True)
                rows.append(dict(size=size, causal=causal, step=step, ms=ms, tflops=rate, check=check))
    return rows


def launch_shape(module, bk, stages, Q, K, V, out, causal):
    """The step's launch with another (keys per block, stages): its own launch, build's arguments changed."""
    import numpy as np

    bh, n, d = Q.shape
    kernel, shared_bytes = module.build(d, bk, stages, KV_GROUP=bh // K.shape[0])
    q_blocks = (n + module.BQ - 1) // module.BQ
    group = min(bh, module.heads_per_group(n, d))
    grid = bh * q_blocks if causal else (q_blocks, bh)
    maps = (
        module.tensor_map_2d(flat_view(Q), module.BQ, module.BOX, shape=(bh * n, d)),
        module.tensor_map_2d(flat_view(K), bk, module.BOX, shape=(K.shape[0] * n, d)),
        module.tensor_map_2d(flat_view(V), bk, module.BOX, shape=(K.shape[0] * n, d)),
    )
    scale_log2 = np.float32(module.LOG2E / d**0.5)
    kernel[grid, module.THREADS, 0, shared_bytes](
        *maps, flat_view(out), np.uint32(n), scale_log2, bool(causal), np.uint32(group)
    )


def tune():
    import cupy

    step = ATT[HOPPER_STEPS[-1]]
    module = step.module
    rows = []
    print(f"{step.name}: {'d':>4} {'kind':6} {'keys':>4} {'stages':>6} {'ms':>8} {'TFLOP/s':>8} {'% sdpa':>7}  check")
    for size in SIZES:
        d = size[2]
        Q, K, V = (cupy.asarray(a) for a in ATT.make_inputs(size, 0))
        out = cupy.empty(Q.shape, cupy.float16)
        small_in = tuple(cupy.asarray(a) for a in ATT.make_inputs((4, 77, d), 2))
        for causal in (False, True):
            kind = "causal" if causal else "full"
            sdpa = timed(ATT.module.torch_sdpa, Q, K, V, out, causal=causal)
            for bk, stages in SHAPES:
                dp = -(-d // 64) * 64
                if module.TILE_ALIGN + 2 * (module.BQ * dp + stages * 2 * bk * dp) > module.SHARED_LIMIT:
                    continue
                got = cupy.empty(small_in[0].shape, cupy.float16)
                launch_shape(module, bk, stages, *small_in, got, causal)
                ref = ATT.reference(*(a.get() for a in small_in), causal=causal)
                ok, err, _ = harness.compare(got.get(), ref, ATT.TOLERANCE)
                ms = timed(launch_shape, module, bk, stages, Q, K, V, out, causal)
                rate = ATT.flops(size, causal=causal) / ms / 1e9
                check = f"{'ok' if ok else 'WRONG'} {err:.1e}"
                print(
                    f"{'':{len(step.name) + 1}} {d:4d} {kind:6} {bk:4d} {stages:6d} {ms:8.3f} {rate:8.0f} "
                    f"{100 * sdpa / ms:6.0f}%  {check}",
                    flush=True,
                )
                rows.append(dict(size=size, causal=causal, keys=bk, stages=stages, ms=ms, tflops=rate, check=check))
    return rows


def small():
    cases = (((2, 77, 80), 1, True), ((4, 33, 256), 1, False), ((3, 150, 128), 3, True), ((1, 300, 64), 1, False))
    wrong = 0
    for (bh, n, d), kv, causal in cases:
        Q, K, V = ATT.make_inputs((bh, n, d), 3)
        K, V = K[:kv], V[:kv]
        for step in HOPPER_STEPS:
            got = ATT[step](Q, K, V, causal=causal)
            ok, err, _ = harness.compare(got, ATT.reference(Q, K, V, causal=causal), ATT.TOLERANCE)
            wrong += not ok
            print(f"{step} {bh}x{n}x{d} over {kv} kv heads causal={causal}: {'ok' if ok else 'WRONG'} {err:.1e}")
    if wrong:
        raise SystemExit(f"{wrong} wrong results")


def main(argv):
    found = {what: {"time": time_steps, "tune": tune, "small": small}[what]() for what in argv or ["time"]}
    if os.environ.get("OUT"):
        path = os.path.join(os.environ["OUT"], "hopper-probe.json")
        json.dump({k: v for k, v in found.items() if v is not None}, open(path, "w"), indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1:])
