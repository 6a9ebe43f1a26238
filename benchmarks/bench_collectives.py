"""asv suite of the collectives family: every variant and the baseline at every BENCH_SIZES.

Host arrays in and out (HOST_INPUTS): each call places every rank's row on its GPU, all-reduces and copies
every rank's sum back, timed on the host's clock (WALL_TIME)."""

from benchmarks.common import family_suite

Collectives = family_suite("collectives")
