"""asv suite of the vector_add family: every variant and the baseline at every BENCH_SIZES."""

from benchmarks.common import family_suite

VectorAdd = family_suite("vector_add")
