"""asv suite of the divergence family: every variant and the baseline at every BENCH_SIZES."""

from benchmarks.common import family_suite

Divergence = family_suite("divergence")
