#!/usr/bin/env bash
# `zoo exercise check` on the GPU (see docs/DEVELOPING.md, "Python on the lent GPU"): for a few exercises, the zoo's own step
# written as a learner's file must pass (the simulator's checks, then the GPU test sizes and the grade
# against the zoo's step timed in the same run) and the starter must fail; then the tour notebook, on the
# GPU, where nbclient is installed. Logs under $OUT; a short table last. About 3 minutes on one H100.
#   usage: .ci/gpu-exercise.sh [EXERCISE...]   (default: reverse/v03 sgemm/v03 reduce/v08 transpose/v03)
# Exits 1 when a step's file did not pass, a starter did not fail, or the notebook failed.
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT/files"
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-150}
summary=()
failures=0
record() {  # record LINE [STATUS]: a summary line; STATUS non-zero marks it FAILED
  if [ "${2:-0}" -ne 0 ]; then summary+=("FAILED: $1"); failures=$((failures + 1)); else summary+=("$1"); fi
}
for key in ${*:-reverse/v03 sgemm/v03 reduce/v08 transpose/v03}; do
  name=${key/\//_}
  # the zoo's step, as a learner's file (the EXERCISE line names the exercise)
  python3 - "$key" "$OUT/files/$name.py" <<'PY'
import sys
from zoo import exercise
ex = exercise.by_key(sys.argv[1])
open(sys.argv[2], "w").write(ex.step.source + f'\nEXERCISE = "{ex.key}"\n')
PY
  python3 -m zoo exercise check "$OUT/files/$name.py" > "$OUT/check-$name.txt" 2>&1
  status=$?
  grade=$(grep -E "yours .* in the same run" "$OUT/check-$name.txt" | head -1 | sed 's/^ *//')
  record "$key, the zoo's step: $(grep -E '^(PASS|FAIL)' "$OUT/check-$name.txt" | head -1 | cut -c1-60); $grade" $status
  [ -n "$grade" ] || record "$key: no grade line on the GPU" 1
  python3 -m zoo exercise start "${key%/*}" "${key#*/}" "$OUT/files/starters" --force > /dev/null 2>&1
  starter=$(ls "$OUT/files/starters/${key%/*}_${key#*/}"_*.py)
  python3 -m zoo exercise check "$starter" > "$OUT/starter-$name.txt" 2>&1
  status=$?
  record "$key, the starter: exit $status (must be 1): $(grep -E '^FAIL' "$OUT/starter-$name.txt" | cut -c1-80)" \
    $([ $status -eq 1 ] && echo 0 || echo 1)
done
if python3 -c "import nbclient, ipykernel" 2> /dev/null; then
  (mkdir -p "$OUT/notebook" && python3 - "$OUT/notebook" <<'PY'
import sys
import nbclient, nbformat
nb = nbformat.read("notebooks/zoo-tour.ipynb", as_version=4)
nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": sys.argv[1]}}).execute()
nbformat.write(nb, f"{sys.argv[1]}/zoo-tour.executed.ipynb")
PY
  ) > "$OUT/notebook.txt" 2>&1
  status=$?  # the notebook's, before the $(...) below sets $?
  record "notebook on the GPU: $(tail -1 "$OUT/notebook.txt" | cut -c1-80)" $status
else
  record "notebook: skipped (no nbclient or ipykernel here)"
fi
echo
echo "== zoo exercise on the GPU ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), logs in $OUT =="
printf '%s\n' "${summary[@]}"
[ "$failures" -eq 0 ]
