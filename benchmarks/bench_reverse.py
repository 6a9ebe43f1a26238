"""asv suite of the reverse family: every variant and the baseline at every BENCH_SIZES."""

from benchmarks.common import family_suite

Reverse = family_suite("reverse")
