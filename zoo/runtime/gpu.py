"""Facts about the GPU, for launch decisions and the records: ``sm_count()``, ``compute_capability()``,
``properties()``, a file-name ``slug()`` of its name, and the ``versions()`` of what runs it. In GPU mode with
no driver (``zoo.runtime.OFFLINE``) they describe the GPU kernels are compiled for; in the simulator, one SM.
``zoo.device`` names them for the steps.
"""

import functools
import platform
import sys

from numba import cuda

from zoo import runtime
from zoo.runtime import HOPPER, SIMULATOR  # noqa: F401 (HOPPER: named here for zoo.device)

SIM_SM_COUNT = 1  # the simulator runs blocks one after another; one "SM" keeps grids small


def sm_count():
    if runtime.OFFLINE:
        return runtime.OFFLINE["multiprocessors"]
    return _sm_count()


@functools.cache
def _sm_count():
    if SIMULATOR:
        return SIM_SM_COUNT
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def compute_capability():
    """The GPU's compute capability as a tuple, (9, 0) on Hopper; None in the simulator (it runs every step)."""
    if SIMULATOR:
        return None
    return tuple(int(p) for p in properties()["compute_capability"].split("."))


def properties():
    """A dict of the device's name and the properties the harness and doctor use."""
    return dict(runtime.OFFLINE) if runtime.OFFLINE else _properties()


@functools.cache
def _properties():
    if SIMULATOR:
        return {"name": "numba CUDA simulator", "compute_capability": "-", "multiprocessors": SIM_SM_COUNT}
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    free, total = cuda.current_context().get_memory_info()
    attrs = {
        "multiprocessors": "MULTIPROCESSOR_COUNT",
        "max_threads_per_sm": "MAX_THREADS_PER_MULTIPROCESSOR",
        "max_threads_per_block": "MAX_THREADS_PER_BLOCK",
        "registers_per_sm": "MAX_REGISTERS_PER_MULTIPROCESSOR",
        "shared_bytes_per_sm": "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
        "shared_bytes_per_block_optin": "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
        "l2_bytes": "L2_CACHE_SIZE",
        "clock_khz": "CLOCK_RATE",
        "memory_clock_khz": "MEMORY_CLOCK_RATE",
        "memory_bus_bits": "GLOBAL_MEMORY_BUS_WIDTH",
        "warp_size": "WARP_SIZE",
    }
    props = {"name": name, "compute_capability": "{}.{}".format(*dev.compute_capability), "memory_bytes": total}
    for key, attr in attrs.items():
        try:
            props[key] = getattr(dev, attr)
        except Exception:  # an attribute this driver binding lacks
            props[key] = None
    return props


def slug():
    """A file-name-safe name for the device: 'nvidia-h100-80gb-hbm3'."""
    import re

    return re.sub(r"[^a-z0-9]+", "-", properties()["name"].lower()).strip("-")


def versions():
    import numba
    import numpy

    out = {"python": platform.python_version(), "numpy": numpy.__version__, "numba": numba.__version__}
    try:
        from importlib.metadata import version

        out["numba-cuda"] = version("numba-cuda")
    except Exception:
        out["numba-cuda"] = "?"
    try:
        import cupy

        out["cupy"] = cupy.__version__
    except Exception as e:  # CuPy needs a GPU driver to import on some installs
        out["cupy"] = f"unavailable ({type(e).__name__})"
    if not SIMULATOR:
        drv = cuda.cudadrv.driver.driver.get_version()
        out["cuda driver"] = "{}.{}".format(*drv)
    out["platform"] = f"{sys.platform} {platform.machine()}"
    return out
