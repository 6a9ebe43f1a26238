"""The command line: what a newcomer types."""

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
        (("hgemm", "v05", "--cc", "7.5"), "hgemm/v05_warp_tile_64x64 needs compute capability 8.0 (mma.sync m16n8k16"),
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
