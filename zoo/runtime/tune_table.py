"""Tune tables: where ``python -m zoo tune <family>`` keeps what it measured on this GPU, and where steps read it.

A family whose steps launch a measured choice (sgemm's tile shapes, gemv's ring kernel) keeps one table a GPU,
in two places: the user's cache (``~/.cache/zoo/tune``, or ``$ZOO_CACHE/tune``), which every ``zoo tune`` writes,
so that an installed zoo tunes too; and the repository's results/tune, which ``zoo tune --save`` also writes and
which ships the tables of the GPUs the zoo was measured on. A lookup reads the cache's table, else the
repository's, else none (the family's defaults). Nothing here imports the host tooling (``zoo.bench.results``,
``zoo.bench.harness``): the steps import it.

One tuning protocol, one notion of a shape class. A *shape class* is a set of call shapes that one choice suits,
named for what sets them apart (sgemm: ``small``, ``skinny``, ``large``; gemv: blocks an SM), tuned at one shape
that stands for it. A family declares its classes once, as ``ShapeClasses({name: shape tuned at}, place)``, where
``place(*shape, sms=None)`` names the class of any call's shape on this GPU (from its SM count). Its tuning sweep,
``zoo/kernels/<family>/sweeps/tune.py``, offers what ``python -m zoo tune`` uses:

    SHAPE_CLASSES                   the family's ShapeClasses (a mapping: class -> shape tuned at; .of(*shape))
    candidates()                    what is timed; each row saves one as ``tiles`` (a dict)
    sweep(shapes, progress, save)   time them at each class's shape (or at ``shapes``), write the table, return it
    cache_path(), path()            where the table is kept (this module's ``cache_path`` and ``repo_path``)

A table's row names the kernel it timed for what it is (``"kernel": "double_buffered"``), never by the number of
the step that has it, so renumbering a step breaks no saved table. A lookup files each saved class under the class
its tuned shape is in now (``ShapeClasses.filed``), so a table tuned when the classes were drawn otherwise still
reads right.
"""

import json
from collections.abc import Mapping
from pathlib import Path

from zoo.runtime import user_cache
from zoo.runtime.gpu import slug

RESULTS = Path(__file__).resolve().parents[2] / "results"  # the repository's results folder


def cache_path(family):
    """This GPU's table of ``family`` in the user's cache (``zoo.runtime.user_cache``)."""
    return user_cache.root() / "tune" / f"{slug()}-{family}.json"


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


class ShapeClasses(Mapping):
    """A family's shape classes: {class: the shape it is tuned at}, and ``of(*shape)``, the class of any call's shape
    (see the module docstring)."""

    def __init__(self, tuned_at, place):
        self.tuned_at = {name: tuple(shape) for name, shape in tuned_at.items()}
        self.place = place  # place(*shape, sms=None) -> class name

    def __getitem__(self, name):
        return self.tuned_at[name]

    def __iter__(self):
        return iter(self.tuned_at)

    def __len__(self):
        return len(self.tuned_at)

    def of(self, *shape, sms=None):
        """The class of a call of this shape, on a GPU of ``sms`` SMs (this one's by default)."""
        return self.place(*shape, sms=sms)

    def filed(self, entries):
        """A table's {class: entry}, each entry under the class its tuned shape is in now, whatever its saved name;
        where two land in one class, the one saved under that name keeps it."""
        now = {name: self.of(*entry["shape"]) if entry.get("shape") else name for name, entry in entries.items()}
        ordered = sorted(entries.items(), key=lambda item: now[item[0]] == item[0])  # saved under its own name last
        return {now[name]: entry for name, entry in ordered}


def class_of(tune_module, shape):
    """The class of ``shape`` (a size's dims) in a tuning sweep's classes: what ``zoo tune --size`` tunes it as."""
    return tune_module.SHAPE_CLASSES.of(*shape)
