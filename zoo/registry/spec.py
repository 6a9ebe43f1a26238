"""What the registry reads in a family's files: the spec's required and optional names, the patterns of a step's
file name and of its BASE, FROM, MIN_CC and MAX_CC lines, the docstring's headings, and the error for a kernel tree
that breaks a rule (the package's docstring, ``zoo.registry``, states the rules)."""

from __future__ import annotations

import re
from typing import Any

Size = Any  # an int, or a tuple of ints: what a spec's make_inputs takes
VARIANT_FILE = re.compile(r"^v(\d{2})_([a-z][a-z0-9_]*)\.py$")
BASE_LINE = re.compile(r"^BASE\s*=\s*[\"'](v\d{2})[\"']", re.M)
KERNEL_LINE = re.compile(r"^\s*@(?:cuda\.)?jit\b", re.M)  # a kernel or device function of the step's own
FROM_LINE = re.compile(r"^FROM\s*=\s*[\"'](v\d{2})[\"']", re.M)
HEADINGS = ("Changes", "Why it is faster")
MIN_CC_LINE = re.compile(r"^MIN_CC\s*=\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)[ \t]*(?:#[ \t]*(.*?))?[ \t]*$", re.M)
# Arch-specific code (sm_90a: wgmma, setmaxnreg) runs on that compute capability only: a step says MAX_CC too
MAX_CC_LINE = re.compile(r"^MAX_CC\s*=\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)[ \t]*(?:#[ \t]*(.*?))?[ \t]*$", re.M)
# The oldest GPU zoo runs on: Volta. The kernels use CUDA's *_sync warp intrinsics, whose meaning under
# independent thread scheduling starts there, and CUDA 12 still compiles for it (CUDA 13 starts at 7.5).
ZOO_MIN_CC = (7, 0)
ZOO_MIN_CC_REASON = "zoo's floor: warp intrinsics with independent thread scheduling"

# name: what the family spec provides
REQUIRED_SPEC = {
    "ORDER": "teaching order among families (int)",
    "INPUTS": "names of the array arguments, in order; a trailing '?' marks an optional one",
    "DTYPE": "dtype every input array must have, or a tuple of the dtypes accepted; or {input name: dtype or "
    "tuple} for inputs of different types (the spec's output_for then checks which combinations go together)",
    "NDIM": "number of dimensions of every input array, or {input name: ndim}",
    "TOLERANCE": "largest relative norm error accepted (0: exact), or TOLERANCE(size) -> that number",
    "TEST_SIZES": "sizes checked in the simulator (at least one irregular)",
    "GPU_TEST_SIZES": "sizes checked on a GPU",
    "BENCH_SIZES": "sizes timed by `zoo run` and asv",
    "BASELINE": "name of the library call the variants are compared with",
    "STRONGEST": "the row (baseline, one of EXTRA_BASELINES or a checked one of CEILINGS) a practitioner would "
    "pick instead of the steps: CUB, cuBLAS in the steps' precision, SDPA, NCCL, or a copy of the same bytes for a "
    "memory-bound family; every table gives each step's % of it, naming it",
    "make_inputs": "make_inputs(size, seed) -> tuple of NumPy arrays",
    "reference": "reference(*inputs, **params) -> float64 NumPy result",
    "output_for": "output_for(*inputs, **params) -> (shape, dtype); raises on bad shapes",
    "flops": "flops(size) -> floating-point operations of one call",
    "bytes_moved": "bytes_moved(size) -> fewest bytes one call must read and write; bytes_moved(size, kind) "
    "where the kinds of input differ in bytes (INPUT_KINDS of several formats)",
    "baseline": "baseline(*cupy_inputs, out) -> computes into out with CuPy",
}

