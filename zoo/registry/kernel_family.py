"""A family (``Family``): its spec module, read through, the steps found in its folder, the kinds of input, the
tolerances and library rows it declares, and the checks every call of its steps shares."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from zoo.device import properties
from zoo.registry.spec import (
    BASE_LINE,
    FROM_LINE,
    HEADINGS,
    REQUIRED_SPEC,
    VARIANT_FILE,
    RegistryError,
    Size,
)
from zoo.registry.variant import Variant
from zoo.runtime import SIMULATOR, arrays


class Family:
    """A kernel family: its spec module and its ordered variants."""

    def __init__(self, name: str, module: ModuleType) -> None:
        self.name = name
        self.module = module
        missing = [k for k in REQUIRED_SPEC if not hasattr(module, k)]
        if missing:
            raise RegistryError(f"family {name}: spec lacks " + ", ".join(f"{k} ({REQUIRED_SPEC[k]})" for k in missing))
        self.path = Path(str(module.__file__)).parent
        self.variants = tuple(self._discover())

    def __repr__(self) -> str:
        return f"<family {self.name}: {len(self.variants)} variants>"

    def __getattr__(self, attr: str) -> Any:
        # The spec's names (reference, make_inputs, TOLERANCE, ...) read through.
        if attr in REQUIRED_SPEC or attr.isupper():
            return getattr(self.module, attr)
        raise AttributeError(attr)

    # -- kinds of input, tolerance, baselines, ceilings ------------------------------------
    @property
    def kinds(self) -> tuple[Any, ...]:
        """The kinds of input every size is checked and timed for; (None,) when the spec names none."""
        return tuple(getattr(self.module, "INPUT_KINDS", None) or (None,))

    def inputs(self, size: Size, seed: int, kind: str | None = None) -> tuple[Any, ...]:
        """make_inputs for one kind (the default kind when None)."""
        if self.kinds == (None,):
            if kind is not None:
                raise ValueError(f"{self.name} has no kinds of input, got {kind!r}")
            return self.make_inputs(size, seed)
        if kind is None:
            kind = self.kinds[0]
        if kind not in self.kinds:
            raise ValueError(f"{self.name} has no input kind {kind!r}; it has: {', '.join(self.kinds)}")
        return self.make_inputs(size, seed, kind=kind)

    def kind_params(self, kind: str | None = None) -> dict[str, Any]:
        """The keyword arguments a kind of input adds to every call (KIND_PARAMS; {} for most kinds)."""
        if kind is None:
            kind = self.kinds[0]
        return dict(getattr(self.module, "KIND_PARAMS", {}).get(kind, {}))

    def cases(self, sizes: Iterable[Size]) -> list[tuple[Size, str | None]]:
        """(size, kind) for every size and every kind of input."""
        return [(size, kind) for size in sizes for kind in self.kinds]

    def test_cases(self) -> list[tuple[Size, str | None]]:
        """(size, kind) the tests check in the simulator: every kind at TEST_SIZES, or at the fewer
        sizes KIND_TEST_SIZES gives it."""
        fewer = getattr(self.module, "KIND_TEST_SIZES", {})
        return [
            (size, kind) for size in self.module.TEST_SIZES for kind in self.kinds if size in fewer.get(kind, (size,))
        ]

    def check_size(self, size: Size) -> None:
        """ValueError, before anything is allocated, for a size this family cannot take or this machine cannot hold."""
        import os

        dims = getattr(self.module, "SIZE_DIMS", (1,))
        count = len(size) if isinstance(size, tuple) else 1
        if count not in dims:
            raise ValueError(
                f"a size of {self.name} is {' or '.join(map(str, dims))} number(s) joined by 'x', got {count}"
            )
        need = max(self.bytes_moved(size, kind) for kind in self.kinds)
        if SIMULATOR:
            have, where = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's memory"
        else:
            have, where = properties()["memory_bytes"], "the GPU's memory"
        if need > have:
            raise ValueError(
                f"size {'x'.join(map(str, size)) if count > 1 else size} of {self.name} moves "
                f"{need / 1e9:,.1f} GB, more than {where} ({have / 1e9:,.1f} GB)"
            )

    def bytes_moved(self, size: Size, kind: str | None = None, **params: Any) -> float:
        """The spec's bytes_moved for one kind of input (the first when None): passed to a spec whose
        bytes_moved takes a ``kind`` argument, the size alone otherwise; ``params`` (a kind's KIND_PARAMS)
        go through as they are."""
        spec = self.module.bytes_moved
        if not self._bytes_by_kind:
            return spec(size, **params)
        return spec(size, kind=self.kinds[0] if kind is None else kind, **params)

    @functools.cached_property
    def _bytes_by_kind(self):
        import inspect

        return "kind" in inspect.signature(self.module.bytes_moved).parameters

    def tolerance(self, size: Size, row: str | None = None) -> float:
        """The relative error accepted at this size (TOLERANCE may be a function of the size); ``row`` names a
        baseline or CPU row, which ROW_TOLERANCE may give a tolerance of its own (a row checked against its own
        ROW_REFERENCE is exact unless it does). A step's is ``Variant.tolerance``."""
        default = 0 if row in self.row_references else self.TOLERANCE
        tol = getattr(self.module, "ROW_TOLERANCE", {}).get(row, default)
        return float(tol(size)) if callable(tol) else tol

    @functools.cached_property
    def dtypes(self):
        """The dtypes accepted for the first input (for every input, unless DTYPE names them one by one)."""
        return self._input_rules[0][0]

    @functools.cached_property
    def _input_rules(self):
        """((dtypes accepted, ndim) for each of INPUTS, in order), from DTYPE and NDIM, each either one rule
        for all or a {input name: rule} dict."""

        def dtypes(d):
            return tuple(np.dtype(x) for x in d) if isinstance(d, (tuple, list)) else (np.dtype(d),)

        names = [n.rstrip("?") for n in self.INPUTS]
        rules = []
        for what, value in (("DTYPE", self.DTYPE), ("NDIM", self.NDIM)):
            if isinstance(value, dict):
                if set(value) != set(names):
                    raise RegistryError(f"family {self.name}: {what} names {sorted(value)}, INPUTS are {names}")
                rules.append([value[n] for n in names])
            else:
                rules.append([value] * len(names))
        return tuple((dtypes(d), n) for d, n in zip(*rules, strict=True))

    @property
    def rate_beside(self) -> str | None:
        """The family whose best rate the pages give beside this one's (RATE_BESIDE: attention beside hgemm)."""
        return getattr(self.module, "RATE_BESIDE", None)

    @functools.cached_property
    def updated_in_place(self) -> tuple[int, ...]:
        """Positions among INPUTS of the arrays a call updates in place (UPDATED_IN_PLACE: rmsnorm's residual)."""
        names = [n.rstrip("?") for n in self.INPUTS]
        updated = tuple(getattr(self.module, "UPDATED_IN_PLACE", ()))
        unknown = sorted(set(updated) - set(names))
        if unknown:
            raise RegistryError(f"family {self.name}: UPDATED_IN_PLACE names {unknown}, not among INPUTS {names}")
        return tuple(names.index(n) for n in updated)

    @functools.cached_property
    def host_inputs(self) -> bool:
        """True when the steps take host arrays and do their own transfers (HOST_INPUTS)."""
        return bool(getattr(self.module, "HOST_INPUTS", False))

    @property
    def baselines(self) -> dict[str, Callable[..., Any]]:
        """{row name: fn(*cupy_inputs, out)}: 'baseline' first, then EXTRA_BASELINES, then CEILINGS."""
        return {"baseline": self.baseline, **getattr(self.module, "EXTRA_BASELINES", {}), **self.ceilings}

    @property
    def cpu_rows(self):
        """{row name: (fn(*host_inputs), threads)} of the host computations timed beside the GPU rows (CPU)."""
        return dict(getattr(self.module, "CPU", {}))

    @property
    def ceilings(self) -> dict[str, Callable[..., Any]]:
        """{row name: fn(*cupy_inputs, out)} of the rows that bound the family rather than compute its result."""
        return dict(getattr(self.module, "CEILINGS", {}))

    @property
    def row_references(self):
        """{row name: fn(*host_inputs, **params)} of the rows checked against a result of their own (ROW_REFERENCE)."""
        return dict(getattr(self.module, "ROW_REFERENCE", {}))

    def checked(self, row: str) -> bool:
        """Whether a library row's output is checked: every baseline; a ceiling against its ROW_REFERENCE, or against
        the family's reference when ROW_TOLERANCE gives it a coarser tolerance (a float16 result)."""
        return (
            row not in self.ceilings or row in self.row_references or row in getattr(self.module, "ROW_TOLERANCE", {})
        )

    @functools.cached_property
    def strongest(self) -> str:
        """The name of the row the spec's STRONGEST declares: what a practitioner would pick instead of the steps.

        RegistryError when it names no row of the family's, or a row whose output is never checked (a ceiling
        without a ROW_REFERENCE): every figure is given as a % of it, so it must be right."""
        name = self.module.STRONGEST
        if name not in self.baselines:
            raise RegistryError(
                f"family {self.name}: STRONGEST = {name!r} names none of its rows: " + ", ".join(self.baselines)
            )
        if not self.checked(name):
            raise RegistryError(
                f"family {self.name}: STRONGEST = {name!r} is a ceiling whose output is never checked: give it a "
                "ROW_REFERENCE (what it must produce), or name a baseline"
            )
        return name

    def _discover(self):
        by_number = {}
        for f in sorted(self.path.iterdir()):
            if not f.name.startswith("v") or f.suffix != ".py":
                continue
            m = VARIANT_FILE.match(f.name)
            if not m:
                raise RegistryError(f"{f}: a variant file is named vNN_technique.py (two digits, lower case)")
            number = int(m.group(1))
            if number in by_number:
                raise RegistryError(f"{f}: number {number:02d} already used by {by_number[number].path.name}")
            by_number[number] = Variant(self, number, m.group(2), f)
        numbers = sorted(by_number)
        if numbers != list(range(1, len(numbers) + 1)):
            missing = sorted(set(range(1, (numbers or [0])[-1] + 1)) - set(numbers))
            raise RegistryError(
                f"family {self.name}: variant numbers must run 01, 02, ... without gaps; "
                f"missing {', '.join(f'v{n:02d}' for n in missing)}"
            )
        for n in numbers:
            v = by_number[n]
            absent = [h for h in HEADINGS if h not in v.sections]
            if absent:
                raise RegistryError(f"{v.path}: docstring lacks the heading(s) " + ", ".join(f"'{h}:'" for h in absent))
            text = v.path.read_text()
            for what, pattern in (("BASE", BASE_LINE), ("FROM", FROM_LINE)):
                found = pattern.search(text)
                if found and not (int(found.group(1)[1:]) in by_number and int(found.group(1)[1:]) < n):
                    raise RegistryError(f"{v.path}: {what} = {found.group(1)!r} is not an earlier step of {self.name}")
        return [by_number[n] for n in numbers]

    @property
    def summary(self) -> str:
        return (self.module.__doc__ or "").strip().splitlines()[0]

    @functools.cached_property
    def spec_source(self) -> str:
        """The text of the family's spec (its ``__init__.py``)."""
        return Path(str(self.module.__file__)).read_text()

    def __iter__(self) -> Iterator[Variant]:
        return iter(self.variants)

    def __len__(self) -> int:
        return len(self.variants)

    def __getitem__(self, key: int | str) -> Variant:
        """A variant by number (2), short name ('v02', or 'v2'), file name ('v02_grid_stride') or technique."""
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            key = f"v{int(key):02d}"
        elif isinstance(key, str) and re.fullmatch(r"[vV]\d+", key):  # v3 is step 3, as 3 and v03 are
            key = f"v{int(key[1:]):02d}"
        for v in self.variants:
            if key in (v.name, v.technique, v.name[:3], v.path.name):
                return v
        raise KeyError(
            f"family {self.name} has no variant {key!r}; it has: " + ", ".join(v.name for v in self.variants)
        )

    def validate(self, *inputs: Any, **params: Any) -> str | None:
        """The checks every family shares; returns the arrays' kind. Raises before any launch.

        It runs on every call, so it is one pass over the arrays with what it needs from the spec read once
        (``_arguments``); the wording of an error is worked out only when there is one."""
        arguments, required, rules, shared_dtype = self._arguments
        if not required <= len(inputs) <= len(arguments) or not inputs:
            if not required and not inputs:
                raise TypeError(f"{self.name} takes no arrays")
            raise TypeError(f"{self.name} takes arrays ({', '.join(self.INPUTS)}), got {len(inputs)}")
        kind = dtype = None
        for (name, optional), a in zip(arguments, inputs, strict=False):  # optional trailing inputs may be left out
            if a is None:
                if not optional:
                    raise TypeError(f"{name} is required, got None")
                continue
            library = arrays.library_of(a)
            if kind is None:
                kind, dtype = library, a.dtype
                if self.host_inputs and kind != arrays.NUMPY:
                    raise TypeError(
                        f"{self.name} takes NumPy arrays: its steps move them to the GPU and back "
                        f"themselves (got {kind} arrays)"
                    )
            elif library != kind:
                kinds = sorted({arrays.library_of(x) for x in inputs if x is not None})
                raise TypeError(f"arrays of mixed kinds ({', '.join(kinds)}): pass all host or all device arrays")
            dtypes, ndim = rules[name]
            if a.dtype not in dtypes:
                raise TypeError(f"{name} must be {' or '.join(str(d) for d in dtypes)}, got {np.dtype(a.dtype)}")
            if a.ndim != ndim:
                raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(a.shape)}")
            if a.size == 0:
                raise ValueError(f"{name} is empty (shape {tuple(a.shape)})")
            if not arrays.is_c_contiguous(a, library):
                raise ValueError(
                    f"{name} is not C-contiguous: pass a contiguous copy "
                    "(numpy.ascontiguousarray or cupy.ascontiguousarray)"
                )
            if shared_dtype and a.dtype != dtype:
                given = [(n, x) for (n, _), x in zip(arguments, inputs, strict=False) if x is not None]
                raise TypeError(
                    f"{self.name}'s arrays must share one dtype, got "
                    + ", ".join(f"{n} {np.dtype(x.dtype)}" for n, x in given)
                )
        return kind

    @functools.cached_property
    def _arguments(self):
        """(((name, optional), ...) for INPUTS, how many are required, {name: (dtypes, ndim)}, whether one call's
        arrays share one dtype (DTYPE is not given input by input))."""
        arguments = tuple((n.rstrip("?"), n.endswith("?")) for n in self.INPUTS)
        rules = dict(zip((name for name, _ in arguments), self._input_rules, strict=True))
        return arguments, sum(not optional for _, optional in arguments), rules, not isinstance(self.DTYPE, dict)
