"""Sweeps: commands that vary one parameter on the GPU, print a table, write a CSV and draw a PNG.

A family's sweeps and tuning live in its ``sweeps/`` subpackage, apart from the steps (``zoo/kernels/<family>/
sweeps/``): each module there with a ``COMMAND`` is a subcommand of ``python -m zoo`` with no list to edit; its
``tune.py``, where the family has one, is what ``python -m zoo tune <family>`` runs (``tuning``); the other modules
are what those share. A step never imports from ``sweeps/``. A sweep module has:

    COMMAND = "divergence"        # the subcommand: python -m zoo divergence
    HELP = "one line for --help"
    COLUMNS = ("fraction", "variant", "ms")   # the CSV's columns, in order
    def add_arguments(parser): ...            # optional: the command's own options
    def measure(args) -> list[dict]           # the rows; args.simulator is True in the
                                              # simulator: tiny sizes, correctness only
    def plot(rows, device_name) -> matplotlib.figure.Figure   # from the rows (and results/, see below)
    def findings(rows) -> list[str]           # optional: a few sentences drawn from the rows
    READS_RESULTS = True                      # optional: plot() also reads results/*.json (the roofline's
                                              # steps), so `zoo report --family F` redraws it for any F

The CLI runs ``measure``, prints the rows (and the findings, if the module has them), writes
``results/sweeps/<gpu>-<command>.csv`` and ``docs/plots/<gpu>-<command>.png``. ``zoo report`` redraws every PNG from its
committed CSV and shows it in docs/results.md with its findings, so the pictures and the
sentences follow the data. Files
written in the simulator carry the simulator's name and are ignored by git.
"""

import csv
import importlib
import importlib.util
import math
import pkgutil
from pathlib import Path

import zoo
from zoo.bench import figures, results

SWEEPS_DIR = results.RESULTS_DIR / "sweeps"
PLOTS_DIR = results.ROOT / "docs" / "plots"
SIMULATOR_SLUG = "numba-cuda-simulator"
REQUIRED = ("COMMAND", "HELP", "COLUMNS", "measure", "plot")
SUBPACKAGE = "sweeps"  # zoo/kernels/<family>/sweeps/: the family's sweeps and tuning


def modules():
    """{command: sweep module} over every family, in teaching order."""
    found = {}
    for fam in zoo.families():
        for mod in _sweep_modules(fam):
            missing = [k for k in REQUIRED if not hasattr(mod, k)]
            if missing:
                raise zoo.registry.RegistryError(f"{mod.__file__}: a sweep module lacks {', '.join(missing)}")
            if mod.COMMAND in found:
                raise zoo.registry.RegistryError(f"{mod.__file__}: command {mod.COMMAND!r} is taken")
            mod.FAMILY = fam
            found[mod.COMMAND] = mod
    return found


def _sweep_modules(fam):
    """The family's sweep commands: the modules of its ``sweeps/`` with a ``COMMAND``."""
    folder = fam.path / SUBPACKAGE
    if (folder / "__init__.py").exists():
        for info in pkgutil.iter_modules([str(folder)]):
            mod = importlib.import_module(f"{fam.module.__name__}.{SUBPACKAGE}.{info.name}")
            if hasattr(mod, "COMMAND"):  # the others (tune, what the sweeps share) are no command
                yield mod


def tuning_module(fam):
    """The name of the family's tuning sweep (``sweeps/tune.py``, which ``python -m zoo tune`` runs), or None where it
    has none. Found without importing it: ``zoo doctor`` lists the families that have one."""
    name = f"{fam.module.__name__}.{SUBPACKAGE}.tune"
    if importlib.util.find_spec(name.rsplit(".", 1)[0]) is not None and importlib.util.find_spec(name):
        return name
    return None


def csv_path(slug, command, root=None):
    return Path(root or SWEEPS_DIR) / f"{slug}-{command}.csv"


def png_path(slug, command, root=None):
    return Path(root or PLOTS_DIR) / f"{slug}-{command}.png"


def write_csv(path, columns, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({k: _text(row.get(k)) for k in columns})
    return path


def _text(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


def read_csv(path):
    """Rows of a sweep CSV, numbers parsed back (int, then float, else the text)."""
    with open(path, newline="") as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]


def is_number(value):
    """Whether a cell of a row is a finite number (not a bool, NaN or infinity): a figure that was measured, as a
    sweep's findings and plots ask of the rows, fresh or read back from a CSV."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(text):
    for cast in (int, float):
        try:
            return cast(text)
        except (TypeError, ValueError):
            pass
    return None if text == "" else text


def findings(module, rows):
    """The module's findings for these rows, or [] if it has none."""
    return list(module.findings(rows)) if hasattr(module, "findings") else []


def draw(module, rows, device_name, path):
    """Save the sweep's figure as a PNG; None where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig = module.plot(rows, device_name)
    figures.save(fig, path, dpi=110)  # the same rows give the same bytes
    plt.close(fig)
    return path


def saved():
    """(slug, command, csv path) of every committed GPU sweep, for the report."""
    if not SWEEPS_DIR.exists():
        return []
    out = []
    for p in sorted(SWEEPS_DIR.glob("*.csv")):
        for command in modules():
            suffix = f"-{command}"
            if p.stem.endswith(suffix) and not p.stem.startswith(SIMULATOR_SLUG):
                out.append((p.stem[: -len(suffix)], command, p))
    return out


def no_timings(ax):
    """Fill a matplotlib axis with a note that there is nothing to draw: the simulator times nothing."""
    ax.text(
        0.5, 0.5, "no timings: the simulator checks correctness only", ha="center", va="center", transform=ax.transAxes
    )
    ax.set_axis_off()
