"""Warp divergence: one elementwise function whose arm depends on the index's parity and whose length on the data.

A warp's 32 lanes share one instruction stream. When lanes disagree at a branch
the warp runs each side in turn with the other lanes masked off, so a warp pays
for every arm any of its lanes takes, and a loop runs as long as its longest
lane. The family computes one function and changes only how lanes meet its
branches:

    out[i] = z after T(x[i]) steps of z <- z * m + c, from z = 0, where
        even i:  m = x[i], c = A      (a geometric series in x: A (1 + x + ... + x^(T-1)))
        odd i:   m = B,    c = x[i]   (a damped running sum of x: x (1 + B + ... + B^(T-1)))
        T(x) = CHUNK * min(N_CHUNKS, 1 + floor(N_CHUNKS |x|))   steps, 16 to 512

Both arms cost one FMA a step, so neither is the cheap one. The trip count
grows with |x|, like an escape-time count: every input decides how long its
lane works. Why one function for both lessons: the parity steps (v01 to v03)
and the data steps (v04, v05) can then be checked against the same float64
reference and timed against each other on the same inputs, and the straight
kernel (v01) shows both kinds of divergence at once.

The two arms are one recurrence in disguise. Write z = c w: then
z <- z m + c is c w <- c (w m + 1), so w <- w m + 1 from w = 0, and z = c w at
the end. Both arms become "multiply by m, add one"; only m and the final
scale c depend on the parity. v03 to v05 compute it that way, v01 and v02 as
written above (the results agree to float32 rounding: tests compare all of
them to the same float64 reference).

- v01 branches on ``i % 2``: every warp holds both parities and runs both arms.
- v02 remaps threads to elements so that warp 2w takes the even elements and
  warp 2w+1 the odd ones of the same 64: the branch is uniform in each warp.
- v03 has no branch at all: each lane selects m by parity, runs all N_CHUNKS
  chunks of w <- w m + 1 and keeps w as it stands after its own count.
- v04 keeps the selection but stops each lane at its own count: a data-dependent
  loop, where the warp runs until its longest lane is done.
- v05 regroups each block's elements by trip count in shared memory, so a warp's
  lanes have similar counts, and writes every result back to its own index.

Why 512 steps: the longer the chain, the smaller the share of each
element's fixed costs (its load, trip count and store, its block's start),
and the closer the time ratio comes to the instruction ratio. At 256 steps
v01 measured 1.70x v02 on the H200 (2^24 elements), at 512 1.85x, at 1024
1.87x (timed before the hold described next).

Until the harness held the GPU before each sample (docs/results.md, "How a
figure is timed"), ``zoo run`` read v01/v02 anywhere from 1.68x to 1.85x at 2^24, from
one run to the next. The cause was the timing, not the kernels. v02 (about
352 us) was timed in batches of one launch or of two, as a first estimate
that itself included host time fell either side of 0.5 ms; a batch of one
added the host's 40-90 us of launch preparation to every launch (393-428 us),
a batch of two half as much (372 us), and v01, always in batches of one,
about 40 us. Traced through three whole runs, the fastest samples were
650 and 352 us every time. With the hold, ``zoo run`` reads 652 and 353 us:
1.85x. Nsight Compute (2^22, clocks locked)
times v01 at 1.82x v02 and reads the warp execution efficiency
(``smsp__thread_inst_executed_per_inst_executed``, 32 = every lane busy):
uniform v01 16.6, v02 to v04 32, v05 31.0; skewed v01 4.9, v02 8.4, v03 32
(it runs every chunk), v04 7.5, v05 25.7. The sweep, which times every step
on the same inputs, is the figure to compare.

Inputs come in two kinds. ``uniform``: |x| in [0.97, 1), so every element runs the
full 512 steps; only the parity divergence shows (v01 ~2x v02; v03 ~ v02; v04 ~ v03).
``skewed``: one element in 16, at random places, runs 512 steps and the rest
16 to 64, so almost every warp of 32 holds one long lane; v04 then runs nearly as
long as v03, and v05, whose warps are sorted, does what the data asks.

FLOPs: 2 per step (one FMA), counted at the full 512 steps (2 x 512 n), which
is the work of the uniform kind; the skewed kind does about a seventh of that
(4.3 of 32 chunks an element on average), so its GFLOP/s figure is a rate of
"work a branch-free kernel would do", not of work done. Bytes moved: 8 n
(read x, write out): with 512 FMAs for every 8 bytes the family is
compute-bound, which is what lets divergence show in the time.
``python -m zoo divergence`` sweeps the share of lanes per warp that take the
long path (see ``sweeps/long_path_fraction.py``). The baseline is a CuPy ElementwiseKernel computing
the same function in C, branch-free selection and a per-lane loop (v04's shape).
"""

import functools

import numpy as np

ORDER = 70
INPUTS = ("x",)
DTYPE = np.float32
NDIM = 1
INPUT_KINDS = ("uniform", "skewed")
TEST_SIZES = (1, 31, 33, 1000, 2053)  # 2053: several blocks and a tail; the GPU goes further
KIND_TEST_SIZES = {"skewed": (1, 33, 1000)}  # the same kernels on other data: the GPU checks every size
GPU_TEST_SIZES = (1, 3, 31, 33, 1000, 4099, 65_537, (1 << 20) + 3, (1 << 24) + 7)
BENCH_SIZES = (1 << 20, 1 << 22, 1 << 24)
HEADLINE_SIZE = 1 << 24
BASELINE = "cupy.ElementwiseKernel: m by parity, w <- w m + 1 per lane, z = c w"
STRONGEST = "baseline"  # the same arithmetic compiled by NVRTC: no library does this computation

