"""Each family's strongest row (its spec's STRONGEST): declared by every family, checked like a step, shown in every
table; a row whose library this machine lacks says so instead of raising an import error."""

import ast
import importlib
import sys
import types

import numpy as np
import pytest
from tmpfamily import SPEC, good, load

import zoo
from zoo.bench import harness, libraries, strongest
from zoo.errors import Unavailable
from zoo.registry import RegistryError
from zoo.tools import report

# A throwaway family with rows written for NumPy, so that the simulator can run them as the harness runs a GPU's:
# a library row that computes the result, one that gets it wrong, and copies of the input's bytes, right and wrong.
ROWS_SPEC = SPEC.replace(
    'STRONGEST = "baseline"\n',
    """STRONGEST = "library"


def _library(x, out):
    np.multiply(x, np.float32(2), out=out)


def _wrong_library(x, out):
    np.multiply(x, np.float32(3), out=out)


def _copy(x, out):
    return x.view(np.uint8).copy()  # what a copy row returns: the scratch buffer it copied into


def _torn_copy(x, out):
    copied = x.view(np.uint8).copy()
    copied[-1] ^= 1
    return copied


EXTRA_BASELINES = {"library": _library, "wrong_library": _wrong_library}
CEILINGS = {"copy": _copy, "torn_copy": _torn_copy, "unchecked": lambda x, out: None}
ROW_REFERENCE = {"copy": lambda x: x.view(np.uint8), "torn_copy": lambda x: x.view(np.uint8)}
""",
)


@pytest.fixture
def rows_family(tmp_path, monkeypatch):
    return load(tmp_path, "scale_rows", {"v01_plain.py": good()}, monkeypatch, spec=ROWS_SPEC)


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_every_family_declares_a_strongest_row_that_is_checked(fam):
    assert fam.strongest in fam.baselines
    assert fam.checked(fam.strongest), f"{fam.name}: {fam.strongest} is never checked"


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_no_library_row_goes_unchecked(fam):
    """Every row a run times is checked: a ceiling against its ROW_REFERENCE (a copy: the bytes it copied) or, for a
    coarser result (a float16 product), against the family's reference within its ROW_TOLERANCE."""
    assert [row for row in fam.baselines if not fam.checked(row)] == []


def test_the_int4_ceilings_hold_what_their_row_reference_says(monkeypatch):
    """The float32 and int8 ReLU rows, run on NumPy through a stand-in for CuPy, pass their own check, and a wrong
    one fails it."""
    int4 = zoo.family("int4")
    fake = types.SimpleNamespace(asnumpy=np.asarray, asarray=np.array, empty=np.empty, maximum=np.maximum)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(int4.module, "_WIDER_OPERANDS", {})
    monkeypatch.setattr("zoo.device.properties", lambda: {"l2_bytes": 4000})
    for row in ("float32_relu", "int8_relu"):
        result = harness.check_library_row(int4, row, 1001, seed=3)
        assert result.ok is True, (row, result.detail)
    monkeypatch.setattr(fake, "maximum", lambda x, zero, out: np.minimum(x, zero, out=out))
    assert harness.check_library_row(int4, "int8_relu", 1001, seed=3).ok is False


def test_a_family_without_a_strongest_row_fails_discovery(tmp_path, monkeypatch):
    with pytest.raises(RegistryError, match="STRONGEST"):
        load(
            tmp_path,
            "scale_nostrongest",
            {"v01_a.py": good()},
            monkeypatch,
            spec=SPEC.replace('STRONGEST = "baseline"\n', ""),
        )


@pytest.mark.parametrize("declared,message", [('"cupy"', "names none of its rows"), ('"unchecked"', "never checked")])
def test_the_strongest_row_must_be_a_checked_row_of_the_family(tmp_path, monkeypatch, declared, message):
    spec = ROWS_SPEC.replace('STRONGEST = "library"', f"STRONGEST = {declared}")
    fam = load(tmp_path, "scale_badstrongest", {"v01_a.py": good()}, monkeypatch, spec=spec)
    with pytest.raises(RegistryError, match=message):
        _ = fam.strongest


def test_library_rows_are_checked_against_the_reference_like_a_step(rows_family):
    fam = rows_family
    assert fam.strongest == "library"
    right = harness.check_library_row(fam, "library", 1000, seed=2)
    assert right.ok is True and right.error < 1e-6, right.detail
    wrong = harness.check_library_row(fam, "wrong_library", 1000, seed=2)
    assert wrong.ok is False and wrong.error > 0.1


def test_a_copy_row_is_checked_against_the_bytes_it_copied_exactly(rows_family):
    fam = rows_family
    assert fam.tolerance(33, "copy") == 0 and fam.tolerance(33, "library") == fam.tolerance(33)
    copy = harness.check_library_row(fam, "copy", 1000, seed=2)
    assert copy.ok is True, copy.detail
    torn = harness.check_library_row(fam, "torn_copy", 1000, seed=2)
    assert torn.ok is False and "1 elements differ" in torn.detail
    unchecked = harness.check_library_row(fam, "unchecked", 1000, seed=2)
    assert unchecked.ok is None and "not checked" in unchecked.detail


def test_the_copy_rows_reference_is_the_leading_bytes_of_the_inputs():
    a, b = np.arange(4, dtype=np.float32), np.arange(4, 8, dtype=np.float32)
    expected = np.concatenate([a.view(np.uint8), b.view(np.uint8)[:8]])
    assert np.array_equal(libraries.leading_bytes((a, b), 24), expected)
    vector_add = zoo.family("vector_add")
    assert np.array_equal(vector_add.row_references["copy_ceiling"](a, b), expected)
    assert 2 * expected.nbytes == vector_add.bytes_moved(4)  # a copy reads and writes: the bytes a call moves


