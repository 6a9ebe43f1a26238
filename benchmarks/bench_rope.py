"""asv suite of the rope family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Rope = family_suite("rope")
