"""What every bench_<family>.py shares: parameters from the registry, compile-once cases.

A family's suite is one class whose parameters are (variant, size): every
variant file of the family plus ``baseline`` (its CuPy call) and any
EXTRA_BASELINES, times the family's BENCH_SIZES for each of its INPUT_KINDS
(keys as in the results file: '268435456', '268435456@int32'). A new variant
file is therefore benchmarked with no edit here.

The device figures are measured once per family and commit: the class's
``setup_cache`` times every (variant, size) in one process, as ``zoo run`` does,
and asv hands its table to the ``track_`` benchmarks. (Measured in each
benchmark's own process they cost a compile and a timing a row each: over two
minutes a benchmark for attention, hours a commit.) Every benchmark is a
``track_``: asv's own ``time_`` benchmarks would build every case again in
their processes. Without a GPU ``setup_cache`` returns no rows and ``setup``
raises NotImplementedError, which asv reports as a skip.

The suite runs against the zoo of old commits too (history: .ci/asv-history puts that commit's tree first
on the path), so it reaches zoo only through what every commit has and the layout cannot move: ``zoo.family``,
the Family and Variant objects (``validate``/``launch``/``make_inputs``/``flops``/``bytes_moved``), the
errors module, and the harness's ``input_sets``/``time_launches``, imported from wherever that commit keeps
it (``harness_module``). The size keys and the GFLOP/s-or-GB/s rule are the suite's own: a benchmark's
parameters and unit are part of what its version stands for. ``_kinds``/``_inputs``/``_baselines``/
``_kind_params`` fall back to what a zoo from before INPUT_KINDS, EXTRA_BASELINES and KIND_PARAMS offers.

Recording history on little device time: ZOO_ASV_SIZES (size keys, comma-separated; FAMILY=KEY for one
family) and ZOO_ASV_LAST_STEPS (a number) make ``setup_cache`` measure only those sizes and the family's
last steps, no library rows; every other row is a skip ("not measured in this run"). .ci/asv-history
--headline sets both and selects the same benchmarks with --bench.
"""

import importlib
import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path


def _choose_target_in_a_child():
    """Set ZOO_TARGET before zoo is imported, probing the driver in a short subprocess.

    asv's forkserver (asv.conf.json) imports this suite once and forks every benchmark from that server, and a
    forked child cannot use CUDA once its parent initialised it: zoo's own probe (cuInit) must not run here. The
    child runs the target module's driver_usable by path (zoo/runtime/target.py; zoo/_target.py in older commits),
    without importing the package.
    """
    if os.environ.get("ZOO_TARGET"):
        return
    package = Path(importlib.util.find_spec("zoo").origin).parent
    places = (package / "runtime" / "target.py", package / "_target.py")  # the host side in packages, or before
    target = next((p for p in places if p.exists()), None)
    if target is None:
        return  # zoo decides for itself
    probe = "import runpy, sys; print(runpy.run_path(sys.argv[1])['driver_usable']())"
    answer = subprocess.run([sys.executable, "-c", probe, str(target)], capture_output=True, text=True).stdout.strip()
    if answer in ("True", "False"):  # otherwise (a zoo without driver_usable) zoo decides for itself
        os.environ["ZOO_TARGET"] = "gpu" if answer == "True" else "sim"


_choose_target_in_a_child()

from numba.core.errors import NumbaPerformanceWarning  # noqa: E402 (after the target is chosen)

import zoo  # noqa: E402
from zoo import errors  # noqa: E402
from zoo.errors import OutOfRange  # noqa: E402


