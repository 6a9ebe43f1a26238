"""asv suite of the argmax family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Argmax = family_suite("argmax")
