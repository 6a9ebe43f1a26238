"""asv suite of the reduce family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Reduce = family_suite("reduce")
