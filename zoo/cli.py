"""``python -m zoo`` (or ``zoo``): list, show, diff, check, run, report, doctor and exercise."""

import argparse
import difflib
import itertools
import subprocess
import sys

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.progress import Progress
from rich.syntax import Syntax
from rich.table import Table

import zoo
from zoo.bench import results
from zoo.bench import run as bench_run

console = Console()


class UsageError(Exception):
    """Bad arguments: one line on stderr, exit code 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _family(name):
    try:
        return zoo.family(name)
    except KeyError as e:
        raise UsageError(e.args[0]) from None


def _variant(fam, key):
    try:
        return fam[key]
    except KeyError as e:
        raise UsageError(e.args[0]) from None


def _families(names):
    return [_family(n) for n in names] if names else zoo.families()


def _sizes(fam, texts, default):
    if not texts:
        return list(default)
    try:
        sizes = [results.parse_size(t) for t in texts]
        for size in sizes:
            fam.check_size(size)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return sizes


def _cases(fam, texts, default):
    """(size, kind) pairs: every kind of input at each size, or the one named as SIZE@kind."""
    if not texts:
        return fam.cases(default)
    cases = []
    for text in texts:
        try:
            size, kind = results.parse_case(text)
            fam.check_size(size)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if kind is None:
            cases += fam.cases([size])
        elif kind in fam.kinds:
            cases.append((size, kind))
        else:
            raise UsageError(
                f"{fam.name} has no input kind {kind!r}"
                + (f"; it has: {', '.join(fam.kinds)}" if fam.kinds != (None,) else "")
            )
    return cases


def _steps(fam, args):
    """The family's steps, or those named with --step (each a number, v02 or a file name)."""
    names = getattr(args, "step", None)
    return list(fam) if not names else [_variant(fam, n) for n in names]


def _key(fam, size, kind):
    return results.size_key(size, kind, fam.kinds)


# -- list / show / diff -------------------------------------------------------
def cmd_list(args):
    fams = _families(args.families)
    title = (
        f"zoo: {len(fams)} families"
        if not args.families
        else ", ".join(f"{fam.name} ({len(fam)} step{'s' if len(fam) != 1 else ''})" for fam in fams)
    )
    table = Table(title=title, show_lines=False)
    table.add_column("family / variant", style="bold")
    table.add_column("summary")
    for fam in fams:
        table.add_row(f"[cyan]{fam.name}[/]", f"[cyan]{fam.summary}[/]  (baseline: {fam.BASELINE})")
        for v in fam:
            mark = " [red](demonstration)[/]" if v.demonstration else ""
            table.add_row(f"  {v.name}", v.summary + mark)
    console.print(table)


def cmd_show(args):
    v = _variant(_family(args.family), args.variant)
    if args.ptx or args.sass:
        return _show_compiled(v, args)
    from zoo.tools import report

    measured = f"\n\n**Measured**\n\n{report.measured_text(v)}"  # generated from results/, never in the file
    console.print(Panel(Markdown(_doc_markdown(v.doc) + measured), title=f"{v.family.name} / {v.name}"))
    code, first = _after_docstring(v.source)  # the docstring is in the panel above: shown once
    # long lines wrap, never cropped at the terminal's width; the numbers stay the file's
    console.print(Syntax(code, "python", line_numbers=True, start_line=first, word_wrap=True, theme="ansi_dark"))


def _after_docstring(source):
    """(the source after its module docstring, the number of its first line), blank lines skipped."""
    import ast

    body = ast.parse(source).body
    lines = source.splitlines(keepends=True)
    start = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        start = body[0].end_lineno
    while start < len(lines) and not lines[start].strip():
        start += 1
    return "".join(lines[start:]), start + 1


