"""asv suite of the gemv family: every variant, the baseline and the comparison rows, every size and weight format."""

from benchmarks.common import family_suite

Gemv = family_suite("gemv")
