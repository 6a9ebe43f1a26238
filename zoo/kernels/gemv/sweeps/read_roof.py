"""``zoo gemv-read-roof``: the roof of the int4 goal, from a kernel that only reads a call's bytes.

The int4 goal asks for 3.5x the fp16 step's weights per second, and an int4 call moves about a quarter of the
bytes, so it is short (8-13 us at the BENCH shapes) and the boundary between two calls counts: the wait for
the kernel before and the first loads' latency. This sweep measures what reading alone reaches. For each
shape and for fp16's and int4's bytes of a call (``bytes_moved``), ``read_xor`` reads every 16-byte chunk
once (four loads in flight a thread, four blocks of 256 threads an SM, grid-stride) and XORs the words, each
block writing one word so that the read is checked, in three forms:

    no_overlap          a plain kernel: the next call's blocks start when this call has ended
    reads_before_wait   dependent launch: the next call starts at once and reads everything before its wait,
                        as a kernel whose data no earlier kernel writes could
    64kb_before_wait    dependent launch, but four loads a thread (64 KB an SM) before the wait and the rest
                        after: what a GEMV whose x comes from the kernel before can do, holding what it read
                        before the wait in shared memory (v09 holds 37 KB an SM)
    128kb_before_wait   the same with 128 KB an SM before the wait: more than a GEMV block can hold while the
                        next call's block fits beside it (about 113 KB of shared memory each)

each timed as ``zoo gemv-formats`` times a step (``formats.graph_us``: 32 calls in a CUDA graph over rotating
inputs past the L2), and the family's last step for fp16 and int4 in the same run (form ``step``). The
findings give the int4 / fp16 ratio of weights per second that each form reaches, and how close the int4 step
comes to the 64 KB roof. H100, 4096 x 14336: 3.43x with no overlap, 3.92x with every read before the wait,
3.79x with 64 KB an SM before it and 3.75x with 128 KB: once 64 KB an SM are in flight, reading more before the
wait buys nothing (10.0 us either way); what separates it from the 9.6 us of every read before the wait is
the wait itself. The row-major ring (11.1 us) ran at 90% of the 64 KB roof's speed, v10's on packed weights
(10.85) at 92%.

In the simulator the kernels run on tiny arrays and are checked, not timed.
"""

import functools
import math

import numpy as np
from numba import cuda, int32

from zoo import SIMULATOR
from zoo.bench import sweeps
from zoo.device import sm_count
from zoo.device.dependent_launch import let_next_kernel_start, wait_for_previous_kernel
from zoo.device.jit import jit
from zoo.device.memory import load_int4
from zoo.device.warp import FULL_MASK
from zoo.kernels.gemv.sweeps import formats  # gemv-formats: its sizes, its graph timing, its number test

COMMAND = "gemv-read-roof"
HELP = "the int4 goal's roof: a kernel that only reads fp16's and int4's bytes, with and without dependent launch"
COLUMNS = ("size", "kind", "form", "bytes", "graph_us", "gbps", "over_fp16", "correct")
FORMS = ("no_overlap", "reads_before_wait", "64kb_before_wait", "128kb_before_wait")
ROUNDS_BEFORE_WAIT = {"64kb_before_wait": 1, "128kb_before_wait": 2}  # rounds of four loads a thread: 64 KB an SM each
THREADS = 64 if SIMULATOR else 256  # the simulator runs each thread in Python
BLOCKS_PER_SM = 4
IN_FLIGHT = 4  # 16-byte loads a thread has in flight: 4 x 16 x 256 x 4 = 64 KB an SM
WARPS = THREADS // 32


