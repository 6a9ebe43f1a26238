#!/usr/bin/env bash
# On the lent GPU: `zoo profile` (Nsight Compute) of transpose v01-v03, reduce v01-v03 and sgemm v03 v06 v07
# at their headline sizes, then the simulator's sectors per request and bank conflicts of the same steps
# beside ncu's at the same size (`zoo profile --size S --compare S`), each command timed. Logs and the saved profiles go to $OUT.
#   usage: .ci/gpu-profile.sh            (about 3 minutes)
#   FULL_FAMILIES="sgemm" .ci/gpu-profile.sh   also times `zoo profile` of every step of those families
#   FULL_FAMILIES=all .ci/gpu-profile.sh       ... of every family (the saved profiles the pages show; longer)
# Prints a short table last; exits 1 when a command failed or a figure disagrees by more than 10%.
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-170} ZOO_TARGET=gpu
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "GPU: ${gpu:-?}; ncu: $(ncu --version 2>/dev/null | tail -1)"
summary=()
failures=0

# timed NAME COMMAND...: run, log to $OUT/NAME.txt, record its time and status
timed() {
  local name=$1 start status
  shift
  start=$(date +%s.%N)
  "$@" > "$OUT/$name.txt" 2>&1
  status=$?
  local took
  took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f}')" "$start" "$(date +%s.%N)")
  if [ $status -ne 0 ]; then
    failures=$((failures + 1))
    summary+=("FAILED ($status): $* in ${took} s: $(grep -v '^\s*$' "$OUT/$name.txt" | tail -1)")
  else
    summary+=("$* in ${took} s")
  fi
}

# family, steps, the simulator's size for the comparison (whole tiles and blocks: no edge effects)
plan=(
  "transpose|v01 v02 v03|64x64"
  "reduce|v01 v02 v03|4096"
  "sgemm|v03|64x64x32"
  "sgemm|v06 v07|128x128x16"
)
for entry in "${plan[@]}"; do
  IFS='|' read -r fam steps sim_size <<< "$entry"
  tag="$fam-${steps// /-}"
  timed "profile-$tag" python3 -m zoo profile "$fam" $steps  # at the headline size: the pages show it
  # compared at the simulator's size, profiled there too: at 4096^3 ncu also counts what the size changes (sgemm
  # v03-v07's shared stores read 0.12-0.27 wavefronts a request more on an H100, and equal at 128x128x16)
  timed "profile-$tag-small" python3 -m zoo profile "$fam" $steps --size "$sim_size"
  timed "compare-$tag" python3 -m zoo profile "$fam" $steps --size "$sim_size" --compare "$sim_size"
done
full=${FULL_FAMILIES:-}
if [ "$full" = all ]; then full=$(python3 -c "import zoo; print(' '.join(f.name for f in zoo.families()))"); fi
for fam in $full; do
  timed "profile-$fam-all" python3 -m zoo profile "$fam"
done
cp results/profiles/*.json "$OUT/" 2>/dev/null

echo
for entry in "${plan[@]}"; do
  IFS='|' read -r fam steps sim_size <<< "$entry"
  tag="$fam-${steps// /-}"
  sed -n '/against Nsight Compute/,$p' "$OUT/compare-$tag.txt"
  grep -E '^- ' "$OUT/profile-$tag.txt"
done
echo
printf '%s\n' "${summary[@]}"
disagree=$(cat "$OUT"/compare-*.txt | grep -c ' NO ')
echo "figures outside 10% of ncu: $disagree"
[ $failures -eq 0 ] && [ "$disagree" -eq 0 ]
