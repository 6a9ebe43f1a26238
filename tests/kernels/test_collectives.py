"""The collectives family: the ring's schedule arithmetic for 1 to 8 ranks on irregular sizes, every step
against a NumPy sum of the ranks' rows for 1 to 4 ranks (simulated ranks on one device here, real ones on a
GPU machine), the steps' stream and event ordering checked for races (the simulator runs streams in order, a
GPU does not), repeated calls, the error path, released buffers and streams, and the sweeps' arithmetic."""

import argparse
import gc
import weakref

import numpy as np
import pytest

import zoo
from zoo.bench import harness
from zoo.kernels.collectives import ring, world

FAM = zoo.family("collectives")
STEPS = list(FAM)
RING_STEPS = [v for v in STEPS if v.number >= 3]
SIZES = (1, 31, 4099, 1_000_003)


# -- the schedule, pure arithmetic ------------------------------------------------------------------------------
@pytest.mark.parametrize("ranks", range(1, 9))
@pytest.mark.parametrize("n", SIZES)
def test_segments_cover_the_buffer_once_with_aligned_starts(ranks, n):
    spans = ring.segments(n, ranks)
    assert len(spans) == ranks and spans[0][0] == 0 and spans[-1][1] == n
    assert all(a <= b for a, b in spans) and all(p[1] == q[0] for p, q in zip(spans, spans[1:], strict=False))
    assert all(a % ring.ALIGN == 0 for a, b in spans if b > a)
    full = [b - a for a, b in spans if b - a > 0]
    assert max(full) - min(full[:-1] or full) <= ring.ALIGN  # as equal as the alignment allows, the last shorter
    assert ring.longest(spans) == max(full)


@pytest.mark.parametrize("ranks", range(1, 9))
def test_each_step_every_rank_sends_once_and_receives_once_from_its_left(ranks):
    steps = ring.steps(ranks)
    assert len(steps) == 2 * (ranks - 1)
    assert [reduce for reduce, _ in steps] == [True] * (ranks - 1) + [False] * (ranks - 1)
    for _, moves in steps:
        assert sorted(s for s, _, _ in moves) == list(range(ranks))
        assert all(r == (s + 1) % ranks for s, r, _ in moves)
        assert sorted(seg for _, _, seg in moves) == list(range(ranks))  # every link carries a different segment
    for (_, before), (_, after) in zip(steps, steps[1:], strict=False):
        received = {r: seg for _, r, seg in before}
        assert all(seg == received[s] for s, _, seg in after)  # a rank forwards what it has just received


@pytest.mark.parametrize("ranks", range(1, 9))
def test_every_rank_contributes_once_to_every_segment(ranks):
    """Contributors of each (rank, segment): disjoint when added, all ranks at the owner after the reduce-scatter,
    all ranks everywhere after the all-gather."""
    held = {(r, seg): {r} for r in range(ranks) for seg in range(ranks)}
    for reduce, moves in ring.steps(ranks):
        arriving = {(r, seg): set(held[(s, seg)]) for s, r, seg in moves}
        for (r, seg), sent in arriving.items():
            if reduce:
                assert not held[(r, seg)] & sent, (ranks, r, seg)
                held[(r, seg)] |= sent
            else:
                assert sent == set(range(ranks))  # only complete sums are gathered
                held[(r, seg)] = sent
    assert all(c == set(range(ranks)) for c in held.values())
    after_scatter = {(r, seg): {r} for r in range(ranks) for seg in range(ranks)}
    for moves in ring.reduce_scatter(ranks):
        for s, r, seg in moves:
            after_scatter[(r, seg)] = after_scatter[(r, seg)] | after_scatter[(s, seg)]
    for seg in range(ranks):
        assert after_scatter[(ring.owner(seg, ranks), seg)] == set(range(ranks))


