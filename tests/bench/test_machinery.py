"""The registry's optional mechanisms: kinds of input, several dtypes, a tolerance that grows with the
size, extra baselines, launch-only steps with a base and sweep commands. Each is exercised on a throwaway family."""

import csv

import numpy as np
import pytest
from numba import cuda, float32  # after zoo, which picks the simulator or the GPU
from tmpfamily import SPEC, good, load, make_family

import zoo
from zoo.bench import harness, results, sweeps
from zoo.registry import RegistryError

KINDS_SPEC = (
    SPEC.replace("DTYPE = np.float32", "DTYPE = (np.float32, np.int32)")
    .replace("TOLERANCE = 1e-6", "TOLERANCE = lambda size: 1e-6 * size")
    .replace(
        """def make_inputs(size, seed):
    return (np.random.default_rng(seed).standard_normal(int(size), dtype=np.float32),)""",
        """INPUT_KINDS = ("float32", "int32")
EXTRA_BASELINES = {"other_library": lambda x, out: None}
CEILINGS = {"copy": lambda x, out: None}


def make_inputs(size, seed, kind="float32"):
    rng = np.random.default_rng(seed)
    if kind == "int32":
        return (rng.integers(-100, 100, int(size), dtype=np.int32),)
    return (rng.standard_normal(int(size), dtype=np.float32),)""",
    )
    .replace("return x.shape, np.float32", "return x.shape, x.dtype")
)


@pytest.fixture
def kinds_family(tmp_path, monkeypatch):
    return load(tmp_path, "scale_kinds", {"v01_plain.py": good()}, monkeypatch, spec=KINDS_SPEC)


def test_every_size_is_a_case_of_every_kind(kinds_family):
    fam = kinds_family
    assert fam.kinds == ("float32", "int32")
    assert fam.cases([1, 33]) == [(1, "float32"), (1, "int32"), (33, "float32"), (33, "int32")]
    assert fam.inputs(33, 0)[0].dtype == np.float32
    assert fam.inputs(33, 0, "int32")[0].dtype == np.int32
    with pytest.raises(ValueError, match="no input kind 'int8'"):
        fam.inputs(33, 0, "int8")
    with pytest.raises(ValueError, match="has no kinds of input"):
        zoo.family("vector_add").inputs(33, 0, "int32")


def test_each_kind_is_checked(kinds_family):
    v = kinds_family[1]
    for kind in kinds_family.kinds:
        r = harness.check(v, 1000, seed=3, kind=kind)
        assert r.ok, r.detail
    # integer results are compared exactly, whatever the tolerance says
    (x,) = kinds_family.inputs(33, 0, "int32")
    wrong = v(x) + np.int32(1)
    assert not harness.compare(wrong, kinds_family.reference(x), kinds_family.tolerance(33))[0]


def test_dtype_tuple_accepts_each_and_names_them_all(kinds_family):
    v = kinds_family[1]
    with pytest.raises(TypeError, match="must be float32 or int32, got float64"):
        v(np.ones(5))


def test_arrays_of_one_call_share_a_dtype(tmp_path, monkeypatch):
    spec = KINDS_SPEC.replace('INPUTS = ("x",)', 'INPUTS = ("x", "y?")')
    fam = load(tmp_path, "scale_pair", {"v01_plain.py": good()}, monkeypatch, spec=spec)
    with pytest.raises(TypeError, match="share one dtype"):
        fam.validate(np.ones(5, np.float32), np.ones(5, np.int32))


# A family whose inputs differ in dtype and rank (a matrix of codes, a float vector, optional scales), and whose
# kinds of input differ in bytes: DTYPE and NDIM given input by input, bytes_moved(size, kind).
MIXED_SPEC = (
    KINDS_SPEC.replace('INPUTS = ("x",)', 'INPUTS = ("codes", "x", "scales?")')
    .replace(
        "DTYPE = (np.float32, np.int32)",
        'DTYPE = {"codes": (np.float32, np.int8), "x": np.float32, "scales": np.float32}',
    )
    .replace("NDIM = 1", 'NDIM = {"codes": 2, "x": 1, "scales": 1}')
    .replace(
        "def bytes_moved(size):\n    return 8 * int(size)",
        "def bytes_moved(size, kind='float32'):\n    return (4 if kind == 'float32' else 1) * int(size)",
    )
)


