"""The generated reading path: every family's docs/<family>.md and the README's family list are
what ``python -m zoo report`` would write now, so a new or edited step cannot leave its page stale."""

import pytest

import zoo
from zoo.bench import results, strongest
from zoo.tools import report, walkthrough


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_family_page_is_up_to_date(fam):
    """Fair to a step just added: a step that no results row names may be missing from the page until the next
    `zoo report`; everything the page does show must be current."""
    path = walkthrough.path_for(fam)
    assert path.exists(), f"{path} is missing: run `python -m zoo report --family {fam.name}`"
    text = path.read_text()
    new = walkthrough.unpublished(fam, text)
    assert text == walkthrough.page(fam, leave_out=new), f"{path} is stale: `python -m zoo report --family {fam.name}`"


def test_readme_lists_every_family_with_its_page():
    readme = (results.ROOT / "README.md").read_text()
    start = readme.index(walkthrough.README_BEGIN) + len(walkthrough.README_BEGIN)
    new = [v for fam in zoo.families() for v in walkthrough.unpublished(fam, walkthrough.path_for(fam).read_text())]
    assert readme[start : readme.index(walkthrough.README_END)].strip() == walkthrough.families_list(leave_out=new)


def test_a_new_step_shows_not_yet_measured_until_results_name_it(tmp_path, monkeypatch):
    """A step copied from another carries none of its figures: its page and `zoo show` say it is not yet measured,
    and its page is not stale before `zoo report` runs."""
    fam = zoo.family("reverse")
    last = list(fam)[-1]
    data = {"gpu": {"device": {"name": "GPU"}, "families": {"reverse": {"1024": {last.name: {"ms": 1.0}}}}}}
    assert walkthrough.measured(last, data)
    assert report.measured_text(last, {}) == report.NOT_MEASURED
    text = walkthrough.page(fam, {}, {})
    assert text.count(report.NOT_MEASURED) == len(fam)
    without_last = walkthrough.page(fam, {}, {}, leave_out=[last])
    assert f"## {last.name}:" not in without_last
    assert walkthrough.unpublished(fam, without_last, {}) == [last]  # unmeasured and not on the page: not stale
    assert walkthrough.unpublished(fam, without_last, data) == []  # once measured, the page must show it
    assert walkthrough.unpublished(fam, text, {}) == []


def test_a_page_shows_each_step_with_its_diff_from_the_last():
    fam = zoo.family("reverse")
    text = walkthrough.page(fam)
    positions = [text.index(f"## {v.name}:") for v in fam]
    assert positions == sorted(positions)
    first, second = list(fam)[:2]
    assert f"--- {first.path.name}" in text and f"+++ {second.path.name}" in text
    assert '"""' not in walkthrough.code_only(second.source).split("\n", 1)[0]  # docstrings left out


def test_results_page_and_readme_headline_are_up_to_date():
    """docs/results.md's tables and the README's headline table are what `zoo report` writes from results/ now: a
    step folded or renamed, or a results file changed, cannot leave them naming what is gone."""
    all_results = results.load_all()
    page = report.RESULTS_PAGE.read_text()
    start = page.index(report.BEGIN) + len(report.BEGIN)
    assert page[start : page.index(report.END)].strip() == report.results_text(all_results), (
        "docs/results.md is stale: run `python -m zoo report`"
    )
    readme = report.README.read_text()
    start = readme.index(report.HEADLINE_BEGIN) + len(report.HEADLINE_BEGIN)
    assert readme[start : readme.index(report.HEADLINE_END)].strip() == report.headline_table(all_results), (
        "README.md's headline table is stale: run `python -m zoo report`"
    )


def _rows_of_gone_steps(all_results):
    """{(GPU slug, family, row)} of the rows in ``all_results`` named like a step the family no longer has."""
    steps = {f.name: {v.name for v in f} for f in zoo.families()}
    return {
        (slug, fam, row)
        for slug, data in all_results.items()
        for fam, by_size in data["families"].items()
        if fam in steps
        for rows in by_size.values()
        for row in rows
        if results.is_step_row(row) and row not in steps[fam]
    }