@pytest.mark.parametrize("ranks", range(1, 9))
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("pieces", [(None, 1), (64, 3), (1000, 4)])
def test_the_schedule_sums_exactly_on_numpy_rows(ranks, n, pieces):
    min_piece, max_pieces = pieces
    rng = np.random.default_rng(ranks * 7 + n)
    rows = [rng.integers(-1000, 1000, n).astype(np.float64) for _ in range(ranks)]
    want = np.sum(rows, axis=0)
    got = ring.simulate([r.copy() for r in rows], min_piece=min_piece, max_pieces=max_pieces)
    assert all(np.array_equal(g, want) for g in got)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("min_piece,max_pieces", [(1, 1), (64, 4), (100, 3), (1 << 22, 4)])
def test_pieces_and_buckets_cover_a_span_with_aligned_starts(n, min_piece, max_pieces):
    for start, stop in ring.segments(n, 3):
        cut = ring.pieces(start, stop, min_piece, max_pieces)
        assert (cut == []) == (stop == start)
        if cut:
            assert cut[0][0] == start and cut[-1][1] == stop and len(cut) <= max_pieces
            assert all(p[1] == q[0] for p, q in zip(cut, cut[1:], strict=False))
            assert all((a - start) % ring.ALIGN == 0 for a, _ in cut)
            assert all(b - a >= min(min_piece, stop - start) for a, b in cut[:-1])
    spans = ring.buckets(n, 1000)
    assert spans[0][0] == 0 and spans[-1][1] == n and all(a % ring.ALIGN == 0 for a, _ in spans)
    assert ring.aligned(1) == ring.ALIGN and ring.aligned(ring.ALIGN) == ring.ALIGN


def test_segments_refuse_nonsense():
    with pytest.raises(ValueError):
        ring.segments(10, 0)


# -- the steps, against NumPy -----------------------------------------------------------------------------------
def _stack(ranks, n, seed):
    return np.random.default_rng(seed).standard_normal((ranks, n), dtype=np.float32)


def _check(v, x):
    out = np.full_like(x, np.nan)
    assert v(x, out=out) is out
    ok, err, detail = harness.compare(out, FAM.reference(x), FAM.tolerance(x.shape[1]))
    assert ok, f"{v.name} ranks={x.shape[0]} n={x.shape[1]}: {detail}"


SIM_CASES = [(1, 31), (2, 1), (2, 31), (2, 1000), (3, 31), (3, 1000), (4, 129)]


@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
@pytest.mark.parametrize("ranks,n", SIM_CASES if zoo.SIMULATOR else [(r, n) for r in (1, 2, 3, 4) for n in SIZES])
def test_every_rank_holds_the_sum(v, ranks, n):
    _check(v, _stack(ranks, n, 10 * ranks + n % 97))


@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
def test_second_call_with_new_data_and_sizes(v):
    # kept buffers, streams and events follow the size and the rank count; stale data would show
    for ranks, n, seed in ((2, 700, 1), (2, 700, 2), (3, 129, 3), (2, 64, 4)):
        _check(v, _stack(ranks, n, seed))


def test_the_ranks_of_the_inputs_follow_zoo_ranks(monkeypatch):
    monkeypatch.setenv(world.ENV, "2")
    assert FAM.make_inputs(5, 0)[0].shape == (2, 5)  # on a GPU too: ranks beyond the GPU count share them
    monkeypatch.setenv(world.ENV, "two")
    with pytest.raises(ValueError, match="ZOO_RANKS"):
        world.ranks()
    monkeypatch.delenv(world.ENV)
    assert world.ranks() == (world.SIMULATED_RANKS if zoo.SIMULATOR else world.device_count())


@pytest.mark.parametrize("v", STEPS, ids=lambda v: v.name)
def test_bad_arrays_are_refused_before_anything_is_queued(v):
    x = _stack(2, 50, 5)
    for bad_out in (np.empty((2, 49), np.float32), np.empty((2, 50), np.float64), np.empty((3, 50), np.float32)):
        with pytest.raises(ValueError, match="out must be"):
            v.module.launch(x, bad_out)
    with pytest.raises(TypeError):
        v.module.launch(x.tolist(), np.empty((2, 50), np.float32))
    with pytest.raises(ValueError):
        v.module.launch(x[0], np.empty(50, np.float32))
    _check(v, x)