def test_inputs_may_each_have_their_dtype_and_rank(tmp_path, monkeypatch):
    fam = load(tmp_path, "scale_mixed", {"v01_plain.py": good()}, monkeypatch, spec=MIXED_SPEC)
    codes, x, scales = np.ones((3, 5), np.int8), np.ones(5, np.float32), np.ones(3, np.float32)
    assert fam.validate(codes, x, scales) == "numpy"  # three dtypes, two ranks: no "share one dtype"
    assert fam.validate(codes.astype(np.float32), x) == "numpy"  # the optional input left out
    assert fam.dtypes == (np.dtype(np.float32), np.dtype(np.int8))  # the first input's
    with pytest.raises(TypeError, match="codes must be float32 or int8, got int16"):
        fam.validate(codes.astype(np.int16), x)
    with pytest.raises(TypeError, match="x must be float32, got int8"):
        fam.validate(codes, x.astype(np.int8))
    with pytest.raises(ValueError, match="scales must have 1 dimension"):
        fam.validate(codes, x, scales[None])
    with pytest.raises(ValueError, match="codes must have 2 dimension"):
        fam.validate(codes[0], x)


def test_a_dtype_dict_must_name_every_input(tmp_path, monkeypatch):
    spec = MIXED_SPEC.replace(', "scales": np.float32}', "}")
    fam = load(tmp_path, "scale_mixed_bad", {"v01_plain.py": good()}, monkeypatch, spec=spec)
    with pytest.raises(RegistryError, match="DTYPE names"):
        fam.validate(np.ones((3, 5), np.int8), np.ones(5, np.float32))


def test_bytes_may_depend_on_the_kind_of_input(tmp_path, monkeypatch, kinds_family):
    fam = load(tmp_path, "scale_mixed_bytes", {"v01_plain.py": good()}, monkeypatch, spec=MIXED_SPEC)
    assert fam.bytes_moved(100) == fam.bytes_moved(100, "float32") == 400  # None: the first kind
    assert fam.bytes_moved(100, "int32") == 100
    assert harness.rates(fam, 100, 1e-3, "int32") == pytest.approx((100 / 1e-6 / 1e9, 100 / 1e-6 / 1e9))
    from zoo.tools import report

    assert report.metric(fam, "100@int32") == ("GB/s", "gbps")  # flops 100, bytes 100: not more flops
    assert kinds_family.bytes_moved(100, "int32") == kinds_family.bytes_moved(100) == 800  # a spec without kind


def test_tolerance_may_grow_with_the_size(kinds_family):
    assert kinds_family.tolerance(10) == pytest.approx(1e-5)
    assert kinds_family.tolerance(1000) == pytest.approx(1e-3)
    assert zoo.family("vector_add").tolerance(10**9) == zoo.family("vector_add").TOLERANCE


def _loose(tolerance):
    """A step 5e-4 off (it scales by 2.001) that declares its own TOLERANCE."""
    return good("Nearly twice x.", factor="2.001").replace("\ndef launch", f"\nTOLERANCE = {tolerance}\n\n\ndef launch")


@pytest.mark.parametrize("tolerance", ["1e-3", "lambda size: 1e-3 if size > 10 else 1e-7"])
def test_a_step_may_declare_its_own_tolerance(tmp_path, monkeypatch, tolerance):
    fam = load(tmp_path, "scale_tol", {"v01_plain.py": good(), "v02_loose.py": _loose(tolerance)}, monkeypatch)
    assert fam[1].tolerance(33) == fam.tolerance(33) == 1e-6  # the family's, for a step that declares none
    assert fam[2].tolerance(33) == 1e-3
    result = harness.check(fam[2], 33, seed=1)
    assert result.ok and 4e-4 < result.error < 6e-4, result.detail  # within its own tolerance ...
    (x,) = fam.inputs(33, 1)
    assert not harness.compare(fam[2](x), fam.reference(x), fam.tolerance(33))[0]  # ... not the family's
    if "lambda" in tolerance:
        assert fam[2].tolerance(5) == 1e-7 and not harness.check(fam[2], 5, seed=1).ok


def test_zoo_check_holds_a_step_to_its_own_tolerance(tmp_path, zoo_cli):
    make_family(tmp_path, "scale_tolcli", {"v01_plain.py": good(), "v02_loose.py": _loose("1e-3")})
    env = {"ZOO_KERNEL_PATH": str(tmp_path), "COLUMNS": "200"}
    assert zoo_cli("check", "scale_tolcli", "--size", "40", env=env).returncode == 0
    make_family(tmp_path / "strict", "scale_tolstrict", {"v01_plain.py": good(), "v02_loose.py": _loose("1e-5")})
    r = zoo_cli("check", "scale_tolstrict", "--size", "40", env={**env, "ZOO_KERNEL_PATH": str(tmp_path / "strict")})
    assert r.returncode == 1 and "FAIL" in r.stdout


