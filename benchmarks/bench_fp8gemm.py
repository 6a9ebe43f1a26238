"""asv suite of the fp8gemm family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Fp8gemm = family_suite("fp8gemm")
