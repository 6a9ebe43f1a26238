"""The process that runs a learner's file: ``python -m zoo.exercise.runner FILE EXERCISE EVENTS TIMEOUT MODE``.

``zoo.exercise.check`` starts it (in the simulator, and on a GPU a second time in
GPU mode) and reads what it finds from EVENTS, one JSON object a line, as it goes:
a process of its own, so a learner's endless loop is cut off by the clock and
nothing the file does reaches the process that reports. Every problem is told in
one line, in the learner's terms: the line of their file, the thread, the index.

TIMEOUT is a stage's limit in seconds, or ``auto``: a short calibration run in the
simulator first measures this machine's pace, and the limit scales with it
(``stage_limit``). While a stage runs, a watcher looks every ``SAMPLE_S`` seconds at
where the threads running the learner's file are; at the limit it reports where
they were and whether they still moved between its last two looks (a slow machine)
or stood still (a loop that never ends, a barrier never reached), then ends the
process. ``faulthandler`` is the backstop, should the watcher never get to run.
"""

import faulthandler
import functools
import hashlib
import inspect
import json
import math
import os
import re
import sys
import threading
import time
import traceback
import types
from collections import Counter
from pathlib import Path

import numpy as np

TODO = "TODO(exercise)"
SIM_THREAD = re.compile(r"^tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\](?:: )?", re.S)
NUMPY_BOUNDS = re.compile(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)")
SLACK = 0.10  # a lesson's figure may miss the zoo's by this share
SAMPLE_S = 2.0  # seconds between two looks at where the learner's threads are
BACKSTOP_S = 15.0  # past a stage's limit, faulthandler ends a process whose watcher did not
MIN_STAGE_S = 120  # a stage's limit is never below this: what the tests allow a stage on a busy machine
QUIET_STAGE_S = 60  # a stage's limit before it followed the machine: enough for every exercise on a quiet one
# zoo.exercise.calibration's seconds on the two-core machine the exercises were written on, when quiet: 0.7 times
# reverse v03's check at size 1023 (0.10 s quiet there), the ratio of the two timed side by side under load
QUIET_CALIBRATION_S = 0.07


class Stop(Exception):
    """The check is over: the event saying why has been written."""


class Events:
    def __init__(self, path, timeout, learner=None):
        self.file = open(path, "a", buffering=1)  # noqa: SIM115 - open for the life of the process
        self.timeout = timeout
        self.learner = os.path.realpath(learner) if learner else None
        self.stage, self.stage_began = "start", time.monotonic()
        self.lock = threading.Lock()
        self._mine = {}  # file name -> whether it is the learner's file
        threading.Thread(target=self._watch, name="zoo-exercise-watcher", daemon=True).start()

    def __call__(self, kind, **fields):
        with self.lock:
            self.file.write(json.dumps({"e": kind, **fields}) + "\n")
            self.file.flush()

    def alive(self, what):
        """A new stage: the clock starts again (a stage that outlives the limit is cut off)."""
        faulthandler.cancel_dump_traceback_later()
        if self.timeout:
            faulthandler.dump_traceback_later(self.timeout + BACKSTOP_S, exit=True, file=sys.stderr)
        self.stage, self.stage_began = what, time.monotonic()
        self("alive", what=what)

    def fail(self, text):
        self("fail", text=text)
        raise Stop

    def positions(self):
        """{(thread, frame): (line, function, the frame's numbers)} of the threads running the learner's file,
        each at its innermost frame there."""
        found, mine = {}, self._mine
        for ident, frame in sys._current_frames().items():
            while frame is not None:
                name = frame.f_code.co_filename
                if name not in mine:  # resolved once a file name: thousands of frames are looked at each time
                    mine[name] = bool(self.learner) and os.path.realpath(name) == self.learner
                if mine[name]:
                    numbers = tuple(
                        (name, value)
                        for name, value in sorted(frame.f_locals.items())
                        if isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
                    )
                    found[ident, id(frame)] = (frame.f_lineno, frame.f_code.co_name, numbers)
                    break
                frame = frame.f_back
        return found

    def _watch(self):
        """Look at the learner's threads every SAMPLE_S seconds; at the limit, report where they were and end."""
        previous = None
        while True:
            time.sleep(SAMPLE_S)
            now = self.positions()
            if not self.timeout or time.monotonic() - self.stage_began <= self.timeout:
                previous = now
                continue
            # moving: a thread started or finished, or a number it holds changed, between the last two looks
            moved = (
                None  # one look only: the limit is shorter than the time between two
                if previous is None
                else set(now) != set(previous) or any(now[k][2] != previous[k][2] for k in now)
            )
            where = Counter((line, function) for line, function, _ in now.values()).most_common(3)
            self(
                "cutoff",
                stage=self.stage,
                limit=self.timeout,
                moved=moved,
                threads=len(now),
                where=[[line, function, count] for (line, function), count in where],
            )
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
            os._exit(3)


