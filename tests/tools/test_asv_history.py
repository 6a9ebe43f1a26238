"""The walkthrough pages' asv history: which stored results count, which step is the headline, stable PNG bytes."""

import json

import pytest

import zoo
from zoo.tools import asv_history

COLUMNS = ["result", "params", "version", "started_at", "duration"]


def _result(folder, commit, date_ms, values, version="1", key="268435456"):
    """A stored asv result of vector_add's track_rate: {variant: rate at ``key``} (another size gets 1.0)."""
    variants = list(values)
    sizes = [key, "1048576"]
    flat = [v for name in variants for v in (values[name], 1.0)]
    row = [flat, [[f"'{n}'" for n in variants], [f"'{s}'" for s in sizes]], version, 0, 1.0]
    data = {
        "commit_hash": commit * 5,
        "date": date_ms,
        "params": {"machine": folder.name},
        "result_columns": COLUMNS,
        "results": {"bench_vector_add.VectorAdd.track_rate": row},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{commit}-existing.json").write_text(json.dumps(data))


@pytest.fixture
def results_dir(tmp_path):
    asv_history.load.cache_clear()
    benchmarks = {"bench_vector_add.VectorAdd.track_rate": {"version": "1", "unit": "GB/s"}}
    (tmp_path / "benchmarks.json").write_text(json.dumps(benchmarks))
    gpu = tmp_path / "nvidia-h200"
    _result(gpu, "bbbbbbbb", 2000, {"v01_one_thread_per_element": 5.0, "v02_grid_stride": 7.0, "baseline": 9.0})
    _result(gpu, "aaaaaaaa", 1000, {"v01_one_thread_per_element": 3.0, "v02_grid_stride": 2.0})
    _result(gpu, "cccccccc", 3000, {"v02_grid_stride": 99.0}, version="an old hash")  # asv would drop it too
    _result(tmp_path / "vm", "dddddddd", 4000, {"v02_grid_stride": 50.0})  # not a GPU's folder
    yield tmp_path
    asv_history.load.cache_clear()


def test_history_is_the_fastest_step_per_commit_in_date_order(results_dir):
    hist = asv_history.history(zoo.family("vector_add"), results_dir)
    assert list(hist) == ["nvidia-h200"]
    points = [(p.commit, p.step, p.rate) for p in hist["nvidia-h200"]]
    # the baseline row is no step; the result of another version and the non-GPU folder do not count
    assert points == [("aaaaaaaa", "v01_one_thread_per_element", 3.0), ("bbbbbbbb", "v02_grid_stride", 7.0)]


def test_the_plot_has_the_same_bytes_each_time_and_no_software_text(results_dir, tmp_path):
    pytest.importorskip("matplotlib")
    fam = zoo.family("vector_add")
    hist = asv_history.history(fam, results_dir)
    first = asv_history.plot(fam, hist, "GB/s", tmp_path / "a.png").read_bytes()
    second = asv_history.plot(fam, hist, "GB/s", tmp_path / "b.png").read_bytes()
    assert first == second
    assert b"Software" not in first and b"Matplotlib" not in first


def test_the_page_section_names_the_commits_or_says_how_to_record(results_dir):
    text = "\n".join(asv_history.section(zoo.family("vector_add"), results_dir))
    assert "nvidia-h200: 2 commits, aaaaaaaa to bbbbbbbb" in text
    assert "asv-history" in "\n".join(asv_history.section(zoo.family("reduce"), results_dir))
