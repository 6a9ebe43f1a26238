"""Kernel fusion: one chain of elementwise ops as many launches with temporaries, then as one kernel.

The family computes one function of a float32 vector, a chain of eight ops:

    s   = sin(sin(sin(sin(x))))                                four sins
    y   = SCALE * s + BIAS                                     scale, bias
    g   = 0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))      GELU, tanh form
    out = min(max(g, LO), HI)                                  clamp

Run the way a framework runs it op by op, each op is a kernel launch that reads
its input from DRAM and writes its result to a temporary array in DRAM, which
the next launch reads back: 8 launches and 8 x 8n = 64n bytes for 8n bytes of
real input and output. Every op here is cheap next to its memory traffic (a
float32 sin is about 20 instructions for 8 bytes; an H200 issues about 8 FP32
instructions per byte of copy bandwidth, 65 per element), so each launch runs
at memory speed and the chain's time is the sum of eight streaming passes. Fusing keeps the
intermediates in registers: one launch, one read of x and one write of out. The
arithmetic that hid behind eight passes (about 120 instructions an element) must
now hide behind one, which it cannot quite: the fused chain is compute-bound,
limited by instruction issue rather than by copy bandwidth.

- v01 launches one kernel per op, ping-ponging between two cached temporaries.
- v02 fuses the four sins into one kernel (the seeds' example of what a
  compiler's fusion does); scale, bias, GELU and clamp stay separate.
- v03 fuses the whole chain: one launch, 8n bytes.
- v04 is v03 with 128-bit loads and stores and a grid-stride loop.
- v05 uses what the fused chain reveals: sins two to four get a sine, in [-1, 1],
  so they skip sinf's range reduction (a bare polynomial, within one ulp).

Each step's docstring states its launches and bytes. ``bytes_moved`` is the
fused kernel's 8n, so the GB/s column of an unfused step is an effective rate
(what it would need to move to be that fast) and reads as a speed ratio.
``python -m zoo fusion-sweep`` times the sin x4 lesson alone (four launches with
three temporaries against one fused kernel, beside CuPy and ``cupy.fuse``).

The baseline is CuPy op by op: ``cupy.sin`` four times, then the scale, bias,
GELU (CuPy has no GELU: 9 ufunc calls) and ``cupy.clip``, 16 launches each with
a fresh temporary from CuPy's memory pool. ``cupy_fuse`` is the same chain under
``@cupy.fuse``, which compiles it into one kernel; ``copy_ceiling`` is a
device-to-device copy of the same 8n bytes.

Accuracy: the kernels use ``math.sin`` and ``math.tanh``, which numba maps to
libdevice's ``sinf`` and ``tanhf`` (a few ulp, with full range reduction for
large |x|); ``fastmath`` is left off (its ``__sinf`` loses absolute accuracy
quickly once |x| leaves [-pi, pi]). Four sins, the scale and GELU each add a
few float32 roundings, each damped or kept by a derivative of at most about 2,
so the error is a few 1e-7 relative: TOLERANCE is 1e-5, far below what a
missing or doubled op would give (tens of percent).
"""

import math

import numpy as np

ORDER = 107  # after elementwise (105): the same streaming shape, then what fusion adds
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 1
TOLERANCE = 1e-5  # float32 sinf x4 + tanhf against float64: a few 1e-7 (see above)
TEST_SIZES = (1, 31, 33, 1000, 1031)  # v01 is 8 launches: the simulator pays ~0.5 ms a thread each
GPU_TEST_SIZES = (1, 3, 31, 33, 1000, 4099, (1 << 20) + 3, 1 << 24, (1 << 24) + 3)
BENCH_SIZES = (1 << 24, 1 << 28)
HEADLINE_SIZE = 1 << 28  # 1 GiB in, 1 GiB out (v01 adds two 1 GiB temporaries)
BASELINE = "CuPy op by op: cupy.sin x4, *, +, GELU as 9 ufuncs, cupy.clip (16 launches)"