@functools.cache
def build(form):
    """The read-only kernel of one form: XORs every int32 of ``words`` (a multiple of four), one word a block."""
    overlap = form != "no_overlap"
    all_before = form == "reads_before_wait"
    rounds_before = ROUNDS_BEFORE_WAIT.get(form, 0)

    @jit(dependent_launch=overlap)
    def read_xor(words, out):
        if overlap:
            let_next_kernel_start()  # the next call's blocks may start as soon as there is room for them
        per_warp = cuda.shared.array(WARPS, int32)  # each warp's XOR
        chunks = words.size // 4  # 16-byte chunks
        stride = cuda.gridsize(1)
        i = cuda.grid(1)
        acc = int32(0)
        waited = not overlap or all_before  # True: no wait inside the loop
        rounds = 0
        while i + (IN_FLIGHT - 1) * stride < chunks:  # four 16-byte loads in flight, then their XOR
            a0, a1, a2, a3 = load_int4(words, 4 * i)
            b0, b1, b2, b3 = load_int4(words, 4 * (i + stride))
            c0, c1, c2, c3 = load_int4(words, 4 * (i + 2 * stride))
            d0, d1, d2, d3 = load_int4(words, 4 * (i + 3 * stride))
            acc ^= a0 ^ a1 ^ a2 ^ a3 ^ b0 ^ b1 ^ b2 ^ b3 ^ c0 ^ c1 ^ c2 ^ c3 ^ d0 ^ d1 ^ d2 ^ d3
            i += IN_FLIGHT * stride
            rounds += 1
            if not waited and rounds == rounds_before:  # the first rounds_before x 64 KB an SM were before it
                wait_for_previous_kernel()
                waited = True
        while i < chunks:  # the last chunks, fewer than four a thread
            a0, a1, a2, a3 = load_int4(words, 4 * i)
            acc ^= a0 ^ a1 ^ a2 ^ a3
            i += stride
        if overlap and (all_before or not waited):
            wait_for_previous_kernel()  # before the store: the kernel before may still read out
        for offset in (16, 8, 4, 2, 1):  # the warp's XOR, in every lane
            acc ^= cuda.shfl_xor_sync(FULL_MASK, acc, offset)
        lane, warp = cuda.threadIdx.x % 32, cuda.threadIdx.x // 32
        if lane == 0:
            per_warp[warp] = acc
        cuda.syncthreads()  # every warp's XOR is in shared memory
        if cuda.threadIdx.x == 0:
            total = int32(0)
            for w in range(WARPS):
                total ^= per_warp[w]
            out[cuda.blockIdx.x] = total

    return read_xor


def blocks():
    return BLOCKS_PER_SM * sm_count()


def read(form, words, out):
    """Launch the form's kernel over ``words`` (int32, a multiple of 4), one XOR a block into ``out``."""
    build(form)[out.size, THREADS](words, out)


