"""The collectives family: the ring's schedule arithmetic for 1 to 8 ranks on irregular sizes, every step
against a NumPy sum of the ranks' rows for 1 to 4 ranks (simulated ranks on one device here, real ones on a
GPU machine), repeated calls, the error path, released buffers and streams, and the sweeps' arithmetic."""

import argparse
import gc
import weakref

import numpy as np
import pytest

import zoo
from zoo import harness
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
    assert FAM.make_inputs(5, 0)[0].shape == ((2 if zoo.SIMULATOR else min(2, world.device_count())), 5)
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


# -- the sweeps ---------------------------------------------------------------------------------------------------
def test_bus_bandwidth_is_as_nccl_tests_define_it():
    from zoo.kernels.collectives import sweep

    assert sweep.bus_bandwidth(4e9, 1.0, 1) == (4.0, 0.0)
    assert sweep.bus_bandwidth(4e9, 1.0, 2) == (4.0, 4.0)
    assert sweep.bus_bandwidth(4e9, 2.0, 4) == (2.0, 3.0)
    assert sweep.sizes(1, 1024, False) == [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    assert sweep.sizes(1, 100, False)[-1] == 100 << 20


@pytest.mark.skipif(not zoo.SIMULATOR, reason="on a GPU, .ci/gpu-collectives.sh runs the sweeps at full size")
def test_allreduce_sweep_checks_every_step_and_draws(tmp_path):
    from zoo.kernels.collectives import sweep

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
    from zoo.kernels.collectives import sweep

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
    from zoo.kernels.collectives import sweep_dataparallel as dp

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
