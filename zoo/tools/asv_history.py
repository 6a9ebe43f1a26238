"""Each family's performance history, read from the asv results in results/asv: a plot and a paragraph a family.

asv records every benchmark per commit and GPU (README, "Performance history"); its html needs ``asv publish``
and a browser. This draws, for each family, the one series a reader wants first: the family's headline rate,
the fastest real step's ``track_rate`` at the family's headline size, at every commit recorded, one line per GPU.
``zoo report`` draws the plots (docs/plots/<family>-history.png) and each walkthrough page shows its family's.

A stored result counts only where its version equals the benchmark's in results/asv/benchmarks.json, as in
asv's own pages, and only in a machine folder of a GPU (``nvidia-*``): a folder asv made on a host without one
holds skips.
"""

import datetime
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import zoo
from zoo.bench import figures

ROOT = Path(__file__).resolve().parents[2]
ASV_RESULTS = ROOT / "results" / "asv"
PLOTS = ROOT / "docs" / "plots"
TRACK = "track_rate"
GPU_FOLDER = "nvidia-*"
STEP_NAME = re.compile(r"v\d+_\w+")  # a step's name; baselines and library rows are named otherwise


@dataclass(frozen=True)
class Point:
    """The headline figure at one commit on one GPU: the fastest step there and its rate."""

    commit: str
    date_ms: int  # the commit's date, as asv stores it (ms since the epoch)
    step: str
    rate: float


def class_name(fam):
    """The suite's class for a family (benchmarks/common.py names it so): vector_add -> VectorAdd."""
    return "".join(p.title() for p in fam.name.split("_"))


def benchmark_name(fam, track=TRACK):
    return f"bench_{fam.name}.{class_name(fam)}.{track}"


def headline_key(fam):
    """The size key a family is summarised at: HEADLINE_SIZE, else its largest BENCH size; its first kind of input."""
    size = getattr(fam.module, "HEADLINE_SIZE", None)
    if size is None:
        size = max(fam.BENCH_SIZES, key=lambda s: fam.bytes_moved(s) + fam.flops(s))
    return "x".join(str(s) for s in size) if isinstance(size, (tuple, list)) else str(size)


@functools.lru_cache(maxsize=4)
def load(results_dir=ASV_RESULTS):
    """(benchmarks.json's entries, {machine: [each stored result file's data]}), GPU machine folders only."""
    results_dir = Path(results_dir)
    path = results_dir / "benchmarks.json"
    benchmarks = json.loads(path.read_text()) if path.exists() else {}
    machines = {}
    for folder in sorted(results_dir.glob(GPU_FOLDER)):
        files = [f for f in sorted(folder.glob("*.json")) if f.name != "machine.json"]
        machines[folder.name] = [json.loads(f.read_text()) for f in files]
    return benchmarks, machines


def _values(data, name, version):
    """{(variant, size key): value} of one stored benchmark, or {} where absent, failed or of another version."""
    row = data["results"].get(name)
    if row is None:
        return {}
    columns = dict(zip(data["result_columns"], row, strict=False))  # asv leaves off trailing empty columns
    if columns.get("version") != version or columns.get("result") is None:
        return {}
    params = columns.get("params") or []
    if len(params) != 2:
        return {}
    values = {}
    for i, variant in enumerate(params[0]):
        for j, size in enumerate(params[1]):
            value = columns["result"][i * len(params[1]) + j]
            if value is not None and value == value:  # None: skipped; NaN: not run or failed
                values[variant.strip("'"), size.strip("'")] = value
    return values


def history(fam, results_dir=ASV_RESULTS):
    """{machine: [Point, ...] in commit-date order}: the fastest step's rate at the headline size per commit.

    Demonstration steps (wrong on purpose) are left out; a step that no longer exists still counts at the commits
    it was recorded at."""
    benchmarks, machines = load(Path(results_dir))
    name = benchmark_name(fam)
    if name not in benchmarks:
        return {}
    version, key = benchmarks[name]["version"], headline_key(fam)
    demonstrations = {v.name for v in fam if v.demonstration}
    out = {}
    for machine, stored in machines.items():
        points = {}
        for data in stored:
            rates = {
                variant: rate
                for (variant, size), rate in _values(data, name, version).items()
                if size == key and STEP_NAME.fullmatch(variant) and variant not in demonstrations
            }
            if rates:
                step = max(rates, key=rates.get)
                points[data["commit_hash"]] = Point(data["commit_hash"][:8], data["date"], step, rates[step])
        if points:
            out[machine] = sorted(points.values(), key=lambda p: (p.date_ms, p.commit))
    return out


