"""The main job, ``zoo run``: check every step, then time it against the family's library on the GPU.

On a GPU the families are checked first (in worker processes, before any timing: concurrent checks would disturb
a timing), then each case's rows are timed in turn: the library, the CPU rows, the steps. The CLI resolves the
arguments and calls ``gpu_job``; the tables and the progress display are printed here as the job goes.
"""

import contextlib
import dataclasses
import os
import tempfile
import time

from rich.progress import Progress
from rich.table import Table

import zoo
from zoo.bench import code_lines, harness, results, strongest
from zoo.errors import OutOfRange, Unavailable, Unsupported


def _key(fam, size, kind):
    return results.size_key(size, kind, fam.kinds)


def _fmt(value, spec):
    return "-" if value is None or value != value else format(value, spec)


def check_family(fam, cases, progress, task, steps=None, seconds=None):
    """Rows of (variant, passed, skipped, worst error, failures) for ``steps`` (default: every step); with a dict
    ``seconds``, what each check took, as {(step name, case key): seconds}."""
    steps = list(steps or fam)
    skip = {}  # step -> why it is not checked
    for v in steps:
        if v.demonstration:
            skip[v] = "[yellow]demonstration: wrong on purpose, not checked[/]"
        elif v.unsupported():
            skip[v] = f"[yellow]skipped: {v.unsupported()}[/]"
    checked = [v for v in steps if v not in skip]
    progress.advance(task, len(cases) * len(skip))
    tally = {v: [0, 0, 0.0, []] for v in checked}  # passed, out of range, worst error, problems
    for i, (size, kind) in enumerate(cases):  # case by case: its inputs and reference are made once
        try:
            prepared = harness.prepare(fam, size, seed=1000 + i, kind=kind)
        except OutOfRange:  # no input of this kind at this size: out of range for every step
            for v in checked:
                tally[v][1] += 1
            progress.advance(task, len(checked))
            continue
        for v in checked:
            progress.update(task, description=f"{fam.name}: checking {v.name} at {_key(fam, size, kind)}")
            t = tally[v]
            began = time.perf_counter()
            try:
                r = harness.check(v, size, seed=1000 + i, kind=kind, prepared=prepared)
            except OutOfRange:
                t[1] += 1
            else:
                t[2] = max(t[2], r.error)
                if r.ok:
                    t[0] += 1
                else:
                    t[3].append(f"n={_key(fam, size, kind)}: {r.detail}")
            if seconds is not None:
                seconds[v.name, _key(fam, size, kind)] = time.perf_counter() - began
            progress.advance(task)
    rows, failed = [], False
    for v in steps:
        if v in skip:
            rows.append((v.name, "-", "-", "-", skip[v]))
            continue
        passed, skipped, worst, problems = tally[v]
        failed |= bool(problems)
        status = "[green]ok[/]" if not problems else "[red]FAIL[/] " + "; ".join(problems)
        rows.append((v.name, str(passed), str(skipped), f"{worst:.1e}", status))
    return rows, failed


