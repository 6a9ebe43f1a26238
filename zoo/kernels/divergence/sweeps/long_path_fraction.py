"""``zoo divergence``: time of every step against the share of lanes per warp that take the long path.

The inputs are made for the sweep, not by ``make_inputs``: the vector is cut
into groups of 32 consecutive elements (one warp's in index order) and in each
group exactly ``long_lanes`` elements, at random lanes, are long (|x| in
[31/32, 1): all 32 chunks, 512 steps); the others are short (|x| below 1/32:
one chunk, 16 steps). Signs are random. ``long_lanes`` runs over 0, 1, 2, 4, 8,
16 and 32, so the fraction of long lanes goes from 0 to 1.

For each step (and the CuPy baseline, where CuPy is installed) and each
fraction the kernel runs on n = 2^24 elements and is timed with CUDA events
(``zoo.bench.harness.time_launches``, median). A row reports:

    long_lanes    long elements in each group of 32
    fraction      long_lanes / 32
    work          steps the data asks for over 512 n: (1 + 31 fraction) / 32
    ms            median time of one call
    gflops        2 x (steps the data asks for) / time: useful work, not the
                  spec's full-count figure
    correct       the output against the float64 reference (a sample of 2^16
                  elements on the GPU, every element in the simulator)

What to expect: v03 runs 512 steps for every lane whatever the data, a flat
line. v04 stops each lane at its own count but a warp runs until its longest
lane is done, so it is cheap at 0 and pays nearly the full price from 1/32 on:
one long lane is enough. v05 sorts each block of 256 elements by count, so a
block's long elements share as few warps as possible and its time follows the
work line. v01 pays for both parity arms at every fraction; v02 runs like v04.
In the simulator the size is tiny and nothing is timed: the rows only say that
each step is correct at each fraction.
"""

import numpy as np

from zoo.bench import sweeps
from zoo.kernels import divergence as spec

COMMAND = "divergence"
HELP = "time of every divergence step against the fraction of lanes per warp on the long path"
COLUMNS = ("size", "long_lanes", "fraction", "variant", "work", "ms", "gflops", "correct")
WARP = 32
SIZE = 1 << 24
SIM_SIZE = 300  # not a whole number of warps or of v05's blocks: the tails run too
LONG_LANES = "0,1,2,4,8,16,32"
CHECK_BLOCKS = 1024  # 64-element spans checked on the GPU: the float64 reference of 2^24 long elements is slow


def add_arguments(parser):
    parser.add_argument("--size", type=int, help=f"elements (default 2^24; {SIM_SIZE} in the simulator)")
    parser.add_argument(
        "--long-lanes",
        default=LONG_LANES,
        help=f"long lanes per warp of 32 to sweep, comma-separated (default {LONG_LANES})",
    )
    parser.add_argument("--steps", default="", help="steps to run, e.g. v03,v05 (default: all, and the baseline)")


def _numbers(text):
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if not (item.isdigit() and int(item) <= WARP):
            raise ValueError(f"expected integers from 0 to {WARP} joined by commas, got {text!r}")
        out.append(int(item))
    return out


def _steps(fam, text):
    if not text:
        return list(fam.variants)
    return [fam[name.strip()] for name in text.split(",") if name.strip()]


