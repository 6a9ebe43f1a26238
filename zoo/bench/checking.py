"""Checking a result: a step's or a library row's output against the family's float64 reference, on seeded inputs
with a poisoned output. Runs anywhere, the simulator included; a large comparison or elementwise reference runs in
slices on every host core."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from zoo.registry import Family, Size, Variant
from zoo.runtime import SIMULATOR, arrays


@dataclass
class CheckResult:
    variant: str
    size: object
    ok: bool
    error: float  # relative norm error (0 for exact families when equal)
    detail: str = ""


SLICED_ELEMENTS = 1 << 22  # from this many elements a comparison or a reference runs in slices on every core


def host_cores():
    """How many cores this process may run on."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _by_slices(fn, arrays):
    """[fn(*slices)] over slices of the flattened ``arrays`` (same sizes, element i of each belonging together):
    one slice below SLICED_ELEMENTS, else a few a core, run on a thread per core (NumPy releases the GIL inside
    its loops)."""
    flat = [np.asarray(a).reshape(-1) for a in arrays]
    n = flat[0].size
    if n < SLICED_ELEMENTS:
        return [fn(*flat)]
    from concurrent.futures import ThreadPoolExecutor

    bounds = np.linspace(0, n, 4 * host_cores() + 1).astype(int)  # a few slices a core: uneven cores even out
    with ThreadPoolExecutor(host_cores(), thread_name_prefix="zoo-slices") as pool:
        return list(pool.map(lambda k: fn(*(a[bounds[k] : bounds[k + 1]] for a in flat)), range(len(bounds) - 1)))


def _sum_by_slices(fn, *arrays):
    """sum(fn(*slices)) over slices of ``arrays``: comparing 2^28 float32 elements with a float64 reference takes
    over a second on one core, and a family's run compares ten or more rows."""
    return sum(_by_slices(fn, arrays))


def _squares(result, ref):
    diff = result.astype(np.float64) - ref
    # (sum of squared errors, sum of squares); einsum's own loop, not BLAS's threads inside these threads
    return np.array([np.einsum("i,i->", diff, diff), np.einsum("i,i->", ref, ref)], np.float64)


def relative_error(result: Any, ref: Any) -> float:
    """||result - ref|| / ||ref|| in float64 (absolute norm when ref is all zero)."""
    ref = np.asarray(ref, np.float64)
    diff2, scale2 = _sum_by_slices(_squares, result, ref)
    diff, scale = math.sqrt(diff2), math.sqrt(scale2)
    return float(diff / scale) if scale > 0 else float(diff)


def _differ_bitwise_for_nan(result, ref):
    """Where an exact float result differs: by value (-0.0 equals 0.0), and a NaN equals only a NaN of the same bits
    (a sort moves its input's NaN; the checks' poison is NumPy's own NaN, which an unwritten element then keeps)."""
    same_bits = result.view(f"u{result.itemsize}") == ref.view(f"u{ref.itemsize}")
    return (result != ref) & ~same_bits


def compare(result: Any, ref: Any, tolerance: float) -> tuple[bool, float, str]:
    """(ok, error, detail) for a result against the float64 reference."""
    result = np.asarray(result)
    if result.shape != ref.shape:
        return False, math.inf, f"shape {result.shape}, expected {ref.shape}"
    if result.dtype.kind in "iub" or tolerance == 0:
        differ = _differ_bitwise_for_nan if result.dtype.kind == "f" and result.dtype == ref.dtype else np.not_equal
        wrong = int(_sum_by_slices(lambda r, f: np.count_nonzero(differ(r, f)), result, ref))
        first = "" if not wrong else f" (first at {np.argwhere(differ(result, ref))[0].tolist()})"
        return wrong == 0, float(wrong), f"{wrong} elements differ{first}" if wrong else "exact"
    unwritten = int(_sum_by_slices(lambda r, f: np.count_nonzero(np.isnan(r) & ~np.isnan(f)), result, ref))
    if unwritten:
        return False, math.inf, f"{unwritten} elements left unwritten (still NaN)"
    err = relative_error(result, ref)
    return err <= tolerance, err, f"rel. error {err:.2e} (tolerance {tolerance:.0e})"


