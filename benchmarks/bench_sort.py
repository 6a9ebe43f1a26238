"""asv suite of the sort family: every variant and the baseline at every BENCH_SIZES."""

from benchmarks.common import family_suite

Sort = family_suite("sort")
