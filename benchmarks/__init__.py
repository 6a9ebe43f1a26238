"""zoo's asv suite: a bench_<family>.py a family, the machinery in common.py (README, "Performance history").

The suite measures kernels on an NVIDIA GPU and nothing else. asv imports this package first in each of its
processes; in the discovery that starts every ``asv run`` (``discover``) on a host without a GPU, this stops
the run with one line: without it asv went on to skip every benchmark, minutes a family, and filed the skips
under a machine of their own. ``asv check`` and .ci/asv-discover (ZOO_ASV_DISCOVER_ONLY), which only read the
suite, pass. The probe asks the driver (libcuda) in this process: discovery forks no benchmark, and the
processes that measure (asv's forkserver) never run it.
"""

import ctypes
import ctypes.util
import os
import sys

NO_GPU = "zoo: the asv suite measures kernels on an NVIDIA GPU (libcuda and a device): none here, nothing recorded"


def gpu_here():
    """Whether the CUDA driver loads and sees a device."""
    lib = ctypes.util.find_library("cuda")
    if not lib:
        return False
    try:
        cuda = ctypes.CDLL(lib)
    except OSError:
        return False
    count = ctypes.c_int()
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


if sys.argv[1:2] == ["discover"] and not os.environ.get("ZOO_ASV_DISCOVER_ONLY") and not gpu_here():
    raise SystemExit(NO_GPU)
