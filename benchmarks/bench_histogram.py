"""asv suite of the histogram family: every variant and the baseline at every BENCH_SIZES and input kind."""

from benchmarks.common import family_suite

Histogram = family_suite("histogram")