def stage_limit(calibration_seconds):
    """A stage's limit on a machine whose calibration took this long: the quiet machine's limit scaled by how
    much slower this one is now, and never below MIN_STAGE_S."""
    return max(MIN_STAGE_S, math.ceil(QUIET_STAGE_S * calibration_seconds / QUIET_CALIBRATION_S))


# -- the learner's terms -------------------------------------------------------------------------------
def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _source_line(path, lineno):
    try:
        return Path(path).read_text().splitlines()[lineno - 1].strip()
    except (OSError, IndexError):
        return ""


def _learner_frame(exc, path):
    """The innermost frame of the traceback that runs a line of the learner's file."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        if _same_file(tb.tb_frame.f_code.co_filename, path):
            found = tb.tb_frame
        tb = tb.tb_next
    return found


def _bad_subscript(frame, code):
    """(name, index, shape, is a store, is a NumPy array (shared or local memory)) of the subscript of a line
    whose index lies outside its array, from the failed frame's own values; None when it cannot be told."""
    import ast

    try:
        tree = ast.parse(code.strip().rstrip(":") if code.strip().endswith(":") else code.strip())
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            continue
        name = node.value.id
        array = frame.f_locals.get(name, frame.f_globals.get(name))
        host = getattr(getattr(array, "_item", array), "_ary", array)
        if not isinstance(host, np.ndarray):
            continue
        try:
            index = eval(compile(ast.Expression(node.slice), "<index>", "eval"), frame.f_globals, dict(frame.f_locals))
        except Exception:  # noqa: BLE001 - an index we cannot evaluate again: try the next subscript
            continue
        index = index if isinstance(index, tuple) else (index,)
        if not all(isinstance(i, (int, np.integer)) for i in index) or len(index) != host.ndim:
            continue
        if any(not -n <= int(i) < n for i, n in zip(index, host.shape, strict=True)):
            write = isinstance(node.ctx, ast.Store)
            return name, tuple(int(i) for i in index), host.shape, write, not hasattr(array, "_item")
    return None


def _thread_words(tid, ctaid):
    def index(v):
        return str(tuple(v)) if v[1] or v[2] else str(v[0])

    return f"thread {index(tid)} of block {index(ctaid)}"


