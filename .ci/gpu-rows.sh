#!/usr/bin/env bash
# The seeds' comparisons as rows (issue 63) on the lent GPU: the same computation in Triton (vector_add, softmax,
# sgemm fp32 and TF32, hgemm fp16 and bf16, attention full and causal), PyTorch eager and torch.compile (fusion,
# softmax, elementwise; launch's loop with mode="reduce-overhead") and CUDA C through CuPy's RawModule (vector_add,
# roofline), each beside its family's strongest row.
#   1. check: every such row once on fresh inputs at two small sizes of its family (the first GPU test size and the
#      largest that moves at most 8 MB, every kind; a torch row at the second only), checked like a step
#      (harness.check_library_row): ok, WRONG, or why it is unavailable;
#   2. compute-sanitizer memcheck of the CUDA C and Triton rows (Triton's first tiling) at small irregular sizes
#      (racecheck is left out: the CUDA C kernels use no shared memory, and Triton's is the compiler's, filled by
#      TMA and cp.async, which racecheck does not model);
#   3. time: `zoo run --best-step --save` of those families at their headline size only (the rows are checked again
#      there, on the headline inputs, before they are timed), each family's best step (results/<gpu>.json) beside;
#   4. the table family | size | row | us | % of the strongest | lines | correct.
# Writes logs and the results file under $OUT. About 5 minutes on an H100 (torch.compile and Triton's autotuner
# compile on first use: most of it); `python -m zoo report` afterwards puts the rows on the pages.
# Arguments: family names (default: the nine above).
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu-rows.txt"
python3 -c "import torch, triton, cupy; print(f'torch {torch.__version__}, triton {triton.__version__}, cupy {cupy.__version__}')" \
  2>&1 | tee -a "$OUT/gpu-rows.txt"
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
cp "results/$SLUG.json" "$OUT/before-$SLUG.json" 2>/dev/null || echo "{}" > "$OUT/before-$SLUG.json"
status=0
FAMILIES=("$@")
[ ${#FAMILIES[@]} -gt 0 ] || FAMILIES=(vector_add roofline launch elementwise fusion sgemm hgemm softmax attention)

# The rows written in another tool's idiom, and the families that have them (one definition for every phase).
COMMON=$(mktemp -d)
cat > "$COMMON/gpu_rows_common.py" <<'PY'
import zoo

from zoo.bench.libraries import tool_rows  # noqa: F401 (the rows in another tool's idiom: every phase's)


def families(names):
    return [zoo.family(name) for name in names]


def small_sizes(fam, row):
    """The family's first GPU test size and its largest that moves at most 8 MB; the largest alone for a torch row
    (PyTorch's own kernels take every shape; each shape is a compilation of its own, seconds)."""
    small = [s for s in fam.GPU_TEST_SIZES if max(fam.bytes_moved(s, k) for k in fam.kinds) <= 8 << 20]
    sizes = list(dict.fromkeys((fam.GPU_TEST_SIZES[0], small[-1] if small else fam.GPU_TEST_SIZES[0])))
    return sizes[-1:] if row.startswith("torch") else sizes


try:
    from zoo.bench import harness  # the host side in layers
except ImportError:
    from zoo import harness
PY
export PYTHONPATH=$COMMON:${PYTHONPATH:-$PWD}

echo "== 1. every row at small sizes" | tee -a "$OUT/gpu-rows.txt"
python3 - "${FAMILIES[@]}" <<'PY' 2>&1 | tee -a "$OUT/gpu-rows.txt"
import sys
import time

from gpu_rows_common import families, harness, small_sizes, tool_rows

from zoo.errors import OutOfRange, Unavailable, Unsupported

failed = False
for fam in families(sys.argv[1:]):
    for row in tool_rows(fam):
        for size, kind in fam.cases(small_sizes(fam, row)):
            case = f"{fam.name:12s} {row:30s} {size!s:18s} {kind or '':9s}"
            began = time.perf_counter()
            try:
                r = harness.check_library_row(fam, row, size, seed=7, kind=kind)
            except (Unavailable, Unsupported, OutOfRange) as e:
                print(f"{case} unavailable: {e}")
                continue
            except Exception as e:  # one broken row must not hide the others
                failed = True
                print(f"{case} BROKE: {type(e).__name__}: {e}")
                continue
            failed |= r.ok is not True
            verdict = "ok" if r.ok else "WRONG" if r.ok is False else "not checked"
            print(f"{case} {verdict} ({time.perf_counter() - began:.1f} s): {r.detail}")
sys.exit(1 if failed else 0)
PY
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "== 2. compute-sanitizer memcheck, small irregular sizes" | tee -a "$OUT/gpu-rows.txt"
timeout 240 compute-sanitizer --tool memcheck --report-api-errors no --leak-check no --error-exitcode 9 python3 - <<'PY' \
  > "$OUT/gpu-rows-memcheck.txt" 2>&1
import zoo
from gpu_rows_common import harness

from zoo.bench import libraries
from zoo.errors import OutOfRange, Unavailable

try:  # the first tiling only: the autotuner would time every one, slowly under memcheck (same bounds checks)
    triton_rows = libraries.triton_rows()
    for tuned in (triton_rows._matmul_32bit, triton_rows._matmul_16bit, triton_rows._attention_kernel):
        tuned.configs = tuned.configs[:1]
except Unavailable as e:
    print(f"triton: {e}")

CASES = [  # (family, row, size, kind): tails, partial tiles, a partial block of keys
    ("vector_add", "cuda_c", 1023, None),
    ("vector_add", "triton", 1023, None),
    ("roofline", "cuda_c", 4099, None),
    ("softmax", "triton", (33, 1000), None),
    ("sgemm", "triton", (70, 129, 31), None),
    ("sgemm", "triton tf32", (70, 129, 31), None),
    ("hgemm", "triton", (17, 33, 65), "float16"),
    ("hgemm", "triton", (17, 33, 65), "bfloat16"),
    ("attention", "triton", (3, 31, 128), "full"),
    ("attention", "triton", (3, 31, 128), "causal"),
]
for name, row, size, kind in CASES:
    try:
        r = harness.check_library_row(zoo.family(name), row, size, seed=3, kind=kind)
        print(f"{name} {row} {size} {kind or ''}: {'ok' if r.ok else 'WRONG'} {r.detail}")
    except (Unavailable, OutOfRange) as e:
        print(f"{name} {row} {size}: unavailable: {e}")
PY
code=$?
grep -E "^(vector_add|roofline|softmax|sgemm|hgemm|attention) |ERROR SUMMARY" "$OUT/gpu-rows-memcheck.txt" | tee -a "$OUT/gpu-rows.txt"
[ "$code" = 0 ] || { echo "memcheck exit $code (9: errors found, 124: cut off)" | tee -a "$OUT/gpu-rows.txt"; status=1; }

echo "== 3. zoo run at each family's headline size, its best step beside the rows" | tee -a "$OUT/gpu-rows.txt"
python3 -m zoo run "${FAMILIES[@]}" --best-step --save > "$OUT/gpu-rows-runs.txt" 2>&1 \
  || { echo "FAILED: the timing run (see gpu-rows-runs.txt)" | tee -a "$OUT/gpu-rows.txt"; status=1; }
grep -E "no .* row:|FAILED|WRONG|Error" "$OUT/gpu-rows-runs.txt" | tee -a "$OUT/gpu-rows.txt"
cp "results/$SLUG.json" "$OUT/"

echo "== 4. the rows beside the strongest" | tee -a "$OUT/gpu-rows.txt"
python3 - "$SLUG" "${FAMILIES[@]}" <<'PY' 2>&1 | tee -a "$OUT/gpu-rows.txt"
import json
import sys

from gpu_rows_common import families, tool_rows

from zoo.bench import code_lines, strongest
from zoo.tools import report

slug, names = sys.argv[1], sys.argv[2:]
measured = json.loads(open(f"results/{slug}.json").read())["families"]
print(f"{'family':11} {'size':16} {'row':30} {'us':>10} {'% of strongest':>15} {'lines':>6} correct")
for fam in families(names):
    by_size = measured.get(fam.name, {})
    if not by_size:
        continue
    for key in report.headline_keys(fam, by_size):
        entries = by_size[key]
        best = strongest.best_step(fam, entries)
        shown = [fam.strongest] + ([best[0]] if best else []) + tool_rows(fam)
        for name in shown:
            e = entries.get(name)
            if not e:
                print(f"{fam.name:11} {key:16} {name:30} {'-':>10}  not measured")
                continue
            share = strongest.of_strongest(fam, entries, name)
            lines = code_lines.lines(fam, name)
            label = f"{name} (strongest)" if name == fam.strongest else name
            print(
                f"{fam.name:11} {key:16} {label:30} {1e3 * e['ms']:10.1f} "
                f"{'-' if share is None else f'{100 * share:.1f}%':>15} {lines or '-':>6} {e.get('correct')}"
            )
PY
exit $status
