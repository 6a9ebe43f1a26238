#!/usr/bin/env bash
# Every step of every family on numba-cuda-mlir beside numba-cuda, on the lent GPU (issue 68): compiles? correct at
# the family's GPU test sizes? device time against numba-cuda's, host time of a call against numba-cuda's own launch
# and the zoo's lean launch; for a failure, the exception and the intrinsic or API it names
# (python -m zoo.tools.backends). Writes results/mlir-<gpu>.json and copies it, the table and the workers' logs
# (one tarball) to $OUT. About 3 minutes on an H100 once installed (no new worker starts after MLIR_DEADLINE=110 s, all
# stop by 170 s; what the clock leaves unrun is marked so in the table).
#
# numba-cuda-mlir travels in four pieces (.ci/mlir-wheel-pieces: each under 12 MB) over calls on one warm machine, e.g.
# carry=[".mlir-pieces/<piece 1>", "<2>", "<3>"] (~61 MB with the tree), then carry=[".whl", ".mlir-pieces/<piece 4>"]
# (~64.4 MB of the 64 MiB limit): a call that still misses a piece exits before .whl is needed. Each call copies the
# pieces it carries in .mlir-pieces/ to /tmp/mlir-pieces (kept on a warm machine), and until all are there says
# which are missing and exits 0, so that the call can run other work. Once all are there it installs them into
# /tmp/mlir-site (every file checked against the wheel's RECORD) and measures.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p /tmp/mlir-pieces
cp -n .mlir-pieces/numba_cuda_mlir-*.tar.xz.*-of-* /tmp/mlir-pieces/ 2>/dev/null
if [ ! -f /tmp/mlir-site/.installed ]; then
  first=$(ls /tmp/mlir-pieces/ 2>/dev/null | head -1)
  if [ -z "$first" ]; then
    echo "gpu-mlir: no piece of numba-cuda-mlir has arrived: carry .mlir-pieces/<piece> (.ci/mlir-wheel-pieces)"
    exit 0
  fi
  count=${first##*-of-}
  stem=${first%.*-of-*}
  missing=""
  for i in $(seq 1 "$count"); do
    [ -f "/tmp/mlir-pieces/$stem.$i-of-$count" ] || missing="$missing $i"
  done
  if [ -n "$missing" ]; then
    echo "gpu-mlir: numba-cuda-mlir pieces here: $(ls /tmp/mlir-pieces | tr '\n' ' '); still to carry:$missing of $count"
    exit 0
  fi
  rm -rf /tmp/mlir-site && mkdir -p /tmp/mlir-site
  for i in $(seq 1 "$count"); do cat "/tmp/mlir-pieces/$stem.$i-of-$count"; done | xz -d | tar -x -C /tmp/mlir-site || exit 1
  python3 - <<'PY' || exit 1
import base64, csv, hashlib, pathlib
site = pathlib.Path("/tmp/mlir-site")
record = next(site.glob("numba_cuda_mlir-*.dist-info/RECORD"))
bad = 0
for name, digest, _ in csv.reader(record.read_text().splitlines()):
    if digest:
        algo, want = digest.split("=", 1)
        got = base64.urlsafe_b64encode(hashlib.new(algo, (site / name).read_bytes()).digest()).rstrip(b"=").decode()
        bad += got != want
print(f"gpu-mlir: numba-cuda-mlir unpacked into {site}; files differing from the wheel's RECORD: {bad}")
raise SystemExit(bad > 0)
PY
  touch /tmp/mlir-site/.installed
fi
if ls .whl/*.whl >/dev/null 2>&1; then  # as .ci/gpu-session sets Python up (docs/DEVELOPING.md, "Python on the lent GPU")
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:/tmp/mlir-site PATH=/tmp/site/bin:$PATH ZOO_TARGET=gpu PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu-mlir.txt"
python3 -c "import numba_cuda_mlir, numba, numba_cuda, cuda.bindings; print('numba-cuda-mlir', numba_cuda_mlir.__version__, \
'numba', numba.__version__, 'cuda-bindings', cuda.bindings.__version__)" 2>&1 | tee -a "$OUT/gpu-mlir.txt"
# one kernel first, alone: does numba-cuda-mlir import, compile and launch here at all (its error in a few lines)
ZOO_BACKEND=numba-cuda-mlir timeout 60 python3 -m zoo check vector_add --step 1 2>&1 | tail -5 | tee -a "$OUT/gpu-mlir.txt"
began=$(date +%s)
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())")
timeout 175 python3 -m zoo.tools.backends run --deadline "${MLIR_DEADLINE:-110}" --scratch /tmp/mlir-workers \
  > "$OUT/gpu-mlir-table.md" 2> "$OUT/gpu-mlir-stderr.txt"
status=$?
echo "gpu-mlir: measured in $(($(date +%s) - began)) s (exit $status)" | tee -a "$OUT/gpu-mlir.txt"
tar -czf "$OUT/gpu-mlir-workers.tgz" -C /tmp mlir-workers 2>/dev/null
cp "results/mlir-$SLUG.json" "$OUT/" 2>/dev/null
head -12 "$OUT/gpu-mlir-table.md" | tee -a "$OUT/gpu-mlir.txt"
exit $status