def diagnose(exc, path):
    """One line that says what went wrong, where in the learner's file, and which thread."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [i for i, f in enumerate(frames) if _same_file(f.filename, path)]
    text = str(exc).strip()
    thread = None
    m = SIM_THREAD.match(text)
    if m:
        thread = _thread_words([int(g) for g in m.groups()[:3]], [int(g) for g in m.groups()[3:6]])
        text = text[m.end() :]
    lineno = frames[mine[-1]].lineno if mine else None
    if lineno is None:  # numba's compile errors name the line in their text
        found = re.findall(r'File "([^"]+)", line (\d+)', text)
        for file, line in reversed(found):
            if _same_file(file, path):
                lineno = int(line)
                break
    first = text.splitlines()[0] if text else ""
    code = _source_line(path, lineno) if lineno else ""
    where = f"line {lineno}: `{code}`" if lineno else "zoo's call of your launch"
    who = f"{thread} " if thread else ""
    if isinstance(exc, NotImplementedError) and TODO in text:
        number = re.search(r"TODO\(exercise\) (\d+)", text)
        which = f"{TODO} {number.group(1)}" if number else TODO
        return (
            f"{which} is still to write (line {lineno} still raises NotImplementedError): "
            "write that block, then delete its raise line"
        )
    if isinstance(exc, IndexError):
        frame = _learner_frame(exc, path)
        found = _bad_subscript(frame, code) if frame is not None and code else None
        if found:
            name, index, shape, write, shared = found
            elements = int(np.prod(shape)) if shape else 1
            size = f"{elements} element{'s' if elements != 1 else ''}" + (
                f", shape {tuple(shape)}" if len(shape) > 1 else ""
            )
            verb = "wrote" if write else "read"
            place = (
                f"before the start of {name} (a negative index; {name} has {size})"
                if any(i < 0 for i in index)
                else f"past the end of {name} ({size})"
            )
            text = f"{who}{verb} {name}[{', '.join(map(str, index))}], {place}, at {where}"
            if shared and elements == 0:
                return (
                    f"{text}: {name} has no elements. A dynamic shared array, cuda.shared.array(0, dtype), gets "
                    "its size in bytes from the launch's fourth argument: kernel[blocks, threads, 0, nbytes]"
                )
            return f"{text}: guard the index (if i < n) or fix how it is computed"
        b = NUMPY_BOUNDS.search(first)
        detail = f"index {b.group(1)}, {b.group(3)} elements along axis {b.group(2)}" if b else first
        return f"{who}out-of-bounds access at {where} ({detail}): guard the index or fix how it is computed"
    kind = type(exc).__name__
    return f"{who}{kind} at {where}: {first}".strip() if lineno else f"{who}{kind}: {first}".strip()


def describe_wrong(result, ref, tolerance, dtype):
    """'out[17]: expected 0.25, got nan (never written; 12 of 1000 elements wrong)'."""
    from zoo.runtime import arrays

    result = np.asarray(result)
    if result.shape != ref.shape:
        return f"the output has shape {result.shape}, expected {ref.shape}"
    exact = result.dtype.kind in "iub" or tolerance == 0
    flat_r, flat_ref = result.reshape(-1), ref.reshape(-1)
    if exact:
        bad = flat_r != flat_ref
    else:
        scale = float(np.sqrt(np.mean(np.square(flat_ref)))) if flat_ref.size else 0.0
        bound = max(tolerance, 1e-7) * (scale if scale > 0 else 1.0)
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(flat_r.astype(np.float64) - flat_ref) <= bound)
    count = int(np.count_nonzero(bad))
    if not count:
        return "the error is spread over many elements (relative norm error over the tolerance)"
    first = int(np.argmax(bad))
    index = np.unravel_index(first, result.shape) if result.shape else ()
    at = f"out[{', '.join(map(str, index))}]" if index else "out"
    got, want = flat_r[first], flat_ref[first]
    poison = arrays.poison_value(dtype)
    never = (isinstance(poison, float) and math.isnan(poison) and np.isnan(got)) or (
        not isinstance(poison, float) and got == poison
    )
    note = "; never written: the output starts as that value" if never else ""
    return f"{at}: expected {_num(want)}, got {_num(got)}{note} ({count} of {flat_r.size} elements wrong)"


def _figure(v):
    """1,024 or 1.71: a figure as the table shows it."""
    return f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else f"{v:.3g}"


def _num(v):
    v = v.item() if hasattr(v, "item") else v
    return f"{v:.6g}" if isinstance(v, float) else str(v)


# -- loading the file ----------------------------------------------------------------------------------
def load(path, fam, events):
    """The learner's file as a module of the family (its imports of the family's helpers work as a step's)."""
    source = Path(path).read_text()
    code = compile(source, str(path), "exec")  # compiled here: no __pycache__ beside the learner's file
    name = f"{fam.module.__name__}._exercise_{re.sub(r'[^0-9a-zA-Z_]', '_', Path(path).stem)}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__package__ = fam.module.__name__
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except Exception as e:  # noqa: BLE001 - the learner's error, told in one line
        events.fail(f"importing your file: {diagnose(e, path)}")
    return module


