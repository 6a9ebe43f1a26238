"""SGEMM beyond the generic checks: the BLAS form, the padding path, the tuning candidates."""
import numpy as np
import pytest

import zoo
from zoo import harness
from zoo.kernels.sgemm import padding, tune
from zoo.kernels.sgemm.v09_double_buffered import DEFAULT, build, launch_with

SGEMM = zoo.family("sgemm")
IRREGULAR = (33, 17, 65)


def operands(size, seed):
    A, B = SGEMM.make_inputs(size, seed)
    m, n = A.shape[0], B.shape[1]
    C = np.random.default_rng(seed + 1).standard_normal((m, n), dtype=np.float32)
    return A, B, C


@pytest.mark.parametrize("variant", SGEMM.variants, ids=lambda v: v.name)
def test_alpha_beta_and_c(variant):
    A, B, C = operands(IRREGULAR, seed=7)
    out = np.full(C.shape, np.nan, np.float32)
    got = variant(A, B, C, out=out, alpha=-1.5, beta=0.25)
    ok, err, detail = harness.compare(got, SGEMM.reference(A, B, C, alpha=-1.5, beta=0.25), SGEMM.TOLERANCE)
    assert ok, detail
    assert np.array_equal(C, operands(IRREGULAR, seed=7)[2]), "C is an input: it must not change"


def test_c_given_with_beta_zero_is_ignored():
    A, B, C = operands(IRREGULAR, seed=3)
    C[0, 0] = np.nan  # beta == 0: C must not even be read
    got = SGEMM["v07"](A, B, C, alpha=2.0)
    assert np.isfinite(got).all()
    assert harness.compare(got, SGEMM.reference(A, B, alpha=2.0), SGEMM.TOLERANCE)[0]


@pytest.mark.parametrize("bad,error,message", [
    (lambda A, B, C: (A, B[:-1]), ValueError, "A's columns must equal B's rows"),
    (lambda A, B, C: (A, B, C[:-1]), ValueError, "C must be"),
    (lambda A, B, C: (A, B.T), ValueError, "not C-contiguous"),
    (lambda A, B, C: (A.astype(np.float16), B), TypeError, "must be float32"),
    (lambda A, B, C: (A[:0], B[:, :0]), ValueError, "empty"),
    (lambda A, B, C: (A.ravel(), B), ValueError, "2 dimension"),
])
def test_bad_operands_are_refused(bad, error, message):
    A, B, C = operands(IRREGULAR, seed=0)
    with pytest.raises(error, match=message):
        SGEMM["v01"](*bad(A, B, C))


def test_beta_without_c_is_refused():
    A, B, _ = operands(IRREGULAR, seed=0)
    with pytest.raises(ValueError, match="beta != 0 needs C"):
        SGEMM["v06"](A, B, beta=1.0)


def test_uint32_indexing_limit_is_enforced_before_launch():
    from zoo.errors import OutOfRange

    v09 = SGEMM["v09"]
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (70_000, 70_000), (0, 0))
    with pytest.raises(OutOfRange, match="2\\^32"):
        v09.module.validate(huge, huge)


def test_whole_tiles_skip_the_padding():
    padding.pad_kernel.last_launch = padding.crop_kernel.last_launch = None
    A, B, _ = operands((128, 128, 16), seed=1)
    assert harness.compare(SGEMM["v06"](A, B), SGEMM.reference(A, B), SGEMM.TOLERANCE)[0]
    assert padding.pad_kernel.last_launch is None and padding.crop_kernel.last_launch is None
    A, B, _ = operands((127, 128, 16), seed=1)
    assert harness.compare(SGEMM["v06"](A, B), SGEMM.reference(A, B), SGEMM.TOLERANCE)[0]
    assert padding.pad_kernel.last_launch is not None and padding.crop_kernel.last_launch is not None


def test_tuning_candidates_include_v09s_shape():
    candidates = tune.candidates()
    assert DEFAULT in candidates and len(candidates) == len(set(candidates))
    assert all(tune.valid(t) for t in candidates)
    assert not tune.valid(DEFAULT._replace(WN_ITER=3))


@pytest.mark.parametrize("tiles", tune.candidates(), ids=lambda t: "-".join(map(str, t)))
def test_every_tuning_candidate_is_correct(tiles):
    """v10 may pick any of them on some GPU: each must compute the right product."""
    from numba import cuda

    A, B, C = operands(IRREGULAR, seed=11)
    out = cuda.to_device(np.full(C.shape, np.nan, np.float32))
    launch_with(build(tiles), tiles, cuda.to_device(A), cuda.to_device(B), cuda.to_device(C), out, 0.5, -2.0)
    ref = SGEMM.reference(A, B, C, alpha=0.5, beta=-2.0)
    ok, err, detail = harness.compare(out.copy_to_host(), ref, SGEMM.TOLERANCE)
    assert ok, detail


def test_launch_on_device_arrays_without_the_optional_c():
    """What the timing harness and asv do: launch prepared device inputs, C left out."""
    from numba import cuda

    A, B, _ = operands(IRREGULAR, seed=5)
    out = cuda.to_device(np.full((A.shape[0], B.shape[1]), np.nan, np.float32))
    SGEMM["v06"].launch((cuda.to_device(A), cuda.to_device(B)), out)
    assert harness.compare(out.copy_to_host(), SGEMM.reference(A, B), SGEMM.TOLERANCE)[0]
