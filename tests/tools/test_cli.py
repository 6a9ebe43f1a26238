"""The command line: what a newcomer types."""

import re

import pytest

import zoo


def test_list_names_every_variant(zoo_cli):
    r = zoo_cli("list", env={"COLUMNS": "200"})
    assert r.returncode == 0
    for fam in zoo.families():
        for v in fam:
            assert v.name in r.stdout


def test_show_prints_docstring_and_source(zoo_cli):
    r = zoo_cli("show", "reverse", "v02", env={"COLUMNS": "200"})
    assert r.returncode == 0
    assert "Changes" in r.stdout and "cuda.syncthreads()" in r.stdout


def test_diff_shows_one_step(zoo_cli):
    r = zoo_cli("diff", "reverse", "v02")
    assert r.returncode == 0
    assert "--- reverse/v01_static_shared.py" in r.stdout
    assert "+++ reverse/v02_dynamic_shared.py" in r.stdout
    assert "+    s = cuda.shared.array(0, float32)" in r.stdout


def test_diff_against_a_named_step(zoo_cli):
    r = zoo_cli("diff", "reverse", "v04", "v03")
    assert r.returncode == 0
    assert "-    cuda.syncthreads()" in r.stdout


def test_check_is_green(zoo_cli):
    r = zoo_cli("check", "reverse", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAIL" not in r.stdout


def test_run_in_the_simulator_says_timings_need_a_gpu(zoo_cli):
    if not zoo.SIMULATOR:
        pytest.skip("simulator behaviour")
    r = zoo_cli("run", "vector_add", "--size", "100", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "need a GPU" in r.stdout and "v02_grid_stride" in r.stdout


def test_doctor_reports_mode_and_versions(zoo_cli):
    r = zoo_cli("doctor", env={"COLUMNS": "200"})
    assert r.returncode == 0
    assert "numba-cuda" in r.stdout and ("simulator" in r.stdout if zoo.SIMULATOR else "GPU" in r.stdout)


def test_doctor_says_where_each_families_tune_table_is_read_from(zoo_cli, tmp_path):
    """A gemv table in the user's cache ($ZOO_CACHE) is named; sgemm, with none there, falls back to the
    repository's table for this GPU or to its defaults."""
    from zoo.device import slug

    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / f"{slug()}-gemv.json").write_text("{}")
    r = zoo_cli("doctor", env={"COLUMNS": "500", "ZOO_CACHE": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert f"gemv: {tmp_path / 'tune' / slug()}-gemv.json" in out, out
    assert "sgemm: none, the defaults" in out or "sgemm: results/tune/" in out, out


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "required"),
        (["frobnicate"], "invalid choice"),
        (["show", "nosuchfamily", "v01"], "no family"),
        (["show", "reverse", "v99"], "no variant"),
        (["diff", "reverse", "v01"], "first step"),
        (["run", "vector_add", "--size", "ten"], "a size is an integer"),
        (["check", "--size", "0"], "positive"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(zoo_cli, args, message):
    r = zoo_cli(*args)
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if not line.startswith("zoo: no usable CUDA driver")]
    assert len(lines) == 1 and lines[0].startswith("zoo: error:") and message in lines[0], r.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (("check", "sgemm", "--size", "1x2"), "a size of sgemm is 1 or 3 number(s) joined by 'x', got 2"),
        (("check", "sgemm", "--size", "1x2x3x4"), "got 4"),
        (("check", "reverse", "--size", "3x3"), "a size of reverse is 1 number(s)"),
        (("run", "vector_add", "--size", "1000000000000"), "moves 12,000.0 GB, more than"),
    ],
)
def test_sizes_a_family_cannot_take_are_one_line(zoo_cli, args, message):
    r = zoo_cli(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_an_unknown_target_is_one_line(zoo_cli):
    r = zoo_cli("list", env={"ZOO_TARGET": "bogus"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == "zoo: error: ZOO_TARGET must be 'gpu' or 'sim', not 'bogus'"
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("hgemm", "v04", "--cc", "7.5"),
            "hgemm/v04_cp_async_double_buffered needs compute capability 8.0 (mma.sync m16n8k16",
        ),
        (("sgemm", "v03", "--cc", "5.0"), "needs compute capability 7.0 (zoo's floor"),
        (("sgemm", "v03", "--cc", "9"), "--cc is a compute capability such as 9.0"),
        (("sgemm", "v03", "--cc", "9.7"), "does not know sm_97"),
    ],
)
def test_a_target_a_step_cannot_compile_for_is_one_line(zoo_cli, args, message):
    r = zoo_cli("show", *args, "--ptx", "--summary")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if not line.startswith("zoo: no usable CUDA driver")]
    assert len(lines) == 1 and lines[0].startswith("zoo: error:") and message in lines[0], r.stderr