def check_signature(module, exercise, events):
    fam, step = exercise.family, exercise.step
    launch = getattr(module, "launch", None)
    wanted = [p for p in inspect.signature(step.module.launch).parameters.values() if p.default is p.empty]
    call = f"launch({', '.join(p.name for p in wanted)})"
    if not callable(launch):
        events.fail(f"your file has no launch function: the {fam.name} family calls {call}")
    try:
        params = list(inspect.signature(launch).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    takes_more = any(p.kind == p.VAR_POSITIONAL for p in params)
    count = len(fam.INPUTS) + 1
    if len(required) > count or (len(positional) < count and not takes_more):
        mine = f"launch({', '.join(p.name for p in params)})"
        events.fail(
            f"{mine} does not take what the family passes: it calls {call}, the {len(fam.INPUTS)} input "
            f"array{'s' if len(fam.INPUTS) != 1 else ''} then the output"
        )


# -- running it --------------------------------------------------------------------------------------------
def _variant(exercise, module, path):
    from zoo.registry import Variant

    step = exercise.step
    v = Variant(exercise.family, step.number, step.technique, path)
    v._module = module
    return v


def _run_once(v, inputs, size, kind):
    fam = v.family
    from zoo.runtime import arrays

    shape, dtype = fam.output_for(*inputs)
    out = np.full(shape, arrays.poison_value(dtype), dtype=dtype)
    return np.array(v(*inputs, out=out)), dtype


def run_cases(exercise, v, path, cases, events):
    """Each case once (twice when wrong: do two runs differ?); the largest once more. Stops at the first failure."""
    from zoo.bench import harness, results
    from zoo.errors import OutOfRange

    fam, step = exercise.family, exercise.step
    largest = None
    for i, (size, kind) in enumerate(cases):
        key = results.size_key(size, kind, fam.kinds)
        events.alive(f"size {key}")
        inputs = fam.inputs(size, 100 + i, kind)
        ref = np.asarray(fam.reference(*inputs))
        try:
            result, dtype = _run_once(v, inputs, size, kind)
        except OutOfRange as e:
            try:
                step.validate(*inputs)
            except OutOfRange:
                events("case", case=key, status="skipped", text="out of range for the zoo's step too")
                continue
            events("case", case=key, status="refused", text=str(e))
            events.fail(
                f"at size {key} your validate raises OutOfRange ({e}), but the zoo's {step.name[:3]} takes "
                "this size: the step is about taking it"
            )
        except Exception as e:  # noqa: BLE001
            events("case", case=key, status="error")
            events.fail(f"at size {key}: {diagnose(e, path)}")
        ok, _, _ = harness.compare(result, ref, fam.tolerance(size))
        if not ok:
            again, _ = _run_once(v, inputs, size, kind)
            events("case", case=key, status="wrong")
            if not np.array_equal(again, result, equal_nan=True):
                events.fail(
                    f"at size {key}: wrong, and different results on two runs of the same input: a race. "
                    "A missing barrier (cuda.syncthreads()) between a thread's store to shared memory and "
                    "another thread's load of it?"
                )
            events.fail(f"at size {key}: wrong: {describe_wrong(result, ref, fam.tolerance(size), dtype)}")
        events("case", case=key, status="ok")
        elements = int(np.prod(size)) if isinstance(size, tuple) else int(size)
        if largest is None or elements > largest[0]:
            largest = (elements, size, kind, key, inputs, ref)
    if largest is not None:
        _, size, kind, key, inputs, ref = largest
        events.alive(f"size {key}, second run")
        try:
            again, dtype = _run_once(v, inputs, size, kind)
        except Exception as e:  # noqa: BLE001
            events.fail(f"at size {key}, second run: {diagnose(e, path)}")
        ok, _, _ = harness.compare(again, ref, fam.tolerance(size))
        if not ok:
            wrong = describe_wrong(again, ref, fam.tolerance(size), dtype)
            events.fail(
                f"at size {key}: right on the first run, wrong on the second ({wrong}): "
                "a race. A missing barrier (cuda.syncthreads()) between a store to shared memory and another "
                "thread's load of it?"
            )
        events("case", case=f"{key}, second run", status="ok")


def observe_step(variant, size, kind, extra):
    """Figures of one call at ``size``, in the simulator; kept in the user's cache (``lessons/``) under a hash of
    the step's text, the case and every source file of zoo, so the zoo's step is observed once, not at each check
    of a learner's file, and an unchanged file is not observed twice."""
    from zoo.exercise import observe
    from zoo.runtime import user_cache

    fam = variant.family
    digest = hashlib.sha256(f"{_zoo_sources_digest()} {fam.name} {size!r} {kind!r}\n".encode())
    digest.update(variant.source.encode())
    kept = user_cache.root() / "lessons" / f"{digest.hexdigest()[:32]}.json"
    try:
        return json.loads(kept.read_text())
    except (OSError, ValueError):
        pass  # not observed yet (or a file cut short): observe it now
    inputs = fam.inputs(size, 7, kind)
    device_inputs, device_out, _, _ = variant.prepare(*inputs)
    names = [n.rstrip("?") for n in fam.INPUTS] + ["out"]
    with observe.observing(zip(names, (*device_inputs, device_out), strict=False)) as obs:
        variant.launch(device_inputs, device_out)
    shape, _ = fam.output_for(*inputs)
    found = {k: _plain(v) for k, v in observe.figures(obs, int(np.prod(shape)) if shape else 1, extra).items()}
    try:  # written whole, then renamed: a reader never sees half a file, two writers leave one whole
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_name(f"{kept.name}.{os.getpid()}")
        partial.write_text(json.dumps(found))
        os.replace(partial, kept)
    except OSError:
        pass  # a cache that cannot be written costs time, never a result
    return found


def _plain(value):
    """A figure as JSON keeps it: NumPy's scalars as Python's."""
    return value.item() if isinstance(value, np.generic) else value


@functools.cache
def _zoo_sources_digest():
    """One hash of every source file of zoo (the simulator, the device package, the families, the observer):
    a change to any of them makes every kept figure stale."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


STANDARD_FIGURES = ("global_loads_per_output", "load_sectors_per_request", "store_sectors_per_request", "shared_ways")


def meets(relation, yours, zoos):
    """Whether a learner's figure stands in ``relation`` ("<=", ">=", "==") to the zoo step's, with SLACK."""
    return {
        "<=": yours <= zoos * (1 + SLACK) + 1e-9,
        ">=": yours >= zoos * (1 - SLACK) - 1e-9,
        "==": abs(yours - zoos) <= 1e-9 * max(1.0, abs(zoos)),
    }[relation]


def lesson_case(exercise):
    """(size, kind) the lesson's figures are compared at."""
    fam = exercise.family
    kind = exercise.kinds[0] if exercise.kinds else fam.kinds[0]  # the step's own kernel may take one kind only
    return (exercise.lesson_size if exercise.lesson_size is not None else fam.TEST_SIZES[-1]), kind


def run_lesson(exercise, v, path, events):
    from zoo.bench import results
    from zoo.exercise import observe

    fam, step = exercise.family, exercise.step
    size, kind = lesson_case(exercise)
    key = results.size_key(size, kind, fam.kinds)
    events.alive(f"the simulator's figures at size {key}")
    try:
        yours = observe_step(v, size, kind, exercise.figures)
    except Exception as e:  # noqa: BLE001
        events.fail(f"at size {key} (figures): {diagnose(e, path)}")
    zoos = observe_step(step, size, kind, exercise.figures)
    rows, problems = [], []
    graded = [f for f, _, _ in exercise.lesson]
    for figure, relation, why in exercise.lesson:
        a, b = yours[figure], zoos[figure]
        ok = meets(relation, a, b)
        rows.append([observe.describe(figure, exercise.figures), a, b, "ok" if ok else "NO", relation])
        if not ok:
            problems.append(
                f"{observe.describe(figure, exercise.figures)}: yours {_figure(a)}, the zoo's {_figure(b)}: {why}"
            )
    for figure in STANDARD_FIGURES:
        if figure in graded or (figure == "shared_ways" and not (yours["shared_accesses"] or zoos["shared_accesses"])):
            continue
        rows.append([observe.describe(figure), yours[figure], zoos[figure], "", ""])
    events("figures", size=key, step=step.name[:3], rows=rows)
    if problems:
        events.fail("the result is right, but not the step's lesson: " + "; ".join(problems))


# -- on a GPU ------------------------------------------------------------------------------------------------
def run_gpu(exercise, v, path, events):
    """The family's GPU test sizes, then the time of one call against the zoo's step, on this GPU."""
    from zoo.bench import harness, results
    from zoo.device import properties, slug
    from zoo.errors import OutOfRange

    fam, step = exercise.family, exercise.step
    for i, (size, kind) in enumerate(fam.cases(fam.GPU_TEST_SIZES)):
        key = results.size_key(size, kind, fam.kinds)
        events.alive(f"size {key} on the GPU")
        inputs = fam.inputs(size, 200 + i, kind)
        try:
            step.validate(*inputs)
        except OutOfRange:
            continue
        try:
            result, dtype = _run_once(v, inputs, size, kind)
        except Exception as e:  # noqa: BLE001
            events("case", case=f"{key} (GPU)", status="error")
            events.fail(f"on the GPU at size {key}: {diagnose(e, path)}")
        ref = np.asarray(fam.reference(*inputs))
        ok, _, _ = harness.compare(result, ref, fam.tolerance(size))
        if not ok:
            events("case", case=f"{key} (GPU)", status="wrong")
            events.fail(f"on the GPU at size {key}: wrong: {describe_wrong(result, ref, fam.tolerance(size), dtype)}")
        events("case", case=f"{key} (GPU)", status="ok")
    size = _grading_size(fam, step)
    if size is None:
        return
    key = results.size_key(size)
    events.alive(f"timing at size {key}")
    mine = harness.measure_variant(v, size)
    zoos = harness.measure_variant(step, size)
    unit, rate = ("GFLOP/s", "gflops") if fam.flops(size) else ("GB/s", "gbps")
    recorded = ""
    path_json = results.path_for(slug())
    if path_json.exists():
        entry = results.load(path_json).get("families", {}).get(fam.name, {}).get(key, {}).get(step.name)
        if entry and entry.get(rate):
            recorded = f", {entry[rate]:,.0f} {unit} in {path_json.name}"
    ratio = getattr(mine, rate) / getattr(zoos, rate) if getattr(zoos, rate) else math.nan
    verdict = (
        "as fast as the zoo's step"
        if ratio >= 0.9
        else f"{ratio:.0%} of the zoo's step: `python -m zoo diff {fam.name} {step.name[:3]}` shows what it does"
    )
    events(
        "grade",
        text=f"size {key} on the {properties()['name']}: yours {getattr(mine, rate):,.0f} {unit}; the zoo's "
        f"{step.name[:3]} {getattr(zoos, rate):,.0f} {unit} in the same run{recorded}: {verdict}",
    )


def _grading_size(fam, step):
    """The family's headline size if the zoo's step takes it, else the largest bench size it takes."""
    from zoo.errors import OutOfRange

    candidates = [getattr(fam.module, "HEADLINE_SIZE", None)] + sorted(
        fam.BENCH_SIZES, key=lambda s: -(int(np.prod(s)) if isinstance(s, tuple) else s)
    )
    for size in [c for c in candidates if c is not None]:
        try:
            step.validate(*fam.inputs(size, 0))
            return size
        except OutOfRange:
            continue
    return None


def main(argv):
    path, key, events_path, timeout, mode = argv
    auto = timeout == "auto"
    events = Events(events_path, MIN_STAGE_S if auto else float(timeout), learner=path)
    ok = False
    try:
        events.alive("loading zoo")
        import zoo
        from zoo import exercise

        if zoo.SIMULATOR:
            from zoo import simulator

            simulator.settle_process()
        if auto:  # the limit follows this machine's pace, measured now
            events.alive("measuring this machine's pace")
            from zoo.exercise import calibration

            seconds = calibration.seconds() if zoo.SIMULATOR else QUIET_CALIBRATION_S
            events.timeout = stage_limit(seconds)
            events("limit", seconds=events.timeout, calibration=seconds, quiet=QUIET_CALIBRATION_S)
        ex = exercise.by_key(key)
        events.alive("loading your file")
        module = load(path, ex.family, events)
        check_signature(module, ex, events)
        v = _variant(ex, module, path)
        if mode == "gpu":
            run_gpu(ex, v, path, events)
        else:
            from zoo.exercise import observe

            observe.install()
            run_cases(ex, v, path, ex.cases(), events)
            run_lesson(ex, v, path, events)
        ok = True
    except Stop:
        pass
    except Exception as e:  # noqa: BLE001 - whatever it is, one line
        events("fail", text=f"the check itself failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    faulthandler.cancel_dump_traceback_later()
    events("done", ok=ok)
    sys.stdout.flush()
    os._exit(0)  # simulated threads of a failed launch may still spin: do not wait for them


if __name__ == "__main__":
    main(sys.argv[1:])
