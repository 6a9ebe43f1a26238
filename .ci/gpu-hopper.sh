#!/usr/bin/env bash
# Attention's Hopper steps (v08 on; issue 65) on the GPU, about 4 minutes on an H100: the checks at GPU sizes, the
# sanitizers on small cases, and the timing table against torch sdpa. Logs under $OUT; short lines printed.
#   usage: .ci/gpu-hopper.sh [tests] [sanitize] [time] [tune]     (default: tests sanitize time)
#   tests     pytest of the Hopper steps: tests/kernels/test_attention.py and the generic checks at GPU_TEST_SIZES
#             (1 to 4099 positions, d 64, 80, 128, 256; full, causal, gqa, gqa with the causal mask), and the
#             register-A wgmma and the named barriers of zoo.device.wgmma
#   sanitize  compute-sanitizer memcheck and racecheck of the Hopper steps at small sizes (gpu-hopper.py small)
#   time      v07, the Hopper steps and torch sdpa at 32 x 4096 x {64, 128}, full and causal (gpu-hopper.py time)
#   tune      the last step's other keys per block and stages at the same sizes (gpu-hopper.py tune, about 1 minute)
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export OUT PYTHONUNBUFFERED=1 ZOO_TARGET=gpu
steps="v08 or v09 or v10 or v11 or v12"
status=0
for what in ${*:-tests sanitize time}; do
  case $what in
    tests)
      python3 -m pytest -q -p no:cacheprovider -p no:randomly tests/kernels/test_attention.py tests/kernels/test_kernels.py \
        tests/device/test_wgmma.py -k "(attention and ($steps)) or register_a or named_barriers" --durations=10 \
        > "$OUT/hopper-pytest.txt" 2>&1 || status=1
      grep -E "passed|failed" "$OUT/hopper-pytest.txt" | tail -1;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --report-api-errors no python3 .ci/gpu-hopper.py small > "$OUT/hopper-$tool.txt" 2>&1
        code=$?
        echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/hopper-$tool.txt" | tail -1) (exit $code)"
        if [ $code -ne 0 ] || grep -qE 'WRONG|Traceback|SUMMARY: [1-9]' "$OUT/hopper-$tool.txt"; then status=1; fi
      done;;
    time|tune)
      python3 .ci/gpu-hopper.py $what 2>&1 | tee "$OUT/hopper-$what.txt" | grep -v '^zoo:'
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1;;
    *) echo "unknown part: $what (tests, sanitize, time, tune)"; status=2;;
  esac
done
exit $status
