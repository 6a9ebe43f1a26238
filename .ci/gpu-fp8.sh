#!/usr/bin/env bash
# fp8gemm v02 (promoted accumulation, issue 64) on a Hopper GPU (compute capability 9.0), in three parts:
#   1. one Python process: tests/kernels/test_fp8gemm.py (v01 against v02 at 128 x 256 x 1024: v02's error well
#      below v01's, each within its own TOLERANCE; the library rows), then `zoo run fp8gemm --size 4096 --size 8192
#      --save`, which checks v01 and v02 at GPU_TEST_SIZES (1^3, 70 x 129 x 31, 1025 x 2047 x 1029, 129 x 4099 x 257,
#      4096^3) and times both beside the baseline and torch._scaled_mm's two rows (each timed call checked too);
#   2. compute-sanitizer memcheck and racecheck of v02 at 70 x 129 x 300 (two tiles of three k steps, padded), and
#      memcheck at 1500 x 1600 x 300 (156 tiles: some blocks walk two, the partial sums started afresh each tile);
#   3. the table: step or row | size | TFLOP/s | % of the strongest row | error | tolerance, v02 over v01 in time
#      and in error, v02 over hgemm v15 (fp16) where the results file holds it.
# Logs and the results file go to $OUT. About 2 to 3 minutes on an H100 (the float64 references and the CPU row at 8192^3,
# each kernel compiled once a process). Exits 1 on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
LOG="$OUT/gpu-fp8.txt"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$LOG"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
status=0
began=$SECONDS

echo "== 1. pytest tests/kernels/test_fp8gemm.py, then zoo run fp8gemm at 4096^3 and 8192^3 (one process)" | tee -a "$LOG"
python3 - > "$OUT/gpu-fp8-run.txt" 2>&1 <<'PY'
import sys
import time

import pytest

from zoo.cli import main

began = time.perf_counter()
code = pytest.main(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", "tests/kernels/test_fp8gemm.py"])
print(f"pytest: exit {int(code)} in {time.perf_counter() - began:.0f} s", flush=True)
began = time.perf_counter()
try:
    run = main(["run", "fp8gemm", "--size", "4096", "--size", "8192", "--budget", "0.3", "--save"])
except SystemExit as e:
    run = e.code
print(f"zoo run: exit {run} in {time.perf_counter() - began:.0f} s", flush=True)
sys.exit(1 if int(code) or run else 0)
PY
[ $? = 0 ] || status=1
grep -E "^pytest: |^zoo run: |passed|failed|FAILED|WRONG|wrong|Error" "$OUT/gpu-fp8-run.txt" | tail -20 | tee -a "$LOG"
cp "results/$SLUG.json" "$OUT/" 2>/dev/null

for tool in memcheck racecheck; do
  echo "== 2. compute-sanitizer $tool of v02" | tee -a "$LOG"
  sizes="70x129x300 1500x1600x300"; [ $tool = racecheck ] && sizes="70x129x300"
  SIZES=$sizes timeout 300 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 python3 - \
    > "$OUT/gpu-fp8-$tool.txt" 2>&1 <<'PY'
import os

import zoo
from zoo.bench import harness

for text in os.environ["SIZES"].split():
    size = tuple(int(d) for d in text.split("x"))
    r = harness.check(zoo.family("fp8gemm")["v02"], size, seed=1)
    print(f"v02 {text}: {'ok' if r.ok else 'WRONG'} {r.detail}", flush=True)
PY
  code=$?
  grep -E "^v02|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/gpu-fp8-$tool.txt" | tee -a "$LOG"
  if [ "$code" != 0 ] || grep -q WRONG "$OUT/gpu-fp8-$tool.txt"; then
    echo "FAILED: $tool exit $code (9: errors found, 124: cut off)" | tee -a "$LOG"
    status=1
  fi
done

echo "== 3. v01 and v02 beside the library rows" | tee -a "$LOG"
python3 - "results/$SLUG.json" <<'PY' 2>&1 | tee -a "$LOG"
import json
import sys

import zoo

fam = zoo.family("fp8gemm")
families = json.load(open(sys.argv[1])).get("families", {})
rows = ("scaled_mm fast_accum", "scaled_mm", "baseline", "v01_wgmma_e4m3", "v02_promoted_accumulation")
tolerance = {v.name: v.tolerance for v in fam}
print(f"{'step / row':28} {'size':>5} {'TFLOP/s':>8} {'% strongest':>11} {'error':>9} {'tolerance':>9}")
for size in ("4096", "8192"):
    entries = families.get("fp8gemm", {}).get(size, {})
    best = entries.get("scaled_mm fast_accum", {})
    strongest = best.get("gflops") if best.get("correct") else None
    for name in rows:
        e = entries.get(name)
        if not e or not e.get("gflops"):
            print(f"{name:28} {size:>5} {'-':>8} {'-':>11} {'-':>9} {'-':>9}  not measured (see gpu-fp8-run.txt)")
            continue
        share = f"{100 * e['gflops'] / strongest:10.1f}%" if strongest and e.get("correct") else f"{'-':>11}"
        tol = f"{tolerance[name](int(size)):9.2e}" if name in tolerance else f"{'':9}"
        wrong = "" if e.get("correct") else "  WRONG"
        print(f"{name:28} {size:>5} {e['gflops'] / 1e3:8.1f} {share} {e.get('error', float('nan')):9.2e} {tol}{wrong}")
    v01, v02 = entries.get("v01_wgmma_e4m3", {}), entries.get("v02_promoted_accumulation", {})
    if v01.get("gflops") and v02.get("gflops"):
        print(f"{'':28} {size:>5} v02 / v01: {v02['gflops'] / v01['gflops']:.2f}x the rate, "
              f"{v02['error'] / v01['error']:.2f}x the error")
    fp16 = families.get("hgemm", {}).get(size, {}).get("v15_grouped_tiles", {})
    if v02.get("gflops") and fp16.get("gflops"):
        print(f"{'':28} {size:>5} v02 over hgemm v15 (fp16, commit {fp16.get('commit')}): "
              f"{v02['gflops'] / fp16['gflops']:.2f}x (goal 1.7x)")
PY
echo "total $((SECONDS - began)) s; logs in $OUT; status $status" | tee -a "$LOG"
exit $status
