"""asv suite of the attention_backward family: every variant and the baselines at every BENCH_SIZES, every kind."""

from benchmarks.common import family_suite

AttentionBackward = family_suite("attention_backward")
