"""sin applied four times: four launches through temporaries against one fused kernel.

The fusion family's steps compute the whole chain; this sweep isolates its
first lesson, ``sin(sin(sin(sin(x))))`` on n float32, in seven ways:

    four_launches   v01's sin_kernel launched four times, ping-ponging between
                    two cached temporaries: 4 launches, 4 x 8n = 32n bytes
    fused           v02's sin4_kernel: 1 launch, 8n bytes
    fused_float4    the four sins in v04's loop (float4, four elements a thread): 1 launch, 8n
    fused_bounded   the same with sins two to four as v05's polynomial (``sin_unit``):
                    their arguments are sines, in [-1, 1], so they skip range reduction
    fused_fastmath  the same kernel compiled with fastmath: sin becomes the hardware's
                    sin.approx.f32 (MUFU.SIN), a few instructions instead of sinf's 20 to 25;
                    its absolute error is about 1e-6 for |x| up to a few pi (these inputs lie
                    in [-2 pi, 2 pi]) and grows with |x|, which is why the steps keep sinf
    cupy_ops        cupy.sin four times (fresh temporaries from the pool): 4 launches, 32n
    cupy_fuse       the same under @cupy.fuse: 1 launch, 8n

Each row gives the launches, the bytes the method really moves, the median
time (CUDA events), the GB/s those bytes make, and the speed relative to
four_launches; every row is checked against the float64 reference. In the
simulator the size is tiny, only the numba rows run and nothing is timed.
"""

import math

import numpy as np
from numba import cuda, uint32

from zoo.bench import sweeps
from zoo.device import sm_count
from zoo.device.jit import jit
from zoo.device.memory import aligned, load_float4, store_float4
from zoo.kernels import fusion as spec
from zoo.kernels.fusion import ops
from zoo.kernels.fusion import v01_unfused_launches as v01
from zoo.kernels.fusion import v02_fused_sin as v02
from zoo.kernels.fusion import v04_fused_float4 as v04
from zoo.kernels.fusion import v05_bounded_sin as v05

COMMAND = "fusion-sweep"
HELP = "sin x4 (fusion family): four launches with temporaries against one fused kernel, and CuPy's two ways"
COLUMNS = ("size", "method", "launches", "bytes", "ms", "gbps", "speedup", "correct")
METHODS = {  # name: (launches, bytes moved per element)
    "four_launches": (4, 32),
    "fused": (1, 8),
    "fused_float4": (1, 8),
    "fused_bounded": (1, 8),
    "fused_fastmath": (1, 8),
    "cupy_ops": (4, 32),
    "cupy_fuse": (1, 8),
}
GPU_SIZES = "16777216,268435456"
SIM_SIZES = "1003"


def add_arguments(parser):
    parser.add_argument(
        "--sizes", help=f"elements, joined by commas (default {GPU_SIZES} on a GPU, {SIM_SIZES} in the simulator)"
    )


def _sizes(text):
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) == 0:
            raise ValueError(f"expected positive integers joined by commas, got {text!r}")
        out.append(int(item))
    return out


def reference(x):
    s = x.astype(np.float64)
    for _ in range(4):
        s = np.sin(s)
    return s


def four_launches(x, out):
    blocks = (x.size + v01.THREADS_PER_BLOCK - 1) // v01.THREADS_PER_BLOCK
    t0, t1 = ops.temporaries(x.size)
    v01.sin_kernel[blocks, v01.THREADS_PER_BLOCK](x, t0)
    v01.sin_kernel[blocks, v01.THREADS_PER_BLOCK](t0, t1)
    v01.sin_kernel[blocks, v01.THREADS_PER_BLOCK](t1, t0)
    v01.sin_kernel[blocks, v01.THREADS_PER_BLOCK](t0, out)


def fused(x, out):
    blocks = (x.size + v02.THREADS_PER_BLOCK - 1) // v02.THREADS_PER_BLOCK
    v02.sin4_kernel[blocks, v02.THREADS_PER_BLOCK](x, out)


def float4_kernel(element):
    """v04's float4 grid-stride loop (``v04_fused_float4.fused4_kernel``) over the device function ``element``."""

    @jit
    def sweep_float4_kernel(x, out, n):
        n4 = n // uint32(4)  # whole float4; the rest is the tail
        i = uint32(cuda.grid(1))  # the float4 this thread starts at: elements 4i .. 4i + 3
        stride = uint32(cuda.gridsize(1))
        while i < n4:
            a, b, c, d = load_float4(x, i * uint32(4))
            store_float4(out, i * uint32(4), element(a), element(b), element(c), element(d))
            i += stride
        tail = n4 * uint32(4) + uint32(cuda.grid(1))  # the n % 4 leftovers, one thread each
        if tail < n:
            out[tail] = element(x[tail])

    return sweep_float4_kernel


SIN4_FLOAT4 = float4_kernel(ops.sin4)
SIN4_BOUNDED_FLOAT4 = float4_kernel(v05.sin4_bounded)


