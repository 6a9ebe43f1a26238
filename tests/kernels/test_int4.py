"""Int4 beyond the generic checks: the packing (NumPy reference and GPU kernels, exactly), every byte
value through every step, views off a word boundary, grid-stride passes, the CuPy rows' logic."""

import sys
import types

import numpy as np
import pytest
from numba import cuda

import zoo
from zoo.errors import OutOfRange
from zoo.kernels import int4 as spec
from zoo.kernels.int4 import alignment, packing

INT4 = zoo.family("int4")
WIDE = {"v02": 4, "v03": 16, "v04": 16, "v05": 16}  # steps that walk aligned pieces, and the piece's bytes


def _nibble(v):
    """The signed value of a 4-bit pattern, by the definition: 8..15 are -8..-1."""
    return v - 16 if v >= 8 else v


# -- the NumPy reference of the packing ------------------------------------------------------
def test_the_docstring_example():
    assert spec.pack_codes_reference([3, -3, 7, -8, 1]).tolist() == [0xD3, 0x87, 0x01]
    assert spec.unpack_codes_reference(np.array([0xD3, 0x87, 0x01], np.uint8), 5).tolist() == [3, -3, 7, -8, 1]


def test_every_byte_unpacks_to_its_two_nibbles_and_packs_back():
    b = np.arange(256, dtype=np.uint8)
    codes = spec.unpack_codes_reference(b)
    assert codes[0::2].tolist() == [_nibble(v & 15) for v in range(256)]  # low nibble: the even element
    assert codes[1::2].tolist() == [_nibble(v >> 4) for v in range(256)]
    assert np.array_equal(spec.pack_codes_reference(codes), b)


def test_quantize_rounds_half_to_even_and_clamps():
    scale = np.float32(0.25)
    steps = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 6.5, 7.5, -7.5, -8.5, 0.49, 100, -100], np.float32)
    q = spec.quantize_reference(steps * scale, scale)  # x / scale gives the steps back exactly
    assert q.tolist() == [0, 2, 2, 0, -2, -2, 6, 7, -8, -8, 0, 7, -8]
    special = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
    assert spec.quantize_reference(special, 1.0).tolist() == [0, 7, -8, 0]


def test_odd_n_leaves_the_last_high_nibble_zero():
    x = np.full(7, -1.0, np.float32)  # code -1: nibble 0xF
    packed = spec.pack_reference(x, 1.0)
    assert packed.tolist() == [0xFF, 0xFF, 0xFF, 0x0F]


def test_relu_table():
    table = spec.relu_bytes(np.arange(256, dtype=np.uint8))
    for b in range(256):
        lo, hi = max(_nibble(b & 15), 0), max(_nibble(b >> 4), 0)
        assert table[b] == lo | hi << 4, b


def test_rates():
    assert spec.bytes_moved(5) == 6 and spec.bytes_moved(1 << 28) == 1 << 28
    assert spec.flops(5) == 5  # one ReLU per element: the GFLOP/s column is the element rate


def test_make_inputs_use_the_whole_code_range():
    (packed,) = INT4.make_inputs(100_000, 0)
    codes = spec.unpack_codes_reference(packed)
    assert set(np.unique(codes).tolist()) == set(range(-8, 8))
    assert 0.38 < np.mean(codes < 0) < 0.42  # x < -0.25: 40% of N(0, 1)


