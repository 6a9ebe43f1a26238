"""The zoo's intrinsics as numba-cuda-mlir's inline PTX (zoo.device.inline_ptx) compile, without a GPU, to the
instructions numba-cuda's versions emit, and zoo.device.jit.unrolled's chain to straight-line code; under numba-cuda
(the default) the intrinsic modules never import inline_ptx. The first test is skipped where numba-cuda-mlir is not
installed (the `mlir` extra: CI's install has no such extra)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.device import approx, bits, dependent_launch, memory, mma

COMPILE = r"""
import re

import numba_cuda_mlir.tools

from zoo.device import cuda, float16, float32, uint8, uint32, uint64
from zoo.device.approx import exp2_approx
from zoo.device.bits import as_uint32, from_uint32, hfma2, lop3, prmt, unpack_half2
from zoo.device.dependent_launch import let_next_kernel_start, wait_for_previous_kernel
from zoo.device.jit import unrolled
from zoo.device.memory import load_flat, load_float4, load_words4, red_add_flat, red_add_float4, store_flat
from zoo.device.memory import store_float4, store_word, store_words4
from zoo.device.mma import cp_async4, cp_async16, cp_async_commit, cp_async_wait_all, cp_async_wait_group
from zoo.device.mma import ldmatrix_x4, ldmatrix_x4_trans, load_half2, load_half8, mma_16bit_f32, mma_f16_f32
from zoo.device.mma import mma_tf32_f32, pack_half2, store_half8, to_tf32

numba_cuda_mlir.tools._cached_cc = (9, 0)  # 0.6.0 asks the driver even for a given cc (docs/numba-cuda-mlir.md)


def every_intrinsic(x, raw, out, words, grid):
    wait_for_previous_kernel()
    i = cuda.grid(1) * 4
    if i < x.size:
        a, b, c, d = load_float4(x, i)
        w0, w1, w2, w3 = load_words4(raw, i * 4)
        lo, hi = unpack_half2(w0)
        word = hfma2(prmt(w1, w2, 0x5410), lop3(w3, w0, w1, 0x96), w2)
        store_word(words, i, word ^ as_uint32(a))
        store_float4(out, i, exp2_approx(b), from_uint32(as_uint32(c), c), lo + hi, d)
        red_add_flat(out, 0, float32(1))
        red_add_float4(out, i, a, b, c, d)
        store_words4(words, i, w3, w2, w1, w0)
        store_flat(grid, i, load_flat(grid, i + 1))
        cuda.threadfence()  # these two: zoo.device.mlir_lowerings
        words[i + 1] = cuda.lanemask_lt()
    let_next_kernel_start()


types = (float32[::1], uint8[::1], float32[::1], uint32[::1], float32[:, ::1])
ptx, _ = cuda.compile_ptx(every_intrinsic, types, cc=(9, 0))
print("PTX", *ptx.replace(";", " ").split())


def tensor_cores(a, f, out):
    tile = cuda.shared.array(512, float16, alignment=16)
    floats = cuda.shared.array(256, float32, alignment=16)
    t = cuda.threadIdx.x
    cp_async16(tile, t * 8, a, t * 8)
    cp_async4(floats, t, f, t)
    cp_async_commit()
    cp_async_wait_group(1)
    cp_async_wait_all()
    cuda.syncthreads()
    x0, x1, x2, x3 = ldmatrix_x4(tile, t * 8)
    y0, y1, y2, y3 = ldmatrix_x4_trans(tile, t * 8)
    z0, z1, z2, z3 = ldmatrix_x4(floats, t * 4)
    c0, c1, c2, c3 = mma_f16_f32(x0, x1, x2, x3, y0, y1, float32(0), float32(0), float32(0), float32(0))
    c0, c1, c2, c3 = mma_16bit_f32(a.dtype, x0, x1, x2, x3, y2, y3, c0, c1, c2, c3)
    c0, c1, c2, c3 = mma_tf32_f32(to_tf32(f[t]), to_tf32(z0), z1, z2, z3, z0, c0, c1, c2, c3)
    w0, w1, w2, w3 = load_half8(a, t * 8)
    store_half8(a, t * 8, w0 ^ load_half2(a, t * 2), w1, w2, pack_half2(float16(c0), a[t]))
    out[t] = c0 + c1 + c2 + c3


ptx, _ = cuda.compile_ptx(tensor_cores, (float16[::1], float32[::1], float32[::1]), cc=(9, 0))
print("PTX", *ptx.replace(";", " ").split())
print("PACKED", re.search(r"mov\.b32\s+%r\d+, [{]%rs\d+, %rs\d+[}]", ptx) is not None)  # the halves' bits, as they are


@cuda.jit(device=True)
def add_index(i, arr, scale):
    arr[i] += float32(i) * scale


add_all = unrolled(3, add_index)


def three_adds(arr, scale):
    add_all(arr, scale)