def _show_compiled(v, args):
    """PTX or SASS of each kernel the step launches, then a summary per kernel (zoo.tools.machine_code)."""
    import os

    if zoo.SIMULATOR:  # numba chose the simulator in this process: compile in a fresh one in GPU mode
        env = dict(os.environ, ZOO_TARGET="gpu")
        return subprocess.run(
            [sys.executable, "-m", "zoo", *sys.argv[1:]]
            if args.argv is None
            else [sys.executable, "-m", "zoo", *args.argv],
            env=env,
        ).returncode
    from zoo.tools import machine_code

    cc = _parse_cc(args.cc) if args.cc else _default_cc()
    size, kind = _cases(v.family, [args.size], None)[0] if args.size else (None, None)
    if v.unsupported(cc):  # below the step's MIN_CC or zoo's floor: nothing to compile
        raise UsageError(v.unsupported(cc))
    isa = "sass" if args.sass else "ptx"
    try:
        kernels = machine_code.compile_step(v, cc, size, kind)
        for k in kernels:
            machine_code.assemble(k, cc, want_sass=args.sass)
    except (machine_code.ToolMissing, machine_code.UnknownTarget) as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # NVVM refusing the architecture: numba's NvvmSupportError and kin
        if type(e).__name__.startswith("Nvvm"):
            raise UsageError(f"NVVM cannot compile for sm_{cc[0]}{cc[1]}: {str(e).splitlines()[0]}") from None
        raise
    for k in kernels:
        if not args.summary:
            sys.stdout.write(
                f"// ===== {k.name}{k.signature}, {isa.upper()} for {k.arch or f'sm_{cc[0]}{cc[1]}'} =====\n"
            )
            sys.stdout.write(k.sass if args.sass else k.ptx)
    sys.stdout.write(f"\n== {v.family.name}/{v.name}: {len(kernels)} kernel(s) for sm_{cc[0]}{cc[1]} ==\n")
    for k in kernels:
        sys.stdout.write("\n".join(machine_code.summary_lines(k, isa)) + "\n")
    return 0


def _parse_cc(text):
    """'8.6' -> (8, 6); a UsageError for anything else."""
    parts = text.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise UsageError(f"--cc is a compute capability such as 9.0 or 7.5, not {text!r}")
    return int(parts[0]), int(parts[1])


def _default_cc():
    """The GPU's compute capability if one is present, else 9.0 (Hopper)."""
    from zoo.runtime import target

    if target.driver_usable():
        from numba import cuda

        return cuda.get_current_device().compute_capability
    return (9, 0)


def _doc_markdown(doc):
    lines = []
    for line in doc.strip().splitlines():
        stripped = line.strip()
        head = stripped.rstrip(":")
        lines.append(f"**{head}**" if stripped.endswith(":") and head in zoo.registry.HEADINGS else stripped)
    return "\n".join(lines)


def cmd_diff(args):
    fam = _family(args.family)
    new = _variant(fam, args.variant)
    if args.other:
        old = _variant(fam, args.other)
    elif new.compared_with is None:
        raise UsageError(f"{new.name} is the first step of {fam.name}: name another variant to diff against")
    else:
        old = new.compared_with  # its BASE, or the step before
    diff = "".join(
        difflib.unified_diff(
            old.source.splitlines(keepends=True),
            new.source.splitlines(keepends=True),
            fromfile=f"{fam.name}/{old.path.name}",
            tofile=f"{fam.name}/{new.path.name}",
        )
    )
    if console.is_terminal:
        console.print(Syntax(diff, "diff", theme="ansi_dark"))
    else:
        sys.stdout.write(diff)


# -- check / run --------------------------------------------------------------
def cmd_check(args):
    fams = _families(args.families)
    small = zoo.SIMULATOR or getattr(args, "test_sizes", False)
    plan = [(fam, _cases(fam, args.size, fam.TEST_SIZES if small else fam.GPU_TEST_SIZES)) for fam in fams]
    any_failed = False
    from zoo.device.jit import quiet_occupancy

    # quiet_occupancy: zoo's own small launches are small on purpose
    with bench_run.progress_display(console) as progress, quiet_occupancy():
        task = progress.add_task("checking", total=sum(len(_steps(f, args)) * len(s) for f, s in plan))
        tables = []
        for fam, sizes in plan:
            rows, failed = bench_run.check_family(fam, sizes, progress, task, _steps(fam, args))
            any_failed |= failed
            table = Table(
                title=f"{fam.name}: sizes {', '.join(_key(fam, *c) for c in sizes)} "
                f"({'simulator' if zoo.SIMULATOR else 'GPU'})"
            )
            for col in ("variant", "passed", "out of range", "worst error", "status"):
                table.add_column(col)
            for row in rows:
                table.add_row(*row)
            tables.append(table)
    for t in tables:
        console.print(t)
    return 1 if any_failed else 0


