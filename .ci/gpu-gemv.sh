#!/usr/bin/env bash
# gemv on a GPU after the fold of v10-v14 into v10 (prepacked weights, its ring's kernels tuning candidates), about
# 5 to 6 minutes on an H100 or H200 (under 8). In order, each logged under $OUT:
#   1. the GPU tests of v10 and the tune's candidates at real sizes (every candidate, its trigger too)  ~2.5 min
#   2. zoo run gemv --step v10 --save: v10's records at the headline size, every kind (old v11-v14 rows stay)  ~1 min
#   3. zoo gemv-formats: int4 / fp16 weights per second at 8192^2, 4096x14336, 14336x4096 (goal 3.5x)     ~1 min
#   4. a user's loop of plain calls, gemv["v10"](W, x, scales) on CuPy arrays, against the benchmark's figure
#      (Variant.launch on inputs packed once, as asv and zoo run time it): goal at least 80%                ~30 s
# The saved tune tables need no retune: the kernels' PTX is the same as v12's, v13's and v14's, only their names
# changed (.ci/gemv-tune-names). No kernel is new, so no sanitizer run; GEMV_SANITIZE=1 adds memcheck and racecheck
# of each of v10's kernels on small packed shapes (33 x 512, 3 x 1280; about 3 minutes more); GEMV_TESTS=0 skips 1.
#   usage: OUT=/some/dir .ci/gpu-gemv.sh      (then copy $OUT/<gpu>.json over results/<gpu>.json)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gemv.txt"

if [ "${GEMV_TESTS:-1}" = 1 ]; then  # GEMV_TESTS=0 skips them where another GPU already ran them on this commit
  echo "== 1. tests" | tee -a "$OUT/gemv.txt"
  tests=$(ls tests/test_gemv.py tests/*/test_gemv.py tests/test_kernels.py tests/*/test_kernels.py 2>/dev/null)  # before or after tests/ is split
  python3 -m pytest $tests -q -x -p no:randomly \
    -k "gemv and (v10 or ring or decode or one_group or packed or table or gemv-v09)" >"$OUT/gemv-tests.log" 2>&1 || status=1
  tail -3 "$OUT/gemv-tests.log" | tee -a "$OUT/gemv.txt"
fi

echo "== 2. zoo run gemv --step v10 --save" | tee -a "$OUT/gemv.txt"
python3 -m zoo run gemv --step v10 --save >"$OUT/gemv-run.log" 2>&1 || status=1
grep -E "int4|fp16|FAIL|rror" "$OUT/gemv-run.log" | grep -E "v10|FAIL|rror" | head -20 | tee -a "$OUT/gemv.txt"
cp results/"$(python3 -c 'from zoo.device import slug; print(slug())')".json "$OUT/" 2>/dev/null

echo "== 3. zoo gemv-formats" | tee -a "$OUT/gemv.txt"
python3 -m zoo gemv-formats --out "$OUT" >"$OUT/gemv-formats.log" 2>&1 || status=1
grep -iE "int4|goal|x fp16|rror" "$OUT/gemv-formats.log" | tail -12 | tee -a "$OUT/gemv.txt"

echo "== 4. plain calls in a user's loop against the benchmark" | tee -a "$OUT/gemv.txt"
python3 - <<'PY' 2>&1 | tee -a "$OUT/gemv.txt" || status=1
import time

import cupy
import numpy as np
from numba import cuda

import zoo

try:
    from zoo import harness
except ImportError:  # after the host side moved into layers
    from zoo.bench import harness

fam = zoo.family("gemv")
step = fam["v10"]
print(f"{'size':>11} {'bench us':>9} {'plain us':>9} {'plain/bench':>11} {'out= us':>8} {'first call ms':>13}  packs")
worst = 1.0
for size in fam.BENCH_SIZES:
    host = fam.inputs(size, 0, "int4")
    sets = harness.input_sets(host)  # rotating sets past the L2, as the benchmark times them
    packed = [step.packed(s) for s in sets]  # the benchmark's preparation, apart from its timing
    out = cuda.device_array(size[0], np.float32)  # as benchmarks/common.py's Case
    bench = harness.time_launches(lambda i: step.launch(packed[i % len(packed)], out), min_samples=5, budget_s=0.25)
    user = [tuple(cupy.asarray(a) for a in s) for s in sets]  # a user's CuPy arrays, row-major as the spec makes them
    step.prepared.clear()
    misses = step.prepared.misses
    start = time.perf_counter()
    step(*user[0])
    cupy.cuda.runtime.deviceSynchronize()
    first_ms = (time.perf_counter() - start) * 1e3  # packs this set's weights: once
    plain = harness.time_launches(lambda i: step(*user[i % len(user)]), min_samples=5, budget_s=0.25)
    y = cupy.empty(size[0], cupy.float32)
    given = harness.time_launches(lambda i: step(*user[i % len(user)], out=y), min_samples=5, budget_s=0.25)
    ratio = bench.median_ms / plain.median_ms
    worst = min(worst, ratio)
    packs = step.prepared.misses - misses
    print(
        f"{'x'.join(map(str, size)):>11} {bench.median_ms * 1e3:9.2f} {plain.median_ms * 1e3:9.2f} {ratio:11.0%} "
        f"{given.median_ms * 1e3:8.2f} {first_ms:13.2f}  {packs} (one a weights set: {len(user)})"
    )
    assert packs == len(user), "a plain call packed weights it had packed before"
    fam.module._HELD.clear()
print(f"plain calls reach {worst:.0%} of the benchmark's figure at worst (goal: at least 80%)")
PY

if [ "${GEMV_SANITIZE:-0}" = 1 ]; then
  echo "== 5. compute-sanitizer memcheck and racecheck, v10's kernels" | tee -a "$OUT/gemv.txt"
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 python3 -m pytest $(ls tests/test_gemv.py tests/*/test_gemv.py 2>/dev/null) -q -x -p no:randomly \
      -k "v10_runs_each_kernel" >"$OUT/gemv-$tool.log" 2>&1 || status=1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/gemv-$tool.log" | tail -2 | tee -a "$OUT/gemv.txt"
  done
fi
[ $status = 0 ] && echo "gemv: all steps passed" | tee -a "$OUT/gemv.txt" || echo "gemv: FAILED (logs in $OUT)" | tee -a "$OUT/gemv.txt"
exit $status