def inputs(n, long_lanes, seed=0):
    """float32 x of n elements: in every group of 32 consecutive ones, ``long_lanes`` long at random lanes."""
    rng = np.random.default_rng(seed)
    groups = -(-n // WARP)
    lanes = rng.random((groups, WARP)).argsort(axis=1)  # a random permutation of the lanes per group
    long = (lanes < long_lanes).reshape(-1)[:n]  # its first long_lanes entries mark the long lanes
    short_top = 1.0 / spec.N_CHUNKS  # below: floor(32 |x|) = 0, one chunk
    long_bottom = (spec.N_CHUNKS - 1) / spec.N_CHUNKS  # from here: all N_CHUNKS chunks
    mag = np.where(long, rng.uniform(long_bottom, 1.0, n), rng.uniform(0.0, short_top, n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    x = (sign * mag).astype(np.float32)
    x[~long & (np.abs(x) >= short_top)] = np.float32(0)  # rounding to float32 may reach 1/32: keep one chunk
    return x


def work(long_lanes):
    """Steps the data asks for, over the full 512 an element (ignoring a partial last group)."""
    return (long_lanes * spec.N_CHUNKS + (WARP - long_lanes)) / (WARP * spec.N_CHUNKS)


def _sample(n):
    """Indices checked on the GPU: spans of 64 spread over the vector, and the last elements."""
    span = 64
    starts = np.unique(np.r_[np.linspace(0, max(0, n - span), CHECK_BLOCKS).astype(np.int64), max(0, n - span)])
    return np.unique((starts[:, None] + np.arange(span)).reshape(-1).clip(0, n - 1))


def _correct(result, x, idx):
    from zoo.bench.harness import compare

    ref = spec.reference_at(x[idx], idx)
    return bool(compare(result[idx], ref, spec.TOLERANCE(x.size))[0])


def _row(name, n, long_lanes, ms, correct):
    steps = work(long_lanes) * spec.CHUNK * spec.N_CHUNKS * n
    return dict(
        size=n,
        long_lanes=long_lanes,
        fraction=long_lanes / WARP,
        variant=name,
        work=work(long_lanes),
        ms=ms,
        gflops=2 * steps / ms / 1e6 if ms else None,
        correct=correct,
    )


def measure(args):
    from numba import cuda

    import zoo
    from zoo.bench.harness import time_launches

    fam = zoo.family("divergence")
    simulator = args.simulator
    n = args.size or (SIM_SIZE if simulator else SIZE)
    counts = _numbers(args.long_lanes)
    steps = _steps(fam, args.steps)
    idx = np.arange(n) if simulator else _sample(n)
    out = cuda.device_array(n, np.float32)
    poison = cuda.to_device(np.full(n, np.nan, np.float32))
    rows = []
    for long_lanes in counts:
        x = inputs(n, long_lanes, seed=long_lanes)
        d_x = cuda.to_device(x)
        for variant in steps:
            variant.validate(x)  # OutOfRange before any launch
            out.copy_to_device(poison)  # an unwritten element fails the check
            variant.launch((d_x,), out)
            correct = _correct(out.copy_to_host(), x, idx)
            ms = None
            if not simulator:
                ms = time_launches(
                    lambda i, variant=variant, d_x=d_x: variant.launch((d_x,), out), budget_s=0.5
                ).median_ms
            rows.append(_row(variant.name, n, long_lanes, ms, correct))
        if not simulator and not args.steps:
            rows += _baseline_rows(x, long_lanes, idx, time_launches)
    return rows


def _baseline_rows(x, long_lanes, idx, time_launches):
    """The spec's CuPy ElementwiseKernel (v04's shape in CUDA C++), where CuPy is installed."""
    try:
        import cupy
    except ImportError:
        return []
    x_cp = cupy.asarray(x)
    out = cupy.full_like(x_cp, np.nan)
    spec.baseline(x_cp, out)
    correct = _correct(out.get(), x, idx)
    ms = time_launches(lambda i: spec.baseline(x_cp, out), budget_s=0.5).median_ms
    return [_row("baseline", x.size, long_lanes, ms, correct)]


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    timed = [r for r in rows if _num(r.get("ms"))]
    size = rows[0].get("size") if rows else "?"
    if not timed:
        sweeps.no_timings(ax)  # the simulator: an empty panel that says why
    else:
        counts = sorted({int(r["long_lanes"]) for r in timed})
        where = {c: k for k, c in enumerate(counts)}  # evenly spaced: the interesting points are near 0
        names = sorted({r["variant"] for r in timed}, key=lambda s: (s == "baseline", s))
        for name in names:
            mine = sorted((r for r in timed if r["variant"] == name), key=lambda r: r["long_lanes"])
            style = dict(linestyle="--", color="black") if name == "baseline" else {}
            ax.plot(
                [where[int(r["long_lanes"])] for r in mine],
                [r["ms"] for r in mine],
                marker="o",
                label="baseline (CuPy, per-lane loop)" if name == "baseline" else name,
                **style,
            )
        full = [r["ms"] for r in timed if int(r["long_lanes"]) == WARP and r["variant"] != "baseline"]
        if full and WARP in where:
            best = min(full)  # the fastest step with every lane long: time per unit of work
            ax.plot(
                range(len(counts)),
                [best * work(c) for c in counts],
                color="grey",
                linestyle=":",
                label="time in proportion to the work",
            )
        ax.set_xticks(range(len(counts)), [f"{c}/{WARP}" for c in counts])
        ax.set_xlabel("long lanes per warp (at random lanes; the others short: 16 steps against 512)")
        ax.set_ylabel("ms per call")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc="best")
    ax.set_title(f"Warp divergence on {device_name}, n = {size}")
    fig.tight_layout()
    return fig
