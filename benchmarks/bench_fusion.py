"""asv suite of the fusion family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Fusion = family_suite("fusion")
