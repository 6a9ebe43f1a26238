"""Bus bandwidth of every all-reduce step and of NCCL, from 1 MB to 1 GB a rank, on buffers already on the GPUs.

For each size every step's ``allreduce`` runs on the same per-rank device buffers (rank r on
device r % D), filled with small integers so that any order of addition gives the exact
sum: the first call is checked on every rank against that sum (a wrong one stops the
sweep), then calls are timed back to back, as nccl-tests time them: the host's clock
around k calls and one synchronization of every rank, divided by k. Each call sums in
place, so the values grow between timed calls; that changes no timing.

Figures as nccl-tests define them: algbw = S / t for S bytes a rank; busbw = algbw * 2 (R - 1)
/ R, the bytes each rank's link carries a second in a ring all-reduce, comparable across R
and against the link's own bandwidth. With one rank busbw is 0 by definition (nothing
crosses a link) and algbw is shown. Rows beside the steps:

- ``nccl``: ``cupy.cuda.nccl``'s all-reduce on the same buffers, one rank a GPU (left out,
  with the reason, when CuPy cannot load NCCL or ranks share a GPU);
- ``ring_copy_ceiling``: every rank copies a whole buffer from its left neighbour at once
  (cudaMemcpyPeerAsync), the ring's traffic with no addition: its busbw is what each link
  moves a second with every link busy, the ceiling of a copy-engine ring.

``--ranks`` above the GPU count puts several ranks on a GPU: a check of the code and of
device-to-device copies, not of links. In the simulator: small sizes, correctness only.
"""

import time

import numpy as np

from zoo import SIMULATOR
from zoo.bench.sweeps import is_number
from zoo.device.memory import address
from zoo.kernels.collectives import library, world

COMMAND = "allreduce"
HELP = "sum all-reduce across the GPUs: bus bandwidth of every step and NCCL, 1 MB to 1 GB a rank"
COLUMNS = ("row", "ranks", "gpus", "bytes", "ms", "algbw_gbs", "busbw_gbs", "of_nccl", "correct", "note")
NCCL, CEILING = "nccl", "ring_copy_ceiling"
GOAL_BYTES = 256 << 20  # the ring's goal is stated from this size up


def add_arguments(parser):
    parser.add_argument("--ranks", type=int, help="ranks (default: one a GPU, or ZOO_RANKS; 3 in the simulator)")
    parser.add_argument("--min-mb", type=float, default=1.0, help="smallest buffer a rank, MB (default 1)")
    parser.add_argument("--max-mb", type=float, default=1024.0, help="largest buffer a rank, MB (default 1024)")
    parser.add_argument(
        "--host-max-mb", type=float, default=256.0, help="largest size v01 (through the host) runs at (default 256)"
    )
    parser.add_argument("--steps", help="comma-separated steps to time, e.g. v03,v04 (default: all)")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timed calls a row (default 0.3)")
    parser.add_argument("--max-pieces", type=int, help="v04, v05: most pieces a segment (tuning; default the steps')")
    parser.add_argument("--min-piece-mb", type=float, help="v04, v05: least MB a piece, per rank (tuning)")


def bus_bandwidth(nbytes, seconds, ranks):
    """(algbw, busbw) in GB/s as nccl-tests define them for an all-reduce of ``nbytes`` a rank."""
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * 2 * (ranks - 1) / ranks


def sizes(min_mb, max_mb, simulator):
    """Bytes a rank: 1 MB, 4 MB, ... (x4) up to max_mb, the largest included; two tiny irregular ones when simulated."""
    if simulator:
        return [4 * 31, 4 * 1000]
    out, size = [], int(min_mb * (1 << 20))
    while size <= max_mb * (1 << 20):
        out.append(size)
        size *= 4
    top = int(max_mb * (1 << 20))
    if out and out[-1] != top:
        out.append(top)
    return out


# -- data that sums exactly ------------------------------------------------------------------------------------
def _pattern(xp, n, rank):
    """Rank's buffer: small integers (-8 .. 8) as float32, so every order of addition gives the same sum."""
    i = xp.arange(n, dtype=xp.uint32) % 17
    return ((i * 7 + 13 * rank) % 17).astype(xp.float32) - 8


def fill(group, bufs):
    """Each rank's buffer set to its pattern, on the device (the host never holds a 1 GB stack)."""
    n = bufs[0].size
    if SIMULATOR:
        for r in range(group.ranks):
            bufs[r].copy_to_device(_pattern(np, n, r))
        return
    import cupy

    for r in range(group.ranks):
        with cupy.cuda.Device(group.devices[r]):
            cupy.asarray(bufs[r])[...] = _pattern(cupy, n, r)
            cupy.cuda.Device().synchronize()


