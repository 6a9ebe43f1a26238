"""A decode-like loop of tiny dependent launches: what the host pays per launch, and how to stop paying it.

Generating one token, a language model runs hundreds of small kernels one after the other, each
reading what the one before wrote. At n = 4096 elements such a kernel runs for about two
microseconds and the GPU waits on the host. A call of this family is such a loop: STEPS launches of
``y = A * y + B`` on a float32 vector, the first on x, each later one on the result of the one before
(in place, in order). The steps keep the kernel and take the host's cost away: numba's dispatcher as
users call it, the launcher and the array views hoisted out of the loop, zoo's lean driver launch, a
CUDA graph replayed, and the loop fused into one kernel. The figures are the host's wall time per call
(WALL_TIME): that is the lesson. ``python -m zoo launch-loop`` splits a call into microseconds per
launch and the kernels' own time on the GPU, the floor no launch path goes below.

Bytes moved: 8n (read x, write out), what the fused kernel moves; the loop of launches moves 8n a
launch, from L2 at these sizes. The baseline is the same loop in CuPy: one ``cupy.ElementwiseKernel``
launched STEPS times.
"""

import numpy as np

from zoo import SIMULATOR

ORDER = 102  # after pipeline (100): the host around the GPU, transfers and streams, then the cost of a launch
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 1
GPU_STEPS = 256  # launches a call on a GPU: a decode step's worth (zoo llm-budget divides the saved rows by it)
STEPS = 8 if SIMULATOR else GPU_STEPS  # the simulator runs each launch as Python threads
WALL_TIME = True  # `zoo run` times each call from the host's side: the host's cost is what is taught

# y <- A y + B, A = 1 - 2^-10: contracting slowly, so x still matters after STEPS updates (A^256 = 0.78) and
# float32 rounding stays near sqrt(STEPS) ulps (4e-7 relative at 256 steps against the float64 closed form)
A = np.float32(1.0 - 2.0**-10)
B = np.float32(2.0**-11)  # fixed point B / (1 - A) = 0.5
TOLERANCE = 1e-5
TEST_SIZES = (1, 31, 1000)  # 1000: four blocks of 256, the last of 232 threads (4099 on the GPU)
GPU_TEST_SIZES = (1, 31, 1000, 4099, (1 << 20) + 3)
BENCH_SIZES = (4096, 1 << 20)
HEADLINE_SIZE = 4096  # a kernel of about 2 us: every launch path but the fused one is bound by the host
BASELINE = "cupy.ElementwiseKernel x STEPS"


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(size), dtype=np.float32),)


def reference(x, steps=STEPS):
    """The loop in closed form, in float64: A^s x + B (1 - A^s) / (1 - A) after s steps."""
    a, b = float(A), float(B)
    a_s = a ** int(steps)
    return a_s * x.astype(np.float64) + b * (1.0 - a_s) / (1.0 - a)


def output_for(x):
    return x.shape, np.float32


def flops(size):
    return 2 * STEPS * int(size)  # a multiply and an add per element per step


def bytes_moved(size):
    return 2 * 4 * int(size)  # read x, write out: the fewest, what the fused step moves


_CUPY_STEP = []  # the baseline's kernel, compiled by CuPy on first use


def baseline(x, out):
    """The same loop in CuPy: one ElementwiseKernel (y = A x + B) launched STEPS times, in place after the first."""
    import cupy

    if not _CUPY_STEP:
        # A and B are exact in a few decimal digits (powers of two): the literals are the float32 values
        operation = f"y = {float(A)!r}f * x + {float(B)!r}f"
        _CUPY_STEP.append(cupy.ElementwiseKernel("float32 x", "float32 y", operation, "launch_affine_step"))
    step = _CUPY_STEP[0]
    step(x, out)
    for _ in range(STEPS - 1):
        step(out, out)  # in place: each element is read and written by the same thread


def cupy_graph(x, out):
    """The baseline's loop captured once as a CUDA graph of CuPy kernels and replayed: one launch a call, what a user
    who knows graphs writes (the lesson of v04, with CuPy's kernels)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    libraries.graph_of(baseline, x, out)


TORCH_A, TORCH_B = float(A), float(B)  # A and B as Python numbers: scalars PyTorch (and torch.compile) take as given


def torch_loop(x):
    """The loop as a PyTorch user writes it: ``y = A * y + B``, STEPS times (two kernels a step, eager)."""
    y = x
    for _ in range(STEPS):
        y = TORCH_A * y + TORCH_B
    return y


def torch_eager(x, out):
    """The loop in PyTorch ops, eager: two kernels a step, 512 launches (``zoo.bench.torch_rows``); its result is
    returned. Needs PyTorch (the row says so where it is missing)."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.torch_rows().call(torch_loop, x)


def torch_reduce_overhead(x, out):
    """The same loop under ``torch.compile(mode="reduce-overhead")``: TorchInductor fuses the unrolled loop into one
    kernel and replays it as a CUDA graph; its result, the graph's output buffer, is returned. Needs PyTorch."""
    from zoo.bench import libraries  # host tooling: loaded when the row runs, not with the spec

    return libraries.torch_rows().call_compiled(torch_loop, x, mode="reduce-overhead")


EXTRA_BASELINES = {
    "cupy graph": cupy_graph,
    "torch eager": torch_eager,
    "torch.compile reduce-overhead": torch_reduce_overhead,
}
STRONGEST = "cupy graph"


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """The loop as NumPy ufuncs in float32, in place (one core)."""
    y = x.copy()
    for _ in range(STEPS):
        np.multiply(y, A, out=y)
        np.add(y, B, out=y)
    return y


CPU = {"cpu_numpy": (cpu_numpy, "one")}