# name: what the family spec may provide
OPTIONAL_SPEC = {
    "INPUT_KINDS": "names of the kinds of input (dtypes, distributions), the first the default; "
    "make_inputs(size, seed, kind) then makes each, and every size is checked and timed "
    "for every kind (results key 'SIZE@kind' for all but the first)",
    "EXTRA_BASELINES": "{name: fn(*cupy_inputs, out)}: more library calls timed in the same run, "
    "each a row of its own beside the baseline",
    "CEILINGS": "{name: fn(*cupy_inputs, out)}: rows that time what bounds the family (a copy of the "
    "same bytes, say) rather than compute its result: timed, and checked against their ROW_REFERENCE if any",
    "KIND_PARAMS": "{kind: {name: value}}: keyword arguments a kind of input adds to every call of that kind "
    "(reference, output_for, flops, bytes_moved, the steps' launch, the baselines and CPU rows): for a kind that "
    "changes the computation, not only the data (attention's causal mask)",
    "KIND_TEST_SIZES": "{kind: sizes}: fewer simulator test sizes for a kind (the first one too), each one "
    "of TEST_SIZES (the same code on other data need not pay for every size twice); "
    "`zoo check` and the GPU tests still check every kind at every size",
    "KIND_TEST_SKIPS": "{kind: step names}: steps the simulator's tests leave that kind out for, where another step "
    "runs the same code on it (the kernel source compiled with another literal); the GPU tests check every step",
    "HEADLINE_SIZE": "the size the README table, the plot and each step's measured line quote",
    "SIZE_DIMS": "how many numbers a size may have, e.g. (1, 3) for n or MxNxK (default (1,))",
    "CPU": "{row name: (fn(*host_inputs) -> result, threads)}: the computation as a user would run it on the host "
    "in the family's dtype (NumPy, NumPy's BLAS, numba's @njit(parallel=True)); threads is 'one', 'blas' or "
    "'numba'. `zoo run` times each beside the GPU rows, checks it like a baseline and gives every row its "
    "'x over CPU' against the first",
    "WALL_TIME": "True: the figures are the host's wall-clock time per call (a call and a synchronization), "
    "not the device's time behind a hold: for a family whose lesson is the host's cost of launching",
    "ROW_REFERENCE": "{row name: fn(*host_inputs, **params) -> what that row must produce}: a row that computes "
    "something other than the family's result (a copy of the same bytes: the bytes it copied) is checked against "
    "this, exactly unless ROW_TOLERANCE says otherwise; a row whose result is not in ``out`` (a scratch buffer, a "
    "float16 product) returns it",
    "ROW_TOLERANCE": "{row name: tolerance or tolerance(size)}: a library or CPU row whose arithmetic is coarser "
    "than the family's (cuBLAS in TF32 beside a float32 family, a ceiling's float16 result) is checked against this "
    "instead of TOLERANCE",
    "ROW_CODE": "{row name: 'module.function'}: the code a user writes for a library row (a Triton kernel and its "
    "launch, a torch function, CUDA C and its RawModule call), whose lines of code the tables give "
    "(``zoo.bench.code_lines``); a row not named here counts the spec's own row function",
    "RATE_BESIDE": "the name of a family whose best step's rate (GFLOP/s, at its headline size) each GPU's page "
    "gives beside this family's best steps, with the share: attention beside hgemm, how close it comes to a plain "
    "GEMM on the same GPU",
    "UPDATED_IN_PLACE": "names among INPUTS of the arrays every call updates in place (rmsnorm's residual stream): "
    "the harness copies their values back from the host before a row's first call and again before the call it "
    "checks after the timing (its inputs would otherwise be what thousands of calls made of them), untimed",
    "HOST_INPUTS": "True: the steps take NumPy arrays and move them to the GPU and back themselves "
    "(transfer lessons); launch and the baseline get host arrays, and a step that sets "
    "PINNED = True is timed on page-locked ones",
    "MAPPING": "{step: small size}: steps drawn as a picture of which block, warp and lane reads and writes which "
    "element, from the simulator's trace of one call at that size (zoo.tools.mapping; `zoo report` draws them, the "
    "walkthrough page shows them)",
    "ELEMENTWISE_REFERENCE": "True: each element of the reference depends only on the same element of each "
    "input (same shapes), so a large one is computed in slices on every host core (zoo.bench.harness.reference_of): "
    "fusion's four float64 sines of 2^28 elements take a minute on one core",
    "PROFILE_SIZE": "the size `zoo profile` runs Nsight Compute at on a GPU (default: HEADLINE_SIZE), for a family "
    "whose slow steps make the headline size too long to profile",
    "setting": "setting() -> short text: what a run depended on besides its size and GPU (collectives: its ranks "
    "and the GPUs they share), recorded with a saved profile and shown beside it on the walkthrough page",
}


class RegistryError(RuntimeError):
    """The kernel tree breaks a rule of the registry."""


def sections(doc):
    """Map each heading of a variant docstring ('Changes:' on its own line) to its text."""
    found, current = {}, None
    for line in doc.splitlines():
        m = re.match(r"^\s*(Changes|Why it is faster):\s*(.*)$", line)
        if m:
            current = m.group(1)
            found[current] = [m.group(2)] if m.group(2) else []
        elif current:
            found[current].append(line.strip())
    return {k: " ".join(v for v in lines if v).strip() for k, lines in found.items()}
