"""The device-side package: everything a step file imports from zoo, and facts about the GPU.

A step (``zoo/kernels/<family>/vNN_*.py``) imports numba, NumPy, ``zoo.errors``,
its own family's spec and helpers, and these modules; never the harness, the
results, the reports, the sweeps or the CLI (``tests/test_layout.py`` checks):

==========================  ========================================================================
``zoo.device.jit``          ``jit``: numba's ``cuda.jit`` for the GPU and the simulator, kernels that
                            remember their launches, the >48 KiB shared-memory opt-in, the occupancy
                            query; ``unrolled``: the ``#pragma unroll`` numba lacks
``zoo.device.memory``       128-bit loads and stores (``load_float4``, ``load_int4``, ...), flat
                            indexing, byte arrays read as 32-bit words; ``aligned`` for the launch
``zoo.device.bits``         float32 / int32 bits as uint32 and back
``zoo.device.warp``         ``FULL_MASK``, the warp-wide inclusive scan, shuffles with a ``width``
``zoo.device.mma``          tensor cores: ``mma.sync``, ``ldmatrix``, ``cp.async``, float16 words
``zoo.device.wgmma``        Hopper's tensor cores: ``wgmma`` from shared-memory descriptors, mbarriers, TMA
``zoo.device.approx``       ``exp2_approx``: the hardware's ``ex2.approx.ftz`` alone, for softmax-like loops
``zoo.runtime.buffers``      ``scratch``: device buffers a step keeps between calls
``zoo.device.constant``     ``declare``: a ``__constant__`` array; ``copy_to_symbol``: the host fills it
                            before a launch (``cudaMemcpyToSymbolAsync``)
``zoo.device`` (here)       ``sm_count()`` and ``properties()`` of the GPU, for launch decisions
==========================  ========================================================================

Each works on the GPU and, as Python with the same meaning, in numba's simulator.
"""

import functools
import platform
import sys

from numba import cuda

from zoo.runtime import SIMULATOR

SIM_SM_COUNT = 1  # the simulator runs blocks one after another; one "SM" keeps grids small

# The device kernels are compiled for when none is present: GPU mode (ZOO_TARGET=gpu) on a machine
# without a driver only compiles (zoo.tools.machine_code), and launch code that asks for the SM count gets this.
HOPPER = {
    "name": "sm_90 (compiled offline, no device)",
    "compute_capability": "9.0",
    "multiprocessors": 132,
    "max_threads_per_sm": 2048,
    "l2_bytes": 50 * 2**20,
    "shared_bytes_per_sm": 233472,
    "warp_size": 32,
    "memory_bytes": 80 * 2**30,
}
OFFLINE = None
if not SIMULATOR:
    from zoo.runtime.target import driver_usable

    OFFLINE = None if driver_usable() else dict(HOPPER)


def sm_count():
    if OFFLINE:
        return OFFLINE["multiprocessors"]
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
    return dict(OFFLINE) if OFFLINE else _properties()


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
