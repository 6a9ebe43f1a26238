"""The public host API's type hints hold: mypy checks the registry (Family, Variant, families, family) and the
harness's entry points (check, time_launches, measure_*), as pyproject.toml's [tool.mypy] names them."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_passes_on_the_public_host_api():
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
