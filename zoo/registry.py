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

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import zoo.kernels
from zoo.device import compute_capability, properties
from zoo.device.jit import Kernel
from zoo.errors import Unsupported
from zoo.runtime import SIMULATOR, arrays
from zoo.runtime import launch as lean_launch
from zoo.runtime.arrays import address

Size = Any  # an int, or a tuple of ints: what a spec's make_inputs takes
VARIANT_FILE = re.compile(r"^v(\d{2})_([a-z][a-z0-9_]*)\.py$")
BASE_LINE = re.compile(r"^BASE\s*=\s*[\"'](v\d{2})[\"']", re.M)
KERNEL_LINE = re.compile(r"^\s*@(?:cuda\.)?jit\b", re.M)  # a kernel or device function of the step's own
FROM_LINE = re.compile(r"^FROM\s*=\s*[\"'](v\d{2})[\"']", re.M)
HEADINGS = ("Changes", "Why it is faster")
MIN_CC_LINE = re.compile(r"^MIN_CC\s*=\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)[ \t]*(?:#[ \t]*(.*?))?[ \t]*$", re.M)
# Arch-specific code (sm_90a: wgmma, setmaxnreg) runs on that compute capability only: a step says MAX_CC too
MAX_CC_LINE = re.compile(r"^MAX_CC\s*=\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)[ \t]*(?:#[ \t]*(.*?))?[ \t]*$", re.M)
# The oldest GPU zoo runs on: Volta. The kernels use CUDA's *_sync warp intrinsics, whose meaning under
# independent thread scheduling starts there, and CUDA 12 still compiles for it (CUDA 13 starts at 7.5).
ZOO_MIN_CC = (7, 0)
ZOO_MIN_CC_REASON = "zoo's floor: warp intrinsics with independent thread scheduling"

# name: what the family spec provides
REQUIRED_SPEC = {
    "ORDER": "teaching order among families (int)",
    "INPUTS": "names of the array arguments, in order; a trailing '?' marks an optional one",
    "DTYPE": "dtype every input array must have, or a tuple of the dtypes accepted; or {input name: dtype or "
    "tuple} for inputs of different types (the spec's output_for then checks which combinations go together)",
    "NDIM": "number of dimensions of every input array, or {input name: ndim}",
    "TOLERANCE": "largest relative norm error accepted (0: exact), or TOLERANCE(size) -> that number",
    "TEST_SIZES": "sizes checked in the simulator (at least one irregular)",
    "GPU_TEST_SIZES": "sizes checked on a GPU",
    "BENCH_SIZES": "sizes timed by `zoo run` and asv",
    "BASELINE": "name of the library call the variants are compared with",
    "STRONGEST": "the row (baseline, one of EXTRA_BASELINES or a checked one of CEILINGS) a practitioner would "
    "pick instead of the steps: CUB, cuBLAS in the steps' precision, SDPA, NCCL, or a copy of the same bytes for a "
    "memory-bound family; every table gives each step's % of it, naming it",
    "make_inputs": "make_inputs(size, seed) -> tuple of NumPy arrays",
    "reference": "reference(*inputs, **params) -> float64 NumPy result",
    "output_for": "output_for(*inputs, **params) -> (shape, dtype); raises on bad shapes",
    "flops": "flops(size) -> floating-point operations of one call",
    "bytes_moved": "bytes_moved(size) -> fewest bytes one call must read and write; bytes_moved(size, kind) "
    "where the kinds of input differ in bytes (INPUT_KINDS of several formats)",
    "baseline": "baseline(*cupy_inputs, out) -> computes into out with CuPy",
}

