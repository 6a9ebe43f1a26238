"""``zoo exercise``: every starter and the step it starts from fail its check, every real step passes it; a
learner's mistakes get one line.

The checks run in the simulator in a process of their own (``zoo.exercise.runner``), as a learner's do.
"""

import ast
import os
import re

import pytest

from zoo import exercise
from zoo.errors import OutOfRange
from zoo.exercise import check, runner, starter

EXERCISES = exercise.exercises()
MISSION = {  # the lessons the project's mission names, each with an exercise
    "sgemm": "v03",  # shared-memory tiling
    "reverse": "v03",  # the barrier, over many blocks
    "reduce": ("v03", "v08"),  # sequential addressing, warp shuffles
    "divergence": "v02",  # the divergence fix
    "pipeline": "v04",  # streams overlap
}
TIMEOUT = 120  # generous: the machine running the tests may be busy


def run_check(path, key=None, timeout=TIMEOUT):
    lines = []
    code = check.check(path, key, timeout, say=lines.append, gpu=False)
    return code, "\n".join(lines)


def test_exercises_cover_the_mission_and_eight_families():
    have = {(e.family.name, e.step.name[:3]) for e in EXERCISES}
    for family, steps in MISSION.items():
        for step in (steps,) if isinstance(steps, str) else steps:
            assert (family, step) in have, f"no exercise for {family} {step}"
    assert len({e.family.name for e in EXERCISES}) >= 8


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.key.replace("/", "-"))
def test_starter_parses_names_its_exercise_and_hides_the_solution(ex):
    text, todos = starter.build(ex)
    tree = ast.parse(text)
    assert f'EXERCISE = "{ex.key}"' in text
    assert todos and any(t.kind != "delete" for t in todos), "a starter with nothing to write"
    assert sum(isinstance(n, ast.Raise) for n in ast.walk(tree)) >= sum(t.kind != "delete" for t in todos)
    start_code = {line.split("#", 1)[0].strip() for line in ex.start.source.splitlines()}
    written = {line.split("#", 1)[0].strip() for line in text.splitlines()}
    for todo in todos:
        for line in todo.step_lines:
            code = line.split("#", 1)[0].strip()
            if len(code) > 8 and code not in start_code and not code.startswith(("from ", "import ")):
                assert code not in written, f"the starter shows the step's own line {code!r}"
    assert len(starter.hints(ex)) >= 2


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.key.replace("/", "-"))
def test_the_starter_and_the_step_it_starts_from_fail_and_the_real_step_passes(ex, tmp_path):
    text, _ = starter.build(ex)
    learner = tmp_path / ex.file_name
    learner.write_text(text)
    code, out = run_check(learner)
    assert code == 1, out
    assert "TODO(exercise) 1 is still to write" in out or "TODO(exercise)" in out, out
    # The step before, unchanged, gives right answers (test_kernels) but misses this step's lesson: compared
    # here in this process at the lesson's size, as the runner compares a learner's file (test_right_but_not_the_
    # lesson checks what the runner then says).
    refused = [c for c in ex.cases() if _refuses(ex.start, *c) and not _refuses(ex.step, *c)]  # "about taking it"
    if not refused:
        size, kind = runner.lesson_case(ex)
        before = runner.observe_step(ex.start, size, kind, ex.figures)
        step = runner.observe_step(ex.step, size, kind, ex.figures)
        missed = [f for f, relation, _ in ex.lesson if not runner.meets(relation, before[f], step[f])]
        assert missed, f"{ex.key}: {ex.start.name} already meets every figure of the lesson: {before} against {step}"
    solution = tmp_path / f"solution_{ex.step.path.name}"
    solution.write_text(ex.step.source)
    code, out = run_check(solution, ex.key)
    assert code == 0, out
    assert "PASS" in out and "Traceback" not in out


def _refuses(variant, size, kind):
    """Whether ``variant`` refuses this case (OutOfRange) before any launch."""
    try:
        variant.validate(*variant.family.inputs(size, 1, kind))
    except OutOfRange:
        return True
    return False


# -- a learner's mistakes: one line each, never a traceback into zoo ------------------------------------------
REVERSE_V02 = """
EXERCISE = "reverse/v02"
from numba import cuda, float32
from zoo.device.jit import jit


@jit
def reverse_kernel(x, out):
    s = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    n = x.size
    s[t] = x[t]
    cuda.syncthreads()  # every store before the mirrored loads
    out[t] = s[n - 1 - t]


def launch(x, out):
    reverse_kernel[1, x.size, 0, 4 * x.size](x, out)
"""