A = 0.5  # the even arm's constant term
B = 0.9375  # the odd arm's damping, 15/16: exact in float32
CHUNK = 16  # FMAs per chunk: the unit of a trip count, unrolled in every kernel
N_CHUNKS = 32  # most chunks: 512 steps. N_CHUNKS |x| is exact in float32 (a power of two)
LONG = 0.97  # |x| >= (N_CHUNKS - 1) / N_CHUNKS gets all N_CHUNKS chunks
SKEW_ONE_IN = 16  # the skewed kind: one long element in 16


def TOLERANCE(size):
    # a float32 recurrence of up to 512 roundings: each step's error is damped by
    # |m| < 1 afterwards, so the relative error stays a few float32 ulps times the
    # geometric series' gain (measured below 3e-6 on the H200 at 2^24 elements)
    return 1e-5


def make_inputs(size, seed, kind="uniform"):
    rng = np.random.default_rng(seed)
    n = int(size)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    if kind == "uniform":
        mag = rng.uniform(LONG, 1.0, n)
    elif kind == "skewed":
        long = rng.random(n) < 1.0 / SKEW_ONE_IN
        mag = np.where(long, rng.uniform(LONG, 1.0, n), rng.uniform(0.0, 4.0 / N_CHUNKS, n))
    else:
        raise ValueError(f"unknown input kind {kind!r}: expected one of {INPUT_KINDS}")
    return ((sign * mag).astype(np.float32),)


def chunks(x):
    """Trip count of each element in chunks of CHUNK steps, 1 to N_CHUNKS (NumPy)."""
    scaled = np.abs(np.asarray(x, np.float64)) * N_CHUNKS  # exact for float32 x, as on the GPU
    return np.minimum(N_CHUNKS - 1, np.floor(scaled)).astype(np.int64) + 1


def reference(x):
    return reference_at(x, np.arange(x.size))


def reference_at(x, index):
    """The float64 result for elements x that sit at positions ``index`` (whose parity picks the arm).

    ``reference(x)`` is ``reference_at(x, arange(n))``; a sweep checks a sample of
    a large output with ``reference_at(x[idx], idx)``.

    T steps of z <- z m + c from z = 0 sum a geometric series, z = c (1 + m + ... + m^(T-1))
    = c (1 - m^T) / (1 - m), so the reference takes one power per element instead of T passes
    (512 passes over 2^24 elements took 55 s on the H100's host). In float64, 1 - m is exact for a
    float32 m, and 1 - m^T loses at most five of sixteen digits when m is within 2^-24 of 1:
    ``recurrence_at`` steps the definition itself, and the tests hold the two together.
    """
    x64 = np.asarray(x).astype(np.float64)
    odd = (np.asarray(index) & 1).astype(bool)
    m = np.where(odd, B, x64)
    c = np.where(odd, x64, A)
    steps = chunks(x) * CHUNK
    with np.errstate(divide="ignore", invalid="ignore"):
        series = (1.0 - m**steps) / (1.0 - m)
    return c * np.where(m == 1.0, steps, series)  # m = 1 (x rounded to 1.0): T terms of 1


def recurrence_at(x, index):
    """``reference_at`` by the definition: each element's T steps of z <- z m + c, in float64."""
    x64 = np.asarray(x).astype(np.float64)
    odd = (np.asarray(index) & 1).astype(bool)
    m = np.where(odd, B, x64)
    c = np.where(odd, x64, A)
    trips = chunks(x)
    z = np.zeros_like(x64)
    for k in range(N_CHUNKS):
        live = k < trips
        if not live.any():
            break
        zl, ml, cl = z[live], m[live], c[live]
        for _ in range(CHUNK):
            zl = zl * ml + cl
        z[live] = zl
    return z


def output_for(x):
    return x.shape, np.float32


def flops(size):
    return 2 * CHUNK * N_CHUNKS * int(size)  # one FMA a step, 512 steps: the uniform kind's work


def bytes_moved(size):
    return 2 * 4 * int(size)  # read x, write out


@functools.cache
def _cupy_kernel():
    import cupy

    body = f"""
    const int odd = (int)(i & 1);
    const float m = odd ? {B}f : x;  // w <- w m + 1, z = c w: the arms' common form
    const float c = odd ? x : {A}f;
    const int trips = min({N_CHUNKS - 1}, (int)(fabsf(x) * {N_CHUNKS}.0f)) + 1;
    float w = 0.0f;
    for (int k = 0; k < trips * {CHUNK}; ++k) w = fmaf(w, m, 1.0f);
    y = c * w;
    """
    return cupy.ElementwiseKernel("float32 x", "float32 y", body, "zoo_divergence")


def baseline(x, out):
    _cupy_kernel()(x, out)


# -- the CPU beside the GPU --------------------------------------------------------------------------------------
_CPU_LOOP = []


def cpu_numba(x):
    """The same per-element work compiled by numba over every core: each element's arm and trip count, as v01's
    threads do (NumPy would compute both arms for every element, 512 passes over the array)."""
    if not _CPU_LOOP:
        from numba import float32, njit, prange

        a, b = float32(A), float32(B)

        @njit(parallel=True)
        def every_element(x, out):
            for i in prange(x.size):  # numba splits the elements over its threads
                odd = i & 1
                m = b if odd else x[i]
                c = x[i] if odd else a
                trips = min(N_CHUNKS - 1, int(abs(x[i]) * N_CHUNKS)) + 1
                z = float32(0)
                for _ in range(trips * CHUNK):
                    z = z * m + c
                out[i] = z

        _CPU_LOOP.append(every_element)
    out = np.empty_like(x)
    _CPU_LOOP[0](x, out)
    return out


CPU = {"cpu_numba": (cpu_numba, "numba")}
