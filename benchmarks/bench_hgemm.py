"""asv suite of the hgemm family: every tensor-core step, cuBLAS GemmEx and cupy.matmul (fp16 out)."""

from benchmarks.common import family_suite

Hgemm = family_suite("hgemm")
