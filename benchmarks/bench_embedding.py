"""asv suite of the embedding family: every variant and the baselines at every BENCH_SIZES."""

from benchmarks.common import family_suite

Embedding = family_suite("embedding")
