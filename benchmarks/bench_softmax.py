"""asv suite of the softmax family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Softmax = family_suite("softmax")
