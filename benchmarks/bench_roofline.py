"""asv suite of the roofline family: every variant and the baseline at every BENCH_SIZES (k = K_DEFAULT)."""

from benchmarks.common import family_suite

Roofline = family_suite("roofline")
