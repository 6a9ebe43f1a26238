"""``zoo exercise check FILE``: run a learner's file as a variant of its family and say what is wrong.

The file is only read. A syntax error is found here, before anything runs; the
rest happens in a process of its own (``zoo.exercise.runner``), in the simulator
and, on a machine with a GPU, a second time on the GPU, so that an endless loop
is cut off by the clock and a crash of the learner's code is a line of text here.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from zoo.exercise import runner

EXERCISE_LINE = re.compile(r"^EXERCISE\s*=\s*[\"']([\w./-]+)[\"']", re.M)
DEFAULT_TIMEOUT = None  # a stage's limit follows this machine's pace (zoo.exercise.runner.stage_limit)
GRACE = 20  # seconds past a stage's limit and the runner's own backstop before the process is killed from outside
GPU_STAGE_S = 300  # a stage's limit on a GPU at least: its sizes are large, and compiling is part of a stage


class CheckError(Exception):
    """The file cannot be checked at all (missing, no EXERCISE line): one line, exit code 2."""


def exercise_of(path, text, override=None):
    from zoo import exercise

    key = override
    if key is None:
        m = EXERCISE_LINE.search(text)
        if not m:
            raise CheckError(
                f'{path} has no EXERCISE line (EXERCISE = "reverse/v03"): start an exercise with '
                "`python -m zoo exercise start FAMILY STEP`, or name it with --exercise"
            )
        key = m.group(1)
    try:
        return exercise.by_key(key)
    except KeyError as e:
        raise CheckError(f"{path}: EXERCISE = {key!r}: {e.args[0]}") from None


def syntax_problem(path, text):
    """One line for a syntax error, or None."""
    try:
        compile(text, str(path), "exec")
    except SyntaxError as e:
        line = (e.text or "").strip()
        where = f"line {e.lineno}" + (f", column {e.offset}" if e.offset else "")
        return f"syntax error at {where}: {e.msg}" + (f": `{line}`" if line else "")
    return None


def _hang(stderr_text, path, timeout, stage):
    """What a run cut off by faulthandler was doing (its watcher never reported): the lines of the learner's
    file where its threads were, from the stacks it dumped."""
    where = Counter()
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", stderr_text):
        for file, line, func in re.findall(r'File "([^"]+)", line (\d+) in (\S+)', block):
            if _same(file, path):
                where[(int(line), func)] += 1
                break
    found = [[line, func, count] for (line, func), count in where.most_common(3)]
    return cut_off(path, timeout, stage, found, moved=None)


def cut_off(path, limit, stage, where, moved):
    """The line for a stage cut off at its limit. ``where``: [line, function, threads] of the learner's file,
    most threads first; ``moved``: whether those threads still moved between the watcher's last two looks
    (None when it cannot tell). A busy machine is the first thing to rule out: a longer --timeout."""
    from zoo.exercise.runner import SAMPLE_S

    head = f"cut off after {limit:g} s at {stage}"
    retry = f"retry with a longer limit, `--timeout {2 * limit:g}`"
    if not where:
        return (
            f"{head}, with no thread in your file: {retry}, in case this machine is only busy; if it is cut off "
            "again, a grid far too large for the simulator (each CUDA thread is a Python thread there), or a loop "
            "in code your file calls"
        )
    line, func, count = where[0]
    at = f"{count} thread{'s' if count != 1 else ''} at line {line} (`{_line(path, line)}`) in {func}"
    if moved:
        return (
            f"{head} with your kernel still running ({at}, and its threads still moving between two looks "
            f"{SAMPLE_S:g} s apart): this machine is slower than the limit allowed; {retry}"
        )
    still = f", standing still between two looks {SAMPLE_S:g} s apart" if moved is False else ""
    return (
        f"{head}: {at}{still}. First {retry}, in case this machine is only busy; if it is cut off there again: "
        "a loop that never ends? (a condition that never turns false, an index or stride that does not move, "
        "a barrier some threads of the block never reach)"
    )


def _same(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _line(path, lineno):
    try:
        return Path(path).read_text().splitlines()[lineno - 1].strip()
    except (OSError, IndexError):
        return ""


def _fmt(value):
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:,.0f}"
    return f"{value:,}"


def _print_figures(event, say):
    rows = event["rows"]
    if not rows:
        return
    say(f"  the simulator's figures at size {event['size']} (yours / the zoo's {event['step']}):")
    width = max(len(r[0]) for r in rows)
    for name, yours, zoos, verdict, relation in rows:
        mark = (
            f"  [{verdict}: yours must be {relation} the zoo's]" if verdict == "NO" else ("  [ok]" if verdict else "")
        )
        say(f"    {name:<{width}}  {_fmt(yours):>10} / {_fmt(zoos):<10}{mark}")


def run(path, exercise, mode, timeout, say):
    """Run the runner in one mode; returns (passed, the failure line or None)."""
    import zoo

    root = str(Path(zoo.__file__).resolve().parent.parent)
    env = dict(os.environ, ZOO_TARGET=mode, PYTHONDONTWRITEBYTECODE="1", NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS="0")
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    with tempfile.TemporaryDirectory(prefix="zoo-exercise-") as tmp:
        events_path, out_path, err_path = (Path(tmp) / n for n in ("events", "stdout", "stderr"))
        events_path.touch()
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "zoo.exercise.runner",
                    str(path),
                    exercise.key,
                    str(events_path),
                    str(timeout),
                    mode,
                ],
                env=env,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            passed, failure, stage, done = False, None, "start", False
            last, seen = time.monotonic(), 0
            limit = timeout if timeout != "auto" else runner.MIN_STAGE_S  # until the runner has measured its own
            killed = False
            while True:
                finished = proc.poll() is not None
                with open(events_path) as f:
                    lines = f.read().splitlines()
                complete = lines if finished else lines[:-1] if lines and not lines[-1].endswith("}") else lines
                for line in complete[seen:]:
                    seen += 1
                    last = time.monotonic()
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    kind = event["e"]
                    if kind == "alive":
                        stage = event["what"]
                    elif kind == "limit":
                        limit = event["seconds"]
                        say(
                            f"  each stage may take {limit:g} s here (this machine's pace: a calibration run took "
                            f"{event['calibration']:.2f} s, {event['quiet']:.2f} s on a quiet machine; "
                            "--timeout sets it)"
                        )
                    elif kind == "cutoff":
                        failure = cut_off(path, event["limit"], event["stage"], event["where"], event["moved"])
                    elif kind == "case":
                        status = event["status"]
                        shown = {"ok": "ok", "wrong": "WRONG", "error": "ERROR", "refused": "REFUSED"}.get(
                            status, status
                        )
                        extra = f" ({event['text']})" if event.get("text") and status == "skipped" else ""
                        say(f"  size {event['case']}: {shown}{extra}")
                    elif kind == "figures":
                        _print_figures(event, say)
                    elif kind == "grade":
                        say(f"  {event['text']}")
                    elif kind == "fail":
                        failure = event["text"]
                    elif kind == "done":
                        done, passed = True, event["ok"]
                if finished:
                    break
                if time.monotonic() - last > limit + runner.BACKSTOP_S + GRACE:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    killed = True
                    break
                time.sleep(0.05)
        stderr_text = err_path.read_text(errors="replace")
        printed = out_path.read_text(errors="replace").splitlines()
    if printed:
        say(f"  your file printed ({len(printed)} line{'s' if len(printed) != 1 else ''}; the first 10):")
        for line in printed[:10]:
            say(f"    | {line}")
    if not done and failure is None:
        if killed or "Timeout (" in stderr_text:
            failure = _hang(stderr_text, path, limit, stage)
        else:
            last_line = next((x for x in reversed(stderr_text.splitlines()) if x.strip()), "")
            failure = f"the check stopped at {stage} (exit code {proc.returncode}): {last_line.strip()}"
    return passed and failure is None, failure


def check(path, exercise_key=None, timeout=DEFAULT_TIMEOUT, say=print, gpu=None):
    """Check a learner's file; returns 0 when it is right (and teaches the step's lesson), 1 when not.

    Raises CheckError when the file cannot be checked at all."""
    import zoo

    path = Path(path)
    if not path.is_file():
        raise CheckError(f"no file {path}")
    text = path.read_text()
    ex = exercise_of(path, text, exercise_key)
    limit = (
        f"each stage is cut off after {timeout:g} s"
        if timeout
        else f"each stage's limit follows this machine's pace, at least {runner.MIN_STAGE_S} s"
    )
    say(f"Checking {path} as {ex.family.name}/{ex.step.name} ({limit})")
    problem = syntax_problem(path, text)
    if problem:
        say(f"FAIL: {problem}")
        return 1
    say("In the simulator:")
    ok, failure = run(path, ex, "sim", timeout or "auto", say)
    if not ok:
        say(f"FAIL: {failure}")
        say(f"  (a hint: python -m zoo exercise hint {path})")
        return 1
    if gpu is None:
        gpu = not zoo.SIMULATOR
    if gpu:
        say("On the GPU:")
        ok, failure = run(path, ex, "gpu", max(timeout or 0, GPU_STAGE_S), say)
        if not ok:
            say(f"FAIL: {failure}")
            return 1
    say(f"PASS: {ex.key} is right at every size{' on the GPU too' if gpu else ''}, and does what the step teaches.")
    return 0
