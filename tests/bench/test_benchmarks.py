"""The asv suite stays valid and grows by itself with the registry."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tmpfamily import good, load

import zoo
from zoo.bench.results import size_key
from zoo.registry import Family

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks import common  # noqa: E402


def test_asv_check_passes():
    asv = shutil.which("asv") or pytest.fail("asv is not installed: it is part of the test extra")
    # asv drops PYTHONPATH from the processes it starts and passes ASV_PYTHONPATH instead: where zoo is
    # importable only through PYTHONPATH (a checkout on a GPU machine), discovery would not find it
    env = dict(os.environ, ASV_PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([asv, "check", "-E", "existing"], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No problems found" in r.stdout


@pytest.mark.parametrize("fam", zoo.families(), ids=lambda f: f.name)
def test_every_family_has_its_bench_file(fam):
    path = ROOT / "benchmarks" / f"bench_{fam.name}.py"
    suite = f"{fam.name.title().replace('_', '')} = family_suite({fam.name!r})"
    assert path.exists(), f"add {path.relative_to(ROOT)}: `{suite}`"


def test_suite_parameters_come_from_the_registry():
    fam = zoo.family("reverse")
    variants, sizes = common.family_suite(fam).params
    assert variants == [v.name for v in fam] + list(fam.baselines)  # baseline, then its copy of the same bytes
    assert sizes == [size_key(s) for s in fam.BENCH_SIZES]


def test_a_new_variant_file_is_a_new_benchmark(tmp_path, monkeypatch):
    fam = load(tmp_path, "scale_bench", {"v01_plain.py": good()}, monkeypatch)
    assert common.family_suite(fam).params[0] == ["v01_plain", "baseline"]
    (fam.path / "v02_again.py").write_text(good("Twice x, again."))
    refreshed = Family(fam.name, fam.module)  # what the next asv process discovers
    assert common.family_suite(refreshed).params[0] == ["v01_plain", "v02_again", "baseline"]


def test_without_a_gpu_every_benchmark_skips():
    if not zoo.SIMULATOR:
        pytest.skip("there is a GPU")
    suite = common.family_suite("vector_add")()
    table = suite.setup_cache()
    assert table == {}
    with pytest.raises(NotImplementedError, match="no GPU"):
        suite.setup(table, "v01_one_thread_per_element", "1048576")


def test_the_tracks_read_setup_caches_one_table():
    suite = common.family_suite("vector_add")()
    size = suite.params[1][0]
    table = {
        ("v02_grid_stride", size): (0.5, 3000.0, 0.6),  # device ms, GB/s, wall ms
        ("baseline", size): (1.0, 1500.0, 1.1),
        ("v01_x", size): "too old",  # why the row did not run
        ("v01_y", size): {"error": "ValueError: broken"},
    }
    suite.setup(table, "v02_grid_stride", size)  # measured: no skip
    assert suite.track_device_ms(table, "v02_grid_stride", size) == 0.5
    assert suite.track_rate(table, "v02_grid_stride", size) == 3000.0
    assert suite.track_ratio_to_baseline(table, "v02_grid_stride", size) == 2.0
    assert suite.track_wall_ms(table, "v02_grid_stride", size) == 0.6
    with pytest.raises(NotImplementedError, match="too old"):  # a row that could not run is a skip, with its reason
        suite.setup(table, "v01_x", size)
    with pytest.raises(RuntimeError, match="broken"):  # a row that raised is a failure
        suite.setup(table, "v01_y", size)
    failed_baseline = {**table, ("baseline", size): {"error": "ValueError: broken"}}
    with pytest.raises(NotImplementedError, match="no baseline"):  # no ratio to a baseline that did not run
        suite.track_ratio_to_baseline(failed_baseline, "v02_grid_stride", size)
    with pytest.raises(NotImplementedError, match="no wall timer"):
        suite.track_wall_ms({("v02_grid_stride", size): (0.5, 3000.0, None)}, "v02_grid_stride", size)


def test_setup_cache_makes_each_sizes_inputs_once_for_all_its_rows(monkeypatch):
    """measure_family hands every row of a size the inputs it made at the size's first row; a row that fails
    (here the first, once) does not stop the others, and the next size gets inputs of its own."""
    made, seen = [], []

    def inputs(fam, size, kind):
        made.append((size, kind))
        return (f"host of {size}",)

    class Recorded:
        def __init__(self, fam, name, size, kind, host):
            seen.append((name, size, host))
            if name == "broken" and size == fam.BENCH_SIZES[0]:
                raise ValueError("broken")

        def ms(self):
            return 1.0

        def rate(self):
            return 2.0

        def wall_ms(self):
            return 3.0

    from types import SimpleNamespace

    from numba import cuda

    monkeypatch.setattr(common.zoo, "SIMULATOR", False)  # measure_family returns nothing in the simulator
    freed = SimpleNamespace(deallocations=SimpleNamespace(clear=lambda: None))  # the simulator's context has none
    monkeypatch.setattr(cuda, "current_context", lambda: freed)
    monkeypatch.setattr(common, "_inputs", inputs)
    monkeypatch.setattr(common, "Case", Recorded)
    fam = zoo.family("vector_add")
    sizes = common._case_keys(fam)
    table = common.measure_family(fam, ["broken", "v01", "baseline"], sizes)
    assert made == list(sizes.values())  # once a size, not once a row
    assert seen == [(name, s, (f"host of {s}",)) for s, _ in sizes.values() for name in ("broken", "v01", "baseline")]
    first = size_key(fam.BENCH_SIZES[0])
    assert table["broken", first] == {"error": "ValueError: broken"} and table["v01", first] == (1.0, 2.0, 3.0)


def test_each_family_has_its_own_setup_cache_key():
    """asv runs one setup_cache per key (module and line) and hands its table to every benchmark with that key."""
    from asv_runner.benchmarks._base import get_setup_cache_key

    from benchmarks import bench_reverse, bench_vector_add

    keys = {
        get_setup_cache_key(m.__dict__[n].setup_cache)
        for m, n in ((bench_reverse, "Reverse"), (bench_vector_add, "VectorAdd"))
    }
    assert keys == {
        k.replace("NNN", str(bench_reverse.Reverse.setup_cache.__code__.co_firstlineno))
        for k in ("bench_reverse:NNN", "bench_vector_add:NNN")
    }


def test_every_benchmark_has_a_version_written_by_hand_and_benchmarks_json_has_it():
    """asv drops stored results whose version differs from benchmarks.json's; a hashed version changes with any edit
    of the suite's source, so each benchmark names its own (bumped only when its measurement changes)."""
    import json

    stored = json.loads((ROOT / "results" / "asv" / "benchmarks.json").read_text())
    for fam in zoo.families():
        suite = common.family_suite(fam)
        for name in dir(suite):
            if name.startswith("track_"):
                key = f"bench_{fam.name}.{suite.__name__}.{name}"
                version = getattr(getattr(suite, name), "version", None)
                assert isinstance(version, str) and version, f"{key}: no explicit version"
                assert key in stored, f"{key} is missing from results/asv/benchmarks.json: run .ci/asv-discover"
                assert stored[key]["version"] == version, f"{key}: benchmarks.json is stale, run .ci/asv-discover"
                # the variants asv's graphs offer are the registry's: a new, folded or renamed step changes them
                variants = [repr(name) for name in suite.params[0]]
                assert stored[key]["params"][0] == variants, f"{key}: its steps changed, run .ci/asv-discover"