def _words(nbytes):
    return max(4, nbytes // 16 * 4)  # whole 16-byte chunks


def add_arguments(parser):
    parser.add_argument("--sizes", help="OUTxIN shapes joined by commas (default: the family's BENCH_SIZES)")


def measure(args):
    import zoo

    fam = zoo.family("gemv")
    sizes = formats._sizes(args, fam)
    rng = np.random.default_rng(0)
    rows = []
    for size in sizes:
        label = "x".join(map(str, size))
        for kind in ("fp16", "int4"):
            nbytes = fam.bytes_moved(size, kind)
            host = rng.integers(-(2**31), 2**31, _words(nbytes), dtype=np.int64).astype(np.int32)
            expected = np.bitwise_xor.reduce(host)
            for form in FORMS:
                row = dict(size=label, kind=kind, form=form, bytes=nbytes)
                if args.simulator:
                    out = cuda.to_device(np.zeros(2, np.int32))  # two blocks in the simulator
                    read(form, cuda.to_device(host), out)
                    row["correct"] = bool(np.bitwise_xor.reduce(out.copy_to_host()) == expected)
                else:
                    row.update(_time_form(form, host, expected, nbytes))
                rows.append(row)
            if not args.simulator:
                rows.append(dict(size=label, kind=kind, form="step", bytes=nbytes, **_time_step(fam, size, kind)))
        _ratios([r for r in rows if r["size"] == label])
    return rows


def _time_form(form, host, expected, nbytes):
    import cupy

    count = max(3, math.ceil(160 * 2**20 / host.nbytes))  # rotating past a 50-60 MB L2
    sets = [(cupy.asarray(np.roll(host, k)),) for k in range(count)]  # rolled: the same XOR
    out = cupy.full(blocks(), -1, np.int32)
    read(form, sets[0][0], out)
    correct = bool(np.bitwise_xor.reduce(cupy.asnumpy(out)) == expected)
    us = formats.graph_us(lambda inputs: read(form, inputs[0], out), sets)
    return dict(graph_us=us, gbps=nbytes / us / 1e3, correct=correct)


def _time_step(fam, size, kind):
    step = fam.variants[-1]
    host = fam.inputs(size, 0, kind)
    _, sets, out, correct, _ = formats.first_call(fam, step, size, host, fam.reference(*host))
    us = formats.graph_us(lambda inputs: step.launch(inputs, out), sets)
    fam.module._HELD.clear()
    return dict(graph_us=us, gbps=fam.bytes_moved(size, kind) / us / 1e3, correct=correct)


def _ratios(rows):
    """over_fp16 of each int4 row: fp16's time of the same form over int4's (the weights are the same: a ratio of
    weights per second)."""
    fp16 = {r["form"]: r for r in rows if r["kind"] == "fp16"}
    for r in rows:
        same_form = fp16.get(r["form"], {}).get("graph_us")
        if r["kind"] == "int4" and sweeps.is_number(r.get("graph_us")) and sweeps.is_number(same_form):
            r["over_fp16"] = same_form / r["graph_us"]


def findings(rows):
    out = []
    for size in dict.fromkeys(r["size"] for r in rows):
        int4 = {r["form"]: r for r in rows if r["size"] == size and r["kind"] == "int4"}
        fp16 = {r["form"]: r for r in rows if r["size"] == size and r["kind"] == "fp16"}
        if not all(sweeps.is_number(int4.get(f, {}).get("over_fp16")) for f in (*FORMS, "step")):
            continue
        roof = int4["64kb_before_wait"]["graph_us"]
        out.append(
            f"{size}: reading int4's bytes reaches {int4['no_overlap']['over_fp16']:.2f}x fp16's weights per second "
            f"without dependent launch, {int4['reads_before_wait']['over_fp16']:.2f}x with every read before the "
            f"wait, {int4['64kb_before_wait']['over_fp16']:.2f}x with 64 KB an SM before it and "
            f"{int4['128kb_before_wait']['over_fp16']:.2f}x with 128 KB ({int4['128kb_before_wait']['graph_us']:.2f} "
            f"us against {int4['64kb_before_wait']['graph_us']:.2f}); the steps reach "
            f"{int4['step']['over_fp16']:.2f}x (goal 3.5x). The int4 step ({int4['step']['graph_us']:.2f} us) runs "
            f"at {100 * roof / int4['step']['graph_us']:.0f}% of the 64 KB roof's speed ({roof:.2f} us); an int4 "
            f"kernel at that roof would reach {fp16['step']['graph_us'] / roof:.2f}x the fp16 step"
        )
    return out


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    timed = [r for r in rows if r["kind"] == "int4" and sweeps.is_number(r.get("over_fp16"))]
    if not timed:
        sweeps.no_timings(ax)  # the simulator: an empty panel that says why
    else:
        sizes = list(dict.fromkeys(r["size"] for r in timed))
        forms = [f for f in (*FORMS, "step") if any(r["form"] == f for r in timed)]
        width = 0.8 / len(forms)
        for j, form in enumerate(forms):
            values = [next((r["over_fp16"] for r in timed if r["size"] == s and r["form"] == form), 0) for s in sizes]
            ax.bar([i + j * width for i in range(len(sizes))], values, width, label=form.replace("_", " "))
        ax.axhline(3.5, color="black", linestyle="--", linewidth=1, label="goal: 3.5x")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(sizes))], sizes)
        ax.set_xlabel("OUT x IN")
        ax.set_ylabel("int4 / fp16 weights per second (CUDA graph)")
        ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"What reading alone reaches, int4 against fp16, on {device_name}")
    fig.tight_layout()
    return fig
