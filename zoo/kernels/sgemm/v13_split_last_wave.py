"""Split only the last wave: whole waves of tiles run as v11 runs them, the tiles left over split along K.

Changes:
    No new kernel: a new plan over v11's and v12's kernels. A grid of T output
    tiles on an SM array with P block slots (SMs x 2 for these tiles, v12's
    count) runs in ceil(T / P) waves, and when T is just past a multiple of P
    the last wave is nearly empty yet takes as long as a full one: 4097^3 has
    33 x 33 = 1089 tiles of 128 x 128 for 264 slots, four full waves and a
    fifth holding 33 tiles (12% of its slots). ``plan`` cuts the grid at a
    tile row. The first ``rows`` tile rows (at most the tiles of the whole
    waves, ``rows * tiles_across <= (T // P) * P``) go to v11's kernel, which
    stores its results as it always does. The rows below, the leftover, go to
    v12's split kernel with K cut into S slices, S = the most that still fit
    one wave (``P // leftover tiles``, capped by v12's MIN_SLICE_STEPS and
    MAX_SPLIT). Each launch gets the matrices' row slices (``A[:r]``,
    ``out[:r]``, ``A[r:]``...), so neither kernel changes: a row-major slice of
    whole rows is itself a row-major matrix. The plan is taken only when its
    waves, ``ceil(rows * across / P) + ceil(leftover * S / P) / S``, beat
    ``ceil(T / P)`` by a quarter of a wave or more, and only when the kernel
    time those waves are worth (a wave's FLOPs at the rate ``zoo tune``
    recorded for these tiles) exceeds the host time the split adds to a call
    (``SPLIT_HOST_US``: a second launch, the ``beta * C`` pass and the row
    slices, 340 to 540 us measured on the H200's host). Otherwise the call is
    v11: whole-wave shapes such as 4096^3 and 8192^3, and short calls such as
    1025 x 4097 x 256, where splitting saves 40 us of kernel for 536 us of host
    time. A grid under one wave has no whole waves (``rows = 0``), and the plan
    becomes v12's split of every tile when the time allows.

Why it is faster:
    v12 splits all the tiles of a problem, which pays only when the whole grid
    is under one wave: split at 4097^3 it bought the fifth wave back but paid
    atomics and the ``beta * C`` pass on every element (75% of cuBLAS against
    v11's 72%, while the same split cost 4095^3 four points). Splitting the
    last wave alone keeps the first four waves' 128-bit stores and confines
    the atomics and the extra pass to the leftover rows: at 4097^3 the
    leftover is one tile row (1 row of the output, 4097 elements), split eight
    ways, so the fifth wave shrinks to an eighth of a wave's time. The price
    is a second launch and the row slices (numba builds each view on the host,
    tens of microseconds), against a saved wave of about 0.9 ms at 4097^3.

Measured:
    NVIDIA H200, size 4096: 42,241 GFLOP/s (3,254 us a call), 82.3% of cuBLAS, 208
    registers, occupancy bound 12%. Other sizes, % of cuBLAS: 1024: 68.4%, 2048: 83.2%,
    4095: 80.4%, 4097: 84.9%, 8192: 82.9%, 3000x5000x2000: 86.3%. From
    results/nvidia-h200.json.
"""
from math import ceil

from zoo.device import sm_count
from zoo.kernels.sgemm import tune, v11_edges_in_kernel as v11, v12_split_k as v12
from zoo.kernels.sgemm.v11_edges_in_kernel import TILES, validate  # noqa: F401

WORTH = 0.25  # waves the split plan must save over v11's grid before it is taken
# Host time the split adds to a call (a second kernel launch, the beta * C pass, four row slices): on the
# H200's host, 336 to 536 us over v11's call. The GPU time the plan saves must exceed it, or a short call
# gets slower: at 1025 x 4097 x 256 the split saves 40 us of kernel and cost 536 us of host.
SPLIT_HOST_US = 500


def plan(m, n, k, tiles=TILES, sms=None, gflops=None):
    """How a call runs: v11's whole-wave rows and v12's split leftover (see the docstring).

    Returns a dict: ``rows`` tile rows for v11 (all of them when the plan is not worth it), ``split`` S for
    the rows below (1 when there are none), the waves each way (``waves`` for this plan, ``v11_waves``) and
    ``saved_us``, the kernel time the split saves at ``gflops`` (by default the tune table's rate for
    these tiles; where there is none, as in the simulator, or with ``gflops=0``, the plan goes by waves alone).
    """
    sms = sm_count() if sms is None else sms
    gflops = tune.tuned_gflops(tiles) if gflops is None else gflops
    slots = sms * v12.BLOCKS_PER_SM
    across, down = -(-n // tiles.BN), -(-m // tiles.BM)
    tiles_total = across * down
    plain = ceil(tiles_total / slots)
    rows = (tiles_total // slots) * slots // across  # tile rows that fit in whole waves
    leftover, split = 0, 1
    if rows < down:  # the rows below, split as v12 splits a whole problem of their size
        below = v12.plan(m - rows * tiles.BM, n, k, tiles, sms)
        leftover, split = below["tiles"], below["split"]
    waves = ceil(rows * across / slots) + ceil(leftover * split / slots) / split
    wave_us = slots * tiles.BM * tiles.BN * 2 * k / (gflops * 1e3) if gflops else None  # one full wave's kernel
    saved_us = (plain - waves) * wave_us if wave_us else None
    p = {"rows": rows, "split": split, "leftover_tiles": leftover, "slots": slots, "waves": waves,
         "v11_waves": plain, "saved_us": saved_us}
    if split < 2 or waves > plain - WORTH or (saved_us is not None and saved_us < SPLIT_HOST_US):
        p.update(rows=down, split=1, leftover_tiles=0, waves=plain)
    return p


def launch_plan(p, tiles, A, B, C, out, alpha, beta, multiply_for=v11.multiply_for):
    """Run plan ``p``: v11 on the first ``p['rows']`` tile rows, v12's split kernel on the rest, both with
    ``multiply_for``'s hot loop (v11's; v15 passes v14's)."""
    m = A.shape[0]
    cut = min(m, p["rows"] * tiles.BM)  # the first output row of the leftover
    with_c = C is not None and beta != 0
    if cut == m:
        v11.launch_with(tiles, A, B, C, out, alpha, beta, multiply_for)
        return
    if cut > 0:  # whole waves: v11's kernel on the top rows, as if they were the whole problem
        v11.launch_with(tiles, A[:cut], B, C[:cut] if with_c else None, out[:cut], alpha, beta, multiply_for)
    v12.launch_split(tiles, p["split"], A[cut:], B, C[cut:] if with_c else None, out[cut:], alpha, beta,
                     multiply_for)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    tiles = v11.tiles_for(m, n, k)
    launch_plan(plan(m, n, k, tiles), tiles, A, B, C, out, alpha, beta)