def plot_path(fam):
    return PLOTS / f"{fam.name}-history.png"


def plot(fam, hist, unit, path=None):
    """Draw the history: x the commits recorded on any GPU in date order (each labelled with its hash and date),
    y the rate, a line a GPU, each point labelled with its step's number. The PNG carries no date or version
    (matplotlib's Software text left out), so the same results give the same bytes. Returns the path, or None
    without matplotlib or history."""
    if not hist:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    path = Path(path or plot_path(fam))
    commits = sorted({(p.date_ms, p.commit) for points in hist.values() for p in points})
    where = {commit: i for i, (_, commit) in enumerate(commits)}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 + 0.42 * len(commits)), 3.8))
    for machine, points in sorted(hist.items()):
        xs = [where[p.commit] for p in points]
        ax.plot(xs, [p.rate for p in points], marker="o", linewidth=1.2, label=f"{machine} ({len(points)} commits)")
        for x, p in zip(xs, points, strict=True):
            ax.annotate(p.step[:3], (x, p.rate), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=6)
    labels = [f"{commit} {_day(date_ms)}" for date_ms, commit in commits]
    ax.set_xticks(range(len(commits)), labels, rotation=90, fontsize=6, family="monospace")
    ax.set_xlim(-0.6, len(commits) - 0.4)
    ax.set_ylim(bottom=0, top=1.15 * max(p.rate for points in hist.values() for p in points))
    ax.set_ylabel(unit)
    ax.set_title(f"{fam.name}: the fastest step at {headline_key(fam)}, at each commit recorded", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    figures.save(fig, path, dpi=100)  # no Software text; written only when its bytes change
    plt.close(fig)
    return path


def _day(date_ms):
    return datetime.datetime.fromtimestamp(date_ms / 1e3, datetime.timezone.utc).strftime("%m-%d")


def section(fam, results_dir=ASV_RESULTS):
    """The walkthrough page's paragraphs on the family's asv history (Markdown, a list of blocks)."""
    hist = history(fam, results_dir)
    out = ["### Over commits (asv)"]
    if not hist:
        out.append(
            f"No asv history of {benchmark_name(fam)} at {headline_key(fam)} yet: "
            f"`.ci/asv-history --headline COMMIT...` with `ASV_FAMILIES={fam.name}` on a GPU records it."
        )
        return out
    counts = "; ".join(f"{m}: {_commits(ps)}" for m, ps in sorted(hist.items()))
    out.append(
        f"The fastest step's `track_rate` at size {headline_key(fam)} at each commit asv recorded, read from "
        f"`results/asv` ({counts}). Each point is labelled with the step that was fastest there; "
        "`asv publish` draws every step and size."
    )
    if plot_path(fam).exists():
        out.append(f"![{fam.name} over commits](plots/{plot_path(fam).name})")
    return out


def _commits(points):
    if len(points) == 1:
        return f"1 commit, {points[0].commit}"
    return f"{len(points)} commits, {points[0].commit} to {points[-1].commit}"


def regenerate(results_dir=ASV_RESULTS, names=None):
    """Draw every family's history plot that has points (of the families named, if given); yields one line per plot
    that changed."""
    benchmarks, _ = load(Path(results_dir))
    for fam in zoo.families():
        if names is not None and fam.name not in names:
            continue
        unit = benchmarks.get(benchmark_name(fam), {}).get("unit", "")
        before = plot_path(fam).read_bytes() if plot_path(fam).exists() else None
        path = plot(fam, history(fam, results_dir), unit)
        if path and path.read_bytes() != before:
            yield f"plot {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"


def table(results_dir=ASV_RESULTS):
    """Families x GPUs: the commits of each family's headline history (a text table)."""
    _, machines = load(Path(results_dir))
    names = sorted(machines)
    lines = ["family        headline size      " + "  ".join(f"{m:>22}" for m in names)]
    for fam in zoo.families():
        hist = history(fam, results_dir)
        cells = "  ".join(f"{len(hist.get(m, [])):>22}" for m in names)
        lines.append(f"{fam.name:13} {headline_key(fam):18} {cells}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
