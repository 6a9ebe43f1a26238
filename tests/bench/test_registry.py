"""Discovery: one new file is one new variant, and broken trees fail loudly."""

import importlib

import pytest
from tmpfamily import SPEC, good, load, make_family

import zoo
from zoo.registry import Family, RegistryError


def test_new_file_is_a_new_variant(tmp_path, monkeypatch):
    fam = load(tmp_path, "scale_a", {"v01_plain.py": good(), "v02_again.py": good("Twice x, again.")}, monkeypatch)
    assert [v.name for v in fam] == ["v01_plain", "v02_again"]
    assert fam[2] is fam["v02"] is fam["v02_again"] is fam["again"]
    assert fam[2].summary == "Twice x, again."


def test_variants_sort_by_number_not_by_name(tmp_path, monkeypatch):
    files = {f"v{n:02d}_{chr(ord('z') - n)}.py": good() for n in range(1, 12)}
    fam = load(tmp_path, "scale_b", files, monkeypatch)
    assert [v.number for v in fam] == list(range(1, 12))


@pytest.mark.parametrize(
    "files,message",
    [
        ({"v01_a.py": good(), "v03_c.py": good()}, "missing v02"),
        ({"v01_a.py": good(), "v01_b.py": good()}, "already used"),
        ({"v1_a.py": good()}, "vNN_technique"),
        ({"v01_a.py": good().replace("Changes:", "Change:")}, "'Changes:'"),
        ({"v01_a.py": good().replace("Why it is faster:", "Why:")}, "'Why it is faster:'"),
    ],
)
def test_broken_trees_fail_loudly(tmp_path, monkeypatch, files, message):
    with pytest.raises(RegistryError, match=message):
        load(tmp_path, "scale_bad", files, monkeypatch)


def test_incomplete_spec_fails_loudly(tmp_path, monkeypatch):
    spec = SPEC.replace("def flops(size):\n    return int(size)\n", "")
    make_family(tmp_path, "scale_nospec", {"v01_a.py": good()}, spec=spec)
    import zoo.kernels

    monkeypatch.setattr(zoo.kernels, "__path__", list(zoo.kernels.__path__) + [str(tmp_path)])
    with pytest.raises(RegistryError, match="flops"):
        Family("scale_nospec", importlib.import_module("zoo.kernels.scale_nospec"))


def test_families_are_in_teaching_order():
    names = [f.name for f in zoo.families()]
    assert names[:2] == ["vector_add", "reverse"]
    orders = [f.ORDER for f in zoo.families()]
    assert orders == sorted(orders)


def test_unknown_names_list_what_exists():
    with pytest.raises(KeyError, match="vector_add"):
        zoo.family("nope")
    with pytest.raises(KeyError, match="v01_static_shared"):
        zoo.family("reverse")["v09"]


def test_demonstration_is_marked():
    demos = [v.name for v in zoo.family("reverse") if v.demonstration]
    assert demos == ["v04_missing_barrier"]


