"""The seeds' comparisons as rows (Triton, PyTorch eager and torch.compile, CUDA C through CuPy's RawModule): each
says why it is unavailable where its library is missing, never an import error; each has its lines of code counted
from its source (``zoo.bench.code_lines``), and the tables show them beside the strongest row."""

import sys
import textwrap

import numpy as np
import pytest

import zoo
from zoo.bench import code_lines, libraries
from zoo.errors import Unavailable
from zoo.tools import report, walkthrough

OPTIONAL_ROWS = ("zoo.bench.triton_rows", "zoo.bench.torch_rows", "zoo.bench.cuda_c_rows")
# family: the rows written in another tool's idiom that it must have
NEW_ROWS = {
    "vector_add": ("triton", "cuda_c"),
    "sgemm": ("triton", "triton tf32"),
    "hgemm": ("triton",),
    "attention": ("triton",),
    "softmax": ("triton", "torch eager", "torch.compile"),
    "fusion": ("torch eager", "torch.compile"),
    "elementwise": ("torch eager", "torch.compile"),
    "launch": ("torch eager", "torch.compile reduce-overhead"),
    "roofline": ("cuda_c",),
}


def _declared():
    """(family, row) of every row whose code lives outside the spec (ROW_CODE) and of every new row."""
    found = {(fam.name, row) for fam in zoo.families() for row in getattr(fam.module, "ROW_CODE", {})}
    found |= {(name, row) for name, rows in NEW_ROWS.items() for row in rows}
    return [(zoo.family(name), row) for name, row in sorted(found)]


def test_each_family_has_its_rows_in_other_tools_beside_the_strongest():
    for name, rows in NEW_ROWS.items():
        fam = zoo.family(name)
        assert libraries.tool_rows(fam) == list(rows), name  # named for their tool, in the spec's order
        assert fam.strongest not in rows, f"{name}: the strongest row stays the practitioner's call"
    assert libraries.tool_rows(zoo.family("attention")) == ["triton"]  # torch sdpa is the strongest row


@pytest.mark.parametrize("fam,row", _declared(), ids=lambda x: getattr(x, "name", x))
def test_every_row_has_its_code_counted(fam, row):
    assert row in fam.baselines, f"{fam.name}: ROW_CODE names {row!r}, which is no row of the family"
    lines = code_lines.lines(fam, row)
    assert lines is not None and 2 <= lines < 200, (fam.name, row, lines)


@pytest.fixture
def no_optional_libraries(monkeypatch):
    """A machine without PyTorch, Triton and CuPy (as this one: the rows' modules are never imported here)."""
    for name in ("torch", "triton", "cupy"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ModuleNotFoundError
    for name in OPTIONAL_ROWS:
        monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.parametrize("fam,row", _declared(), ids=lambda x: getattr(x, "name", x))
def test_a_row_whose_library_is_missing_says_so_instead_of_raising_an_import_error(no_optional_libraries, fam, row):
    inputs = fam.inputs(fam.TEST_SIZES[0], 0)
    shape, dtype = fam.output_for(*inputs)
    with pytest.raises(Unavailable, match="not installed"):
        fam.baselines[row](*inputs, np.empty(shape, dtype))
    assert not any(sys.modules.get(name) for name in OPTIONAL_ROWS)


def test_lines_count_code_and_what_it_uses_not_docstrings_comments_blanks_or_imports(tmp_path):
    source = tmp_path / "rows.py"
    source.write_text(
        textwrap.dedent(
            '''
            """A module docstring."""
            import math

            BLOCK = 4  # counted when used
            UNUSED = 5


            def _kernel(x):
                """A docstring: not code."""
                # a comment line
                return x * BLOCK


            KERNEL_C = r"""
            // a CUDA C comment
            __global__ void k() {
            }
            """


            def row(x):
                import numpy

                y = _kernel(x)

                return numpy.sqrt(y) + math.pi + len(KERNEL_C)
            '''
        )
    )
    # row: def, y =, return (3); _kernel: def, return (2); BLOCK (1); KERNEL_C: the assignment, two lines of C and
    # the closing quotes (4)
    assert code_lines.function_lines(source, "row") == 10
    assert code_lines.function_lines(source, "_kernel") == 3
    assert code_lines.function_lines(source, "missing") is None
    assert code_lines.file_lines(source) == 11  # every definition, UNUSED too


def test_a_step_counts_its_base_and_a_row_without_row_code_its_spec_function():
    sgemm = zoo.family("sgemm")
    based = sgemm["v13"]  # launches v12's kernel on a plan of its own
    assert based.base is not None
    expected = code_lines.file_lines(based.path) + code_lines.file_lines(based.base.path)
    assert code_lines.lines(sgemm, based.name) == code_lines.step_lines(based) == expected
    assert code_lines.lines(sgemm, "v01_naive") == code_lines.file_lines(sgemm["v01"].path) > 0
    assert code_lines.lines(sgemm, "baseline") == 2  # def baseline(A, B, out): cupy.matmul(A, B, out=out)
    assert code_lines.lines(sgemm, "triton") == code_lines.lines(sgemm, "triton tf32")  # one kernel, two precisions
    assert code_lines.lines(sgemm, "no such row") is None


def _entries(**ms):
    return {name: dict(name=name, ms=t, gbps=1000.0 / t, gflops=0.0, ratio=1.0, correct=True) for name, t in ms.items()}


def test_the_family_table_gives_each_row_its_lines_beside_its_share_of_the_strongest():
    fam = zoo.family("vector_add")
    entries = _entries(
        **{"baseline": 1.0, "triton": 0.9, "cuda_c": 0.95, "copy_ceiling": 0.8, "v01_one_thread_per_element": 1.0}
    )
    table = report.family_table(fam, "H100", str(1 << 28), entries)
    header = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    assert "lines" in header and "% of the strongest, copy_ceiling" in header
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("|")]
    rows = {row[0]: row for row in cells}
    for name in ("triton", "cuda_c", "v01_one_thread_per_element"):
        assert rows[name][header.index("lines")] == str(code_lines.lines(fam, name)), name
    assert rows["cuda_c"][header.index("% of the strongest, copy_ceiling")] == "84.2%"
    assert "lines: the lines of code" in table