# -- pack and unpack on the GPU (the simulator here) -----------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 31, 1000])
def test_pack_matches_the_reference_exactly(n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    ties = (np.arange(-9, 9) + np.float32(0.5)).astype(np.float32) * np.float32(0.5)  # x / 0.5 = k + 0.5
    x[: min(n, ties.size)] = ties[: min(n, ties.size)]
    if n > 20:
        x[18:20] = [np.nan, np.inf]
    got = packing.pack(x, 0.5)
    assert got.dtype == np.uint8 and got.shape == ((n + 1) // 2,)
    assert np.array_equal(got, spec.pack_reference(x, 0.5))
    if n % 2:
        assert got[-1] >> 4 == 0


@pytest.mark.parametrize("n", [1, 6, 33])
def test_unpack_matches_the_reference_exactly(n):
    (packed,) = INT4.make_inputs(n, n)
    if n % 2:
        packed[-1] |= 0xA0  # an unused high nibble is ignored
    for scale in (1.0, 0.37):
        got = packing.unpack(packed, n, scale)
        assert got.dtype == np.float32 and got.shape == (n,)
        assert np.array_equal(got, spec.unpack_reference(packed, n, scale))


def test_unpack_every_byte_and_device_arrays_stay_on_the_device():
    b = cuda.to_device(np.arange(256, dtype=np.uint8))
    got = packing.unpack(b, 512)
    assert not isinstance(got, np.ndarray)
    assert got.copy_to_host().tolist() == [float(_nibble(v)) for byte in range(256) for v in (byte & 15, byte >> 4)]


def test_pack_then_unpack_is_the_rounded_clamped_input():
    x = np.linspace(-5, 5, 41, dtype=np.float32)
    y = packing.unpack(packing.pack(x, 0.5), x.size, 0.5)
    assert np.array_equal(y, np.clip(np.rint(x / np.float32(0.5)), -8, 7).astype(np.float32) * np.float32(0.5))


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((np.zeros(4, np.float64), 1.0), TypeError, "x must be float32"),
        ((np.zeros((2, 2), np.float32), 1.0), ValueError, "1 dimension"),
        ((np.zeros(0, np.float32), 1.0), ValueError, "empty"),
        ((np.zeros(8, np.float32)[::2], 1.0), ValueError, "contiguous"),
        ((np.zeros(4, np.float32), 0.0), ValueError, "positive finite"),
        ((np.zeros(4, np.float32), -1.0), ValueError, "positive finite"),
        ((np.zeros(4, np.float32), float("nan")), ValueError, "positive finite"),
        ((np.zeros(4, np.float32), float("inf")), ValueError, "positive finite"),
        ((np.zeros(4, np.float32), 1e-50), ValueError, "positive finite"),  # 0 as a float32
        ((np.zeros(4, np.float32), "2"), TypeError, "real number"),
        ((np.zeros(4, np.float32), True), TypeError, "real number"),
        (([1.0, 2.0], 1.0), TypeError, "NumPy, CuPy or numba"),
    ],
)
def test_pack_refuses_bad_input_before_any_launch(no_launch, args, error, match):
    with pytest.raises(error, match=match):
        packing.pack(*args)


def test_pack_and_unpack_refuse_a_wrong_out_or_n(no_launch):
    with pytest.raises(ValueError, match="out must be uint8 of shape \\(3,\\)"):
        packing.pack(np.zeros(5, np.float32), 1.0, out=np.zeros(2, np.uint8))
    packed = np.zeros(3, np.uint8)
    for n in (4, 7, 0):
        with pytest.raises(ValueError, match="hold 5 or 6 elements"):
            packing.unpack(packed, n)
    with pytest.raises(TypeError, match="n must be an integer"):
        packing.unpack(packed, 5.0)
    with pytest.raises(TypeError, match="packed must be uint8"):
        packing.unpack(packed.view(np.int8), 5)
    with pytest.raises(ValueError, match="out must be float32 of shape \\(5,\\)"):
        packing.unpack(packed, 5, out=np.zeros(6, np.float32))


# -- the steps ---------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", INT4.variants, ids=lambda v: v.name)
def test_every_byte_value(variant):
    b = np.arange(256, dtype=np.uint8)
    assert np.array_equal(variant(b), spec.relu_bytes(b))


@pytest.mark.parametrize("variant", INT4.variants, ids=lambda v: v.name)
def test_second_call_into_the_same_output(variant):
    out = cuda.to_device(np.full(20, 0xFF, np.uint8))
    for seed in (1, 2):
        (x,) = INT4.make_inputs(40, seed)
        assert np.array_equal(variant(cuda.to_device(x), out=out).copy_to_host(), spec.relu_bytes(x))


def _launched(kernel, monkeypatch):
    """The (config, args) of every launch of ``kernel`` while the test runs."""
    calls = []
    original = type(kernel).__getitem__

    def spy(self, config):
        launcher = original(self, config)
        if self is not kernel:
            return launcher

        def launch(*args):
            calls.append((config, args))
            return launcher(*args)

        return launch

    monkeypatch.setattr(type(kernel), "__getitem__", spy)
    return calls


