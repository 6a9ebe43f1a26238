"""Every variant of every family against its float64 reference.

In the simulator at the family's TEST_SIZES (fewer for a kind named in KIND_TEST_SIZES, and not for the steps
KIND_TEST_SKIPS leaves out); on a GPU at
its GPU_TEST_SIZES, every kind.
Each check draws fresh seeded inputs and poisons the output with NaN, so an
unwritten element fails. Demonstrations (wrong on purpose) are left out.
"""

import numpy as np
import pytest

import zoo
from zoo.bench import harness
from zoo.bench.results import size_key
from zoo.errors import OutOfRange, Unsupported


def _cases():
    for fam in zoo.families():
        cases = fam.test_cases() if zoo.SIMULATOR else fam.cases(fam.GPU_TEST_SIZES)
        skips = getattr(fam.module, "KIND_TEST_SKIPS", {}) if zoo.SIMULATOR else {}
        for v in fam:
            if v.demonstration:
                continue
            for i, (size, kind) in enumerate(cases):
                if v.name[:3] in skips.get(kind, ()):
                    continue
                yield pytest.param(v, size, kind, 100 + i, id=f"{fam.name}-{v.name}-{size_key(size, kind, fam.kinds)}")


@pytest.mark.parametrize("variant,size,kind,seed", list(_cases()))
def test_variant_matches_reference(variant, size, kind, seed):
    if variant.unsupported():  # a step this GPU is too old for (its MIN_CC): a call must say so, not launch
        with pytest.raises(Unsupported, match="needs compute capability"):
            variant(*variant.family.inputs(size, seed, kind))
        pytest.skip(variant.unsupported())
    try:
        result = harness.check(variant, size, seed=seed, kind=kind)
    except OutOfRange:
        # A size this variant cannot take must be refused the same way every time.
        with pytest.raises(OutOfRange):
            variant(*variant.family.inputs(size, seed, kind))
        return
    assert result.ok, f"{variant!r} at size {size}: {result.detail}"


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_family_spec_is_testable(fam):
    sizes = fam.TEST_SIZES
    assert any(_irregular(s) for s in sizes), f"{fam.name}: TEST_SIZES needs a size that is no multiple of a tile"
    for kind in fam.kinds:
        a = fam.inputs(sizes[-1], 1, kind)
        b = fam.inputs(sizes[-1], 2, kind)
        assert any((x != y).any() for x, y in zip(a, b, strict=True)), f"make_inputs ignores its seed (kind {kind})"
        assert all(np.unique(x).size > 1 for x in a if x.size > 1), f"inputs must be random, not constant (kind {kind})"


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_fewer_sizes_for_a_kind_are_test_sizes(fam):
    fewer = getattr(fam.module, "KIND_TEST_SIZES", {})
    assert set(fewer) <= set(fam.kinds), f"{fam.name}: KIND_TEST_SIZES names a kind the family does not have"
    for kind, sizes in fewer.items():
        assert set(sizes) <= set(fam.TEST_SIZES) and any(_irregular(s) for s in sizes), (fam.name, kind, sizes)
    assert {k for _, k in fam.test_cases()} == set(fam.kinds)


def _irregular(size):
    dims = size if isinstance(size, tuple) else (size,)
    return any(d % 32 for d in dims)
