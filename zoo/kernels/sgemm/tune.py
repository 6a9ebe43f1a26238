"""The tile-shape sweep behind v10: ``python -m zoo tune sgemm``.

``candidates()`` lists every tile shape v09's kernel accepts within the
hardware's limits; ``sweep()`` compiles and times each on the current GPU and
writes results/tune/<gpu>-sgemm.json; ``best_tiles()`` reads the winner back.
"""
import json

from zoo import results
from zoo.device import slug

MAX_ACCUMULATORS = 128  # results per thread: beyond this the 255-register limit forces spills
MAX_STATIC_SHARED = 48 * 1024  # bytes of static shared memory a block may declare


def path():
    return results.RESULTS_DIR / "tune" / f"{slug()}-sgemm.json"


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
    """Shapes near the ones that work for SGEMM: 128 or 256 threads, 64 or 128 results per thread,
    8 x 4 results per sub-tile; about a dozen, so the sweep takes a minute or two."""
    from zoo.kernels.sgemm.v09_double_buffered import Tiles

    found = []
    for bm, bn in ((128, 64), (128, 128), (128, 256), (256, 128)):
        for bk in (8, 16, 32):
            for wm, wn in ((32, 64), (64, 32), (64, 64)):
                for wn_iter in (2, 4):
                    t = Tiles(bm, bn, bk, wm, wn, wn_iter, 8, 4)  # 8 x 4 per sub-tile: two float4 of A, one of B
                    results_per_thread = t.BM * t.BN // t.threads
                    if valid(t) and t.threads in (128, 256) and results_per_thread in (64, 128):
                        found.append(t)
    return found


def best_tiles():
    """The fastest tiles recorded for this device, or None."""
    from zoo.kernels.sgemm.v09_double_buffered import Tiles

    p = path()
    if not p.exists():
        return None
    data = json.loads(p.read_text())
    return Tiles(**data["best"]["tiles"])


def sweep(size=4096, progress=None):
    """Time every candidate at size^3; save and return the table, fastest first."""
    import numpy as np
    from numba import cuda

    from zoo import harness
    from zoo.device import properties
    from zoo.kernels.sgemm import flops, make_inputs
    from zoo.kernels.sgemm.v09_double_buffered import build, launch_with

    A, B = (cuda.to_device(x) for x in make_inputs(size, seed=0))
    out = cuda.device_array((size, size), np.float32)
    reference = None
    rows = []
    for t in candidates():
        if progress:
            progress(t)
        kernel = build(t)
        try:
            launch_with(kernel, t, A, B, None, out, 1.0, 0.0)
            result = out.copy_to_host()
        except Exception as e:  # a shape this compiler or device refuses: record why, go on
            rows.append({"tiles": t._asdict(), "error": f"{type(e).__name__}: {e}"[:200]})
            continue
        if reference is None:
            reference = result
        ok = bool(np.allclose(result, reference, rtol=1e-4, atol=1e-3))
        timing = harness.time_launches(lambda i: launch_with(kernel, t, A, B, None, out, 1.0, 0.0),
                                       budget_s=0.3, min_samples=5)
        compiled = kernel.compiled()
        rows.append({"tiles": t._asdict(), "threads": t.threads, "ms": timing.median_ms,
                     "gflops": flops(size) / timing.median_ms / 1e6, "agrees": ok,
                     "registers": compiled.regs_per_thread, "local_bytes": compiled.local_mem_per_thread})
    timed = sorted((r for r in rows if "ms" in r and r["agrees"]), key=lambda r: r["ms"])
    table = {"device": properties()["name"], "size": size, "best": timed[0] if timed else None,
             "rows": timed + [r for r in rows if r not in timed]}
    p = path()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(table, indent=1) + "\n")
    return table
