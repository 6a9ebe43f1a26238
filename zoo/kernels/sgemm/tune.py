"""The tile-shape sweep behind v10, by shape class: ``python -m zoo tune sgemm``.

One tile shape does not suit every problem. A 128 x 128 block tile is the
fastest at 4096^3 on an H200, but 1024^3 makes only 64 such tiles for 132 SMs,
so half the GPU idles for the whole call; smaller tiles make more blocks, each
with less reuse. The sweep therefore tunes each *shape class* on a shape that
stands for it:

    small   fewer 128 x 128 output tiles than SMs       tuned at 1024 x 1024 x 1024
    skinny  M or N at most 256 (a few rows, a long K)   tuned at 256 x 4096 x 4096
    large   everything else                              tuned at 4096 x 4096 x 4096

``candidates()`` lists the tile shapes v09's kernel accepts within the
hardware's limits; ``sweep()`` compiles each once, times it at each class's
shape (kernel launches with the flat views made once, so the host's share of a
call is not what is tuned) and writes results/tune/<gpu>-sgemm.json with every
row and each class's fastest. Each row also records wave quantization: output
tiles, blocks resident per SM for that kernel, the waves of blocks they make and
how full the last wave is. ``tiles_for(m, n, k)`` is what v10, v11 and v12 call:
the fastest tiles recorded for the call's class on this GPU, or None.
"""
import functools
import json
import math

from zoo import results
from zoo.device import slug, sm_count

MAX_ACCUMULATORS = 128  # results per thread: beyond this the 255-register limit forces spills
MAX_STATIC_SHARED = 48 * 1024  # bytes of static shared memory a block may declare
SHAPE_CLASSES = {  # class: the (M, N, K) it is tuned at
    "small": (1024, 1024, 1024),
    "skinny": (256, 4096, 4096),
    "large": (4096, 4096, 4096),
}
CLASS_TILE = 128  # the output tile the small class is defined by (v09's)
SKINNY_SIDE = 256


def path():
    return results.RESULTS_DIR / "tune" / f"{slug()}-sgemm.json"