@pytest.mark.parametrize("name", sorted(WIDE))
@pytest.mark.parametrize("in_offset,out_offset,size", [(0, 0, 100), (1, 1, 77), (3, 3, 5), (5, 21, 90), (2, 7, 90)])
def test_views_off_a_word_boundary(name, in_offset, out_offset, size, monkeypatch):
    # Slices of device arrays at chosen offsets from a 16-byte boundary: the wide loads and stores
    # (which check the real address in the simulator) must only ever see aligned bytes.
    step = INT4[name]
    (wide_kernel,) = step.kernels
    calls = _launched(wide_kernel, monkeypatch)
    (base,) = INT4.make_inputs(2 * (size + 32), 9)
    d_in, d_out = cuda.to_device(base), cuda.to_device(np.full(size + 32, 0xFF, np.uint8))
    start_in = -alignment.address(d_in) % 16 + in_offset
    start_out = -alignment.address(d_out) % 16 + out_offset
    view_in, view_out = d_in[start_in : start_in + size], d_out[start_out : start_out + size]
    step(view_in, out=view_out)
    after = d_out.copy_to_host()
    assert np.array_equal(after[start_out : start_out + size], spec.relu_bytes(base[start_in : start_in + size]))
    assert (np.delete(after, np.s_[start_out : start_out + size]) == 0xFF).all(), "wrote outside out"
    same_offset = (in_offset - out_offset) % WIDE[name] == 0
    parts = alignment.split(view_in, view_out, WIDE[name])
    assert (parts is not None) == same_offset
    ((_, args),) = calls
    head, pieces = int(args[2]), int(args[3])
    # both views can be aligned: the split's head and pieces; else no pieces and every byte is tail
    assert (head, pieces) == (parts if same_offset else (0, 0))


@pytest.mark.parametrize("name", sorted(WIDE))
def test_grid_stride_loop_takes_several_passes(name, monkeypatch):
    # 32 threads in one block: 2050 bytes take v02 16 passes, v03/v04 5, v05 two (the second partial).
    monkeypatch.setattr(INT4[name].module, "BLOCKS_PER_SM", 1)
    monkeypatch.setattr(INT4[name].module, "THREADS_PER_BLOCK", 32)
    (x,) = INT4.make_inputs(4099, 4)
    assert np.array_equal(INT4[name](x), spec.relu_bytes(x))


@pytest.mark.parametrize("name", sorted(WIDE))
def test_word_steps_refuse_2_to_the_31_bytes(name):
    huge = np.broadcast_to(np.uint8(0), (1 << 31,))  # no memory behind it
    with pytest.raises(OutOfRange, match="fewer than 2\\^31"):
        INT4[name].module.validate(huge)


def test_split():
    class At:
        def __init__(self, address, size):
            self.__cuda_array_interface__ = {"data": (address, False)}
            self.size = size

    assert alignment.split(At(0, 100), At(32, 100), 16) == (0, 6)
    assert alignment.split(At(13, 100), At(29, 100), 16) == (3, 6)
    assert alignment.split(At(13, 2), At(29, 2), 16) == (2, 0)
    assert alignment.split(At(1, 100), At(2, 100), 4) is None


# -- the CuPy rows, with NumPy standing in for CuPy ---------------------------------------------
@pytest.fixture
def fake_cupy(monkeypatch):
    fake = types.SimpleNamespace(asnumpy=np.asarray, asarray=np.array, empty=np.empty, maximum=np.maximum, take=np.take)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(spec, "_TABLE", {})
    monkeypatch.setattr(spec, "_WIDER_OPERANDS", {})
    return fake


def test_baseline_table_gives_the_reference(fake_cupy):
    (x,) = INT4.make_inputs(1001, 3)
    out = np.full_like(x, 0xFF)
    spec.baseline(x, out)
    assert np.array_equal(out, INT4.reference(x))


def test_float32_and_int8_rows_compute_relu_of_the_same_tensor(fake_cupy, monkeypatch):
    monkeypatch.setattr("zoo.device.properties", lambda: {"l2_bytes": 4000})
    (x,) = INT4.make_inputs(1001, 3)  # 501 bytes: 1002 float32 (4008 bytes, 2 copies), 1002 int8 (8 copies)
    codes = spec.unpack_codes_reference(x)
    for row, dtype, copies, expected in (
        (spec.float32_relu, np.float32, 2, np.maximum(codes * spec.SCALE, 0)),
        (spec.int8_relu, np.int8, 8, np.maximum(codes, 0)),
    ):
        for _ in range(copies + 1):
            row(x, None)
        sources, dest, calls = spec._WIDER_OPERANDS[(1002, np.dtype(dtype).str)]
        assert len(sources) == copies and calls == copies + 1
        assert dest.dtype == dtype and np.array_equal(dest, expected.astype(dtype))
    (y,) = INT4.make_inputs(33, 3)
    spec.int8_relu(y, None)
    assert list(spec._WIDER_OPERANDS) == [(34, np.dtype(np.int8).str)], "a new size frees the old arrays"
