"""ReLU, out = max(x, 0) on float32: how close a streaming kernel gets to copy bandwidth.

An elementwise kernel reads 4 bytes and writes 4 bytes per element and does one
comparison: it is bound by memory from the first step, and all that separates a
slow one from a fast one is how the memory system is kept busy. The steps show
what does and does not matter: one thread per element, the shared-memory staging
that one seed teaches (it buys nothing: no element is reused), a grid-stride
loop, 128-bit loads and stores, and several independent float4 per thread from a
grid that covers the array in one pass. ``python -m zoo elementwise-sweep`` measures the last
step's elements per thread against blocks per SM.

Bytes moved: 8 n (read x, write out). The baseline is CuPy's ``cupy.maximum``;
the ``copy_ceiling`` row is a device-to-device copy of the same bytes.
"""

import numpy as np

ORDER = 105
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 1
TOLERANCE = 0.0  # max(x, 0) is exact
TEST_SIZES = (1, 31, 33, 1000, 4099)
GPU_TEST_SIZES = (1, 3, 31, 33, 1000, 4099, (1 << 20) + 3, 1 << 24, (1 << 28) + 7)
BENCH_SIZES = (1 << 20, 1 << 24, 1 << 28)
HEADLINE_SIZE = 1 << 28
BASELINE = "cupy.maximum(x, 0, out=out)"


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(size), dtype=np.float32),)  # half the elements negative


ELEMENTWISE_REFERENCE = True  # element i of the result needs element i of each input only


def reference(x):
    return np.maximum(x.astype(np.float64), 0.0)


def output_for(x):
    return x.shape, np.float32


def flops(size):
    return int(size)  # one comparison per element


def bytes_moved(size):
    return 2 * 4 * int(size)  # read x, write out


def baseline(x, out):
    import cupy

    cupy.maximum(x, np.float32(0), out=out)


def copy_ceiling(x, out):
    """A device-to-device copy of x into out: the bandwidth ReLU aims at.

    Its result is x itself, and it is checked as such (ROW_REFERENCE).
    """
    from zoo.bench import ceilings  # host tooling: loaded when the row runs, not with the spec

    ceilings.device_copy(x, out)


def torch_relu(x):
    """What a PyTorch user calls: ``torch.relu``."""
    import torch

    return torch.relu(x)


def torch_eager(x, out):
    """``torch.relu``, eager (``zoo.bench.torch_rows``); its result is returned. Needs PyTorch (the row says so
    where it is missing)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.torch_rows().call(torch_relu, x)


def torch_compiled(x, out):
    """``torch.relu`` under ``torch.compile``: a kernel TorchInductor generates; its result is returned. Needs
    PyTorch."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.torch_rows().call_compiled(torch_relu, x)


EXTRA_BASELINES = {"torch eager": torch_eager, "torch.compile": torch_compiled}
CEILINGS = {"copy_ceiling": copy_ceiling}  # a copy of the same bytes
ROW_REFERENCE = {"copy_ceiling": lambda x: x}  # what the copy must hold: x
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """numpy.maximum(x, 0) in float32 (one core)."""
    return np.maximum(x, np.float32(0))


CPU = {"cpu_numpy": (cpu_numpy, "one")}
