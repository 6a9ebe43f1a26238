"""Histogram beyond the generic checks: repeated calls, the input kinds, extreme contention,
misaligned views for the wide-load steps, grid-stride passes, the int32 limit."""

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.device import memory
from zoo.kernels.histogram import bins

HIST = zoo.family("histogram")
WIDE = ["v04", "v05", "v06"]  # the steps that load 4 or 16 bytes at a time


def _counts(x):
    return np.bincount(x, minlength=256)


@pytest.mark.parametrize("variant", HIST.variants, ids=lambda v: v.name)
def test_second_call_into_the_same_output_starts_from_zero(variant):
    # The same device output twice, new data and a new size: counts of the first
    # call must not leak into the second (out is zeroed in the launch).
    out = cuda.to_device(np.full(256, -7, np.int32))
    for size, seed, kind in ((700, 11, "skewed"), (333, 12, "uniform")):
        (x,) = HIST.inputs(size, seed, kind)
        got = variant(cuda.to_device(x), out=out).copy_to_host()
        assert np.array_equal(got, _counts(x)), f"{variant.name} at {size} {kind}"


@pytest.mark.parametrize("value", [0, 255])
@pytest.mark.parametrize("variant", HIST.variants, ids=lambda v: v.name)
def test_every_element_equal_is_counted_exactly(variant, value):
    # Extreme contention: every lane of every warp hits one bin (255 also checks the top byte of a word).
    x = np.full(1037, value, np.uint8)
    got = variant(x)
    assert got[value] == x.size and np.count_nonzero(got) == 1


@pytest.mark.parametrize("offset,size", [(1, 1037), (3, 1001), (5, 3), (15, 40)])
@pytest.mark.parametrize("name", WIDE)
def test_views_starting_off_a_word_boundary(name, offset, size):
    # A contiguous slice at an odd address: the wide loads (which check the real
    # address in the simulator) must start at the first aligned byte.
    (base,) = HIST.inputs(size + 32, 9, "skewed")
    d_base = cuda.to_device(base)
    start = (-bins.address(d_base)) % 16 + offset  # offset bytes past a 16-byte boundary
    view = d_base[start : start + size]
    assert bins.address(view) % 16 == offset % 16
    got = HIST[name](view, out=cuda.device_array(256, np.int32)).copy_to_host()
    assert np.array_equal(got, _counts(base[start : start + size]))


@pytest.mark.skipif(not zoo.SIMULATOR, reason="the simulator's Python loads are what check alignment")
def test_wide_loads_refuse_a_misaligned_address():
    # What makes the test above able to fail: a misaligned load raises in the simulator.
    d = cuda.to_device(np.arange(64, dtype=np.uint8))
    start = (-bins.address(d)) % 16
    aligned = d[start : start + 32]
    assert memory.load_word(aligned, 4) == 0x03020100 + 0x04040404 * (start + 1)
    with pytest.raises(IndexError):
        memory.load_word(aligned, 2)
    with pytest.raises(IndexError):
        memory.load_words4(aligned, 4)


@pytest.mark.parametrize(
    "address,size,width,expected",
    [(0, 100, 16, (0, 6)), (1, 100, 16, (15, 5)), (13, 2, 4, (2, 0)), (3, 9, 4, (1, 2)), (4, 3, 4, (0, 0))],
)
def test_split_into_head_chunks_and_tail(monkeypatch, address, size, width, expected):
    monkeypatch.setattr(bins, "address", lambda arr: address)
    assert bins.split(np.zeros(size, np.uint8), width) == expected


@pytest.mark.parametrize("name", ["v01", "v03", "v04", "v06"])
def test_grid_stride_loop_takes_several_passes(name, monkeypatch):
    # One block of 64 simulator threads: v06's warps go round its warp-uniform loop 4 times.
    monkeypatch.setattr(HIST[name].module, "BLOCKS_PER_SM", 1)
    (x,) = HIST.inputs(4099, 4, "skewed")
    assert np.array_equal(HIST[name](x), _counts(x))


def test_skewed_inputs_are_ninety_percent_one_value():
    for seed in (0, 1, 2):
        (x,) = HIST.make_inputs(200_000, seed, "skewed")
        share = _counts(x).max() / x.size
        assert 0.89 < share < 0.91, share
    hot = {int(_counts(HIST.make_inputs(1000, s, "skewed")[0]).argmax()) for s in range(8)}
    assert len(hot) > 1, "the hot value varies with the seed"
    (u,) = HIST.make_inputs(200_000, 0, "uniform")
    assert _counts(u).max() / u.size < 0.01 and np.count_nonzero(_counts(u)) == 256


def test_more_elements_than_an_int32_count_holds_is_refused():
    class Huge:
        size = 2**31

    with pytest.raises(ValueError, match="int32"):
        HIST.output_for(Huge())
    assert HIST.output_for(np.zeros(5, np.uint8)) == ((256,), np.int32)
