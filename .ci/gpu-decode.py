"""The decode_attention family on a GPU, for .ci/gpu-decode.sh.

    python3 .ci/gpu-decode.py small          every step at two small cases, checked (what the sanitizers run)
    python3 .ci/gpu-decode.py splits         v05 at the bench sizes with 2, 3, 4 and 6 blocks an SM, beside the copy
    python3 .ci/gpu-decode.py graph          v06 captured once in a CUDA graph at 32 x 8 x 32768 x 128, replayed at
                                             five lengths written into its device length: checked, and timed beside
                                             v05 (host int, planned for the length) and the copy of the filled bytes
    python3 .ci/gpu-decode.py table FILE     the results file's decode_attention rows: us, GB/s, % of the copy

Timings are device times (zoo.bench.harness.time_launches) on CuPy arrays, as `zoo run` takes them.
"""

import sys

import numpy as np

import zoo
from zoo.bench import harness

DECODE = zoo.family("decode_attention")


def small():
    """8 q heads over 2 kv heads, 2 new positions, 1000 of 1100 cached, d 80 (v04 and v05: 8 rows a kv head, a group's
    lanes 10 of 16 busy); then one query of 4 q heads over 4 kv heads, 77 positions, d 128. Prints ok or WRONG."""
    rng = np.random.default_rng(1)
    cases = (((8, 2, 80), (2, 1100, 80), 1000), ((4, 1, 128), (4, 77, 128), None))
    failed = 0
    for q_shape, kv_shape, length in cases:
        Q, K, V = (rng.standard_normal(s, dtype=np.float32).astype(np.float16) for s in (q_shape, kv_shape, kv_shape))
        ref = DECODE.reference(Q, K, V, length=length)
        for step in DECODE:
            ok, err, _ = harness.compare(step(Q, K, V, length=length), ref, DECODE.TOLERANCE)
            failed += not ok
            print(f"{step.name:24} Q {q_shape} cache {kv_shape} length {length}: {'ok' if ok else 'WRONG'} ({err:.1e})")
    failed += device_length(rng)
    return failed


def device_length(rng):
    """v06 with its length in a one-element int32 CuPy array, two calls on the same buffers and out: 4 q heads over
    2 kv heads, capacity 1100 at d 128 (many splits), lengths 77 (most splits leave at once) then 1100."""
    import cupy

    Q, K, V = (
        rng.standard_normal(s, dtype=np.float32).astype(np.float16)
        for s in ((4, 1, 128), (2, 1100, 128), (2, 1100, 128))
    )
    arrays = [cupy.asarray(a) for a in (Q, K, V)]
    out, length = cupy.empty(Q.shape, np.float16), cupy.zeros(1, np.int32)
    failed = 0
    for filled in (77, 1100):
        length[...] = filled
        DECODE["v06"](*arrays, length=length, out=out)
        ok, err, _ = harness.compare(cupy.asnumpy(out), DECODE.reference(Q, K, V, length=filled), DECODE.TOLERANCE)
        failed += not ok
        print(f"v06 device length {filled:5} of cache (2, 1100, 128): {'ok' if ok else 'WRONG'} ({err:.1e})")
    return failed


def _ms(call):
    """Median device time of call() in ms."""
    return harness.time_launches(lambda i: call(), budget_s=0.5).median_ms


def splits():
    """v05's blocks an SM (SPLIT_BLOCKS_PER_SM, 3 in the spec) at each bench size, in us and % of the copy."""
    import functools

    import cupy

    module = DECODE["v05"].module
    print(f"{'size':18} {'copy us':>8} " + " ".join(f"{f'{k}/SM us':>9} {'% copy':>7}" for k in (2, 3, 4, 6)))
    for size in DECODE.BENCH_SIZES:
        host = DECODE.make_inputs(size, 0)
        ref = DECODE.reference(*host)
        Q, K, V = (cupy.asarray(a) for a in host)
        out = cupy.empty_like(Q)
        copy_ms = _ms(functools.partial(DECODE.module.copy_ceiling, Q, K, V, out))
        row = f"{'x'.join(map(str, size)):18} {1e3 * copy_ms:8.1f} "
        saved = module.SPLIT_BLOCKS_PER_SM
        for per_sm in (2, 3, 4, 6):
            module.SPLIT_BLOCKS_PER_SM = per_sm  # most_blocks() reads the module's name at each launch
            try:
                module.launch(Q, K, V, out)
                ok, _, _ = harness.compare(cupy.asnumpy(out), ref, DECODE.TOLERANCE)
                ms = _ms(functools.partial(module.launch, Q, K, V, out))
                row += f"{1e3 * ms:9.1f} {100 * copy_ms / ms:6.1f}%" + ("" if ok else " WRONG") + " "
            finally:
                module.SPLIT_BLOCKS_PER_SM = saved
        print(row)


