"""The device-side package: everything a step file imports from zoo, and facts about the GPU.

A step (``zoo/kernels/<family>/vNN_*.py``) imports numba, NumPy, ``zoo.errors``,
its own family's spec and helpers, and these modules; never the harness, the
results, the reports, the sweeps or the CLI (``tests/kernels/test_layout.py`` checks):

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
``zoo.device.constant``     ``declare``: a ``__constant__`` array; ``copy_to_symbol``: the host fills it
                            before a launch (``cudaMemcpyToSymbolAsync``)
``zoo.device.inline_ptx``   the same intrinsics as numba-cuda-mlir's inline PTX (``ZOO_BACKEND=numba-cuda-mlir``
                            only: memory, bits, approx, dependent_launch, mma take theirs from it there);
                            ``mlir_lowerings`` beside it lowers what numba-cuda-mlir types but does not
                            lower (``cuda.threadfence``, ``cuda.lanemask_lt``) and ``mma.pack_half2``
``zoo.device`` (here)       ``sm_count()``, ``compute_capability()`` and ``properties()`` of the GPU, for
                            launch decisions (``zoo.runtime.gpu``'s, named here for the steps)
==========================  ========================================================================

``cuda`` and the scalar types (``float16``, ``float32``, ``int32``, ``uint32``, ...) are the chosen backend's
(``zoo.runtime.backend``: numba-cuda unless ``ZOO_BACKEND=numba-cuda-mlir``): a step writes
``from zoo.device import cuda, float32`` where a numba program writes ``from numba import cuda, float32``,
and its source is the same under both backends.

A step may also call the runtime below (``zoo.runtime``): ``buffers.scratch`` (device buffers a step keeps
between calls), ``graphs``, the lean ``launch``.

Each works on the GPU and, as Python with the same meaning, in numba's simulator.
"""

from zoo import runtime
from zoo.runtime.backend import (  # noqa: F401 (named here for the steps)
    cuda,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from zoo.runtime.gpu import (  # noqa: F401 (named here for the steps)
    HOPPER,
    SIM_SM_COUNT,
    compute_capability,
    properties,
    slug,
    sm_count,
    versions,
)

if runtime.backend.MLIR:  # lowerings numba-cuda-mlir lacks (cuda.threadfence, ...), for every step
    from zoo.device import mlir_lowerings  # noqa: F401


def __getattr__(name):
    if name == "OFFLINE":  # the runtime's, read at each access: a dry run (zoo.tools.machine_code) sets it there
        return runtime.OFFLINE
    raise AttributeError(f"module 'zoo.device' has no attribute {name!r}")
