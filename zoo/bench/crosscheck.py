"""The timer checked by another one: a few rows timed by the harness and by NVBench (``cuda-bench``), side by side.

``python -m zoo.bench.crosscheck`` times each row of CASES (a family's best step, or one of its library rows, at its
headline size) three ways in one process, on the same GPU:

- the harness, warm: ``harness.measure_variant`` / ``measure_baseline`` as ``zoo run`` times (batches of
  back-to-back calls behind a hold, inputs rotated past L2 where they fit in it);
- the harness, cold: the same with ``cold_l2`` (``zoo run --cold-l2``: twice the L2 written before every call);
- NVBench through its Python package ``cuda-bench`` (``cuda.bench``): its cold measurement (L2 flushed, a blocking
  kernel, one call a sample) and its batch measurement (back-to-back calls, warm), on the same arrays.

The rows agree when the warm figures are within AGREE of each other. NVBench launches on a stream of its own: the
call runs inside ``on_stream``, which sends zoo's launches (``zoo.runtime.launch``) and CuPy's operations to it. The
output the NVBench run left is checked against the family's reference, as the harness checks its own.

The classes: memory-bound (elementwise and softmax against the copy of their bytes), compute-bound (sgemm and hgemm,
cuBLAS), and block-cooperative without a collective (reduce and scan: many blocks combine partial results on one GPU,
no NCCL; CUB). Needs a GPU and ``cuda-bench`` (``.ci/gpu-wheels-extra`` puts its wheel in ``.whl/``).
"""

import argparse
import contextlib
import json
import math
import sys
import tempfile
import types
from pathlib import Path

BEST = None  # a case's row: the family's best step at its headline size, as this GPU's results file records it
CASES = (
    ("memory-bound", "elementwise", BEST),
    ("memory-bound", "elementwise", "copy_ceiling"),
    ("memory-bound", "softmax", BEST),
    ("compute-bound", "sgemm", BEST),
    ("compute-bound", "hgemm", BEST),
    ("compute-bound", "hgemm", "baseline"),
    ("block-cooperative", "reduce", BEST),
    ("block-cooperative", "reduce", "cub reduce_into"),
    ("block-cooperative", "scan", BEST),
)
AGREE = 0.05  # warm figures of the two timers within this fraction of each other agree
HARNESS_BUDGET_S = 0.25
NVBENCH_TIMEOUT_S = 2.0  # NVBench stops a measurement after this many seconds (its default is 15)


@contextlib.contextmanager
def on_stream(handle):
    """While inside, zoo's launches and CuPy's operations go to the stream ``handle`` (a cudaStream_t as an int)."""
    import cupy

    from zoo.runtime import graphs

    with cupy.cuda.ExternalStream(handle), graphs.capturing(types.SimpleNamespace(ptr=handle)):
        yield


def resolve(cases):
    """[(class, family, row name, is a step, size)] for ``cases``: BEST becomes the family's best step (its last
    real step where the results file records none)."""
    import zoo
    from zoo.bench import run

    found = []
    for what, name, row in cases:
        fam = zoo.family(name)
        if row is BEST:
            best = run.best_steps(fam)
            row = best[0].name if len(best) == 1 else [v for v in fam if not v.demonstration][-1].name
        found.append((what, fam, row, row not in fam.baselines, run.headline_size(fam)))
    return found


def harness_times(fam, row, is_step, size):
    """(warm Measurement, cold Measurement) of one row by the harness."""
    from zoo.bench import harness

    if is_step:
        return tuple(
            harness.measure_variant(fam[row], size, budget_s=HARNESS_BUDGET_S, cold_l2=cold) for cold in (False, True)
        )
    return tuple(
        harness.measure_baseline(fam, size, name=row, budget_s=HARNESS_BUDGET_S, cold_l2=cold) for cold in (False, True)
    )


def call_of(fam, row, is_step, size):
    """(call(), check()): one launch of the row on device arrays of its own (the step's on its prepared inputs,
    the row's on CuPy arrays), and the check of what the last call left, (ok, detail)."""
    import cupy
    from numba import cuda

    from zoo.bench import harness
    from zoo.runtime import arrays

    host = harness.case_inputs(fam, size)
    params = fam.kind_params()
    shape, dtype = fam.output_for(*host, **params)
    reference = harness.case_reference(fam, size)
    if is_step:
        variant = fam[row]
        device = [tuple(None if a is None else cuda.to_device(a) for a in host)]
        (inputs,), out = harness.benchmark_buffers(variant, host, shape, dtype, sets=device)

        def call():
            variant.launch(inputs, out, **params)

        def check():
            ok, _, detail = harness.compare(arrays.host(out), reference, variant.tolerance(size))
            return ok, detail

        return call, check
    inputs = tuple(None if a is None else cupy.asarray(a) for a in host)
    out = cupy.full(shape, arrays.poison_value(dtype), dtype)
    returned = [None]
    library = fam.baselines[row]

    def call():
        returned[0] = library(*inputs, out, **params)

    def check():
        result = out if returned[0] is None else returned[0]
        ok, _, detail = harness.check_row(fam, row, size, host, result, reference, **params)
        return ok is not False, detail

    return call, check


