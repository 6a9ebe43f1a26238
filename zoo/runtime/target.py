"""Choose where kernels run, before ``numba.cuda`` is imported.

zoo runs on a real GPU when a CUDA driver answers, and otherwise in numba's CUDA
simulator (one Python thread per CUDA thread: slow, but it checks correctness on
any machine). ``ZOO_TARGET=gpu`` or ``ZOO_TARGET=sim`` forces either mode;
``NUMBA_ENABLE_CUDASIM`` set by the user is respected as it is.
"""

import ctypes
import os
import sys

ENV = "ZOO_TARGET"


class TargetError(RuntimeError):
    """ZOO_TARGET names no target, or numba.cuda was imported in the other mode."""


def driver_usable():
    """True when libcuda loads, initialises and reports at least one device."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    if libcuda.cuInit(0) != 0:
        return False
    if libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return False
    return count.value > 0


NOTICE = None  # what choose() said, or would have said with quiet, about switching to the simulator


def choose(quiet=False):
    """Return "gpu" or "sim" and set NUMBA_ENABLE_CUDASIM to match.

    Without a usable driver (and no mode forced) it says on stderr that kernels run in the simulator, unless
    ``quiet``: the command line says it itself, once it knows a command will run (not for ``--help``).
    Raises RuntimeError if numba.cuda was already imported in the other mode:
    the simulator switch only works before numba.cuda's first import.
    """
    global NOTICE
    forced = os.environ.get(ENV, "").strip().lower()
    if forced not in ("", "gpu", "sim"):
        raise TargetError(f"{ENV} must be 'gpu' or 'sim', not {forced!r}")
    user_sim = os.environ.get("NUMBA_ENABLE_CUDASIM")
    if forced:
        mode = forced
    elif user_sim is not None:
        mode = "sim" if user_sim not in ("", "0") else "gpu"
    else:
        mode = "gpu" if driver_usable() else "sim"
        if mode == "sim":
            NOTICE = (
                "zoo: no usable CUDA driver, kernels run in numba's CUDA simulator "
                f"(correctness only; {ENV}=gpu forces the GPU)"
            )
            if not quiet:
                print(NOTICE, file=sys.stderr)
    wanted = "1" if mode == "sim" else "0"
    if "numba.cuda" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") != wanted:
        raise TargetError(
            f"numba.cuda was imported before zoo in the other mode; import zoo first "
            f"or set NUMBA_ENABLE_CUDASIM={wanted}"
        )
    os.environ["NUMBA_ENABLE_CUDASIM"] = wanted
    return mode