def harness_module():
    """zoo's harness: zoo.bench.harness in the host side's packages, zoo.harness in older commits."""
    for name in ("zoo.bench.harness", "zoo.harness"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name not in (name, name.rpartition(".")[0]):  # the module exists but something it imports does not
                raise
    raise ImportError("zoo has no harness module (zoo.bench.harness or zoo.harness)")


harness = harness_module()
BASELINE = "baseline"
KIND_SEPARATOR = "@"
warnings.simplefilter("ignore", NumbaPerformanceWarning)  # small one-block sizes are small on purpose
UNAVAILABLE = getattr(errors, "Unavailable", ())  # a library row this machine lacks; none before zoo had them


def size_key(size, kind=None, kinds=(None,)):
    """A size's parameter value: '4096', '1000x777x333'; another kind of input than the first: '268435456@int32'
    (the results files' keys; a key is what a stored value is matched by, so it never changes form)."""
    key = "x".join(str(s) for s in size) if isinstance(size, (tuple, list)) else str(size)
    return key if kind is None or kind == kinds[0] else f"{key}{KIND_SEPARATOR}{kind}"


def unit_of(fam):
    """GFLOP/s where a call does more floating-point operations than it moves bytes, else GB/s, judged at the
    first size and kind (the README tables' rule): part of what track_rate's version stands for."""
    size = fam.BENCH_SIZES[0]
    return "GFLOP/s" if fam.flops(size) > fam.bytes_moved(size) else "GB/s"


def _kinds(fam):
    return tuple(getattr(fam.module, "INPUT_KINDS", None) or (None,))


def _inputs(fam, size, kind):
    return fam.make_inputs(size, 0) if kind is None else fam.make_inputs(size, 0, kind=kind)


def _bytes(fam, size, kind, params):
    """The bytes one call of this kind moves (a zoo from before bytes_moved(size, kind): the size's)."""
    try:
        return fam.bytes_moved(size, kind, **params)
    except TypeError:
        return fam.bytes_moved(size)


def _kind_params(fam, kind):
    """The keyword arguments a kind adds to every call (KIND_PARAMS; none before that existed)."""
    return dict(getattr(fam.module, "KIND_PARAMS", {}).get(kind, {})) if kind is not None else {}


def _baselines(fam):
    return {BASELINE: fam.baseline, **getattr(fam.module, "EXTRA_BASELINES", {}), **getattr(fam.module, "CEILINGS", {})}


def _case_keys(fam):
    """{results key: (size, kind)} for every BENCH_SIZES and kind of input."""
    kinds = _kinds(fam)
    return {size_key(s) if k == kinds[0] else f"{size_key(s)}@{k}": (s, k) for s in fam.BENCH_SIZES for k in kinds}


class Case:
    """One variant (or a baseline) at one size and kind: device inputs, output, first launch done. ``host``: the
    size's host inputs (``_inputs``), made once for all its rows (every row of a size reads the same; none writes
    them)."""

    def __init__(self, fam, name, size, kind, host):
        from numba import cuda

        self.fam, self.name, self.size, self.kind = fam, name, size, kind
        self.params = _kind_params(fam, kind)
        self.call = _baselines(fam).get(name)
        if getattr(fam.module, "HOST_INPUTS", False):  # steps and baseline take host arrays, copy themselves
            import numpy as np

            shape, dtype = fam.output_for(*host, **self.params)
            if self.call is None:
                self.variant = fam[name]
                self.sets, self.out = harness.benchmark_buffers(self.variant, host, shape, dtype)
            else:
                self.sets, self.out = [host], np.empty(shape, dtype)
        elif self.call is not None:
            import cupy

            shape, dtype = fam.output_for(*host, **self.params)
            self.sets = [tuple(cupy.asarray(a) for a in s) for s in harness.input_sets(host)]
            self.out = cupy.empty(shape, dtype)
        else:
            self.variant = fam[name]
            unsupported = getattr(self.variant, "unsupported", lambda: None)()  # a zoo from before MIN_CC: None
            if unsupported:
                raise NotImplementedError(unsupported)  # asv skips it: this GPU is older than the step needs
            try:
                _, (shape, dtype) = self.variant.validate(*host, **self.params)
            except OutOfRange as e:
                raise NotImplementedError(f"{name} does not take size {size_key(size)}: {e}") from None
            self.sets = harness.input_sets(host)
            if getattr(self.variant, "pack", None) is not None:  # a step with a layout of its own (older zoo: none)
                self.sets = [self.variant.packed(s) for s in self.sets]
            self.out = cuda.device_array(shape, dtype)
        try:
            self.launch(0)  # compiles on the first call
        except OutOfRange as e:  # an extra library row that does not apply to this kind of input
            raise NotImplementedError(f"{name} does not take size {size_key(size)}: {e}") from None
        except UNAVAILABLE as e:  # an extra library row this machine lacks (no PyTorch): a skip
            raise NotImplementedError(f"{name}: {e}") from None
        cuda.synchronize()
        self._ms = None

    def launch(self, i):
        inputs = self.sets[i % len(self.sets)]
        if self.call is not None:
            self.call(*inputs, self.out, **self.params)
        else:
            self.variant.launch(inputs, self.out, **self.params)

    def ms(self):
        """The median device time of one call in ms (CUDA events; host wall time for WALL_TIME families),
        measured once."""
        if self._ms is None:
            # A short budget: each asv benchmark is its own process, and history runs every one per commit.
            wall = getattr(self.fam.module, "WALL_TIME", False) and hasattr(harness, "time_wall")  # host-cost lessons
            timer = harness.time_wall if wall else harness.time_launches
            self._ms = timer(self.launch, min_samples=5, budget_s=0.25).median_ms
        return self._ms

    def wall_ms(self):
        """The median host wall time of one call and a synchronization in ms (``harness.time_wall``), or None from
        a zoo that has no wall timer."""
        if not hasattr(harness, "time_wall"):
            return None
        return harness.time_wall(self.launch, min_samples=5, budget_s=0.1).median_ms

    def rate(self):
        """GFLOP/s or GB/s from the median time."""
        if unit_of(self.fam) == "GFLOP/s":
            work = self.fam.flops(self.size, **self.params)
        else:
            work = _bytes(self.fam, self.size, self.kind, self.params)
        return work / (self.ms() * 1e-3) / 1e9


NO_GPU = "no GPU: the asv suite only runs on a real device"


def measure_family(fam, names, sizes):
    """{(name, size key): (device ms, rate, wall ms)} for every row that runs here, the reason it does not (a str:
    a skip), or the error it raised ({"error": ...}: that row fails, the rest are kept). One case at a time, freed
    before the next, so the device holds one row's buffers at once. Each size's host inputs are made once for all
    its rows: at gemv's 8192 x 8192 making them takes 1.3 to 4 s a kind on a 16-core host (int4's quantization
    the most), and made again for each of a size's fifteen rows they took minutes of the family's asv setup."""
    if zoo.SIMULATOR:
        return {}
    from numba import cuda

    table = {}
    for key, (size, kind) in sizes.items():
        host = None  # this size's inputs, made at its first row
        for name in names:
            try:
                host = _inputs(fam, size, kind) if host is None else host
                c = Case(fam, name, size, kind, host)
                table[name, key] = (c.ms(), c.rate(), c.wall_ms())
            except NotImplementedError as e:
                table[name, key] = str(e)
            except Exception as e:  # noqa: BLE001 (a broken row of an old commit is that row's failure)
                table[name, key] = {"error": f"{type(e).__name__}: {e}"}
            finally:
                c = None
                cuda.current_context().deallocations.clear()
    return table


NOT_THIS_RUN = "not measured in this run (ZOO_ASV_SIZES, ZOO_ASV_LAST_STEPS)"


def selected(fam, rows, sizes):
    """The rows and sizes ``setup_cache`` measures: every one, or the sizes ZOO_ASV_SIZES names and the family's
    last ZOO_ASV_LAST_STEPS steps (demonstrations left out, no library rows) where those are set. ZOO_ASV_SIZES
    is comma-separated size keys, each for every family or as FAMILY=KEY for that family only."""
    entries = [e.partition("=") for e in os.environ.get("ZOO_ASV_SIZES", "").split(",") if e]
    wanted = [key or name for name, named, key in entries if not named or name == fam.name]
    last = int(os.environ.get("ZOO_ASV_LAST_STEPS") or 0)
    if wanted:
        sizes = {k: v for k, v in sizes.items() if k in wanted}
    if last:
        steps = [v.name for v in fam if not getattr(v, "demonstration", None)]
        rows = [r for r in rows if r in steps[-last:]]
    return rows, sizes


def family_suite(fam):
    """The asv benchmark class for a family (a name or a zoo Family); None where this zoo has no such family (an
    older commit's, recorded for history: its bench_<family>.py then holds no benchmark, and asv's discovery of
    the other families goes on)."""
    if isinstance(fam, str):
        if fam not in {f.name for f in zoo.families()}:
            return None
        fam = zoo.family(fam)
    caller = sys._getframe(1).f_globals["__name__"]  # benchmarks.bench_<family>, where asv finds the class
    sizes = _case_keys(fam)
    unit = unit_of(fam)
    rows = [v.name for v in fam] + list(_baselines(fam))

    class Suite:
        params = [rows, list(sizes)]
        param_names = ["variant", "size"]
        timeout = 900  # compile plus the slowest naive variant at the largest size
        # Each track_ below sets its own ``version``, written by hand: asv keeps a stored result only while its
        # version equals the benchmark's, and without one it hashes the source, so any edit here or in a helper
        # would orphan the history. Bump a track's version only when what one (variant, size) value measures
        # changes: its unit, its timing method (timer, samples, budget) or what a size key stands for; the old
        # results then stay on disk and the graph starts a new line. A change of sizes alone adds new keys and
        # needs no bump. .ci/asv-carry-versions carried the results recorded before versions were explicit.

        def setup_cache(self):
            """Every row's device time and rate, measured once in one process for all the tracks."""
            return measure_family(fam, *selected(fam, rows, sizes))

        setup_cache.timeout = 1800  # the whole family, every size: about what `zoo run FAMILY --all-sizes` takes
        # asv keys a setup_cache by its function's module and line, the same here for every family: named after the
        # calling bench_<family> module, each family's table is its own (one key would hand attention's to all).
        setup_cache.__module__ = caller

        def setup(self, table, variant, size):
            row = table.get((variant, size), NO_GPU if zoo.SIMULATOR else NOT_THIS_RUN)
            if isinstance(row, str):
                raise NotImplementedError(row)  # asv records a skip: no GPU, too old a GPU, a size it does not take
            if isinstance(row, dict):
                raise RuntimeError(f"{variant} at {size} failed in setup_cache: {row['error']}")  # asv: a failure

        def track_device_ms(self, table, variant, size):
            """Device time of one call in ms (median of CUDA-event timings): the figure asv watches for
            regressions, since asv counts a rise as a regression and a time rises when a step gets slower."""
            return table[variant, size][0]

        track_device_ms.unit = "ms"
        track_device_ms.version = "1"

        def track_rate(self, table, variant, size):
            """Device throughput (median of CUDA-event timings): a graph only (asv.conf.json turns its
            regression detection off, because a rise here is a speedup)."""
            return table[variant, size][1]

        track_rate.unit = unit
        track_rate.version = "1"

        def track_ratio_to_baseline(self, table, variant, size):
            """Throughput over the baseline's, both measured in setup_cache's one process."""
            base = table.get((BASELINE, size))
            if not isinstance(base, tuple):  # the baseline was skipped (a reason) or failed (an error)
                raise NotImplementedError(f"no baseline at {size}: {base}")
            return table[variant, size][1] / base[1]

        track_ratio_to_baseline.unit = "ratio"
        track_ratio_to_baseline.version = "1"

        def track_wall_ms(self, table, variant, size):
            """Host wall time of one call and its synchronization in ms (median): the device time plus what the
            host adds, launch and argument handling, as a user's synchronized loop sees it."""
            wall = table[variant, size][2]
            if wall is None:
                raise NotImplementedError("this commit's zoo has no wall timer (harness.time_wall)")
            return wall

        track_wall_ms.unit = "ms"
        track_wall_ms.version = "1"

    Suite.__name__ = Suite.__qualname__ = "".join(p.title() for p in fam.name.split("_"))
    Suite.__doc__ = fam.summary
    return Suite
