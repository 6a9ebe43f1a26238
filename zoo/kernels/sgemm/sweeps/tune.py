"""The tile-shape sweep behind v10: ``python -m zoo tune sgemm``.

One tile shape does not suit every problem. A 128 x 128 block tile is the
fastest at 4096^3 on an H200, but 1024^3 makes only 64 such tiles for 132 SMs,
so half the GPU idles for the whole call; smaller tiles make more blocks, each
with less reuse. The sweep therefore tunes each *shape class* (``tiles.SHAPE_CLASSES``:
small, skinny, large) on a shape that stands for it.

``candidates()`` lists the tile shapes v09's kernel accepts within the
hardware's limits; ``sweep()`` compiles each once, times it at each class's
shape (kernel launches with the flat views made once, so the host's share of a
call is not what is tuned) and writes results/tune/<gpu>-sgemm.json with every
row and each class's fastest. Each row also records wave quantization: output
tiles, blocks resident per SM for that kernel, the waves of blocks they make and
how full the last wave is. The steps read the table through ``tiles.py``
(``tiles_for``), never through this module, which loads the timing harness.
"""

from zoo.kernels.sgemm import tiles
from zoo.kernels.sgemm.tiles import KERNEL, SHAPE_CLASSES, Tiles, path, waves
from zoo.runtime import tune_table

__all__ = ["SHAPE_CLASSES", "cache_path", "candidates", "path", "sweep", "valid"]  # what `zoo tune` uses
cache_path = tiles.cache_path

MAX_ACCUMULATORS = 128  # results per thread: beyond this the 255-register limit forces spills
MAX_STATIC_SHARED = 48 * 1024  # bytes of static shared memory a block may declare


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
    found = []
    for bm, bn in ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128)):
        for bk in (8, 16, 32):
            for wm, wn in ((32, 32), (32, 64), (64, 32), (64, 64)):
                for wn_iter in (1, 2, 4) if bm * bn == 64 * 64 else (2, 4):
                    t = Tiles(bm, bn, bk, wm, wn, wn_iter, 8, 4)  # 8 x 4 per sub-tile: two float4 of A, one of B
                    per_thread = t.BM * t.BN // t.threads  # 64 x 64 tiles: 32 results a thread, 128 threads
                    if (
                        valid(t)
                        and t.threads in (128, 256)
                        and per_thread in ((32,) if bm * bn == 64 * 64 else (64, 128))
                    ):
                        found.append(t)
    return found


def sweep(shapes=None, progress=None, save=False):
    """Time every candidate at each class's shape (or at ``shapes``, a dict class: (m, n, k)); write the table
    to the user's cache (and, with ``save``, to the repository's results/tune) and return it, each class's rows
    fastest first."""
    import numpy as np
    from numba import cuda, float32, uint32

    from zoo.bench import harness
    from zoo.device import properties
    from zoo.kernels.sgemm import flops
    from zoo.kernels.sgemm.v09_double_buffered import build_kernel

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
                kernels[t] = build_kernel(t)
            kernel = kernels[t]
            grid = (n // t.BN, m // t.BM)

            def launch(i, kernel=kernel, grid=grid, t=t, flat=flat, m=m, n=n, k=k):  # bound now, not at call time
                kernel[grid, t.threads](*flat, uint32(m), uint32(n), uint32(k), float32(1.0), float32(0.0))

            try:
                launch(0)
                result = out.copy_to_host()
            except Exception as e:  # a shape this compiler or device refuses: record why, go on
                rows.append({"kernel": KERNEL, "tiles": t._asdict(), "error": f"{type(e).__name__}: {e}"[:200]})
                continue
            if reference is None:
                reference = result
            ok = bool(np.allclose(result, reference, rtol=1e-4, atol=1e-3))
            timing = harness.time_launches(launch, budget_s=0.3, min_samples=5)
            compiled = kernel.compiled()
            resident = kernel.resident_blocks(t.threads, 0)  # the driver's occupancy query for this kernel
            count, w, last = waves(m, n, t, resident)
            rows.append(
                {
                    "kernel": KERNEL,
                    "tiles": t._asdict(),
                    "threads": t.threads,
                    "ms": timing.median_ms,
                    "gflops": flops((m, n, k)) / timing.median_ms / 1e6,
                    "agrees": ok,
                    "registers": compiled.regs_per_thread,
                    "local_bytes": compiled.local_mem_per_thread,
                    "output_tiles": count,
                    "blocks_per_sm": resident,
                    "waves": w,
                    "last_wave_full": last,
                }
            )
        table["classes"][name] = tune_table.class_entry((m, n, k), rows)
    partial = set(shapes) != set(SHAPE_CLASSES)  # tuning some classes keeps the others
    tune_table.write(table, tiles.table()[0], partial, tiles.cache_path(), *([path()] if save else []))
    tiles.table.cache_clear()  # the next lookup reads the new table
    tiles.tuned_gflops.cache_clear()
    return table
