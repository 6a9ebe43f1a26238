"""A step of a family (``Variant``): its file, what it declares (BASE, FROM, MIN_CC, MAX_CC, TOLERANCE, pack), the
checks before a launch, the arrays its launch gets, and the call itself."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from zoo.device import compute_capability, properties
from zoo.device.jit import Kernel
from zoo.errors import Unsupported
from zoo.registry.prepared import PreparedInputs
from zoo.registry.spec import (
    BASE_LINE,
    FROM_LINE,
    KERNEL_LINE,
    MAX_CC_LINE,
    MIN_CC_LINE,
    ZOO_MIN_CC,
    ZOO_MIN_CC_REASON,
    RegistryError,
    Size,
    sections,
)
from zoo.runtime import SIMULATOR, arrays
from zoo.runtime import launch as lean_launch

if TYPE_CHECKING:  # for the annotations only: a family makes its variants
    from zoo.registry.kernel_family import Family


class Variant:
    """One step of a family: a file, its kernels and its ``launch``."""

    def __init__(self, family: Family, number: int, technique: str, path: str | Path) -> None:
        self.family = family
        self.number = number
        self.technique = technique
        self.path = Path(path)
        self.name = f"v{number:02d}_{technique}"
        self._module: ModuleType | None = None

    def __repr__(self) -> str:
        return f"<variant {self.family.name}/{self.name}>"

    @property
    def module(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(f"{self.family.module.__name__}.{self.name}")
            if not callable(getattr(self._module, "launch", None)):
                raise RegistryError(f"{self.path}: no launch(*inputs, out) function")
        return self._module

    @property
    def doc(self) -> str:
        return self.module.__doc__ or ""

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    @property
    def sections(self) -> dict[str, str]:
        return sections(self.doc)

    @property
    def demonstration(self) -> str | None:
        """Why this variant is wrong on purpose, or None for a real variant."""
        return getattr(self.module, "DEMONSTRATION", None)

    @functools.cached_property
    def base(self) -> Variant | None:
        """The earlier step whose kernel this one launches (its ``BASE = "vNN"``), or None.

        Read from the file's text, so listing a family's bases imports no step."""
        m = BASE_LINE.search(self.source)
        return self.family[m.group(1)] if m else None

    @functools.cached_property
    def launch_only(self) -> bool:
        """True for a step that launches its base's kernel and compiles none of its own (no ``@jit`` in its file):
        sgemm v10 and v13. A step with a base and a kernel of its own (gemv v07-v10, which hand the base what
        their kernel does not take) is not. Read from the file's text."""
        return self.base is not None and not KERNEL_LINE.search(self.source)

    @functools.cached_property
    def copied_from(self) -> Variant | None:
        """The earlier step this file was copied from and is written against (its ``FROM = "vNN"``), where that is
        not what the default says (its base, else the step before), or None."""
        m = FROM_LINE.search(self.source)
        return self.family[m.group(1)] if m else None

    @property
    def compared_with(self) -> Variant | None:
        """What this step's Changes and diff are written against: the step it was copied from, its base, else the
        step before (None for v01)."""
        if self.copied_from is not None:
            return self.copied_from
        if self.base is not None:
            return self.base
        if self.number == 1:
            return None
        previous = self.family[self.number - 1]
        return previous.base if previous.launch_only else previous  # after a launch-only step: the kernel it launches

    @functools.cached_property
    def requirement(self):
        """(the lowest compute capability this step runs on, why): its own ``MIN_CC`` line, else its family's,
        else zoo's floor; read from the files' text, so listing what steps need imports none of them."""
        found = [(ZOO_MIN_CC, ZOO_MIN_CC_REASON)]
        for text in (self.family.spec_source, self.source):
            m = MIN_CC_LINE.search(text)
            if m:
                found.append(((int(m.group(1)), int(m.group(2))), m.group(3) or "no reason given"))
        return max(found, key=lambda need: need[0])

    @property
    def min_cc(self):
        return self.requirement[0]

    @functools.cached_property
    def ceiling(self):
        """(the highest compute capability this step runs on, why), or None: its own or its family's ``MAX_CC``
        line, for arch-specific code such as sm_90a's, which no later GPU runs."""
        found = [MAX_CC_LINE.search(text) for text in (self.family.spec_source, self.source)]
        found = [((int(m.group(1)), int(m.group(2))), m.group(3) or "no reason given") for m in found if m]
        return min(found, key=lambda limit: limit[0], default=None)

    def unsupported(self, cc: tuple[int, int] | None = None) -> str | None:
        """Why this step cannot run on a GPU of compute capability ``cc`` (a tuple; default: the GPU present),
        or None when it can. The simulator runs every step."""
        need, why = self.requirement
        if cc is None:
            if SIMULATOR:
                return None

            cc, where = compute_capability(), f"this GPU ({properties()['name']}) has"
        else:
            where = "the target is"
        if tuple(cc) < need:
            return (
                f"{self.family.name}/{self.name} needs compute capability {need[0]}.{need[1]} ({why}); "
                f"{where} {cc[0]}.{cc[1]}"
            )
        if self.ceiling is not None and tuple(cc) > self.ceiling[0]:
            (major, minor), why = self.ceiling
            return (
                f"{self.family.name}/{self.name} runs on compute capability {major}.{minor} at most ({why}); "
                f"{where} {cc[0]}.{cc[1]}"
            )
        return None

    @functools.cached_property
    def _unsupported_here(self):
        """unsupported() for the GPU present, asked once: every call reads it."""
        return self.unsupported()

    def tolerance(self, size: Size) -> float:
        """The relative error accepted from this step at this size: its own ``TOLERANCE`` (a number or a function
        of the size) when the step declares one, else the family's."""
        own = getattr(self.module, "TOLERANCE", None)
        if own is None:
            return self.family.tolerance(size)
        return float(own(size)) if callable(own) else own

    @property
    def kernels(self):
        """The zoo.device.jit kernels defined in this file, in definition order."""
        return [v for v in vars(self.module).values() if isinstance(v, Kernel)]

    @property
    def source(self) -> str:
        return self.path.read_text()

    # -- calling ---------------------------------------------------------------
    def validate(self, *inputs: Any, **params: Any) -> tuple[str, tuple[Any, Any]]:
        """The family's checks, then this variant's own limits; returns (kind, (out shape, dtype)).

        Raises Unsupported first when the GPU present is too old for this step."""
        if self._unsupported_here:
            raise Unsupported(self._unsupported_here)
        family_checks, output_for, own_checks = self._checks
        kind = family_checks(*inputs, **params)
        output = output_for(*inputs, **params)
        if own_checks is not None:
            own_checks(*inputs, **params)
        return kind, output

    @functools.cached_property
    def _checks(self):
        """(the family's validate, the spec's output_for, this file's validate or None), looked up once."""
        return self.family.validate, self.family.module.output_for, getattr(self.module, "validate", None)

    def prepare(self, *inputs: Any, out: Any = None, **params: Any) -> Any:
        """Validate, move to the device and allocate: everything but the launch.

        Returns (device_inputs, device_out, result, kind): ``result`` is the object
        handed back to the caller once ``launch`` has filled ``device_out``.
        """
        kind, (shape, dtype) = self.validate(*inputs, **params)
        return self._place(inputs, out, kind, shape, dtype)

    @functools.cached_property
    def pack(self):
        """The step's ``pack(*inputs) -> inputs`` (its own layout of some inputs, made once), or None."""
        return getattr(self.module, "pack", None)

    def packed(self, inputs):
        """``inputs`` as the step's launch takes them: through its ``pack`` where it has one, else as they are. Packs
        every time: what times a step calls it once per set of inputs, before the timing."""
        return inputs if self.pack is None else tuple(self.pack(*inputs))

    @functools.cached_property
    def prepared(self):
        """The step's ``PreparedInputs`` (its ``pack``, made once per set of arrays), or None where it has no pack.
        A plain call reads its inputs through it; ``prepared.clear()`` after changing packed inputs in place."""
        return None if self.pack is None else PreparedInputs(self.pack)

    def _place(self, inputs, out, kind, shape, dtype):
        """prepare's second half: the arrays the step's launch gets, once the inputs are known to be valid."""
        if lean_launch.capture_stream is not None and (
            kind == arrays.NUMPY or out is None or self.family.host_inputs or self.pack is not None
        ):
            raise ValueError(
                f"{self.family.name}/{self.name} in a CUDA graph: pass device arrays and out= (a copy "
                "from the host or an allocation cannot be captured); a step that packs its inputs: launch "
                "it on Variant.packed's arrays"
            )
        if self.family.host_inputs:  # the step moves the data itself
            result = np.empty(shape, dtype) if out is None else out
            return tuple(inputs), result, result, kind
        if self.pack is not None:  # in the step's layout, made on the first call with these arrays (a host array
            inputs = self.prepared(inputs)  # packed on the host, then moved as every host array is)
        if out is not None:
            if arrays.library_of(out) != kind:
                raise TypeError(f"out is a {arrays.library_of(out)} array, the inputs are {kind}")
            if (out.shape != shape and tuple(out.shape) != tuple(shape)) or out.dtype != arrays.as_dtype(dtype):
                raise ValueError(
                    f"out must be {np.dtype(dtype)} of shape {tuple(shape)}, "
                    f"got {np.dtype(out.dtype)} of shape {tuple(out.shape)}"
                )
            if not arrays.is_c_contiguous(out, kind):
                raise ValueError("out must be C-contiguous")
            if kind == arrays.NUMPY and not out.flags.writeable:
                raise ValueError("out is read-only")
            device_out, result = (out if kind == arrays.CUPY and arrays.CUPY_AS_IS else arrays.to_device(out)), out
        else:
            device_out, result = arrays.device_empty(shape, dtype, kind)
        if kind == arrays.CUPY and arrays.CUPY_AS_IS:  # the lean launch takes them as they are
            return inputs, device_out, result, kind
        return tuple(None if a is None else arrays.to_device(a) for a in inputs), device_out, result, kind

    def launch(self, device_inputs: Sequence[Any], device_out: Any, **params: Any) -> Any:
        """Launch on prepared device arrays (asynchronous on the GPU); optional inputs may be left out."""
        step_launch, count = self._step_launch
        if len(device_inputs) == count:
            step_launch(*device_inputs, device_out, **params)
        else:
            step_launch(*device_inputs, *((None,) * (count - len(device_inputs))), device_out, **params)

    @functools.cached_property
    def _step_launch(self):
        """(the step's launch function, how many inputs it takes), looked up once: every call uses them."""
        return self.module.launch, len(self.family.INPUTS)

    def __call__(self, *inputs: Any, out: Any = None, **params: Any) -> Any:
        """Run this variant: NumPy in, NumPy out; device arrays in, same kind out."""
        if self._unsupported_here:  # validate(), inlined: this runs on every call
            raise Unsupported(self._unsupported_here)
        family_checks, output_for, own_checks = self._checks
        kind = family_checks(*inputs, **params)
        shape, dtype = output_for(*inputs, **params)
        if own_checks is not None:
            own_checks(*inputs, **params)
        device_inputs, device_out, result, kind = self._place(inputs, out, kind, shape, dtype)
        self.launch(device_inputs, device_out, **params)
        if kind == arrays.NUMPY and not self.family.host_inputs:
            host = device_out.copy_to_host()
            if out is not None:
                out[...] = host
                return out
            return host
        return result
