"""Every relative link in README.md and docs/*.md names a file of the repository (and a heading of it, where
the link names one): a page moved or renamed cannot leave a dead link behind."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"(`+).+?\1")  # `code` or ``code``: kernel[grid, block](...) is no link


def links(text):
    """The targets of the Markdown links and images outside code."""
    return LINK.findall(INLINE_CODE.sub("", FENCE.sub("", text)))


def heading_anchors(text):
    """The anchors GitHub gives the headings of a Markdown text: lower case, punctuation dropped, spaces as -."""
    found = set()
    for line in FENCE.sub("", text).splitlines():
        m = re.match(r"^#+\s+(.*?)\s*$", line)
        if m:
            found.add(re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    text = page.read_text()
    dead = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not a file of the repository
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            dead.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in heading_anchors(file.read_text()):
            dead.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not dead, f"{page.relative_to(ROOT)} has dead links:\n" + "\n".join(dead)


def test_links_are_read_as_markdown_writes_them():
    text = "[a](x.md) ![b](plots/y.png) `[c](no.md)` ``k[g, b](...)``\n"
    text += "```\n[d](code.md)\n```\n## Learn by doing, again\n"
    assert links(text) == ["x.md", "plots/y.png"]
    assert heading_anchors(text) == {"learn-by-doing-again"}
