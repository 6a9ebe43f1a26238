"""numba's compiled kernel launched through the driver: one ``cuLaunchKernel`` a launch, its parameters packed by hand.

Changes:
    v01's kernel, wrapped in ``zoo.device.jit.Kernel``: the same numba
    dispatcher and so the same compiled CUfunction, now launched by
    ``zoo.runtime.launch``. For each argument layout (type, dtype, shape,
    strides) it makes a plan once: the CUfunction, a buffer of 8-byte parameter
    slots and the array of pointers to them. A launch writes the arrays'
    pointers, sizes and strides into the slots with one ``struct.pack_into``
    and calls cuda-python's ``cuLaunchKernel``. The arrays go in as they come,
    CuPy or numba, and the configured launcher is made once a call.

Why it is faster:
    Per launch the host does a dictionary lookup, one pack and one driver call
    (zoo/runtime/launch.py measured about 7 us on an H100, against about 37 for
    numba's launch): no views, no typing, no wait on a stream, no ctypes
    objects. Through the driver, not CuPy's RawModule: that would load the
    kernel's PTX again as a module of its own, a second CUfunction; this calls
    numba's compiled function as it is, the one v01 and v02 launch.
"""

from zoo.device.jit import Kernel
from zoo.kernels.launch import STEPS
from zoo.kernels.launch import v01_numba_dispatcher as v01

BASE = "v01"

affine = Kernel(v01.affine)  # v01's dispatcher itself: numba still compiles; zoo.runtime.launch launches


def launch(x, out):
    blocks = (out.size + v01.THREADS_PER_BLOCK - 1) // v01.THREADS_PER_BLOCK
    launcher = affine[blocks, v01.THREADS_PER_BLOCK]  # the Kernel keeps one per configuration: a dictionary lookup
    launcher(x, out)
    for _ in range(STEPS - 1):
        launcher(out, out)
