#!/usr/bin/env bash
# The decode_attention family on a GPU (issues 65, 66), about 3.5 minutes on an H100; logs, results and tables under $OUT:
#   sanitize  compute-sanitizer memcheck and racecheck of every step on .ci/gpu-decode.py small (8 q heads over 2 kv
#             heads, 2 new positions, 1000 of 1100 cached, d 80; 4 q heads over 4 kv heads, 77 positions, d 128),
#             started in the background: the two tools and the tests (checks all) run side by side; time waits
#   tests     pytest tests/kernels/test_decode_attention.py and the generic checks of every step at GPU_TEST_SIZES
#             (1 to 32768 cached positions; d 64, 80, 128, 256; 1, 2 and 4 q heads a kv head), 8 workers
#   time      python -m zoo run decode_attention --all-sizes --save (32 x 8 x {8192, 32768} x 128: the steps, the
#             CuPy composition, torch SDPA and the copy of the cache's bytes), alone on the GPU; results/<gpu>.json
#             copied to $OUT
#   splits    v05 with 2, 3, 4 and 6 blocks an SM at both sizes, beside the copy (a tuning candidate, not saved)
#   graph     v06 (issue 66: the length on the GPU) captured once in a CUDA graph at capacity 32768, replayed at
#             lengths 1 to 32768 set in its device length: each checked, timed beside v06 eager, v05 with the host int
#             and the copy of the filled bytes (about 20 s; the small case the sanitizers run has v06's device length
#             at 77 and 1100 of 1100 positions, and the tests and `time` cover v06 as every step)
#   table     from the results file: us, GB/s, % of the copy and of SDPA, host us a call
#   usage: .ci/gpu-decode.sh [sanitize] [tests] [time] [splits] [graph] [table]   (default: all six, in that order)
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
LOG="$OUT/decode.txt"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$LOG"
SLUG=$(python3 -c "from zoo.device import slug; print(slug())" 2>/dev/null)
failed=()
sanitizing=0
stamp() { echo "== $1 ($(date +%T))" | tee -a "$LOG"; }
sanitized() {  # wait for the sanitizers started by the sanitize part, then read their summaries
  [ $sanitizing -eq 1 ] || return 0
  wait
  sanitizing=0
  for tool in memcheck racecheck; do
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/decode-$tool.txt" | tail -1)" | tee -a "$LOG"
    if ! grep -qE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$OUT/decode-$tool.txt" \
      || grep -qE 'WRONG|Traceback' "$OUT/decode-$tool.txt"; then failed+=($tool); fi
  done
}

for part in ${*:-sanitize tests time splits graph table}; do
  case $part in
    sanitize)  # in the background: the tests (checks too) run beside them; the timing waits for them
      stamp "compute-sanitizer memcheck and racecheck, started"
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --report-api-errors no python3 .ci/gpu-decode.py small \
          > "$OUT/decode-$tool.txt" 2>&1 &
      done
      sanitizing=1;;
    tests)
      stamp "pytest at GPU sizes"
      python3 -m pytest -q -p no:cacheprovider -p no:randomly -n 8 tests/kernels/test_decode_attention.py \
        tests/kernels/test_kernels.py -k decode_attention > "$OUT/decode-pytest.txt" 2>&1 || failed+=(pytest)
      tail -1 "$OUT/decode-pytest.txt" | tee -a "$LOG";;
    time)
      sanitized
      stamp "zoo run decode_attention --all-sizes --save"
      python3 -m zoo run decode_attention --all-sizes --save > "$OUT/decode-run.txt" 2>&1 || failed+=("zoo run")
      cp "results/$SLUG.json" "$OUT/" 2>/dev/null;;
    splits)
      sanitized
      stamp "v05 blocks an SM"
      python3 .ci/gpu-decode.py splits 2>&1 | grep -v '^zoo:' | tee -a "$LOG"
      [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(splits);;
    graph)
      sanitized
      stamp "v06 in a CUDA graph, replayed at five lengths"
      python3 .ci/gpu-decode.py graph 2>&1 | grep -v '^zoo:' | tee -a "$LOG"
      [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(graph);;
    table)
      stamp "table"
      python3 .ci/gpu-decode.py table "results/$SLUG.json" 2>&1 | grep -v '^zoo:' | tee -a "$LOG";;
    *) echo "unknown part: $part (sanitize, tests, time, splits, graph, table)"; failed+=("$part");;
  esac
done
sanitized
stamp "done"
[ ${#failed[@]} -eq 0 ] && echo "all passed" | tee -a "$LOG" || { echo "FAILED: ${failed[*]}" | tee -a "$LOG"; exit 1; }
