"""Exercises: learn a step by writing it (``python -m zoo exercise``).

An exercise is one step of a family and the step it is written against
(``Variant.compared_with``: its BASE, the step it was copied FROM, else the step
before). ``start`` writes that earlier step's file with the lines the step changes
replaced by ``TODO(exercise)`` blocks (``zoo.exercise.starter``); ``check`` runs the
learner's file as a variant of the family in the simulator, at the family's test
sizes and the exercise's own, and compares what the simulator saw it do with what
the zoo's step does (``zoo.exercise.observe``); ``hint`` shows one hint more each
time, each about a block the learner writes.

A family opts in with a module ``exercises.py`` in its folder (host tooling, never
imported by a step)::

    EXERCISES = {
        "v03": {                                # the step the exercise teaches
            "sizes": (2500,),                   # checked beyond TEST_SIZES: what the step adds
            "lesson_size": 2500,                # where the simulator's figures are compared
            "lesson": (("store_sectors_per_request", "<=", "why the figure matters"),),
            "hints": ("a hint of our own",),    # shown first, before the hints of each TODO block
            "todo": {2: "prose for TODO 2"},    # more words in a TODO block of the starter
            "start": "v04",                     # optional: another earlier step to start from
            "kinds": ("int4",),                 # optional: the kinds of input of "sizes" and the lesson (the
        },                                      # family's first by default): where the step's own kernel runs
    }
    FIGURES = {"mixed_parity_warps": fn}        # optional: figures of the family's own, fn(observation)

A lesson compares one figure of ``zoo.exercise.observe.FIGURES`` (or the family's
FIGURES) with the zoo's step: ``"<="`` the learner's may not exceed it by more than
10%, ``">="`` may not fall short of it by more than 10%, ``"=="`` must equal it.
"""

import functools
import importlib
import importlib.util
from dataclasses import dataclass, field

from zoo.registry import RegistryError

RELATIONS = ("<=", ">=", "==")
KEYS = {"sizes", "lesson_size", "lesson", "hints", "todo", "start", "kinds"}


@dataclass
class Exercise:
    """One exercise: write ``step`` starting from ``start``."""

    family: object
    step: object
    start: object
    sizes: tuple = ()
    lesson_size: object = None
    lesson: tuple = ()
    hints: tuple = ()
    todo: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    kinds: tuple = ()  # the kinds of input of ``sizes`` and the lesson; () is the family's first

    @property
    def key(self):
        """'reverse/v03': what the EXERCISE line of a learner's file says."""
        return f"{self.family.name}/{self.step.name[:3]}"

    @property
    def file_name(self):
        return f"{self.family.name}_{self.step.name}.py"

    def cases(self):
        """(size, kind) checked: the family's simulator test cases, then the exercise's own sizes."""
        cases = list(self.family.test_cases())
        for size in self.sizes:
            for kind in self.kinds or self.family.kinds[:1]:
                if (size, kind) not in cases:
                    cases.append((size, kind))
        return cases


def _load(fam):
    name = f"{fam.module.__name__}.exercises"
    if importlib.util.find_spec(name) is None:
        return []
    module = importlib.import_module(name)
    found = []
    for key, data in getattr(module, "EXERCISES", {}).items():
        where = f"{module.__file__}: exercise {key!r}"
        unknown = set(data) - KEYS
        if unknown:
            raise RegistryError(
                f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(KEYS))}"
            )
        try:
            step = fam[key]
            start = fam[data["start"]] if "start" in data else step.compared_with
        except KeyError as e:
            raise RegistryError(f"{where}: {e.args[0]}") from None
        if start is None or start is step:
            raise RegistryError(f"{where}: {step.name} has no other step to start from")
        if step.demonstration or step.launch_only:
            raise RegistryError(f"{where}: {step.name} is a demonstration or launch-only step: nothing to write")
        unknown_kinds = set(data.get("kinds", ())) - set(fam.kinds)
        if unknown_kinds:
            raise RegistryError(f"{where}: kinds {sorted(unknown_kinds)} are not the family's: {fam.kinds}")
        for figure, relation, _why in data.get("lesson", ()):
            if relation not in RELATIONS:
                raise RegistryError(f"{where}: lesson {figure!r}: relation {relation!r} is not one of {RELATIONS}")
        found.append(
            Exercise(
                fam,
                step,
                start,
                sizes=tuple(data.get("sizes", ())),
                lesson_size=data.get("lesson_size"),
                lesson=tuple(data.get("lesson", ())),
                hints=tuple(data.get("hints", ())),
                todo=dict(data.get("todo", {})),
                figures=dict(getattr(module, "FIGURES", {})),
                kinds=tuple(data.get("kinds", ())),
            )
        )
    return sorted(found, key=lambda e: e.step.number)


@functools.cache
def _by_family(name):
    import zoo

    return tuple(_load(zoo.family(name)))


def of_family(fam):
    """The exercises of a Family object (a family outside zoo's folders too), in step order."""
    return _load(fam)


def exercises(families=None):
    """Every exercise, in teaching order (of the given family names, when named)."""
    import zoo

    names = families or [f.name for f in zoo.families()]
    return [e for name in names for e in _by_family(name)]


def find(family, step):
    """The exercise of ``family`` (a name) that teaches ``step`` (v03, 3, a file or technique name); KeyError else."""
    import zoo

    fam = zoo.family(family)
    mine = _by_family(fam.name)
    if not mine:
        raise KeyError(f"family {fam.name} has no exercises yet; `python -m zoo exercise list` shows those there are")
    try:
        wanted = fam[step]
    except KeyError:
        wanted = None
    for e in mine:
        if e.step is wanted:
            return e
    raise KeyError(f"{fam.name} has no exercise for {step!r}; it has: " + ", ".join(e.step.name for e in mine))


def by_key(key):
    """The exercise an EXERCISE line names ('reverse/v03')."""
    family, _, step = key.partition("/")
    return find(family, step)