def learner(tmp_path, text, name="reverse_v02_dynamic_shared.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


def assert_one_line_diagnosis(out, *words):
    assert "Traceback" not in out and 'File "' not in out, out
    fail = [line for line in out.splitlines() if line.startswith("FAIL: ")]
    assert len(fail) == 1, out
    for word in words:
        assert word in fail[0], out


def test_a_right_answer_passes(tmp_path):
    """With no --timeout, the limit follows this machine's pace, never below what the tests allow (120 s)."""
    code, out = run_check(learner(tmp_path, REVERSE_V02), timeout=None)
    assert code == 0, out
    limit = re.search(r"each stage may take (\d+) s here", out)
    assert limit and int(limit.group(1)) >= TIMEOUT, out


def test_the_limit_scales_with_the_machines_pace():
    assert runner.stage_limit(runner.QUIET_CALIBRATION_S / 2) == runner.MIN_STAGE_S == TIMEOUT
    assert runner.stage_limit(runner.QUIET_CALIBRATION_S * 4) == 4 * runner.QUIET_STAGE_S


def test_a_syntax_error(tmp_path):
    path = learner(tmp_path, REVERSE_V02.replace("def launch(x, out):", "def launch(x, out)"))
    code, out = run_check(path)
    assert code == 1
    assert_one_line_diagnosis(out, "syntax error at line 17")


def test_an_out_of_bounds_write(tmp_path):
    path = learner(tmp_path, REVERSE_V02.replace("out[t] = s[n - 1 - t]", "out[t + 1] = s[n - 1 - t]"))
    code, out = run_check(path)
    assert code == 1
    assert_one_line_diagnosis(out, "wrote out[", "past the end of out", "line 14")


def test_a_read_before_the_start_and_a_dynamic_array_without_bytes(tmp_path):
    code, out = run_check(learner(tmp_path, REVERSE_V02.replace("s[n - 1 - t]", "s[t - 1 - n]")))
    assert code == 1
    assert_one_line_diagnosis(out, "read s[", "before the start of s (a negative index", "line 14")
    code, out = run_check(learner(tmp_path, REVERSE_V02.replace("[1, x.size, 0, 4 * x.size]", "[1, x.size]")))
    assert code == 1
    assert_one_line_diagnosis(out, "wrote s[0]", "s has no elements", "fourth argument")


def test_a_wrong_signature(tmp_path):
    path = learner(tmp_path, REVERSE_V02.replace("def launch(x, out):", "def launch(x):"))
    code, out = run_check(path)
    assert code == 1
    assert_one_line_diagnosis(out, "launch(x)", "launch(x, out)")


def test_an_endless_loop_is_cut_off_with_its_line(tmp_path):
    """Threads that stand still between two looks: a longer limit first (a busy machine), then the loop."""
    path = learner(tmp_path, REVERSE_V02.replace("    s[t] = x[t]\n", "    while t < n:\n        s[t] = x[t]\n"))
    code, out = run_check(path, timeout=8)
    assert code == 1
    assert_one_line_diagnosis(out, "cut off after 8 s", "standing still", "--timeout 16", "a loop that never ends?")
    fail = next(line for line in out.splitlines() if line.startswith("FAIL: "))
    assert fail.index("--timeout 16") < fail.index("a loop that never ends?"), out
    assert re.search(r"threads? at line 1[23] ", out), out


def test_a_slow_kernel_that_still_moves_is_told_to_take_longer_not_that_it_loops(tmp_path):
    """A right kernel cut off while its threads still move (a busy machine, here a long loop that ends): the
    line says to retry with a longer --timeout, and never blames a loop that never ends."""
    slow = REVERSE_V02.replace("    s[t] = x[t]\n", "    for k in range(100000000):\n        s[t] = x[t] + k * 0\n")
    code, out = run_check(learner(tmp_path, slow), timeout=4)
    assert code == 1
    assert_one_line_diagnosis(out, "cut off after 4 s", "still moving", "--timeout 8")
    assert "never ends" not in out, out


def test_an_error_in_the_kernel_names_thread_and_line(tmp_path):
    path = learner(tmp_path, REVERSE_V02.replace("n = x.size", "n = x.size / 0"))
    code, out = run_check(path)
    assert code == 1
    assert_one_line_diagnosis(out, "ZeroDivisionError", "line 11")
    assert re.search(r"FAIL: .*thread \d+ of block 0 ", out), out


def test_a_wrong_result_says_where_and_what(tmp_path):
    path = learner(tmp_path, REVERSE_V02.replace("s[n - 1 - t]", "s[t]"))
    code, out = run_check(path)
    assert code == 1
    assert_one_line_diagnosis(out, "wrong: out[0]: expected", "elements wrong")


def test_a_missing_barrier_is_caught(tmp_path):
    text, _ = starter.build(exercise.by_key("reverse/v03"))
    solution = exercise.by_key("reverse/v03").step.source.replace(
        "    cuda.syncthreads()  # the whole tile", "    # cuda.syncthreads()  # the whole tile"
    )
    path = learner(tmp_path, solution + '\nEXERCISE = "reverse/v03"\n', "reverse_v03_multi_block.py")
    code, out = run_check(path)
    assert code == 1
    # caught at the first size whose run interleaves a thread's load of s[TILE - 1 - t] before another's
    # store to it. Every test size races, size 1 included: its one output, out[0] = s[0], is written by
    # thread 255 from thread 0's store (one warp races too: its lanes are not in lockstep since Volta)
    assert_one_line_diagnosis(out, "at size ")
    assert "two runs" in out or "wrong: out[" in out


def test_right_but_not_the_lesson(tmp_path):
    static = REVERSE_V02.replace("cuda.shared.array(0, float32)", "cuda.shared.array(1024, float32)").replace(
        "[1, x.size, 0, 4 * x.size]", "[1, x.size]"
    )
    code, out = run_check(learner(tmp_path, static))
    assert code == 1
    assert_one_line_diagnosis(out, "not the step's lesson", "dynamic shared bytes")


def test_check_never_touches_the_file_and_hints_are_remembered_beside_it(tmp_path, zoo_cli):
    path = learner(tmp_path, REVERSE_V02.replace("s[n - 1 - t]", "s[t]"))
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    run_check(path)
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no __pycache__, nothing else
    first = zoo_cli("exercise", "hint", str(path))
    second = zoo_cli("exercise", "hint", str(path))
    assert first.returncode == second.returncode == 0
    assert re.search(r"Hint 1 of \d+: TODO\(exercise\) 1: ", first.stdout), first.stdout
    assert "Hint 2 of" in second.stdout
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
    assert (tmp_path / f".{path.name}.hints").exists()


def test_cli_list_start_and_no_overwrite(tmp_path, zoo_cli):
    listed = zoo_cli("exercise", "list")
    assert listed.returncode == 0
    for e in EXERCISES:
        assert f"{e.family.name} {e.step.name[:3]}" in listed.stdout
    made = zoo_cli("exercise", "start", "reverse", "v03", str(tmp_path))
    assert made.returncode == 0, made.stderr
    path = tmp_path / "reverse_v03_multi_block.py"
    assert path.exists() and f"exercise check {path}" in made.stdout
    again = zoo_cli("exercise", "start", "reverse", "v03", str(tmp_path))
    assert again.returncode == 2 and "exists already" in again.stderr
    unknown = zoo_cli("exercise", "start", "reverse", "v09", str(tmp_path))
    assert unknown.returncode == 2 and "has no exercise" in unknown.stderr


def test_an_exercise_may_teach_a_step_with_a_base_and_a_kernel_but_not_a_launch_only_one(tmp_path, monkeypatch):
    """gemv v10 has a base (v09, for the calls its kernel does not take) and a kernel of its own: an exercise. A
    launch-only step (no kernel in its file) has nothing to write, and an exercise's kinds must be the family's."""
    from tmpfamily import good, load

    from zoo.registry import RegistryError

    v10 = next(e for e in EXERCISES if e.key == "gemv/v10")
    assert v10.step.base is not None and not v10.step.launch_only and v10.kinds[0] == "int4"
    assert runner.lesson_case(v10) == ((33, 512), "int4")
    assert ((33, 512), "int4") in v10.cases() and ((3, 1280), "int4_g64") in v10.cases()
    from zoo.tools import walkthrough

    page = walkthrough.page(v10.family, {}, {})  # each step with an exercise says how to start it
    assert all(f"`python -m zoo exercise start gemv {e.step.name[:3]}`" in page for e in exercise.of_family(v10.family))
    doc = "".join(f"{heading}:\n    x.\n\n" for heading in ("Changes", "Why it is faster"))
    launch_only = f'"""Launches v01\'s kernel.\n\n{doc}"""\nfrom .v01_plain import launch  # noqa: F401\n'
    launch_only += 'BASE = "v01"\n'
    for v02, entry, why in ((launch_only, "{}", "launch-only"), (good(), '{"kinds": ("int4",)}', "not the family's")):
        files = {"v01_plain.py": good(), "v02_again.py": v02, "exercises.py": f'EXERCISES = {{"v02": {entry}}}\n'}
        fam = load(tmp_path / why.replace(" ", "_").replace("'", ""), "scale_ex", files, monkeypatch)
        with pytest.raises(RegistryError, match=why):
            exercise._load(fam)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.key)
def test_every_hint_is_about_a_block_the_learner_writes(ex):
    """A hint helps write the exercise's code: the exercise's own hints, or one that names a TODO block of the
    starter; never the step's Why it is faster (why the change pays, not how to write it). Every block the
    learner writes gets one."""
    todos = starter.plan(ex)[2]
    found = starter.hints(ex)
    why = ex.step.sections.get("Why it is faster", "").strip()
    about = set()
    for hint in found:
        assert not why or why[:60] not in hint, f"{ex.key}: a hint is the step's Why it is faster: {hint}"
        if hint in ex.hints:
            continue
        m = re.match(r"TODO\(exercise\) (\d+): ", hint)
        assert m and int(m.group(1)) in {t.number for t in todos}, f"{ex.key}: a hint about no block: {hint}"
        about.add(int(m.group(1)))
    written = {t.number for t in todos if t.kind != "delete"}
    assert written <= about, f"{ex.key}: blocks {sorted(written - about)} have no hint"
