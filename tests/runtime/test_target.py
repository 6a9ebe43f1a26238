"""Choosing the GPU or the simulator, and the jit wrapper that serves both."""

import subprocess
import sys

import zoo
from zoo.device.jit import Kernel, jit

PRINT_MODE = "import zoo, numba.cuda as c; print(zoo.MODE, c.config.ENABLE_CUDASIM)"


def _python(code, **env):
    import os

    full = {k: v for k, v in os.environ.items() if k not in ("ZOO_TARGET", "NUMBA_ENABLE_CUDASIM")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)


def test_forcing_the_simulator():
    r = _python(PRINT_MODE, ZOO_TARGET="sim")
    assert r.stdout.split() == ["sim", "1"], r.stderr


def test_automatic_choice_says_so_once_when_it_falls_back():
    r = _python(PRINT_MODE + "; import zoo.cli")
    if zoo.SIMULATOR:
        assert r.stdout.split() == ["sim", "1"]
        assert r.stderr.count("numba's CUDA simulator") == 1
    else:
        assert r.stdout.split() == ["gpu", "0"] and r.stderr == ""


def test_bad_target_is_refused():
    r = _python("import zoo", ZOO_TARGET="tpu")
    assert r.returncode != 0 and "ZOO_TARGET must be" in r.stderr


def test_numba_cuda_imported_first_in_the_other_mode_is_refused():
    r = _python("import numba.cuda; import zoo", ZOO_TARGET="sim")
    assert r.returncode != 0 and "import zoo first" in r.stderr


def test_jit_accepts_gpu_only_options_everywhere():
    @jit(lineinfo=True, max_registers=64, fastmath=True)
    def kernel(x):
        x[0] = 1.0

    assert isinstance(kernel, Kernel)
    import numpy as np

    x = np.zeros(1, np.float32)
    kernel[1, 1](x)
    assert x[0] == 1.0
    assert kernel.last_launch.block == (1, 1, 1) and kernel.last_launch.grid == (1, 1, 1)


def test_device_functions_are_not_wrapped():
    @jit(device=True)
    def twice(v):
        return 2 * v

    assert not isinstance(twice, Kernel)