def _fmt(value, spec):
    return "-" if value is None or value != value else format(value, spec)


def cmd_run(args):
    if zoo.SIMULATOR and not (args.families or args.all):  # without a GPU the default is the first path
        fams = [zoo.family(name) for name in bench_run.FIRST_PATH]
    else:
        fams = _families(args.families)
    steps = {fam.name: _steps(fam, args) for fam in fams}
    if args.best_step and not args.step:
        steps = {fam.name: bench_run.best_steps(fam) for fam in fams}
    given = {fam.name: _cases(fam, args.size, None) for fam in fams} if args.size else None
    if args.smallest:  # the sizes asked for (default: the headline size), then the smallest BENCH size
        given = {fam.name: bench_run.with_smallest(fam, (given or {}).get(fam.name)) for fam in fams}
    if zoo.SIMULATOR:
        rest = [] if args.families or args.all else [f for f in zoo.families() if f not in fams]
        what = f"the first path ({', '.join(bench_run.FIRST_PATH)}; --all: every family)" if rest else "each step"
        console.print(
            f"[yellow]No GPU: checking {what} in the simulator, at small sizes. Timings, registers and occupancy "
            "need a GPU.[/]"
        )
        return bench_run.simulator_job(
            fams, steps, console, given=given, rest=rest, save=args.save, processes=args.check_processes
        )
    return bench_run.gpu_job(
        fams,
        steps,
        console,
        given=given,
        all_sizes=args.all_sizes,
        budget=args.budget,
        save=args.save,
        check_processes=args.check_processes or bench_run.CHECK_PROCESSES,
        cold_l2=args.cold_l2,
    )


def cmd_tune(args):
    import importlib

    from zoo.bench import sweeps
    from zoo.runtime import tune_table

    fam = _family(args.family)
    name = sweeps.tuning_module(fam)
    if name is None:
        raise UsageError(f"family {fam.name} has no tuning sweep (no {fam.name}/sweeps/tune.py)")
    if zoo.SIMULATOR:
        raise UsageError("tuning times kernels: it needs a GPU")
    sweep = importlib.import_module(name)
    shapes = None
    if args.size:  # tune the class each size belongs to, at that size
        dims = getattr(fam.module, "dims", lambda size: (size,) * 3)  # (M, N, K) of a size; n is n x n x n
        shapes = {}
        for size in _sizes(fam, args.size, []):
            cls = tune_table.class_of(sweep, dims(size))
            if cls in shapes:
                raise UsageError(
                    f"{'x'.join(map(str, shapes[cls]))} and {'x'.join(map(str, dims(size)))} are both "
                    f"of class {cls}: a class is tuned at one size"
                )
            shapes[cls] = dims(size)
    count = len(sweep.candidates()) * len(shapes or sweep.SHAPE_CLASSES)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("tuning", total=count)
        table = sweep.sweep(shapes, progress=lambda *_: progress.advance(task), save=args.save)
    for cls, entry in table["classes"].items():
        shape = "x".join(map(str, entry["shape"]))
        out = Table(title=f"{fam.name} tuning sweep, class {cls} at {shape}, {table['device']} (fastest first)")
        for col in ("candidate", "threads", "ms", "GFLOP/s", "registers", "blocks/SM", "waves", "last wave", "note"):
            out.add_column(col)
        for row in entry["rows"]:
            note = row.get("error", "" if row.get("agrees", True) else "[red]disagrees with the others[/]")
            out.add_row(
                " ".join(f"{k}={v}" for k, v in row["tiles"].items()),
                str(row.get("threads", "-")),
                _fmt(row.get("ms"), ".3f"),
                _fmt(row.get("gflops"), ",.0f"),
                str(row.get("registers", "-")),
                str(row.get("blocks_per_sm", "-")),
                _fmt(row.get("waves"), ".2f"),
                _fmt(row.get("last_wave_full"), ".0%"),
                note,
            )
        console.print(out)
    where = [str(sweep.cache_path())] + ([str(sweep.path().relative_to(results.ROOT))] if args.save else [])
    console.print(f"saved to {' and '.join(where)}; the tuned steps launch each class's fastest candidate")


