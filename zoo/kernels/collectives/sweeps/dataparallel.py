"""A toy data-parallel training step: each layer's gradient all-reduce overlapped with the next layer's matmul.

Every rank holds the same L layers of width d and its own slice of the batch: b rows of
activations a_l and of back-propagated errors e_l a layer. The backward pass computes the
layers' weight gradients from the last layer to the first, one matmul a layer on each rank
(g_l = a_l^T e_l, through CuPy and cuBLAS, on the rank's main stream), into one flat
buffer of L d^2 floats a rank, and every rank then needs the sum of all ranks' gradients.
Four ways are timed at each batch size b (the host's clock, every rank synchronized):

- compute: the L matmuls alone;
- allreduce: the gradients' all-reduce alone (v05, a bucket a layer);
- serial: the matmuls, then v04's all-reduce of the whole buffer, as a step without overlap;
- overlapped: after each layer's matmul, that layer's bucket starts its ring (v05's
  ``allreduce_bucket``) while the next layer's matmul runs; one join at the end.

hidden = 1 - (overlapped - compute) / allreduce: the fraction of the all-reduce that the
compute hid (1: none of it shows; 0: it all adds up, as in serial). It cannot pass 1 - 1/L
with L equal layers: the first layer's gradients come last, with no compute left to hide
their ring behind. The overlapped step's
gradients are checked against the float64 sum of every rank's own gradients (the first and
last layers). With one rank there is nothing to hide; ``--ranks 2`` on one GPU puts two
ranks on it (copies on the GPU's own memory, no links). In the simulator: tiny layers, the
overlapped step checked, no timings.
"""

import numpy as np

from zoo import SIMULATOR
from zoo.bench.sweeps import is_number
from zoo.kernels.collectives import world
from zoo.kernels.collectives.sweeps.allreduce import free_cupy_blocks, seconds_per_call

COMMAND = "dataparallel"
HELP = "a toy data-parallel training step: each layer's gradient all-reduce overlapped with the next layer's matmul"
COLUMNS = (
    "ranks",
    "gpus",
    "layers",
    "width",
    "batch",
    "compute_ms",
    "allreduce_ms",
    "serial_ms",
    "overlapped_ms",
    "hidden",
    "speedup",
    "correct",
)
GOAL = 0.8  # the overlap step should hide at least this much of the all-reduce


def add_arguments(parser):
    parser.add_argument("--ranks", type=int, help="ranks (default: one a GPU, or ZOO_RANKS; 2 in the simulator)")
    parser.add_argument("--layers", type=int, help="layers, a gradient bucket each (default 16; 3 in the simulator)")
    parser.add_argument("--width", type=int, help="layer width d, a multiple of 8 (default 2048; 8 in the simulator)")
    parser.add_argument(
        "--batches", help="rows a rank, comma-separated (default 256,1024,4096,16384; 4 in the simulator)"
    )
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timed calls a figure (default 0.3)")


class Model:
    """Each rank's activations and errors (b x d a layer, seeded by rank and layer) and its flat gradient buffer."""

    def __init__(self, group, layers, width, batch):
        self.group, self.layers, self.width = group, layers, width
        self.grads = group.buffers("gradients", layers * width * width)
        if SIMULATOR:
            self.inputs = [[_layer_inputs(np, r, l, batch, width) for l in range(layers)] for r in range(group.ranks)]
            return
        import cupy

        self.inputs, self.views, self.streams = [], [], []
        for r in range(group.ranks):
            with cupy.cuda.Device(group.devices[r]):
                self.inputs.append([_layer_inputs(cupy, r, l, batch, width) for l in range(layers)])
                self.views.append(cupy.asarray(self.grads[r]))  # no copy: the numba buffer, seen by CuPy
                self.streams.append(_cupy_stream(cupy, group.main[r]))  # CuPy's matmul on the rank's main stream

    def bucket(self, layer):
        """(first, last + 1) of a layer's gradients in the flat buffer: a multiple of 64 when d is of 8."""
        size = self.width * self.width
        return layer * size, (layer + 1) * size

    def backward_layer(self, layer):
        """g_l = a_l^T e_l on every rank, on its main stream (queued: the host does not wait)."""
        lo, hi = self.bucket(layer)
        for r in range(self.group.ranks):
            a, e = self.inputs[r][layer]
            if SIMULATOR:
                self.grads[r][lo:hi].copy_to_device((a.T @ e).ravel())
                continue
            import cupy

            with cupy.cuda.Device(self.group.devices[r]), self.streams[r]:
                cupy.matmul(a.T, e, out=self.views[r][lo:hi].reshape(self.width, self.width))

    def compute(self):
        for layer in reversed(range(self.layers)):
            self.backward_layer(layer)

    def gradients(self, layer):
        """Each rank's gradients of a layer, on the host (after every stream has drained)."""
        self.group.synchronize()
        lo, hi = self.bucket(layer)
        found = []
        for r in range(self.group.ranks):
            with self.group.on(r):
                found.append(self.grads[r][lo:hi].copy_to_host())
        return found


def _cupy_stream(cupy, stream):
    """A CuPy view of a numba stream (CuPy 14's from_external; ExternalStream before it)."""
    if hasattr(cupy.cuda.Stream, "from_external"):
        return cupy.cuda.Stream.from_external(stream)  # numba's streams speak the CUDA stream protocol
    return cupy.cuda.ExternalStream(world.handle(stream))


