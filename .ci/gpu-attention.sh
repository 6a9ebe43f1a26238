#!/usr/bin/env bash
# The attention family's GPU probe (under 3 minutes on an H100): the goals' figures, v07's tile shapes and the
# S traffic measured by ncu. Logs and attention-probe.json under $OUT; a short table printed last.
#   usage: .ci/gpu-attention.sh [goals] [tune] [groups] [traffic] [tests] [sanitize] [heads]
#          (default: goals tune traffic)
# Any head size and grouped KV heads (issue 65): `.ci/gpu-attention.sh tests sanitize heads`
#   tests     pytest tests/kernels/test_attention.py and the generic checks of every step at GPU_TEST_SIZES (1 to
#             4099 positions, d 64, 80, 128, 256; full, causal, gqa, and gqa with the causal mask)
#   sanitize  compute-sanitizer memcheck and racecheck of every step at small sizes of the new cases (gpu-attention.py
#             small: d 80 over 1 kv head causal, d 256 over 1 kv head, d 24 where a step takes it)
#   heads     v05-v07 and torch sdpa at 32 x 4096 x {64, 80, 128, 256}, 32 and 8 kv heads, full and causal
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export OUT PYTHONUNBUFFERED=1 ZOO_TARGET=gpu
status=0
for what in ${*:-goals tune traffic}; do
  case $what in
    goals|tune|groups)
      python3 .ci/gpu-attention.py $what 2>&1 | tee "$OUT/attention-$what.txt" | grep -v '^zoo:'
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1;;
    traffic)
      ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv --print-units base \
        python3 .ci/gpu-attention.py traffic > "$OUT/attention-ncu.csv" 2> "$OUT/attention-ncu.err"
      [ $? -eq 0 ] || { status=1; tail -5 "$OUT/attention-ncu.err"; }
      python3 .ci/gpu-attention.py bytes "$OUT/attention-ncu.csv" 2>&1 | grep -v '^zoo:' | tee "$OUT/attention-traffic.txt";;
    heads)
      python3 .ci/gpu-attention.py heads 2>&1 | tee "$OUT/attention-heads.txt" | grep -v '^zoo:'
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1;;
    tests)
      python3 -m pytest -q -p no:cacheprovider -p no:randomly tests/kernels/test_attention.py \
        tests/kernels/test_kernels.py -k attention > "$OUT/attention-pytest.txt" 2>&1 || status=1
      tail -1 "$OUT/attention-pytest.txt";;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --report-api-errors no python3 .ci/gpu-attention.py small \
          > "$OUT/attention-$tool.txt" 2>&1
        code=$?
        echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/attention-$tool.txt" | tail -1) (exit $code)"
        if [ $code -ne 0 ] || grep -qE 'WRONG|Traceback|SUMMARY: [1-9]' "$OUT/attention-$tool.txt"; then status=1; fi
      done;;
    *) echo "unknown part: $what (goals, tune, groups, traffic, tests, sanitize, heads)"; status=2;;
  esac
done
exit $status