class SecondLaunchFails:
    """Stands in for a step's kernel: launches it, except the second launch, which raises."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, config):
        self.launches += 1
        if self.launches == 2:
            raise RuntimeError("launch failed")
        return self.kernel[config]


@pytest.mark.parametrize("v", STEPS[1:], ids=lambda v: v.name)
def test_an_error_half_way_leaves_out_alone_synchronizes_and_the_next_call_is_right(v, monkeypatch):
    x = _stack(3, 300, 9)
    out = np.full_like(x, 7.0)
    synchronized = []
    monkeypatch.setattr(world.Group, "synchronize", lambda self: synchronized.append(self))
    monkeypatch.setattr(v.module, "add_into", SecondLaunchFails(v.module.add_into))
    with pytest.raises(RuntimeError, match="launch failed"):
        v.module.launch(x, out)
    assert (out == 7.0).all() and v.module.add_into.launches == 2
    assert synchronized, "the group's streams were not synchronized before the error left"
    monkeypatch.undo()
    _check(v, x)


def test_release_drops_every_buffer_stream_and_event():
    x = _stack(3, 300, 11)
    for v in STEPS:
        _check(v, x)
    g = world.group(3)
    kept = [weakref.ref(b) for b in g._buffers.values()] + [weakref.ref(s) for s in g._streams["main"]]
    assert kept and g._events
    world.release()
    gc.collect()
    assert not world._GROUPS and not g._buffers and not g._streams and not g._events
    assert all(ref() is None for ref in kept), "a buffer or stream outlived release()"
    _check(STEPS[-1], x)  # a new group is made on demand


def test_a_group_keeps_one_buffer_a_name():
    g = world.group(2)
    first = g.buffer("scratch", 1, 100)
    assert g.buffer("scratch", 1, 100) is first and g.buffer("scratch", 1, 200) is not first
    g.drop("scratch")
    assert ("scratch", 1) not in g._buffers
    assert g.devices == tuple(r % world.device_count() for r in range(2))
    with pytest.raises(ValueError):
        world.Group(0)


# -- the ordering, checked for races -----------------------------------------------------------------------------
class Stream:
    """A stream that runs nothing: it numbers what is queued on it and keeps a vector clock, {stream: how many of
    its operations are known to be done before this stream's next one starts}."""

    def __init__(self, log, name):
        self.log, self.name, self.count, self.clock = log, name, 0, {}

    def synchronize(self):
        self.log.host_waits_for(self)


class Event:
    def __init__(self):
        self.clock = None  # what was done when it was last recorded

    def record(self, stream):
        self.clock = {**stream.clock, stream.name: stream.count}

    def wait(self, stream):
        for name, count in (self.clock or {}).items():  # a wait takes the record in place when it is issued
            stream.clock[name] = max(stream.clock.get(name, 0), count)


class Log:
    """Operations as the host issues them, each with the accesses it makes; the host's synchronizations."""

    def __init__(self):
        self.ops, self.streams, self.host = [], [], {}
        self.arrays = []  # every buffer ever made, kept: an id in the log is never another array's

    def stream(self):
        self.streams.append(Stream(self, len(self.streams)))
        return self.streams[-1]

    def host_waits_for(self, *streams):
        for s in streams or self.streams:  # whatever the host issues next starts after all that is done
            self.host[s.name] = s.count

    def issue(self, stream, reads, writes):
        for name, count in self.host.items():
            stream.clock[name] = max(stream.clock.get(name, 0), count)
        stream.count += 1
        self.ops.append((stream.name, stream.count, dict(stream.clock), reads, writes))

    def races(self):
        """Pairs of operations that touch the same elements, one of them writing, with nothing ordering them."""
        found = []
        for i, (sa, ia, _, ra, wa) in enumerate(self.ops):
            for sb, ib, clock_b, rb, wb in self.ops[i + 1 :]:
                if sa == sb or clock_b.get(sa, 0) >= ia:
                    continue  # the same stream, or b waits (through events) for a
                if _overlap(wa, rb | wb) or _overlap(wb, ra):
                    found.append(((sa, ia, sorted(wa), sorted(ra)), (sb, ib, sorted(wb), sorted(rb))))
        return found


def _overlap(xs, ys):
    return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x in xs for y in ys)


