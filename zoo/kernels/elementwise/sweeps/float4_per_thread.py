"""How many float4 per thread, how many blocks per SM: the grid of v05's choices, timed.

For each UNROLL (float4 per thread per pass, so 4 x UNROLL elements) and each
grid size (blocks of 256 threads per SM, or ``all``: enough blocks for a single
pass, one thread per 4 x UNROLL elements) the sweep times v05's kernel on n
elements (CUDA events, median) and reports GB/s (bytes read + written) and the
fraction of the measured device-to-device copy bandwidth (``zoo.bench.ceilings``).
Every configuration is also checked against the reference. In the simulator the
sizes are tiny and nothing is timed: the rows only say that each configuration
is correct.
"""

import numpy as np
from numba import cuda

from zoo.bench import sweeps
from zoo.kernels.elementwise import v05_unrolled as v05

COMMAND = "elementwise-sweep"
HELP = "ReLU (elementwise v05): float4 per thread x blocks per SM, GB/s and fraction of copy bandwidth"
COLUMNS = (
    "size",
    "unroll",
    "elements_per_thread",
    "blocks_per_sm",
    "blocks",
    "threads_per_block",
    "ms",
    "gbps",
    "of_copy",
    "copy_gbps",
    "correct",
)
GPU_UNROLLS = "1,2,4,8"
GPU_BLOCKS = "1,2,4,8,16,all"
SIM_UNROLLS = "1,4"
SIM_BLOCKS = "1,all"


def add_arguments(parser):
    parser.add_argument("--size", type=int, help="elements (default 2^28 on a GPU, 1003 in the simulator)")
    parser.add_argument(
        "--unrolls", help=f"float4 per thread per pass (default {GPU_UNROLLS}; {SIM_UNROLLS} in the simulator)"
    )
    parser.add_argument(
        "--blocks-per-sm",
        help=f"blocks of 256 per SM, 'all' for one pass (default {GPU_BLOCKS}; {SIM_BLOCKS} in the simulator)",
    )


def _numbers(text, allow_all=False):
    out = []
    for item in text.split(","):
        item = item.strip()
        if allow_all and item == "all":
            out.append(None)
        elif item.isdigit() and int(item) > 0:
            out.append(int(item))
        else:
            raise ValueError(
                f"expected positive integers{' or all' if allow_all else ''} joined by commas, got {text!r}"
            )
    return out


def measure(args):
    import zoo
    from zoo.bench import ceilings, harness

    fam = zoo.family("elementwise")
    n = args.size or (1003 if args.simulator else 1 << 28)
    unrolls = _numbers(args.unrolls or (SIM_UNROLLS if args.simulator else GPU_UNROLLS))
    per_sm = _numbers(args.blocks_per_sm or (SIM_BLOCKS if args.simulator else GPU_BLOCKS), allow_all=True)
    (x,) = fam.make_inputs(n, 0)
    ref = fam.reference(x)
    out = cuda.device_array(n, np.float32)
    poison = np.full(n, np.nan, np.float32)
    if args.simulator:
        sets, copy = [(cuda.to_device(x),)], None
    else:
        sets, copy = harness.input_sets((x,)), ceilings.copy_bandwidth()  # several sets when x fits in L2
    rows = []
    for unroll in unrolls:
        kernel = v05.build(unroll)
        for blocks_per_sm in per_sm:
            out.copy_to_device(poison)
            v05.launch_with(kernel, unroll, blocks_per_sm, sets[0][0], out)
            row = dict(
                size=n,
                unroll=unroll,
                elements_per_thread=4 * unroll,
                blocks_per_sm="all" if blocks_per_sm is None else blocks_per_sm,
                blocks=v05.grid_blocks(n, unroll, blocks_per_sm),
                threads_per_block=v05.THREADS_PER_BLOCK,
                correct=bool(np.array_equal(out.copy_to_host(), ref)),
            )
            if not args.simulator:
                # timed here, within this iteration: the lambda's loop variables still hold
                timing = harness.time_launches(
                    lambda i: v05.launch_with(kernel, unroll, blocks_per_sm, sets[i % len(sets)][0], out)  # noqa: B023
                )
                gbps = fam.bytes_moved(n) / timing.median_ms / 1e6
                row.update(ms=timing.median_ms, gbps=gbps, copy_gbps=copy, of_copy=gbps / copy if copy else None)
            rows.append(row)
    return rows


def _order(label):
    return (1, 0) if label == "all" else (0, int(label))


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    timed = [r for r in rows if isinstance(r.get("gbps"), (int, float))]
    size = rows[0].get("size") if rows else "?"
    if not timed:
        sweeps.no_timings(ax)  # the simulator: an empty panel that says why
    else:
        labels = sorted({str(r["blocks_per_sm"]) for r in timed}, key=_order)
        for unroll in sorted({r["unroll"] for r in timed}):
            mine = sorted((r for r in timed if r["unroll"] == unroll), key=lambda r: _order(str(r["blocks_per_sm"])))
            ax.plot(
                [labels.index(str(r["blocks_per_sm"])) for r in mine],
                [r["gbps"] for r in mine],
                marker="o",
                label=f"{unroll} float4 ({4 * unroll} elements) per thread",
            )
        copies = [r["copy_gbps"] for r in timed if isinstance(r.get("copy_gbps"), (int, float))]
        if copies:
            ax.axhline(
                copies[0],
                color="black",
                linestyle="--",
                linewidth=1,
                label=f"device-to-device copy, {copies[0]:,.0f} GB/s",
            )
            ax.axhline(0.9 * copies[0], color="grey", linestyle=":", linewidth=1, label="90% of copy")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("blocks of 256 threads per SM ('all': one pass, no grid-stride loop)")
        ax.set_ylabel("GB/s (read + write)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"ReLU (elementwise v05) on {device_name}, n = {size}")
    fig.tight_layout()
    return fig
