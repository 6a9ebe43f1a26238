"""The scripts under .ci/ that a GPU call runs: checked here, where a mistake costs seconds, not device time."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / ".ci"
SCRIPTS = sorted(p for p in CI.iterdir() if p.is_file())
BASH = [p for p in SCRIPTS if p.suffix == ".sh" or p.read_text(errors="replace").startswith("#!/usr/bin/env bash")]
PYTHON = [p for p in SCRIPTS if p.suffix == ".py" or p.read_text(errors="replace").startswith("#!/usr/bin/env python")]
PIP_TO_SITE = "--target /tmp/site"
OWN_SITE = {"asv-history-on-device", "gpu-mlir.sh"}  # their own PYTHONPATH: asv's commits, numba-cuda-mlir's site


@pytest.mark.parametrize("script", BASH, ids=lambda p: p.name)
def test_every_bash_script_parses(script):
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("script", PYTHON, ids=lambda p: p.name)
def test_every_python_script_compiles(script):
    compile(script.read_text(), str(script), "exec")


def test_the_gpus_python_is_set_up_in_one_place():
    """Every script that installs .whl does it through .ci/gpu-python.sh, not with a pip line of its own."""
    own = [p.name for p in BASH if PIP_TO_SITE in p.read_text() and p.name not in OWN_SITE | {"gpu-python.sh"}]
    assert not own, f"{own} install .whl themselves: source .ci/gpu-python.sh instead"


def _wheel(folder, name, body):
    """A one-module wheel ``name`` whose module holds ``body``."""
    path = folder / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}.py", body)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def _source_gpu_python(checkout, env, then="true"):
    (checkout / ".ci").mkdir(exist_ok=True)
    (checkout / ".ci" / "gpu-python.sh").write_text((CI / "gpu-python.sh").read_text())
    return subprocess.run(
        ["bash", "-c", f"set -uo pipefail; . .ci/gpu-python.sh; {then}"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_gpu_python_installs_the_wheels_first_on_the_path(tmp_path):
    checkout, site = tmp_path / "checkout", tmp_path / "site"
    (checkout / ".whl").mkdir(parents=True)
    _wheel(checkout / ".whl", "zoo_ci_probe", "WHERE = 'the wheel'\n")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GPU_PYTHON_SITE": str(site), "HOME": str(tmp_path)}
    r = _source_gpu_python(checkout, env, 'echo "$PYTHONPATH"; python3 -c "import zoo_ci_probe as m; print(m.WHERE)"')
    assert r.returncode == 0, r.stderr
    path, where = r.stdout.split("\n")[:2]
    assert path == f"{site}:{checkout}" and where == "the wheel"


def test_gpu_python_without_wheels_keeps_the_callers_path(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/caller/site"}
    r = _source_gpu_python(checkout, env, 'echo "$PYTHONPATH"')
    assert r.returncode == 0 and r.stdout.strip() == f"/caller/site:{checkout}", r.stderr


def test_gpu_python_ends_the_script_when_a_wheel_cannot_be_installed(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / ".whl").mkdir(parents=True)
    (checkout / ".whl" / "broken-1.0-py3-none-any.whl").write_text("not a zip")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GPU_PYTHON_SITE": str(tmp_path / "site")}
    r = _source_gpu_python(checkout, env, "echo reached")
    assert r.returncode == 1 and "reached" not in r.stdout
    assert "could not install the wheels in .whl" in r.stderr