def launch_float4(kernel, x, out):
    """v04's grid: at most BLOCKS_PER_SM blocks per SM. The sweep's arrays are whole allocations: aligned."""
    if not (aligned(x) and aligned(out)):
        raise ValueError("the sweep's float4 rows need 16-byte aligned arrays")
    needed = (x.size // 4 + v04.THREADS_PER_BLOCK - 1) // v04.THREADS_PER_BLOCK
    blocks = max(1, min(needed, v04.BLOCKS_PER_SM * sm_count()))
    kernel[blocks, v04.THREADS_PER_BLOCK](x, out, np.uint32(x.size))


def fused_float4(x, out):
    launch_float4(SIN4_FLOAT4, x, out)


def fused_bounded(x, out):
    launch_float4(SIN4_BOUNDED_FLOAT4, x, out)


@jit(fastmath=True)
def sin4_fastmath_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = math.sin(math.sin(math.sin(math.sin(src[i]))))  # fastmath: sin.approx.f32


def fused_fastmath(x, out):
    blocks = (x.size + v02.THREADS_PER_BLOCK - 1) // v02.THREADS_PER_BLOCK
    sin4_fastmath_kernel[blocks, v02.THREADS_PER_BLOCK](x, out)


def cupy_ops(x, out):
    import cupy

    cupy.sin(cupy.sin(cupy.sin(cupy.sin(x))), out=out)


_FUSED = None


def cupy_fuse(x, out):
    global _FUSED
    if _FUSED is None:
        import cupy

        @cupy.fuse(kernel_name="sin4")
        def sin4(x, out):
            out[...] = cupy.sin(cupy.sin(cupy.sin(cupy.sin(x))))  # fusion's in-place store: no copy kernel

        _FUSED = sin4
    _FUSED(x, out)


def measure(args):
    from zoo.bench import harness

    sizes = _sizes(args.sizes or (SIM_SIZES if args.simulator else GPU_SIZES))
    rows = []
    for n in sizes:
        (x,) = spec.make_inputs(n, 0)
        ref = reference(x)
        sets = [(cuda.to_device(x),)] if args.simulator else harness.input_sets((x,))
        out = cuda.device_array(n, np.float32)
        poison = np.full(n, np.nan, np.float32)
        calls = {
            "four_launches": (four_launches, sets, out),
            "fused": (fused, sets, out),
            "fused_float4": (fused_float4, sets, out),
            "fused_bounded": (fused_bounded, sets, out),
            "fused_fastmath": (fused_fastmath, sets, out),
        }
        if not args.simulator:
            import cupy

            # CuPy views of the same device memory: every method reads the same inputs
            cupy_sets, cupy_out = [(cupy.asarray(s[0]),) for s in sets], cupy.asarray(out)
            calls.update(cupy_ops=(cupy_ops, cupy_sets, cupy_out), cupy_fuse=(cupy_fuse, cupy_sets, cupy_out))
        first = None
        for method, (call, inputs, dst) in calls.items():
            launches, per_element = METHODS[method]
            out.copy_to_device(poison)  # an unwritten element fails the check
            call(inputs[0][0], dst)
            ok, _, _ = harness.compare(out.copy_to_host(), ref, spec.TOLERANCE)
            row = dict(size=n, method=method, launches=launches, bytes=per_element * n, correct=bool(ok))
            if not args.simulator:
                # timed here, within this iteration: the lambda's loop variables still hold
                ms = harness.time_launches(lambda i: call(inputs[i % len(inputs)][0], dst)).median_ms  # noqa: B023
                first = first or ms
                row.update(ms=ms, gbps=per_element * n / ms / 1e6, speedup=first / ms)
            rows.append(row)
    return rows


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    timed = [r for r in rows if _num(r.get("ms"))]
    if not timed:
        sweeps.no_timings(ax)  # the simulator: an empty panel that says why
        ax.set_title(f"sin x4, fused and not, on {device_name}")
    else:
        n = max(r["size"] for r in timed)  # the largest size: the one DRAM bandwidth decides
        mine = [r for r in timed if r["size"] == n]
        bars = ax.bar(
            range(len(mine)),
            [r["ms"] for r in mine],
            color=["tab:red" if r["launches"] > 1 else "tab:green" for r in mine],
        )
        for bar, r in zip(bars, mine, strict=True):
            ax.annotate(
                f"{r['launches']} launch{'es' if r['launches'] > 1 else ''}, {r['bytes'] / n:.0f}n B\n"
                f"{r['speedup']:.2f}x",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_xticks(range(len(mine)), [r["method"] for r in mine])
        ax.set_ylabel("ms per call")
        ax.set_ylim(0, 1.25 * max(r["ms"] for r in mine))
        ax.set_title(f"sin x4 on {device_name}, n = {n}: speed relative to four launches")
    fig.tight_layout()
    return fig
