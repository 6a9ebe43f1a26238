#!/usr/bin/env bash
# Issue 63's timer checks on a GPU, in one call (about 4 minutes on an H100; FAMILIES="a b" for fewer):
#   1. the timer checked by another one: `python -m zoo.bench.crosscheck` times a few rows of each class (memory-bound,
#      compute-bound, block-cooperative) by the harness, warm and with --cold-l2, and by NVBench (cuda-bench's
#      batch and cold measurements); the warm figures must agree within 5%
#   2. each family's best step (as results/<gpu>.json records it) at its headline size and its smallest BENCH size:
#      `zoo run --best-step --smallest --save` re-times it with the library rows, on the lean call path (CuPy arrays as
#      a user's call passes them), and times its call in a user's loop beside the benchmark's figure, and at the
#      smallest size the library's call too
#   3. prints the table: user's loop against the benchmark at the headline size (with the reason where they differ by
#      more than 10%), and a call's cost against the library's at the smallest size (goal: at most 1.3x)
# RERECORD=1 then re-times every BENCH size of $FAMILIES (every step, --all-sizes): the H200's small-size rows were
# recorded before the lean launch (commits 9a44317, 370f054, e53d3f8); minutes a family, so a few families a call.
# Needs cuda-bench's wheel in .whl (.ci/gpu-wheels-extra) and carries .whl; saves into results/<gpu>.json and copies it,
# the logs and the crosscheck's JSON to $OUT. `python -m zoo report` afterwards puts the figures on the pages.
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-150}
began=$SECONDS
if [ -z "${ZOO_COMMIT:-}" ]; then  # saved rows name their commit; a device copy's git, if any, is an older commit's
  echo "set ZOO_COMMIT=<the commit of this tree> (git rev-parse --short HEAD, here): the saved rows name it"; exit 2
fi
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu-timer.txt"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
status=0
python3 -m zoo.bench.crosscheck --json "$OUT/crosscheck.json" > "$OUT/gpu-timer-runs.txt" 2>&1 || status=1
grep -A20 '^class ' "$OUT/gpu-timer-runs.txt" | tee -a "$OUT/gpu-timer.txt"
echo "crosscheck: $((SECONDS - began)) s" | tee -a "$OUT/gpu-timer.txt"
python3 -m zoo run ${FAMILIES:-} --best-step --smallest --budget 0.15 --save >> "$OUT/gpu-timer-runs.txt" 2>&1 \
  || { echo "FAILED (or a row wrong): zoo run --best-step --smallest" | tee -a "$OUT/gpu-timer.txt"; status=1; }
if [ "${RERECORD:-0}" = 1 ]; then  # every BENCH size of $FAMILIES, every step: the small rows timed before the lean launch
  python3 -m zoo run ${FAMILIES:-} --all-sizes --budget 0.15 --save >> "$OUT/gpu-timer-runs.txt" 2>&1 \
    || { echo "FAILED (or a row wrong): zoo run --all-sizes" | tee -a "$OUT/gpu-timer.txt"; status=1; }
fi
cp "results/$SLUG.json" "$OUT/"
python3 - "results/$SLUG.json" <<'PY' 2>&1 | tee -a "$OUT/gpu-timer.txt"
import json
import sys

import zoo
from zoo.bench import results, run, strongest, user_loop

data = json.load(open(sys.argv[1]))["families"]
print(f"{'family':12} {'best step':34} {'size':12} {'bench us':>10} {'loop us':>10} {'host us':>8} {'of bench':>8}  why")
for fam in zoo.families():
    by_size = data.get(fam.name, {})
    key = results.size_key(run.headline_size(fam))
    best = strongest.best_step(fam, by_size.get(key, {}))
    loop = (best[1].get("user_loop") or {}) if best else {}
    if not loop.get("ms"):
        continue
    ms = best[1]["ms"]
    print(
        f"{fam.name:12} {best[0][:34]:34} {key[:12]:12} {1e3 * ms:10.1f} {1e3 * loop['ms']:10.1f} "
        f"{loop.get('host_us', float('nan')):8.1f} {ms / loop['ms']:8.0%}  {user_loop.reason(best[1]) or '-'}"
    )
print()
print(f"{'family':12} {'best step':34} {'smallest':12} {'call us':>10} {'library us':>10} {'x':>6}  goal <= {user_loop.CALL_GOAL}x")
for fam in zoo.families():
    entries = data.get(fam.name, {}).get(results.size_key(run.smallest_size(fam)), {})
    best = strongest.best_step(fam, entries)
    mine = ((best[1].get("user_loop") or {}).get("ms")) if best else None
    theirs = (entries.get("baseline", {}).get("user_loop") or {}).get("ms")
    if mine and theirs:
        print(
            f"{fam.name:12} {best[0][:34]:34} {results.size_key(run.smallest_size(fam))[:12]:12} {1e3 * mine:10.1f} "
            f"{1e3 * theirs:10.1f} {mine / theirs:6.2f}  {'ok' if mine / theirs <= user_loop.CALL_GOAL else 'OVER'}"
        )
PY
echo "gpu-timer.sh: $((SECONDS - began)) s" | tee -a "$OUT/gpu-timer.txt"
exit $status
