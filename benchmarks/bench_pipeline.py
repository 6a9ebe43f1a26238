"""asv suite of the pipeline family: every variant and the baseline at every BENCH_SIZES.

Device arrays: the compute stage."""

from benchmarks.common import family_suite

Pipeline = family_suite("pipeline")