def test_a_row_of_a_step_the_family_no_longer_has_is_left_out():
    reverse = zoo.family("reverse")
    rows = {"baseline": {}, "cpu_numpy": {}, reverse[1].name: {}, "v09_folded_away": {}}
    assert set(results.current_rows(reverse, rows)) == {"baseline", "cpu_numpy", reverse[1].name}


def test_no_page_shows_the_rows_of_folded_steps_nor_the_commits_only_they_were_measured_at():
    """results/ keeps the rows of folded steps under their old names, as measured (gemv's old v11-v14, sgemm's old
    v14, hgemm's old v05); what the pages read (``load_all``) leaves them out, so no table, plot or page names them,
    nor a commit at which only they were measured."""
    raw, shown = results.load_all(current=False), results.load_all()
    gone = _rows_of_gone_steps(raw)
    assert not _rows_of_gone_steps(shown)
    tables = report.results_text(shown)
    pages = {fam: walkthrough.page(zoo.family(fam), all_results=shown) for fam in {fam for _, fam, _ in gone}}
    for slug, fam, row in gone:
        assert row not in pages[fam] and row not in tables
        by_size = raw[slug]["families"][fam]
        kept = {r.get("commit") for rows in shown[slug]["families"][fam].values() for r in rows.values()}
        only_gone = {rows[row].get("commit") for rows in by_size.values() if row in rows} - kept - {None}
        assert not any(commit in pages[fam] for commit in only_gone), (fam, row, only_gone)


def test_a_wrong_row_gets_no_bar_in_the_family_plot_and_says_wrong(monkeypatch):
    """A row whose last result was wrong (``correct`` False) is labelled WRONG with no bar: a wrong kernel's speed is
    not a figure to show."""
    pytest.importorskip("matplotlib")
    fam = zoo.family("vector_add")
    step = fam[1].name
    rows = {"baseline": {"ratio": 1.0, "correct": True}, step: {"ratio": 2.0, "correct": False}}
    drawn = {}
    monkeypatch.setattr(report.figures, "save", lambda fig, path, dpi: drawn.setdefault("fig", fig) and True)
    report.plot(fam, "test-gpu", "Test GPU", ["1000"], {"1000": rows})
    ax = drawn["fig"].axes[0]
    labels = {t.get_text() for t in ax.texts}
    widths = sorted(p.get_width() for p in ax.patches)
    assert "WRONG" in labels and widths == [0.0, 100.0], (labels, widths)


def test_attention_pages_give_the_best_rate_beside_hgemms():
    """RATE_BESIDE: each GPU's section names hgemm's best step and rate, and the share of it attention's best step
    reaches at each headline case; the figures are the results' own, recomputed here."""
    all_results = results.load_all()
    fam, hgemm = zoo.family("attention"), zoo.family("hgemm")
    checked = 0
    for data in all_results.values():
        by_size, gemm = data["families"].get(fam.name), data["families"].get(hgemm.name)
        if not by_size or not gemm:
            continue
        gemm_key = report.headline(hgemm, gemm)
        gemm_name, gemm_best = strongest.best_step(hgemm, gemm[gemm_key])
        key = report.headline_keys(fam, by_size)[0]
        name, best = strongest.best_step(fam, by_size[key])
        share = 100 * best["gflops"] / gemm_best["gflops"]
        section = walkthrough._rate_beside(fam, data["families"], by_size, [key])
        assert f"{gemm_name} at {gemm_key}, runs at {gemm_best['gflops'] / 1e3:,.1f} TFLOP/s" in section, section
        assert f"{name} at {key}, {best['gflops'] / 1e3:,.1f} TFLOP/s ({share:.1f}% of it)" in section, section
        checked += 1
    assert checked, "no GPU's results have both attention and hgemm"
    assert walkthrough._rate_beside(zoo.family("reduce"), {}, {}, []) == ""  # no RATE_BESIDE: no sentence
