"""Regenerate everything that shows a measured figure, from results/*.json.

* docs/results.md, every GPU's tables and sweeps (between its zoo:results markers),
* the README's headline table: each family's best step (between the zoo:headline markers),
* one bar chart per GPU and family under docs/plots/, the overview chart, each sweep's chart (needs matplotlib),
* the pictures of which thread touches what (``zoo.tools.mapping``, drawn in the simulator),
* one walkthrough page per family, docs/<family>.md, and the README's list of families (``zoo.tools.walkthrough``).

Run ``python -m zoo report`` after ``python -m zoo run --save``; commit the diff. ``--family F`` redraws the
pictures of that family only (seconds, where all of them take minutes); the text is always regenerated whole.
A file is written only when its bytes change, so a report over unchanged results touches nothing. No step file
is ever written: a step's figures are generated from results/ onto its page and into ``zoo show``.
"""

import math
import os
import textwrap
from pathlib import Path

import zoo
from zoo.bench import code_lines, figures, results, strongest, sweeps
from zoo.tools import asv_history, mapping

README = results.ROOT / "README.md"
RESULTS_PAGE = results.ROOT / "docs" / "results.md"  # every GPU's tables and sweeps; the README keeps the headline
PLOTS = results.ROOT / "docs" / "plots"
BEGIN, END = "<!-- zoo:results:begin -->", "<!-- zoo:results:end -->"
HEADLINE_BEGIN, HEADLINE_END = "<!-- zoo:headline:begin -->", "<!-- zoo:headline:end -->"
OVERVIEW = PLOTS / "overview.png"


def metric(fam, size):
    """('GFLOP/s', 'gflops') for arithmetic-heavy families, ('GB/s', 'gbps') for the rest."""
    size, kind = results.parse_case(size)
    flops, nbytes = fam.flops(size), fam.bytes_moved(size, kind)
    return ("GFLOP/s", "gflops") if flops > nbytes else ("GB/s", "gbps")


def headline(fam, by_size):
    """The key a family is summarised at: its HEADLINE_SIZE if measured, else its largest measured
    size; the family's first kind of input where several were measured."""
    wanted = getattr(fam.module, "HEADLINE_SIZE", None)
    if wanted is not None and results.size_key(wanted) in by_size:
        return results.size_key(wanted)
    return max(by_size, key=lambda k: (_volume(k), results.parse_case(k)[1] is None))


def headline_keys(fam, by_size):
    """The headline key and the other kinds of input measured at the same size, in the spec's order."""
    first = headline(fam, by_size)
    size, _ = results.parse_case(first)
    keys = [results.size_key(size, kind, fam.kinds) for kind in fam.kinds]
    return [k for k in keys if k in by_size] or [first]


def _volume(key):
    size, _ = results.parse_case(key)
    return size if isinstance(size, int) else math.prod(size)


def _pct(ratio):
    return "-" if ratio is None else f"{100 * ratio:.1f}%"


