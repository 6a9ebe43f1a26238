# Sourced by the one-call drivers (.ci/gpu-either, .ci/gpu-issue65), in the checkout's root, with BUDGET set (seconds):
# sets Python up once (.ci/gpu-python.sh, from .whl; then moves .whl away, so the scripts they run keep it), saves
# results/<gpu>.json as $OUT/before-<gpu>.json, and defines
#   part SECONDS NAME COMMAND...   COMMAND with its OUT under $OUT/NAME, cut at SECONDS or at the budget's end (not
#                                  started when the budget's end would cut it below PART_MIN_S seconds, default 60, or
#                                  below SECONDS when SECONDS is less); its exit and time go
#                                  into summary, and a failure sets status to 1; a NAME listed in SKIP_PARTS
#                                  (space-separated) is skipped, as when a second call goes on where the first stopped
#   archive_parts                  every part's logs as one archive, $OUT/logs.tgz (the device tool brings back a few
#                                  files only)
# and GPU (its name), SLUG (its results file's), OUT, status and summary.
OUT=${OUT:-$(mktemp -d)}
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
[ -d .whl ] && rm -rf /tmp/whl-installed && mv .whl /tmp/whl-installed  # a warm machine's earlier call left one there
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-170}  # rich tables whole in the logs
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
SLUG=$(python3 -c "import zoo; from zoo.device import slug; print(slug())" 2>/dev/null)
cp "results/$SLUG.json" "$OUT/before-$SLUG.json"
status=0
summary=()
part() {
  local limit=$1 name=$2
  shift 2
  case " ${SKIP_PARTS:-} " in *" $name "*) summary+=("$name: skipped (SKIP_PARTS)"); return;; esac
  local left=$((BUDGET - SECONDS)) least=${PART_MIN_S:-60}
  [ "$limit" -lt "$least" ] && least=$limit  # a short part needs only its own limit
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt "$least" ]; then summary+=("$name: not run ($left s of the budget left)"); return; fi
  mkdir -p "$OUT/$name"
  local began=$SECONDS
  OUT="$OUT/$name" timeout "$limit" "$@" > "$OUT/$name/stdout.txt" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && status=1
  summary+=("$name: exit $rc after $((SECONDS - began)) s (limit $limit s)")
}
archive_parts() {
  (cd "$OUT" && dirs=$(find . -mindepth 1 -maxdepth 1 -type d) && [ -n "$dirs" ] && tar czf logs.tgz $dirs && rm -rf $dirs)
}
