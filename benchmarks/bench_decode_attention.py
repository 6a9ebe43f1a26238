"""asv suite of the decode_attention family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

DecodeAttention = family_suite("decode_attention")
