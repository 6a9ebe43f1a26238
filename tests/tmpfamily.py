"""A throwaway family written to a temporary folder, for tests of discovery."""

import importlib
import itertools
import textwrap

from zoo.registry import Family

SPEC = '''
"""Scale a float32 vector by two: a throwaway family for the discovery tests."""
import numpy as np

ORDER = 99
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 1
TOLERANCE = 1e-6
TEST_SIZES = (1, 33)
GPU_TEST_SIZES = (1, 33)
BENCH_SIZES = (1 << 20,)
BASELINE = "cupy.multiply"
STRONGEST = "baseline"


def make_inputs(size, seed):
    return (np.random.default_rng(seed).standard_normal(int(size), dtype=np.float32),)


def reference(x):
    return 2.0 * x.astype(np.float64)


def output_for(x):
    return x.shape, np.float32


def flops(size):
    return int(size)


def bytes_moved(size):
    return 8 * int(size)


def baseline(x, out):
    import cupy

    cupy.multiply(x, 2, out=out)
'''

VARIANT = '''
"""{summary}

Changes:
    A test variant.

Why it is faster:
    It is not.
"""
from numba import cuda

from zoo.device.jit import jit


@jit
def scale_kernel(x, out):
    i = cuda.grid(1)
    if i < {bound}:
        out[i] = {factor} * x[i]


def launch(x, out):
    scale_kernel[(x.size + 31) // 32, 32](x, out)
'''


def make_family(root, name, variants, spec=SPEC):
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(spec)
    for filename, text in variants.items():
        (pkg / filename).write_text(textwrap.dedent(text))
    return pkg


def good(summary="Twice x.", factor="2.0", bound="x.size"):
    return VARIANT.format(summary=summary, factor=factor, bound=bound)


_loaded = itertools.count()


def load(tmp_path, name, variants, monkeypatch, spec=SPEC):
    """A Family built from files under tmp_path, imported as zoo.kernels.<name>_<n> (fresh each time)."""
    name = f"{name}_{next(_loaded)}"
    make_family(tmp_path, name, variants, spec=spec)
    import zoo.kernels

    monkeypatch.setattr(zoo.kernels, "__path__", list(zoo.kernels.__path__) + [str(tmp_path)])
    return Family(name, importlib.import_module(f"zoo.kernels.{name}"))
