#!/usr/bin/env bash
# The sort family (issue 67) on the lent GPU, in three parts (see docs/DEVELOPING.md, "Python on the lent GPU": carry
# .whl with cuda-cccl from .ci/gpu-wheels-extra, or the CUB row says "cuda-cccl not installed"):
#   1. one Python process: pytest of the family at its GPU sizes (tests/kernels/test_sort.py and the generic check of
#      every step, kind and GPU_TEST_SIZES: up to 2^24 keys, a million edge keys sorted twice), then
#      `python -m zoo run sort --size 2^24 --size 2^28 --save` in the same process, so each kernel compiles once;
#   2. compute-sanitizer memcheck, then racecheck, of every step on pairs (their kernels hold every line the keys-only
#      kernels do, and the values' too) at 4099 keys and one size where v05's blocks walk several tiles and v06's
#      look-back crosses hundreds (memcheck 2,200,001; racecheck 70,001), v01 at its one block;
#   3. the table step | kind | keys | ms | Gkeys/s | GB/s | x copy | % of CUB from results/<gpu>.json.
# Logs and the results file go to $OUT. About 4 to 5 minutes on an H100: of it, host time for the 2^28 inputs and
# references (about 20 s), the CPU row's one call of numpy.argsort(kind="stable") on 2^28 pairs (about 40 s), and
# each step's kernels compiled in each of the three processes (about 1 s a kernel).
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
LOG="$OUT/gpu-sort.txt"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$LOG"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
status=0
began=$SECONDS

echo "== 1. pytest at GPU sizes, then zoo run sort at 2^24 and 2^28 (one process)" | tee -a "$LOG"
python3 - > "$OUT/gpu-sort-run.txt" 2>&1 <<'PY'
import sys
import time

import pytest

from zoo.cli import main

began = time.perf_counter()
code = pytest.main(
    ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "tests/kernels/test_sort.py", "tests/kernels/test_kernels.py",
     "-k", "sort"]
)
print(f"pytest: exit {int(code)} in {time.perf_counter() - began:.0f} s", flush=True)
began = time.perf_counter()
try:
    run = main(["run", "sort", "--size", str(1 << 24), "--size", str(1 << 28), "--save"])
except SystemExit as e:
    run = e.code
print(f"zoo run: exit {run} in {time.perf_counter() - began:.0f} s", flush=True)
sys.exit(1 if int(code) or run else 0)
PY
[ $? = 0 ] || status=1
grep -E "^pytest: |^zoo run: |passed|failed|FAILED|WRONG|Error" "$OUT/gpu-sort-run.txt" | tail -20 | tee -a "$LOG"
cp "results/$SLUG.json" "$OUT/" 2>/dev/null

for tool in memcheck racecheck; do
  echo "== 2. compute-sanitizer $tool" | tee -a "$LOG"
  big=2200001; [ $tool = racecheck ] && big=70001
  BIG=$big timeout 300 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 python3 - > "$OUT/gpu-sort-$tool.txt" 2>&1 <<'PY'
import os

import zoo
from zoo.bench import harness
from zoo.kernels.sort import v01_bitonic_block

fam = zoo.family("sort")
for v in fam:
    sizes = (v01_bitonic_block.BLOCK_KEYS - 5,) if v.number == 1 else (4099, int(os.environ["BIG"]))
    for size in sizes:
        r = harness.check(v, size, seed=3, kind="pairs")
        print(f"{v.name} {size} pairs: {'ok' if r.ok else 'WRONG'} {r.detail}", flush=True)
PY
  code=$?
  grep -E "^v0|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/gpu-sort-$tool.txt" | tee -a "$LOG"
  [ "$code" = 0 ] || { echo "FAILED: $tool exit $code (9: errors found, 124: cut off)" | tee -a "$LOG"; status=1; }
done

echo "== 3. each step against CUB's radix sort and the copy of the fewest bytes" | tee -a "$LOG"
python3 - "$SLUG" <<'PY' 2>&1 | tee -a "$LOG"
import json
import sys

import zoo
from zoo.bench.results import size_key

fam = zoo.family("sort")
measured = json.loads(open(f"results/{sys.argv[1]}.json").read())["families"].get("sort", {})
print(f"{'row':32} {'kind':8} {'keys':>10} {'ms':>9} {'Gkeys/s':>8} {'GB/s':>7} {'x copy':>7} {'% of CUB':>9} correct")
for size in (1 << 24, 1 << 28):
    for kind in fam.kinds:
        entries = measured.get(size_key(size, kind, fam.kinds), {})
        cub, copy = entries.get("cub radix_sort", {}).get("ms"), entries.get("copy_ceiling", {}).get("ms")
        for name in [v.name for v in fam] + ["cub radix_sort", "baseline", "copy_ceiling"]:
            e = entries.get(name)
            if not e or not e.get("ms"):
                continue
            ms = e["ms"]
            share = f"{100 * cub / ms:.1f}%" if cub else "-"
            print(
                f"{name:32} {kind:8} {size:>10} {ms:9.3f} {size / ms / 1e6:8.2f} "
                f"{fam.bytes_moved(size, kind) / ms / 1e6:7.0f} {ms / copy if copy else float('nan'):7.1f} "
                f"{share:>9} {e.get('correct')}"
            )
PY
echo "total $((SECONDS - began)) s" | tee -a "$LOG"
exit $status
