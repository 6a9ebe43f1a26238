"""The inputs and reference of a measured case, made once for every row that times it, possibly ahead of time in
the background, and their device copies rotated past the L2 cache.

At a headline size (2^28 float32 elements, 1 GiB an array) the generator takes seconds and a float64 reference tens
of seconds on one core (fusion's four sines), while a family measures ten or more rows. So a case's inputs and
reference are made once, and ``prepare_ahead`` makes the next family's in a background thread while the GPU times
this one's steps (NumPy releases the GIL inside its loops). Every row reads the inputs (device copies are made from
them) and none writes them: a row that did would fail the next row's check."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from numba import cuda

from zoo.bench.checking import reference_of
from zoo.device import properties
from zoo.registry import Family, Size, family

_cases: dict[tuple, Any] = {}  # (family name, size, seed, kind) -> Future of (inputs, reference)


def _make_case(family_name, size, seed, kind):
    fam = family(family_name)
    inputs = fam.inputs(size, seed, kind)
    return inputs, reference_of(fam, inputs, **fam.kind_params(kind))


def _in_background(key):
    """A Future of ``_make_case(*key)``, made by a daemon thread (Ctrl-C does not wait for it)."""
    import threading
    from concurrent.futures import Future

    future = Future()

    def work():
        try:
            future.set_result(_make_case(*key))
        except BaseException as e:  # raised again where the case is used
            future.set_exception(e)

    threading.Thread(target=work, name="zoo-case", daemon=True).start()
    return future


def prepare_ahead(*cases):
    """Start making the inputs and reference of each ``(family, size, kind)`` (seed 0) in the background, and
    forget every other case: at most these are held in memory."""
    keys = [(fam.name, size, 0, kind) for fam, size, kind in cases]
    _forget_all_but(keys)
    for key in keys:
        if key not in _cases:
            _cases[key] = _in_background(key)


def _forget_all_but(keys):
    """Drop every case (its inputs, reference and device copies) but ``keys``."""
    for key in list(_cases):
        if key not in keys:
            del _cases[key]
            _device.pop(key, None)


def settle():
    """Wait until no case is being made in the background (before host timings it would disturb)."""
    for future in list(_cases.values()):
        future.exception()  # waits; an error is raised where the case is used


def case_and_reference(family_name, size, seed, kind):
    key = (family_name, size, seed, kind)
    found = _cases.get(key)
    if found is None:
        from concurrent.futures import Future

        _forget_all_but([k for k in _cases if k != key][-1:])  # keep at most one other case (the one made ahead)
        found = _cases[key] = Future()
        found.set_result(_make_case(*key))
    return found.result()


_device: dict[tuple, Any] = {}  # case key -> device copies of its inputs: every row of a case times the same copies


def case_device_sets(key):
    """``input_sets`` of one case's inputs, copied to the GPU once for all its rows (one case at a time)."""
    found = _device.get(key)
    if found is None:
        _device.clear()
        found = _device[key] = input_sets(stored_inputs(*key))
    return found


def case_inputs(fam: Family, size: Size, kind: str | None = None, seed: int = 0) -> Any:
    """The host inputs of a measured case (made now, or waited for if they are being made in the background)."""
    return stored_inputs(fam.name, size, seed, kind)


def case_reference(fam: Family, size: Size, kind: str | None = None, seed: int = 0) -> Any:
    """The float64 reference of a measured case's default call, made once with its inputs (``case_inputs``)."""
    return stored_reference(fam.name, size, seed, kind)


def stored_inputs(family_name, size, seed, kind):
    """The host inputs of one case, made once while its rows are measured."""
    return case_and_reference(family_name, size, seed, kind)[0]


def stored_reference(family_name, size, seed, kind):
    """The float64 reference of the default call, made once while one size is measured."""
    return case_and_reference(family_name, size, seed, kind)[1]


def input_sets(host_inputs: Sequence[Any]) -> list[Any]:
    """Device copies of the inputs, as many sets as it takes to exceed twice the L2 cache.

    Timing one set over and over measures the L2 cache once the inputs fit in
    it; rotating through several sets makes each call read from DRAM.
    """
    footprint = sum(a.nbytes for a in host_inputs)
    l2 = properties().get("l2_bytes") or 0
    count = 1 if footprint >= 2 * l2 else min(16, math.ceil(2 * l2 / max(footprint, 1)))
    return [tuple(cuda.to_device(a) for a in host_inputs) for _ in range(count)]
