"""The tour notebook runs from top to bottom (here: in the simulator, at its small sizes), so it cannot rot."""

import re

import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat")  # the test extra brings nbclient, nbformat and ipykernel
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = ROOT / "notebooks" / "zoo-tour.ipynb"


def test_the_tour_runs_to_the_end_and_its_exercise_passes(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and its error, when a cell fails
    printed = "\n".join(
        out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
    )
    assert "FAIL: importing your file: TODO(exercise) 1 is still to write" in printed
    assert "Hint 1 of" in printed
    assert "PASS: reverse/v02" in printed
    assert "need more than a T4 (sm_75) has" in printed and "hgemm/v01" in printed  # MIN_CC (8, 0)
    assert (tmp_path / "zoo-exercises" / "reverse_v02_dynamic_shared.py").exists()


def test_the_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")
    assert "Colab" in nb.cells[0].source


# upper-case stand-ins (github.com/OWNER/zoo, YOUR_NAME), example.com, <angle brackets>
PLACEHOLDER = re.compile(r"\b(OWNER|YOUR[_-]?\w*|USERNAME|USER|ORG|REPO)\b|\bexample\.(com|org)\b|<[^>]*>")
ADDRESS = re.compile(r"https?://[^\s)\"'`\]]+")


def _addresses(text):
    return ADDRESS.findall(text)


@pytest.mark.parametrize("path", ["README.md", "notebooks/zoo-tour.ipynb"])
def test_no_link_points_at_a_placeholder(path):
    """A link to github.com/OWNER/zoo is a 404 for whoever clicks it: every address in the README and the
    notebook is a real one (the zoo has no public home yet: the notebook says where a fork's address goes)."""
    text = (ROOT / path).read_text()
    bad = [a for a in _addresses(text) if PLACEHOLDER.search(a)]
    assert not bad, f"{path} links to placeholder addresses: {bad}"


def test_the_clone_cell_takes_the_address_from_one_variable():
    """The first code cell clones from REPO and nothing else, and says where a fork's address goes; left empty,
    it stops with that instruction instead of cloning nothing."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    first = next(cell.source for cell in nb.cells if cell.cell_type == "code")
    assert re.search(r'^REPO = "[^"]*"$', first, re.M)
    assert "git" in first and '"clone"' in first and "REPO" in first.split('"clone"', 1)[1].splitlines()[0]
    assert not _addresses(first.replace("REPO = ", "")), "the clone cell names an address outside REPO"
    assert "set REPO" in first
    assert "REPO" in nb.cells[0].source and "Colab" in nb.cells[0].source
