"""One generated page per family, ``docs/<family>.md``: the reading path.

A page holds the family's motivation (its spec docstring), the measured table and plot of each GPU,
then every step in order: its summary, Changes, Why it is faster, its measured figures (from
results/, or "not yet measured on a GPU"), its Nsight Compute profile on each GPU with a sentence
computed from the counters (``zoo profile``), the picture of which thread touches what (for the
steps the spec's MAPPING names), why a demonstration is wrong, and the diff of its code from the
previous step (code only: docstrings are left out, so the diff shows exactly what changed in the
kernel and its launch). ``zoo report`` writes the pages; ``tests/tools/test_walkthrough.py`` fails when one
is out of date with the step files or the results, so a new step can never leave its page stale.
"""

import ast
import difflib
import textwrap

import zoo
from zoo import exercise, registry
from zoo.bench import code_lines, libraries, results, strongest, user_loop
from zoo.tools import asv_history, mapping, report
from zoo.tools.profile import counters, prose

DOCS = results.ROOT / "docs"
README_BEGIN, README_END = "<!-- zoo:families:begin -->", "<!-- zoo:families:end -->"


def path_for(fam):
    return DOCS / f"{fam.name}.md"


def code_only(source):
    """The source without its module docstring (and the blank lines after it)."""
    tree = ast.parse(source)
    first = tree.body[0] if tree.body else None
    if not (
        isinstance(first, ast.Expr)
        and isinstance(getattr(first, "value", None), ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return source
    lines = source.splitlines(keepends=True)[first.end_lineno :]
    while lines and not lines[0].strip():
        lines.pop(0)
    return "".join(lines)


def step_diff(old, new):
    """Unified diff of two steps' code, docstrings left out; '' for the first step."""
    if old is None:
        return ""
    return "".join(
        difflib.unified_diff(
            code_only(old.source).splitlines(keepends=True),
            code_only(new.source).splitlines(keepends=True),
            fromfile=old.path.name,
            tofile=new.path.name,
        )
    )


def docstring_sections(doc):
    """{heading: dedented text} for the step docstring's headings, keeping line breaks and lists."""
    found, current = {}, None
    for line in textwrap.dedent("\n".join(doc.splitlines()[1:])).splitlines():
        head = line.strip().rstrip(":")
        if line.strip().endswith(":") and head in registry.HEADINGS:
            current = head
            found[current] = []
        elif current:
            found[current].append(line)
    return {k: textwrap.dedent("\n".join(v)).strip() for k, v in found.items()}


def _motivation(fam):
    doc = (fam.module.__doc__ or "").strip().splitlines()
    return textwrap.dedent("\n".join(doc[1:])).strip()


def _measured_tables(fam, all_results):
    parts = []
    for slug, data in all_results.items():
        by_size = data["families"].get(fam.name)
        if not by_size:
            continue
        name = data["device"]["name"]
        commits = sorted({row.get("commit", "?") for rows in by_size.values() for row in rows.values()})
        label = "commit" if len(commits) == 1 else "commits"
        parts.append(
            f"### {name}\n\nFrom `results/{slug}.json` ({label} {', '.join(commits)}: the code each row "
            f"was measured at)."
        )
        keys = report.headline_keys(fam, by_size)
        for key in keys:
            parts.append(f"Size {key}:\n\n" + report.family_table(fam, name, key, by_size[key]))
        beside = _rate_beside(fam, data["families"], by_size, keys)
        parts += [beside] if beside else []
        parts += _user_loops(fam, by_size, keys[0])
        parts += [_other_tools(fam, key, by_size[key]) for key in keys if _other_tools(fam, key, by_size[key])]
        png = report.family_plot_path(slug, fam)
        if png.exists():
            parts.append(f"![{fam.name} on {name}](plots/{png.name})")
    return parts or ["Not measured on a GPU yet: `python -m zoo run --save`, then `python -m zoo report`."]


def _rate_beside(fam, families, by_size, keys):
    """The best step's rate at each of ``keys`` beside the best step of the family the spec's RATE_BESIDE names, at
    that family's headline size on the same GPU (attention beside hgemm: how close it comes to a plain GEMM); ''
    where either was not measured."""
    if not fam.rate_beside or fam.rate_beside not in families:
        return ""
    other = zoo.family(fam.rate_beside)
    other_key = report.headline(other, families[other.name])
    theirs = strongest.best_step(other, families[other.name][other_key])
    if theirs is None or not theirs[1].get("gflops"):
        return ""
    ours = []
    for key in keys:
        best = strongest.best_step(fam, by_size[key])
        if best is not None and best[1].get("gflops"):
            share = 100 * best[1]["gflops"] / theirs[1]["gflops"]
            ours.append(f"{best[0]} at {key}, {best[1]['gflops'] / 1e3:,.1f} TFLOP/s ({share:.1f}% of it)")
    if not ours:
        return ""
    return (
        f"**Beside a plain GEMM.** The zoo's best {other.name} step on this GPU, {theirs[0]} at {other_key}, runs "
        f"at {theirs[1]['gflops'] / 1e3:,.1f} TFLOP/s; here the best step is " + "; ".join(ours) + "."
    )


def _other_tools(fam, key, entries):
    """A sentence on the rows that compute the family's result in another tool's idiom (``libraries.tool_rows``)
    measured at ``key``: each one's time, % of the strongest row and lines of code beside the best step's; '' where
    none was measured."""
    measured = [name for name in libraries.tool_rows(fam) if entries.get(name, {}).get("ms")]
    if not measured:
        return ""

    def figures(name):
        share = strongest.of_strongest(fam, entries, name)
        lines = code_lines.lines(fam, name)
        wrong = "" if entries[name].get("correct") is not False else ", WRONG RESULT"
        return (
            f"{entries[name]['ms'] * 1e3:,.1f} us, "
            + ("" if share is None else f"{100 * share:.1f}% of {fam.strongest}, ")
            + f"{lines if lines is not None else '?'} lines{wrong}"
        )

    best = strongest.best_step(fam, entries)
    against = f" Beside the best step, {best[0]} ({figures(best[0])}):" if best else ""
    rows = "; ".join(f"{name} {figures(name)}" for name in measured)
    return f"**The same computation in other tools, at {key}.**{against} {rows}."


def _user_loops(fam, by_size, key):
    """What a user's loop of the best step gives beside the benchmark's figure at the headline size ``key``, and
    its call against the library's at the smallest BENCH size (``zoo.bench.user_loop``), where ``zoo run --save``
    recorded them."""
    from zoo.bench.run import smallest_size

    lines = []
    best = strongest.best_step(fam, by_size[key])
    if best is not None and user_loop.loop_line(*best):
        lines.append(f"**A user's loop at {key}.** " + user_loop.loop_line(*best))
    small = results.size_key(smallest_size(fam))
    entries = by_size.get(small, {})
    best = strongest.best_step(fam, entries)
    cost = user_loop.call_cost_line(*best, entries.get("baseline", {}), fam.BASELINE) if best else ""
    if cost:
        lines.append(f"**A call at the smallest size, {small}.** {cost}")
    return lines


def _mapping(fam, v):
    """The picture of which thread touches what, for a step the spec's MAPPING names (zoo.tools.mapping)."""
    sizes = {fam[step].name: size for step, size in getattr(fam.module, "MAPPING", {}).items()}
    if v.name not in sizes:
        return []
    return [
        f"Which thread touches what, from the simulator's trace of one call at {results.size_key(sizes[v.name])} "
        "(`zoo report` draws it): colour is the block of the first thread to touch an element, shade its warp "
        "(light even, dark odd), the number its lane; the red outline is warp 0 of block 0's first request, "
        f"the 32 lanes of one instruction.\n\n![{fam.name} {v.name[:3]}: which thread touches what]"
        f"(plots/{mapping.path_for(fam, v.name).name})"
    ]


def _profiles(fam, v, profiles):
    """Each GPU's Nsight Compute profile of the step (zoo profile): a table and what changed from its predecessor."""
    parts = []
    for _, data in profiles.items():
        key, entries = prose.headline_profile(fam, data)
        entry = entries.get(v.name)
        if not entry or "total" not in entry:
            continue
        at = data["sizes"][key]
        text = (
            f"**Profile** on {data['device']['name']}, size {key}{', ' + at['setting'] if at.get('setting') else ''} "
            f"(Nsight Compute {at.get('ncu', '?')}, commit {at.get('commit') or '?'}; durations at ncu's locked "
            f"clocks):\n\n{prose.markdown_table(fam, entry)}"
        )
        summary = counters.gpu_summary(entry)
        notes = [prose.flops_note(summary)]
        before = v.compared_with
        if before is not None and "total" in entries.get(before.name, {}):
            notes.append(prose.sentence(before.name, counters.gpu_summary(entries[before.name]), v.name, summary))
        notes = [n for n in notes if n]
        if notes:
            text += "\n\n" + " ".join(n if n.endswith(".") else n + "." for n in notes)
        parts.append(text)
    return parts


def _exercise(v, exercises):
    """A line that says how to write the step yourself, for a step with an exercise (``zoo.exercise``)."""
    ex = exercises.get(v.number)
    if ex is None:
        return []
    return [
        f"**Write it yourself.** `python -m zoo exercise start {ex.family.name} {v.name[:3]}` writes "
        f"{ex.start.name} with this step's changes left as TODO blocks; `python -m zoo exercise check FILE` runs "
        "it in the simulator and compares its answers, and what the simulator saw it do, with this step's."
    ]


def page(fam, all_results=None, profiles=None, leave_out=()):
    """The Markdown text of one family's page; without the steps in ``leave_out`` (see ``unpublished``)."""
    all_results = results.load_all() if all_results is None else all_results
    profiles = results.load_profiles(fam.name) if profiles is None else profiles
    steps = [v for v in fam if v not in leave_out]
    out = [
        f"# {fam.name}: {fam.summary}",
        "<!-- generated by `python -m zoo report` from the step files and results/; do not edit -->",
        _motivation(fam),
        f"Baseline: {fam.BASELINE}. Steps: {len(steps)}. Back to the [README](../README.md).",
        "## Measured",
        *_measured_tables(fam, all_results),
        *asv_history.section(fam),
    ]

    exercises = {e.step.number: e for e in exercise.of_family(fam)}
    for v in steps:
        doc = ast.get_docstring(ast.parse(v.source), clean=False) or ""
        sections = docstring_sections(doc)
        out.append(f"## {v.name}: {doc.strip().splitlines()[0] if doc.strip() else ''}")
        out.append(
            f"File: [`zoo/kernels/{fam.name}/{v.path.name}`](../zoo/kernels/{fam.name}/{v.path.name})"
            + (f" · try it: `python -m zoo show {fam.name} {v.name[:3]}`")
        )
        if v.min_cc > registry.ZOO_MIN_CC:
            (major, minor), why = v.requirement
            out.append(f"Needs a GPU of compute capability {major}.{minor} or later: {why}.")
        if v.ceiling is not None:
            (major, minor), why = v.ceiling
            out.append(f"Runs on compute capability {major}.{minor} at most: {why}.")
        if v.demonstration:
            out.append(f"**Wrong on purpose.** {v.demonstration}")
        for heading in registry.HEADINGS:
            if sections.get(heading):
                out.append(f"**{heading}.**\n\n{sections[heading]}")
        out.append(f"**Measured.**\n\n{report.measured_text(v, all_results)}")
        out += _profiles(fam, v, profiles)
        out += _mapping(fam, v)
        out += _exercise(v, exercises)
        against = v.compared_with  # its BASE, or the step before
        if v.launch_only:
            out.append(f"Launches {v.base.name}'s kernel (its base): the diff below is against that step.")
        elif v.base is not None and v.copied_from is not None:
            out.append(
                f"Copied from {v.copied_from.name} and changed: the diff below is against that step. Its launch"
                f" calls {v.base.name}'s (its base) for the inputs its own kernel does not take."
            )
        elif v.base is not None:
            out.append(
                f"Built on {v.base.name} (its base), whose launch it calls for the inputs its own kernel does not"
                " take: the diff below is against that step."
            )
        elif v.copied_from is not None:
            out.append(f"Copied from {v.copied_from.name} and changed: the diff below is against that step.")
        diff = step_diff(against, v)
        if diff:
            out.append(
                f"The code from {against.name}, docstrings left out "
                f"(`python -m zoo diff {fam.name} {v.name[:3]}`):\n\n```diff\n{diff.rstrip()}\n```"
            )
        elif against is None:
            out.append(f"The code:\n\n```python\n{code_only(v.source).rstrip()}\n```")
    return "\n\n".join(out) + "\n"


def families_list(leave_out=()):
    """The README's list of families, each linking its page (steps in ``leave_out`` not counted)."""
    return "\n".join(
        f"- [`{fam.name}`](docs/{fam.name}.md) ({sum(v not in leave_out for v in fam)} steps): {fam.summary}"
        for fam in zoo.families()
    )


def measured(v, all_results):
    """Whether some GPU's results hold a row for the step."""
    return any(
        v.name in rows for data in all_results.values() for rows in data["families"].get(v.family.name, {}).values()
    )


def unpublished(fam, text, all_results=None):
    """The family's steps that its page ``text`` does not show yet and that no results row names: a step just
    added, before ``zoo report`` runs. Its page is not stale for lacking them; once a GPU measures the step, or
    the report runs, the page must show it."""
    all_results = results.load_all() if all_results is None else all_results
    return [v for v in fam if f"\n## {v.name}:" not in text and not measured(v, all_results)]


def regenerate(all_results=None, families=None):
    """Write each family's page (of the families given, or every one) and the README's family list; yields one line
    per file changed."""
    all_results = results.load_all() if all_results is None else all_results
    for fam in families or zoo.families():
        text, path = page(fam, all_results), path_for(fam)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            yield f"page {path.relative_to(results.ROOT)}"
    readme = (results.ROOT / "README.md").read_text()
    if README_BEGIN in readme:
        start, end = readme.index(README_BEGIN) + len(README_BEGIN), readme.index(README_END)
        new = readme[:start] + "\n" + families_list() + "\n" + readme[end:]
        if new != readme:
            (results.ROOT / "README.md").write_text(new)
            yield "README.md family list"
