"""Which torch._scaled_mm calls cuBLASLt takes on this GPU (issue 64: the FP8 rows failed with
CUBLAS_STATUS_NOT_SUPPORTED). Run as `python3 .ci/probe-scaled-mm.py [cupy-first]`: each call of a
variant, on random e4m3 bytes at 512 x 256 x 1024 and 4096^3, prints ok with its error against float64, or the error."""

import sys

if "cupy-first" in sys.argv:  # cuBLAS as CuPy loads it, in the process before torch's
    import cupy

    cupy.matmul(cupy.ones((64, 64), cupy.float32), cupy.ones((64, 64), cupy.float32))
import torch

print("torch", torch.__version__, "cuda", torch.version.cuda, "cublasLt", torch.backends.cuda.preferred_blas_library())


def run(name, m, n, k, fn):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.randn(m, k, device="cuda", generator=g) * 4).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device="cuda", generator=g) * 4).to(torch.float8_e4m3fn)
    ref = a.double() @ w.double().t() * 0.5 * 0.25
    try:
        got = fn(a, w)
        torch.cuda.synchronize()
        err = (got.double() - ref).norm() / ref.norm()
        print(f"{name:45s} {m}x{n}x{k}: ok {got.dtype} rel. error {err:.2e}")
    except Exception as e:  # noqa: BLE001 - the probe reports every failure
        print(f"{name:45s} {m}x{n}x{k}: FAILED {str(e).splitlines()[0][:160]}")


one = lambda v: torch.tensor(v, device="cuda", dtype=torch.float32)  # noqa: E731
scales = torch.tensor([0.5, 0.25], device="cuda")
variants = {
    "f32 out_dtype, scalar scales": lambda a, w: torch._scaled_mm(
        a, w.t(), one(0.5), one(0.25), out_dtype=torch.float32
    ),
    "f32 fast_accum": lambda a, w: torch._scaled_mm(
        a, w.t(), one(0.5), one(0.25), out_dtype=torch.float32, use_fast_accum=True
    ),
    "f32, scales as views s[0], s[1]": lambda a, w: torch._scaled_mm(
        a, w.t(), scales[0], scales[1], out_dtype=torch.float32
    ),
    "f32, out= given": lambda a, w: torch._scaled_mm(
        a,
        w.t(),
        one(0.5),
        one(0.25),
        out_dtype=torch.float32,
        out=torch.empty(a.shape[0], w.shape[0], device="cuda", dtype=torch.float32),
    ),
    "bf16 out_dtype": lambda a, w: torch._scaled_mm(a, w.t(), one(0.5), one(0.25), out_dtype=torch.bfloat16),
    "bf16 fast_accum": lambda a, w: torch._scaled_mm(
        a, w.t(), one(0.5), one(0.25), out_dtype=torch.bfloat16, use_fast_accum=True
    ),
    "f16 out_dtype": lambda a, w: torch._scaled_mm(a, w.t(), one(0.5), one(0.25), out_dtype=torch.float16),
}
for size in ((512, 256, 1024), (4096, 4096, 4096)):
    for name, fn in variants.items():
        run(name, *size, fn)