def prepare(fam: Family, size: Size, seed: int = 0, kind: str | None = None) -> Any:
    """(inputs, float64 reference) of one check case, to check every step of a family on (``check``'s
    ``prepared``): the inputs and the reference are made once rather than once a step."""
    inputs = fam.inputs(size, seed, kind)
    return inputs, reference_of(fam, inputs, **fam.kind_params(kind))


def check(
    variant: Variant, size: Size, seed: int = 0, kind: str | None = None, prepared: Any = None, **params: Any
) -> CheckResult:
    """Run ``variant`` on fresh seeded inputs with a poisoned output; compare with the reference.

    ``kind`` picks one of the family's INPUT_KINDS (its first when None). ``prepared`` is
    ``prepare(family, size, seed, kind)``, made once for many steps (and ignored with ``params``).
    """
    fam = variant.family
    if prepared is not None and not params:
        inputs, ref = prepared
    else:
        inputs = fam.inputs(size, seed, kind)
        ref = None
    params = {**fam.kind_params(kind), **params}  # a kind may change the computation (KIND_PARAMS)
    if ref is None:
        ref = reference_of(fam, inputs, **params)
    shape, dtype = fam.output_for(*inputs, **params)
    out = np.full(shape, arrays.poison_value(dtype), dtype=dtype)
    result = variant(*inputs, out=out, **params)
    ok, err, detail = compare(result, ref, variant.tolerance(size))
    return CheckResult(variant.name, size, ok, err, detail)


def reference_of(fam, inputs, **params):
    """``fam.reference(*inputs, **params)`` as a float64 array; for a family whose spec sets ELEMENTWISE_REFERENCE,
    a large one is computed in slices on a thread per host core (NumPy releases the GIL inside its loops)."""
    if not getattr(fam.module, "ELEMENTWISE_REFERENCE", False) or inputs[0].size < SLICED_ELEMENTS:
        return np.asarray(fam.reference(*inputs, **params))
    pieces = _by_slices(lambda *part: np.asarray(fam.reference(*part, **params)), inputs)  # same shapes in and out
    return np.concatenate(pieces).reshape(inputs[0].shape)


def row_result(fam, name, inputs, out, **params):
    """Call the library row ``name`` once on ``inputs`` and ``out``; return the array that holds its result: what the
    row returned (a copy into a scratch buffer, a float16 product), else ``out``. A library this machine lacks raises
    zoo.errors.Unavailable here."""
    returned = fam.baselines[name](*inputs, out, **params)
    return out if returned is None else returned


def check_row(fam, name, size, host_inputs, result, reference=None, **params):
    """(ok, error, detail) of a library row's result: against the row's own ROW_REFERENCE where the spec gives one
    (a copy: the bytes it copied), else against the family's ``reference`` (computed when None), with the row's
    tolerance. (None, NaN, why) for a ceiling that declares nothing it could be checked against."""
    own = fam.row_references.get(name)
    if own is not None:
        reference = np.asarray(own(*host_inputs, **params))
    elif not fam.checked(name):
        return None, math.nan, "a ceiling: timed, not checked (no ROW_REFERENCE)"
    elif reference is None:
        reference = reference_of(fam, host_inputs, **params)
    return compare(arrays.host(result), reference, fam.tolerance(size, name))


def check_library_row(
    fam: Family, name: str, size: Size, seed: int = 0, kind: str | None = None, **params: Any
) -> CheckResult:
    """Run the library row ``name`` once on fresh seeded inputs with a poisoned output and check it like a step
    (``check_row``): the check a row gets before it is timed, callable on its own. On a GPU the row gets CuPy arrays
    (host arrays for a HOST_INPUTS family); in the simulator NumPy ones, which a row written for NumPy runs on (the
    tests' throwaway families' rows). Returns a CheckResult (ok None: never checked)."""
    inputs = fam.inputs(size, seed, kind)
    params = {**fam.kind_params(kind), **params}
    shape, dtype = fam.output_for(*inputs, **params)
    out = np.full(shape, arrays.poison_value(dtype), dtype=dtype)
    given = inputs
    if not SIMULATOR and not fam.host_inputs:
        import cupy

        given, out = tuple(cupy.asarray(a) for a in inputs), cupy.asarray(out)
    result = row_result(fam, name, given, out, **params)
    ok, err, detail = check_row(fam, name, size, inputs, result, **params)
    return CheckResult(name, size, ok, err, detail)