def test_checks_in_worker_processes_match_checks_here():
    """zoo run's parallel check phase: the rows a worker process returns are the rows of the same check here."""
    from rich.console import Console

    from zoo.bench import run

    plan, steps = [], {}
    for name in ("reverse", "vector_add"):
        fam = zoo.family(name)
        plan.append((fam, [], fam.cases(fam.TEST_SIZES[:2])))
        steps[name] = list(fam)
    progress = run.NoProgress()
    checked = run.check_in_processes(plan, steps, 2, "unused in the simulator", progress, None, Console(quiet=True))
    assert set(checked) == {"reverse", "vector_add"}
    for fam, _, checks in plan:
        rows, failed, seconds = checked[fam.name]
        assert not failed and seconds > 0
        assert rows == run.check_family(fam, checks, progress, None, list(fam))[0]


def test_run_without_a_gpu_checks_the_first_path_and_says_what_all_adds(zoo_cli):
    """Without a GPU the main job is the first path (vector_add, reverse, sgemm, reduce) at the simulator's sizes:
    each family's table, then one summary line that says what --all would add and about how long it would take."""
    if not zoo.SIMULATOR:
        pytest.skip("simulator behaviour")
    from zoo.bench.run import FIRST_PATH

    r = zoo_cli("run", "--step", "1", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stdout + r.stderr
    titles = re.findall(r"^\s*(\w+): sizes .* \(simulator\)\s*$", r.stdout, re.M)
    assert sorted(titles) == sorted(FIRST_PATH), r.stdout
    others = len(zoo.families()) - len(FIRST_PATH)
    summary = r.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"{len(FIRST_PATH)} families, "), summary
    assert re.search(rf"--all adds the {others} other families \([\d,]+ checks\): about \d+:\d\d more", summary)


def test_the_progress_line_fits_80_columns():
    """The count and the time left are never cut to '1...' at 80 columns, however long the step's name."""
    from rich.console import Console

    from zoo.bench import costs, run

    console = Console(width=80, force_terminal=True)
    estimate = costs.Estimate({("sgemm", "v14_unrolled_hot_loop"): [("sgemm", "v14", "70x129x31")]}, 2)
    with run.progress_display(console, estimate) as progress:
        task = progress.add_task("hgemm v14, sgemm v14_unrolled_hot_loop, reduce v10", total=1034)
        progress.update(task, completed=851)
        segments = console.render_lines(progress.get_renderable(), console.options)
    lines = ["".join(s.text for s in line).rstrip() for line in segments]
    lines = [line for line in lines if line]
    assert len(lines) == 1, lines
    assert len(lines[0]) <= 80 and "851/1034" in lines[0] and re.search(r"~\d+:\d\d left", lines[0]), lines


