"""asv suite of the scan family: every variant and the baseline at every BENCH_SIZES."""

from benchmarks.common import family_suite

Scan = family_suite("scan")
