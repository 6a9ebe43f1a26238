"""v04's fused chain with sins two to four as a bare polynomial: fusion shows their argument lies in [-1, 1].

1 launch, 8n bytes moved, as v04.

Changes:
    From v04: the chain's four sins become ``ops.sin4_bounded``: the first is
    still libdevice's ``sinf``, the other three ``ops.sin_unit``, the odd
    Taylor polynomial of sin to v^11 in 7 float32 instructions (one multiply,
    five FMAs, one multiply-add), with no range reduction. The kernel is v04's
    loop (``v04.build``) over the new chain; the rest of the chain is the same.

Why it is faster:
    v04 is compute-bound: each accurate ``sinf`` reduces its argument to
    [-pi/4, pi/4] (a three-part Cody-Waite step and a branch to a slow path for
    huge arguments), picks a sin or cos polynomial by quadrant and fixes the
    sign, tens of instructions an element, four times over. In one kernel the
    chain is visible as a whole: the argument of sins two to four is a sine,
    so it lies in [-1, 1], where the polynomial alone is already accurate to
    within one float32 ulp (5.2e-8 at worst against float64, measured on
    200,001 points). A compiler pass that tracks value ranges could find this;
    kernels launched one op at a time cannot, since each must accept any
    input. Three of the four range reductions go, and the chain's arithmetic
    fits behind the memory traffic far better. The sin x4 lesson alone
    (``python -m zoo fusion-sweep``, row ``fused_bounded``) measures the same.

Measured:
    NVIDIA H200, size 268435456: 5,868 GFLOP/s (778 us a call), 2612.6% of CuPy op by
    op: cupy.sin x4, *, +, GELU as 9 ufuncs, cupy.clip (16 launches), 28 registers,
    occupancy bound 100%. Other sizes, % of CuPy op by op: cupy.sin x4, *, +, GELU as 9
    ufuncs, cupy.clip (16 launches): 16777216: 2508.1%. From results/nvidia-h200.json.
"""
from zoo.device.jit import jit
from zoo.kernels.fusion import ops
from zoo.kernels.fusion import v03_fused_chain as scalar
from zoo.kernels.fusion import v04_fused_float4 as wide
from zoo.kernels.fusion.v04_fused_float4 import validate  # noqa: F401  (the same uint32 limit)


@jit(device=True)
def chain_bounded(v):
    s = ops.sin4_bounded(v)  # sinf once, then three sin_unit: each argument is a sine, in [-1, 1]
    return ops.clamp(ops.gelu(ops.bias(ops.scale(s))))


fused4_kernel = wide.build(chain_bounded)
fused_kernel = scalar.build(chain_bounded)  # for x or out not on a 16-byte boundary


def launch(x, out):
    wide.launch_with(fused4_kernel, fused_kernel, x, out)
