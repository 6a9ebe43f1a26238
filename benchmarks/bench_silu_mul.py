"""asv suite of the silu_mul family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

SiluMul = family_suite("silu_mul")
