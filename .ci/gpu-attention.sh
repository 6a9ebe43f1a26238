#!/usr/bin/env bash
# The attention family's GPU probe (under 3 minutes on an H100): the goals' figures, v07's tile shapes and the
# S traffic measured by ncu. Logs and attention-probe.json under $OUT; a short table printed last.
#   usage: .ci/gpu-attention.sh [goals] [tune] [groups] [traffic]   (default: goals tune traffic)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ]; then  # the lent GPU's Python (see docs/DEVELOPING.md, "Python on the lent GPU")
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH || exit 1
fi
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
    *) echo "unknown part: $what (goals, tune, groups, traffic)"; status=2;;
  esac
done
exit $status
