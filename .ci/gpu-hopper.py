"""GPU probe of attention's Hopper steps (v08 on: wgmma, TMA, a producer warpgroup, overlap), issue 65.

    python3 .ci/gpu-hopper.py time     v07, the Hopper steps and torch sdpa at 32 x 4096 x {64, 128}, full and causal:
                                       each step checked at 4 x 77 x d against float64 first, then a table of ms,
                                       TFLOP/s and % of torch sdpa (device time, zoo.bench.harness.time_launches)
    python3 .ci/gpu-hopper.py small    the Hopper steps once at small sizes (the sanitizers' run): d 80 over 1 kv head
                                       causal, d 256 over 1 kv head, d 128 at 150 positions causal, d 64 at 300

Writes hopper-probe.json under $OUT when OUT is set.
"""

import json
import os
import sys

import zoo
from zoo.bench import harness
from zoo.errors import OutOfRange, Unavailable

ATT = zoo.family("attention")
HOPPER_STEPS = [v.name for v in ATT if v.number >= 8]
SIZES = ((32, 4096, 64), (32, 4096, 128))


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
    found = {what: {"time": time_steps, "small": small}[what]() for what in argv or ["time"]}
    if os.environ.get("OUT"):
        path = os.path.join(os.environ["OUT"], "hopper-probe.json")
        json.dump({k: v for k, v in found.items() if v is not None}, open(path, "w"), indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1:])