def check(group, bufs):
    """True when every rank's buffer holds the exact sum of the patterns."""
    n = bufs[0].size
    if SIMULATOR:
        want = sum(_pattern(np, n, r) for r in range(group.ranks))
        return all(np.array_equal(bufs[r].copy_to_host(), want) for r in range(group.ranks))
    import cupy

    for r in range(group.ranks):
        with cupy.cuda.Device(group.devices[r]):
            want = sum(_pattern(cupy, n, q) for q in range(group.ranks))
            if not bool(cupy.array_equal(cupy.asarray(bufs[r]), want)):
                return False
    return True


# -- what is timed -----------------------------------------------------------------------------------------------
def _steps(fam, wanted, args):
    """{step name: allreduce(group, bufs)}, the pipelined steps with the piece sizes asked for."""
    import functools
    import inspect

    tuning = {}
    if getattr(args, "max_pieces", None):
        tuning["max_pieces"] = args.max_pieces
    if getattr(args, "min_piece_mb", None):
        tuning["min_piece"] = int(args.min_piece_mb * (1 << 20)) // 4
    found = {}
    for v in fam:
        if wanted and v.name[:3] not in wanted and v.name not in wanted:
            continue
        accepts = inspect.signature(v.module.allreduce).parameters
        given = {k: value for k, value in tuning.items() if k in accepts}
        found[v.name] = functools.partial(v.module.allreduce, **given) if given else v.module.allreduce
    return found


def _nccl(group, bufs):
    library.nccl_allreduce(
        group.devices, [address(b) for b in bufs], bufs[0].size, [world.handle(s) for s in group.main]
    )


def _ring_copy(group, bufs):
    """Every rank receives a whole buffer from its left neighbour, all at once: the ring's links, no addition."""
    inbox = group.buffers("ceiling inbox", bufs[0].size)
    links = group.streams("link from the left")
    group.fork(links)
    for q in range(group.ranks):
        left = (q - 1) % group.ranks
        with group.on(q):
            group.copy(bufs[0].size, (q, inbox[q], 0), (left, bufs[left], 0), links[q])
    group.join(links)


def free_cupy_blocks(group):
    """Give CuPy's cached blocks back to each GPU of the group (CuPy keeps a pool a device)."""
    if SIMULATOR:
        return
    import cupy

    for d in sorted(set(group.devices)):
        with cupy.cuda.Device(d):
            cupy.get_default_memory_pool().free_all_blocks()


def seconds_per_call(group, call, budget):
    """Seconds a call, nccl-tests' way: the host's clock around k calls and one synchronization of every rank."""
    group.synchronize()
    began = time.perf_counter()
    call()
    group.synchronize()
    once = time.perf_counter() - began
    k = max(3, min(50, int(budget / max(once, 1e-6))))
    began = time.perf_counter()
    for _ in range(k):
        call()
    group.synchronize()
    return (time.perf_counter() - began) / k


def measure(args):
    import zoo

    fam = zoo.family("collectives")
    ranks = args.ranks or world.ranks()
    group = world.group(ranks)
    gpus = len(set(group.devices))
    steps = _steps(fam, set((args.steps or "").replace(" ", "").split(",")) - {""}, args)
    nccl_ok, nccl_why = library.available(group.devices) if not SIMULATOR else (False, "the simulator has no NCCL")
    print(f"{ranks} rank(s) on {gpus} GPU(s) {group.devices}; peer access: {_peers(group)}; NCCL: {nccl_why}")
    rows = []
    for nbytes in sizes(args.min_mb, args.max_mb, args.simulator):
        n = nbytes // 4
        bufs = group.buffers("sweep data", n)
        calls = dict(steps)
        if nccl_ok:
            calls[NCCL] = _nccl
        if ranks > 1:
            calls[CEILING] = _ring_copy
        for name, call in calls.items():
            row = dict(row=name, ranks=ranks, gpus=gpus, bytes=nbytes, correct=None, note="")
            if name.startswith("v01") and nbytes > args.host_max_mb * (1 << 20):
                row["note"] = f"skipped above --host-max-mb {args.host_max_mb:g}"
                rows.append(row)
                continue
            fill(group, bufs)
            call(group, bufs)
            group.synchronize()
            if name != CEILING:
                row["correct"] = check(group, bufs)
                if not row["correct"]:
                    raise AssertionError(f"allreduce: {name} was wrong at {nbytes:,} bytes a rank on {ranks} ranks")
            if not args.simulator:
                seconds = seconds_per_call(group, lambda call=call, bufs=bufs: call(group, bufs), args.budget)
                algbw, busbw = bus_bandwidth(nbytes, seconds, ranks)
                row.update(ms=seconds * 1e3, algbw_gbs=algbw, busbw_gbs=busbw if name != CEILING else algbw)
                if ranks == 1:
                    row["note"] = "one rank: busbw is 0 by definition; algbw shown"
            rows.append(row)
        _relate(rows, nbytes)
    if not nccl_ok:
        rows.append(dict(row=NCCL, ranks=ranks, gpus=gpus, note=f"not run: {nccl_why}"))
    group.drop("sweep data", "ceiling inbox")  # the largest buffers go back
    free_cupy_blocks(group)  # and the fill's and check's temporaries
    if args.simulator:
        print("simulator: every step ran once per size for correctness; timings need a GPU")
    return rows


