"""asv suite of the elementwise family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Elementwise = family_suite("elementwise")
