"""The simulator's side of profiling: one call of a step counted (``sim_counters``) with the values its file gives
the GPU where it picks smaller ones for the simulator (``gpu_constants``), and the summary of its launches.
"""

import ast
import contextlib

from zoo.bench import harness
from zoo.errors import OutOfRange
from zoo.runtime import SIMULATOR
from zoo.tools.profile import ProfileError, sim_counters


def simulator_constants(module, inherited=()):
    """[(name, GPU value as an expression)] of the module's ``NAME = a if SIMULATOR else b`` lines where b is a
    literal, followed by the module-level lines computed from them or from ``inherited`` (names the module took
    from its spec, which sets them so: ``WARPS = BLOCK // 32``), in file order. None when a line computed from
    them calls something (it may build a kernel): such a module is counted as the simulator runs it."""
    changed, found = set(inherited), []
    for node in ast.parse(open(module.__file__).read()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if (
            isinstance(value, ast.IfExp)
            and isinstance(value.test, ast.Name)
            and value.test.id == "SIMULATOR"
            and isinstance(value.orelse, ast.Constant)
        ):
            changed.add(name)
            found.append((name, value.orelse))
        elif any(isinstance(n, ast.Name) and n.id in changed for n in ast.walk(value)):
            if any(isinstance(n, ast.Call) for n in ast.walk(value)):
                return None
            changed.add(name)
            found.append((name, value))
    return found


def spec_sizes(module, spec):
    """[(name in the step, GPU value as an expression)] of the sizes the family's spec sets smaller for the
    simulator (``BLOCK = 64 if SIMULATOR else 256``) that the step imports from it."""
    imported = {  # the spec's name: the step's
        alias.name: alias.asname or alias.name
        for node in ast.walk(ast.parse(open(module.__file__).read()))
        if isinstance(node, ast.ImportFrom) and node.module == spec.__name__
        for alias in node.names
    }
    return [(imported[name], value) for name, value in simulator_constants(spec) or [] if name in imported]


@contextlib.contextmanager
def gpu_constants(variant):
    """Run a step with the values its file or its spec gives the GPU where they pick smaller ones for the simulator
    (``BLOCK = 64 if SIMULATOR else 256``, and what is computed from them), so the counts describe the kernel
    the GPU runs. The kernel and the launch read them when they run, in the simulator. Yields
    {name: GPU value} of what was swapped (the step's file and its base's); everything is put back after."""
    modules = [variant.module] + ([variant.base.module] if variant.base is not None else [])
    spec = variant.family.module
    swapped = []
    try:
        for module in modules:
            inherited = spec_sizes(module, spec)  # the spec's simulator sizes the step imports (reduce's BLOCK)
            own = simulator_constants(module, [name for name, _ in inherited])
            if own is None:
                continue
            for source, (name, expression) in [(spec, c) for c in inherited] + [(module, c) for c in own]:
                value = eval(compile(ast.Expression(expression), source.__file__, "eval"), vars(source))
                swapped.append((module, name, getattr(module, name)))
                setattr(module, name, value)
        yield {name: getattr(module, name) for module, name, _ in swapped}
    finally:
        for module, name, value in reversed(swapped):
            setattr(module, name, value)


class SimProfile:
    """One step counted in the simulator: its launches' counts and whether its output was right."""

    def __init__(self, variant, size, launches, check, constants):
        self.variant = variant
        self.size = size
        self.launches = launches
        self.check = check
        self.constants = constants

    @property
    def summary(self):
        return sim_summary(self.launches)


def simulate(variant, size, kind=None, divergence=True, as_on_gpu=True):
    """Count one call of ``variant`` at ``size`` in the simulator (``sim_counters``); returns a SimProfile.

    ``as_on_gpu`` runs it with the GPU's values of the constants it shrinks for the simulator."""
    if not SIMULATOR:
        raise ProfileError("the simulator's counters need the simulator: ZOO_TARGET=sim")
    checks = []
    with gpu_constants(variant) if as_on_gpu else contextlib.nullcontext({}) as constants:
        launches = sim_counters.count(
            lambda: checks.append(harness.check(variant, size, seed=0, kind=kind)), divergence=divergence
        )
    return SimProfile(variant, size, launches, checks[-1], constants)


def simulate_or_say(variant, size, kind=None, divergence=True, as_on_gpu=True):
    """(SimProfile or None, notes): ``simulate``, again with the simulator's own constants if the GPU's made
    the step fail, and a one-line note instead of a traceback if it fails even so."""
    notes = []
    for gpu in (True, False) if as_on_gpu else (False,):
        try:
            return simulate(variant, size, kind, divergence, gpu), notes
        except OutOfRange as e:
            return None, [f"{variant.name}: skipped, {e}"]
        except Exception as e:  # the step broke in the simulator: say so, go on with the others
            what = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            notes.append(
                f"{variant.name}: failed with the GPU's constants ({what}); counted with the simulator's"
                if gpu
                else f"{variant.name}: the count failed ({what})"
            )
    return None, notes


def sim_summary(launches):
    """The summary of a step counted in the simulator: its busiest launch's memory figures (a multi-pass
    step's first pass: what a large size spends its time on), divergence over every launch."""
    if not launches:
        return {}
    main = sim_counters.busiest(launches)
    every = sim_counters.total(launches)
    out = {
        "kernel": main.kernel,
        "launches": len(launches),
        "global_load_sectors_per_request": main.global_load.sectors_per_request,
        "global_store_sectors_per_request": main.global_store.sectors_per_request,
        "global_load_bytes_per_sector": main.global_load.bytes_per_sector,
        "global_store_bytes_per_sector": main.global_store.bytes_per_sector,
        "shared_load_wavefronts_per_request": main.shared_load.wavefronts_per_request,
        "shared_store_wavefronts_per_request": main.shared_store.wavefronts_per_request,
        "shared_load_conflicts_per_request": main.shared_load.conflicts_per_request,
        "shared_store_conflicts_per_request": main.shared_store.conflicts_per_request,
        "atomic_requests": every.global_atomic.requests + every.shared_atomic.requests,
    }
    if every.traced:
        out["divergent_branches"] = every.divergent_branches
        out["threads_per_instruction"] = every.threads_per_instruction
    return out


SIM_COLUMNS = (  # summary key, column (global: sectors per request; shared: wavefronts and conflicts per request)
    ("kernel", "kernel"),
    ("global_load_sectors_per_request", "ld sect"),
    ("global_store_sectors_per_request", "st sect"),
    ("shared_load_wavefronts_per_request", "sh ld wf"),
    ("shared_load_conflicts_per_request", "sh ld confl"),
    ("shared_store_wavefronts_per_request", "sh st wf"),
    ("shared_store_conflicts_per_request", "sh st confl"),
    ("atomic_requests", "atomics"),
    ("divergent_branches", "diverg."),
    ("threads_per_instruction", "thr/line"),
)
