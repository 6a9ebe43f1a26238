"""The generated reading path: every family's docs/<family>.md and the README's family list are
what ``python -m zoo report`` would write now, so a new or edited step cannot leave its page stale."""

import pytest

import zoo
from zoo import results, walkthrough


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_family_page_is_up_to_date(fam):
    path = walkthrough.path_for(fam)
    assert path.exists(), f"{path} is missing: run `python -m zoo report`"
    assert path.read_text() == walkthrough.page(fam), f"{path} is stale: run `python -m zoo report`"


def test_readme_lists_every_family_with_its_page():
    readme = (results.ROOT / "README.md").read_text()
    start = readme.index(walkthrough.README_BEGIN) + len(walkthrough.README_BEGIN)
    assert readme[start : readme.index(walkthrough.README_END)].strip() == walkthrough.families_list()


def test_a_page_shows_each_step_with_its_diff_from_the_last():
    fam = zoo.family("reverse")
    text = walkthrough.page(fam)
    positions = [text.index(f"## {v.name}:") for v in fam]
    assert positions == sorted(positions)
    first, second = list(fam)[:2]
    assert f"--- {first.path.name}" in text and f"+++ {second.path.name}" in text
    assert '"""' not in walkthrough.code_only(second.source).split("\n", 1)[0]  # docstrings left out