def cmd_profile(args):
    from zoo.tools.profile import ProfileError
    from zoo.tools.profile import command as profile_command

    try:
        return profile_command.command(args, console)
    except (KeyError, ValueError) as e:
        raise UsageError(e.args[0] if e.args else str(e)) from None
    except ProfileError as e:
        print(f"zoo profile: {e}", file=sys.stderr)
        return 1


# -- report / doctor ----------------------------------------------------------
def cmd_report(args):
    from zoo.tools import report, walkthrough

    families = [_family(n) for n in args.family] if args.family else None
    changed = 0
    for line in itertools.chain(report.regenerate(families), walkthrough.regenerate(families=families)):
        console.print(line)  # the pages come last: they show the plots just drawn
        changed += 1
    console.print(f"{changed} file(s) changed" if changed else "nothing changed")


def cmd_llm_budget(args):
    from zoo.device import slug
    from zoo.llm import config
    from zoo.tools import llm_budget as budget

    gpu = args.gpu or ("nvidia-h100-80gb-hbm3" if zoo.SIMULATOR else slug())
    model = {"llama3-8b": config.LLAMA3_8B, "tiny": config.TINY}[args.model]
    try:
        rates = budget.rates_from_results(gpu, head_size=model.head_size)
        lines = budget.report(model, rates, gpu, args.batch, args.context, args.prompt, args.train_tokens)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print("\n".join(lines))


def cmd_doctor(args):
    from zoo.device import properties, versions

    table = Table(title="zoo doctor", show_header=False)
    table.add_row(
        "mode", "[yellow]simulator[/] (no usable CUDA driver, or forced)" if zoo.SIMULATOR else "[green]GPU[/]"
    )
    for k, v in versions().items():
        table.add_row(k, str(v))
    for k, v in properties().items():
        table.add_row(k, f"{v:,}" if isinstance(v, int) else str(v))
    table.add_row("families", ", ".join(f"{f.name} ({len(f)})" for f in zoo.families()))
    table.add_row("tune tables", ", ".join(_tune_tables()) or "-")
    console.print(table)


def _tune_tables():
    """'family: where its table for this GPU is read from' for each family with a tuning sweep
    (zoo.runtime.tune_table)."""
    from zoo.bench import sweeps
    from zoo.runtime import tune_table

    found = []
    for fam in zoo.families():
        if sweeps.tuning_module(fam) is None:
            continue
        cache, repo = tune_table.cache_path(fam.name), tune_table.repo_path(fam.name)
        path = tune_table.found(cache, repo)  # the one a lookup reads
        where = None if path is None else str(path) if path == cache else str(repo.relative_to(results.ROOT))
        found.append(f"{fam.name}: {where or 'none, the defaults (python -m zoo tune ' + fam.name + ')'}")
    return found


def cmd_sweep(args):
    from zoo.bench import sweeps
    from zoo.device import properties, slug

    module = sweeps.modules()[args.command]
    args.simulator = zoo.SIMULATOR
    if zoo.SIMULATOR:
        console.print(
            f"[yellow]Simulator: {args.command} runs at tiny sizes to check correctness; "
            "its timings mean nothing (they need a GPU).[/]"
        )
    rows = module.measure(args)
    table = Table(title=f"{args.command} on {properties()['name']}")
    for col in module.COLUMNS:
        table.add_column(col, justify="left" if col in ("variant", "name", "series", "kind") else "right")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in module.COLUMNS))
    console.print(table)
    for line in sweeps.findings(module, rows):
        console.print(f"- {line}")
    device_slug = sweeps.SIMULATOR_SLUG if zoo.SIMULATOR else slug()
    csv_file = sweeps.write_csv(sweeps.csv_path(device_slug, args.command, args.out), module.COLUMNS, rows)
    png = sweeps.draw(module, rows, properties()["name"], sweeps.png_path(device_slug, args.command, args.out))
    for path in (csv_file, png):
        if path is not None:
            console.print(f"wrote {path}")
    return 0


def _cell(value):
    if isinstance(value, float):
        return _fmt(value, ",.1f" if abs(value) >= 100 else ".4g")
    return "-" if value is None else str(value)


