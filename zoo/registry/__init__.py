"""Families and variants, discovered from the files; nothing is listed by hand.

A family is a package ``zoo/kernels/<family>/`` whose ``__init__.py`` is its spec
(see ``REQUIRED_SPEC``). A variant is a file ``vNN_<technique>.py`` in it with a
docstring holding the headings Changes and Why it is faster (its measured figures live in
results/, shown by ``zoo show`` and the walkthrough page, never in the file), and a
``launch(*inputs, out, **params)`` function. A step that imports an earlier
step names it ``BASE = "vNN"``: its Changes, ``zoo diff`` and the walkthrough's
diff are then against the base rather than the step before. Either it launches
the base's kernel unchanged, only differently (other tiles, another plan), and
defines no kernel of its own (``Variant.launch_only``: nothing to write as an
exercise), or it has a kernel of its own and hands the base the inputs that
kernel does not take (other formats, shapes it cannot tile). A step
copied from an earlier step other than the one before it says ``FROM = "vNN"``, and so does a step whose base is
not the step its file is written against: a kernel of its own built on the step before, which hands the calls it
does not take to an earlier step that runs them itself (gemv v08 to v10: ``FROM`` the step before, ``BASE`` v06,
whose kernels take every format), so that a launch falls through one ``BASE`` at most. ``FROM`` then sets the
diff, ``BASE`` the import. A step whose arithmetic is
coarser than the family's (TF32 tensor cores in a float32 family) says ``TOLERANCE = ...`` (a number or a
function of the size), which replaces the family's for that step only. More family folders can be added
with ``ZOO_KERNEL_PATH`` (folders separated like PATH), which is how a test adds
a throwaway family.

A step whose kernel reads some inputs in a layout of its own (weights reordered once, as a model's are when it
loads) defines ``pack(*inputs) -> inputs``: the arrays in that layout, in the library they came in (NumPy,
CuPy, numba), unchanged where the kernel does not take them; which inputs it reorders may depend on their shapes,
dtypes, strides and alignment, never on their values. That is the preparation, and it is made once, never on every
call: ``Variant.packed(inputs)`` packs a set of inputs, which is how everything that times a step (the harness,
asv, the sweeps, the profiler) prepares each set before the timing, apart from it; a plain call through ``Variant``
finds its inputs in ``Variant.prepared`` (``PreparedInputs``), which packs the first call's arrays and hands the
packed ones to every later call on the same arrays (a decode loop: the same weights, a new x each call). So the
step's ``launch`` always gets packed inputs, and a user's loop of plain calls runs at the launch's pace.

A step that needs a newer GPU than zoo's floor (compute capability 7.0) says so in one line,
``MIN_CC = (8, 0)  # mma.sync m16n8k16, cp.async``: the comment is the reason users are shown. The same
line in a family's spec applies to every step. On an older GPU a call raises ``zoo.errors.Unsupported``
before any launch, and ``zoo check``, ``zoo run``, asv and the GPU tests skip the step with that message.

Every family names its strongest row, ``STRONGEST = "row"``: of its library rows (``baseline``, EXTRA_BASELINES,
CEILINGS), the one a practitioner would pick instead of the steps (CUB, cuBLAS in the steps' precision, SDPA,
NCCL, a copy of the same bytes for a memory-bound family). Every table gives each step's share of it, naming it
(``zoo.bench.strongest``); it must be a row whose output is checked (``Family.strongest``). Each row is checked
against the family's reference, or against its own ``ROW_REFERENCE`` when it computes something else (a copy:
the bytes it copied).

Discovery fails loudly on a gap in the numbers, a duplicate number, a file that
looks like a variant but is misnamed, a missing heading, or a BASE that is not
an earlier step of the family.
"""

import importlib
import pkgutil

import zoo.kernels
from zoo.registry.kernel_family import Family
from zoo.registry.prepared import PreparedInputs
from zoo.registry.spec import (
    BASE_LINE,
    FROM_LINE,
    HEADINGS,
    KERNEL_LINE,
    MAX_CC_LINE,
    MIN_CC_LINE,
    OPTIONAL_SPEC,
    REQUIRED_SPEC,
    VARIANT_FILE,
    ZOO_MIN_CC,
    ZOO_MIN_CC_REASON,
    RegistryError,
    Size,
)
from zoo.registry.variant import Variant

__all__ = [
    "BASE_LINE",
    "FROM_LINE",
    "HEADINGS",
    "KERNEL_LINE",
    "MAX_CC_LINE",
    "MIN_CC_LINE",
    "OPTIONAL_SPEC",
    "REQUIRED_SPEC",
    "VARIANT_FILE",
    "ZOO_MIN_CC",
    "ZOO_MIN_CC_REASON",
    "Family",
    "PreparedInputs",
    "RegistryError",
    "Size",
    "Variant",
    "families",
    "family",
]


def _kernel_packages():
    for info in pkgutil.iter_modules(zoo.kernels.__path__):
        if info.ispkg and not info.name.startswith("_"):
            yield info.name


_FAMILIES = None


def families() -> list[Family]:
    """All families, in teaching order."""
    global _FAMILIES
    if _FAMILIES is None:
        found = [Family(n, importlib.import_module(f"zoo.kernels.{n}")) for n in _kernel_packages()]
        _FAMILIES = sorted(found, key=lambda f: (f.ORDER, f.name))
    return list(_FAMILIES)


def family(name: str) -> Family:
    for f in families():
        if f.name == name:
            return f
    raise KeyError(f"no family {name!r}; families: " + ", ".join(f.name for f in families()))
