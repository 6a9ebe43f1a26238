"""asv suite of the latency family: every variant and the baseline at every BENCH_SIZES."""

from benchmarks.common import family_suite

Latency = family_suite("latency")