def build_parser():
    p = Parser(
        prog="zoo",
        description="Numba-CUDA kernel zoo: run, check, show, diff and time variants.",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the epilog's columns as written
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND", title="commands")
    s = sub.add_parser("list", help="families and their variants")
    s.add_argument("families", nargs="*")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("show", help="the docstring and highlighted source of one step")
    s.add_argument("family")
    s.add_argument("variant", help="number (2), short name (v02) or file name")
    s.add_argument("--ptx", action="store_true", help="the PTX of each kernel the step launches (no GPU needed)")
    s.add_argument("--sass", action="store_true", help="the SASS instead (needs ptxas and nvdisasm or cuobjdump)")
    s.add_argument("--summary", action="store_true", help="with --ptx/--sass: only the per-kernel summary")
    s.add_argument("--cc", help="compute capability to compile for (default: the GPU present, else 9.0)")
    s.add_argument(
        "--size",
        help="the size whose launch is compiled (default: the family's last test size); SIZE@KIND for a kind of "
        "input other than the first",
    )
    s.set_defaults(func=cmd_show, argv=None)
    s = sub.add_parser("diff", help="unified diff to VARIANT from its BASE or the step before (or OTHER)")
    s.add_argument("family")
    s.add_argument("variant")
    s.add_argument("other", nargs="?")
    s.set_defaults(func=cmd_diff)
    for name, func, text in (
        ("check", cmd_check, "check every variant against the float64 reference"),
        ("run", cmd_run, "time every variant against the baseline (check only in the simulator)"),
    ):
        s = sub.add_parser(name, help=text)
        s.add_argument("families", nargs="*")
        s.add_argument(
            "--size",
            action="append",
            help="a size such as 4096 or 1000x777x333, or SIZE@KIND for one kind of input (repeatable)",
        )
        s.add_argument("--step", action="append", help="only this step (v09, 9 or its file name; repeatable)")
        if name == "check":
            s.add_argument(
                "--test-sizes",
                action="store_true",
                help="the simulator's small irregular sizes even on a GPU (for compute-sanitizer)",
            )
        if name == "run":
            s.add_argument(
                "--all",
                action="store_true",
                help="every family: the default on a GPU; without one the default is the first path ("
                + ", ".join(bench_run.FIRST_PATH)
                + ")",
            )
            s.add_argument(
                "--save",
                action="store_true",
                help="merge the figures into results/<gpu>.json (without a GPU: what each check took, into "
                "results/simulator/costs.json)",
            )
            s.add_argument(
                "--all-sizes",
                action="store_true",
                help="time every BENCH size (default: each family's headline size, after a check at GPU test sizes)",
            )
            s.add_argument(
                "--cold-l2",
                action="store_true",
                help="flush the L2 cache (write twice its size) before every timed call; saved rows say so",
            )
            s.add_argument(
                "--smallest",
                action="store_true",
                help="time each family's smallest BENCH size too (where the host's cost of a call shows), after the "
                "sizes given (default: the headline size), with the best step's call in a user's loop against the "
                "library's",
            )
            s.add_argument(
                "--best-step",
                action="store_true",
                help="only each family's best step at its headline size as this GPU's results file records it",
            )
            s.add_argument(
                "--budget",
                type=float,
                help=f"seconds of samples a row (default {bench_run.QUICK_BUDGET_S}, "
                f"or {bench_run.harness.BUDGET_S} with a size given)",
            )
            s.add_argument(
                "--check-processes",
                type=int,
                help=f"on a GPU, check the families in this many processes before timing (default "
                f"{bench_run.CHECK_PROCESSES}: half the cores, at most 8; 1 checks each family in this process just "
                "before its timing); without a GPU, the processes that check (default: one a core)",
            )
        s.set_defaults(func=func)
    s = sub.add_parser(
        "tune", help="time a family's launch choices on this GPU and save the table (sgemm: tiles; gemv: ring kernel)"
    )
    s.add_argument("family")
    s.add_argument(
        "--size",
        action="append",
        help="tune the shape class of this size, at this size (default: every class at its own shape)",
    )
    s.add_argument(
        "--save",
        action="store_true",
        help="also write the table into the repository's results/tune (the user's cache always gets it)",
    )
    s.set_defaults(func=cmd_tune)
    s = sub.add_parser(
        "profile", help="Nsight Compute counters of each step on a GPU; memory counters in the simulator"
    )
    from zoo.tools.profile import command as profile_command

    profile_command.add_arguments(s)
    s.set_defaults(func=cmd_profile)
    s = sub.add_parser("report", help="regenerate docs/results.md, the README's tables, plots and pages from results/")
    s.add_argument("--family", action="append", metavar="F", help="redraw only this family's plots and page (repeat)")
    s.set_defaults(func=cmd_report)
    s = sub.add_parser("doctor", help="mode, versions, device and its properties")
    s.set_defaults(func=cmd_doctor)
    s = sub.add_parser(
        "llm-budget",
        help="a model's memory and its decode, prefill and training times on a measured GPU, from the zoo's rates",
    )
    s.add_argument("--gpu", help="results/<GPU>.json to read the rates from (default: this GPU, else the H100's)")
    s.add_argument("--model", choices=("llama3-8b", "tiny"), default="llama3-8b")
    s.add_argument("--batch", type=int, default=1, help="sequences decoded together (default 1)")
    s.add_argument("--context", type=int, default=1024, help="positions each sequence's KV cache holds (default 1024)")
    s.add_argument("--prompt", type=int, default=1024, help="tokens of the prompt's prefill (default 1024)")
    s.add_argument("--train-tokens", type=float, default=1e9, help="tokens of the training estimate (default 1e9)")
    s.set_defaults(func=cmd_llm_budget)
    from zoo.exercise import cli as exercise_cli  # learn by doing: list, start, hint, check

    exercise_cli.add_parser(sub, Parser, UsageError)
    from zoo.bench import sweeps

    listed = []
    for command, module in sweeps.modules().items():  # each module of a family's sweeps/ is a command
        # not in the commands' list (no help=): the epilog lists the sweeps under their own heading
        s = sub.add_parser(command, description=module.__doc__)
        s.add_argument("--out", help="folder for the CSV and the PNG (default: results/sweeps and docs/plots)")
        if hasattr(module, "add_arguments"):
            module.add_arguments(s)
        s.set_defaults(func=cmd_sweep)
        listed.append((command, f"{module.__name__.split('.')[2]}: {module.HELP}"))
    p.epilog = _epilog(listed)
    return p


EXAMPLES = (
    ("python -m zoo run", "the main job (without a GPU: the first path)"),
    ("python -m zoo show reverse 3", "reverse's step 3: its docstring and code"),
    ("python -m zoo diff sgemm v3", "what sgemm's step 3 changed"),
)


def _epilog(sweep_commands):
    """The sweeps under a heading of their own, then three examples: the end of ``zoo --help``."""
    import shutil
    import textwrap

    columns = min(shutil.get_terminal_size().columns, 100) - 2  # argparse's own width, less its right margin
    lines = textwrap.wrap(
        "sweeps (one family's measurement on a GPU: a table, a CSV under results/sweeps/ and a plot under "
        "docs/plots/; in the simulator, tiny sizes for correctness; `zoo COMMAND --help` for its options):",
        columns,
    )
    width = max(len(c) for c, _ in sweep_commands) + 2
    for command, text in sweep_commands:
        wrapped = textwrap.wrap(text, max(20, columns - width - 2)) or [""]
        lines.append(f"  {command:<{width}}{wrapped[0]}")
        lines += [f"  {'':<{width}}{more}" for more in wrapped[1:]]
    lines += ["", "examples:"]
    width = max(len(c) for c, _ in EXAMPLES) + 2
    lines += [f"  {command:<{width}}{text}" for command, text in EXAMPLES]
    return "\n".join(lines)


def main(argv=None):
    if zoo.SIMULATOR:
        from zoo import simulator

        simulator.settle_process()  # the simulator's threads on one CPU, handing over the GIL sooner: checks run faster
    try:
        args = build_parser().parse_args(argv)
        from zoo import runtime
        from zoo.runtime import target

        if target.NOTICE and runtime._COMMAND_LINE:  # a command will run: now say where kernels run
            print(target.NOTICE, file=sys.stderr)
        return args.func(args) or 0
    except UsageError as e:
        print(f"zoo: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
