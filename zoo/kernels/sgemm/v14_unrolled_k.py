"""Unrolled k loop: v11's kernel with its hot loop as straight-line code.

Changes:
    Only the hot loop, the BK k slices that multiply one pair of shared tiles,
    differs from v11 (``multiply_for`` below; staging, edges and the store are
    v11's). The loop over ``kk`` is unrolled with ``zoo.device.jit.unrolled``: BK
    inlined copies of one k slice, each with ``kk`` a constant.

Why it is faster:
    numba has no ``#pragma unroll``, and LLVM leaves a loop whose body is 128
    FMAs rolled (the body is over the unroller's size threshold). v11's hot
    loop is therefore a loop: each k slice pays a 64-bit loop counter, a test
    and a branch, and recomputes its shared-memory addresses (15 integer
    instructions for 128 FMAs); and the compiler does not move one trip's
    loads into the trip before, so every slice starts by waiting about 30
    cycles for its own shared loads. Unrolled, every address is the tile's
    base register plus a constant folded into the LDS instruction, and the
    compiler schedules the whole tile at once: each slice's loads go out
    among the previous slice's FMAs. That is the register double buffering
    of the fragments that CUDA C SGEMMs write by hand (CUTLASS's SIMT
    kernels): written out here (slice kk loading slice kk + 1's values into
    a second register set), it compiled to the same SASS instruction for
    instruction, 242 registers either way, and ran at the same speed on the
    H200 (2,881 against 2,882 us at 4096^3, 93.2% of cuBLAS, where v11 took
    3,252 us). Offline for sm_90 at 128 x 128 x 16 tiles (``python -m zoo
    show sgemm v14 --sass --summary --size 256x256x64``): one loop per
    block tile, 2,363 SASS instructions for 2,048 FMAs with the staging
    included (1.15 per FMA; v11: 151 for 128 in the slice loop alone, plus
    the staging), 242 registers (v11: 208), still two blocks per SM, no
    spills. What still separates it from cuBLAS (about 7% at 4096^3) is
    mostly outside the FMAs: per block tile, 134 integer and 38 move
    instructions (staging addresses, the buffer switch, the K-edge test)
    and 36 loads and stores that carry the next tiles through 32 registers
    on their way to shared memory.

Measured:
    NVIDIA H200, size 4096: 47,607 GFLOP/s (2,887 us a call), 92.8% of cuBLAS, 242
    registers, occupancy bound 12%. Other sizes, % of cuBLAS: 1024: 98.7%, 2048: 91.0%,
    4095: 90.0%, 4097: 81.5%, 8192: 95.2%, 3000x5000x2000: 98.2%. From
    results/nvidia-h200.json.
"""
from numba import cuda, float32, uint32

from zoo.device.jit import jit, unrolled
from zoo.kernels.sgemm import v11_edges_in_kernel as v11
from zoo.kernels.sgemm.v11_edges_in_kernel import TILES, validate  # noqa: F401
from zoo.device.memory import load_float4


def multiply_for(tiles):
    """``multiply_tile(a_tiles, b_tiles, a_base, b_base, acc)`` for ``tiles``: v11's k loop, unrolled."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N = v11.warp_layout(tiles)

    @jit(device=True, forceinline=True)
    def k_slice(kk, a_tiles, b_tiles, a_base, b_base, acc, a_reg, b_reg):
        """One k slice: the thread's A and B values (128-bit shared loads), then REG_M x REG_N FMAs.
        ``kk`` is a constant here, so each address is a base register plus a constant offset."""
        for wm in range(WM_ITER):
            for h in range(TM // 4):
                r = wm * TM + 4 * h
                a_reg[r], a_reg[r + 1], a_reg[r + 2], a_reg[r + 3] = load_float4(
                    a_tiles, a_base + kk * uint32(A_STRIDE) + uint32(wm * WSUB_M + 4 * h))
        for wn in range(WN_ITER):
            r = wn * TN
            b_reg[r], b_reg[r + 1], b_reg[r + 2], b_reg[r + 3] = load_float4(
                b_tiles, b_base + kk * uint32(BN) + uint32(wn * WSUB_N))
        for m in range(REG_M):
            for n in range(REG_N):
                acc[m * REG_N + n] += a_reg[m] * b_reg[n]

    all_slices = unrolled(BK, k_slice)  # k_slice(0, ...), ..., k_slice(BK - 1, ...) in straight-line code

    @jit(device=True, forceinline=True)
    def multiply_tile(a_tiles, b_tiles, a_base, b_base, acc):
        a_reg = cuda.local.array(REG_M, float32)
        b_reg = cuda.local.array(REG_N, float32)
        all_slices(a_tiles, b_tiles, a_base, b_base, acc, a_reg, b_reg)

    return multiply_tile


sgemm_kernel = v11.kernel_for(TILES, True, True, multiply_for)  # module-level, so the harness reports them
sgemm_kernel_scalar = v11.kernel_for(TILES, False, False, multiply_for)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    v11.launch_with(v11.tiles_for(A.shape[0], B.shape[1], A.shape[1]), A, B, C, out, alpha, beta, multiply_for)
