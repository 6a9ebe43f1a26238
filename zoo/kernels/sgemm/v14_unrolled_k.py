"""Unrolled k loop: v11's kernel with a hot loop of straight-line code and fragments loaded one k ahead.

Changes:
    Only the hot loop, the BK k slices that multiply one pair of shared tiles,
    differs from v11 (``multiply_for`` below; staging, edges and the store are
    v11's). (1) The loop over ``kk`` is unrolled with ``zoo.jit.unrolled``: BK
    inlined copies of one k slice, each with ``kk`` a constant. (2) The
    fragments, the A and B values a thread reads from shared memory for one
    k, are double-buffered in registers: slice ``kk`` first loads slice
    ``kk + 1``'s fragments into the other half of ``a_frag`` and ``b_frag``,
    then does its 128 FMAs on the half loaded one slice earlier.

Why it is faster:
    numba has no ``#pragma unroll``, and LLVM leaves a loop whose body is 128
    FMAs rolled (its size is over the unroller's threshold). v11's hot loop is
    therefore a loop: each k slice pays a 64-bit loop counter, a test and a
    branch, and recomputes its shared-memory addresses (15 integer
    instructions for 128 FMAs), and it cannot start the next slice's shared
    loads before its own FMAs, so every slice begins by waiting about 30
    cycles for its loads. Unrolled, every address is the tile base plus a
    constant that folds into the LDS instruction, the fragment halves are
    chosen at compile time (a variable index would put them in local memory),
    and the loads of slice kk + 1 are in flight under slice kk's FMAs, the
    register double buffering of CUTLASS's SIMT kernels. Offline for sm_90
    at 128 x 128 x 16 tiles (``python -m zoo show sgemm v14 --sass --summary
    --size 256x256x64``): one 2,363-instruction loop per block tile for
    2,048 FMAs, 1.15 instructions per FMA with the staging included
    (v11: about 1.2 in the slice loop alone), 242 registers (v11: 208),
    still two blocks per SM, no spills.

Measured:
    (filled in by ``python -m zoo report`` from the saved results)
"""
from numba import cuda, float32, uint32

from zoo.jit import jit, unrolled
from zoo.kernels.sgemm import v11_edges_in_kernel as v11
from zoo.kernels.sgemm.v11_edges_in_kernel import TILES, validate  # noqa: F401
from zoo.vector import load_float4


def multiply_for(tiles):
    """``multiply_tile(a_tiles, b_tiles, a_base, b_base, acc)`` for ``tiles``, k loop unrolled."""
    BM, BN, BK, WM, WN, WN_ITER, TM, TN = tiles
    WM_ITER, WSUB_M, WSUB_N, A_STRIDE, REG_M, REG_N = v11.warp_layout(tiles)
    A_FRAGMENTS = 2 * REG_M  # two halves: one being multiplied, one being loaded
    B_FRAGMENTS = 2 * REG_N

    @jit(device=True, forceinline=True)
    def load_fragments(kk, half, a_tiles, b_tiles, a_base, b_base, a_frag, b_frag):
        """Slice ``kk``'s A and B values (128-bit shared loads) into fragment half ``half``."""
        for wm in range(WM_ITER):
            for h in range(TM // 4):
                r = half * uint32(REG_M) + uint32(wm * TM + 4 * h)
                a_frag[r], a_frag[r + 1], a_frag[r + 2], a_frag[r + 3] = load_float4(
                    a_tiles, a_base + kk * uint32(A_STRIDE) + uint32(wm * WSUB_M + 4 * h))
        for wn in range(WN_ITER):
            r = half * uint32(REG_N) + uint32(wn * TN)
            b_frag[r], b_frag[r + 1], b_frag[r + 2], b_frag[r + 3] = load_float4(
                b_tiles, b_base + kk * uint32(BN) + uint32(wn * WSUB_N))

    @jit(device=True, forceinline=True)
    def k_slice(kk, a_tiles, b_tiles, a_base, b_base, acc, a_frag, b_frag):
        """One k slice; ``kk`` is a constant here, so the test and both halves' indices fold away."""
        if kk + uint32(1) < uint32(BK):  # the next slice's loads go out before this slice's FMAs
            load_fragments(kk + uint32(1), (kk + uint32(1)) % uint32(2), a_tiles, b_tiles, a_base, b_base,
                           a_frag, b_frag)
        a_half = kk % uint32(2) * uint32(REG_M)
        b_half = kk % uint32(2) * uint32(REG_N)
        for m in range(REG_M):
            for n in range(REG_N):
                acc[m * REG_N + n] += a_frag[a_half + uint32(m)] * b_frag[b_half + uint32(n)]

    all_slices = unrolled(BK, k_slice)

    @jit(device=True, forceinline=True)
    def multiply_tile(a_tiles, b_tiles, a_base, b_base, acc):
        a_frag = cuda.local.array(A_FRAGMENTS, float32)  # registers: every index below is a constant
        b_frag = cuda.local.array(B_FRAGMENTS, float32)
        load_fragments(uint32(0), uint32(0), a_tiles, b_tiles, a_base, b_base, a_frag, b_frag)
        all_slices(a_tiles, b_tiles, a_base, b_base, acc, a_frag, b_frag)

    return multiply_tile


sgemm_kernel = v11.kernel_for(TILES, True, True, multiply_for)  # module-level, so the harness reports them
sgemm_kernel_scalar = v11.kernel_for(TILES, False, False, multiply_for)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    v11.launch_with(v11.tiles_for(A.shape[0], B.shape[1], A.shape[1]), A, B, C, out, alpha, beta, multiply_for)
