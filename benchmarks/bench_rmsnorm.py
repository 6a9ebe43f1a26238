"""asv suite of the rmsnorm family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Rmsnorm = family_suite("rmsnorm")
