#!/usr/bin/env bash
# gemv tuning probe (a GPU, under 3 minutes): v06's kernel (split in, the one every later step runs for fp32,
# fp16, int8 and rows not of whole blocks) with every number of warps per group of rows
# (slices 1, 2, 4, 8) at the benchmark shapes, per weight format, against launch's own choice, timed as CUDA
# graphs of 32 calls (the decode loop's way: short kernels are not host-bound there). Prints one table; logs under
# $OUT. Use it to check WARPS_PER_SM and MIN_TRIPS in v06_split_k.py (launch's choice should be the fastest or
# within a few %).
#   usage: .ci/gpu-gemv-split.sh [SIZES]   (default 8192x8192,4096x14336,14336x4096)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
export ZOO_TARGET=gpu PYTHONUNBUFFERED=1
python3 - "${1:-8192x8192,4096x14336,14336x4096}" <<'PY' 2>&1 | tee "$OUT/gemv-probe.txt"
import sys

import cupy
import numpy as np

import zoo
from zoo.bench import harness, results
from zoo.device import properties
from zoo.runtime import graphs
from zoo.kernels.gemv import layout

fam = zoo.family("gemv")
step = fam["v06"].module  # the split it probes: WARPS_PER_SM, MIN_TRIPS and slices_for are v06's
name = step.__name__.rsplit(".", 1)[1]
print(f"{properties()['name']}, {name}: us a call (CUDA graph of 32 calls), GB/s of the kind's bytes")
print(f"{'size':>11} {'kind':>9} {'slices':>6} {'us':>8} {'GB/s':>7} {'Gw/s':>7} {'correct':>7}  launch's choice")


def graph_us(call, sets):
    def calls():
        for i in range(32):
            call(sets[i % len(sets)])

    calls()
    graph = graphs.capture(calls)
    return harness.time_launches(lambda i: graphs.replay(graph), budget_s=0.25).median_ms * 1e3 / 32


for text in sys.argv[1].split(","):
    size = results.parse_size(text)
    for kind in fam.kinds:
        host = fam.inputs(size, 0, kind)
        sets = [tuple(cupy.asarray(a) for a in s) for s in harness.input_sets(host)]
        out = cupy.empty(size[0], cupy.float32)
        ref = fam.reference(*host)
        fmt, n, group = layout(*host)
        chosen = step.slices_for(size[0], n // step.CHUNK[fmt])  # launch's rule: the rows, and a row's 16-byte chunks
        for slices in (1, 2, 4, 8):
            kernel = step.build(fmt, group, slices)
            rows_per_block = step.ROWS_PER_WARP * (step.WARPS_PER_BLOCK // slices)
            blocks = (size[0] + rows_per_block - 1) // rows_per_block

            def call(inputs, kernel=kernel, blocks=blocks, out=out):
                kernel[blocks, step.THREADS_PER_BLOCK](*inputs, out)  # (W, x, out) or (W, x, scales, out)

            out[...] = np.nan
            call(sets[0])
            ok = harness.compare(cupy.asnumpy(out), ref, fam.tolerance(size))[0]
            us = graph_us(call, sets)
            nbytes, weights = fam.bytes_moved(size, kind), size[0] * size[1]
            mark = "<-" if slices == chosen else ""
            rates = f"{us:8.1f} {nbytes / us / 1e3:7.0f} {weights / us / 1e3:7.0f}"
            print(f"{text:>11} {kind:>9} {slices:>6} {rates} {ok!s:>7}  {mark}")
        fam.module._HELD.clear()
PY
