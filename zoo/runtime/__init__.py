"""The runtime: where kernels run, and how the host launches them.

Importing it chooses the target, once, before anything imports ``numba.cuda`` (``target``): a real GPU when a
CUDA driver answers, else numba's CUDA simulator, which it patches (``zoo.simulator``). ``MODE`` is "gpu" or
"sim" and ``SIMULATOR`` says which; ``OFFLINE`` is the GPU kernels are compiled for where GPU mode has no
driver (they are compiled, never launched); ``zoo.MODE`` and ``zoo.SIMULATOR`` are these. Below it lie only
``zoo.errors`` and ``zoo.simulator``; the device package, the registry, the bench and the tools read the target
here.

==========================  ========================================================================
``zoo.runtime.target``      the choice itself: ``ZOO_TARGET``, ``driver_usable()``
``zoo.runtime.backend``     the CUDA target kernels compile with: ``ZOO_BACKEND``, numba-cuda (the default) or
                            numba-cuda-mlir; its ``cuda`` and scalar types, which steps get from ``zoo.device``
``zoo.runtime.launch``      the lean launch: a kernel launched through the driver, its arguments packed once
                            per layout; the sm_90a (arch-specific) cubins
``zoo.runtime.graphs``      ``graph``: a step's calls captured once as a CUDA graph and replayed
``zoo.runtime.buffers``     ``scratch``: device buffers a step keeps between calls
``zoo.runtime.arrays``      arrays in and out: NumPy, CuPy and numba device arrays, addresses, alignment
``zoo.runtime.tune_table``  the tables ``zoo tune`` measured on this GPU, which a step reads when it launches
==========================  ========================================================================
"""

import sys

from zoo.runtime import target

_COMMAND_LINE = sys.argv[:1] == ["-m"] or sys.argv[0].endswith(("/zoo", "\\zoo.exe"))  # `python -m zoo`, `zoo`
try:
    MODE = target.choose(quiet=_COMMAND_LINE)  # the command line gives the notice itself, not for --help
    from zoo.runtime import backend  # ZOO_BACKEND, read once; after the target: numba-cuda-mlir has no simulator
except target.TargetError as e:
    if _COMMAND_LINE:
        print(f"zoo: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    raise
SIMULATOR = MODE == "sim"
BACKEND = backend.NAME  # "numba-cuda" or "numba-cuda-mlir"

if SIMULATOR:
    from zoo import simulator

    simulator.install()

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
OFFLINE = None if SIMULATOR or target.driver_usable() else dict(HOPPER)  # what zoo.device's properties() report