ptx, _ = cuda.compile_ptx(three_adds, (float32[::1], float32), cc=(9, 0))
print("UNROLLED", ptx.count("st.global.f32"), "0f40000000" in ptx)  # three stores; index 2 a constant

from zoo.device.wgmma import commit_group, cp_async_mbarrier_arrive, descriptor, fence, fence_mbarrier_init
from zoo.device.wgmma import fence_proxy_async, first_tile, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init
from zoo.device.wgmma import mbarrier_try_wait, mbarrier_wait, mma_async, setmaxnreg_inc, tensormap_acquire
from zoo.device.wgmma import tma_load_2d, wait_group
from zoo.tools.machine_code import _mlir_ptx


def hopper(a, tmap, out):
    tiles = cuda.shared.array(2048, float16, alignment=16)
    bars = cuda.shared.array(2, uint64)
    acc = cuda.local.array(4, float32)
    for i in range(4):
        acc[i] = float32(0)
    first, address = first_tile(tiles)
    if cuda.threadIdx.x == 0:
        mbarrier_init(bars, 0, 1)
        fence_mbarrier_init()
    cuda.syncthreads()
    tensormap_acquire(tmap)
    mbarrier_arrive_expect_tx(bars, 0, 1024)
    tma_load_2d(tiles, first, tmap, 0, 0, bars, 0)
    mbarrier_wait(bars, 0, 0)
    cp_async_mbarrier_arrive(bars, 1)
    mbarrier_arrive(bars, 1)
    done = mbarrier_try_wait(bars, 1, 0)
    fence_proxy_async()
    setmaxnreg_inc(240)
    d = descriptor(address, uint32(0), uint32(1024), 1)
    fence(acc, 4)
    mma_async(acc, 0, 8, d, d, 1, 0, 0, "f16")
    commit_group()
    wait_group(0, acc, 4)
    out[cuda.threadIdx.x] = acc[0] + acc[1] + acc[2] + acc[3] + float32(done) + a[0]


ptx = _mlir_ptx(hopper, (float16[::1], uint64[::1], float32[::1]), {}, "sm_90a")
print("PTX", *ptx.replace(";", " ").split())

from zoo.device import mlir_wgmma, wgmma

same = [getattr(mlir_wgmma, k) == getattr(wgmma, k) for k in ("K_OF", "TRANSPOSABLE", "TILE_ALIGN")]
print("CONSTANTS", all(same))  # mlir_wgmma's copies of wgmma's
"""

WANTED = {
    "ld.v4.f32", "ld.v4.u32", "st.v4.f32", "st.v4.u32", "st.u32", "ex2.approx.ftz.f32", "mov.b32", "cvt.f32.f16",
    "lop3.b32", "prmt.b32", "fma.rn.f16x2", "red.add.f32", "red.global.add.v4.f32", "griddepcontrol.wait",
    "griddepcontrol.launch_dependents", "ld.u32", "cvt.rna.tf32.f32", "cp.async.cg.shared.global",
    "cp.async.ca.shared.global", "cp.async.commit_group", "cp.async.wait_group",
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "membar.gl", "%lanemask_lt",
    "wgmma.fence.sync.aligned", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "wgmma.commit_group.sync.aligned",
    "wgmma.wait_group.sync.aligned", "mbarrier.init.shared::cta.b64", "fence.mbarrier_init.release.cluster",
    "mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.arrive.shared::cta.b64",
    "cp.async.mbarrier.arrive.noinc.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64",
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
    "fence.proxy.tensormap::generic.acquire.sys", "prefetch.tensormap", "fence.proxy.async.shared::cta",
    "setmaxnreg.inc.sync.aligned.u32", "sm_90a",
}  # fmt: skip


@pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda_mlir") is None, reason="numba-cuda-mlir is not installed (the mlir extra)"
)
def test_the_ported_intrinsics_compile_to_their_instructions():
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(ZOO_TARGET="gpu", ZOO_BACKEND="numba-cuda-mlir", PYTHONPATH=os.pathsep.join([str(root), *sys.path]))
    r = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=600)
    found = {w for line in r.stdout.splitlines() if line.startswith("PTX") for w in line.split()[1:]}
    assert WANTED <= found, (sorted(WANTED - found), r.stderr[-3000:])
    assert "PACKED True" in r.stdout, r.stderr[-3000:]  # pack_half2: two float16 as their bits, not converted
    assert "UNROLLED 3 True" in r.stdout, r.stderr[-3000:]  # zoo.device.jit.unrolled's chain of named arguments
    assert "CONSTANTS True" in r.stdout, r.stderr[-3000:]


def test_numba_cuda_keeps_its_own_intrinsics():
    assert "zoo.device.inline_ptx" not in sys.modules
    assert "zoo.device.mlir_lowerings" not in sys.modules
    for module in (approx, bits, dependent_launch, memory, mma):
        names = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        assert all(getattr(module, n).__module__ != "zoo.device.inline_ptx" for n in names), module
