"""asv suite of the launch family: every variant and the baseline at every BENCH_SIZES (host wall time per call)."""

from benchmarks.common import family_suite

Launch = family_suite("launch")