def graph():
    """v06 in a CUDA graph captured once at capacity 32768 (Llama-3-8B's heads), replayed at lengths 1, 1000, 4099,
    8192 and 32768 set in its device length, each checked against float64; timed (the replay) beside v06 eager on the
    same device length, v05 launched with the host int (its splits planned for the length) and a copy of as many bytes
    as K's filled positions hold (what the call reads, half of it, read and written). Prints a table; returns the
    number of wrong rows."""
    import functools

    import cupy

    from zoo.bench import libraries

    v05, v06 = DECODE["v05"].module, DECODE["v06"]
    size = (32, 8, 32768, 128)
    host = DECODE.make_inputs(size, 0)
    Q, K, V = (cupy.asarray(a) for a in host)
    out, length = cupy.empty_like(Q), cupy.full(1, size[2], np.int32)
    replay = zoo.graph(lambda: v06(Q, K, V, length=length, out=out))  # one eager call, then the capture
    print("v06 in one CUDA graph at capacity 32768 (32 x 8 x n x 128), replayed at each length; us a call")
    print(f"{'length':>7} {'graph':>8} {'v06 eager':>9} {'v05 int':>8} {'copy':>8} {'graph % copy':>12} correct")
    failed = 0
    for filled in (1, 1000, 4099, 8192, 32768):
        length[...] = filled
        replay()
        cupy.cuda.Device().synchronize()
        ok, err, _ = harness.compare(cupy.asnumpy(out), DECODE.reference(*host, length=filled), DECODE.TOLERANCE)
        failed += not ok
        graph_ms = _ms(replay)
        eager_ms = _ms(functools.partial(DECODE["v06"].module.launch, Q, K, V, out, length))
        v05_ms = _ms(functools.partial(v05.launch, Q, K, V, out, filled))
        copy_ms = _ms(functools.partial(libraries.copy_leading_bytes, (K,), K.nbytes * filled // size[2]))
        print(
            f"{filled:7} {1e3 * graph_ms:8.1f} {1e3 * eager_ms:9.1f} {1e3 * v05_ms:8.1f} {1e3 * copy_ms:8.1f} "
            f"{100 * copy_ms / graph_ms:11.1f}% {'ok' if ok else 'WRONG'} ({err:.1e})"
        )
    return failed


def table(path):
    """Each step's and row's time at the bench sizes from a results file, with GB/s and % of the copy."""
    import json

    data = json.load(open(path))
    rows = data.get("families", {}).get("decode_attention", {})
    print(f"{data.get('device', {}).get('name', '?')}: decode_attention, GB/s of the cache read")
    print(f"{'size':18} {'row':24} {'us':>9} {'GB/s':>7} {'% copy':>7} {'% sdpa':>7} {'host us':>8} correct")
    for size in DECODE.BENCH_SIZES:
        key = "x".join(map(str, size))
        found = rows.get(key, {})
        copy, sdpa = found.get("copy_ceiling", {}).get("ms"), found.get("torch sdpa", {}).get("ms")
        for name in [v.name for v in DECODE] + ["baseline", "torch sdpa", "copy_ceiling"]:
            r = found.get(name)
            if not r or not r.get("ms"):
                print(f"{key:18} {name:24} {'-':>9}")
                continue
            ms = r["ms"]
            copy_share = f"{100 * copy / ms:6.1f}%" if copy else "      -"
            sdpa_share = f"{100 * sdpa / ms:6.1f}%" if sdpa else "      -"
            gbps = DECODE.bytes_moved(size) / (ms * 1e-3) / 1e9
            host = r.get("host_us") or float("nan")  # a launch call's host time: above the device time, host-bound
            print(
                f"{key:18} {name:24} {1e3 * ms:9.1f} {gbps:7.0f} {copy_share} {sdpa_share} {host:8.1f} "
                f"{r.get('correct')}"
            )


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "small"
    if what == "small":
        sys.exit(1 if small() else 0)
    elif what == "splits":
        splits()
    elif what == "graph":
        sys.exit(1 if graph() else 0)
    elif what == "table":
        table(sys.argv[2])
    else:
        sys.exit(f"unknown part {what}: small, splits, graph, table FILE")
