"""Tune tables: where ``python -m zoo tune <family>`` keeps what it measured on this GPU, and where steps read it.

A family whose steps launch a measured choice (sgemm's tile shapes, gemv's ring kernel) keeps one table a GPU,
in two places: the user's cache (``~/.cache/zoo/tune``, or ``$ZOO_CACHE/tune``), which every ``zoo tune`` writes,
so that an installed zoo tunes too; and the repository's results/tune, which ``zoo tune --save`` also writes and
which ships the tables of the GPUs the zoo was measured on. A lookup reads the cache's table, else the
repository's, else none (the family's defaults). Nothing here imports the host tooling (``zoo.results``,
``zoo.harness``): the steps import it.
"""

import json
import os
from pathlib import Path

from zoo.device import slug

RESULTS = Path(__file__).resolve().parents[1] / "results"  # the repository's results folder


def cache_path(family):
    """This GPU's table of ``family`` in the user's cache: $ZOO_CACHE, else $XDG_CACHE_HOME/zoo, else ~/.cache/zoo."""
    root = os.environ.get("ZOO_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zoo"
    return Path(root) / "tune" / f"{slug()}-{family}.json"


def repo_path(family):
    """This GPU's table of ``family`` as the repository ships it (``zoo tune --save`` writes it)."""
    return RESULTS / "tune" / f"{slug()}-{family}.json"


def found(*paths):
    """The first of ``paths`` that exists (the table a lookup reads), or None."""
    return next((p for p in paths if p.exists()), None)


def read(*paths):
    """The first of ``paths`` that exists, parsed; {} when none does."""
    path = found(*paths)
    return json.loads(path.read_text()) if path else {}


def class_entry(shape, rows):
    """A shape class's entry in a table: the rows timed and agreeing, fastest first, then the others (errors,
    disagreements), and the fastest as ``best`` (None when none was timed)."""
    timed = sorted((r for r in rows if "ms" in r and r["agrees"]), key=lambda r: r["ms"])
    return {
        "shape": list(shape),
        "best": timed[0] if timed else None,
        "rows": timed + [r for r in rows if r not in timed],
    }


def write(table, old, partial, *paths):
    """Write ``table`` to every one of ``paths``; where the sweep tuned only some classes (``partial``), ``old``
    (the table read before it) keeps the ones it did not tune."""
    if partial and "classes" in old:
        table["classes"] = {**old["classes"], **table["classes"]}
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(table, indent=1) + "\n")