@pytest.fixture
def no_cuda_compute(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.compute", None)  # import cuda.compute raises ImportError


def test_a_row_whose_library_is_missing_says_so(no_cuda_compute):
    with pytest.raises(Unavailable, match="cuda-cccl not installed"):
        libraries.cuda_compute()
    x = np.ones(33, np.float32)
    for family, row, inputs, out in (
        ("reduce", "cub reduce_into", (x,), np.zeros(1, np.float32)),
        ("scan", "cub inclusive_scan", (x,), np.zeros(33, np.float32)),
        ("histogram", "cub histogram_even", (np.ones(33, np.uint8),), np.zeros(256, np.int32)),
    ):
        with pytest.raises(Unavailable, match="zoo\\[baselines\\]"):
            zoo.family(family).baselines[row](*inputs, out)


def test_a_triton_row_without_triton_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.delitem(sys.modules, "zoo.bench.triton_rows", raising=False)
    x = np.ones((3, 33), np.float32)
    with pytest.raises(Unavailable, match="triton not installed"):
        zoo.family("softmax").baselines["triton"](x, np.empty_like(x))
    with pytest.raises(Unavailable, match="triton not installed"):
        zoo.family("vector_add").baselines["triton"](x[0], x[1], np.empty_like(x[0]))


def test_cuda_compute_without_its_bindings_says_so(monkeypatch):
    """On a machine without a CUDA driver cuda.compute imports, warns and has no bindings (cuda-cccl 1.2.1)."""
    cuda = types.ModuleType("cuda")
    compute = types.ModuleType("cuda.compute")
    compute._BINDINGS_AVAILABLE = False
    cuda.compute = compute
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.compute", compute)
    with pytest.raises(Unavailable, match="bindings are not available"):
        libraries.cuda_compute()


def _entries(**ms):
    return {name: dict(name=name, ms=t, gbps=1000.0 / t, gflops=0.0, ratio=1.0, correct=True) for name, t in ms.items()}


def test_tables_give_each_step_as_a_share_of_the_strongest_row_and_say_where_it_is_behind():
    fam = zoo.family("reduce")
    entries = _entries(**{"baseline": 2.0, "cub reduce_into": 1.0, "v09_single_pass": 1.25, "v10_vector_loads": 0.8})
    assert strongest.strongest_row(fam, entries)[0] == "cub reduce_into"
    assert strongest.of_strongest(fam, entries, "v09_single_pass") == pytest.approx(0.8)
    table = report.family_table(fam, "H100", "268435456", entries)
    assert "% of the strongest, cub reduce_into" in table.splitlines()[0]
    assert "| 80.0% **behind** |" in table and "| 125.0% |" in table and "was not measured" not in table


@pytest.mark.parametrize(
    "change,why",
    [
        (lambda e: e.pop("cub reduce_into"), "not measured"),
        (lambda e: e["cub reduce_into"].update(correct=False), "wrong result"),
        (lambda e: e["cub reduce_into"].update(correct=None), "before its output was checked"),
    ],
)
def test_a_table_without_a_usable_strongest_row_says_why(change, why):
    fam = zoo.family("reduce")
    entries = _entries(**{"baseline": 2.0, "cub reduce_into": 1.0, "v10_vector_loads": 0.8})
    change(entries)
    assert (
        strongest.strongest_row(fam, entries) is None
        and strongest.of_strongest(fam, entries, "v10_vector_loads") is None
    )
    table = report.family_table(fam, "H100", "268435456", entries)
    assert why in table and "python -m zoo run reduce --save" in table


def test_the_headline_names_the_strongest_row_and_falls_back_to_the_baseline_until_it_is_measured():
    fam = zoo.family("reduce")
    measured = _entries(**{"baseline": 2.0, "cub reduce_into": 1.0, "v10_vector_loads": 1.25})
    for e in measured.values():
        e["ratio"] = 2.0 / e["ms"]
    old = {k: v for k, v in measured.items() if k != "cub reduce_into"}
    results = {
        "gpu-a": {"device": {"name": "GPU A"}, "families": {"reduce": {"268435456": measured}}},
        "gpu-b": {"device": {"name": "GPU B"}, "families": {"reduce": {"268435456": old}}},
    }
    line = next(line for line in report.headline_table(results).splitlines() if line.startswith(f"| [{fam.name}]"))
    assert "| cub reduce_into |" in line and "v10 80.0% **behind**" in line
    assert "v10 160.0% of baseline (no checked figure of the strongest yet)" in line


def _lazy_imports(fam):
    """(module, names) of every `from zoo... import ...` inside a function of the family's spec."""
    for node in ast.walk(ast.parse(fam.spec_source)):
        if isinstance(node, ast.FunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith("zoo"):
                    yield inner.module, [a.name for a in inner.names]


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_what_the_specs_rows_import_when_they_run_exists(fam):
    """A row imports host tooling only when it runs, on a GPU: a module moved since would fail there, not here."""
    for module, names in _lazy_imports(fam):
        found = importlib.import_module(module)
        for name in names:
            assert hasattr(found, name) or importlib.util.find_spec(f"{module}.{name}"), f"{fam.name}: {module}.{name}"
