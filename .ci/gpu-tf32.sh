#!/usr/bin/env bash
# TF32 and bfloat16 on the lent GPU, in one process (one GPU, one run): a short table, logs under $OUT.
#   1. sgemm at 4096 (and 8192): v14 (best FFMA step), v15 (TF32 mma.sync), cuBLAS float32 and cuBLAS TF32:
#      ms, TFLOP/s, relative error against float64, and v15 over v14 (the goal: at least 2x).
#   2. v15 tile probe at 4096: the default and a few other Tiles (stages, BK, block tile), each checked.
#   3. hgemm v07 and cuBLAS at 4096 on float16 and on bfloat16 inputs.
# Python is set up as .ci/gpu-session sets it up (docs/DEVELOPING.md, "Python on the lent GPU"); under 3 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1
python3 - <<'EOF' 2>&1 | tee "$OUT/gpu-tf32.txt"
import zoo  # first: it picks numba's mode before numba.cuda is imported

import cupy
import numpy as np
from numba import cuda

from zoo.bench import harness
from zoo.kernels.sgemm import v15_tf32_tensor_cores as v15

print(zoo.device.properties()["name"])


def row(fam, name, size, kind=None, launch=None):
    try:
        return measure(fam, name, size, kind, launch)
    except Exception as e:  # one broken row must not hide the others
        print(f"  {fam.name} {name} {size} {kind}: {type(e).__name__}: {e}")
        return float("nan"), float("nan"), float("nan")


def measure(fam, name, size, kind, launch):
    host = fam.inputs(size, 0, kind)
    ref = harness._reference(fam.name, size, 0, kind)  # float64, kept while one size is measured
    shape, dtype = fam.output_for(*host)
    if launch is None and name in fam.baselines:
        sets = [tuple(cupy.asarray(a) for a in s) for s in harness.input_sets(host)]
        out = cupy.full(shape, np.nan, dtype)
        call = fam.baselines[name]
        run = lambda i: call(*sets[i % len(sets)], out)  # noqa: E731
        host_out = lambda: cupy.asnumpy(out)  # noqa: E731
    else:
        sets = harness.input_sets(host)
        out = cuda.device_array(shape, dtype)
        step = launch or (lambda inputs, o: fam[name].launch(inputs, o))
        run = lambda i: step(sets[i % len(sets)], out)  # noqa: E731
        host_out = out.copy_to_host
    run(0)
    err = harness.relative_error(host_out(), ref)
    ms = harness.time_launches(run, min_samples=5, budget_s=0.5).median_ms
    return ms, fam.flops(size) / ms / 1e9, err


sgemm, hgemm = zoo.family("sgemm"), zoo.family("hgemm")
print(f"{'family':7} {'size':>5} {'row':22} {'ms':>8} {'TFLOP/s':>8} {'rel. error':>10}")
for size in (4096, 8192):
    got = {}
    for name in ("v14", "v15", "baseline", "cublas_tf32"):
        ms, tflops, err = row(sgemm, name, size)
        got[name] = ms
        print(f"sgemm   {size:5} {name:22} {ms:8.3f} {tflops:8.1f} {err:10.2e}")
    speedup, share = got["v14"] / got["v15"], got["cublas_tf32"] / got["v15"]
    print(f"sgemm   {size:5} v15 over v14: {speedup:.2f}x; v15 at {share:.0%} of cuBLAS TF32")

print("v15 tiles at 4096 (BM, BN, BK, WM, WN, STAGES):")
for t in (
    v15.Tiles(),
    v15.Tiles(STAGES=4),
    v15.Tiles(BK=16, STAGES=4),
    v15.Tiles(BM=256, BN=128),
    v15.Tiles(BM=128, BN=256),
    v15.Tiles(BM=64, BN=128, WM=32, WN=64, STAGES=4),
):
    if not v15.valid(t):
        print(f"  {tuple(t)} not valid")
        continue
    kernel = v15.build(t)
    launch = lambda inputs, o, k=kernel, t=t: v15.launch_with(k, t, *inputs, None, o, 1.0, 0.0)  # noqa: E731
    ms, tflops, err = row(sgemm, f"v15 {tuple(t)}", 4096, launch=launch)
    print(f"  {tuple(t)}: {ms:.3f} ms, {tflops:.1f} TFLOP/s, error {err:.2e}, {t.shared_bytes()} B shared")

for kind in ("float16", "bfloat16"):
    for name in ("v07", "baseline"):
        ms, tflops, err = row(hgemm, name, 4096, kind)
        print(f"hgemm   {4096:5} {name + ' ' + kind:22} {ms:8.3f} {tflops:8.1f} {err:10.2e}")
EOF
exit "${PIPESTATUS[0]}"
