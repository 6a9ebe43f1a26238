"""v05's kernel launched for less host time: the 2-D arrays go in as they are, the shape is read inside.

Changes:
    The kernel takes x and out as the caller's 2-D arrays and reads rows and
    cols from x.shape inside the kernel. v05 passed flat views made with
    ``reshape`` on every call plus two uint32 scalars. The float4 loads and
    stores take the 2-D array with a flat element index (``zoo.device.memory``
    accepts any C-contiguous array), and the scalar path indexes x[row, c].
    The row's computation (registers, shuffles, the two barriers) is v05's
    device function ``row_softmax``, given 2-D element accessors.

Why it is faster:
    On the H200 v05's kernel alone takes 63 us at 4096 x 8192, which is the
    copy ceiling (ncu, gpu__time_duration), but a Python call of v05's
    launch took about 90 us of host time. Each ``reshape`` of a device array
    builds a new array object, and numba has to type and marshal each fresh
    object and each scalar argument again. The GPU then waited for the host:
    back-to-back calls ran at the host's pace (about 100 us), not the kernel's.
    Launching the caller's own two arrays costs about 27 us, less than the
    kernel, so calls queue up behind each other and the GPU never idles. The
    lesson applies to every kernel shorter than about 100 us: count the host
    work per launch, not only the bytes. ``python -m zoo launch`` measures
    that cost.

Measured:
    NVIDIA H200, size 4096x8192: 3,955 GB/s (67.9 us a call), 830.0% of CuPy ops: max,
    exp(x - max), sum, divide, 64 registers, occupancy bound 50%. Other sizes, % of CuPy
    ops: max, exp(x - max), sum, divide: 262144x31: 532.3%, 262144x31@large: 534.3%,
    32768x1024: 958.3%, 32768x1024@large: 957.1%, 4096x8192@large: 828.0%. From
    results/nvidia-h200.json.
"""
import functools

from numba import uint32

from zoo.device.jit import jit
from zoo.kernels.softmax import check_index_range as validate  # noqa: F401 (the step's size limit)
from zoo.kernels.softmax import v04_online as online
from zoo.kernels.softmax.v05_row_in_registers import BLOCK, plan, row_softmax
from zoo.device.memory import aligned


@jit(device=True)
def read_2d(x, row, at, c):
    return x[row, c]


@jit(device=True)
def write_2d(out, row, at, c, value):
    out[row, c] = value


@functools.lru_cache(maxsize=None)
def build(group, loads, wide):
    """The kernel for one row layout, as v05's, on the caller's 2-D arrays."""
    softmax_row = row_softmax(group, loads, wide, read_2d, write_2d)

    @jit
    def softmax_lean(x, out):
        # the shape is read here, not passed: fewer arguments for the host to marshal
        softmax_row(x, out, uint32(x.shape[0]), uint32(x.shape[1]))

    return softmax_lean


def launch(x, out):
    rows, cols = x.shape
    wide = cols % 4 == 0 and aligned(x) and aligned(out)
    chosen = plan(cols, wide)
    if chosen is None:
        online.launch(x, out)  # longer than registers hold: v04's two reads of x
        return
    group, loads = chosen
    rows_per_block = BLOCK // group
    build(group, loads, wide)[(rows + rows_per_block - 1) // rows_per_block, BLOCK](x, out)  # two arguments