def test_the_torch_code_in_the_specs_computes_the_reference(monkeypatch):
    """The chains the torch rows run, on NumPy through a stand-in for torch's few functions they call: what each
    computes is the family's reference (the GPU checks the rows themselves)."""
    stand_in = type(sys)("torch")
    stand_in.sin, stand_in.tanh, stand_in.clip, stand_in.relu = np.sin, np.tanh, np.clip, lambda x: np.maximum(x, 0)
    stand_in.softmax = lambda x, dim: (
        np.exp(x - x.max(dim, keepdims=True)) / np.exp(x - x.max(dim, keepdims=True)).sum(dim, keepdims=True)
    )
    monkeypatch.setitem(sys.modules, "torch", stand_in)
    for name, function, size in (
        ("fusion", "torch_chain", 1031),
        ("launch", "torch_loop", 1000),
        ("softmax", "torch_softmax", (3, 33)),
        ("elementwise", "torch_relu", 33),
    ):
        fam = zoo.family(name)
        inputs = fam.inputs(size, 1)
        result = getattr(fam.module, function)(*(a.astype(np.float64) for a in inputs))
        reference = fam.reference(*inputs)
        assert np.allclose(result, reference, rtol=1e-12, atol=1e-12), name


def test_the_plots_give_each_row_as_a_share_of_the_strongest_row_or_say_it_is_of_the_baseline():
    fam = zoo.family("reduce")
    entries = _entries(**{"baseline": 2.0, "cub reduce_into": 1.0, "v10_vector_loads": 0.8})
    entries["v10_vector_loads"]["ratio"] = 2.5
    fractions, of = report.shares(fam, entries, ["baseline", "v10_vector_loads"])
    assert fractions == pytest.approx([0.5, 1.25]) and of == "the strongest row, cub reduce_into"
    entries.pop("cub reduce_into")
    fractions, of = report.shares(fam, entries, ["v10_vector_loads"])
    assert fractions == [2.5] and "not measured" in of


def test_zoo_runs_table_gives_each_row_its_lines():
    from rich.console import Console

    from zoo.bench import run
    from zoo.bench.harness import Measurement

    fam = zoo.family("vector_add")
    measured = [
        Measurement(name, 1 << 20, ms, 0.0, 1.0, 1.0, correct=True)
        for name, ms in (("baseline", 1.0), ("cuda_c", 0.9), ("copy_ceiling", 0.8))
    ]
    console = Console(width=250, record=True)
    console.print(run.run_table(fam, str(1 << 20), measured))
    text = console.export_text()
    assert "lines" in text
    line = next(row for row in text.splitlines() if "cuda_c" in row)
    assert f" {code_lines.lines(fam, 'cuda_c')} " in line and "88.9" in line  # 0.8 / 0.9 of the copy


def test_the_page_says_what_the_other_tools_buy_and_cost_beside_the_best_step():
    fam = zoo.family("vector_add")
    entries = _entries(**{"copy_ceiling": 0.8, "triton": 1.0, "cuda_c": 0.9, "v01_one_thread_per_element": 0.85})
    entries["v01_one_thread_per_element"]["ratio"] = 1.1
    text = walkthrough._other_tools(fam, "268435456", entries)
    lines = {name: code_lines.lines(fam, name) for name in ("triton", "cuda_c", "v01_one_thread_per_element")}
    assert f"v01_one_thread_per_element (850.0 us, 94.1% of copy_ceiling, {lines['v01_one_thread_per_element']}" in text
    assert f"triton 1,000.0 us, 80.0% of copy_ceiling, {lines['triton']} lines" in text
    assert f"cuda_c 900.0 us, 88.9% of copy_ceiling, {lines['cuda_c']} lines" in text
    assert walkthrough._other_tools(fam, "268435456", {"copy_ceiling": entries["copy_ceiling"]}) == ""
