"""asv suite of the transpose family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Transpose = family_suite("transpose")
