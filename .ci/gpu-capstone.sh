#!/usr/bin/env bash
# Issue 66 on a GPU: the capstone's families (embedding, rmsnorm, rope, silu_mul, argmax) and the model they compose.
#   1. correctness: every step of the five families at GPU_TEST_SIZES, their own tests, and the tiny model against
#      float64 NumPy at every lever (CUDA graph and int4 included)
#   2. the ladder at Llama-3-8B's shapes: `zoo decode` (32 tokens after a 1024-token prompt through the prefill, every lever, PyTorch fp16
#      eager on the same weights and cache), saved as results/sweeps/<gpu>-decode.csv and docs/plots/<gpu>-decode.png
#   2b. the prefill at Llama-3-8B's shapes: `zoo prefill` (prompts of 1024, 4096 and 8064 tokens, PyTorch fp16 eager
#      beside it), saved as results/sweeps/<gpu>-prefill.csv and docs/plots/<gpu>-prefill.png; then `zoo batch`
#      (decode at batch 1 to 256), saved as results/sweeps/<gpu>-batch.csv and its PNG
#   3. compute-sanitizer memcheck and racecheck on every kernel once at small sizes (.ci/gpu-capstone-small.py)
#   4. with the time left (CAPSTONE_BUDGET_S, default 200 s): torch.compile(mode="reduce-overhead") beside the CUDA
#      graph lever (at most CAPSTONE_COMPILE_S, default 120 s, into $OUT/compile/; CAPSTONE_COMPILE=0 skips it), then
#      zoo run of the five families --save if time is still left
# Prints `lever | tokens/s | % of bandwidth limit | vs torch` last. Logs, results/<gpu>.json and the decode CSVs and
# PNG go to $OUT. Expected 3 to 4 minutes on an H100 (about 2.5 without step 4).
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
FAMILIES="embedding rmsnorm rope silu_mul argmax"
LOG="$OUT/capstone-log.txt"
SUMMARY="$OUT/capstone.txt"
BUDGET=${CAPSTONE_BUDGET_S:-200}
START=$SECONDS
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$SUMMARY"
step() { echo "== $* ($((SECONDS - START)) s)" | tee -a "$SUMMARY" | tee -a "$LOG" >/dev/null; }
fail() { echo "FAILED: $*" | tee -a "$SUMMARY"; status=1; }

step "1. correctness at GPU sizes"
python3 -m pytest tests/kernels/test_kernels.py -q -p no:randomly -n 0 -k "$(echo $FAMILIES | sed 's/ / or /g')" \
  >>"$LOG" 2>&1 || fail "the families at GPU sizes"
python3 -m pytest tests/kernels/test_rmsnorm.py tests/kernels/test_rope.py tests/kernels/test_argmax.py \
  tests/kernels/test_embedding.py tests/llm -q -p no:randomly -n 0 >>"$LOG" 2>&1 || fail "the families' and the model's tests"
grep -E "^[0-9]+ (passed|failed)|^FAILED" "$LOG" | tail -n 12 | tee -a "$SUMMARY"

step "2. the ladder at Llama-3-8B's shapes"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
python3 -m zoo decode --tokens 32 --context 1024 >>"$LOG" 2>&1 || fail "zoo decode"
cp "results/sweeps/$SLUG-decode.csv" "docs/plots/$SLUG-decode.png" "$OUT/" 2>/dev/null

step "2b. the prefill at Llama-3-8B's shapes"
python3 -m zoo prefill >>"$LOG" 2>&1 || fail "zoo prefill"
cp "results/sweeps/$SLUG-prefill.csv" "docs/plots/$SLUG-prefill.png" "$OUT/" 2>/dev/null
python3 -m zoo batch >>"$LOG" 2>&1 || fail "zoo batch"
cp "results/sweeps/$SLUG-batch.csv" "docs/plots/$SLUG-batch.png" "$OUT/" 2>/dev/null

step "3. compute-sanitizer"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 python3 .ci/gpu-capstone-small.py >"$OUT/sanitizer.txt" 2>&1 \
    || fail "$tool"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|capstone small" "$OUT/sanitizer.txt" | tail -2 | sed "s/^/$tool: /" \
    | tee -a "$SUMMARY"
  cat "$OUT/sanitizer.txt" >>"$LOG"
done
rm -f "$OUT/sanitizer.txt"

if [ "${CAPSTONE_COMPILE:-1}" = 0 ]; then
  step "4a. skipped torch.compile (CAPSTONE_COMPILE=0)"
elif [ $((SECONDS - START)) -lt "$BUDGET" ]; then
  step "4a. torch.compile beside the CUDA graph lever"
  timeout "${CAPSTONE_COMPILE_S:-120}" python3 -m zoo decode --tokens 32 --context 1024 --levers "CUDA graph,int4" \
    --compile --out "$OUT/compile" >>"$LOG" 2>&1 || echo "torch.compile: failed or past ${CAPSTONE_COMPILE_S:-120} s" \
    | tee -a "$SUMMARY"
else
  step "4a. skipped torch.compile (past $BUDGET s)"
fi
if [ $((SECONDS - START)) -lt "$BUDGET" ]; then
  step "4b. zoo run $FAMILIES --save"
  python3 -m zoo run $FAMILIES --save >>"$LOG" 2>&1 || fail "zoo run"
  cp "results/$SLUG.json" "$OUT/" 2>/dev/null
else
  step "4b. skipped zoo run (past $BUDGET s)"
fi

step "the ladder"
python3 - "results/sweeps/$SLUG-decode.csv" "$OUT/compile/$SLUG-decode.csv" <<'PY' 2>&1 | tee -a "$SUMMARY"
import csv
import os
import sys

def num(text, spec, unit=""):
    try:
        return format(float(text), spec) + unit
    except (TypeError, ValueError):
        return "-"

print(f"{'lever':36} | {'tokens/s':>9} | {'% of bandwidth limit':>20} | {'vs torch eager':>14} | {'same tokens':>11} | "
      "logits err vs torch")
for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    for r in csv.DictReader(open(path)):
        print(f"{r['lever'][:36]:36} | {num(r['tokens_per_s'], '9.1f')} | {num(r['pct_of_limit'], '19.1f', '%')} | "
              f"{num(r['vs_torch_eager'], '13.2f', 'x')} | {r['same_tokens_as_torch']:>11} | "
              f"{num(r['logits_error'], '.1e')}")
for r in csv.DictReader(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else []:
    if r.get("time_by_kind"):
        print(f"{r['lever']}: {r['time_by_kind']}")
PY
echo "total $((SECONDS - START)) s" | tee -a "$SUMMARY"
exit $status
