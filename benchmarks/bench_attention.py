"""asv suite of the attention family: every variant and the baselines at every BENCH_SIZES, full and causal."""

from benchmarks.common import family_suite

Attention = family_suite("attention")
