"""The first look at hgemm on a GPU, in one command: ``python -m zoo.kernels.hgemm.gpu_check``.

1. every step against the float64 reference at the family's GPU_TEST_SIZES
   (4095 x 4097 x 1000 and 4096^3 included);
2. the SASS the device's own compile produced: HMMA, LDSM and LDGSTS counts
   of each step's kernel;
3. timings at ``--size`` (default 4096): TFLOP/s of each step, of cuBLAS
   GemmEx (float16 in, float32 out: the family's baseline), of cupy.matmul on
   float16 (float16 out, the ~620 TFLOP/s figure) and of the zoo's best SGEMM
   step (v09 or v10, float32 CUDA cores) at the same size, with the ratios the
   issue asks for.

``--quick`` skips the two largest correctness sizes. It prints a table and
exits 1 when a step is wrong. For the record the README uses, run ``python -m
zoo run hgemm --save`` afterwards; for memory errors, ``compute-sanitizer --tool
memcheck python -m zoo check hgemm --test-sizes`` (and ``--tool racecheck``).
"""
import argparse
import sys


def _sass_counts(variant):
    counts = {}
    for k in variant.kernels:
        if k.__name__ != "hgemm_kernel" or k.compiled() is None:
            continue
        sass = k.dispatcher.inspect_sass()
        if isinstance(sass, dict):  # keyed by signature
            sass = "\n".join(sass.values())
        for op in ("HMMA.16816.F32", "LDSM", "LDGSTS", "LDL", "STL"):
            counts[op] = sass.count(op)
        counts["registers"] = k.compiled().regs_per_thread
    return counts


def main(argv=None):
    import zoo
    from zoo import harness

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--quick", action="store_true", help="leave out the two largest correctness sizes")
    args = p.parse_args(argv)
    if zoo.SIMULATOR:
        print("no GPU: this script times kernels; in the simulator run `python -m zoo check hgemm`")
        return 2
    from zoo.device import properties

    print(f"device: {properties().get('name', '?')}")
    fam = zoo.family("hgemm")
    sizes = fam.GPU_TEST_SIZES[:-2] if args.quick else fam.GPU_TEST_SIZES
    failed = False
    print("\n== correctness (relative norm error vs float64 NumPy) ==")
    for v in fam:
        for size in sizes:
            r = harness.check(v, size, seed=1)
            failed |= not r.ok
            print(f"{v.name:32s} {'x'.join(map(str, size)):>16s}  {'ok  ' if r.ok else 'FAIL'} {r.detail}")

    print("\n== SASS of each step's kernel (compiled on this device) ==")
    for v in fam:
        print(f"{v.name:32s} {_sass_counts(v)}")

    size = args.size
    print(f"\n== timings at {size}^3 (median of CUDA events) ==")
    base = harness.measure_baseline(fam, size)
    ceiling = harness.measure_baseline(fam, size, name="cupy.matmul fp16 out", baseline_ms=base.ms)
    sgemm = zoo.family("sgemm")
    best_sgemm = max((harness.measure_variant(sgemm[n], size) for n in ("v09", "v10")), key=lambda m: m.gflops)
    rows = [("cuBLAS GemmEx (fp16 in, fp32 out)", base), ("cupy.matmul fp16 out", ceiling),
            (f"zoo sgemm {best_sgemm.name} (fp32)", best_sgemm)]
    for v in fam:
        rows.append((v.name, harness.measure_variant(v, size, baseline_ms=base.ms)))
    print(f"{'':36s} {'ms':>9s} {'TFLOP/s':>9s} {'% GemmEx':>9s} {'% fp16out':>9s} {'x sgemm':>8s} correct")
    for name, m in rows:
        print(f"{name:36s} {m.ms:9.4f} {m.gflops / 1e3:9.1f} {100 * m.gflops / base.gflops:8.1f}% "
              f"{100 * m.gflops / ceiling.gflops:8.1f}% {m.gflops / best_sgemm.gflops:8.2f} {m.correct}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
