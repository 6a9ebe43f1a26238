"""The backend seam: ZOO_BACKEND picks numba-cuda (the default) or numba-cuda-mlir once, and steps reach it
through zoo.device only."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import numba
import pytest
from numba.core import types

import zoo
import zoo.device
from zoo.registry import VARIANT_FILE
from zoo.runtime import backend

KERNELS = Path(zoo.__file__).parent / "kernels"


def test_unset_or_blank_is_numba_cuda():
    assert backend.choose({}) == backend.choose({"ZOO_BACKEND": " "}) == "numba-cuda"
    assert backend.choose({"ZOO_BACKEND": "Numba-CUDA-MLIR"}, simulator=False) == "numba-cuda-mlir"


def test_an_unknown_backend_is_a_clear_error():
    with pytest.raises(
        backend.BackendError, match="ZOO_BACKEND must be one of numba-cuda, numba-cuda-mlir, not 'mlir'"
    ):
        backend.choose({"ZOO_BACKEND": "mlir"})


def test_numba_cuda_mlir_has_no_simulator():
    with pytest.raises(backend.BackendError, match="numba-cuda-mlir#99"):
        backend.choose({"ZOO_BACKEND": "numba-cuda-mlir"}, simulator=True)
    with pytest.raises(backend.BackendError, match="needs a GPU"):
        backend.choose({"ZOO_BACKEND": "numba-cuda-mlir", "NUMBA_ENABLE_CUDASIM": "1"})


def test_the_default_hands_steps_numbas_own_objects():
    """Same objects, so the same kernels, the same PTX and the same simulator as before the seam."""
    assert zoo.runtime.BACKEND == "numba-cuda" and not backend.MLIR
    assert zoo.device.cuda is numba.cuda
    assert zoo.device.float32 is numba.float32 and zoo.device.uint32 is numba.uint32
    assert zoo.device.float16 is types.float16


def test_the_command_line_refuses_numba_cuda_mlir_in_the_simulator():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(ZOO_BACKEND="numba-cuda-mlir", ZOO_TARGET="sim", PYTHONPATH=str(KERNELS.parents[1]))
    r = subprocess.run([sys.executable, "-m", "zoo", "list"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "zoo: error: ZOO_BACKEND=numba-cuda-mlir needs a GPU" in r.stderr, r.stderr


def test_steps_reach_the_cuda_target_through_zoo_device_only():
    """No step imports numba's CUDA target or its types itself: the backend is chosen in one place."""
    direct = []
    steps = sorted(p for p in KERNELS.glob("*/*.py") if VARIANT_FILE.match(p.name))
    assert len(steps) > 100
    for path in steps:
        step = f"{path.parent.name} {path.stem}"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
                names = {a.name for a in node.names}
                if node.module != "numba" or not names <= {"njit", "prange"}:
                    direct.append(f"{step}: from {node.module} import ...")
            elif isinstance(node, ast.Import) and any(a.name.startswith("numba") for a in node.names):
                direct.append(f"{step}: import numba...")
    assert not direct, f"write `from zoo.device import cuda, float32` (zoo.runtime.backend): {direct}"