def _layer_inputs(xp, rank, layer, batch, width):
    if xp is np:
        rng = np.random.default_rng(1000 * rank + layer)
        return tuple(rng.standard_normal((batch, width), dtype=np.float32) for _ in range(2))
    rng = xp.random.default_rng(1000 * rank + layer)
    return tuple(rng.standard_normal((batch, width), dtype=xp.float32) for _ in range(2))


def _steps():
    import zoo

    fam = zoo.family("collectives")
    return fam["v04"].module, fam["v05"].module


def overlapped(model, v05):
    """After each layer's matmul, that layer's all-reduce starts while the next layer computes."""
    for layer in reversed(range(model.layers)):
        model.backward_layer(layer)
        v05.allreduce_bucket(model.group, model.grads, *model.bucket(layer))
    v05.finish(model.group)


def serial(model, v04):
    model.compute()
    v04.allreduce(model.group, model.grads)


def _correct(model, v05):
    """The overlapped step's gradients against the float64 sum of every rank's own (first and last layer)."""
    layers = sorted({0, model.layers - 1})
    model.compute()
    own = {layer: model.gradients(layer) for layer in layers}
    overlapped(model, v05)
    for layer in layers:
        want = np.sum([g.astype(np.float64) for g in own[layer]], axis=0)
        for got in model.gradients(layer):
            if np.linalg.norm(got - want) > 1e-5 * np.linalg.norm(want):
                return False
    return True


def measure(args):
    v04, v05 = _steps()
    ranks = args.ranks or (2 if args.simulator else world.ranks())
    group = world.group(ranks)
    layers = args.layers or (3 if args.simulator else 16)
    width = args.width or (8 if args.simulator else 2048)
    if width % 8:
        raise ValueError(f"--width must be a multiple of 8 (a layer's bucket starts 256-byte aligned), got {width}")
    batches = [int(b) for b in (args.batches or ("4" if args.simulator else "256,1024,4096,16384")).split(",")]
    rows = []
    for batch in batches:
        model = Model(group, layers, width, batch)
        row = dict(ranks=ranks, gpus=len(set(group.devices)), layers=layers, width=width, batch=batch)
        row["correct"] = _correct(model, v05)
        if not row["correct"]:
            raise AssertionError(f"dataparallel: the overlapped step's gradients were wrong at batch {batch}")
        if not args.simulator:
            budget = args.budget
            row["compute_ms"] = 1e3 * seconds_per_call(group, model.compute, budget)
            row["allreduce_ms"] = 1e3 * seconds_per_call(
                group, lambda m=model: v05.allreduce(group, m.grads, bucket=width * width), budget
            )
            row["serial_ms"] = 1e3 * seconds_per_call(group, lambda m=model: serial(m, v04), budget)
            row["overlapped_ms"] = 1e3 * seconds_per_call(group, lambda m=model: overlapped(m, v05), budget)
            row["speedup"] = row["serial_ms"] / row["overlapped_ms"]
            if ranks > 1:
                row["hidden"] = 1 - (row["overlapped_ms"] - row["compute_ms"]) / row["allreduce_ms"]
        rows.append(row)
        del model
    group.drop("gradients")
    free_cupy_blocks(group)  # the activations and errors of the last batch
    if args.simulator:
        print("simulator: the overlapped step ran once a batch for correctness; timings need a GPU")
    elif ranks == 1:
        print("one rank: there is no all-reduce to hide (run with --ranks 2 to put two ranks on this GPU)")
    return rows


def findings(rows):
    timed = [r for r in rows if is_number(r.get("hidden"))]
    if not timed:
        return []
    first = timed[0]
    lines = [
        f"{first['ranks']} ranks on {first['gpus']} GPU(s), {first['layers']} layers of width {first['width']} "
        f"({first['width'] ** 2 * 4 / (1 << 20):,.0f} MB of gradients a layer):"
    ]
    for r in timed:
        lines.append(
            f"batch {r['batch']}: compute {r['compute_ms']:.2f} ms, all-reduce {r['allreduce_ms']:.2f} ms; "
            f"overlapped {r['overlapped_ms']:.2f} ms against {r['serial_ms']:.2f} serial ({r['speedup']:.2f}x): "
            f"{100 * r['hidden']:.0f}% of the all-reduce hidden"
        )
    lines.append(
        f"at most {100 * (1 - 1 / first['layers']):.0f}% can be hidden: the first layer's ring has no compute after it"
    )
    enough = [r["batch"] for r in timed if r["hidden"] >= GOAL]
    lines.append(
        f"at least {100 * GOAL:.0f}% hidden from batch {min(enough)} up"
        if enough
        else f"less than {100 * GOAL:.0f}% hidden at every batch"
    )
    return lines


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    from zoo.bench.sweeps import no_timings

    timed = [r for r in rows if is_number(r.get("compute_ms"))]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if not timed:
        no_timings(ax)
        return fig
    batches = [r["batch"] for r in timed]
    for key, label, style in (
        ("compute_ms", "compute alone", ":"),
        ("allreduce_ms", "all-reduce alone", ":"),
        ("serial_ms", "compute, then all-reduce (v04)", "-"),
        ("overlapped_ms", "overlapped (v05 buckets)", "-"),
    ):
        ax.plot(batches, [r[key] for r in timed], style, marker="o", label=label)
    for r in timed:
        if is_number(r.get("hidden")):
            ax.annotate(f"{100 * r['hidden']:.0f}% hidden", (r["batch"], r["overlapped_ms"]), fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch rows a rank")
    ax.set_ylabel("ms a training step's backward pass")
    first = timed[0]
    ax.set_title(
        f"{first['ranks']} rank(s) on {first['gpus']} GPU(s) of {device_name}: {first['layers']} layers, "
        f"width {first['width']}",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
