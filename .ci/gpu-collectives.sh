#!/usr/bin/env bash
# The collectives family on whatever GPUs the machine has, 1 or more (see docs/DEVELOPING.md, "Python on the lent GPU"): the
# family's tests on the GPU, `zoo check` and `zoo run`, the two sweeps (bus bandwidth against NCCL from 1 MB
# to 1 GB a rank; the toy training step's overlap), and on a one-GPU machine the same sweeps again with two
# ranks sharing the GPU (the multi-rank paths run for real, copies on the GPU's own memory); then the capstone's
# decode split over the ranks (`zoo tensor-parallel`: 1, 2, 4, 8 ranks up to the GPUs, ring and NCCL; on one GPU
# two ranks share it). Logs under $OUT; a short table last. About 2.5 minutes on one H100, without the split.
#   usage: .ci/gpu-collectives.sh   env: RUN_ARGS (e.g. --save); SWEEP_OUT=results writes the one-rank-a-GPU
#                                   sweeps' CSV and PNG to results/sweeps and docs/plots (default: $OUT/sweeps)
# Exits 1 when a test, a check or a sweep failed; the summary marks each failure with FAILED.
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
# NVLink multicast stays off, in NCCL as everywhere on these machines
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-150} ZOO_TARGET=gpu NCCL_NVLS_ENABLE=0
summary=()
failures=0
record() {  # record LINE [STATUS]: a summary line; STATUS non-zero marks it FAILED
  if [ "${2:-0}" -ne 0 ]; then summary+=("FAILED: $1"); failures=$((failures + 1)); else summary+=("$1"); fi
}
sweep_args() {  # where a sweep writes its CSV and PNG; the shared-GPU runs ($1 a suffix) never into results/
  if [ "${SWEEP_OUT:-}" = results ] && [ -z "$1" ]; then echo ""; else echo "--out $OUT/sweeps$1"; fi
}

gpus=$(python3 -c "import zoo; from numba import cuda; print(len(cuda.gpus))" 2> "$OUT/gpus.txt" | tail -1)
record "GPUs: ${gpus:-none} ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs))"
nvidia-smi topo -m > "$OUT/topology.txt" 2>&1 || true
python3 -c "from zoo.kernels.collectives import library; print(library.nccl_status()[1])" > "$OUT/nccl.txt" 2>&1
record "NCCL through cupy.cuda.nccl: $(tail -1 "$OUT/nccl.txt")"

t0=$SECONDS
python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_collectives.py tests/kernels/test_kernels.py tests/kernels/test_validation.py \
  tests/bench/test_cpu.py -k collectives 2>&1 | tee "$OUT/pytest.txt" | tail -3
record "pytest (family tests, GPU sizes, ranks 1-4): $(tail -1 "$OUT/pytest.txt") [$((SECONDS - t0)) s]" "${PIPESTATUS[0]}"

t0=$SECONDS
python3 -m zoo check collectives > "$OUT/check.txt" 2>&1
status=$?
record "zoo check collectives (GPU_TEST_SIZES): exit $status, $(grep -c FAIL "$OUT/check.txt") FAIL [$((SECONDS - t0)) s]" $status
t0=$SECONDS
python3 -m zoo run collectives ${RUN_ARGS:-} > "$OUT/run.txt" 2>&1
status=$?
record "zoo run collectives ${RUN_ARGS:-}: exit $status [$((SECONDS - t0)) s]" $status

# the sweeps raise (exit 1) when a step's result is wrong
for ranks in "" $([ "${gpus:-0}" -eq 1 ] && echo 2); do
  suffix=${ranks:+-ranks$ranks}
  t0=$SECONDS
  python3 -m zoo allreduce ${ranks:+--ranks $ranks --max-mb 64} $(sweep_args "$suffix") > "$OUT/allreduce$suffix.txt" 2>&1
  status=$?
  record "zoo allreduce ${ranks:+--ranks $ranks --max-mb 64}: exit $status [$((SECONDS - t0)) s]" $status
  t0=$SECONDS
  python3 -m zoo dataparallel ${ranks:+--ranks $ranks} $(sweep_args "$suffix") > "$OUT/dataparallel$suffix.txt" 2>&1
  status=$?
  record "zoo dataparallel ${ranks:+--ranks $ranks}: exit $status [$((SECONDS - t0)) s]" $status
done

t0=$SECONDS
python3 -m zoo tensor-parallel $(sweep_args "") > "$OUT/tensor-parallel.txt" 2>&1
status=$?
record "zoo tensor-parallel: exit $status [$((SECONDS - t0)) s]" $status

echo
echo "== zoo run collectives (host arrays in and out, wall clock; logs: $OUT/run.txt) =="
grep -E "│|┃|size" "$OUT/run.txt" | cut -c1-160
for f in "$OUT"/allreduce*.txt "$OUT"/dataparallel*.txt "$OUT"/tensor-parallel.txt; do
  echo
  echo "== $(basename "$f" .txt) =="
  grep -E "rank\(s\) on|│|┃|^- |Error|error" "$f" | cut -c1-160
done
echo
echo "== summary (logs in $OUT) =="
printf '%s\n' "${summary[@]}"
exit $((failures > 0))
