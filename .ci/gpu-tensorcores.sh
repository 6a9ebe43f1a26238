#!/usr/bin/env bash
# Issue 64 on a Hopper GPU (compute capability 9.0): bfloat16 through hgemm's wgmma steps, TF32 on wgmma (sgemm v16),
# FP8 e4m3 on wgmma (fp8gemm v01), each against cuBLAS in its own precision. One process a stage, logs under $OUT:
#   1. tests: the hardware against the simulator's reading of wgmma .bf16/.tf32/.e4m3 (one stage each), sgemm v16 and
#      fp8gemm at large irregular shapes, their library rows (torch._scaled_mm), hgemm v08-v12 on bfloat16 at
#      GPU_TEST_SIZES (v13-v15 are checked by zoo run below)
#   2. compute-sanitizer memcheck and racecheck of hgemm v15 (bfloat16), sgemm v16 and fp8gemm v01 at small shapes
#   3. zoo run --save at 4096^3 and 8192^3 (SIZES="4096" for the first only): hgemm v13-v15 on bfloat16 and v15 on
#      float16, sgemm v15-v16, fp8gemm; each run checks its steps at GPU_TEST_SIZES first and times every library
#      row beside them
#   4. the table: kind | size | step | TFLOP/s | % of the strongest row in the same precision | error vs float64
# usage: .ci/gpu-tensorcores.sh [STAGE...]   stages: tests sanitize time table (default all). Exits 1 on a failure.
# Expected about 4 minutes on an H100 (compiles, the sanitizers, the float64 references and CPU rows at 8192^3);
# SIZES=4096 leaves 8192^3 out (about 2.5 minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1
SIZES=${SIZES:-4096 8192}
stages=${*:-tests sanitize time table}
failed=()
began=$(date +%s)
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
lap() { echo "[$(($(date +%s) - began)) s] $*"; }

for stage in $stages; do
  case $stage in
    tests)
      python3 -m pytest -q -p no:cacheprovider -n 0 tests/device/test_wgmma.py tests/kernels/test_sgemm.py \
        tests/kernels/test_fp8gemm.py -k "each_kind or swizzled_tiles or v16 or test_fp8gemm" > "$OUT/tests-new.txt" 2>&1
      s1=$?
      python3 -m pytest -q -p no:cacheprovider -n 0 tests/kernels/test_kernels.py \
        -k "hgemm and bfloat16 and (v08 or v09 or v10 or v11 or v12)" > "$OUT/tests-bf16.txt" 2>&1
      s2=$?
      lap "tests: $(tail -1 "$OUT/tests-new.txt"); bfloat16 v08-v12: $(tail -1 "$OUT/tests-bf16.txt")"
      [ $s1 -eq 0 ] && [ $s2 -eq 0 ] || failed+=(tests);;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --report-api-errors no python3 -c "
import zoo
from zoo.bench import harness
for fam, step, size, kind in (('hgemm', 'v15', (70, 129, 200), 'bfloat16'), ('sgemm', 'v16', (70, 257, 100), None),
                              ('fp8gemm', 'v01', (70, 129, 300), None)):
    r = harness.check(zoo.family(fam)[step], size, seed=1, kind=kind)
    print(fam, step, size, kind, 'ok' if r.ok else 'FAILED ' + r.detail)
" > "$OUT/$tool.txt" 2>&1
        status=$?
        summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.txt" | tail -1)
        lap "$tool hgemm v15 bf16, sgemm v16, fp8gemm v01: $summary (exit $status)"
        if [ $status -ne 0 ] || grep -qE 'FAILED|Traceback|SUMMARY: [1-9]' "$OUT/$tool.txt"; then failed+=($tool); fi
      done;;
    time)
      run() { python3 -m zoo run "$@" --budget 0.3 --save >> "$OUT/runs.txt" 2>&1 || { echo "FAILED: zoo run $*"; failed+=("run $1"); }; }
      bf16=() fp16=() plain=()
      for s in $SIZES; do bf16+=(--size "$s@bfloat16"); fp16+=(--size "$s"); plain+=(--size "$s"); done
      run hgemm "${bf16[@]}" --step v13 --step v14 --step v15
      run hgemm "${fp16[@]}" --step v15  # the fp16 step FP8 is measured against (goal: 1.7x)
      run sgemm "${plain[@]}" --step v15 --step v16
      run fp8gemm "${plain[@]}"
      cp "results/$SLUG.json" "$OUT/" 2>/dev/null
      lap "zoo run: $(grep -c . "$OUT/runs.txt") lines of log in runs.txt";;
    table)
      python3 - "results/$SLUG.json" $SIZES <<'PY' 2>&1 | tee "$OUT/table.txt"
import json
import sys

families = json.load(open(sys.argv[1])).get("families", {})
sizes = sys.argv[2:]
# (family, kind, results key suffix, the strongest row in that precision, the other rows shown, the steps)
CASES = (
    ("hgemm", "float16", "", "baseline", (), ("v15_grouped_tiles",)),
    ("hgemm", "bfloat16", "@bfloat16", "baseline", (), ("v13_tma", "v14_persistent", "v15_grouped_tiles")),
    ("sgemm", "tf32", "", "cublas_tf32", ("baseline", "triton tf32"), ("v15_tf32_tensor_cores", "v16_tf32_wgmma")),
    ("fp8gemm", "e4m3", "", "scaled_mm fast_accum", ("scaled_mm", "baseline"), ("v01_wgmma_e4m3",)),
)
print(f"{'kind':9} {'size':>5} {'step / row':26} {'TFLOP/s':>8} {'% strongest':>11} {'error':>9}  strongest row")
for size in sizes:
    for fam, kind, suffix, strongest, others, steps in CASES:
        rows = families.get(fam, {}).get(size + suffix, {})
        best = rows.get(strongest, {})
        ref = best.get("gflops") if best.get("correct") else None
        for name in (strongest, *others, *steps):
            r = rows.get(name)
            if not r or not r.get("gflops"):
                print(f"{kind:9} {size:>5} {name:26} {'-':>8} {'-':>11} {'-':>9}  not measured (see runs.txt)")
                continue
            share = f"{100 * r['gflops'] / ref:10.1f}%" if ref and r.get("correct") else f"{'-':>11}"
            ok = "" if r.get("correct") else "  WRONG"
            print(f"{kind:9} {size:>5} {name:26} {r['gflops'] / 1e3:8.1f} {share} {r.get('error', float('nan')):9.2e}"
                  f"  {fam}: {strongest}{ok}")
    fp8 = families.get("fp8gemm", {}).get(size, {}).get("v01_wgmma_e4m3", {})
    fp16 = families.get("hgemm", {}).get(size, {}).get("v15_grouped_tiles", {})
    if fp8.get("gflops") and fp16.get("gflops"):
        print(f"{'e4m3':9} {size:>5} fp8gemm v01 over hgemm v15 (fp16): {fp8['gflops'] / fp16['gflops']:.2f}x (goal 1.7x)")
PY
      [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(table);;
    *) echo "unknown stage $stage"; failed+=("$stage");;
  esac
done
lap "logs in $OUT; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
