"""asv suite of the int4 family: every variant, the baseline and the comparison rows at every BENCH_SIZES."""

from benchmarks.common import family_suite

Int4 = family_suite("int4")