QUICK_BUDGET_S = 0.15  # seconds of samples a row gets in the default run (at least 10 samples, each about 1 ms)
CHECK_PROCESSES = max(1, min(8, harness.host_cores() // 2))  # each holds a CUDA context (~0.5 GB) and compiles
QUICK_CHECK_BYTES = 64 << 20  # the default run checks every step at the GPU test sizes that move at most this


def headline_size(fam):
    """The size a family is summarised at: HEADLINE_SIZE, else its largest BENCH size."""
    wanted = getattr(fam.module, "HEADLINE_SIZE", None)
    if wanted is not None:
        return wanted
    return max(fam.BENCH_SIZES, key=lambda s: fam.bytes_moved(s) + fam.flops(s))


def smallest_size(fam):
    """The family's smallest BENCH size (fewest bytes and operations): where the host's cost of a call shows."""
    return min(fam.BENCH_SIZES, key=lambda s: fam.bytes_moved(s) + fam.flops(s))


def with_smallest(fam, cases=None):
    """``cases`` (default: the headline size's), then the smallest BENCH size's where it is not among them."""
    cases = list(cases or fam.cases([headline_size(fam)]))
    return cases + [c for c in fam.cases([smallest_size(fam)]) if c not in cases]


def best_steps(fam):
    """[the family's best step at its headline size] as this GPU's results file records it
    (``strongest.best_step``), or every step where it records none: what ``zoo run --best-step`` times."""
    from zoo.device import slug

    path = results.path_for(slug())
    by_size = (results.load(path)["families"].get(fam.name) or {}) if path.exists() else {}
    entries = by_size.get(results.size_key(headline_size(fam)), {})
    found = strongest.best_step(fam, entries)
    return [fam[found[0]]] if found else list(fam)


DESCRIPTION_WIDTH = 30  # the progress line's text; with the bar, the count and the times it fits 80 columns


def progress_display(console, estimate=None):
    """A progress display in one line of at most 80 columns: what runs now, a bar, the count, the time taken and
    an estimate of the time left (``estimate.left()`` where given, a ``zoo.bench.costs.Estimate``; else rich's
    own, from the pace so far)."""
    from rich.progress import BarColumn, MofNCompleteColumn, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.table import Column
    from rich.text import Text

    class Left(ProgressColumn):
        def render(self, task):
            seconds = estimate.left() if estimate is not None else task.time_remaining
            if task.finished or seconds is None:
                return Text("")
            return Text(f"~{_clock(seconds)} left", style="progress.remaining")

    return Progress(
        TextColumn(
            "{task.description}",
            table_column=Column(width=DESCRIPTION_WIDTH, no_wrap=True, overflow="ellipsis"),
        ),
        BarColumn(bar_width=10),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        Left(),
        console=console,
        transient=True,
    )


def _clock(seconds):
    """1:05 for 65 seconds, 1:02:05 past an hour."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def check_in_processes(plan, steps, processes, shared, progress, task, console):
    """Check the families of ``plan`` in parallel worker processes, before any timing (the GPU's concurrent
    checks would disturb a timing); returns {family: (rows, failed, seconds)}.

    Compiling is most of a check (each step for each tile class and kind it is checked at), and numba
    compiles one kernel at a time per process. The workers save what they compile to ``shared``
    (``zoo.device.jit.share_compiled_kernels``) and this process, which shares it too, loads those kernels
    when it times the same specialisations instead of compiling them again."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from zoo.device.jit import share_compiled_kernels

    share_compiled_kernels(shared)
    jobs = [(fam.name, checks, [v.name for v in steps[fam.name]]) for fam, _, checks in plan if checks]
    workers = min(len(jobs), processes)
    began, checked = time.perf_counter(), {}
    progress.update(task, description=f"checking {len(jobs)} families in {workers} processes")
    # spawn, not fork: a forked child of a process that has touched CUDA cannot use the GPU
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        # the slowest first (most steps times sizes), so the last to finish is a short one
        jobs.sort(key=lambda job: -len(job[1]) * len(job[2]))
        futures = {pool.submit(_check_worker, name, checks, steps, shared): name for name, checks, steps in jobs}
        work = {name: len(checks) * len(steps) for name, checks, steps in jobs}  # the progress bar's units
        for future in as_completed(futures):
            name = futures[future]
            try:
                checked[name] = future.result()
            except Exception as e:  # a worker that died (a CUDA error poisons its process): check it here instead
                console.print(f"[yellow]{name}: its check in a worker process failed ({e!r}); checking it here[/]")
                continue
            progress.advance(task, work[name])
    console.print(
        f"[dim]checked {len(jobs)} families in {workers} processes: {time.perf_counter() - began:.0f} s "
        f"(their own times added up: {sum(c[2] for c in checked.values()):.0f} s)[/]"
    )
    return checked


def _check_worker(name, checks, step_names, shared):
    """One family's check in a worker process of ``_check_in_processes``: (rows, failed, seconds)."""
    from zoo.device.jit import quiet_occupancy, share_compiled_kernels

    began = time.perf_counter()
    share_compiled_kernels(shared)
    fam = zoo.family(name)
    with quiet_occupancy():
        rows, failed = check_family(fam, checks, NoProgress(), None, [fam[n] for n in step_names])
    return rows, failed, time.perf_counter() - began


class NoProgress:
    """A progress display that shows nothing: a worker process must not draw over the main one's."""

    def update(self, *args, **kwargs):
        pass

    def advance(self, *args, **kwargs):
        pass


def gpu_job(
    fams, steps, console, *, given=None, all_sizes=False, budget=None, save=False, check_processes=1, cold_l2=False
):
    """Check, then time ``fams`` on the GPU; ``steps`` maps each family's name to the steps to run, ``given`` to
    the (size, kind) cases named with --size (None: each family's headline size, or its BENCH sizes with
    ``all_sizes``); ``cold_l2`` flushes the L2 cache before every timed call. At the headline size the best step's
    call is also timed in a user's loop, and at the smallest BENCH size the library's call too (``user_loops``).
    Prints a table per case as it goes; returns the exit code (1 when a row was wrong)."""
    from zoo.device import properties, versions
    from zoo.device.jit import quiet_occupancy

    quick = not (given or all_sizes)  # the default: each family's headline size, and a check first
    budget = budget if budget is not None else (QUICK_BUDGET_S if quick else harness.BUDGET_S)
    runs, any_failed, skipped = {}, False, set()
    commit = results.git_commit() if save else None  # the commit each saved row names
    plan = []
    for fam in fams:
        if given:
            cases = given[fam.name]
        else:
            cases = fam.cases(fam.BENCH_SIZES if all_sizes else [headline_size(fam)])
        checks = [c for c in fam.cases(fam.GPU_TEST_SIZES) if fam.bytes_moved(*c) <= QUICK_CHECK_BYTES]
        plan.append((fam, cases, checks if quick else []))
    order = [(fam, size, kind) for fam, cases, _ in plan for size, kind in cases]  # every measured case, in turn
    started, spent = time.perf_counter(), {}
    shared_kernels = tempfile.TemporaryDirectory(prefix="zoo-kernels-")
    with progress_display(console) as progress, quiet_occupancy(), shared_kernels as shared:
        total = sum(
            (len(steps[f.name]) + len(f.baselines) + len(f.cpu_rows)) * len(c) + len(steps[f.name]) * len(k)
            for f, c, k in plan
        )
        task = progress.add_task("timing", total=total)
        checked = {}
        if sum(bool(k) for _, _, k in plan) > 1 and check_processes > 1:
            if order:  # the first case's inputs and reference are made while the checks run
                harness.prepare_ahead(order[0])
            checked = check_in_processes(plan, steps, check_processes, shared, progress, task, console)
        for fam, cases, checks in plan:
            family_started, compiled_before = time.perf_counter(), harness.compile_seconds()
            phases = dict.fromkeys(("check", "inputs wait", "library", "CPU", "steps", "user's loop"), 0.0)  # seconds
            if cases:  # its first case's inputs and reference are made while the checks run
                harness.prepare_ahead((fam, *cases[0]))
            if checks:
                began = time.perf_counter()
                progress.update(task, description=f"{fam.name}: checking at {len(checks)} GPU test size(s)")
                if fam.name in checked:  # checked in a worker process, before any timing: its time is not ours
                    rows, failed, _ = checked[fam.name]
                    del phases["check"]
                else:
                    rows, failed = check_family(fam, checks, progress, task, steps[fam.name])
                any_failed |= failed
                bad = [row for row in rows if "FAIL" in row[-1]]
                sizes = ", ".join(_key(fam, *c) for c in checks)
                console.print(
                    f"{fam.name}: every step checked at {sizes}: "
                    + ("[green]correct[/]" if not bad else "[red]" + "; ".join(f"{r[0]} {r[-1]}" for r in bad) + "[/]")
                )
                if "check" in phases:
                    phases["check"] += time.perf_counter() - began
            for size, kind in cases:
                key = _key(fam, size, kind)
                upcoming = order[order.index((fam, size, kind)) + 1 :][:1]  # the next case, made during the steps
                wall = getattr(fam.module, "WALL_TIME", False)  # host timings: nothing else may run meanwhile
                measured = []
                began = time.perf_counter()
                harness.case_inputs(fam, size, kind)  # waits while its inputs and reference are made
                phases["inputs wait"] += time.perf_counter() - began
                if wall:
                    harness.settle()
                began = time.perf_counter()
                for name in fam.baselines:
                    progress.update(task, description=f"{fam.name} {key}: {name}")
                    try:
                        measured.append(
                            harness.measure_baseline(
                                fam,
                                size,
                                kind=kind,
                                name=name,
                                baseline_ms=measured[0].ms if measured else None,
                                budget_s=budget,
                                cold_l2=cold_l2,
                            )
                        )
                    except OutOfRange:  # an extra row that does not apply to this kind of input
                        if not measured:
                            raise
                    except Unavailable as e:  # an extra library row this machine cannot run (no PyTorch)
                        if not measured:
                            raise
                        console.print(f"[yellow]{fam.name} {key}: no {name} row: {e}[/]")
                    except Exception as e:  # an extra row that broke: a failure of the run, but not of its steps
                        if not measured:
                            raise
                        any_failed = True
                        console.print(f"[red]{fam.name} {key}: the {name} row FAILED: {type(e).__name__}: {e}[/]")
                    progress.advance(task)
                harness.settle()  # the CPU rows are host timings: no case is made meanwhile
                phases["library"] += time.perf_counter() - began
                began = time.perf_counter()
                for name in fam.cpu_rows:
                    progress.update(task, description=f"{fam.name} {key}: {name} on the CPU")
                    try:
                        measured.append(
                            harness.measure_cpu(
                                fam, size, kind=kind, name=name, baseline_ms=measured[0].ms, budget_s=budget
                            )
                        )
                    except OutOfRange:  # a CPU row that would take minutes at this size
                        pass
                    progress.advance(task)
                phases["CPU"] += time.perf_counter() - began
                if not wall:
                    harness.prepare_ahead((fam, size, kind), *upcoming)
                began = time.perf_counter()
                for v in steps[fam.name]:
                    progress.update(task, description=f"{fam.name} {key}: {v.name}")
                    try:
                        m = harness.measure_variant(
                            v, size, baseline_ms=measured[0].ms, kind=kind, budget_s=budget, cold_l2=cold_l2
                        )
                    except OutOfRange:
                        m = None
                    except Unsupported as e:  # once per step, not once per size
                        m = None
                        if v not in skipped:
                            skipped.add(v)
                            console.print(f"[yellow]skipped: {e}[/]")
                    progress.advance(task)
                    if m is not None:
                        measured.append(m)
                phases["steps"] += time.perf_counter() - began
                began = time.perf_counter()
                any_failed |= user_loops(fam, size, kind, measured, console)
                phases["user's loop"] += time.perf_counter() - began
                if wall:
                    harness.prepare_ahead((fam, size, kind), *upcoming)
                cpu = [m for m in measured if m.name in fam.cpu_rows]
                for m in measured:  # every row against the first CPU row of the same run
                    m.over_cpu = cpu[0].ms / m.ms if cpu and m.ms else float("nan")
                any_failed |= any(m.correct is False for m in measured)
                runs.setdefault(fam.name, {})[key] = measured
                console.print(run_table(fam, key, measured))
                if save:  # size by size: a run cut short (a time limit, an error) keeps every size it finished
                    path = results.save({fam.name: {key: measured}}, properties(), versions(), commit=commit)
            spent[fam.name] = time.perf_counter() - family_started
            console.print(
                f"[dim]{fam.name}: {spent[fam.name]:.0f} s ("
                + ", ".join(f"{part} {seconds:.1f}" for part, seconds in phases.items())
                + f"; of all these, compiling {harness.compile_seconds() - compiled_before:.1f})[/]"
            )
    console.print(
        f"{len(spent)} families in {time.perf_counter() - started:.0f} s "
        f"({harness.compile_seconds():.0f} s of it compiling in this process): "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in spent.items())
    )
    if save and runs:
        console.print(f"saved to {path.relative_to(results.ROOT)}; `python -m zoo report` regenerates the pages")
    return 1 if any_failed else 0


def user_loops(fam, size, kind, measured, console):
    """Time the best of ``measured``'s steps in a user's loop where ``size`` is the family's headline size or its
    smallest BENCH size, and there also the library's call (the baseline row), for the family's first kind of input;
    each figure goes to its row's ``user_loop``. Returns True when a loop's call raised or left a wrong output."""
    from rich.markup import escape

    from zoo.bench import user_loop

    headline, smallest = size == headline_size(fam), size == smallest_size(fam)
    if not (headline or smallest) or kind not in (None, fam.kinds[0]):
        return False
    rows = {m.name: m for m in measured}
    best = strongest.best_step(fam, {m.name: {"ratio": m.ratio, "correct": m.correct} for m in measured})
    if best is None:
        return False
    key = _key(fam, size, kind)
    try:
        rows[best[0]].user_loop = user_loop.step_loop(fam[best[0]], size, kind)
        if smallest and "baseline" in rows:
            rows["baseline"].user_loop = user_loop.library_loop(fam, size, kind)
    except Exception as e:  # the call as a user makes it broke: a failure of the run, not of the other figures
        console.print(
            f"[red]{fam.name} {key}: {best[0]} in a user's loop FAILED: {type(e).__name__}: {escape(str(e))}[/]"
        )
        return True
    mine = rows[best[0]]
    line = user_loop.loop_line(best[0], dataclasses.asdict(mine))
    if smallest and rows.get("baseline") is not None:
        line += " " + user_loop.call_cost_line(
            best[0], dataclasses.asdict(mine), dataclasses.asdict(rows["baseline"]), fam.BASELINE
        )
    console.print(f"{fam.name} {key}: {line}", markup=False)
    return mine.user_loop.get("correct") is False


def run_table(fam, key, measured):
    size, _ = results.parse_case(key)
    table = Table(title=f"{fam.name}, size {key} on {zoo.device.properties()['name']}")
    for col in (
        "variant",
        "ms",
        "GFLOP/s",
        "GB/s",
        f"% of {fam.BASELINE}",
        f"% of {fam.strongest} (strongest)",
        "lines",
        "x CPU",
        "regs",
        "smem B",
        "local B",
        "occupancy",
        "error",
        "correct",
    ):
        table.add_column(col, justify="right" if col != "variant" else "left")
    strongest_ms = next((m.ms for m in measured if m.name == fam.strongest and m.correct), None)
    for m in measured:
        r = m.resources
        library = m.name in fam.baselines or m.name in fam.cpu_rows
        correct = {True: "[green]yes[/]", False: "[red]NO[/]", None: "-" if library else "demo"}
        table.add_row(
            m.name,
            _fmt(m.ms, ".4f"),
            _fmt(m.gflops if fam.flops(size) else None, ",.0f"),
            _fmt(m.gbps, ",.0f"),
            _fmt(100 * m.ratio, ".1f"),
            _fmt(100 * strongest_ms / m.ms if strongest_ms and m.ms else None, ".1f"),
            str(code_lines.lines(fam, m.name) or "-"),  # of the row's code (zoo.bench.code_lines)
            _fmt(m.over_cpu, ",.1f"),
            str(r.get("registers", "-")),
            str(r.get("shared_bytes", "-")),
            str(r.get("local_bytes", "-")),
            _fmt(r.get("occupancy"), ".0%"),
            _fmt(m.error, ".1e"),  # relative norm error against float64 (elements wrong, for exact families)
            correct[m.correct],
        )
    return table


# -- without a GPU ---------------------------------------------------------------------------------------------
FIRST_PATH = ("vector_add", "reverse", "sgemm", "reduce")  # the classic first path: the default without a GPU


def simulator_job(fams, steps, console, *, given=None, rest=(), save=False, processes=None):
    """Check ``fams`` in the simulator at their test sizes (or the ``given`` cases), a job per step, in
    ``processes`` worker processes (default: one a core). Each family's table prints as its last step finishes,
    then one summary line, which says what checking ``rest`` (families left out) would add and about how long it
    would take. With ``save``, what each check took is merged into the costs file (``zoo.bench.costs``).
    Returns the exit code (1 when a check failed)."""
    from zoo.bench import costs

    cases = {fam.name: given[fam.name] if given else fam.test_cases() for fam in fams}
    jobs = {  # a step that is not checked (a demonstration, too new a GPU) costs nothing
        (fam.name, v.name): [(fam.name, v.name, _key(fam, *c)) for c in cases[fam.name] if _checked(v)]
        for fam in fams
        for v in steps[fam.name]
    }
    estimate = costs.Estimate(jobs, 1)
    # families in teaching order, so their tables come in that order; within one, the longest steps first, so
    # that the run does not end on one long step while the other workers wait
    jobs = {
        job: jobs[job]
        for fam in fams
        for job in sorted((j for j in jobs if j[0] == fam.name), key=lambda j: -estimate.cost[j])
    }
    from zoo import simulator

    workers = max(1, min(len(jobs), processes or len(simulator.START_CPUS)))  # the CLI has kept itself to one CPU
    estimate.workers = workers
    left = {fam.name: len(steps[fam.name]) for fam in fams}  # steps still running or queued, per family
    rows, measured, failed = {}, {}, False
    began = time.perf_counter()
    with _worker_pool(workers) as pool, progress_display(console, estimate) as progress:
        task = progress.add_task("starting", total=sum(len(checks) for checks in jobs.values()))
        checked = _run_jobs(jobs, cases, pool, workers, estimate, progress, task)
        for (name, step), (row, step_failed, seconds) in checked:
            rows[name, step] = row
            failed |= step_failed
            measured.update({(name, step, key): s for key, s in seconds.items()})
            progress.advance(task, len(jobs[name, step]))
            left[name] -= 1
            if not left[name]:
                fam = next(f for f in fams if f.name == name)
                console.print(_check_table(fam, cases[name], [rows[name, v.name] for v in steps[name]]))
    elapsed = time.perf_counter() - began
    checks = sum(len(c) for c in jobs.values())
    verdict = "[red]some FAILED[/]" if failed else "[green]all correct[/]"
    line = (
        f"{len(fams)} famil{'ies' if len(fams) != 1 else 'y'}, {checks:,} checks of {len(jobs)} steps in the "
        f"simulator: {verdict}, in {_clock(elapsed)} ({workers} process{'es' if workers != 1 else ''})."
    )
    if rest:
        more = [(f.name, v.name, _key(f, *c)) for f in rest for v in f if _checked(v) for c in f.test_cases()]
        seconds = estimate.seconds_for(more, jobs=sum(len(f) for f in rest))
        line += (
            f" --all adds the {len(rest)} other families ({len(more):,} checks): about {_clock(seconds)} more "
            "at this run's pace."
        )
    console.print(line)
    if save:
        path = costs.save(measured)
        console.print(f"saved what each check took to {path.relative_to(results.ROOT)}")
    return 1 if failed else 0


def _checked(v):
    return not (v.demonstration or v.unsupported())


def _check_table(fam, cases, rows):
    """The family's table under a line of its own that names the sizes (a table's title wraps to its width)."""
    from rich.console import Group

    table = Table()
    for col in ("variant", "passed", "out of range", "worst error", "status"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    return Group(f"[bold]{fam.name}[/]: sizes {', '.join(_key(fam, *c) for c in cases)} (simulator)", table)


@contextlib.contextmanager
def _worker_pool(workers):
    """Worker processes for the simulator's checks, each on a CPU of its own (None for one worker: this process
    checks). Forked where the platform can: a fork starts at once, with zoo imported, where a spawned process
    spends seconds importing numba again (in the simulator there is no CUDA context that a fork would break).
    All are started here, before the progress display starts a thread of its own."""
    if workers == 1:
        yield None
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from zoo import simulator

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    if method == "spawn":
        os.environ.setdefault("ZOO_TARGET", "sim")  # spawned workers choose the simulator without a word each
    taken = context.Value("i", 0)  # the slots handed out: each worker takes the next CPU
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_take_slot, initargs=(taken, simulator.START_CPUS)
    ) as pool:
        for started in [pool.submit(os.getpid) for _ in range(workers)]:
            started.result()
        yield pool


def _run_jobs(jobs, cases, pool, workers, estimate, progress, task):
    """Yield ((family, step), (row, failed, {case key: seconds})) as each job finishes, in the order given as
    far as the workers allow: in this process without a pool, else in the pool's worker processes."""
    order = list(jobs)
    if pool is None:
        for job in order:
            estimate.start(job)
            progress.update(task, description=f"{job[0]} {job[1][:3]}")
            result = _check_step(*job, cases[job[0]])
            estimate.finish(job, *result[3:])
            yield job, result[:3]
        return
    from concurrent.futures import FIRST_COMPLETED, wait

    running = {}
    while order or running:
        while order and len(running) < workers:  # never more handed out than there are workers: the clock is fair
            job = order.pop(0)
            running[pool.submit(_check_step, *job, cases[job[0]])] = job
            estimate.start(job)
        progress.update(task, description=", ".join(f"{f} {s[:3]}" for f, s in running.values()))
        done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
        for future in done:
            job = running.pop(future)
            result = future.result()
            estimate.finish(job, *result[3:])
            yield job, result[:3]


def _take_slot(taken, cpus):
    """A worker process's start: its simulated threads on a CPU of its own among ``cpus``, the parent's."""
    from zoo import simulator

    with taken.get_lock():
        slot = taken.value
        taken.value += 1
    simulator.settle_process(slot, cpus)


def _check_step(family, step, cases):
    """One step's check at ``cases`` (in a worker process, or here): (row, failed, {case key: seconds}, seconds,
    the seconds of its checks)."""
    from zoo.device.jit import quiet_occupancy

    began = time.monotonic()
    fam = zoo.family(family)
    seconds = {}
    with quiet_occupancy():
        rows, failed = check_family(fam, cases, NoProgress(), None, [fam[step]], seconds=seconds)
    by_case = {key: s for (_, key), s in seconds.items()}
    return rows[0], failed, by_case, time.monotonic() - began, sum(by_case.values())
