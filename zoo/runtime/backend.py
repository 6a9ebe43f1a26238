"""The CUDA target the kernels are compiled with: numba-cuda, or its successor numba-cuda-mlir.

``ZOO_BACKEND`` chooses once per process, from the environment, when ``zoo.runtime`` is first imported:

==================  ====================================================================================
``numba-cuda``      the default, and the only one with a simulator: CI, the exercises and the access
                    counters run on it; the lean launch, the intrinsics and every figure in results/ are its
``numba-cuda-mlir``  ``pip install -e ".[mlir]"``: NVIDIA's MLIR-based successor (``from numba_cuda_mlir import
                    cuda``); a GPU only, since it has no simulator (numba-cuda-mlir#99); the zoo's intrinsics
                    are its inline PTX there (``zoo.device.inline_ptx``, ``mlir_wgmma``), those of ``constant``
                    not yet (docs/numba-cuda-mlir.md: which steps run, and the plan for the rest)
==================  ====================================================================================

It is an environment variable rather than detection: a machine with both installed runs numba-cuda unless asked,
so nothing changes for a user who does not ask. Steps reach the target through ``zoo.device`` (``cuda`` and the
scalar types kernels cast with: ``from zoo.device import cuda, float32``), which takes them from here, so a step's
source is the same under both. Under numba-cuda these are exactly numba's objects (``numba.cuda``,
``numba.float32``, ...): the kernels, their PTX and the simulator are as before.
"""

import os

from zoo.runtime.target import TargetError

ENV = "ZOO_BACKEND"
NUMBA_CUDA = "numba-cuda"
NUMBA_CUDA_MLIR = "numba-cuda-mlir"
BACKENDS = (NUMBA_CUDA, NUMBA_CUDA_MLIR)
SCALARS = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class BackendError(TargetError):
    """ZOO_BACKEND names no backend, names one that is not installed, or asks numba-cuda-mlir for the simulator."""


def choose(environ=None, simulator=None):
    """The backend ``ZOO_BACKEND`` names ("numba-cuda" when unset); a BackendError for a name that is none,
    or for numba-cuda-mlir where kernels would run in the simulator (``simulator``: numba-cuda's, the only one)."""
    environ = os.environ if environ is None else environ
    name = environ.get(ENV, "").strip().lower() or NUMBA_CUDA
    if name not in BACKENDS:
        raise BackendError(f"{ENV} must be one of {', '.join(BACKENDS)}, not {name!r}")
    if simulator is None:
        simulator = environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
    if name == NUMBA_CUDA_MLIR and simulator:
        raise BackendError(
            f"{ENV}={NUMBA_CUDA_MLIR} needs a GPU (or ZOO_TARGET=gpu to compile only): numba-cuda-mlir has no "
            "simulator (numba-cuda-mlir#99); without a GPU the zoo runs in numba-cuda's"
        )
    return name


NAME = choose()  # read once: zoo.runtime imports this module after choosing the target
MLIR = NAME == NUMBA_CUDA_MLIR


def _target():
    """The backend's ``cuda`` module and its scalar types, imported on first use."""
    if MLIR:
        try:
            from numba_cuda_mlir import cuda
        except ImportError as e:
            raise BackendError(
                f'{ENV}={NUMBA_CUDA_MLIR} but numba_cuda_mlir does not import ({e}): pip install -e ".[mlir]"'
            ) from None
        return cuda, {name: getattr(cuda.types, name) for name in SCALARS}
    from numba import cuda
    from numba.core import types  # the objects steps imported from numba (numba.float32 is types.float32)

    return cuda, {name: getattr(types, name) for name in SCALARS}


def __getattr__(name):
    """``cuda`` and the scalar types, loaded when first asked for (``from zoo.runtime.backend import cuda``)."""
    if name == "cuda" or name in SCALARS:
        cuda, scalars = _target()
        globals().update(scalars, cuda=cuda)
        return globals()[name]
    raise AttributeError(f"module 'zoo.runtime.backend' has no attribute {name!r}")
