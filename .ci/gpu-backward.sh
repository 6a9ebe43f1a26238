#!/usr/bin/env bash
# The attention_backward family on the lent GPU (issue 65's backward pass), about 5 minutes on an H100 (estimated:
# some 40 kernel builds of a few seconds each for five steps, the float64 references at 32 x 4096, the CPU row):
#   tests     pytest (8 processes) tests/kernels/test_attention_backward.py and the generic checks of every step at
#             GPU_TEST_SIZES (1 to 4099 positions, d 64, 80, 128, 256 for v01; full, causal, gqa)
#   sanitize  compute-sanitizer memcheck and racecheck of every step at small cases (77 positions causal at d 64,
#             33 positions over 1 kv head at d 128)
#   time      zoo run at 32 heads x 4096 positions, d 64 and 128, full and causal (0.3 s of samples a row), saved into
#             results/<gpu>.json
#   table     each row's ms, TFLOP/s (FlashAttention-2's count: 2.5 forwards) and % of torch sdpa's backward
# Logs, the results file and the table under $OUT.
#   usage: [STEPS="v05 v06"] .ci/gpu-backward.sh [tests] [sanitize] [time] [table]   (default: all four, every step)
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export OUT PYTHONUNBUFFERED=1 ZOO_TARGET=gpu NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/backward-gpu.txt"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
SIZES="32x4096x64 32x4096x64@causal 32x4096x128 32x4096x128@causal"
STEPS=${STEPS:-}  # some steps only: their tests, sanitizers and rows (with the library's rows)
only_k="" step_args=()
for s in $STEPS; do only_k="${only_k:+$only_k or }$s"; step_args+=(--step "$s"); done
began=$(date +%s)
lap() { echo "[$(($(date +%s) - began)) s] $*" | tee -a "$OUT/backward-gpu.txt"; }
failed=()

for stage in ${*:-tests sanitize time table}; do
  case $stage in
    tests)
      python3 -m pytest -q -p no:cacheprovider -p no:randomly -n 8 tests/kernels/test_attention_backward.py \
        tests/kernels/test_kernels.py -k "attention_backward${only_k:+ and ($only_k)}" > "$OUT/backward-pytest.txt" 2>&1 || failed+=(tests)
      lap "tests: $(tail -1 "$OUT/backward-pytest.txt")";;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --report-api-errors no python3 -c "
import zoo
from zoo.bench import harness
fam = zoo.family('attention_backward')
only = '$STEPS'.split()
for v in fam:
    if only and v.name[:3] not in only:
        continue
    for size, kind in (((2, 77, 64), 'causal'), ((2, 33, 128), 'gqa')):
        r = harness.check(v, size, seed=1, kind=kind)
        print(v.name, size, kind, 'ok' if r.ok else 'FAILED ' + r.detail)
" > "$OUT/backward-$tool.txt" 2>&1
        code=$?
        lap "$tool every step: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/backward-$tool.txt" | tail -1) (exit $code)"
        if [ $code -ne 0 ] || grep -qE 'FAILED|Traceback|SUMMARY: [1-9]' "$OUT/backward-$tool.txt"; then failed+=($tool); fi
      done;;
    time)
      sizes=()
      for s in $SIZES; do sizes+=(--size "$s"); done
      python3 -m zoo run attention_backward "${sizes[@]}" "${step_args[@]}" --budget 0.3 --save > "$OUT/backward-run.txt" 2>&1 || failed+=(time)
      cp "results/$SLUG.json" "$OUT/" 2>/dev/null
      lap "zoo run: $(grep -c . "$OUT/backward-run.txt") lines of log in backward-run.txt";;
    table)
      python3 - "results/$SLUG.json" $SIZES <<'PY' 2>&1 | tee "$OUT/backward-table.txt"
import json
import sys

rows = json.load(open(sys.argv[1])).get("families", {}).get("attention_backward", {})
print(f"{'size':20} {'row':28} {'ms':>9} {'TFLOP/s':>8} {'% torch':>8}  ok")
for size in sys.argv[2:]:
    case = rows.get(size, {})
    torch = case.get("torch sdpa backward", {}).get("ms")
    for name in sorted(case, key=lambda n: (not n.startswith("v"), n)):
        r = case[name]
        if "ms" not in r or name.startswith("cpu"):
            continue
        share = f"{100 * torch / r['ms']:7.1f}%" if torch else "      -"
        print(f"{size:20} {name:28} {r['ms']:9.3f} {r.get('gflops', 0) / 1e3:8.1f} {share}  {r.get('correct')}")
PY
      ;;
    *) echo "unknown stage: $stage (tests, sanitize, time, table)"; failed+=("$stage");;
  esac
done
lap "done; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
