"""``python -m zoo exercise list|start|hint|check``: the commands, added to zoo's CLI by ``add_parser``."""

import json
import sys
from pathlib import Path

DEFAULT_DIR = "zoo-exercises"


def add_parser(sub, parser_class, usage_error):
    """The ``exercise`` command group, on the CLI's subparsers."""
    global UsageError
    UsageError = usage_error
    p = sub.add_parser("exercise", help="learn by doing: a starter file per step, checked in the simulator")
    actions = p.add_subparsers(dest="action", required=True, parser_class=parser_class)
    s = actions.add_parser("list", help="the exercises, each with the step it teaches")
    s.add_argument("families", nargs="*")
    s.set_defaults(func=cmd_list)
    s = actions.add_parser("start", help="write the starter file of one exercise")
    s.add_argument("family")
    s.add_argument("step", help="the step the exercise teaches: 3, v03 or its name")
    s.add_argument("dir", nargs="?", default=DEFAULT_DIR, help=f"where to write it (default: ./{DEFAULT_DIR}/)")
    s.add_argument("--force", action="store_true", help="overwrite a starter file already there")
    s.set_defaults(func=cmd_start)
    s = actions.add_parser("hint", help="the next hint for an exercise file (one more each time)")
    s.add_argument("file")
    s.add_argument("--again", action="store_true", help="start the hints over")
    s.set_defaults(func=cmd_hint)
    s = actions.add_parser("check", help="run an exercise file as a variant of its family and say what is wrong")
    s.add_argument("file")
    s.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds a stage may take before it is cut off (default: this machine's pace sets it, at least 120)",
    )
    s.add_argument("--exercise", help="the exercise (reverse/v03) when the file has no EXERCISE line")
    s.set_defaults(func=cmd_check)


UsageError = ValueError  # replaced by the CLI's own in add_parser


def _find(family, step):
    from zoo import exercise

    try:
        return exercise.find(family, step)
    except KeyError as e:
        raise UsageError(e.args[0]) from None


def cmd_list(args):
    import zoo
    from zoo import exercise

    for name in args.families:
        try:
            zoo.family(name)
        except KeyError as e:
            raise UsageError(e.args[0]) from None
    found = exercise.exercises(args.families or None)
    if not found:
        print("no exercises" + (f" in {', '.join(args.families)}" if args.families else ""))
        return 0
    print(
        f"{len(found)} exercises in {len({e.family.name for e in found})} families (start one with "
        "`python -m zoo exercise start FAMILY STEP`):"
    )
    width = max(len(f"{e.family.name} {e.step.name[:3]}") for e in found)
    for e in found:
        print(f"  {e.family.name + ' ' + e.step.name[:3]:<{width}}  {e.step.name}: {e.step.summary}")
        print(f"  {'':<{width}}  (you start from {e.start.name})")
    return 0


def cmd_start(args):
    from zoo.exercise import starter

    ex = _find(args.family, args.step)
    folder = Path(args.dir)
    path = folder / ex.file_name
    if path.exists() and not args.force:
        raise UsageError(f"{path} exists already (your work?): check it, or pass --force to start over")
    text, todos = starter.build(ex, shown_path=str(path))
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _hints_path(path).unlink(missing_ok=True)
    print(f"wrote {path}: {ex.family.name}/{ex.start.name} with {len(todos)} TODO(exercise) blocks to write.")
    print(f"Your task: {ex.step.summary}")
    print("The file's docstring says what to do and what is checked. Then:")
    print(f"  python -m zoo exercise check {path}    # runs it in the simulator, says what is wrong")
    print(f"  python -m zoo exercise hint {path}     # one hint more each time")
    print(f"  python -m zoo show {ex.family.name} {ex.start.name[:3]}    # the step you start from, as the zoo has it")
    return 0


def _hints_path(path):
    path = Path(path)
    return path.with_name(f".{path.name}.hints")


def cmd_hint(args):
    from zoo.exercise import check, starter

    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"no file {path}")
    try:
        ex = check.exercise_of(path, path.read_text())
    except check.CheckError as e:
        raise UsageError(str(e)) from None
    state_path = _hints_path(path)
    state = {}
    if state_path.exists() and not args.again:
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            state = {}
    shown = state.get("shown", 0) if state.get("exercise") == ex.key else 0
    hints = starter.hints(ex)
    if shown >= len(hints):
        print(
            f"No more hints ({len(hints)} shown). The zoo's own change, the solution: "
            f"python -m zoo diff {ex.family.name} {ex.step.name[:3]} {ex.start.name[:3]}  "
            f"(--again starts the hints over)"
        )
        return 0
    print(f"Hint {shown + 1} of {len(hints)}: {hints[shown]}")
    state_path.write_text(json.dumps({"exercise": ex.key, "shown": shown + 1}) + "\n")
    return 0


def cmd_check(args):
    from zoo.exercise import check

    try:
        return check.check(args.file, args.exercise, args.timeout or check.DEFAULT_TIMEOUT, say=_say)
    except check.CheckError as e:
        raise UsageError(str(e)) from None


def _say(line):
    print(line)
    sys.stdout.flush()
