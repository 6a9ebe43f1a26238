#!/usr/bin/env bash
# Tuning probe of the stencil family on the lent GPU (see docs/DEVELOPING.md, "Python on the lent GPU"; carry .whl): at the headline
# 16384^2 with its 5 x 5 filter, the copy ceiling and cupyx first, then every step as committed, then v04-v06
# rebuilt with other tile shapes (outputs per thread, thread rows per block), each checked against the reference
# and timed by the harness in one process, so the figures compare as ratios. Prints one table; the log goes to
# $OUT/gpu-stencil.txt. About two minutes (the float64 reference of 16384^2 takes about 20 s of it).
#   usage: .ci/gpu-stencil.sh [SIZE]    (default 16384x16384)
set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/gpu-python.sh  # the lent GPU's Python, from the wheels in .whl where they are
OUT=${OUT:-$(mktemp -d)}
export PYTHONUNBUFFERED=1 ZOO_TARGET=gpu NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
SIZE=${1:-16384x16384} python3 - <<'EOF' 2>&1 | tee "$OUT/gpu-stencil.txt"
import os

import zoo
from zoo.bench import harness
from zoo.device import properties
from zoo.bench.results import parse_size

fam = zoo.family("stencil")
size = parse_size(os.environ["SIZE"])
print(f"stencil at {os.environ['SIZE']}, 5 x 5 filter, on {properties()['name']}")
print(f"{'row':44} {'ms':>8} {'GB/s':>8} {'% copy':>7} {'x cupyx':>8} {'regs':>5} {'occ':>5}  ok")
copy = harness.measure_baseline(fam, size, name="copy_ceiling")
base = harness.measure_baseline(fam, size, name="baseline")


def row(name, m):
    res = m.resources or {}
    occ = res.get("occupancy")
    print(
        f"{name:44} {m.ms:8.3f} {m.gbps:8.0f} {100 * copy.ms / m.ms:6.1f}% {base.ms / m.ms:8.2f} "
        f"{res.get('registers', '-')!s:>5} {(f'{100 * occ:.0f}%' if isinstance(occ, float) else '-'):>5}  {m.correct}"
    )


row("copy_ceiling", copy)
row("baseline: cupyx correlate", base)
row("cupyx_correlate1d_twice", harness.measure_baseline(fam, size, name="cupyx_correlate1d_twice"))
for v in fam:
    row(v.name, harness.measure_variant(v, size))


def retile(module, **constants):
    """Set the step's tile constants (and those derived from them), drop its built kernels."""
    for key, value in constants.items():
        setattr(module, key, value)
    module.THREADS = module.BLOCK_X * module.BLOCK_Y
    module.TILE_Y = module.BLOCK_Y * module.OUTPUTS
    if hasattr(module, "SUMS"):
        module.SUMS = module.OUTPUTS * module.COLUMNS
    module.build.cache_clear()


for name in ("v04", "v05", "v06"):
    v = fam[name]
    saved = {k: getattr(v.module, k) for k in ("BLOCK_Y", "OUTPUTS")}
    for block_y, outputs in ((8, 4), (4, 8), (8, 16), (4, 16)):
        if (block_y, outputs) == (saved["BLOCK_Y"], saved["OUTPUTS"]):
            continue
        retile(v.module, BLOCK_Y=block_y, OUTPUTS=outputs)
        try:
            row(f"{v.name} BLOCK_Y={block_y} OUTPUTS={outputs}", harness.measure_variant(v, size))
        except Exception as e:  # a shape that does not compile or launch: say so and go on
            print(f"{v.name} BLOCK_Y={block_y} OUTPUTS={outputs}: {type(e).__name__}: {str(e)[:80]}")
    retile(v.module, **saved)
EOF
exit "${PIPESTATUS[0]}"