def nvbench_times(calls, json_path):
    """{label: (cold seconds, batch seconds)} of each ``calls`` item (label -> call()) timed by NVBench, one
    benchmark a row, all in one run of ``cuda.bench.run_all_benchmarks`` that writes ``json_path``."""
    import cuda.bench as bench

    for label, call in calls.items():

        def benchmark(state, call=call):
            def launcher(launch):
                with on_stream(launch.get_stream().__cuda_stream__()[1]):  # (version, cudaStream_t)
                    call()

            state.exec(launcher)

        registered = bench.register(benchmark)
        registered.set_name(label)
        registered.set_timeout(NVBENCH_TIMEOUT_S)
    from numba import cuda

    device = str(cuda.get_current_device().id)  # the GPU the arrays live on: NVBench runs on every GPU by default
    bench.run_all_benchmarks([sys.argv[0], "--devices", device, "--json", str(json_path)])
    return parse_nvbench(json.loads(Path(json_path).read_text()))


def parse_nvbench(data):
    """{benchmark name: (cold seconds, batch seconds)} from NVBench's JSON output: each benchmark's first state's
    GPU time summaries, the median where it gives one, else the mean (NaN where a measurement is missing)."""

    def seconds(summaries, which):
        for tag in (f"nv/{which}/time/gpu/median", f"nv/{which}/time/gpu/mean"):
            if tag in summaries:
                return float(summaries[tag])
        return math.nan

    found = {}
    for benchmark in data.get("benchmarks", []):
        states = [s for s in benchmark.get("states", []) if not s.get("is_skipped")]
        if not states:
            continue
        summaries = {
            s["tag"]: next((d["value"] for d in s.get("data", []) if d.get("name") == "value"), None)
            for s in states[0].get("summaries") or []
        }
        summaries = {tag: value for tag, value in summaries.items() if value is not None}
        found[benchmark["name"]] = (seconds(summaries, "cold"), seconds(summaries, "batch"))
    return found


def table(rows):
    """The short text table: each row's four figures in microseconds, and the two timers' differences."""
    head = (
        f"{'class':18} {'family':12} {'row':32} {'harness warm':>12} {'nvbench batch':>13} {'diff':>7} "
        f"{'harness cold':>12} {'nvbench cold':>12} {'diff':>7}  agree (warm, {AGREE:.0%}); microseconds a call"
    )
    lines = [head]
    for r in rows:

        def diff(a, b):
            return f"{100 * (b / a - 1):+.1f}%" if a and b == b else "-"

        us = {k: r[k] * 1e3 if r[k] == r[k] else math.nan for k in ("warm_ms", "batch_ms", "cold_ms", "nv_cold_ms")}
        lines.append(
            f"{r['class']:18} {r['family']:12} {r['row'][:32]:32} {us['warm_ms']:12.1f} {us['batch_ms']:13.1f} "
            f"{diff(r['warm_ms'], r['batch_ms']):>7} {us['cold_ms']:12.1f} {us['nv_cold_ms']:12.1f} "
            f"{diff(r['cold_ms'], r['nv_cold_ms']):>7}  {'yes' if r['agree'] else 'NO'}"
            + ("" if r["correct"] else "  (an output was WRONG)")
        )
    return "\n".join(lines)


def agree(warm_ms, batch_ms):
    """Whether the harness's warm figure and NVBench's batch figure are within AGREE of each other."""
    return bool(warm_ms and batch_ms == batch_ms and abs(batch_ms / warm_ms - 1) <= AGREE)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m zoo.bench.crosscheck", description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", help="only the cases of this family (repeatable)")
    parser.add_argument("--json", help="write the rows here as JSON")
    args = parser.parse_args(argv)
    import zoo

    if zoo.SIMULATOR:
        print("crosscheck needs a GPU: the simulator times nothing")
        return 2
    try:
        import cuda.bench  # noqa: F401
    except ImportError:
        print("cuda-bench is not installed (pip install cuda-bench[cu13]; on the lent GPU .ci/gpu-wheels-extra)")
        return 2
    from zoo.device.jit import quiet_occupancy

    cases = [c for c in CASES if not args.family or c[1] in args.family]
    rows, calls, checks = [], {}, {}
    with quiet_occupancy():
        for what, fam, row, is_step, size in resolve(cases):
            warm, cold = harness_times(fam, row, is_step, size)
            label = f"{fam.name}/{row}"
            calls[label], checks[label] = call_of(fam, row, is_step, size)
            calls[label]()  # compiles, and leaves a first output
            rows.append(
                dict(
                    label=label,
                    family=fam.name,
                    row=row,
                    size=str(size),
                    warm_ms=warm.ms,
                    cold_ms=cold.ms,
                    host_us=warm.host_us,
                    correct=warm.correct is not False and cold.correct is not False,
                    **{"class": what},
                )
            )
        with tempfile.TemporaryDirectory() as folder:
            timed = nvbench_times(calls, Path(folder) / "nvbench.json")
    for r in rows:
        nv_cold, nv_batch = timed.get(r["label"], (math.nan, math.nan))
        r["nv_cold_ms"], r["batch_ms"] = nv_cold * 1e3, nv_batch * 1e3
        ok, detail = checks[r["label"]]()
        r["correct"] = r["correct"] and ok
        r["nvbench_check"] = detail
        r["agree"] = agree(r["warm_ms"], r["batch_ms"])
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["agree"] and r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