def test_a_library_row_may_have_its_own_tolerance(tmp_path, monkeypatch):
    spec = KINDS_SPEC.replace(
        'EXTRA_BASELINES = {"other_library": lambda x, out: None}',
        'EXTRA_BASELINES = {"other_library": lambda x, out: None}\nROW_TOLERANCE = {"other_library": 1e-3}',
    )
    fam = load(tmp_path, "scale_rowtol", {"v01_plain.py": good()}, monkeypatch, spec=spec)
    assert fam.tolerance(100, "other_library") == 1e-3
    assert fam.tolerance(100, "baseline") == fam.tolerance(100) == pytest.approx(1e-4)  # TOLERANCE(size) elsewhere
    assert fam[1].tolerance(100) == pytest.approx(1e-4)


def test_baselines_list_the_main_one_first(kinds_family):
    assert list(kinds_family.baselines) == ["baseline", "other_library", "copy"]
    assert list(kinds_family.ceilings) == ["copy"]
    assert list(zoo.family("vector_add").baselines) == ["baseline", "triton", "cuda_c", "copy_ceiling"]


@pytest.mark.parametrize(
    "text,case",
    [("4096", (4096, None)), ("268435456@int32", (268435456, "int32")), ("1000x777x333", ((1000, 777, 333), None))],
)
def test_case_keys_round_trip(text, case):
    assert results.parse_case(text) == case
    assert results.size_key(*case, kinds=(None,)) == text


def test_a_size_may_be_written_as_a_power():
    assert results.parse_case("2^24@pairs") == (16777216, "pairs")
    assert results.parse_size("2^10x1000") == (1024, 1000)
    for text in ("2^", "^3", "2^x", "0^2"):
        with pytest.raises(ValueError):
            results.parse_size(text)


def test_the_first_kind_keeps_the_plain_key():
    assert results.size_key(64, "float32", ("float32", "int32")) == "64"
    assert results.size_key(64, "int32", ("float32", "int32")) == "64@int32"
    with pytest.raises(ValueError, match="name a kind"):
        results.parse_case("64@")


def test_asv_suite_has_a_parameter_for_every_kind_and_baseline(kinds_family):
    from benchmarks import common

    variants, sizes = common.family_suite(kinds_family).params
    assert variants == ["v01_plain", "baseline", "other_library", "copy"]
    assert sizes == ["1048576", "1048576@int32"]


