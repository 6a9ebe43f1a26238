"""Host-device copy bandwidth against size: pageable against pinned host memory, both directions.

Each row is one copy size, direction, kind of host memory and API, timed with
CUDA events over batches of back-to-back copies (median). numba copies from
pageable memory are synchronous (the driver stages them through its own pinned
bounce buffer); from pinned memory they are asynchronous on the default stream.
CuPy's raw ``cudaMemcpyAsync`` from the same pinned buffers is the reference
for "the best any API reaches" (column of_best: this row's GB/s over the best
row of that size and direction). Small copies show the latency floor: the time
stops falling with the size, and GB/s grows in proportion to it.
"""

import numpy as np
from numba import cuda

from zoo.kernels.pipeline import stages

COMMAND = "transfers"
HELP = "host<->device copy bandwidth, pageable against pinned, 4 KiB to 1 GiB"
COLUMNS = ("bytes", "direction", "memory", "api", "us", "gbps", "of_best", "correct")


def add_arguments(parser):
    parser.add_argument("--max-bytes", type=int, help="largest copy (default 1 GiB; 64 KiB in the simulator)")


def _buffers(n):
    """Host (pageable and pinned, out and back) and device buffers of n float32, allocated once."""
    host = np.arange(n, dtype=np.float32) % 65521
    pinned = stages.pinned_empty(n)
    pinned[...] = host
    return host, np.empty_like(host), pinned, stages.pinned_empty(n), cuda.device_array(n, np.float32)


def _copies(n, buffers):
    """{(direction, memory, api): (copy(i), check() -> bool)} over the first n float32 of the buffers."""
    host, pageable_back, pinned, pinned_back, dev = (b[:n] for b in buffers)
    default = cuda.default_stream()
    copies = {
        ("h2d", "pageable", "numba"): lambda i: dev.copy_to_device(host),
        ("d2h", "pageable", "numba"): lambda i: dev.copy_to_host(pageable_back),
        ("h2d", "pinned", "numba"): lambda i: dev.copy_to_device(pinned, stream=default),
        ("d2h", "pinned", "numba"): lambda i: dev.copy_to_host(pinned_back, stream=default),
    }
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None and not stages.SIMULATOR:
        rt = cupy.cuda.runtime
        d_ptr, nbytes = dev.__cuda_array_interface__["data"][0], host.nbytes
        copies[("h2d", "pinned", "cupy")] = lambda i: rt.memcpyAsync(
            d_ptr, pinned.ctypes.data, nbytes, rt.memcpyHostToDevice, 0
        )
        copies[("d2h", "pinned", "cupy")] = lambda i: rt.memcpyAsync(
            pinned_back.ctypes.data, d_ptr, nbytes, rt.memcpyDeviceToHost, 0
        )
    back = {"pageable": pageable_back, "pinned": pinned_back}

    def checker(direction, memory):
        def check():
            cuda.synchronize()
            if direction == "h2d":
                return bool(np.array_equal(dev.copy_to_host(), host))
            return bool(np.array_equal(back[memory], host))

        return check

    return {k: (f, checker(k[0], k[1])) for k, f in copies.items()}


def measure(args):
    top = args.max_bytes or ((64 << 10) if args.simulator else (1 << 30))
    sizes = []
    b = 4 << 10
    while b <= top:
        sizes.append(b)
        b *= 2 if not args.simulator else 16
    rows, buffers = [], _buffers(sizes[-1] // 4)
    for nbytes in sizes:
        batch = []
        for (direction, memory, api), (copy, check) in _copies(nbytes // 4, buffers).items():
            row = dict(bytes=nbytes, direction=direction, memory=memory, api=api)
            if args.simulator:
                copy(0)
            else:
                from zoo.bench.harness import time_launches

                ms = time_launches(copy, budget_s=0.25).median_ms
                row.update(us=ms * 1e3, gbps=nbytes / ms / 1e6)
            row["correct"] = check()
            batch.append(row)
        for row in batch:
            best = max((r.get("gbps") or 0) for r in batch if r["direction"] == row["direction"])
            if row.get("gbps"):
                row["of_best"] = row["gbps"] / best
        rows.extend(batch)
        cuda.synchronize()
    return rows


STYLE = {"pageable": ":", "pinned": "-"}
COLOUR = {
    ("h2d", "numba"): "tab:blue",
    ("d2h", "numba"): "tab:green",
    ("h2d", "cupy"): "tab:purple",
    ("d2h", "cupy"): "tab:olive",
}


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, (bw, lat) = plt.subplots(1, 2, figsize=(12, 4.5))
    series = dict.fromkeys((r["direction"], r["memory"], r["api"]) for r in rows)
    timed = any(isinstance(r.get("gbps"), (int, float)) for r in rows)
    for direction, memory, api in series:
        mine = sorted(
            (
                r
                for r in rows
                if (r["direction"], r["memory"], r["api"]) == (direction, memory, api)
                and isinstance(r.get("gbps"), (int, float))
            ),
            key=lambda r: r["bytes"],
        )
        if not mine:
            continue
        label = f"{direction.upper()} {memory} ({api})"
        style = dict(ls=STYLE[memory], color=COLOUR.get((direction, api)), marker=".", label=label)
        bw.plot([r["bytes"] for r in mine], [r["gbps"] for r in mine], **style)
        lat.plot([r["bytes"] for r in mine], [r["us"] for r in mine], **style)
    for ax in (bw, lat):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per copy")
        ax.grid(True, which="both", alpha=0.3)
    bw.set_ylabel("GB/s")
    lat.set_ylabel("microseconds per copy")
    lat.set_yscale("log")
    if timed:
        bw.legend(fontsize=8)
        lat.set_title("the flat left end is the latency floor", fontsize=9)
    else:
        bw.text(0.5, 0.5, "no timings: copies need a GPU", ha="center", transform=bw.transAxes)
    fig.suptitle(f"host-device copies on {device_name}")
    fig.tight_layout()
    return fig
