#!/usr/bin/env bash
# hgemm's Hopper steps (v08 on: wgmma, mbarriers, TMA, persistent tiles) on a GPU of compute capability 9.0:
#   1. tests/device/test_wgmma.py (the layouts, TMA box and pipelines on the hardware, the sm_90a launch path)
#   2. every step from v08 on at hgemm's GPU_TEST_SIZES and more irregular shapes against the float64 reference
#   3. compute-sanitizer memcheck and racecheck of every step from v08 on at small irregular shapes
#   4. v07 and every later step and cuBLAS (cublasGemmEx, the family's baseline) timed at 4096^3 and 8192^3: a short table
# usage: .ci/gpu-wgmma.sh [STEP...]   steps: tests check sanitize time (default: all four); logs under $OUT.
# Exits 1 when a step failed. About 3 minutes on an H100 (most of it compiling, the sanitizers and the references).
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 ZOO_TARGET=gpu
steps=${*:-tests check sanitize time}
failed=()
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

for step in $steps; do
  case $step in
    tests)
      python3 -m pytest -q -p no:cacheprovider -n 0 tests/device/test_wgmma.py 2>&1 | tee "$OUT/test_wgmma.txt" | tail -3
      [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(tests);;
    check)
      python3 - <<'EOF' 2>&1 | tee "$OUT/check.txt"
import sys
import zoo
from zoo.bench import harness
fam = zoo.family("hgemm")
sizes = list(fam.GPU_TEST_SIZES) + [(257, 511, 129), (1, 4097, 65), (129, 1, 4096), (300, 1000, 8), (2000, 3000, 777)]
bad = 0
for v in (v for v in fam if v.name >= "v08"):
    for size in sizes:
        r = harness.check(v, size, seed=5)
        bad += not r.ok
        print(f"{v.name:24} {'x'.join(map(str, size)) if isinstance(size, tuple) else size:>16}  "
              f"{'ok' if r.ok else 'FAILED'}  error {r.error:.2e}  {'' if r.ok else r.detail}")
sys.exit(1 if bad else 0)
EOF
      [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(check);;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --report-api-errors no python3 -c "
import zoo
from zoo.bench import harness
fam = zoo.family('hgemm')
for v in (v for v in fam if v.name >= 'v08'):
    for size in ((70, 129, 200), (130, 257, 70)):
        r = harness.check(v, size, seed=1)
        print(v.name, size, 'ok' if r.ok else 'FAILED ' + r.detail)
" > "$OUT/$tool.txt" 2>&1
        status=$?
        summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.txt" | tail -1)
        echo "$tool v08 on: $summary (exit $status)"
        if [ $status -ne 0 ] || grep -qE 'FAILED|Traceback|SUMMARY: [1-9]' "$OUT/$tool.txt"; then failed+=($tool); fi
      done;;
    time)
      python3 - <<'EOF' 2>&1 | tee "$OUT/time.txt"
import zoo
from zoo.bench import harness
fam = zoo.family("hgemm")
print(f"{'size':>6} {'variant':24} {'ms':>9} {'TFLOP/s':>8} {'% cuBLAS':>9} {'regs':>5}  correct")
for size in (4096, 8192):
    base = harness.measure_baseline(fam, size)
    print(f"{size:>6} {'cuBLAS GemmEx':24} {base.ms:9.4f} {base.gflops / 1e3:8.1f} {100.0:8.1f}% {'-':>5}  {base.correct}")
    for v in (v for v in fam if v.name >= "v07"):
        m = harness.measure_variant(v, size, baseline_ms=base.ms)
        regs = (m.resources or {}).get("registers", "-")
        print(f"{size:>6} {v.name:24} {m.ms:9.4f} {m.gflops / 1e3:8.1f} {100 * m.ratio:8.1f}% {regs:>5}  {m.correct}")
EOF
      [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(time);;
    *) echo "unknown step $step"; failed+=("$step");;
  esac
done
echo "logs in $OUT; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