def output_tiles(m, n, bm, bn):
    """Blocks of a grid that covers an M x N output with BM x BN tiles, partial ones included."""
    return -(-m // bm) * -(-n // bn)


def shape_class(m, n, k, sms=None):
    """'skinny', 'small' or 'large' for an M x N x K product (see the module docstring)."""
    if min(m, n) <= SKINNY_SIDE:
        return "skinny"
    return "small" if output_tiles(m, n, CLASS_TILE, CLASS_TILE) < (sms or sm_count()) else "large"


def valid(t):
    """True when v09's index arithmetic divides evenly and the tile fits registers and shared memory."""
    if t.BM % t.WM or t.BN % t.WN or t.WN % t.WN_ITER:
        return False
    threads = t.threads
    per_warp = 32 * t.TM * t.TN * t.WN_ITER
    if (t.WM * t.WN) % per_warp:
        return False
    wm_iter = t.WM * t.WN // per_warp
    if wm_iter < 1 or t.WM % wm_iter:
        return False
    wsub_m, wsub_n = t.WM // wm_iter, t.WN // t.WN_ITER
    if wsub_n % t.TN or wsub_m % t.TM or (wsub_n // t.TN) * (wsub_m // t.TM) != 32:
        return False  # a sub-tile is exactly one warp of lanes
    if t.TN % 4 or t.TM % 4 or t.BK % 4 or t.BN % 4:
        return False  # float4 loads
    if threads % (t.BK // 4) or threads % (t.BN // 4) or threads > 1024:
        return False
    if t.BM % (threads // (t.BK // 4)) or t.BK % max(1, threads // (t.BN // 4)) or threads // (t.BN // 4) == 0:
        return False  # staging passes divide the tiles
    if wm_iter * t.TM * t.WN_ITER * t.TN > MAX_ACCUMULATORS:
        return False
    shared = 4 * 2 * (t.BK * (t.BM + 4) + t.BK * t.BN)
    return shared <= MAX_STATIC_SHARED


def candidates():
    """Shapes near the ones that work for SGEMM: 128 or 256 threads, 32 to 128 results per thread,
    8 x 4 results per sub-tile; the 64-wide tiles are there for the small and skinny classes."""
    from zoo.kernels.sgemm.v09_double_buffered import Tiles

    found = []
    for bm, bn in ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128)):
        for bk in (8, 16, 32):
            for wm, wn in ((32, 32), (32, 64), (64, 32), (64, 64)):
                for wn_iter in (1, 2, 4) if bm * bn == 64 * 64 else (2, 4):
                    t = Tiles(bm, bn, bk, wm, wn, wn_iter, 8, 4)  # 8 x 4 per sub-tile: two float4 of A, one of B
                    per_thread = t.BM * t.BN // t.threads  # 64 x 64 tiles: 32 results a thread, 128 threads
                    if valid(t) and t.threads in (128, 256) and per_thread in ((32,) if bm * bn == 64 * 64 else (64, 128)):
                        found.append(t)
    return found


def waves(m, n, tiles, blocks_per_sm, sms=None):
    """Wave quantization of one launch: (output tiles, waves of resident blocks, fullness of the last wave)."""
    count = output_tiles(m, n, tiles.BM, tiles.BN)
    slots = (sms or sm_count()) * max(1, blocks_per_sm)
    w = count / slots
    return count, w, w / math.ceil(w)


@functools.lru_cache(maxsize=None)
def _table():
    """(the table as saved, {class: fastest Tiles}), read and parsed once: tiles_for runs on every call.

    A table written before classes existed holds one best shape, tuned at 4096^3: the large class's."""
    from zoo.kernels.sgemm.v09_double_buffered import Tiles

    p = path()
    data = json.loads(p.read_text()) if p.exists() else {}
    entries = data.get("classes", {"large": data} if data else {})
    best = {cls: Tiles(**e["best"]["tiles"]) for cls, e in entries.items() if e.get("best")}
    return data, best


def best_tiles(shape_class_name="large"):
    """The fastest tiles recorded for this device and class, or None."""
    return _table()[1].get(shape_class_name)


@functools.lru_cache(maxsize=None)
def tuned_gflops(tiles):
    """The highest GFLOP/s the sweep recorded for ``tiles`` at any class's shape on this device, or None."""
    data, _ = _table()
    rates = [row["gflops"] for entry in data.get("classes", {}).values() for row in entry.get("rows", [])
             if row.get("tiles") == tiles._asdict() and row.get("agrees", True) and row.get("gflops")]
    return max(rates, default=None)


def tiles_for(m, n, k):
    """The tuned tiles for an M x N x K call: its class's, else the large class's, else None."""
    return best_tiles(shape_class(m, n, k)) or best_tiles("large")


def sweep(shapes=None, progress=None):
    """Time every candidate at each class's shape (or at ``shapes``, a dict class: (m, n, k));
    save and return the table, each class's rows fastest first."""
    import numpy as np
    from numba import cuda, float32, uint32

    from zoo import harness
    from zoo.device import properties
    from zoo.kernels.sgemm import flops
    from zoo.kernels.sgemm.v09_double_buffered import build

    shapes = shapes or SHAPE_CLASSES
    rng = np.random.default_rng(0)
    kernels, table = {}, {"device": properties()["name"], "classes": {}}
    for name, (m, n, k) in shapes.items():
        A = cuda.to_device(rng.standard_normal((m, k), dtype=np.float32))
        B = cuda.to_device(rng.standard_normal((k, n), dtype=np.float32))
        out = cuda.device_array((m, n), np.float32)
        flat = (A.reshape(m * k), B.reshape(k * n), out.reshape(m * n), out.reshape(m * n))
        reference, rows = None, []
        for t in candidates():
            if progress:
                progress(name, t)
            if m % t.BM or n % t.BN or k % t.BK:
                continue  # the class shapes are whole tiles of every candidate
            if t not in kernels:  # compiled once, timed at every class's shape
                kernels[t] = build(t)
            kernel = kernels[t]
            grid = (n // t.BN, m // t.BM)

            def launch(i, kernel=kernel, grid=grid, t=t):
                kernel[grid, t.threads](*flat, uint32(m), uint32(n), uint32(k), float32(1.0), float32(0.0))

            try:
                launch(0)
                result = out.copy_to_host()
            except Exception as e:  # a shape this compiler or device refuses: record why, go on
                rows.append({"tiles": t._asdict(), "error": f"{type(e).__name__}: {e}"[:200]})
                continue
            if reference is None:
                reference = result
            ok = bool(np.allclose(result, reference, rtol=1e-4, atol=1e-3))
            timing = harness.time_launches(launch, budget_s=0.3, min_samples=5)
            compiled = kernel.compiled()
            resident = cuda.current_context().get_active_blocks_per_multiprocessor(
                compiled._codelibrary.get_cufunc(), t.threads, 0)
            count, w, last = waves(m, n, t, resident)
            rows.append({"tiles": t._asdict(), "threads": t.threads, "ms": timing.median_ms,
                         "gflops": flops((m, n, k)) / timing.median_ms / 1e6, "agrees": ok,
                         "registers": compiled.regs_per_thread, "local_bytes": compiled.local_mem_per_thread,
                         "output_tiles": count, "blocks_per_sm": resident, "waves": w, "last_wave_full": last})
        timed = sorted((r for r in rows if "ms" in r and r["agrees"]), key=lambda r: r["ms"])
        table["classes"][name] = {"shape": [m, n, k], "best": timed[0] if timed else None,
                                  "rows": timed + [r for r in rows if r not in timed]}
    p = path()
    old = _table()[0]
    if "classes" in old and set(shapes) != set(SHAPE_CLASSES):  # tuning some classes keeps the others
        table["classes"] = {**old["classes"], **table["classes"]}
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(table, indent=1) + "\n")
    _table.cache_clear()
    return table