def test_cli_checks_one_kind_or_all(tmp_path, zoo_cli):
    make_family(tmp_path, "scale_kcli", {"v01_plain.py": good()}, spec=KINDS_SPEC)
    env = {"ZOO_KERNEL_PATH": str(tmp_path), "COLUMNS": "200"}
    r = zoo_cli("check", "scale_kcli", "--size", "40@int32", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "40@int32" in r.stdout and "40," not in r.stdout
    r = zoo_cli("check", "scale_kcli", "--size", "40", env=env)
    assert r.returncode == 0 and "40, 40@int32" in r.stdout
    r = zoo_cli("check", "scale_kcli", "--size", "40@int8", env=env)
    assert r.returncode == 2 and "no input kind 'int8'" in r.stderr


PARAMS_SPEC = (
    SPEC.replace(
        """def make_inputs(size, seed):""",
        """INPUT_KINDS = ("twice", "thrice")
KIND_PARAMS = {"thrice": {"factor": 3.0}}  # the kind changes the computation, not the data


def make_inputs(size, seed, kind="twice"):""",
    )
    .replace("def reference(x):\n    return 2.0 * x", "def reference(x, factor=2.0):\n    return factor * x")
    .replace("def output_for(x):", "def output_for(x, factor=2.0):")
    .replace("def flops(size):\n    return int(size)", "def flops(size, factor=2.0):\n    return int(size * factor)")
    .replace("def bytes_moved(size):", "def bytes_moved(size, factor=2.0):")
    .replace(
        "def baseline(x, out):\n    import cupy\n\n    cupy.multiply(x, 2, out=out)",
        "def baseline(x, out, factor=2.0):\n    import cupy\n\n    cupy.multiply(x, factor, out=out)",
    )
)
PARAMS_VARIANT = (
    good()
    .replace("def scale_kernel(x, out):", "def scale_kernel(x, out, factor):")
    .replace("out[i] = 2.0 * x[i]", "out[i] = factor * x[i]")
    .replace("def launch(x, out):", "def launch(x, out, factor=2.0):")
    .replace("](x, out)", "](x, out, np.float32(factor))")
    .replace("from numba import cuda", "import numpy as np\nfrom numba import cuda")
)


def test_a_kind_may_add_keyword_arguments_to_every_call(tmp_path, monkeypatch):
    from benchmarks import common

    fam = load(tmp_path, "scale_params", {"v01_plain.py": PARAMS_VARIANT}, monkeypatch, spec=PARAMS_SPEC)
    assert fam.kind_params("thrice") == {"factor": 3.0} and fam.kind_params() == fam.kind_params("twice") == {}
    (x,) = fam.inputs(33, 0, "thrice")
    np.testing.assert_allclose(fam[1](x, factor=3.0), 3.0 * x, rtol=1e-6)
    seen, reference = [], fam.module.reference
    monkeypatch.setattr(fam.module, "reference", lambda x, **params: seen.append(params) or reference(x, **params))
    for kind in fam.kinds:  # the check runs each kind with its own arguments, reference and step alike
        assert harness.check(fam[1], 33, seed=2, kind=kind).ok
    assert seen == [{}, {"factor": 3.0}]
    assert harness.rates(fam, 100, 1.0, "thrice")[0] == pytest.approx(1.5 * harness.rates(fam, 100, 1.0, "twice")[0])
    assert common._kind_params(fam, "thrice") == {"factor": 3.0} and common._kind_params(fam, None) == {}


LAUNCH_ONLY_VARIANT = '''
"""Launches v01's kernel with blocks of 64 threads.

Changes:
    From v01 (its base): blocks of 64.

Why it is faster:
    It is not.
"""
from .v01_plain import scale_kernel

BASE = "v01"


def launch(x, out):
    scale_kernel[(x.size + 63) // 64, 64](x, out)
'''


def test_a_launch_only_step_names_its_base_and_is_diffed_against_it(tmp_path, monkeypatch, zoo_cli):
    files = {"v01_plain.py": good(), "v02_other.py": good("Other."), "v03_wider_blocks.py": LAUNCH_ONLY_VARIANT}
    fam = load(tmp_path, "scale_base", files, monkeypatch)
    assert fam[3].base is fam[1] and fam[3].compared_with is fam[1]
    assert fam[2].base is None and fam[2].compared_with is fam[1] and fam[1].compared_with is None
    assert harness.check(fam[3], 100, seed=1).ok
    make_family(tmp_path / "cli", "scale_basecli", files)
    r = zoo_cli("diff", "scale_basecli", "v03", env={"ZOO_KERNEL_PATH": str(tmp_path / "cli")})
    assert r.returncode == 0 and "scale_basecli/v01_plain.py" in r.stdout and "+BASE = " in r.stdout
    from zoo.tools import walkthrough

    assert "against that step" in walkthrough.page(fam, {}) and "The code from v01_plain" in walkthrough.page(fam, {})


def _own_kernel_with_base():
    """A step with a kernel of its own that hands v01 the sizes it does not take (as gemv v07-v10 do)."""
    own = good("Its own kernel for even sizes; v01's for the rest.")
    jit_import = "from zoo.device.jit import jit"
    own = own.replace(jit_import, jit_import + "\n\nfrom . import v01_plain as v01")
    odd_to_base = '\nBASE = "v01"\n\n\ndef launch(x, out):\n    if x.size % 2:\n        return v01.launch(x, out)\n'
    own = own.replace("\ndef launch(x, out):\n", odd_to_base)
    return own


PACKING_VARIANT = '''
"""Reads x in an order of its own.

Changes:
    x is reversed once by pack; the kernel reads it back to front.

Why it is faster:
    It is not.
"""
import numpy as np
from numba import cuda

from zoo.device.jit import jit


@jit
def scale_reversed(x_reversed, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x_reversed[out.size - 1 - i]


def pack(x):
    on_host = isinstance(x, np.ndarray)
    reversed_x = (x if on_host else x.copy_to_host())[::-1].copy()  # a new array: numba mis-sizes a 1-element view
    return (reversed_x if on_host else cuda.to_device(reversed_x),)


def launch(x, out):
    scale_reversed[(x.size + 31) // 32, 32](x, out)
'''


def test_a_step_with_a_layout_of_its_own_gets_its_inputs_packed_wherever_it_runs(tmp_path, monkeypatch):
    """A step's ``pack``: a call through Variant, the harness's check and its timing buffers all hand its launch the
    packed inputs; launched on inputs it did not pack, the step is wrong (so the packing is what the check sees)."""
    fam = load(tmp_path, "scale_packs", {"v01_plain.py": good(), "v02_own_order.py": PACKING_VARIANT}, monkeypatch)
    step = fam[2]
    assert fam[1].pack is None and step.pack is not None
    (x,) = fam.inputs(33, 5)
    assert np.array_equal(step.packed((x,))[0], x[::-1]) and fam[1].packed((x,))[0] is x
    assert harness.check(step, 33, seed=5).ok and harness.check(step, 1, seed=5).ok
    assert np.array_equal(step(cuda.to_device(x)).copy_to_host(), 2 * x)  # device arrays in: packed on the device
    out = cuda.to_device(np.full(33, np.nan, np.float32))
    step.launch((cuda.to_device(x),), out)  # not packed: back to front
    assert not np.allclose(out.copy_to_host(), 2 * x)
    sets, _ = harness.benchmark_buffers(step, (x,), x.shape, np.float32)
    assert all(np.array_equal(s[0].copy_to_host(), x[::-1]) for s in sets)


def test_a_plain_call_packs_its_arrays_once_and_finds_them_packed_on_every_later_call(tmp_path, monkeypatch):
    """``Variant.prepared``: a loop of plain calls on the same array packs it on the first call only (a hit on every
    later one), a new array or one laid out otherwise is packed again, an entry goes with its array, and after
    ``clear()`` (the array changed in place) the next call packs again. Each call's product is right."""
    import gc

    fam = load(tmp_path, "scale_prepares", {"v01_plain.py": good(), "v02_own_order.py": PACKING_VARIANT}, monkeypatch)
    step = fam[2]
    packs = []
    monkeypatch.setattr(step.module, "pack", lambda x, pack=step.module.pack: packs.append(type(x)) or pack(x))
    (x,) = fam.inputs(33, 5)
    d_x = cuda.to_device(x)
    for _ in range(3):
        assert np.array_equal(step(d_x).copy_to_host(), 2 * x)
    assert (len(packs), step.prepared.misses, step.prepared.hits) == (1, 1, 2)
    other = cuda.to_device(x[::-1].copy())  # another array: packed on its first call
    assert np.array_equal(step(other).copy_to_host(), 2 * x[::-1]) and len(packs) == 2
    assert np.array_equal(step(d_x).copy_to_host(), 2 * x) and len(packs) == 2  # the first is still there
    del other
    gc.collect()
    assert len(step.prepared.entries) == 1  # the array went, and its packed copy with it
    host = x.copy()
    assert np.array_equal(step(host), 2 * x) and np.array_equal(step(host), 2 * x)  # NumPy: packed on the host once
    assert packs[-1] is np.ndarray and len(packs) == 3
    host[:] = 1.0
    step.prepared.clear()  # changed in place: forget what was packed
    assert np.array_equal(step(host), np.full(33, 2.0, np.float32)) and len(packs) == 4


def test_a_step_with_a_base_and_a_kernel_of_its_own_is_not_launch_only(tmp_path, monkeypatch):
    files = {
        "v01_plain.py": good(),
        "v02_launch_only.py": LAUNCH_ONLY_VARIANT,
        "v03_own.py": _own_kernel_with_base(),
        "v04_after_launch_only.py": good("After v03."),
    }
    fam = load(tmp_path, "scale_ownbase", files, monkeypatch)
    assert fam[2].launch_only and not fam[3].launch_only and not fam[1].launch_only
    assert fam[3].base is fam[1] and fam[3].compared_with is fam[1]
    assert fam[4].compared_with is fam[3]  # the step before has a kernel of its own: that is the one copied
    for n in (1, 100):  # odd: v01's kernel; even: its own
        assert harness.check(fam[3], n, seed=1).ok
    from zoo.tools import walkthrough

    page = walkthrough.page(fam, {})
    assert "Launches v01_plain's kernel (its base)" in page and "Built on v01_plain (its base)" in page


def test_a_base_must_be_an_earlier_step(tmp_path, monkeypatch):
    later = LAUNCH_ONLY_VARIANT.replace('BASE = "v01"', 'BASE = "v03"')
    with pytest.raises(RegistryError, match="not an earlier step"):
        load(tmp_path, "scale_badbase", {"v01_plain.py": good(), "v02_wider.py": later}, monkeypatch)


SWEEP = '''
"""Twice x at a few sizes: a throwaway sweep."""
import numpy as np

COMMAND = "scale-sweep"
HELP = "Scales vectors of a few sizes."
COLUMNS = ("n", "ok", "label")


def add_arguments(parser):
    parser.add_argument("--largest", type=int, default=40)


def measure(args):
    from zoo import family

    fam = family(__name__.split(".")[-3])  # zoo_kernels_path.<family>.sweeps.<module>
    rows = []
    for n in (1, args.largest):
        x = np.arange(n, dtype=np.float32)
        rows.append({"n": n, "ok": float(np.array_equal(fam[1](x), 2 * x)), "label": "plain"})
    return rows


def plot(rows, device_name):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([r["n"] for r in rows], [r["ok"] for r in rows])
    ax.set_title(device_name)
    return fig


def findings(rows):
    return [f"{sum(r['ok'] for r in rows):.0f} of {len(rows)} sizes scaled right"]
'''


def test_a_sweep_module_is_a_command_that_writes_csv_and_png(tmp_path, zoo_cli):
    pytest.importorskip("matplotlib")
    pkg = make_family(tmp_path, "scale_sweep", {"v01_plain.py": good()})
    (pkg / "sweeps").mkdir()
    (pkg / "sweeps" / "__init__.py").write_text("")
    (pkg / "sweeps" / "scale.py").write_text(SWEEP)  # a family's sweeps/: each module with a COMMAND is a command
    out = tmp_path / "out"
    env = {"ZOO_KERNEL_PATH": str(tmp_path), "COLUMNS": "200"}
    r = zoo_cli("scale-sweep", "--largest", "33", "--out", str(out), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    slug = sweeps.SIMULATOR_SLUG if zoo.SIMULATOR else None
    written = sorted(p.name for p in out.iterdir())
    assert len(written) == 2 and all(p.endswith("-scale-sweep.csv") or p.endswith("-scale-sweep.png") for p in written)
    if slug:
        assert written[0].startswith(slug)
    rows = sweeps.read_csv(next(out.glob("*.csv")))
    assert rows == [{"n": 1, "ok": 1, "label": "plain"}, {"n": 33, "ok": 1, "label": "plain"}]
    assert "- 2 of 2 sizes scaled right" in r.stdout  # the module's findings, under the table
    with open(next(out.glob("*.csv"))) as f:
        assert next(csv.reader(f)) == ["n", "ok", "label"]
    assert "scale-sweep" in zoo_cli("--help", env=env).stdout


def test_a_sweep_module_missing_a_name_fails_loudly(tmp_path, zoo_cli):
    pkg = make_family(tmp_path, "scale_badsweep", {"v01_plain.py": good()})
    (pkg / "sweeps").mkdir()
    (pkg / "sweeps" / "__init__.py").write_text("")
    (pkg / "sweeps" / "scale.py").write_text(SWEEP.replace('COLUMNS = ("n", "ok", "label")', ""))
    r = zoo_cli("list", env={"ZOO_KERNEL_PATH": str(tmp_path)})
    assert r.returncode != 0 and "lacks COLUMNS" in r.stderr


def test_launches_are_numbered_so_a_step_built_kernel_is_found():
    """A kernel a step builds at run time (an lru_cache'd build, a memo dict) is no module attribute; the
    harness finds it as the kernel launched last since it took the count."""
    from zoo.device import jit as zoo_jit
    from zoo.kernels.transpose import v07_diagonal

    before = zoo_jit.launch_count()
    assert zoo_jit.launched_since(before) is None
    a = np.random.default_rng(0).standard_normal((5, 9), dtype=np.float32)
    out = np.full((9, 5), np.nan, np.float32)
    v07_diagonal.launch(a, out)
    built = zoo_jit.launched_since(before)
    assert built is v07_diagonal.build(*v07_diagonal.widths(a, out))  # the cached kernel it launched
    assert built not in zoo.family("transpose")["v07"].kernels  # not reachable by module attribute
    assert built.launch_number == zoo_jit.launch_count() > before
    assert zoo_jit.launched_since(zoo_jit.launch_count()) is None
    np.testing.assert_array_equal(out, a.T)


def _fill_and_sum_dynamic_shared(values, out):
    shared = cuda.shared.array(0, float32)  # as large as the launch asks
    i = cuda.threadIdx.x
    for j in range(i, values.size, cuda.blockDim.x):
        shared[j] = values[j]
    cuda.syncthreads()  # every element is in before any thread reads its neighbour's
    for j in range(i, values.size, cuda.blockDim.x):
        out[j] = shared[j] + shared[values.size - 1 - j]


def test_a_launch_past_48_kib_of_dynamic_shared_memory_opts_in():
    """Without the opt-in (zoo.device.jit raises the kernel's limit first) the driver refuses this launch."""
    from zoo.device import jit as zoo_jit

    kernel = zoo_jit.jit(_fill_and_sum_dynamic_shared)
    n = 25_000  # 100,000 bytes of float32: twice the default limit
    values = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    out = np.full(n, np.nan, np.float32)
    kernel[1, 256, 0, 4 * n](values, out)
    np.testing.assert_array_equal(out, values + values[::-1])
    assert kernel.last_launch.shared_bytes == 4 * n > zoo_jit.DEFAULT_SHARED_LIMIT


def _copy_kernel(src, dst):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


def test_a_launch_configuration_is_built_once_and_each_launch_still_runs():
    """zoo.device.jit keeps numba's configured launcher per configuration on the default stream (numba normalises
    and may warn on every ``kernel[config]``); a configuration with a stream is built afresh."""
    from zoo.device import jit as zoo_jit

    kernel = zoo_jit.jit(_copy_kernel)
    rng = np.random.default_rng(3)
    for n in (33, 31, 33):  # back to the first configuration: a stale grid of 1 block would miss element 33
        src = rng.standard_normal(n, dtype=np.float32)
        dst = np.full(n, np.nan, np.float32)
        kernel[(n + 31) // 32, 32](src, dst)
        np.testing.assert_array_equal(dst, src)
    kept = set() if zoo.SIMULATOR else {(2, 32), (1, 32)}  # the simulator's kernel[config] configures itself
    assert set(kernel._configured) == kept
    first = kernel.last_launch
    kernel[2, 32](src, dst)
    assert (kernel.last_launch is first) != zoo.SIMULATOR  # on the GPU the same Launch record: nothing rebuilt
    stream = cuda.stream()
    on_device = cuda.to_device(np.full(n, np.nan, np.float32))  # numba takes no host array on a stream
    kernel[2, 32, stream, 0](cuda.to_device(src), on_device)  # on a stream: launched, not kept
    stream.synchronize()
    np.testing.assert_array_equal(on_device.copy_to_host(), src)
    assert len(kernel._configured) == len(kept) and kernel.last_launch.grid == (2, 1, 1)


def test_word_loads_read_the_bytes_of_any_array():
    """load_word / load_words4 on a float16 matrix by flat element index: its raw bytes, two halves a word."""
    from zoo.device.bits import unpack_half2
    from zoo.device.jit import jit
    from zoo.device.memory import load_word, load_words4

    @jit
    def kernel(matrix, out):
        w0, w1, w2, w3 = load_words4(matrix, 8)  # elements 8..15: row 1
        for j, w in enumerate((w0, w1, w2, w3, load_word(matrix, 2))):
            out[2 * j], out[2 * j + 1] = unpack_half2(w)

    matrix = (np.arange(24, dtype=np.float32) - 7.5).astype(np.float16).reshape(3, 8)
    matrix[1, 3] = np.float16(2.0**-24)  # a subnormal converts exactly
    out = np.zeros(10, np.float32)
    kernel[1, 1](matrix, out)
    np.testing.assert_array_equal(out, np.concatenate([matrix[1], matrix[0, 2:4]]).astype(np.float32))


def test_lop3_computes_the_function_its_table_names():
    from zoo.device.bits import lop3
    from zoo.device.jit import jit

    @jit
    def kernel(words, out):
        a, b, c = words[0], words[1], words[2]
        out[0] = lop3(a, b, c, (0xF0 & 0xCC) ^ 0xAA)
        out[1] = lop3(a, b, c, 0xF0 | 0xCC | 0xAA)
        out[2] = lop3(a, 0x000F000F, 0x00080008, (0xF0 & 0xCC) ^ 0xAA)  # constants, as the gemv steps pass them
        out[3] = lop3(a, b, c, 0xF0 ^ 0xCC ^ 0xAA)

    words = np.array([0x12345678, 0x0F0F00FF, 0x80808080], np.uint32)
    out = np.zeros(4, np.uint32)
    kernel[1, 1](words, out)
    a, b, c = (int(w) for w in words)
    assert [int(v) for v in out] == [(a & b) ^ c, a | b | c, (a & 0x000F000F) ^ 0x00080008, a ^ b ^ c]


def test_address_reads_every_kind_of_array():
    from zoo.device import memory
    from zoo.runtime import arrays

    host = np.zeros(8, np.float32)
    assert arrays.address(host) == host.ctypes.data
    device = cuda.to_device(host)
    assert arrays.address(device) == arrays.address(device[:4])
    assert arrays.address(device[1:]) == arrays.address(device) + 4
    assert memory.aligned(device) and not memory.aligned(device[1:])


def test_flat_view_is_made_once_per_array_and_shares_its_memory():
    """A 2-D array's flat view is a view over the same memory (a write through it shows in the array); an array
    that is hashable and weakly referable (numba's DeviceNDArray, whose reshape costs ~7.5 us of host time a call)
    is reshaped once and its view let go with it; a 1-D array is itself; NumPy's (and the simulator's device
    arrays, which hash like NumPy's) are reshaped each time."""
    import gc
    import weakref

    from zoo.device import memory

    device = cuda.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    view = memory.flat_view(device)
    assert view.shape == (12,)
    view[5] = np.float32(-1)  # row 1, column 1
    assert device.copy_to_host()[1, 1] == -1
    if not zoo.SIMULATOR:
        assert memory.flat_view(device) is view  # a DeviceNDArray: made once
    flat = cuda.to_device(np.zeros(5, np.float32))
    assert memory.flat_view(flat) is flat
    host = np.zeros((2, 3), np.float32)
    assert memory.flat_view(host).shape == (6,) and memory.flat_view(host) is not memory.flat_view(host)

    class Matrix:  # hashable by identity and weakly referable, as a DeviceNDArray
        ndim, size, reshapes = 2, 6, 0

        def reshape(self, n):
            Matrix.reshapes += 1
            return np.zeros(n, np.float32)

    matrix = Matrix()
    first = memory.flat_view(matrix)
    assert memory.flat_view(matrix) is first and Matrix.reshapes == 1
    gone = weakref.ref(first)
    del matrix, first
    gc.collect()
    assert gone() is None, "the cache keeps a view alive after its array is gone"


@pytest.mark.skipif(zoo.SIMULATOR, reason="timings need a GPU")
def test_timing_leaves_out_the_host_time_of_a_samples_first_launch():
    """A call that spends 2 ms on the host before queueing 1.5 ms of GPU work times at about 1.5 ms:
    the GPU is held while the host prepares each sample's first launch. Timed from an idle GPU, the
    start event would be recorded 2 ms before the work arrived (3.5 ms)."""
    import time

    def launch(i):
        time.sleep(0.002)
        harness.hold_gpu(1500)

    timing = harness.time_launches(launch, budget_s=0.2)
    assert timing.launches_per_sample == 1
    assert 1.4 < timing.median_ms < 2.5, timing


def _horner_step(i, coefficients, x, acc):  # acc = acc * x + coefficients[i]: the order of the calls matters
    acc[0] = acc[0] * x[0] + coefficients[i]


def test_unrolled_runs_the_body_once_per_index_in_order():
    """``zoo.device.jit.unrolled`` (numba's missing ``#pragma unroll``): body(0, ...) .. body(count - 1, ...), each
    index a constant, in order (Horner's rule gives another polynomial for any other order), and
    i % 2 indexing a register array (a double buffer's halves)."""
    from zoo.device.jit import jit, unrolled

    step = jit(device=True, forceinline=True)(_horner_step)
    count = 7
    chain = unrolled(count, step)

    @jit(device=True, forceinline=True)
    def halves(i, values, sums):  # a variable index would need local memory; a constant one does not
        sums[i % 2] += values[i]

    split = unrolled(count, halves)

    @jit
    def kernel(coefficients, x, out):
        acc = cuda.local.array(1, float32)
        acc[0] = float32(0.0)
        chain(coefficients, x, acc)
        sums = cuda.local.array(2, float32)
        sums[0] = sums[1] = float32(0.0)
        split(coefficients, sums)
        out[0], out[1], out[2] = acc[0], sums[0], sums[1]

    rng = np.random.default_rng(11)
    coefficients = rng.standard_normal(count).astype(np.float32)
    x = np.array([rng.uniform(0.5, 1.5)], np.float32)
    out = np.full(3, np.nan, np.float32)
    kernel[1, 1](coefficients, x, out)
    np.testing.assert_allclose(out[0], np.polyval(coefficients.astype(np.float64), x[0]), rtol=1e-5)
    np.testing.assert_allclose(out[1:], [coefficients[0::2].sum(), coefficients[1::2].sum()], rtol=1e-5)
    with pytest.raises(ValueError, match="at least 1"):
        unrolled(0, step)


# -- the simulator's threads ---------------------------------------------------------------------------------
@pytest.mark.skipif(not zoo.SIMULATOR, reason="the simulator's thread pool")
def test_a_block_that_raised_leaves_the_simulator_right_for_the_next_launch():
    """The simulator runs block after block on the same Python threads; a block that raised retires its
    threads (some may still be running its code) and the next launch, with barriers, is right."""

    @cuda.jit
    def fails_in_one_thread(x):
        if cuda.threadIdx.x == 5:
            x[10**6] = 1.0  # out of bounds: IndexError in the simulator
        cuda.syncthreads()

    @cuda.jit
    def mirror(x, out):
        s = cuda.shared.array(64, float32)
        t = cuda.threadIdx.x
        s[t] = x[cuda.blockIdx.x * 64 + t]
        cuda.syncthreads()  # every store before the mirrored loads
        out[cuda.blockIdx.x * 64 + t] = s[63 - t]

    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\]"):
        fails_in_one_thread[2, 64](np.zeros(8, np.float32))
    x = np.random.default_rng(3).standard_normal(3 * 64).astype(np.float32)
    for _ in range(2):  # the second launch reuses the threads of the first
        out = np.full_like(x, np.nan)
        mirror[3, 64](x, out)
        np.testing.assert_array_equal(out, x.reshape(3, 64)[:, ::-1].ravel())


def test_compiled_kernels_are_shared_only_when_their_closure_pickles():
    """numba's cache key for a kernel is a hash of its pickled closure: a kernel whose closure does not pickle
    is compiled in each process instead (zoo.device.jit.share_compiled_kernels)."""
    import threading

    from zoo.device.jit import _closure_pickles

    def closing_over(value):
        def kernel():
            return value

        return kernel

    assert _closure_pickles(closing_over)  # no closure at all
    assert _closure_pickles(closing_over((64, np.float32(1), np.dtype("f4"))))
    assert _closure_pickles(closing_over(closing_over(3)))  # a function, as a device function closes over another
    assert not _closure_pickles(closing_over(threading.Lock()))