def test_no_asv_machine_folder_of_a_host_without_a_gpu_is_committed():
    """asv names a machine folder after the host; the suite records only on NVIDIA GPUs (nvidia-<gpu name>), so any
    other folder holds skips or nothing, and would appear as a machine in asv's pages."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run([git, "ls-files", "results/asv"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    folders = {Path(p).parts[2] for p in tracked if len(Path(p).parts) > 3}
    assert folders, "no asv results are committed"
    assert all(f.startswith("nvidia-") for f in folders), f"not a GPU's asv results: {sorted(folders)}"
    ignored = subprocess.run([git, "check-ignore", "-q", "results/asv/vm/machine.json"], cwd=ROOT)
    assert ignored.returncode == 0, ".gitignore must keep results/asv/<machine>/ of a host without a GPU out"


def _asv_publish_script():
    import importlib.util
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader("asv_publish", str(ROOT / ".ci" / "asv-publish"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("asv_publish", loader))
    loader.exec_module(module)
    return module


def test_the_published_page_loads_no_script_or_style_from_another_host(tmp_path):
    """.ci/asv-publish points every CDN script and stylesheet of asv's page templates to its vendored copies."""
    import asv

    publish = _asv_publish_script()
    templates = Path(asv.__file__).parent / "www"
    for page in templates.glob("*.html"):
        shutil.copyfile(page, tmp_path / page.name)
    before = publish.external_assets((tmp_path / "index.html").read_text())
    assert before, "asv's template loads nothing from a CDN: the check below would prove nothing"
    (tmp_path / "graphs").mkdir()
    (tmp_path / "graphs" / "x.json").write_text("[1, 2]")
    publish.make_offline(tmp_path)
    for page in tmp_path.glob("*.html"):
        html = page.read_text()
        assert publish.external_assets(html) == [], page.name
        assert "integrity=" not in html
        for local in re.findall(r'(?:src|href)="(vendor/[^"]+)"', html):
            assert (tmp_path / local).is_file(), local
    assert 'window.zooAsvData["graphs/x.json"] = [1, 2];' in (tmp_path / "graphs" / "x.json.js").read_text()


def test_asv_watches_only_figures_where_a_rise_is_a_slowdown():
    """asv flags every rise as a regression (no higher-is-better option): rates and ratios must be unwatched."""
    import json

    json5 = pytest.importorskip("json5")
    conf = json5.loads((ROOT / "asv.conf.json").read_text())
    unwatched = [pattern for pattern, first in conf["regressions_first_commits"].items() if first is None]
    stored = json.loads((ROOT / "results" / "asv" / "benchmarks.json").read_text())
    for name, entry in stored.items():
        if name == "version":
            continue
        watched = not any(re.match(pattern, name) for pattern in unwatched)
        assert watched == (entry["unit"] in ("ms", "seconds")), f"{name} ({entry['unit']}): watched is {watched}"