def _peers(group):
    if not group.peers:
        return "none needed (one GPU)" if len(set(group.devices)) == 1 else "none"
    on = sorted(pair for pair, ok in group.peers.items() if ok)
    return f"{len(on)} of {len(group.peers)} directed pairs"


def _relate(rows, nbytes):
    """of_nccl: each row's bandwidth over NCCL's at this size (busbw; algbw with one rank)."""
    here = [r for r in rows if r.get("bytes") == nbytes and is_number(r.get("algbw_gbs"))]
    nccl = next((r for r in here if r["row"] == NCCL), None)
    if nccl is None:
        return
    key = "busbw_gbs" if nccl["ranks"] > 1 else "algbw_gbs"
    for r in here:
        if r["row"] != CEILING:
            r["of_nccl"] = r[key] / nccl[key]


def findings(rows):
    timed = [r for r in rows if is_number(r.get("algbw_gbs"))]
    if not timed:
        return []
    ranks, gpus = timed[0]["ranks"], timed[0]["gpus"]
    key = "busbw_gbs" if ranks > 1 else "algbw_gbs"
    lines = []
    if ranks == 1:
        lines.append(
            "one rank: nothing crosses a link and busbw is 0 by definition; algbw shows each step's fixed costs"
        )
    elif gpus < ranks:
        lines.append(f"{ranks} ranks share {gpus} GPU(s): copies between ranks are device-to-device, not links")
    top = max(r["bytes"] for r in timed)
    at_top = {r["row"]: r for r in timed if r["bytes"] == top}
    lines.append(
        f"at {top / (1 << 20):,.0f} MB a rank, {key[:-4]}: "
        + "; ".join(f"{name} {r[key]:,.1f} GB/s" for name, r in at_top.items())
    )
    nccl = {r["bytes"]: r for r in timed if r["row"] == NCCL}
    for name in sorted({r["row"] for r in timed} - {NCCL, CEILING}):
        big = [r for r in timed if r["row"] == name and r["bytes"] >= GOAL_BYTES and r["bytes"] in nccl]
        if big:
            ratios = [r[key] / nccl[r["bytes"]][key] for r in big]
            lines.append(
                f"{name}: {100 * min(ratios):.0f}% to {100 * max(ratios):.0f}% of NCCL's {key[:-4]} from "
                f"{GOAL_BYTES >> 20} MB a rank up"
            )
    ceiling = {r["bytes"]: r for r in timed if r["row"] == CEILING}
    ours = [r for r in at_top.values() if r["row"] not in (NCCL, CEILING)]
    if top in ceiling and ranks > 1 and ours:
        best = max(ours, key=lambda r: r[key])
        lines.append(
            f"the copy ring moves {ceiling[top][key]:,.1f} GB/s a link at {top >> 20} MB; the best all-reduce, "
            f"{best['row']}, reaches {100 * best[key] / ceiling[top][key]:.0f}% of it"
        )
    return lines


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    from zoo.bench.sweeps import no_timings

    timed = [r for r in rows if is_number(r.get("algbw_gbs"))]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if not timed:
        no_timings(ax)
        return fig
    ranks = timed[0]["ranks"]
    key = "busbw_gbs" if ranks > 1 else "algbw_gbs"
    for name in dict.fromkeys(r["row"] for r in timed):
        mine = sorted((r for r in timed if r["row"] == name), key=lambda r: r["bytes"])
        style = "--" if name in (NCCL, CEILING) else "-"
        ax.plot([r["bytes"] / (1 << 20) for r in mine], [r[key] for r in mine], style, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("buffer a rank (MB)")
    ax.set_ylabel(("bus" if ranks > 1 else "algorithm") + " bandwidth (GB/s)")
    ax.set_title(f"sum all-reduce, {ranks} rank(s) on {timed[0]['gpus']} GPU(s) of {device_name}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