class RecordingGroup(world.Group):
    """A group whose streams, events and buffers are the recording ones above: every copy and add is logged with
    the elements it reads and writes, and run on NumPy in the order the host issues it."""

    def __init__(self, ranks):
        self.log = Log()
        super().__init__(ranks)

    def _new_stream(self):
        return self.log.stream()

    def _new_event(self):
        return Event()

    def _new_buffer(self, n):
        self.log.arrays.append(np.zeros(n, np.float32))
        return self.log.arrays[-1]

    def synchronize(self):
        self.log.host_waits_for()

    def copy(self, count, dst, src, stream):
        (_, dst_array, dst_start), (_, src_array, src_start) = dst, src
        if count > 0:
            self.log.issue(
                stream, {(id(src_array), src_start, src_start + count)}, {(id(dst_array), dst_start, dst_start + count)}
            )
            dst_array[dst_start : dst_start + count] = src_array[src_start : src_start + count]


class RecordedAdd:
    """Stands in for a step's add_into: logs each launch's accesses, adds on NumPy."""

    def __init__(self, group):
        self.group = group

    def __getitem__(self, config):
        stream = config[2]

        def launch(*args):
            if len(args) == 3:  # (dst, src, count): whole buffers
                (dst, src, count), dst_start, src_start = args, 0, 0
            elif len(args) == 4:  # (dst, dst_start, src, count)
                (dst, dst_start, src, count), src_start = args, 0
            else:
                dst, dst_start, src, src_start, count = args
            dst_start, src_start, count = int(dst_start), int(src_start), int(count)
            span_dst, span_src = (id(dst), dst_start, dst_start + count), (id(src), src_start, src_start + count)
            self.group.log.issue(stream, {span_dst, span_src}, {span_dst})
            dst[dst_start : dst_start + count] += src[src_start : src_start + count]

        return launch


def _produce(group, bufs, rows, lo=0, hi=None):
    """What comes before an all-reduce on each rank's main stream: the rows written into bufs[lo:hi]."""
    hi = bufs[0].size if hi is None else hi
    for r in range(group.ranks):
        group.log.issue(group.main[r], set(), {(id(bufs[r]), lo, hi)})
        bufs[r][lo:hi] = rows[r][lo:hi]


def _consume(group, bufs):
    for r in range(group.ranks):
        group.log.issue(group.main[r], {(id(bufs[r]), 0, bufs[0].size)}, set())


