"""The store at the end of the fast SGEMM kernels (v06 on): four results, scaled, in one 128-bit store.

``store_scaled4`` writes ``alpha * acc + beta * C`` for four adjacent elements
of the output starting at flat index ``at`` (a multiple of 4). C is read only
when beta != 0, so a caller may pass the output itself as C. It is a device
function: NVVM inlines it, so the kernels that call it compile as if the lines
were written in place.
"""

from zoo.device.jit import jit
from zoo.device.memory import load_float4, store_float4


@jit(device=True)
def store_scaled4(C, out, at, alpha, beta, acc0, acc1, acc2, acc3):
    r0, r1, r2, r3 = alpha * acc0, alpha * acc1, alpha * acc2, alpha * acc3
    if beta != 0:
        c0, c1, c2, c3 = load_float4(C, at)
        r0, r1, r2, r3 = r0 + beta * c0, r1 + beta * c1, r2 + beta * c2, r3 + beta * c3
    store_float4(out, at, r0, r1, r2, r3)
