"""gemv: the weight formats (packing, group sizes, what quantizing costs), every step at the issue's shapes, a
second call, refusals before any launch, which kernel a shape gets, and what the compiler makes of each format."""

import itertools
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

import zoo
from tests.conftest import ROOT, tune_with_sizes
from zoo.bench import harness
from zoo.device.jit import Kernel, jit, launch_count, launched_since
from zoo.device.mma import SHARED_ALIGN, cp_async_commit, cp_async_wait_all
from zoo.kernels import int4
from zoo.kernels.gemv import ring
from zoo.kernels.gemv.sweeps import tune as gemv_tune
from zoo.tools import machine_code

GEMV = zoo.family("gemv")
SPEC = GEMV.module
LAST = GEMV.variants[-1]
ISSUE_SHAPES = ((1, 1), (33, 4099), (1000, 777))  # the issue's irregular shapes


# -- the formats ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 77, 128, 129, 320])
def test_each_row_is_packed_as_the_int4_family_packs_a_vector(n):
    codes = np.random.default_rng(n).integers(-8, 8, (3, n), dtype=np.int8)
    packed = SPEC.pack_rows(codes)
    assert packed.shape == (3, (n + 1) // 2) and packed.dtype == np.uint8
    for r in range(3):
        np.testing.assert_array_equal(packed[r], int4.pack_codes_reference(codes[r]))
    np.testing.assert_array_equal(SPEC.unpack_rows(packed, n), codes)


@pytest.mark.parametrize(
    "n,groups,group", [(4099, 33, 128), (4099, 65, 64), (320, 3, 128), (320, 5, 64), (64, 1, 128), (100, 2, 64)]
)
def test_the_group_size_follows_from_the_scales(n, groups, group):
    assert SPEC.group_size(n, groups) == group


def test_a_scale_count_that_fits_no_group_size_is_refused():
    with pytest.raises(ValueError, match="groups"):
        SPEC.group_size(4099, 40)


@pytest.mark.parametrize("kind,group", [("int4", 128), ("int4_g64", 64)])
def test_int4_inputs_dequantize_to_scale_times_code(kind, group):
    W32, x32 = GEMV.inputs((5, 300), 4, "fp32")
    W, x, scales = GEMV.inputs((5, 300), 4, kind)
    assert W.shape == (5, 150) and scales.shape == (5, -(-300 // group)) and scales.dtype == np.float16
    codes = SPEC.unpack_rows(W, 300)
    assert codes.min() >= -8 and codes.max() <= 7 and (codes == 7).any()  # each group's largest weight maps to 7
    want = codes * np.repeat(scales.astype(np.float64), group, axis=1)[:, :300]
    np.testing.assert_array_equal(SPEC.dequantize(W, x, scales), want)
    assert np.abs(want - W32).max() <= 0.5 * scales.astype(np.float64).max() * 1.01  # rounding: half a step
    np.testing.assert_array_equal(x, x32.astype(np.float16))


def test_int8_inputs_have_one_scale_per_row():
    W32, _ = GEMV.inputs((6, 100), 4, "fp32")
    W, x, scales = GEMV.inputs((6, 100), 4, "int8")
    assert W.dtype == np.int8 and scales.shape == (6, 1)
    assert (np.abs(W).max(axis=1) == 127).all()
    assert np.abs(SPEC.dequantize(W, x, scales) - W32).max() <= 0.5 * scales.astype(np.float64).max() * 1.01


def test_what_quantizing_costs_is_reported_and_bounded():
    """The error of each kind's exact product against the float32 master product: 0 for fp32, then growing
    as the weights get fewer bits, and smaller with smaller int4 groups."""
    size = (64, 4099)
    errors = {kind: SPEC.quantization_error(size, 0, kind) for kind in GEMV.kinds}
    assert errors["fp32"] == 0
    assert 0 < errors["fp16"] < 1e-3  # W and x rounded to float16: about 2^-12 each
    assert 1e-3 < errors["int8"] < 2e-2  # a step of 1/127 of the row's largest weight
    assert 2e-2 < errors["int4_g64"] < errors["int4"] < 0.2  # a step of 1/7 of the group's largest
    print({k: f"{v:.2e}" for k, v in errors.items()})


def test_bytes_are_the_formats_bytes():
    out, n = 8192, 8192
    vectors = 2 * n + 4 * out  # x in float16, y in float32
    assert GEMV.bytes_moved((out, n), "fp32") == 4 * out * n + 4 * n + 4 * out
    assert GEMV.bytes_moved((out, n), "fp16") == 2 * out * n + vectors
    assert GEMV.bytes_moved((out, n), "int8") == out * n + 2 * out + vectors
    assert GEMV.bytes_moved((out, n), "int4") == out * n // 2 + 2 * out * n // 128 + vectors
    assert GEMV.bytes_moved((out, n), "int4_g64") == out * n // 2 + 2 * out * n // 64 + vectors
    assert GEMV.flops((out, n)) == out * n  # the GFLOP/s column reads weights per second


# -- every step, every format ---------------------------------------------------------------------------------------
def _issue_cases():
    for kind in GEMV.kinds:
        for shape in ISSUE_SHAPES:
            for v in GEMV:
                yield pytest.param(v, shape, kind, id=f"{v.name[:3]}-{shape[0]}x{shape[1]}-{kind}")


@pytest.mark.parametrize("variant,shape,kind", list(_issue_cases()))
def test_every_step_at_the_issues_shapes(variant, shape, kind):
    if zoo.SIMULATOR and shape != (1, 1):
        pytest.skip("33 x 4099 and 1000 x 777 take minutes a step in the simulator: checked on the GPU")
    result = harness.check(variant, shape, seed=11, kind=kind)
    assert result.ok, result.detail


@pytest.mark.parametrize("kind", GEMV.kinds)
def test_a_second_call_with_other_inputs_is_right_too(kind):
    """The same out for two inputs of one size, then a call at another size: each result is the new inputs'."""
    out = cuda.device_array(9, np.float32)
    for size, seed in (((9, 320), 1), ((9, 320), 2), ((5, 64), 3)):
        inputs = GEMV.inputs(size, seed, kind)
        if out.size != size[0]:
            out = cuda.device_array(size[0], np.float32)
        got = LAST(*(cuda.to_device(a) for a in inputs), out=out).copy_to_host()
        ok, err, detail = harness.compare(got, GEMV.reference(*inputs), GEMV.tolerance(size))
        assert ok, (size, seed, detail)


def test_the_cpu_row_is_numpy_on_float32_weights():
    for kind in GEMV.kinds:
        inputs = GEMV.inputs((7, 96), 5, kind)
        got = SPEC.cpu_numpy(*inputs)
        assert got.dtype == np.float32
        assert harness.compare(got, GEMV.reference(*inputs), GEMV.tolerance((7, 96)))[0], kind
        assert SPEC.cpu_numpy(*inputs) is not got  # a second call computes again (the widened weights are kept)


# -- refusals, before any launch -------------------------------------------------------------------------------------
@pytest.fixture
def no_launch(monkeypatch):
    def refuse(self, config):
        raise AssertionError("a kernel was launched before the input was rejected")

    monkeypatch.setattr(Kernel, "__getitem__", refuse)


def _refusals():
    W32, x32 = GEMV.inputs((4, 64), 0, "fp32")
    W16, x16 = GEMV.inputs((4, 64), 0, "fp16")
    W8, _, s8 = GEMV.inputs((4, 64), 0, "int8")
    W4, _, s4 = GEMV.inputs((4, 64), 0, "int4")
    return [
        ((W32, x32[:-1]), ValueError, "columns must equal"),
        ((W16, x32), TypeError, "x must be float16 with fp16 weights"),
        ((W32, x16), TypeError, "x must be float32 with fp32 weights"),
        ((W32, x32, s8), TypeError, "take no scales"),
        ((W8, x16), TypeError, "need their scales"),
        ((W8, x16, s8[:-1]), ValueError, "one per row"),
        ((W8, x16, np.ones((4, 2), np.float16)), ValueError, "one per row"),
        ((np.ascontiguousarray(W4[:, :-1]), x16, s4), ValueError, "two weights a byte"),
        ((W4, x16, np.ones((4, 3), np.float16)), ValueError, "groups"),
        ((W4, x16, s4[:-1]), ValueError, "scales have 3 rows"),
        ((W4, x16, s4.astype(np.float32)), TypeError, "scales must be float16"),
        ((W32.astype(np.float64), x32), TypeError, "W must be float32 or float16 or int8 or uint8"),
        ((W4, x16[None], s4), ValueError, "x must have 1 dimension"),
        ((W4, x16, s4[0]), ValueError, "scales must have 2 dimension"),
    ]


@pytest.mark.parametrize("inputs,error,message", _refusals())
def test_bad_shapes_and_dtypes_are_refused_before_any_launch(no_launch, inputs, error, message):
    for v in (GEMV[1], LAST):
        with pytest.raises(error, match=message):
            v(*inputs)


# -- which kernel a shape gets -----------------------------------------------------------------------------------------
V06, V07 = GEMV["v06"], GEMV["v07"]


def _record_builds(monkeypatch, *steps):
    """[(step, builder)] of every kernel the steps' launches build, in order."""
    taken = []

    def recording(build, what):
        def build_and_record(*args):
            taken.append(what)
            return build(*args)

        return build_and_record

    for step in steps:
        for name in ("build", "build_scalar"):
            if hasattr(step.module, name):
                monkeypatch.setattr(step.module, name, recording(getattr(step.module, name), (step.name[:3], name)))
    return taken


@pytest.mark.parametrize("kind", ["fp16", "int4"])
def test_aligned_rows_take_the_16_byte_kernel_and_others_v02s(monkeypatch, kind):
    taken = _record_builds(monkeypatch, V06)
    for size in ((9, 320), (5, 77)):
        assert harness.check(V06, size, seed=2, kind=kind).ok
    assert taken == [("v06", "build"), ("v06", "build_scalar")]


@pytest.mark.parametrize("kind", ["int4", "int4_g64"])
def test_int4_rows_of_whole_blocks_of_64_take_the_tensor_core_kernel(monkeypatch, kind):
    """v07 builds its own kernel for int4 when in is a multiple of 64 (in = 320: five blocks, the last alone and, for
    int4, half a group of 128; 3 rows split in across two warps, 33 rows do not) and the grid has a block an SM or
    more, v06's for the rest; and the tensor-core kernel writes every row of a poisoned output, right on a second
    call with other inputs. On a GPU these grids of one or two blocks take v06's kernel (the simulator has one SM)."""
    taken = _record_builds(monkeypatch, V07, V06)
    for size in ((33, 320), (3, 320)):
        for seed in (1, 2):
            inputs = GEMV.inputs(size, seed, kind)
            out = cuda.to_device(np.full(size[0], np.nan, np.float32))
            got = V07(*(cuda.to_device(a) for a in inputs), out=out).copy_to_host()
            ok, err, detail = harness.compare(got, GEMV.reference(*inputs), GEMV.tolerance(size))
            assert ok, (size, seed, detail)
    assert taken == [("v07", "build") if zoo.SIMULATOR else ("v06", "build")] * 4
    taken.clear()
    assert harness.check(V07, (5, 96), seed=3, kind=kind).ok  # 48 bytes a row: 16-byte aligned, not blocks of 64
    assert harness.check(V07, (5, 77), seed=3, kind=kind).ok
    assert harness.check(V07, (9, 320), seed=3, kind="fp16").ok
    assert taken == [("v06", "build"), ("v06", "build_scalar"), ("v06", "build")]


@pytest.mark.parametrize("kind", ["int4", "int4_g64"])
def test_runs_of_four_blocks_go_to_the_slices_in_turn(kind):
    """in = 1088: 17 blocks of 64, four runs of four blocks and one last block; 3 rows, so two warps share the
    columns (runs 0 and 2 and the last block to the first, 1 and 3 to the second); groups of 128 and 64."""
    if zoo.SIMULATOR:
        assert V07.module.slices_for(3) == 2  # one "SM", two warps a block
    result = harness.check(V07, (3, 1088), seed=5, kind=kind)
    assert result.ok, result.detail


V08, V09, V10 = (GEMV[f"v{n:02d}"] for n in range(8, 11))
PACKED_KERNELS = V10.module.KERNELS  # the kernels of v10's ring, one compiled function
PACKED_RING = "gemv_int4_packed_ring"
# in = 1344: 21 blocks, five runs of four and one last block; 1216: four runs and three last blocks
RING_SIZES = {"int4": ((33, 1344), (3, 1216)), "int4_g64": ((33, 1344), (3, 1216))}


# v09's ring and its scales' queue are v08's: v09 is turned with groups of 128 only (CI's time), v08 with both
@pytest.mark.parametrize("step,kind", [("v08", "int4"), ("v08", "int4_g64"), ("v09", "int4")])
def test_the_ring_turns_through_every_run_and_the_last_blocks(step, kind):
    """v08 and v09: 33 rows are one warp (no split), so the two-slot ring turns through every run (five or four); 3
    rows split the columns between two warps, which take the runs and the last blocks in turn. A poisoned output,
    right on a second call with other inputs."""
    ring_step = GEMV[step]
    if zoo.SIMULATOR:
        assert ring_step.module.slices_for(33) == 1 and ring_step.module.slices_for(3) == 2
    for size in RING_SIZES[kind]:
        out = cuda.to_device(np.full(size[0], np.nan, np.float32))
        for seed in (1, 2):
            inputs = GEMV.inputs(size, seed, kind)
            got = ring_step(*(cuda.to_device(a) for a in inputs), out=out).copy_to_host()
            ok, err, detail = harness.compare(got, GEMV.reference(*inputs), GEMV.tolerance(size))
            assert ok, (size, seed, detail)


def _tune_table(tmp_path, monkeypatch, classes):
    """A tune table (the repository's, no user cache) of these {class: entry} for ring.py to read."""
    table = tmp_path / "gemv.json"
    monkeypatch.setattr(ring, "path", lambda: table)
    monkeypatch.setattr(ring, "cache_path", lambda: tmp_path / "no-cache.json")
    table.write_text(json.dumps({"device": "test", "classes": classes}))
    ring.table.cache_clear()
    return table


def _entry(shape, *choices):
    """A class's entry: its shape and its rows, fastest first; a choice is a ring.Ring or a saved row's tiles."""
    tiles = [c._asdict() if isinstance(c, ring.Ring) else c for c in choices]
    return {"shape": shape, "rows": [{"tiles": t, "ms": 0.01 * (i + 1), "agrees": True} for i, t in enumerate(tiles)]}


def test_v10_launches_the_fastest_ring_of_its_class_in_the_tune_table(tmp_path, monkeypatch):
    """A table whose fastest ring for a block an SM is each of v10's kernels in turn (three slots, refilled after the
    math, triggering two runs early), behind a row of a row-major ring that v10 cannot run: v10 builds the pick, and
    the product is right; a class the table has no entry for keeps its default."""
    built = []

    def recording(*args, build=V10.module.build):
        built.append(args[2:])  # (slots, after math, trigger, kernel)
        return build(*args)

    monkeypatch.setattr(V10.module, "build", recording)
    rings = [ring.Ring(k, 3, True, 2) for k in PACKED_KERNELS]
    try:
        for fastest in rings:
            ranked = [{"kernel": "row_major", "stages": 2}, fastest] + [r for r in rings if r != fastest]
            _tune_table(tmp_path, monkeypatch, {"one_block_an_sm": _entry(None, *ranked)})
            built.clear()
            assert harness.check(V10, (3, 512), seed=6, kind="int4").ok  # one group of 32 rows: a block an SM
            assert set(built) == {(3, True, 2, fastest.kernel)}, fastest
        assert ring.ring_for(10**6, PACKED_KERNELS) == ring.DEFAULTS["many_blocks_an_sm"] == ring.Ring("packed", 2)
    finally:
        ring.table.cache_clear()


@pytest.mark.parametrize(
    "choice",
    gemv_tune.candidates(),
    ids=lambda c: (
        f"{c.kernel}-{c.stages}{'-after-math' * c.refill_after_math}"
        + (f"-early{c.trigger_early}" if c.trigger_early else "")
    ),
)
def test_every_ring_the_sweep_may_pick_is_right(choice):
    """Each candidate of ``zoo tune gemv``, launched as v10 launches a pick on inputs as it reads them: in = 1280 is
    five runs, so the ring turns five times (three slots: a slot is refilled with the run three ahead), on a poisoned
    output, right on a second call. The simulator runs the dependent launch's trigger as a no-op, so there a
    candidate that differs from another only in where it triggers (``trigger_early``) is the same program: it runs
    on the GPU."""
    if zoo.SIMULATOR and choice.trigger_early:
        pytest.skip("the same program as trigger_early=0 in the simulator (the trigger is a no-op): checked on the GPU")
    size = (33, 1280)
    out = cuda.to_device(np.full(size[0], np.nan, np.float32))
    for seed in (1, 2):
        inputs = GEMV.inputs(size, seed, "int4")
        since = launch_count()
        gemv_tune.launch(choice, *gemv_tune.inputs_for(choice, tuple(cuda.to_device(a) for a in inputs)), out)
        assert launched_since(since).__name__ == PACKED_RING, choice
        ok, err, detail = harness.compare(out.copy_to_host(), GEMV.reference(*inputs), GEMV.tolerance(size))
        assert ok, (seed, detail)
        out.copy_to_device(np.full(size[0], np.nan, np.float32))


def test_zoo_tune_gemv_with_a_size_tunes_that_sizes_class_at_that_size(monkeypatch):
    """The GPU path of ``zoo tune gemv --size``, with the timing replaced: on 132 SMs, a block a group of 32 rows,
    4096 x 14336 is 128 blocks (one an SM), 8192 x 8192 256 (two), 14336 x 4096 448 (more); two sizes of one class
    are refused. The class is the shape's, whichever kernel runs (``packed``'s blocks of eight warps make 14336 x
    4096 224 blocks: its class is still the third)."""
    from zoo import cli

    monkeypatch.setattr(ring, "sm_count", lambda: 132)  # the class's
    asked = tune_with_sizes(monkeypatch, gemv_tune, "gemv", ["4096x14336", "8192x8192", "14336x4096"])
    assert asked == {
        "one_block_an_sm": (4096, 14336),
        "two_blocks_an_sm": (8192, 8192),
        "many_blocks_an_sm": (14336, 4096),
    }
    assert [ring.SHAPE_CLASSES.of(rows) for rows in (4096, 4224, 8448, 8449)] == [
        "one_block_an_sm",
        "one_block_an_sm",
        "two_blocks_an_sm",
        "many_blocks_an_sm",
    ]
    with pytest.raises(cli.UsageError, match="both of class one_block_an_sm"):
        tune_with_sizes(monkeypatch, gemv_tune, "gemv", ["4096x14336", "33x320"])


def test_a_saved_table_is_read_under_todays_classes_and_kernel_names(tmp_path, monkeypatch):
    """A table saved when the classes were two (a block an SM, tuned at 4096 x 14336; more, at 14336 x 4096) and the
    kernels were named by their steps (v13's, v14's): on 132 SMs its second entry is read as 14336 x 4096's class now
    (448 groups, more than two an SM), its kernels under their names of now; 8192 x 8192's class, which it lacks,
    takes its default, and a tune of that class alone keeps the moved entry."""
    from zoo.runtime import tune_table

    monkeypatch.setattr(ring, "sm_count", lambda: 132)
    names = ("kernel", "stages", "refill_after_math", "trigger_early")
    saved = lambda *values: dict(zip(names, values, strict=False))  # noqa: E731  a saved row's tiles
    old = {
        "one_block_an_sm": _entry([4096, 14336], saved("v13", 3, True, 2)),
        "two_blocks_an_sm": _entry([14336, 4096], saved("v11", 2), saved("v14", 2, True, 2)),
    }
    table = _tune_table(tmp_path, monkeypatch, old)
    one, many = ring.Ring("immediate_offsets", 3, True, 2), ring.Ring("one_group_a_block", 2, True, 2)
    two = ring.Ring("packed", 2, True, 1)
    try:
        assert ring.ring_for(4096, PACKED_KERNELS) == one
        assert ring.ring_for(14336, PACKED_KERNELS) == many  # v11's row-major ring is read, never picked
        assert ring.ring_for(8192, PACKED_KERNELS) == ring.DEFAULTS["two_blocks_an_sm"]
        tuned = {"device": "test", "classes": {"two_blocks_an_sm": _entry([8192, 8192], two)}}
        tune_table.write(tuned, ring.table()[0], True, table)  # what ``zoo tune gemv --size 8192x8192`` writes
        ring.table.cache_clear()
        assert [ring.ring_for(rows, PACKED_KERNELS) for rows in (4096, 8192, 14336)] == [one, two, many]
    finally:
        ring.table.cache_clear()


# the device functions and sizes a test kernel uses, as globals: a kernel on the GPU cannot reach them through a Variant
v08_set_copy_lines, v08_copy_run = V08.module.set_copy_lines, V08.module.copy_run
v09_set_copy_lines, v09_copy_codes, v09_copy_x = V09.module.set_copy_lines, V09.module.copy_codes, V09.module.copy_x
SLOT_BYTES = V08.module.SLOT_BYTES  # v09's too


@jit
def _copy_one_run(W, x, at, slot_out, in_two):
    """One warp, its first row 0 and its lines from set_copy_lines: v08's copy_run (or v09's copy_codes, then its
    copy_x) into a slot of shared memory, where cp.async writes; then the wait, and the slot copied out."""
    slot = cuda.shared.array(SLOT_BYTES, np.uint8, alignment=SHARED_ALIGN)  # 16 bytes, for cp.async
    lane = np.uint32(cuda.threadIdx.x)
    for i in range(lane, SLOT_BYTES, 32):
        slot[i] = slot_out[i]  # the poison, so that a byte never written is seen
    cuda.syncwarp()  # the poison is in before any copy lands
    lines = cuda.local.array(8, np.uint32)
    if in_two:
        v09_set_copy_lines(lines, np.uint32(0), np.uint32(W.shape[0]), np.uint32(W.shape[1]), lane)
        v09_copy_codes(W, lines, at, slot, np.uint32(0), lane)
        v09_copy_x(x, at, slot, np.uint32(0), lane)
    else:
        v08_set_copy_lines(lines, np.uint32(0), np.uint32(W.shape[0]), np.uint32(W.shape[1]), lane)
        v08_copy_run(W, x, lines, at, slot, np.uint32(0), lane)
    cp_async_commit()  # wait_group waits for committed groups only: uncommitted copies would not be waited for
    cp_async_wait_all()
    cuda.syncwarp()  # every lane's copies have landed
    for i in range(lane, SLOT_BYTES, 32):
        slot_out[i] = slot[i]


@pytest.mark.parametrize("step", ["v08", "v09"])
def test_copy_run_puts_every_chunk_of_the_run_at_its_swizzled_place(step):
    """copy_run (v08; v09's copy_codes and copy_x; one warp; instruction i, lane l: chunk l % 8 of row 4 i + l // 8)
    fills a slot with the 32 rows' 128 bytes at byte ``at``, row r's chunk c at r * 128 + (c ^ r % 8) * 16, rows
    past the last being the last again (30 rows here), and x's 256 columns after them: every byte of the slot,
    checked against W and x."""
    m = GEMV[step].module
    rows, at = 30, 2 * m.RUN_BYTES  # the third run of a row of 768 bytes (1536 columns)
    rng = np.random.default_rng(7)
    W = rng.integers(0, 256, (rows, 768), dtype=np.uint8)
    x = rng.standard_normal(1536).astype(np.float16)
    slot = np.full(m.SLOT_BYTES, 0xA5, np.uint8)  # poisoned: a byte never written stays 0xA5 (or fails the match)
    out = cuda.to_device(slot)
    _copy_one_run[1, 32](cuda.to_device(W), cuda.to_device(x), at, out, step == "v09")
    slot = out.copy_to_host()
    for r in range(m.ROWS_PER_WARP):
        for c in range(m.RUN_BYTES // 16):
            got = slot[r * m.RUN_BYTES + 16 * (c ^ r % 8) :][:16]
            assert np.array_equal(got, W[min(r, rows - 1), at + 16 * c :][:16]), (r, c)
    assert np.array_equal(slot[m.CODE_BYTES :], x[2 * at :][:256].view(np.uint8))


def _wavefronts(addresses):
    """Shared-memory wavefronts of one warp-wide access: the most distinct 4-byte words any one bank serves."""
    words = {}
    for a in addresses:
        for w in range(a // 4, (a + 7) // 4 + 1):  # an 8-byte read: two words
            words.setdefault(w % 32, set()).add(w)
    return max(len(v) for v in words.values())


def test_the_rings_swizzle_reads_without_bank_conflicts():
    """Each LDS.64 of read_run (lane (g, t): 8 bytes of chunk 2b + t // 2 of row 8j + g, the chunk swizzled to
    (2b + t // 2) ^ g) takes 2 wavefronts, the least 256 bytes can; unswizzled it would take 8. And the swizzle is a
    permutation of each row's chunks, so copy_run's stores and read_run's loads meet."""
    m = V08.module
    for swizzled, want in ((True, 2), (False, 8)):
        for j in range(4):
            for b in range(m.RUN_BLOCKS):
                addresses = []
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    chunk = (2 * b + t // 2) ^ (g if swizzled else 0)
                    addresses.append((8 * j + g) * m.RUN_BYTES + 16 * chunk + 8 * (t % 2))
                assert _wavefronts(addresses) == want, (swizzled, j, b)
    for g in range(8):
        assert sorted(c ^ g for c in range(m.RUN_BYTES // 16)) == list(range(m.RUN_BYTES // 16))


def test_dequant_gives_every_code_exactly_with_x_paired_to_match():
    """dequant turns the eight codes of a word into float16 pairs (q0, q4), (q1, q5), (q2, q6), (q3, q7), exactly,
    for every code -8 .. 7 in every nibble; pair_x pairs x's columns the same way."""
    from zoo.device.jit import jit

    dequant, pair_x = V07.module.dequant, V07.module.pair_x

    @jit
    def kernel(words, x, codes_out, x_out):
        for i in range(words.size):
            codes_out[4 * i], codes_out[4 * i + 1], codes_out[4 * i + 2], codes_out[4 * i + 3] = dequant(words[i])
        x_out[0], x_out[1], x_out[2], x_out[3] = pair_x(x[0], x[1], x[2], x[3])

    codes = np.array([[(c + k) % 16 - 8 for k in range(8)] for c in range(16)], np.int8)  # every code in every nibble
    words = np.array([sum((int(q) & 0xF) << 4 * k for k, q in enumerate(row)) for row in codes], np.uint32)
    x = np.arange(1, 9, dtype=np.float16).view(np.uint32)  # x0 .. x7 = 1 .. 8, two a word
    codes_out, x_out = np.zeros(4 * len(words), np.uint32), np.zeros(4, np.uint32)
    kernel[1, 1](words, x, codes_out, x_out)
    halves = codes_out.view(np.float16).reshape(-1, 4, 2)  # [word][pair][low, high]
    for row, got in zip(codes, halves, strict=True):
        np.testing.assert_array_equal(got, [[row[k], row[k + 4]] for k in range(4)])
    np.testing.assert_array_equal(x_out.view(np.float16).reshape(4, 2), [[1, 5], [2, 6], [3, 7], [4, 8]])


def test_few_rows_split_in_across_the_warps_of_a_block(monkeypatch):
    for step, warps_per_sm, want in ((V06, 16, [1, 2, 4, 8, 8]), (V07, 8, [4, 8, 8, 8, 8])):
        monkeypatch.setattr(step.module, "sm_count", lambda: 132)
        monkeypatch.setattr(step.module, "WARPS_PER_SM", warps_per_sm)
        monkeypatch.setattr(step.module, "WARPS_PER_BLOCK", 8)
        rows = (14336, 8192, 4096, 1000, 1)
        args = [(r, 32) for r in rows] if step is V06 else [(r,) for r in rows]  # v06: rows too short to split more
        assert [step.module.slices_for(*a) for a in args] == want, step.name


def test_v06_splits_long_rows_while_each_warp_keeps_four_trips(monkeypatch):
    monkeypatch.setattr(V06.module, "sm_count", lambda: 132)
    monkeypatch.setattr(V06.module, "WARPS_PER_SM", 16)
    monkeypatch.setattr(V06.module, "WARPS_PER_BLOCK", 8)
    cases = {  # (rows, chunks a row): slices; 32 chunks a trip a slice
        (14336, 512): 4,  # fp16 at 14336 x 4096: 4 trips a warp
        (14336, 256): 2,  # int8 at 14336 x 4096
        (14336, 1024): 8,  # fp32 at 14336 x 4096
        (14336, 255): 1,  # under 2 x 4 trips: no split
        (8192, 512): 4,  # int8 at 8192 x 8192: 2 for the SMs, 4 for the trips
        (4096, 256): 4,  # int8 at 4096 x 4096: 4 for the SMs, though the trips would take 2
        (28672, 1 << 20): 8,  # at most a block
    }
    assert {case: V06.module.slices_for(*case) for case in cases} == cases


# -- the machine code of each format (offline: NVVM and ptxas, no GPU) -------------------------------------------------
COMPILE = """
import json, sys
import zoo
from zoo.tools import machine_code
from zoo.kernels.gemv import ring
ring.table = lambda: ({}, {})  # no tune table: each class's default, so a case compiles the same kernel on any GPU
fam = zoo.family("gemv")
out = {}
for case in sys.argv[1:]:
    step, size, kind, *forced = case.split(":")
    if forced:  # a ring the case names, as kernel-slots-order-trigger (packed-3-after-2): the table's pick replaced
        name, slots, order, early = forced[0].split("-")
        ring.ring_for = lambda rows, kernels, r=ring.Ring(name, int(slots), order == "after", int(early)): r
    kernels = machine_code.compile_step(fam[step], (9, 0), tuple(int(d) for d in size.split("x")), kind)
    for k in kernels:
        machine_code.assemble(k, (9, 0), want_sass=True)
    out[case] = [dict(name=k.name, sass=k.sass, **k.report) for k in kernels]
print(json.dumps(out))
"""
# 64 x 4096: v06 splits in eight ways (16 groups of rows on 132 SMs); 8448 x 64: 2112 groups, one warp each
CASES = [f"{step}:64x4096:{kind}" for step in ("v03", "v05", "v06") for kind in ("fp32", "fp16", "int8", "int4")]
CASES += ["v06:8448x64:fp16", "v06:8448x64:int4"]


NEEDS_PTXAS = pytest.mark.skipif(
    machine_code._tool("ptxas") is None or machine_code._tool("nvdisasm") is None, reason="ptxas or nvdisasm missing"
)


def _compiled(cases):
    """{case: [the kernels its launch compiles, each a dict of name, sass and ptxas's report]}, for sm_90."""
    env = dict(os.environ, ZOO_TARGET="gpu")
    r = subprocess.run(
        [sys.executable, "-c", COMPILE, *cases], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200
    )
    assert r.returncode == 0, r.stderr[-3000:]
    compiled = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(compiled) == set(cases)
    return compiled


def _assert_nothing_spilled(kernel, case):
    """ptxas's report of a compiled kernel: no register spilled to local memory, no stack."""
    assert kernel["spill_stores"] == 0 and kernel["spill_loads"] == 0 and kernel["stack_bytes"] == 0, case


def _assert_two_blocks_fit_an_sm(kernel, case):
    """At most 128 registers a thread: two blocks of 256 threads an SM (the next kernel's block beside this one's)."""
    assert kernel["registers"] <= 128, f"{case}: two blocks of 256 threads an SM need 128 registers or fewer"


@NEEDS_PTXAS
def test_every_format_loads_16_bytes_and_v05_converts_no_integer():
    compiled = _compiled(CASES)
    for case, kernels in compiled.items():
        (k,) = kernels  # one kernel at these sizes: the 16-byte one
        _assert_nothing_spilled(k, case)
        assert "LDG.E.128" in k["sass"], f"{case}: no 128-bit load"
        assert ("BAR.SYNC" in k["sass"]) == case.startswith("v06:64x4096"), f"{case}: the split's barrier"
        i2f = "I2F" in k["sass"].replace("I2F.F64", "")  # I2F.F64: index arithmetic outside the loop, if any
        assert i2f == (case in ("v03:64x4096:int8", "v03:64x4096:int4")), f"{case}: int-to-float conversions {i2f}"


# v07 at 8192 x 4096: in split across the eight warps of a block (256 blocks); 33792 x 64: 1056 warps of 32 rows, one
# per slice; fp16: v06's kernel
V07_CASES = ["v07:8192x4096:int4", "v07:8192x4096:int4_g64", "v07:33792x64:int4", "v07:64x4096:fp16"]


@NEEDS_PTXAS
def test_v07_multiplies_int4_on_tensor_cores_from_8_byte_loads():
    for case, kernels in _compiled(V07_CASES).items():
        (k,) = kernels
        _assert_nothing_spilled(k, case)
        if case.endswith("fp16"):  # v06's kernel: 16-byte loads, FFMA
            assert k["name"] == "gemv_float" and "HMMA" not in k["sass"] and "LDG.E.128" in k["sass"], case
            continue
        assert k["name"] == "gemv_int4_mma", case
        for instruction in ("HMMA.16816.F32", "LDG.E.64", "LOP3.LUT", "HFMA2", "PRMT"):
            assert instruction in k["sass"], f"{case}: no {instruction}"
        assert "I2F" not in k["sass"].replace("I2F.F64", ""), f"{case}: an int-to-float conversion"
        assert ("BAR.SYNC" in k["sass"]) == case.startswith("v07:8192x4096"), f"{case}: the split's barrier"


# v08 at 8192 x 4096 (split across a block's eight warps) and 33792 x 256 (one run a warp, no split); fp16: v06's kernel
V08_CASES = ["v08:8192x4096:int4", "v08:8192x4096:int4_g64", "v08:33792x256:int4", "v08:64x4096:fp16"]


@NEEDS_PTXAS
def test_v08_streams_the_codes_through_shared_memory_with_cp_async():
    for case, kernels in _compiled(V08_CASES).items():
        (k,) = kernels
        _assert_nothing_spilled(k, case)
        if case.endswith("fp16"):
            assert k["name"] == "gemv_float", case
            continue
        assert k["name"] == "gemv_int4_ring", case
        for instruction in (
            "LDGSTS.E.BYPASS.128",
            "LDGDEPBAR",
            "DEPBAR.LE",
            "LDS.64",
            "LDS.128",
            "HMMA.16816.F32",
            "HFMA2",
        ):
            assert instruction in k["sass"], f"{case}: no {instruction}"
        assert k["sass"].count("LDGSTS") >= 9, f"{case}: a run is eight 16-byte copies of codes and one of x a lane"
        _assert_two_blocks_fit_an_sm(k, case)


V09_CASES = ["v09:8192x4096:int4", "v09:8192x4096:int4_g64"]  # the ring kernel only: its other launches are v06's


@NEEDS_PTXAS
def test_v09_asks_for_its_first_codes_before_waiting_for_the_kernel_before_it():
    """griddepcontrol.wait is ACQBULK in SASS and griddepcontrol.launch_dependents PREEXIT: the wait comes after the
    first run's eight copies of codes a lane and before any copy of x or read of a slot; the ring is v08's."""
    for case, kernels in _compiled(V09_CASES).items():
        (k,) = kernels
        sass = k["sass"]
        _assert_nothing_spilled(k, case)
        assert k["name"] == "gemv_int4_ring", case
        assert sass.count("ACQBULK") == 1 and "PREEXIT" in sass, f"{case}: the wait and the trigger"
        wait = sass.index("ACQBULK")
        assert sass.count("LDGSTS", 0, wait) == 8, f"{case}: the first run's codes before the wait, x after it"
        before = sass[:wait].replace("@!PT LDS RZ, [RZ]", "")  # ptxas's never-executed filler
        assert "LDS" not in before and "STG" not in before, f"{case}: nothing read or written before it"
        _assert_two_blocks_fit_an_sm(k, case)


# v10's kernels: in a multiple of 256 (whole runs), any rows (packed in 32s): 33 rows are two groups of 32, the second
# padded with 31 rows of zeros; 3 rows split the runs between two warps. 512, 1280 and 1024: two, five and four runs
PACKED_SIZES = {"int4": ((33, 512), (3, 1280)), "int4_g64": ((33, 1280), (3, 1024))}


@pytest.mark.parametrize("kernel", PACKED_KERNELS)
@pytest.mark.parametrize("kind", ["int4", "int4_g64"])
def test_v10_runs_each_kernel_on_packed_weights_for_any_rows(monkeypatch, kernel, kind):
    """v10 through Variant (which packs), each of its kernels the class's pick in turn: right on a poisoned output
    and on a second call with other inputs; shapes not of whole runs go to v09's launch."""
    monkeypatch.setattr(ring, "ring_for", lambda rows, kernels: ring.Ring(kernel, 2))
    for size in PACKED_SIZES[kind]:
        out = cuda.to_device(np.full(size[0], np.nan, np.float32))
        for seed in (1, 2):
            inputs = GEMV.inputs(size, seed, kind)
            since = launch_count()
            got = V10(*(cuda.to_device(a) for a in inputs), out=out).copy_to_host()
            assert launched_since(since).__name__ == PACKED_RING, (size, kind)
            ok, err, detail = harness.compare(got, GEMV.reference(*inputs), GEMV.tolerance(size))
            assert ok, (size, seed, detail)
    since = launch_count()
    assert harness.check(V10, (33, 320), seed=3, kind=kind).ok  # 320: a run and a block, v09's launch
    assert launched_since(since).__name__ != PACKED_RING


def test_pack_puts_each_warps_run_in_one_piece_and_pads_the_rows():
    """Row 32 q + r's bytes 128 k .. 128 k + 127 (run k) land at [q, 4096 k + 128 r], each word's column c at
    nibble (0, 4, 1, 5, 2, 6, 3, 7)[c] (dequant's pairs of nibbles j, j + 4 are then columns 2j, 2j + 1); its
    scales of run k (two of 128) at [q, 64 k + 2 r]; rows past the last are zeros; x is not copied; on the device
    it packs on the device and gives back the same library; fp16 weights come back as they are."""
    W, x, scales = GEMV.inputs((40, 512), 3, "int4")  # two runs; one group of 32 rows and 8 more
    packed_W, same_x, packed_scales = V10.module.pack(W, x, scales)
    assert same_x is x and packed_W.shape == (2, 16 * 512) and packed_scales.shape == (2, 32 * 4)
    for q, k, r in itertools.product(range(2), range(2), range(32)):
        row = 32 * q + r
        codes = packed_W[q, 4096 * k + 128 * r : 4096 * k + 128 * r + 128]
        two = packed_scales[q, 64 * k + 2 * r : 64 * k + 2 * r + 2]
        if row < 40:
            columns = SPEC.unpack_rows(W[row : row + 1, 128 * k : 128 * k + 128], 256).reshape(-1, 8)
            nibbles = SPEC.unpack_rows(codes[None], 256).reshape(-1, 8)  # nibble j of each word in column j
            assert np.array_equal(nibbles[:, [0, 4, 1, 5, 2, 6, 3, 7]], columns), (q, k, r)
            assert np.array_equal(two, scales[row, 2 * k : 2 * k + 2]), (q, k, r)
        else:
            assert not codes.any() and not two.any(), (q, k, r)
    on_device = V10.module.pack(*(cuda.to_device(a) for a in (W, x, scales)))
    assert all(hasattr(a, "copy_to_host") for a in on_device)
    assert np.array_equal(on_device[0].copy_to_host(), packed_W)
    assert np.array_equal(on_device[2].copy_to_host(), packed_scales)
    W16, x16 = GEMV.inputs((40, 512), 3, "fp16")
    assert V10.module.pack(W16, x16) == (W16, x16)


def test_v10_refuses_int4_weights_it_did_not_pack(no_launch):
    """v10's launch on the row-major int4 weights its kernel would take: an error naming pack, not a wrong answer;
    on a packed W of the wrong rows for out: an error too."""
    module = V10.module
    W, x, scales = GEMV.inputs((33, 512), 1, "int4")
    out = cuda.to_device(np.full(33, np.nan, np.float32))
    with pytest.raises(ValueError, match="pass W and scales through pack"):
        module.launch(*(cuda.to_device(a) for a in (W, x, scales)), out)
    packed = module.pack(*(cuda.to_device(a) for a in GEMV.inputs((70, 512), 1, "int4")))
    with pytest.raises(ValueError, match="must have 2 rows"):
        module.launch(*packed, out)


def test_a_decode_loop_of_plain_calls_packs_the_weights_once(monkeypatch):
    """v10 called as every step is, ``gemv["v10"](W, x, scales)``, in a loop on the same device weights and a new x
    each call (a decode loop): the weights are packed on the first call and found packed on every later one
    (``Variant.prepared``), and each product is right; other weights are packed on their own first call."""
    V10.prepared.clear()
    hits, misses = V10.prepared.hits, V10.prepared.misses
    W, _, scales = (cuda.to_device(a) for a in GEMV.inputs((33, 512), 1, "int4"))
    for seed in range(3):
        x = GEMV.inputs((33, 512), seed, "int4")[1]
        host = (W.copy_to_host(), x, scales.copy_to_host())
        got = V10(W, cuda.to_device(x), scales).copy_to_host()
        assert harness.compare(got, GEMV.reference(*host), GEMV.tolerance((33, 512)))[0], seed
    assert (V10.prepared.misses - misses, V10.prepared.hits - hits) == (1, 2)
    W2, x2, scales2 = (cuda.to_device(a) for a in GEMV.inputs((33, 512), 7, "int4"))
    V10(W2, x2, scales2)
    assert V10.prepared.misses - misses == 2


def test_one_group_a_block_makes_a_block_of_each_group_of_32_rows(monkeypatch):
    """v10's grids: the same slices (warps a group of 32 rows) for each kernel; "one_group_a_block" one block a group
    of its slices' warps, the others a block of all the warps, 8 / slices groups. On 132 SMs with eight warps a block
    (the GPU's): 14336 x 4096 is 448 blocks of four warps (the others: 224 of eight), 4096 x 14336 and 8192 x 8192
    the same grid. In the simulator (two warps a block, one SM) 33 rows are two blocks of one warp each (one of
    two)."""
    grid = V10.module.grid_for
    for rows in (1, 3, 33, 70, 1000):
        slices = grid(rows)[0]
        assert grid(rows, "one_group_a_block") == (slices, -(-rows // 32), 32 * slices), rows
        assert grid(rows, "immediate_offsets") == grid(rows), rows
    if zoo.SIMULATOR:
        assert grid(33) == (1, 1, 64) and grid(33, "one_group_a_block") == (1, 2, 32)
    monkeypatch.setattr(V10.module, "WARPS_PER_BLOCK", 8)
    monkeypatch.setattr(V10.module, "WARPS_PER_SM", 8)
    monkeypatch.setattr(V10.module, "sm_count", lambda: 132)
    assert (grid(14336), grid(14336, "one_group_a_block")) == ((4, 224, 256), (4, 448, 128))
    for rows in (4096, 8192):
        assert grid(rows, "one_group_a_block") == grid(rows) == (8, rows // 32, 256), rows


PACKED_CASES = [f"v10:4096x14336:{kind}:{k}-2-before-0" for k in PACKED_KERNELS for kind in ("int4", "int4_g64")]
# a copy of 16 bytes: its shared address [Rd + offset], then its global one [Rs.64 + offset]
COPY = re.compile(r"LDGSTS\.E\.BYPASS\.128 \[(R\d+)(?:\+0x[0-9a-f]+)?\], desc\[\w+\]\[(R\d+)\.64")


@NEEDS_PTXAS
def test_packed_kernels_read_global_memory_only_through_their_copies():
    """v10's kernels, groups of 128 and 64: before the wait the first run's copies (eight of codes, one of scales)
    and in each refill (and x's), and no other load from global memory: no last blocks; 128 registers, nothing
    spilled. A slot's reads come before the copies into it, the math after them (refilled before the math). The
    immediate-offset kernels' eight copies of a refill's codes use two shared and at most two global base registers,
    their offsets folded into the instructions (ptxas splits the global one's 3.5 KB span where its immediate's range
    ends), where "packed"'s use about one of each a copy."""
    for case, kernels in _compiled(PACKED_CASES).items():
        (k,) = kernels
        sass, kernel = k["sass"], case.split(":")[3].split("-")[0]
        assert k["name"] == PACKED_RING, case
        _assert_nothing_spilled(k, case)
        _assert_two_blocks_fit_an_sm(k, case)
        assert sass.count("LDGSTS", 0, sass.index("ACQBULK")) == 9, f"{case}: the first run's copies before the wait"
        assert not re.search(r"\bLDG\.", sass), f"{case}: a load from global memory besides the copies"
        landed = sass.index("DEPBAR.LE")  # the loop's wait for run r; then its reads, the refill, the math
        refill = sass.index("LDGSTS", landed)  # the loop's first copy: the refill's codes first
        assert sass.index("LDS", landed) < refill, f"{case}: a slot refilled before it was read"
        assert "HMMA" not in sass[landed:refill] and "HMMA" in sass[refill:], f"{case}: the math after the refill"
        codes = COPY.findall(sass, refill)[:8]
        shared, global_ = {d for d, _ in codes}, {s for _, s in codes}
        if kernel == "packed":
            assert len(shared) > 2 and len(global_) > 2, f"{case}: {codes}"  # about one pair a copy
        else:
            assert len(shared) == 2 and len(global_) <= 2, f"{case}: {codes}"


@NEEDS_PTXAS
def test_blocks_of_one_group_of_four_warps_with_three_slots_fit_four_an_sm():
    """ "one_group_a_block" at 14336 x 4096 (four warps a group on 132 SMs) with three slots: 128 registers and 512 B
    of static shared memory, its four warps' sums, so that four blocks fit an SM's 228 KB with their rings (4 x
    56,832 B) and the 1 KB the GPU keeps a block: sixteen warps, as many as the registers hold."""
    case = "v10:14336x4096:int4:one_group_a_block-3-after-2"
    (k,) = _compiled([case])[case]
    assert k["name"] == PACKED_RING
    _assert_nothing_spilled(k, case)
    assert k["registers"] <= 128 and k["shared_bytes"] == 4 * 32 * 4, case
    rings = 4 * 3 * V10.module.slot_bytes(128)
    assert 4 * (rings + k["shared_bytes"] + 1024) <= 228 * 1024, case


# -- the goals' sweep -------------------------------------------------------------------------------------------------
def test_sweep_writes_csv_and_png_with_the_quantization_error(zoo_cli, tmp_path):
    import csv

    from zoo.bench import sweeps
    from zoo.kernels.gemv.sweeps import formats as sweep

    r = zoo_cli("gemv-formats", "--out", str(tmp_path), "--sizes", "9x320")
    assert r.returncode == 0, r.stdout + r.stderr
    (table,) = tmp_path.glob("*-gemv-formats.csv")
    (png,) = tmp_path.glob("*-gemv-formats.png")
    assert png.stat().st_size > 0
    with open(table, newline="") as f:
        assert tuple(next(csv.reader(f))) == sweep.COLUMNS
    rows = sweeps.read_csv(table)
    assert [r["kind"] for r in rows] == list(GEMV.kinds)
    assert all(r["correct"] == "True" for r in rows)
    kernels = {r["kind"]: r["kernel"] for r in rows}  # what ran: at in = 320 (not whole runs of 256) v06's kernel
    assert kernels["int4"] == kernels["int4_g64"] == "gemv_quantized", kernels
    assert all(k.startswith("gemv") for k in kernels.values()), kernels
    errors = {r["kind"]: float(r["quantization_error"]) for r in rows}
    assert errors["fp32"] == 0 < errors["fp16"] < errors["int8"] < errors["int4"]
    assert "int4" in r.stdout and "error of each format" in r.stdout  # the findings


def test_read_roof_reads_every_byte_once_in_each_form(zoo_cli, tmp_path):
    """gemv-read-roof in the simulator: each form's kernel XORs every word of fp16's and int4's bytes (a random
    array: a chunk read twice or missed changes the XOR), at a size whose chunks are not a multiple of the grid."""
    from zoo.bench import sweeps
    from zoo.kernels.gemv.sweeps import read_roof as sweep_read_roof

    r = zoo_cli("gemv-read-roof", "--out", str(tmp_path), "--sizes", "9x320")
    assert r.returncode == 0, r.stdout + r.stderr
    (table,) = tmp_path.glob("*-gemv-read-roof.csv")
    rows = sweeps.read_csv(table)
    assert [(r["kind"], r["form"]) for r in rows] == [(k, f) for k in ("fp16", "int4") for f in sweep_read_roof.FORMS]
    assert all(r["correct"] == "True" for r in rows), rows


def test_read_roof_findings_compare_the_step_with_the_roof():
    from zoo.kernels.gemv.sweeps import read_roof as roof

    times = {"fp16": (40.0, 37.5, 44.5, 42.0, 40.2), "int4": (11.5, 9.6, 11.0, 10.5, 11.2)}  # the forms, then step
    rows = [
        dict(size="4096x14336", kind=kind, form=form, graph_us=us)
        for kind, values in times.items()
        for form, us in zip((*roof.FORMS, "step"), values, strict=True)
    ]
    roof._ratios(rows)
    text = "\n".join(roof.findings(rows))
    assert "reaches 3.48x fp16's weights per second without dependent launch, 3.91x with every read" in text
    assert "4.05x with 64 KB an SM before it and 4.00x with 128 KB (10.50 us against 11.00)" in text
    assert "; the steps reach 3.59x (goal 3.5x)" in text
    assert "The int4 step (11.20 us) runs at 98% of the 64 KB roof's speed (11.00 us)" in text
    assert "would reach 3.65x the fp16 step" in text
    assert len(roof.plot(rows, "a GPU").axes) == 1


def test_sweep_findings_state_the_goals():
    from zoo.kernels.gemv.sweeps import formats as sweep

    def row(kind, graph_us, copy_us, cublas_us, eager_us):
        weights = 8192 * 8192
        return dict(
            size="8192x8192",
            kind=kind,
            quantization_error=0.1,
            graph_us=graph_us,
            eager_us=eager_us,
            gweights_per_s=weights / graph_us / 1e3,
            copy_us=copy_us,
            of_copy=copy_us / graph_us,
            over_cublas_fp16=cublas_us / graph_us,
        )

    rows = [row("fp16", 36.0, 33.0, 37.0, 40.0), row("int4", 10.0, 9.0, 37.0, 16.0)]
    text = "\n".join(sweep.findings(rows))
    assert "fp16 at 92% of the copy bandwidth" in text and "1.03x cuBLAS fp16 (goal: 90% and 1x, met)" in text
    assert "int4 3.60x the fp16 weights per second (goal 3.5x, met; a kernel that only copied int4's bytes" in text
    assert "would reach 4.00x)" in text  # fp16's 36 us over the 9 us copy of int4's bytes: the goal's ceiling
    rows[1] = row("int4", 11.0, 9.0, 37.0, 16.0)
    assert "(goal 3.5x, not met;" in "\n".join(sweep.findings(rows))
    fig = sweep.plot(rows, "a GPU")  # rows as a GPU run writes them: a bar per kind and one for cuBLAS
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fp16", "int4", "cuBLAS fp16"]
    assert ax.patches[-1].get_height() == pytest.approx(rows[0]["gweights_per_s"] / rows[0]["over_cublas_fp16"])
