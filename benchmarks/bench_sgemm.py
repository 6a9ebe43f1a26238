"""asv suite of the sgemm family: every variant and cuBLAS at every BENCH_SIZES."""

from benchmarks.common import family_suite

Sgemm = family_suite("sgemm")