# The chain's constants. SCALE and BIAS spread sin^4's range (about [-0.68, 0.68])
# over [-0.86, 1.86], across GELU's curved part and its minimum (-0.17 at -0.75); the
# clamp then cuts about a quarter of make_inputs' outputs at LO and a sixth at HI.
SCALE = 2.0
BIAS = 0.5
LO = -0.165
HI = 1.7
GELU_C0 = math.sqrt(2.0 / math.pi)
GELU_C1 = 0.044715


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2 * np.pi, 2 * np.pi, int(size)).astype(np.float32),)


ELEMENTWISE_REFERENCE = True  # element i of the result needs element i of each input only


def reference(x):
    s = x.astype(np.float64)
    for _ in range(4):
        s = np.sin(s)
    y = SCALE * s + BIAS
    g = 0.5 * y * (1.0 + np.tanh(GELU_C0 * (y + GELU_C1 * y**3)))
    return np.clip(g, LO, HI)


def output_for(x):
    return x.shape, np.float32


def flops(size):
    # 4 sin + scale + bias + GELU (3 for y^3 and its coefficient, +y, *c0, tanh, +1, *y, *0.5: 9)
    # + clamp (2): 17 an element, counting a sin or a tanh as one though each is tens of instructions
    return 17 * int(size)


def bytes_moved(size):
    return 2 * 4 * int(size)  # the fused kernel's traffic: read x, write out


# -- CuPy rows -------------------------------------------------------------------------------------
def _gelu_chain(x, xp):
    s = xp.sin(xp.sin(xp.sin(xp.sin(x))))
    y = s * SCALE + BIAS  # Python floats keep float32 arrays float32
    return 0.5 * y * (1.0 + xp.tanh(GELU_C0 * (y + GELU_C1 * (y * y * y))))


def baseline(x, out):
    import cupy

    cupy.clip(_gelu_chain(x, cupy), LO, HI, out=out)


_FUSED = None


def cupy_fuse(x, out):
    """The chain under ``@cupy.fuse``: one generated kernel, writing straight into out."""
    global _FUSED
    if _FUSED is None:
        import cupy

        @cupy.fuse(kernel_name="fusion_chain")
        def chain(x, out):
            # out[...] = is fusion's in-place store: no extra copy kernel
            out[...] = cupy.minimum(cupy.maximum(_gelu_chain(x, cupy), LO), HI)

        _FUSED = chain
    _FUSED(x, out)


def copy_ceiling(x, out):
    """A device-to-device copy of x into out: the bandwidth the fused chain aims at.

    Its result is x itself, and it is checked as such (ROW_REFERENCE).
    """
    from zoo.bench import ceilings  # host tooling: loaded when the row runs, not with the spec

    ceilings.device_copy(x, out)


def torch_chain(x):
    """The chain as a PyTorch user writes it: the CuPy rows' chain on torch tensors (``torch.clip`` for the clamp)."""
    import torch

    return torch.clip(_gelu_chain(x, torch), LO, HI)


def torch_eager(x, out):
    """The chain in PyTorch ops, eager: a kernel and a temporary an op, as the baseline (``zoo.bench.torch_rows``);
    its result is returned. Needs PyTorch (the row says so where it is missing)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.torch_rows().call(torch_chain, x)


def torch_compiled(x, out):
    """The same chain under ``torch.compile``: TorchInductor fuses it into one generated Triton kernel; its result is
    returned. Needs PyTorch."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.torch_rows().call_compiled(torch_chain, x)


EXTRA_BASELINES = {"cupy_fuse": cupy_fuse, "torch eager": torch_eager, "torch.compile": torch_compiled}
CEILINGS = {"copy_ceiling": copy_ceiling}  # a copy of the same bytes
ROW_REFERENCE = {"copy_ceiling": lambda x: x}  # what the copy must hold: x
STRONGEST = "copy_ceiling"  # a memory-bound call: a copy of its bytes is the ceiling a user can understand


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """The chain as NumPy float32 ufuncs, op by op with temporaries (one core)."""
    s = x
    for _ in range(4):
        s = np.sin(s)
    y = np.float32(SCALE) * s + np.float32(BIAS)
    inner = np.float32(GELU_C0) * (y + np.float32(GELU_C1) * y * y * y)
    g = np.float32(0.5) * y * (np.float32(1) + np.tanh(inner))
    return np.clip(g, np.float32(LO), np.float32(HI))


CPU = {"cpu_numpy": (cpu_numpy, "one")}
