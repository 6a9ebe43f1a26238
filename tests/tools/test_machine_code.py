"""Every step compiles for the real GPU (sm_90, NVVM and ptxas), checked without one; the summary tool.

The simulator runs kernels as Python and accepts code that NVVM rejects, so each family's steps are
compiled here through the same dry run as ``python -m zoo show FAMILY STEP --ptx``, in a fresh
process in GPU mode (``ZOO_TARGET=gpu``; no device needed).
"""

import json
import os
import subprocess
import sys

import pytest

import zoo
from tests.conftest import ROOT
from zoo.tools import machine_code

COMPILE_FAMILIES = """
import json, sys
import zoo
from zoo.tools import machine_code
out = {}
for name in sys.argv[1:]:
    fam = zoo.family(name)
    out[name] = {}
    for v in fam:
        kernels = machine_code.compile_step(v, (9, 0))
        for k in kernels:
            machine_code.assemble(k, (9, 0))
        out[name][v.name] = [dict(name=k.name, ptx_lines=k.ptx.count(chr(10)), **k.report) for k in kernels]
print(json.dumps(out))
"""


def _compile_families(names):
    env = dict(os.environ, ZOO_TARGET="gpu")
    r = subprocess.run(
        [sys.executable, "-c", COMPILE_FAMILIES, *names], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# Three processes, not one a family: each starts numba and NVVM once (about 3 s) for a third of the steps.
GROUPS = [zoo.families()[k::3] for k in range(3)]


@pytest.mark.skipif(machine_code._tool("ptxas") is None, reason="ptxas missing: pip install -e '.[test]'")
@pytest.mark.parametrize("group", GROUPS, ids=lambda g: "-".join(f.name for f in g))
def test_every_step_compiles_for_sm90(group):
    compiled = _compile_families([f.name for f in group])
    for fam in group:
        steps = compiled[fam.name]
        assert set(steps) == {v.name for v in fam}, fam.name
        for name, kernels in steps.items():
            if getattr(fam[name].module, "NO_KERNEL", None):  # a step the host computes says so, and launches none
                assert not kernels, f"{fam.name}/{name} sets NO_KERNEL but compiled {[k['name'] for k in kernels]}"
                continue
            assert kernels, f"{fam.name}/{name}: its launch compiled no kernel (a host step sets NO_KERNEL = 'why')"
            for k in kernels:
                assert k["registers"] > 0 and k["ptx_lines"] > 10, (fam.name, name, k)


def test_loop_mix_counts_the_innermost_hot_loop():
    ptx = """
    mov.u32 %r1, 0;
$L__BB0_1:
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
$L__BB0_2:
    fma.rn.f32 %f5, %f1, %f2, %f5;
    fma.rn.f32 %f6, %f3, %f4, %f6;
    add.s64 %rd2, %rd2, 4;
    @%p1 bra $L__BB0_2;
    ld.shared.f32 %f7, [%r2];
    @%p2 bra $L__BB0_1;
    ret;
"""
    counts, looped = machine_code.loop_mix(ptx, "ptx")
    assert looped and counts == {"fma": 2, "integer/index": 1, "branch": 1}


def test_ptxas_report_is_parsed():
    text = (
        "ptxas info    : Used 48 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]\n"
        "ptxas info    : 16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
    )
    assert machine_code.parse_ptxas(text) == {
        "registers": 48,
        "stack_bytes": 16,
        "spill_stores": 8,
        "spill_loads": 4,
        "shared_bytes": 4096,
        "barriers": 1,
    }


def test_show_ptx_from_the_cli(zoo_cli):
    if machine_code._tool("ptxas") is None:
        pytest.skip("ptxas missing")
    r = zoo_cli("show", "vector_add", "v02", "--ptx")
    assert r.returncode == 0, r.stderr
    assert ".visible .entry" in r.stdout and "ld.global.f32" in r.stdout
    assert "add_kernel(array(float32, 1d, C), array(float32, 1d, C), array(float32, 1d, C))" in r.stdout
    assert "instructions" in r.stdout.splitlines()[-2]


def test_show_with_a_bad_compute_capability(zoo_cli):
    r = zoo_cli("show", "vector_add", "v02", "--ptx", "--cc", "nine")
    assert r.returncode == 2 and "compute capability" in r.stderr