# name: what the family spec may provide
OPTIONAL_SPEC = {
    "INPUT_KINDS": "names of the kinds of input (dtypes, distributions), the first the default; "
    "make_inputs(size, seed, kind) then makes each, and every size is checked and timed "
    "for every kind (results key 'SIZE@kind' for all but the first)",
    "EXTRA_BASELINES": "{name: fn(*cupy_inputs, out)}: more library calls timed in the same run, "
    "each a row of its own beside the baseline",
    "CEILINGS": "{name: fn(*cupy_inputs, out)}: rows that time what bounds the family (a copy of the "
    "same bytes, say) rather than compute its result: timed, and checked against their ROW_REFERENCE if any",
    "KIND_PARAMS": "{kind: {name: value}}: keyword arguments a kind of input adds to every call of that kind "
    "(reference, output_for, flops, bytes_moved, the steps' launch, the baselines and CPU rows): for a kind that "
    "changes the computation, not only the data (attention's causal mask)",
    "KIND_TEST_SIZES": "{kind: sizes}: fewer simulator test sizes for a kind (the first one too), each one "
    "of TEST_SIZES (the same code on other data need not pay for every size twice); "
    "`zoo check` and the GPU tests still check every kind at every size",
    "HEADLINE_SIZE": "the size the README table, the plot and each step's measured line quote",
    "SIZE_DIMS": "how many numbers a size may have, e.g. (1, 3) for n or MxNxK (default (1,))",
    "CPU": "{row name: (fn(*host_inputs) -> result, threads)}: the computation as a user would run it on the host "
    "in the family's dtype (NumPy, NumPy's BLAS, numba's @njit(parallel=True)); threads is 'one', 'blas' or "
    "'numba'. `zoo run` times each beside the GPU rows, checks it like a baseline and gives every row its "
    "'x over CPU' against the first",
    "WALL_TIME": "True: the figures are the host's wall-clock time per call (a call and a synchronization), "
    "not the device's time behind a hold: for a family whose lesson is the host's cost of launching",
    "ROW_REFERENCE": "{row name: fn(*host_inputs, **params) -> what that row must produce}: a row that computes "
    "something other than the family's result (a copy of the same bytes: the bytes it copied) is checked against "
    "this, exactly unless ROW_TOLERANCE says otherwise; a row whose result is not in ``out`` (a scratch buffer, a "
    "float16 product) returns it",
    "ROW_TOLERANCE": "{row name: tolerance or tolerance(size)}: a library or CPU row whose arithmetic is coarser "
    "than the family's (cuBLAS in TF32 beside a float32 family, a ceiling's float16 result) is checked against this "
    "instead of TOLERANCE",
    "HOST_INPUTS": "True: the steps take NumPy arrays and move them to the GPU and back themselves "
    "(transfer lessons); launch and the baseline get host arrays, and a step that sets "
    "PINNED = True is timed on page-locked ones",
    "MAPPING": "{step: small size}: steps drawn as a picture of which block, warp and lane reads and writes which "
    "element, from the simulator's trace of one call at that size (zoo.tools.mapping; `zoo report` draws them, the "
    "walkthrough page shows them)",
    "ELEMENTWISE_REFERENCE": "True: each element of the reference depends only on the same element of each "
    "input (same shapes), so a large one is computed in slices on every host core (zoo.bench.harness.reference_of): "
    "fusion's four float64 sines of 2^28 elements take a minute on one core",
    "PROFILE_SIZE": "the size `zoo profile` runs Nsight Compute at on a GPU (default: HEADLINE_SIZE), for a family "
    "whose slow steps make the headline size too long to profile",
    "setting": "setting() -> short text: what a run depended on besides its size and GPU (collectives: its ranks "
    "and the GPUs they share), recorded with a saved profile and shown beside it on the walkthrough page",
}


class RegistryError(RuntimeError):
    """The kernel tree breaks a rule of the registry."""


def _sections(doc):
    """Map each heading of a variant docstring ('Changes:' on its own line) to its text."""
    found, current = {}, None
    for line in doc.splitlines():
        m = re.match(r"^\s*(Changes|Why it is faster):\s*(.*)$", line)
        if m:
            current = m.group(1)
            found[current] = [m.group(2)] if m.group(2) else []
        elif current:
            found[current].append(line.strip())
    return {k: " ".join(v for v in lines if v).strip() for k, lines in found.items()}


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
        return _sections(self.doc)

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


class PreparedInputs:
    """A step's inputs in its own layout (``pack``), made once per set of arrays and handed to every later call.

    An entry is keyed by the identity of each input that ``pack`` reordered (a weak reference: the entry goes when
    one of them does, and its packed copies with it) and by every input's layout (shape, strides, dtype, 16-byte
    alignment: what ``pack`` decides from), so a call on the same weights and a new x finds the weights packed, and
    one whose x is laid out otherwise is packed again. Values are not compared: after changing packed inputs in
    place, ``clear()``. ``hits`` and ``misses`` count the calls that found an entry and those that packed."""

    LIMIT = 8  # entries kept, the oldest dropped first: a model's layers are more weights, each its own entry

    def __init__(self, pack):
        self.pack = pack
        self.entries = []  # [(layouts, ((position, weak reference), ...), packed inputs or None where unchanged)]
        self.hits = self.misses = 0

    def __call__(self, inputs):
        layouts = [None if a is None else (a.shape, a.strides, a.dtype, address(a) & 15) for a in inputs]  # every call
        for known, refs, packed in reversed(self.entries):
            if known == layouts and all(ref() is inputs[i] for i, ref in refs):
                self.hits += 1
                return tuple(a if p is None else p for a, p in zip(inputs, packed, strict=True))
        self.misses += 1
        result = tuple(self.pack(*inputs))
        changed = [i for i, (a, p) in enumerate(zip(inputs, result, strict=True)) if a is not p]
        try:
            refs = tuple((i, weakref.ref(inputs[i], self._forget)) for i in changed)
        except TypeError:  # an array that takes no weak reference: packed again on every call
            return result
        self.entries.append((layouts, refs, tuple(result[i] if i in changed else None for i in range(len(result)))))
        del self.entries[: -self.LIMIT]
        return result

    def _forget(self, ref):
        """An input of some entries is gone: drop them (their packed copies too)."""
        self.entries = [e for e in self.entries if all(r is not ref for _, r in e[1])]

    def clear(self):
        self.entries = []


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
