#!/usr/bin/env bash
# Issue 66 on a GPU: the capstone's families (embedding, rmsnorm, rope, silu_mul, argmax) and the model they compose.
#   1. correctness: every step of the five families at GPU_TEST_SIZES, their own tests, and the tiny model against
#      float64 NumPy at every lever (CUDA graph and int4 included)
#   2. compute-sanitizer memcheck and racecheck on the families' small sizes (zoo check --test-sizes) and the tiny
#      model's naive lever (the model's own kernels: cache append, decode attention)
#   3. the ladder at Llama-3-8B's shapes: `zoo decode` (32 tokens after a context of 1024, every lever, PyTorch fp16
#      eager and torch.compile reduce-overhead on the same weights; without --compile if that fails or runs long)
#   4. with the time left (under CAPSTONE_BUDGET_S, default 225): zoo run of the five families --save
# Prints `lever | tokens/s | % of bandwidth limit | vs torch` last. Logs, results/<gpu>.json and the decode CSV and
# PNG go to $OUT. Expected about 4 minutes on an H100.
set -uo pipefail
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then  # as .ci/gpu-session sets Python up (docs/DEVELOPING.md, "Python on the lent GPU")
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH || exit 1
fi
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
FAMILIES="embedding rmsnorm rope silu_mul argmax"
LOG="$OUT/capstone-log.txt"
SUMMARY="$OUT/capstone.txt"
START=$SECONDS
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$SUMMARY"
step() { echo "== $* ($((SECONDS - START)) s)" | tee -a "$SUMMARY" >>"$LOG"; }

step "1. correctness at GPU sizes"
python3 -m pytest tests/kernels/test_kernels.py -q -x -p no:randomly -n 0 \
  -k "$(echo $FAMILIES | sed 's/ / or /g')" >>"$LOG" 2>&1 || { echo "FAILED: families at GPU sizes" | tee -a "$SUMMARY"; status=1; }
python3 -m pytest tests/kernels/test_rmsnorm.py tests/kernels/test_rope.py tests/kernels/test_argmax.py \
  tests/kernels/test_embedding.py tests/llm -q -x -p no:randomly -n 0 >>"$LOG" 2>&1 \
  || { echo "FAILED: family and model tests" | tee -a "$SUMMARY"; status=1; }
tail -n 3 "$LOG" | grep -E "passed|failed" | tee -a "$SUMMARY"

step "2. compute-sanitizer"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 1 python3 -m zoo check $FAMILIES --test-sizes >"$OUT/sanitizer.txt" 2>&1 \
    || { echo "FAILED: $tool on the families" | tee -a "$SUMMARY"; status=1; }
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.txt" | tail -1 | sed "s/^/families $tool: /" | tee -a "$SUMMARY"
  cat "$OUT/sanitizer.txt" >>"$LOG"
  compute-sanitizer --tool $tool --error-exitcode 1 python3 -m pytest tests/llm -q -x -p no:randomly -n 0 -k "naive" \
    >"$OUT/sanitizer.txt" 2>&1 || { echo "FAILED: $tool on the tiny model" | tee -a "$SUMMARY"; status=1; }
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.txt" | tail -1 | sed "s/^/tiny model $tool: /" | tee -a "$SUMMARY"
  cat "$OUT/sanitizer.txt" >>"$LOG"
done
rm -f "$OUT/sanitizer.txt"

step "3. the ladder at Llama-3-8B's shapes"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
timeout "${CAPSTONE_COMPILE_S:-150}" python3 -m zoo decode --tokens 32 --context 1024 --compile >>"$LOG" 2>&1 || {
  echo "zoo decode --compile failed or ran past ${CAPSTONE_COMPILE_S:-150} s: again without torch.compile" | tee -a "$SUMMARY"
  python3 -m zoo decode --tokens 32 --context 1024 >>"$LOG" 2>&1 || { echo "FAILED: zoo decode" | tee -a "$SUMMARY"; status=1; }
}
cp "results/sweeps/$SLUG-decode.csv" "docs/plots/$SLUG-decode.png" "$OUT/" 2>/dev/null

if [ $((SECONDS - START)) -lt "${CAPSTONE_BUDGET_S:-225}" ]; then
  step "4. zoo run $FAMILIES --save"
  python3 -m zoo run $FAMILIES --save >>"$LOG" 2>&1 || { echo "FAILED: zoo run" | tee -a "$SUMMARY"; status=1; }
  cp "results/$SLUG.json" "$OUT/" 2>/dev/null
else
  step "4. skipped zoo run (past ${CAPSTONE_BUDGET_S:-225} s)"
fi

step "the ladder"
python3 - "results/sweeps/$SLUG-decode.csv" <<'PY' 2>&1 | tee -a "$SUMMARY"
import csv
import sys

def num(text, spec):
    try:
        return format(float(text), spec)
    except ValueError:
        return "-"

rows = list(csv.DictReader(open(sys.argv[1])))
print(f"{'lever':38} | {'tokens/s':>9} | {'% of bandwidth limit':>20} | {'vs torch eager':>14} | {'same tokens':>11} | logits err")
for r in rows:
    print(f"{r['lever']:38} | {num(r['tokens_per_s'], '9.1f')} | {num(r['pct_of_limit'], '19.1f')}% | "
          f"{num(r['vs_torch_eager'], '13.2f')}x | {r['same_tokens_as_torch']:>11} | {num(r['logits_error'], '.1e')}")
PY
echo "total $((SECONDS - START)) s" | tee -a "$SUMMARY"
exit $status
