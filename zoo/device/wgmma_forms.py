"""The forms of Hopper's wgmma.mma_async, as plain Python: K of one instruction by kind, the kinds that may be read
MN-major, a swizzled tile's alignment, and the checks of an instruction's N, kind and transposes that both backends'
intrinsics make while typing (``zoo.device.wgmma`` for numba-cuda, ``zoo.device.mlir_wgmma`` for numba-cuda-mlir).

The input types mma_async's ``kind`` names (PTX's), each with K of one instruction: always 32 bytes of a row of A
(16 f16 or bf16, 8 tf32, 32 e4m3), so a k slice is 32 bytes whatever the kind. Only the 16-bit kinds may be read
MN-major (trans 1): tf32 and e4m3 take A and B K-major (PTX ISA, wgmma.mma_async: "The transpose operation is only
supported for the .f16/.bf16 types").
"""

K_OF = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32}
TRANSPOSABLE = ("f16", "bf16")
TILE_ALIGN = 1024  # bytes: a 128B-swizzled tile starts where the XOR pattern (8 rows of 128 bytes) starts


def check_mma_form(n, form, trans_a, trans_b):
    """TypeError unless m64nNk(K) .form with these transposes is an instruction (A and B from shared memory)."""
    if form not in K_OF:
        raise TypeError(f"wgmma.mma_async: kind is one of {', '.join(K_OF)}, not {form!r}")
    if n % 8 or not 8 <= n <= 256:
        raise TypeError(f"wgmma m64nNk{K_OF[form]} takes N = 8, 16, ..., 256, not {n}")
    if form not in TRANSPOSABLE and (trans_a or trans_b):
        raise TypeError(f"wgmma .{form} reads A and B K-major only: trans_a and trans_b must be 0")


def check_register_a_form(n, form):
    """TypeError unless m64nNk16 .form with A in registers is an instruction (pairs of 16-bit elements a word)."""
    if form not in TRANSPOSABLE:
        raise TypeError(
            f"mma_async_a_regs: kind is one of {', '.join(TRANSPOSABLE)} (A as pairs of 16-bit elements), not {form!r}"
        )
    if n % 8 or not 8 <= n <= 256:
        raise TypeError(f"wgmma m64nNk16 takes N = 8, 16, ..., 256, not {n}")
