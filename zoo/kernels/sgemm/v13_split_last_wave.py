"""Split only the last wave: whole waves of tiles run unsplit, the tiles left over split along K.

Changes:
    No new kernel: v12's kernel, launched twice by a new plan
    (``plan.last_wave``). A grid of T output tiles on P block slots runs in
    ceil(T / P) waves, and when T is just past a multiple of P the last wave is
    nearly empty yet takes as long as a full one. The plan cuts the grid at a
    tile row: the rows that fill whole waves run unsplit (S = 1, v11's path),
    the rows below split K into as many slices as still fit one wave. Each
    launch gets the matrices' row slices (``A[:r]``, ``out[:r]``, ``A[r:]``...),
    a row-major matrix each. The plan is taken only when it saves a quarter
    of a wave or more, worth more kernel time than the host time a second
    launch adds; otherwise the call is v12's.

Why it is faster:
    v12 splits all the tiles of a problem, which pays only when the whole grid
    is under one wave: split at 4097^3 it bought the fifth wave back but paid
    atomics and the ``beta * C`` pass on every element (75% of cuBLAS against
    v11's 72%). Splitting the last wave alone keeps the first four waves'
    128-bit stores and confines the atomics and the extra pass to the leftover
    rows: at 4097^3 one tile row, split eight ways, so the fifth wave shrinks
    to an eighth of a wave's time. The price is a second launch and the row
    slices (tens of microseconds of host time) against a wave of about 0.9 ms.
"""

from zoo.kernels.sgemm.plan import last_wave
from zoo.kernels.sgemm.v12_split_k import TILES, launch_split, pick_tiles, validate  # noqa: F401

BASE = "v12"  # launch only: v12's kernel, unsplit on the whole waves and split on the rest


def launch_plan(p, tiles, A, B, C, out, alpha, beta):
    """Run plan ``p``: the first ``p['rows']`` tile rows unsplit, the rows below in ``p['split']`` slices of K."""
    m = A.shape[0]
    cut = min(m, p["rows"] * tiles.BM)  # the first output row of the leftover
    with_c = C is not None and beta != 0
    if cut == m or cut == 0:  # one launch on the whole matrices: no views (numba builds each one on the host, ~30 us)
        launch_split(tiles, 1 if cut else p["split"], A, B, C, out, alpha, beta)
        return
    # whole waves: the top rows, as if they were the whole problem; then the rows below
    launch_split(tiles, 1, A[:cut], B, C[:cut] if with_c else None, out[:cut], alpha, beta)
    launch_split(tiles, p["split"], A[cut:], B, C[cut:] if with_c else None, out[cut:], alpha, beta)


def launch(A, B, C, out, alpha=1.0, beta=0.0):
    m, k = A.shape
    n = B.shape[1]
    tiles = pick_tiles(m, n, k)
    launch_plan(last_wave(m, n, k, tiles), tiles, A, B, C, out, alpha, beta)
