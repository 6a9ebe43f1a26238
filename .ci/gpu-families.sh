#!/usr/bin/env bash
# Re-time the families whose steps the one-idea folds changed, on a GPU, and print each step's figure beside the
# one saved before (results/<gpu>.json as committed: the folds renamed its rows, no figure changed):
#   sgemm    v14 (v12's kernel unrolled, on v13's plan: the old v15) and v15 (TF32, the old v16); the old v14 is
#            folded; at 4096 (headline), 4097 and 256x4096x4096 (where the split last wave held the best figures)
#   hgemm    v05 (warp tile 64 x 64) folded into a comment; v06..v16 renumbered v05..v15; at 4096 (headline)
#   softmax  v06 renamed v06_no_views_per_call; at 4096x8192 (headline) and 262144x31 (where its host time shows)
# Each kernel's PTX is unchanged (.ci/ptx-snapshot), so every figure should be within noise of the saved one.
# Saves into results/<gpu>.json and copies it, the table and the runs' log to $OUT. About 4 minutes (under 6) on
# an H100 or H200; `python -m zoo report` afterwards regenerates the pages from the new rows.
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu-families.txt"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
cp "results/$SLUG.json" "$OUT/before-$SLUG.json" 2>/dev/null || echo "{}" > "$OUT/before-$SLUG.json"
status=0
run() { python3 -m zoo run "$@" --save >> "$OUT/gpu-families-runs.txt" 2>&1 || { echo "FAILED: zoo run $*" | tee -a "$OUT/gpu-families.txt"; status=1; }; }
run sgemm --step v12 --step v13 --step v14 --step v15  # the steps the fold renumbered, and the two before
run sgemm --size 4097 --size 256x4096x4096 --step v13 --step v14
run hgemm
run softmax --size 4096x8192 --size 262144x31
cp "results/$SLUG.json" "$OUT/"
python3 - "$OUT/before-$SLUG.json" "results/$SLUG.json" <<'PY' 2>&1 | tee -a "$OUT/gpu-families.txt"
import json
import sys

before, after = (json.load(open(p)).get("families", {}) for p in sys.argv[1:3])
CASES = {"sgemm": ("4096", "4097", "256x4096x4096"), "hgemm": ("4096",), "softmax": ("4096x8192", "262144x31")}
print(f"{'family':8} {'size':14} {'step':32} {'before us':>10} {'after us':>10} {'after/before':>12} {'% of baseline':>13}")
for fam, sizes in CASES.items():
    for size in sizes:
        old, new = before.get(fam, {}).get(size, {}), after.get(fam, {}).get(size, {})
        base = new.get("baseline", {}).get("ms")
        for name in sorted(n for n in new if n.startswith("v")):
            a, b = new[name].get("ms"), old.get(name, {}).get("ms")
            if a is None or new[name].get("commit") == old.get(name, {}).get("commit"):
                continue  # not timed in this run (an old row of a folded step)
            ratio = f"{a / b:.3f}" if b else "-"
            share = f"{100 * base / a:.1f}%" if base else "-"
            print(f"{fam:8} {size:14} {name:32} {1e3 * b if b else float('nan'):10.1f} {1e3 * a:10.1f} {ratio:>12} {share:>13}")
PY
exit $status