@pytest.mark.parametrize("v", STEPS[1:], ids=lambda v: v.name)
@pytest.mark.parametrize("ranks,n", [(2, 1000), (3, 4099), (4, 1000), (5, 777), (3, 1), (3, 1_000_003), (4, 1_000_003)])
def test_no_two_streams_touch_the_same_elements_unordered(v, ranks, n, monkeypatch):
    """Streams run at once on a GPU and in order in the simulator: every pair of accesses to the same elements,
    one a write, on two streams, must be ordered by stream order and events, across two calls in a row. The
    sum is also checked in the order the host issued everything (one order the GPU may take): the steps' own
    indexing, at sizes too large for the simulator's threads."""
    group = RecordingGroup(ranks)
    monkeypatch.setattr(v.module, "add_into", RecordedAdd(group))
    bufs = group.buffers("data", n)
    params = {"min_piece": 16, "max_pieces": 3} if v.number >= 4 else {}
    if v.number == 5:
        params["bucket"] = max(1000, n // 3)  # a few buckets: the checker compares every pair of operations
    for call in range(2):
        rows = _stack(ranks, n, call).round()  # integers: any order of addition gives the exact sum
        _produce(group, bufs, rows)
        v.module.allreduce(group, bufs, **params)
        _consume(group, bufs)
        assert all(np.array_equal(b, rows.sum(axis=0)) for b in bufs), f"{v.name}: call {call} wrong"
    assert not group.log.races(), f"{v.name}: unordered accesses, e.g. {group.log.races()[:2]}"


@pytest.mark.parametrize("ranks,n", [(2, 3000), (3, 4099), (4, 2500)])
def test_buckets_overlap_their_producer_without_a_race(ranks, n, monkeypatch):
    """v05 as the training step uses it: bucket b is produced on the main streams, its ring starts, bucket b + 1
    is produced while it runs; one finish a step. No access of the rings may race with the producer's."""
    v05 = FAM["v05"].module
    group = RecordingGroup(ranks)
    monkeypatch.setattr(v05, "add_into", RecordedAdd(group))
    bufs = group.buffers("gradients", n)
    for step in range(2):  # two training steps: the second one's producer overwrites what the first reduced
        rows = _stack(ranks, n, step).round()
        for lo, hi in ring.buckets(n, 1000):
            _produce(group, bufs, rows, lo, hi)
            v05.allreduce_bucket(group, bufs, lo, hi, min_piece=16, max_pieces=3)
        v05.finish(group)
        _consume(group, bufs)
        assert all(np.array_equal(b, rows.sum(axis=0)) for b in bufs)
    assert not group.log.races(), group.log.races()[:2]


def test_the_race_checker_sees_a_missing_wait(monkeypatch):
    """The checker is not blind: v03 with the wait on the sender's previous step removed races."""
    v03 = FAM["v03"].module
    group = RecordingGroup(3)
    monkeypatch.setattr(v03, "add_into", RecordedAdd(group))
    monkeypatch.setattr(Event, "wait", lambda self, stream: None)
    bufs = group.buffers("data", 1000)
    _produce(group, bufs, _stack(3, 1000, 1).round())
    v03.allreduce(group, bufs)
    assert group.log.races()


# -- the sweeps ---------------------------------------------------------------------------------------------------
def test_bus_bandwidth_is_as_nccl_tests_define_it():
    from zoo.kernels.collectives.sweeps import allreduce as sweep

    assert sweep.bus_bandwidth(4e9, 1.0, 1) == (4.0, 0.0)
    assert sweep.bus_bandwidth(4e9, 1.0, 2) == (4.0, 4.0)
    assert sweep.bus_bandwidth(4e9, 2.0, 4) == (2.0, 3.0)
    assert sweep.sizes(1, 1024, False) == [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    assert sweep.sizes(1, 100, False)[-1] == 100 << 20


@pytest.mark.skipif(not zoo.SIMULATOR, reason="on a GPU, .ci/gpu-collectives.sh runs the sweeps at full size")
def test_allreduce_sweep_checks_every_step_and_draws(tmp_path):
    from zoo.kernels.collectives.sweeps import allreduce as sweep

    args = argparse.Namespace(
        simulator=True,
        ranks=2,
        min_mb=1,
        max_mb=1,
        host_max_mb=256,
        steps="v01,v03,v05",
        budget=0.1,
        max_pieces=3,
        min_piece_mb=None,
    )
    rows = sweep.measure(args)
    checked = [r for r in rows if r.get("correct") is not None]
    assert {r["row"] for r in checked} == {"v01_through_host", "v03_ring", "v05_buckets_overlapped"}
    assert all(r["correct"] for r in checked)
    assert any(r["row"] == sweep.CEILING for r in rows) and rows[-1]["row"] == sweep.NCCL
    pytest.importorskip("matplotlib")
    sweep.plot(rows, "the simulator").savefig(tmp_path / "allreduce.png")


def test_allreduce_findings_compare_with_nccl():
    from zoo.kernels.collectives.sweeps import allreduce as sweep

    def row(name, nbytes, busbw):
        return dict(row=name, ranks=2, gpus=2, bytes=nbytes, algbw_gbs=busbw, busbw_gbs=busbw)

    big = 256 << 20
    rows = [row("nccl", big, 300.0), row("v03_ring", big, 240.0), row(sweep.CEILING, big, 320.0)]
    lines = sweep.findings(rows)
    assert "v03_ring: 80% to 80% of NCCL's busbw from 256 MB a rank up" in lines
    assert any("the best all-reduce, v03_ring, reaches 75% of it" in line for line in lines)
    assert sweep.findings([dict(row="v03_ring", ranks=1, gpus=1, bytes=big, algbw_gbs=9.0, busbw_gbs=0.0)])[
        0
    ].startswith("one rank")


def test_dataparallel_sweep_checks_the_overlapped_step(tmp_path):
    from zoo.kernels.collectives.sweeps import dataparallel as dp

    if not zoo.SIMULATOR:
        pytest.skip("on a GPU, .ci/gpu-collectives.sh runs the sweep at full size")
    args = argparse.Namespace(simulator=True, ranks=3, layers=2, width=8, batches="3", budget=0.1)
    rows = dp.measure(args)
    assert [r["correct"] for r in rows] == [True]
    timed = [
        dict(ranks=2, gpus=2, layers=8, width=2048, batch=b, compute_ms=c, allreduce_ms=1.0, serial_ms=c + 1.0,
             overlapped_ms=o, speedup=(c + 1.0) / o, hidden=1 - (o - c) / 1.0)
        for b, c, o in ((64, 0.5, 1.2), (1024, 4.0, 4.1))
    ]  # fmt: skip
    lines = dp.findings(timed)
    assert "30% of the all-reduce hidden" in lines[1] and "90% of the all-reduce hidden" in lines[2]
    assert lines[-2] == "at most 88% can be hidden: the first layer's ring has no compute after it"
    assert lines[-1] == "at least 80% hidden from batch 1024 up"
    pytest.importorskip("matplotlib")
    dp.plot(timed, "a GPU").savefig(tmp_path / "dataparallel.png")


# -- on a GPU ------------------------------------------------------------------------------------------------------
gpu = pytest.mark.skipif(zoo.SIMULATOR, reason="device memory, peer access and NCCL are only real on a GPU")


@gpu
def test_no_device_memory_is_left_after_release():
    import cupy
    from numba import cuda

    from zoo.kernels.collectives import library

    def live_bytes():
        total = 0
        for d in range(world.device_count()):
            with cuda.gpus[d]:
                manager = cuda.current_context().memory_manager
                total += sum(mem.size for mem in list(manager.allocations.values()))
        return total

    world.release()
    gc.collect()
    before = live_bytes()
    for i in range(200):
        v = STEPS[i % len(STEPS)]
        v.module.launch(_stack(2 + i % 2, 4099, i), np.empty((2 + i % 2, 4099), np.float32))
    x = _stack(world.ranks(), 1000, 3)
    out = np.empty_like(x)
    FAM.baseline(x, out)
    FAM.module.placement_ceiling(x, out)
    gc.collect()
    for d in range(world.device_count()):
        with cupy.cuda.Device(d):
            assert cupy.get_default_memory_pool().used_bytes() == 0, "a CuPy array of the baseline outlived its call"
    world.release()
    library.release()
    gc.collect()
    for d in range(world.device_count()):
        with cuda.gpus[d]:
            cuda.current_context().deallocations.clear()
    assert live_bytes() <= before


@gpu
def test_peer_access_is_asked_for_every_pair_of_gpus():
    g = world.group(world.device_count())
    gpus = sorted(set(g.devices))
    assert set(g.peers) == {(a, b) for a in gpus for b in gpus if a != b}


@gpu
def test_the_nccl_baseline_sums_or_says_why_not():
    from zoo.kernels.collectives import library

    x = _stack(world.ranks(), 4099, 4)
    out = np.full_like(x, np.nan)
    ok, why = library.available([r % world.device_count() for r in range(x.shape[0])])
    if ok:
        FAM.baseline(x, out)
    else:
        library._WARNED.clear()
        with pytest.warns(UserWarning, match="not NCCL"):
            FAM.baseline(x, out)
    assert harness.compare(out, FAM.reference(x), FAM.TOLERANCE)[0], why
