"""Sum all-reduce of float32 buffers across the GPUs of one host: through the host, peer copies, a ring, overlap.

Data-parallel training keeps one copy of the model per GPU; after each backward pass
every GPU holds its own gradients and needs their sum. That is an all-reduce: R ranks
each hold a buffer of n floats, and afterwards every rank holds the elementwise sum
of all R. The steps go from the host doing everything, through one GPU reducing for
all, to the ring that NCCL runs, which keeps every link busy in both phases, then
pipeline its copies and additions and overlap the whole exchange with compute.

The input is a stack x of shape (ranks, n): row r is rank r's buffer. The family sets
HOST_INPUTS: a step's ``launch`` places row r on rank r's GPU (rank r on device
r % D, D the GPUs present; ``world``), all-reduces, and copies *every rank's* result
back, so out has x's shape and each row must equal the sum (an all-reduce is only
right when every rank holds it). The ranks are one a GPU, or ZOO_RANKS of them (sharing
GPUs where there are fewer); in the simulator three simulated ranks share the one
simulated device.

``zoo run`` times that whole host-to-host call on the wall clock (WALL_TIME), the
placement included; the all-reduce alone, on buffers already on the GPUs, is timed by
``python -m zoo allreduce`` in bus bandwidth as nccl-tests define it (algbw = bytes per
rank / time, busbw = algbw * 2 (R - 1) / R, the traffic each rank's link carries), and
``python -m zoo dataparallel`` overlaps it with a toy training step's matrix products.
The baseline is NCCL's all-reduce through ``cupy.cuda.nccl`` in the same run (NVLink
multicast, NVLS, is kept off); where CuPy cannot load NCCL, or ranks share a GPU, the
baseline row is CuPy's reduce-to-one-GPU and a warning says so.
"""

import numpy as np

from zoo import SIMULATOR
from zoo.kernels.collectives.world import device_count, ranks

ORDER = 200  # last: many GPUs after one GPU's every lesson (copies, streams, overlap: pipeline, ORDER 100)
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 2
TOLERANCE = 1e-6  # R float32 additions in some order: a few ulps of relative norm error for R <= 8

# Sizes the steps take from here: the simulator runs every CUDA thread in Python, so it gets smaller ones (the
# same code paths); the GPU gets the ones the steps are written and measured for (zoo.profile counts with those).
THREADS = 32 if SIMULATOR else 256  # threads per block of the steps' kernels
MIN_PIECE = 32 if SIMULATOR else 1 << 21  # elements a piece of the pipelined ring, times the rank count
BUCKET = 1000 if SIMULATOR else 1 << 24  # elements: v05's 64 MB a bucket (PyTorch's DDP takes 25 MB)

TEST_SIZES = (1, 31, 4099)  # elements per rank, on three simulated ranks: empty segments, a short last one
GPU_TEST_SIZES = (1, 31, 4099, 1_000_003, (1 << 24) + 3)
BENCH_SIZES = (1 << 18, 1 << 22, 1 << 26)  # 1 MB, 16 MB and 256 MB per rank
HEADLINE_SIZE = 1 << 26
# Nsight Compute replays each kernel once per pass over its metrics, saving and restoring what it touches: at
# the headline size (256 MB a rank) the family's 27 kernels took 143 s to profile on two H200s
PROFILE_SIZE = 1 << 22
BASELINE = "NCCL all-reduce (cupy.cuda.nccl)"
STRONGEST = "baseline"  # NCCL: what a training loop calls
HOST_INPUTS = True  # each rank's row goes to its own GPU: the steps place the stack themselves
WALL_TIME = True  # the call spans several GPUs and the host: time it as nccl-tests do, on the host's clock


def setting():
    """The world a run had: its ranks and the GPUs they are spread over (saved with a profile)."""
    r, gpus = ranks(), min(ranks(), device_count())
    return f"{r} rank{'s' * (r != 1)} on {gpus} GPU{'s' * (gpus != 1)}"


def make_inputs(size, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((ranks(), int(size)), dtype=np.float32),)


def reference(x):
    total = x.astype(np.float64).sum(axis=0)
    return np.repeat(total[None, :], x.shape[0], axis=0)  # every rank holds the sum


def output_for(x):
    return x.shape, np.float32


def flops(size):
    return (ranks() - 1) * int(size)  # R - 1 additions an element, wherever they run


def bytes_moved(size):
    return 2 * ranks() * 4 * int(size)  # every rank's buffer to its GPU and back: what the timed call must move


def baseline(x, out):
    """NCCL's in-place all-reduce on each rank's GPU (CuPy arrays in, every rank's copy out)."""
    from zoo.kernels.collectives import library

    library.baseline(x, out)


def placement_ceiling(x, out):
    """The same host-to-GPU and GPU-to-host copies with no all-reduce: what the timed call costs at best."""
    from zoo.kernels.collectives import library

    library.placement(x, out)


CEILINGS = {"placement_ceiling": placement_ceiling}  # it sums nothing: checked as the rows placed and brought back
ROW_REFERENCE = {"placement_ceiling": lambda x: x}


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
def cpu_numpy(x):
    """The ranks' rows summed by NumPy on the host, then one copy of the sum per rank."""
    return np.repeat(x.sum(axis=0)[None, :], x.shape[0], axis=0)


CPU = {"cpu_numpy": (cpu_numpy, "one")}
