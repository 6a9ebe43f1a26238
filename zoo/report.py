"""Regenerate everything that shows a measured figure, from results/*.json.

* the README's results section (between the zoo:results markers),
* one bar chart per GPU and family under docs/plots/ (needs matplotlib),
* the Measured section of every variant's docstring.

Run ``python -m zoo report`` after ``python -m zoo run --save``; commit the diff.
"""
import math
import re
import textwrap

import zoo
from zoo import results

README = results.ROOT / "README.md"
PLOTS = results.ROOT / "docs" / "plots"
BEGIN, END = "<!-- zoo:results:begin -->", "<!-- zoo:results:end -->"


def metric(fam, size):
    """('GFLOP/s', 'gflops') for arithmetic-heavy families, ('GB/s', 'gbps') for the rest."""
    flops, nbytes = fam.flops(results.parse_size(size)), fam.bytes_moved(results.parse_size(size))
    return ("GFLOP/s", "gflops") if flops > nbytes else ("GB/s", "gbps")


def headline(fam, by_size):
    """The size a family is summarised at: its HEADLINE_SIZE if measured, else its largest measured size."""
    wanted = getattr(fam.module, "HEADLINE_SIZE", None)
    if wanted is not None and results.size_key(wanted) in by_size:
        return results.size_key(wanted)
    return max(by_size, key=_volume)


def _volume(key):
    size = results.parse_size(key)
    return size if isinstance(size, int) else math.prod(size)


def _pct(ratio):
    return "-" if ratio is None else f"{100 * ratio:.1f}%"


def family_table(fam, device_name, size, entries):
    unit, key = metric(fam, size)
    lines = [f"| variant | ms | {unit} | % of {fam.BASELINE} | registers | occupancy bound | correct |",
             "|---|---:|---:|---:|---:|---:|:---:|"]
    base = entries.get("baseline")
    ordered = ([base] if base else []) + [entries[v.name] for v in fam if v.name in entries]
    for m in ordered:
        r = m.get("resources") or {}
        correct = {True: "yes", False: "**no**", None: "demo" if m["name"] != "baseline" else "-"}[m.get("correct")]
        occ = r.get("occupancy")
        lines.append(f"| {m['name']} | {m['ms']:.4f} | {_num(m[key])} | {_pct(m.get('ratio'))} | "
                     f"{r.get('registers', '-')} | {'-' if occ is None else f'{occ:.0%}'} | {correct} |")
    return "\n".join(lines)


def plot(fam, slug, device_name, size, entries):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = [v.name for v in fam if v.name in entries and not v.demonstration]
    pct = [100 * (entries[n].get("ratio") or 0) for n in names]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.4))
    bars = ax.barh(names[::-1], pct[::-1], color="#4c72b0")
    ax.bar_label(bars, labels=[f"{p:.1f}%" for p in pct[::-1]], padding=3, fontsize=8)
    ax.axvline(100, color="#c44e52", linestyle="--", linewidth=1)
    ax.set_xlabel(f"% of {fam.BASELINE} (same run)")
    ax.set_title(f"{fam.name}, size {size}, {device_name}", fontsize=10)
    ax.set_xlim(0, max(pct + [100]) * 1.15)
    fig.tight_layout()
    PLOTS.mkdir(parents=True, exist_ok=True)
    path = PLOTS / f"{slug}-{fam.name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def measured_lines(variant, all_results):
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
        others = [f"{k}: {_pct(measured_at[k][variant.name].get('ratio'))}"
                  for k in sorted(measured_at, key=_volume) if k != size]
        others = f" Other sizes, % of {variant.family.BASELINE}: {', '.join(others)}." if others else ""
        lines += textwrap.wrap(
            f"{data['device']['name']}, size {size}: {_num(m[key])} {unit} ({_num(m['ms'] * 1e3)} us a call), "
            f"{_pct(m.get('ratio'))} of {variant.family.BASELINE}{extra}{verdict}.{others} "
            f"From results/{slug}.json.", width=84)
    return lines


def _num(value):
    """Thousands apart for big figures, three significant digits for small ones."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def rewrite_measured(variant, lines):
    """Replace the text under 'Measured:' in the variant's docstring; True if the file changed."""
    text = variant.path.read_text()
    match = re.search(r'(\nMeasured:\n)(.*?)(\n"""\n)', text, re.S)
    if not match or not lines:
        return False
    wrapped = "\n".join("    " + line for line in lines)
    new = text[:match.start(2)] + wrapped + text[match.end(2):]
    if new != text:
        variant.path.write_text(new)
        return True
    return False


def regenerate():
    """Rewrite README section, plots and docstrings; yields one line per thing done."""
    all_results = results.load_all()
    sections = []
    for slug, data in all_results.items():
        name = data["device"]["name"]
        sections.append(f"### {name}\n\nFrom `results/{slug}.json` (updated {data.get('updated', '?')}, "
                        f"commit {data.get('commit', '?')}).\n")
        for fam in zoo.families():
            by_size = data["families"].get(fam.name)
            if not by_size:
                continue
            size = headline(fam, by_size)
            sections.append(f"#### {fam.name}, size {size}\n\n" + family_table(fam, name, size, by_size[size]))
            path = plot(fam, slug, name, size, by_size[size])
            if path:
                sections.append(f"![{fam.name} on {name}]({path.relative_to(results.ROOT).as_posix()})")
                yield f"plot {path.relative_to(results.ROOT)}"
    body = "\n\n".join(sections) if sections else "No GPU results yet: run `python -m zoo run --save` on a GPU."
    readme = README.read_text()
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    README.write_text(readme[:start] + "\n" + body + "\n" + readme[end:])
    yield "README.md results section"
    for fam in zoo.families():
        for v in fam:
            if rewrite_measured(v, measured_lines(v, all_results)):
                yield f"Measured of {fam.name}/{v.name}"