def test_the_estimate_of_the_time_left_learns_the_machines_pace():
    """A machine three times slower than the costs file's: once a family's jobs have finished, the time left is
    within a factor of two of the truth."""
    from zoo.bench import costs

    now = [0.0]
    reference = {("f", f"v{i:02d}", "1"): seconds for i, seconds in enumerate([0.5, 0.5, 20, 10, 10, 5, 5, 1], 1)}
    jobs = {(f, s): [(f, s, k)] for f, s, k in reference}
    estimate = costs.Estimate(jobs, 1, reference=reference, clock=lambda: now[0])
    slow = 3.0
    truth = slow * sum(reference.values())
    for i, job in enumerate(jobs):
        estimate.start(job)
        now[0] += slow * reference[job[0], job[1], "1"]
        estimate.finish(job, slow * reference[job[0], job[1], "1"])
        left = truth - now[0]
        if i >= 2 and left > 0:  # from the first big job on
            assert left / 2 <= estimate.left() <= 2 * left, (job, estimate.left(), left)
    assert estimate.left() == 0


def test_the_costs_file_covers_the_first_path():
    """Every check of the first path has a measured cost (results/simulator/costs.json, written by `zoo run --all
    --save` without a GPU): the main job's first estimate rests on figures, not on a guess."""
    from zoo.bench import costs, run

    known = costs.load()
    for name in run.FIRST_PATH:
        fam = zoo.family(name)
        for v in fam:
            for case in fam.test_cases() if run._checked(v) else ():
                key = (name, v.name, run._key(fam, *case))
                assert key in known, f"{key} is not in {costs.PATH.name}: run `python -m zoo run --all --save`"


def test_help_lists_the_sweeps_under_their_own_heading_and_ends_with_examples(zoo_cli):
    from zoo.bench import sweeps

    r = zoo_cli("--help", env={"COLUMNS": "80"})
    assert r.returncode == 0 and not r.stderr, r.stderr  # no simulator notice for --help
    commands, _, rest = r.stdout.partition("\nsweeps (")
    assert rest, r.stdout
    for command in sweeps.modules():
        assert re.search(rf"^  {re.escape(command)} ", rest, re.M), f"{command} is not under the sweeps' heading"
        assert not re.search(rf"^ +{re.escape(command)} ", commands, re.M), f"{command} is among the commands"
    for command in ("list", "show", "diff", "check", "run", "exercise"):
        assert re.search(rf"^    {command} ", commands, re.M), command
    tail = r.stdout.rstrip().splitlines()[-4:]
    assert tail[0] == "examples:" and all(line.startswith("  python -m zoo ") for line in tail[1:]), tail
    assert all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout


@pytest.mark.parametrize("columns", ["80", "100"])
def test_show_wraps_long_lines_and_shows_the_docstring_once(zoo_cli, columns):
    """sgemm v03's launch line is longer than 80 columns: every word of it is shown, wrapped, never cropped."""
    v = zoo.family("sgemm")["v03"]
    long_line = next(line for line in v.source.splitlines() if "np.float32(alpha)" in line)
    assert len(long_line) + 6 > 80  # wider than an 80-column terminal leaves beside the line numbers
    r = zoo_cli("show", "sgemm", "v03", env={"COLUMNS": columns})
    assert r.returncode == 0, r.stderr
    shown = r.stdout.split()
    for word in long_line.split():
        assert word in shown, f"{word!r} of `{long_line.strip()}` is cut off at {columns} columns"
    assert r.stdout.count("Changes") == 1 and r.stdout.count("Why it is faster") == 1, r.stdout


def test_vN_names_step_N(zoo_cli):
    fam = zoo.family("reverse")
    assert fam["v3"] is fam["3"] is fam["v03"] is fam[3]
    shown = [zoo_cli("show", "reverse", name, env={"COLUMNS": "200"}) for name in ("v3", "3", "v03")]
    assert shown[0].returncode == 0 and shown[0].stdout == shown[1].stdout == shown[2].stdout


def test_list_of_one_family_is_titled_by_that_family(zoo_cli):
    r = zoo_cli("list", "reverse", env={"COLUMNS": "200"})
    assert r.returncode == 0
    assert "families" not in r.stdout and "reverse (4 steps)" in r.stdout, r.stdout
    assert f"zoo: {len(zoo.families())} families" in zoo_cli("list", env={"COLUMNS": "200"}).stdout