def family_table(fam, device_name, size, entries):
    unit, key = metric(fam, size)
    cpu_rows = [n for n in fam.cpu_rows if n in entries]
    lines = [
        f"| variant | ms | {unit} | % of {fam.BASELINE} | % of the strongest, {fam.strongest} | lines | x over CPU "
        "| registers | occupancy bound | correct |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    names = [n for n in fam.baselines if n in entries] + cpu_rows + [v.name for v in fam if v.name in entries]
    host_paced_rows = 0
    for m in (entries[n] for n in names):
        r = m.get("resources") or {}
        library = m["name"] in fam.baselines or m["name"] in fam.cpu_rows
        correct = {True: "yes", False: "**no**", None: "-" if library else "demo"}[m.get("correct")]
        occ = r.get("occupancy")
        label = m["name"]
        if m["name"] in fam.cpu_rows:  # name the processor and the threads the row ran on
            label = f"{label} (CPU: {r.get('cpu', '?')}, {r.get('threads', '?')} thread(s))"
        if m.get("cold_l2"):  # timed with L2 flushed before every call (zoo run --cold-l2)
            label = f"{label} (cold L2)"
        paced = results.host_paced(m.get("host_us"), m["ms"])
        host_paced_rows += paced
        lines.append(
            f"| {label} | {m['ms']:.4f}{HOST_MARK if paced else ''} | {_num(m[key])} | {_pct(m.get('ratio'))} | "
            f"{_of_strongest(fam, entries, m['name'], step=not library)} | {_lines(fam, m['name'])} | "
            f"{_times(m.get('over_cpu'))} | {r.get('registers', '-')} | {'-' if occ is None else f'{occ:.0%}'} | "
            f"{correct} |"
        )
    missing = strongest.missing_note(fam, entries)
    if missing:
        lines += ["", missing]
    lines += ["", LINES_NOTE]
    if host_paced_rows:
        lines += ["", HOST_NOTE]
    return "\n".join(lines)


def _of_strongest(fam, entries, name, step=True):
    """A row's % of the family's strongest row, with 'behind' for a step that is slower than it."""
    fraction = strongest.of_strongest(fam, entries, name)
    if fraction is None:
        return "-"
    return _pct(fraction) + (" **behind**" if step and strongest.behind(fraction) else "")


def _lines(fam, name):
    """A row's lines of code (``zoo.bench.code_lines``), '-' where they cannot be counted."""
    found = code_lines.lines(fam, name)
    return "-" if found is None else str(found)


LINES_NOTE = (
    "lines: the lines of code a row takes (`zoo.bench.code_lines`): a step's file (and its base's), a library row's "
    "call as the spec writes it, or the Triton, torch or CUDA C code its ROW_CODE names; blank lines, comments, "
    "docstrings and imports left out, and the zoo's device helpers a step calls not counted."
)

HOST_MARK = " \N{DAGGER}"
HOST_NOTE = (
    f"{HOST_MARK.strip()} About the host's pace: a launch call took the host 80% of the figure or more "
    "(`zoo.bench.results.host_paced`), so back-to-back launches may have left the GPU idle between kernels, and the "
    "kernel takes at most this long. A CUDA graph of calls times the kernel alone (the family's sweep, where it has "
    "one)."
)


def _times(value):
    """'12.3x', or '-' for a row measured before the CPU was timed."""
    return "-" if value is None or value != value else f"{value:,.1f}x"


def family_plot_path(slug, fam):
    """The family's bar chart of steps; ``-steps`` keeps it apart from a sweep command of the same name."""
    return PLOTS / f"{slug}-{fam.name}-steps.png"


def shares(fam, entries, names):
    """(each row's speed as a fraction of the family's strongest row, what the fractions are of): the strongest row
    where these entries hold a checked figure of it, else the baseline (``ratio``), said so."""
    if strongest.strongest_row(fam, entries) is not None:
        return [strongest.of_strongest(fam, entries, n) or 0 for n in names], f"the strongest row, {fam.strongest}"
    return [entries.get(n, {}).get("ratio") or 0 for n in names], f"{fam.BASELINE} (the strongest row not measured)"


def plot(fam, slug, device_name, keys, by_size):
    """Bars of each step and library row as % of the family's strongest row (the baseline where that was not
    measured), one colour per kind of input, a row whose result was wrong marked WRONG without a bar; True when the
    PNG changed, None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = [n for n in fam.baselines if n != fam.strongest] + [v.name for v in fam if not v.demonstration]
    names = [n for n in names if any(n in by_size[k] for k in keys)]
    of = None
    height = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(7, (0.3 + 0.2 * len(keys)) * len(names) + 1.4))
    top = 0
    colours = ("#4c72b0", "#dd8452", "#55a868", "#8172b2")
    for j, key in enumerate(keys):
        fractions, of_this = shares(fam, by_size[key], names)
        of = of if of and of_this != of else of_this  # a mix of kinds: named by the first
        wrong = [by_size[key].get(n, {}).get("correct") is False for n in names]  # a wrong result gets no bar
        pct = [0 if w else 100 * f for f, w in zip(fractions, wrong, strict=True)]
        ypos = [len(names) - 1 - i + (len(keys) - 1 - 2 * j) * height / 2 for i in range(len(names))]
        bars = ax.barh(ypos, pct, height=height, color=colours[j % len(colours)], label=key if len(keys) > 1 else None)
        labels = ["WRONG" if w else f"{p:.1f}%" if p else "" for p, w in zip(pct, wrong, strict=True)]
        ax.bar_label(bars, labels=labels, padding=3, fontsize=7)
        top = max([top] + pct)
    ax.set_yticks(range(len(names)), names[::-1])
    ax.axvline(100, color="#c44e52", linestyle="--", linewidth=1)
    ax.set_xlabel(f"% of {of} (same run)", fontsize=9)
    ax.set_title(f"{fam.name}, size {keys[0]}, {device_name}", fontsize=10)
    ax.set_xlim(0, max(top, 100) * 1.18)
    if len(keys) > 1:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    changed = figures.save(fig, family_plot_path(slug, fam), dpi=110)
    plt.close(fig)
    return changed


def headline_rows(all_results):
    """For each family measured anywhere, in teaching order: (family, size key, {slug: (step, entry)}), the best
    step at the family's headline size on each GPU."""
    rows = []
    for fam in zoo.families():
        measured = {slug: data["families"].get(fam.name) for slug, data in all_results.items()}
        measured = {slug: by_size for slug, by_size in measured.items() if by_size}
        if not measured:
            continue
        first = next(iter(measured.values()))
        key = headline(fam, first)
        best = {slug: strongest.best_step(fam, by_size[key]) for slug, by_size in measured.items() if key in by_size}
        rows.append((fam, key, {slug: b for slug, b in best.items() if b}))
    return rows


def headline_table(all_results):
    """The README's first table: each family's best step at its headline size, a column per GPU."""
    gpus = [(slug, data["device"]["name"]) for slug, data in all_results.items()]
    lines = [
        "| family | size | strongest row | "
        + " | ".join(f"{name}: best step, % of the strongest row" for _, name in gpus)
        + " |",
        "|---|---|---|" + "---:|" * len(gpus),
    ]
    for fam, key, best in headline_rows(all_results):
        cells = []
        for slug, _ in gpus:
            if slug not in best:
                cells.append("-")
                continue
            name, entry = best[slug]
            unit, metric_key = metric(fam, key)
            entries = all_results[slug]["families"][fam.name][key]
            if strongest.strongest_row(fam, entries) is None:  # not (yet) measured there: the baseline, said so
                figure = f"{_pct(entry['ratio'])} of baseline (no checked figure of the strongest yet)"
            else:
                figure = _of_strongest(fam, entries, name)
            cells.append(f"{name[:3]} {figure} ({_num(entry[metric_key])} {unit})")
        lines.append(f"| [{fam.name}](docs/{fam.name}.md) | {key} | {fam.strongest} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def overview_plot(all_results):
    """docs/plots/overview.png: each family's best step as % of its strongest row (named beside the family; the
    baseline, marked *, where that was not measured), one bar per GPU; True when the PNG changed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = headline_rows(all_results)
    if not rows:
        return None
    gpus = [(slug, data["device"]["name"]) for slug, data in all_results.items()]
    height = 0.8 / len(gpus)
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) * max(1, len(gpus)) + 1.4))
    colours = ("#4c72b0", "#dd8452", "#55a868", "#8172b2")
    for j, (slug, name) in enumerate(gpus):
        pct, labels = [], []
        for fam, key, best in rows:
            if slug not in best:
                pct.append(0)
                labels.append("")
                continue
            entries = all_results[slug]["families"][fam.name][key]
            (fraction,), of = shares(fam, entries, [best[slug][0]])
            pct.append(100 * fraction)
            mark = "" if of.startswith("the strongest") else "*"  # of the baseline
            labels.append(f"{best[slug][0][:3]} {100 * fraction:.0f}%{mark}")
        ypos = [len(rows) - 1 - i + (len(gpus) - 1 - 2 * j) * height / 2 for i in range(len(rows))]
        bars = ax.barh(ypos, pct, height=height, color=colours[j % len(colours)], label=name)
        ax.bar_label(bars, labels=labels, padding=3, fontsize=7)
    ax.set_yticks(range(len(rows)), [f"{fam.name} ({key}) / {fam.strongest}" for fam, key, _ in rows][::-1], fontsize=7)
    ax.axvline(100, color="#c44e52", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("best step, % of the family's strongest row, same run (*: of the baseline)")
    ax.set_title("zoo: each family's fastest step against what a practitioner would call", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    changed = figures.save(fig, OVERVIEW, dpi=110)
    plt.close(fig)
    return changed


def _replace_between(text, begin, end, body):
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[:start] + "\n" + body + "\n" + text[stop:]


NOT_MEASURED = "Not yet measured on a GPU: no row of results/ names this step."


def measured_lines(variant, all_results):
    """Lines that give the step's figures on each GPU, at the largest size it was measured at, from the rows of
    results/ that name it; [] when none does (a new step, or one renamed since the last run)."""
    lines = []
    for slug, data in all_results.items():
        by_size = data["families"].get(variant.family.name)
        if not by_size:
            continue
        measured_at = {k: v for k, v in by_size.items() if variant.name in v}
        if not measured_at:
            continue
        size = headline(variant.family, measured_at)  # the largest size this variant can take
        m = by_size[size][variant.name]
        unit, key = metric(variant.family, size)
        r = m.get("resources") or {}
        extra = f", {r['registers']} registers, occupancy bound {r['occupancy']:.0%}" if r else ""
        verdict = "" if m.get("correct") is not False else ", WRONG RESULT"
        fraction = strongest.of_strongest(variant.family, by_size[size], variant.name)
        against = "" if fraction is None else f", {_pct(fraction)} of {variant.family.strongest}"
        against += ", behind it" if strongest.behind(fraction) else ""
        others = [
            f"{k}: {_pct(measured_at[k][variant.name].get('ratio'))}"
            for k in sorted(measured_at, key=_volume)
            if k != size
        ]
        others = f" Other sizes, % of {variant.family.BASELINE}: {', '.join(others)}." if others else ""
        lines += textwrap.wrap(
            f"{data['device']['name']}, size {size}: {_num(m[key])} {unit} ({_num(m['ms'] * 1e3)} us a call), "
            f"{_pct(m.get('ratio'))} of {variant.family.BASELINE}{against}{extra}{verdict}.{others} "
            f"From results/{slug}.json.",
            width=84,
        )
    return lines


def measured_text(variant, all_results=None):
    """The step's measured figures for ``zoo show`` and its walkthrough page, or NOT_MEASURED: never typed
    into the step's file, so a results refresh leaves the lessons alone."""
    all_results = results.load_all() if all_results is None else all_results
    return "\n".join(measured_lines(variant, all_results)) or NOT_MEASURED


def _num(value):
    """Thousands apart for big figures, three significant digits for small ones."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _saved_sweeps(all_results):
    """(device name, slug, command, module, csv path, png path) of every committed GPU sweep, by GPU."""
    modules = sweeps.modules()
    for slug, command, path in sweeps.saved():
        name = all_results.get(slug, {}).get("device", {}).get("name", slug)
        yield name, slug, command, modules[command], path, sweeps.png_path(slug, command)


def sweep_sections(all_results):
    """docs/results.md's part on the sweeps: each committed sweep under its GPU's heading, its chart and the findings
    computed from its CSV."""
    sections, heading = [], None
    for name, _, command, module, path, png in _saved_sweeps(all_results):
        if name != heading:
            sections.append(f"## Sweeps on {name}")
            heading = name
        rows = sweeps.read_csv(path)
        text = f"### `python -m zoo {command}`\n\n{module.HELP} Data: `{path.relative_to(results.ROOT).as_posix()}`."
        if png.exists():
            text += f"\n\n![{command} on {name}]({_from_docs(png)})"
        found = sweeps.findings(module, rows)
        if found:
            text += "\n\n" + "\n".join(f"- {line}" for line in found)
        sections.append(text)
    return sections


def results_text(all_results):
    """docs/results.md's generated part: each GPU's table of every family at its headline size with its chart, then
    the sweeps. Text only: the charts it links are drawn by ``regenerate``."""
    sections = []
    for slug, data in all_results.items():
        name = data["device"]["name"]
        sections.append(
            f"## {name}\n\nFrom `results/{slug}.json` (updated {data.get('updated', '?')}, "
            f"commit {data.get('commit', '?')}).\n"
        )
        for fam in zoo.families():
            by_size = data["families"].get(fam.name)
            if not by_size:
                continue
            for key in headline_keys(fam, by_size):
                sections.append(f"### {fam.name}, size {key}\n\n" + family_table(fam, name, key, by_size[key]))
            path = family_plot_path(slug, fam)
            if path.exists():
                sections.append(f"![{fam.name} on {name}]({_from_docs(path)})")
    sections += sweep_sections(all_results)
    return "\n\n".join(sections) if sections else "No GPU results yet: run `python -m zoo run --save` on a GPU."


def _from_docs(path):
    """A file's link from docs/results.md."""
    return Path(os.path.relpath(path, RESULTS_PAGE.parent)).as_posix()


def _redraw(all_results, names):
    """Draw the bar chart of each family named (every family for None) on each GPU and each sweep's chart of those
    families (and every sweep that reads results/); yields a line for each PNG that changed."""
    for slug, data in all_results.items():
        for fam in zoo.families():
            by_size = data["families"].get(fam.name)
            if by_size and (names is None or fam.name in names):
                if plot(fam, slug, data["device"]["name"], headline_keys(fam, by_size), by_size):
                    yield f"plot {family_plot_path(slug, fam).relative_to(results.ROOT)}"
    for name, _, _, module, path, png in _saved_sweeps(all_results):
        if names is None or module.FAMILY.name in names or getattr(module, "READS_RESULTS", False):
            before = png.read_bytes() if png.exists() else None
            if sweeps.draw(module, sweeps.read_csv(path), name, png) and png.read_bytes() != before:
                yield f"plot {png.relative_to(results.ROOT)}"


def regenerate(families=None):
    """Rewrite docs/results.md's tables, the README's headline table and the plots (the bar charts and sweeps of
    the families given, or of all); yields one line for each file that changed.

    ``zoo report`` regenerates the walkthrough pages after this (``zoo.tools.walkthrough.regenerate``), which show the
    plots drawn here. No step file is written: a step's figures are generated onto its page and ``zoo show``."""
    names = None if families is None else {fam.name for fam in families}
    all_results = results.load_all()
    yield from _redraw(all_results, names)  # first: the text links the charts that exist
    if _write_between(RESULTS_PAGE, BEGIN, END, results_text(all_results)):
        yield f"{RESULTS_PAGE.relative_to(results.ROOT)} tables"
    if _write_between(README, HEADLINE_BEGIN, HEADLINE_END, headline_table(all_results)):
        yield "README.md headline table"
    if overview_plot(all_results):
        yield f"plot {OVERVIEW.relative_to(results.ROOT)}"

    yield from asv_history.regenerate(names=names)  # each family's headline over the commits asv recorded
    yield from mapping.regenerate(names)  # the pictures of which thread touches what, from the simulator's trace


def _write_between(path, begin, end, body):
    """Replace the text between two markers of a file; True when the file changed."""
    text = path.read_text()
    new = _replace_between(text, begin, end, body)
    if new == text:
        return False
    path.write_text(new)
    return True
