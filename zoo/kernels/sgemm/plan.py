"""How many slices of K a call's blocks take: v12's split of every tile, v13's split of the last wave.

Both plans are host arithmetic on M, N, K, the tiles and the SM count; the kernels
that carry them out are in the steps. ``split_k`` is v12's plan, ``last_wave``
v13's (and v14's, on its unrolled kernels). Each returns a dict that the tests and
``zoo show`` can read, so the numbers in the steps' docstrings are checked.
"""

from math import ceil

from zoo.device import sm_count
from zoo.kernels.sgemm.tiles import output_tiles, tuned_gflops

# v10's tile shape on sm_90: 128 threads at 208 to 222 registers (allocated as 224: 28,672 of an SM's
# 65,536) and 33 KB of shared memory: registers allow 2 blocks per SM. Smaller tiles (more blocks per SM)
# shift the break-even: with the small class's 64 x 128 tiles, 1024^3 makes 128 tiles and the plan takes
# S = 2, which on the H200 took 212 us against v11's 116 us.
BLOCKS_PER_SM = 2
MIN_SLICE_STEPS = 4  # BK steps per slice at least: the prologue, the barrier and the atomics amortise
MAX_SPLIT = 32  # atomics per output element at most


def slices(k, bk, split):
    """(k_slice, S): K cut into at most ``split`` slices of whole BK steps (so every slice starts 16-byte
    aligned); rounding the slice up may leave the last ones empty, and those are dropped. The kernels
    compute the same slice from S (``gridDim.z``): ceil(steps / S) steps each."""
    steps = -(-k // bk)
    k_slice = -(-steps // split) * bk
    return k_slice, -(-k // k_slice)


def split_k(m, n, k, tiles, sms=None):
    """v12's plan: a dict with the tile count, the block slots of one wave, the split S, the K slice each
    block takes, the blocks launched and the waves they make.

        tiles = ceil(M / BM) * ceil(N / BN)
        slots = SMs * BLOCKS_PER_SM   (blocks resident at once: one wave)
        S     = min(slots // tiles, ceil(K / BK) // MIN_SLICE_STEPS, MAX_SPLIT), or 1 below 2

    On an H200 (132 SMs, 264 slots) with 128 x 128 x 16 tiles: 1024^3 has 64 tiles, 24% of one wave, and
    S = 4 makes 256 blocks, 97%; 512 x 512 x 4096: 16 tiles, S = 16; 128 x 128 x 65536: one tile, S = 32
    (the cap); 2048^2 (256 tiles) and larger are not split.
    """
    sms = sm_count() if sms is None else sms
    tile_count = output_tiles(m, n, tiles.BM, tiles.BN)
    slots = sms * BLOCKS_PER_SM
    steps = -(-k // tiles.BK)
    split = max(1, min(slots // tile_count, steps // MIN_SLICE_STEPS, MAX_SPLIT))
    k_slice, split = slices(k, tiles.BK, split)
    blocks = tile_count * split
    return {
        "tiles": tile_count,
        "slots": slots,
        "split": split,
        "k_slice": k_slice,
        "blocks": blocks,
        "waves": blocks / slots,
    }


WORTH = 0.25  # waves the split plan must save over the unsplit grid before it is taken
# The kernel time the wave model must promise before a split is taken. It was the host time a split added
# under numba's launch (336 to 536 us on the H200's host); with the lean launch the split adds only 14 to 16
# us of host time (v14 on the H100), but the model overestimates what splitting saves where the tiles are
# small: on the H100 at 1024^3 (64 x 128 tiles) S = 2 ran 82 us against 62 unsplit, though the model
# promised 47 us saved, and at 256 x 4096 x 4096 251 against 236 (189 promised). At 4097^3 it promises
# 662 us and the split pays (v14 94% of cuBLAS, 81.5% unsplit, on the H200).
SPLIT_HOST_US = 500
# A grid of at most one block an SM is the exception: each SM then runs one block of four warps, too few to
# hide its own latencies, and slices of K give it two to run together. There the split pays on the SM, not
# on the wave count, and the model above cannot see it; it is taken when each slice keeps SUBWAVE_MIN_STEPS
# BK steps, which leaves the extra pass, the prologue and the atomics small. No table, H200, v14, device
# time: 256 x 4096 x 4096 (128 tiles of 64 x 128, 256 steps) 236.7 us unsplit, 212.6 with S = 2; 1024^3 (128
# tiles, 64 steps) 61.4 unsplit, no faster split (61.1 us with S = 2 on the H100).
SUBWAVE_MIN_STEPS = 128


def last_wave(m, n, k, tiles, sms=None, gflops=None):
    """v13's plan: whole waves of tile rows unsplit, the rows below split along K as ``split_k`` would.

    Returns a dict: ``rows`` tile rows unsplit (all of them when the plan is not worth it), ``split`` S for
    the rows below (1 when there are none), the waves each way (``waves`` for this plan, ``v11_waves``
    unsplit) and ``saved_us``, the kernel time the split saves at ``gflops`` (by default the tune table's
    rate for these tiles; where there is none, as in the simulator, or with ``gflops=0``, the plan goes by
    waves alone), and ``sub_wave``: whether the split was taken as a grid of at most one block an SM with
    long slices (SUBWAVE_MIN_STEPS), which the waves and ``saved_us`` would have refused.
    """
    sms = sm_count() if sms is None else sms
    gflops = tuned_gflops(tiles) if gflops is None else gflops
    slots = sms * BLOCKS_PER_SM
    across, down = -(-n // tiles.BN), -(-m // tiles.BM)
    tiles_total = across * down
    # T tiles in P slots run in ceil(T / P) waves; when T is just past a multiple of P the last wave is nearly
    # empty yet takes as long as a full one: 4097^3 has 33 x 33 = 1089 tiles of 128 x 128 for 264 slots, four
    # full waves and a fifth holding 33 tiles (12% of its slots)
    plain = ceil(tiles_total / slots)
    rows = (tiles_total // slots) * slots // across  # tile rows that fit in whole waves (0 under one wave)
    leftover, split = 0, 1
    if rows < down:  # the rows below, split as v12 splits a whole problem of their size
        below = split_k(m - rows * tiles.BM, n, k, tiles, sms)
        leftover, split = below["tiles"], below["split"]
    # at 4097^3 the leftover is one tile row split 8 ways: the fifth wave shrinks to an eighth (4.125 waves)
    waves = ceil(rows * across / slots) + ceil(leftover * split / slots) / split
    wave_us = slots * tiles.BM * tiles.BN * 2 * k / (gflops * 1e3) if gflops else None  # one full wave's kernel
    saved_us = (plain - waves) * wave_us if wave_us else None
    p = {
        "rows": rows,
        "split": split,
        "leftover_tiles": leftover,
        "slots": slots,
        "waves": waves,
        "v11_waves": plain,
        "saved_us": saved_us,
        "sub_wave": False,
    }
    # a grid of at most one block an SM: as many slices (up to S) as keep SUBWAVE_MIN_STEPS BK steps each
    sub_split = min(split, -(-k // tiles.BK) // SUBWAVE_MIN_STEPS) if rows == 0 and tiles_total <= sms else 1
    # not worth it: whole-wave shapes such as 4096^3 and 8192^3, and short calls such as 1025 x 4097 x 256
    if split < 2 or waves > plain - WORTH or (saved_us is not None and saved_us < SPLIT_HOST_US):
        if sub_split >= 2:  # the exception: 256 x 4096 x 4096 in 2 slices of 128 steps
            sub_split = slices(k, tiles.BK, sub_split)[1]
            p.update(split=sub_split, waves=ceil(leftover * sub_split / slots) / sub_split, sub_wave=True)
        else:
            p.update(rows=down, split=1, leftover_tiles=0, waves=plain)
    return p