def test_a_new_family_folder_is_discovered_checked_and_listed(tmp_path, zoo_cli):
    """End to end through the CLI, with the folder added by ZOO_KERNEL_PATH."""
    make_family(tmp_path, "scale_cli", {"v01_plain.py": good("Twice x, plainly.")})
    env = {"ZOO_KERNEL_PATH": str(tmp_path), "COLUMNS": "200"}
    listed = zoo_cli("list", "scale_cli", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "v01_plain" in listed.stdout and "Twice x, plainly." in listed.stdout
    checked = zoo_cli("check", "scale_cli", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok" in checked.stdout

    # A second file makes a second variant, and a wrong one fails the check.
    (tmp_path / "scale_cli" / "v02_wrong.py").write_text(good("Thrice x.", factor="3.0"))
    checked = zoo_cli("check", "scale_cli", env=env)
    assert checked.returncode == 1
    assert "v02_wrong" in checked.stdout and "FAIL" in checked.stdout

    # One that forgets the last element is caught by the NaN poison.
    (tmp_path / "scale_cli" / "v02_wrong.py").write_text(good("Short.", bound="x.size - 1"))
    checked = zoo_cli("check", "scale_cli", env=env)
    assert checked.returncode == 1 and "unwritten" in checked.stdout


def test_a_step_declares_the_compute_capability_it_needs(tmp_path, monkeypatch):
    newer = good().replace("from numba import cuda", "from numba import cuda\n\nMIN_CC = (9, 0)  # wgmma, say")
    fam = load(tmp_path, "scale_cc", {"v01_plain.py": good(), "v02_hopper.py": newer}, monkeypatch)
    plain, hopper = fam["v01"], fam["v02"]
    assert plain.requirement == (zoo.registry.ZOO_MIN_CC, zoo.registry.ZOO_MIN_CC_REASON)
    assert hopper.min_cc == (9, 0)
    assert plain.unsupported((7, 5)) is None and hopper.unsupported((9, 0)) is None
    message = hopper.unsupported((8, 6))
    assert message == f"{fam.name}/v02_hopper needs compute capability 9.0 (wgmma, say); the target is 8.6"
    assert "zoo's floor" in plain.unsupported((6, 1))


def test_a_family_line_applies_to_every_step_and_a_step_may_need_more(tmp_path, monkeypatch):
    spec = SPEC.replace("ORDER = 99", "ORDER = 99\nMIN_CC = (8, 0)  # the family's reason")
    newer = good().replace("from numba import cuda", "from numba import cuda\nMIN_CC = (9, 0)")
    fam = load(tmp_path, "scale_famcc", {"v01_a.py": good(), "v02_b.py": newer}, monkeypatch, spec=spec)
    assert fam["v01"].requirement == ((8, 0), "the family's reason")
    assert fam["v02"].requirement == ((9, 0), "no reason given")  # the higher need wins


def test_every_step_that_issues_ampere_tensor_core_instructions_declares_it():
    """mma.sync m16n8k16 and cp.async need 8.0: each step calling them must say so (itself or its family); a step
    that takes only zoo.device.mma's plain 16-byte loads needs nothing more."""
    import re

    issues = re.compile(r"\b(mma_\w*|ldmatrix\w*|cp_async\w*|wgmma\w*)\(")
    for fam in zoo.families():
        for v in fam:
            if issues.search(v.source):
                assert v.min_cc >= (8, 0), f"{fam.name}/{v.name} issues tensor-core instructions without MIN_CC >= 8.0"


@pytest.mark.skipif(zoo.SIMULATOR, reason="the simulator runs every step whatever its MIN_CC")
def test_a_step_newer_than_the_gpu_is_refused_before_any_launch(tmp_path, monkeypatch):
    import numpy as np

    from zoo.errors import Unsupported

    future = good().replace("from numba import cuda", "from numba import cuda\nMIN_CC = (99, 0)  # a future GPU")
    fam = load(tmp_path, "scale_future", {"v01_future.py": future}, monkeypatch)
    with pytest.raises(Unsupported, match="needs compute capability 99.0 .a future GPU.; this GPU"):
        fam["v01"](np.ones(3, np.float32))
    assert fam["v01"].kernels[0].launch_number == 0


def test_arch_specific_steps_say_the_highest_compute_capability_they_run_on(tmp_path, monkeypatch):
    hopper_only = good().replace(
        "from numba import cuda", "from numba import cuda\nMIN_CC = (9, 0)  # wgmma\nMAX_CC = (9, 0)  # sm_90a only"
    )
    fam = load(tmp_path, "scale_maxcc", {"v01_a.py": good(), "v02_b.py": hopper_only}, monkeypatch)
    assert fam["v01"].ceiling is None and fam["v01"].unsupported((12, 0)) is None
    assert fam["v02"].ceiling == ((9, 0), "sm_90a only")
    assert fam["v02"].unsupported((9, 0)) is None
    assert "needs compute capability 9.0" in fam["v02"].unsupported((8, 9))
    too_new = fam["v02"].unsupported((10, 0))
    assert too_new.endswith("runs on compute capability 9.0 at most (sm_90a only); the target is 10.0")


def test_a_rate_beside_names_a_family_that_measures_flops():
    named = {fam.name: fam.rate_beside for fam in zoo.families() if fam.rate_beside}
    assert named, "no family sets RATE_BESIDE: the attention pages lose their GEMM comparison"
    names = {fam.name for fam in zoo.families()}
    for family, other in named.items():
        assert other in names and other != family, f"{family}: RATE_BESIDE = {other!r} is not another family"
