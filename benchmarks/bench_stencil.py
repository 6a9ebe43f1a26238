"""asv suite of the stencil family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Stencil = family_suite("stencil")
