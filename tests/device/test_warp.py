"""Warp intrinsics: numba's cuda.* warp functions (added to the simulator by
zoo.simulator) and zoo.device.warp's width variants, against results written out on the
host. Where CUDA leaves a result undefined (a shuffle reading a lane that did not
take part) the simulator's documented choice, the caller's own value, is checked
only in the simulator."""

import numpy as np
import pytest
from numba import cuda, types

import zoo  # first: chooses the simulator and installs the warp intrinsics
from zoo.device import warp

FULL = 0xFFFFFFFF
LOW = 0x0000FFFF
HIGH = 0xFFFF0000
SH = 64  # shared array size for the syncwarp kernel (<= block size)

sim_only = pytest.mark.skipif(not zoo.SIMULATOR, reason="simulator behaviour")


def lanes_of(n):
    """Thread index, lane and first thread of the lane's warp, for a block of n."""
    i = np.arange(n)
    lane = i % 32
    return i, lane, i - lane


def random_values(rng, n, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(n).astype(dtype)
    big = 2**62 if np.dtype(dtype).itemsize == 8 else 2**31 - 1
    return rng.integers(-big, big, n).astype(dtype)


def check(out, expected, defined):
    """Exact match where CUDA defines the result; everywhere in the simulator."""
    np.testing.assert_array_equal(out[defined], expected[defined])
    if zoo.SIMULATOR:
        np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------- 32-wide shuffles


@cuda.jit
def k_shuffles(x, src, up, down, xmask, out):
    i = cuda.threadIdx.x
    v = x[i]
    out[0, i] = cuda.shfl_sync(FULL, v, src[i])
    out[1, i] = cuda.shfl_up_sync(FULL, v, up)
    out[2, i] = cuda.shfl_down_sync(FULL, v, down)
    out[3, i] = cuda.shfl_xor_sync(FULL, v, xmask)


def expect_shuffles(x, src, up, down, xmask):
    """PTX shfl.sync with a 32-lane segment: source lane j, kept own value when j
    is out of range; undefined when j is in range but that lane does not exist."""
    n = len(x)
    i, lane, base = lanes_of(n)
    sources = [
        (src % 32, np.ones(n, bool)),
        (lane - up % 32, lane - up % 32 >= 0),
        (lane + down % 32, lane + down % 32 <= 31),
        (lane ^ xmask % 32, np.ones(n, bool)),
    ]
    expected = np.empty((4, n), x.dtype)
    defined = np.empty((4, n), bool)
    for k, (j, in_range) in enumerate(sources):
        exists = in_range & (base + j < n)
        expected[k] = np.where(exists, x[np.where(exists, base + j, i)], x)
        defined[k] = ~in_range | exists
    return expected, defined


@pytest.mark.parametrize(
    "n, dtype, up, down, xmask",
    [
        (64, np.int32, 3, 5, 6),  # two full warps: lanes must not mix
        (64, np.int64, 1, 33, 31),  # 33 counts as 1 (PTX uses b[4:0])
        (64, np.float32, 16, 16, 16),
        (64, np.float64, 0, 31, 1),
        (20, np.float32, 2, 4, 8),  # one partial warp of 20 lanes
        (40, np.int64, 7, 3, 5),  # warp 1 has 8 lanes
    ],
)
def test_shuffles(n, dtype, up, down, xmask):
    rng = np.random.default_rng(n + up + down)
    x = random_values(rng, n, dtype)
    src = rng.integers(0, 64, n).astype(np.int32)  # >= 32 wraps to src % 32
    out = np.zeros((4, n), dtype)
    k_shuffles[1, n](x, src, up, down, xmask, out)
    check(out, *expect_shuffles(x, src, up, down, xmask))


def test_shuffle_literal():
    """A few results spelled out, for a block of 32 holding x = lane."""
    x = np.arange(32, dtype=np.int32)
    src = np.full(32, 7, np.int32)
    out = np.zeros((4, 32), np.int32)
    k_shuffles[1, 32](x, src, 1, 30, 16, out)
    assert out[0].tolist() == [7] * 32
    assert out[1].tolist() == [0] + list(range(31))
    assert out[2].tolist() == [30, 31] + list(range(2, 32))
    assert out[3].tolist() == list(range(16, 32)) + list(range(16))


# ---------------------------------------------------------------- reduction


@cuda.jit
def k_warp_sum(x, out):
    i = cuda.threadIdx.x
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if i % 32 == 0:
        out[i // 32] = v


def test_warp_sum():
    x = np.random.default_rng(7).integers(-(10**15), 10**15, 64)
    out = np.zeros(2, np.int64)
    k_warp_sum[1, 64](x, out)
    assert out.tolist() == [int(x[:32].sum()), int(x[32:].sum())]


# ---------------------------------------------------------------- exited lanes


@cuda.jit
def k_early_exit(x, ballots, downs, alls):
    i = cuda.threadIdx.x
    lane = i % 32
    if lane >= 24 or lane % 5 == 0:
        return  # lanes 24.. start last: the others already wait for them
    v = x[i]
    ballots[i] = cuda.ballot_sync(FULL, v > 0)
    downs[i] = cuda.shfl_down_sync(FULL, v, 1)
    cuda.syncwarp()
    alls[i] = cuda.all_sync(FULL, 1)


def test_early_exit():
    n = 40  # warp 1 has lanes 0..7, of which 0 and 5 exit
    x = random_values(np.random.default_rng(3), n, np.int64)
    ballots = np.full(n, 7, np.uint32)
    downs = np.full(n, -1, np.int64)
    alls = np.full(n, -1, np.int32)
    k_early_exit[1, n](x, ballots, downs, alls)

    i, lane, base = lanes_of(n)
    stays = ~((lane >= 24) | (lane % 5 == 0))
    exp_ballot = np.full(n, 7, np.uint32)
    for w in range(2):
        bits = sum(1 << int(l) for l in lane[stays & (x > 0) & (base == 32 * w)])
        exp_ballot[stays & (base == 32 * w)] = bits
    np.testing.assert_array_equal(ballots, exp_ballot)
    np.testing.assert_array_equal(alls, np.where(stays, 1, -1))

    exp_down = np.where(stays, x, -1)  # own value: undefined on the GPU
    src_ok = stays & (i + 1 < n) & (lane < 31)
    src_ok[src_ok] &= stays[i[src_ok] + 1]
    exp_down[src_ok] = x[i[src_ok] + 1]
    check(downs, exp_down, ~stays | src_ok)


# ---------------------------------------------------------------- masks naming part of a warp


@cuda.jit
def k_halves(x, a, b, c):
    i = cuda.threadIdx.x
    lane = i % 32
    v = x[i]
    if lane < 16:
        s = v
        for k in range(3):  # three collectives in a row on one mask
            s += cuda.shfl_xor_sync(LOW, s, 1 << k)
        a[i] = s
        b[i] = cuda.ballot_sync(LOW, v % 2 == 0)
        c[i] = cuda.shfl_sync(LOW, v, 15 - lane)
    else:
        b[i] = cuda.ballot_sync(HIGH, v % 3 == 0)
        a[i] = cuda.shfl_down_sync(HIGH, v, 2)
        c[i] = cuda.shfl_up_sync(HIGH, v, 4)


def test_half_masks():
    n = 64
    x = np.random.default_rng(11).integers(0, 1000, n).astype(np.int32)
    a, c = np.zeros(n, np.int32), np.zeros(n, np.int32)
    b = np.zeros(n, np.uint32)
    k_halves[1, n](x, a, b, c)

    i, lane, base = lanes_of(n)
    low = lane < 16
    exp_a = np.where(low, x.reshape(-1, 8).sum(1).repeat(8), 0)
    exp_a[~low] = np.where(lane[~low] <= 29, x[np.minimum(i[~low] + 2, n - 1)], x[~low])
    exp_b = np.zeros(n, np.uint32)
    for k in range(n):
        same_half = (base == base[k]) & (low == low[k])
        pred = (x % 2 == 0) if low[k] else (x % 3 == 0)
        exp_b[k] = sum(1 << int(l) for l in lane[same_half & pred])
    exp_c = np.where(low, x[base + 15 - lane], x[np.maximum(i - 4, 0)])
    exp_c[~low & (lane < 20)] = x[~low & (lane < 20)]  # lanes 12..15 not in HIGH
    np.testing.assert_array_equal(a, exp_a)
    np.testing.assert_array_equal(b, exp_b)
    check(c, exp_c, low | (lane >= 20))


# ---------------------------------------------------------------- zoo.device.warp width variants


@cuda.jit
def k_width(x, src, width, delta, xmask, out):
    i = cuda.threadIdx.x
    v = x[i]
    out[0, i] = warp.shfl_sync(FULL, v, src[i], width)
    out[1, i] = warp.shfl_up_sync(FULL, v, delta, width)
    out[2, i] = warp.shfl_down_sync(FULL, v, delta, width)
    out[3, i] = warp.shfl_xor_sync(FULL, v, xmask, width)


@pytest.mark.parametrize(
    "width, dtype, delta, xmask",
    [(8, np.int32, 3, 9), (16, np.float32, 5, 19), (8, np.float64, 1, 4), (16, np.int64, 12, 24)],
)
def test_width(width, dtype, delta, xmask):
    n = 64
    rng = np.random.default_rng(width + delta)
    x = random_values(rng, n, dtype)
    src = rng.integers(0, 40, n).astype(np.int32)
    out = np.zeros((4, n), dtype)
    k_width[1, n](x, src, width, delta, xmask, out)

    i, lane, base = lanes_of(n)
    seg = lane // width  # segment of the lane inside its warp
    pos = lane % width  # position inside the segment
    exp_idx = x[base + seg * width + src % width]
    exp_up = np.where(pos >= delta, x[np.maximum(i - delta, 0)], x)
    exp_down = np.where(pos + delta < width, x[np.minimum(i + delta, n - 1)], x)
    j = lane ^ xmask
    exp_xor = np.where(j // width <= seg, x[base + j % 32], x)
    np.testing.assert_array_equal(out, np.stack([exp_idx, exp_up, exp_down, exp_xor]))


def test_width_literal():
    """width 8 over x = lane, spelled out."""
    x = np.arange(32, dtype=np.int32)
    src = np.full(32, 10, np.int32)  # 10 % 8 = 2
    out = np.zeros((4, 32), np.int32)
    k_width[1, 32](x, src, 8, 2, 8, out)
    seg_starts = [0] * 8 + [8] * 8 + [16] * 8 + [24] * 8
    assert out[0].tolist() == [s + 2 for s in seg_starts]
    assert out[1].tolist() == sum(([s, s + 1] + list(range(s, s + 6)) for s in range(0, 32, 8)), [])
    assert out[2].tolist() == sum((list(range(s + 2, s + 8)) + [s + 6, s + 7] for s in range(0, 32, 8)), [])
    # xor 8 swaps segments 0<->1 and 2<->3; only the later segment of each pair may read
    assert out[3].tolist() == list(range(8)) + list(range(8)) + list(range(16, 24)) * 2


# ---------------------------------------------------------------- votes, match, lane masks


@cuda.jit
def k_votes(p, v, fv, masks, flags):
    i = cuda.threadIdx.x
    masks[0, i] = cuda.ballot_sync(FULL, p[i])
    masks[1, i] = cuda.match_any_sync(FULL, v[i])
    masks[2, i] = cuda.match_any_sync(FULL, fv[i])
    m, ok = cuda.match_all_sync(FULL, v[i])
    masks[3, i] = m
    flags[0, i] = ok
    m, ok = cuda.match_all_sync(FULL, i // 32)
    masks[4, i] = m
    flags[1, i] = ok
    masks[5, i] = cuda.lanemask_lt()
    masks[6, i] = cuda.activemask()
    flags[2, i] = cuda.all_sync(FULL, p[i])
    flags[3, i] = cuda.any_sync(FULL, p[i])
    flags[4, i] = cuda.eq_sync(FULL, p[i])
    flags[5, i] = cuda.all_sync(FULL, i < 1000)
    flags[6, i] = cuda.any_sync(FULL, i > 1000)
    flags[7, i] = cuda.eq_sync(FULL, i > 1000)


def test_votes_and_match():
    n = 40  # warp 0 full, warp 1 has 8 lanes
    rng = np.random.default_rng(5)
    p = rng.integers(0, 2, n).astype(np.int32)
    p[32:] = 1  # all true in the partial warp: missing lanes must not vote
    v = rng.integers(0, 4, n).astype(np.int32)
    fv = rng.choice(np.array([0.0, -0.0, 1.5, np.nan], np.float32), n)
    masks = np.zeros((7, n), np.uint32)
    flags = np.full((8, n), -1, np.int32)
    k_votes[1, n](p, v, fv, masks, flags)

    i, lane, base = lanes_of(n)
    live = np.where(base == 0, 0xFFFFFFFF, 0xFF).astype(np.uint32)

    def warp_bits(select):
        """Per thread: mask of the lanes of its warp where select is true."""
        return np.array([sum(1 << int(l) for l in lane[(base == base[k]) & select[k]]) for k in range(n)], np.uint32)

    fbits = fv.view(np.uint32)  # match compares bits: 0.0 != -0.0, NaN matches NaN
    np.testing.assert_array_equal(masks[0], warp_bits(np.tile(p != 0, (n, 1))))
    np.testing.assert_array_equal(masks[1], warp_bits(v[None, :] == v[:, None]))
    np.testing.assert_array_equal(masks[2], warp_bits(fbits[None, :] == fbits[:, None]))
    uniform = np.array([len(set(v[base == b].tolist())) == 1 for b in base])
    np.testing.assert_array_equal(masks[3], np.where(uniform, live, 0))
    np.testing.assert_array_equal(flags[0], uniform.astype(int))
    np.testing.assert_array_equal(masks[4], live)  # i // 32 is uniform per warp
    np.testing.assert_array_equal(flags[1], np.ones(n))
    np.testing.assert_array_equal(masks[5], ((1 << lane) - 1).astype(np.uint32))
    np.testing.assert_array_equal(masks[6], live)
    w0 = p[:32] != 0
    exp_all = np.r_[[int(w0.all())] * 32, [1] * 8]
    exp_any = np.r_[[int(w0.any())] * 32, [1] * 8]
    exp_eq = np.r_[[int(w0.all() or not w0.any())] * 32, [1] * 8]
    assert 0 < w0.sum() < 32  # the seed gives a mixed warp 0
    np.testing.assert_array_equal(flags[2:5], np.stack([exp_all, exp_any, exp_eq]))
    np.testing.assert_array_equal(flags[5:8], np.stack([np.ones(n), np.zeros(n), np.ones(n)]))


# ---------------------------------------------------------------- syncwarp


@cuda.jit
def k_syncwarp(x, out):
    sh = cuda.shared.array(SH, types.int64)
    i = cuda.threadIdx.x
    lane = i % 32
    base = i - lane
    sh[i] = x[i]
    cuda.syncwarp()  # lane 0 reads what lane 31, started last, wrote
    out[0, i] = sh[base + 31 - lane]
    cuda.syncwarp()  # everyone has read before the next writes
    sh[i] = 2 * x[i]
    if lane < 16:
        cuda.syncwarp(LOW)
        out[1, i] = sh[base + 15 - lane]
    else:
        cuda.syncwarp(HIGH)
        out[1, i] = sh[base + 47 - lane]


def test_syncwarp():
    n = 64
    x = np.random.default_rng(13).integers(1, 10**12, n)
    out = np.zeros((2, n), np.int64)
    k_syncwarp[1, n](x, out)
    i, lane, base = lanes_of(n)
    np.testing.assert_array_equal(out[0], x[base + 31 - lane])
    np.testing.assert_array_equal(out[1], 2 * x[np.where(lane < 16, base + 15 - lane, base + 47 - lane)])


# ---------------------------------------------------------------- simulator errors, no hangs


@cuda.jit
def k_not_in_mask(out):
    i = cuda.threadIdx.x
    out[i] = cuda.shfl_sync(0x1, i, 0)  # lane 1 does not name itself


@cuda.jit
def k_mask_mismatch(out):
    i = cuda.threadIdx.x
    if i == 0:
        cuda.syncwarp(0x3)  # waits for lane 1 ...
    else:
        cuda.syncwarp(FULL)  # ... which waits for lane 0 elsewhere
    out[i] = 1


@cuda.jit
def k_kind_mismatch(out):
    i = cuda.threadIdx.x
    if i == 0:
        out[i] = cuda.ballot_sync(FULL, 1)
    else:
        out[i] = cuda.shfl_sync(FULL, i, 0)


@cuda.jit
def k_lane_raises(out):
    i = cuda.threadIdx.x
    if i == 3:
        raise ValueError("boom")
    out[i] = cuda.shfl_sync(FULL, i, 3)


@cuda.jit
def k_waits_on_syncthreads(out):
    i = cuda.threadIdx.x
    if i == 0:
        cuda.syncthreads()  # lane 0 never reaches the shuffle its warp waits in
    else:
        out[i] = cuda.shfl_sync(FULL, i, 0)
        cuda.syncthreads()


@sim_only
@pytest.mark.parametrize(
    "kernel, error, match",
    [
        (k_not_in_mask, RuntimeError, "does not name the calling lane"),
        (k_mask_mismatch, RuntimeError, "warp deadlock"),
        (k_kind_mismatch, RuntimeError, "meets"),
        (k_lane_raises, ValueError, "boom"),
        (k_waits_on_syncthreads, RuntimeError, "waited"),
    ],
)
def test_errors_do_not_hang(kernel, error, match, monkeypatch):
    monkeypatch.setattr(zoo.simulator.warps, "DEADLOCK_S", 0.5)
    with pytest.raises(error, match=match):
        kernel[1, 8](np.zeros(8, np.int64))


@sim_only
def test_install_is_idempotent():
    from numba.cuda.simulator import kernel, kernelapi

    before = (kernel.BlockManager.run, kernel.BlockThread.run, kernelapi.FakeCUDAModule.shfl_sync)
    zoo.simulator.install()
    assert (kernel.BlockManager.run, kernel.BlockThread.run, kernelapi.FakeCUDAModule.shfl_sync) == before


@sim_only
def test_shared_array_is_one_array_even_when_threads_race_to_create_it(monkeypatch):
    """numba's simulator creates a shared array on a line's first use with check-then-set and no lock;
    zoo makes it one step. Creation is slowed here so that the second thread arrives mid-creation."""
    import threading
    import time

    from numba.cuda.simulator import kernelapi

    from zoo.simulator import threads as simulator_threads

    class SlowNumpy:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def empty(*args, **kwargs):
            time.sleep(0.05)
            return np.empty(*args, **kwargs)

    monkeypatch.setattr(simulator_threads, "np", SlowNumpy())
    shared = kernelapi.FakeCUDAShared(0)
    got = []

    def kernel_line():
        got.append(shared.array(4, np.float32))  # one line: one shared array for every caller

    threads = [threading.Thread(target=kernel_line) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is got[1]
