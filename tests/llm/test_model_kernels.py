"""The model's own kernels (zoo/llm: the weights' fill, quantization and transpose, the decoder's cache and attention,
the prefill's layouts, the batch's cache and step) compiled to PTX for sm_90, offline.

The simulator runs Python, not numba's compiler: a kernel it runs may still not compile (a shared array sized by an
expression, a type numba cannot unify), and CI has no GPU to find out. The families' steps have their own such test
(tests/tools/test_machine_code.py).
"""

import os
import subprocess
import sys
from pathlib import Path

COMPILE_MODEL_KERNELS = """
import zoo  # first: it picks numba's mode (the GPU's, without a device)
import numba
import numpy as np
from numba import cuda, float32, int32, uint32

from zoo.llm import batch, decode, prefill, weights

def a(dtype, ndim):
    return numba.typeof(np.zeros((2,) * ndim, dtype))

f16, f32, i32 = np.float16, np.float32, np.int32
kernels = [
    (weights.fill_uniform, (a(f16, 1), uint32, float32, float32)),
    (weights.quantize_groups, (a(f16, 1), a(np.uint8, 1), a(f16, 1), uint32, uint32)),
    (decode.append_kv, (a(f16, 1), a(f32, 1), a(f16, 4), a(f16, 4), int32, a(i32, 1), uint32, uint32, uint32)),
    (decode.attention_chunk, (a(f16, 1), a(f16, 4), a(f16, 4), int32, a(i32, 1), a(f32, 1), a(f32, 1), a(f32, 1),
                              uint32, uint32, float32)),
    (decode.combine_chunks, (a(f32, 1), a(f32, 1), a(f32, 1), a(f16, 1), uint32, uint32)),
    (decode.advance, (a(i32, 1), a(i32, 1), a(i32, 1), a(i32, 1))),
    (weights.transpose_tiles, (a(f16, 2), a(f16, 2))),
    (prefill.to_heads, (a(f16, 3), a(f32, 2), a(f16, 3), a(f16, 3), a(f16, 3), a(f16, 4), a(f16, 4), int32)),
    (prefill.to_tokens, (a(f16, 3), a(f16, 2))),
    (prefill.set_position, (a(i32, 1), int32)),
    (batch.batch_append, (a(f16, 3), a(f32, 2), a(f16, 3), a(f16, 4), a(f16, 4), int32, a(i32, 1))),
    (batch.advance_batch, (a(i32, 1), a(i32, 1), a(i32, 1), a(i32, 2))),
]
for kernel, types in kernels:
    ptx, _ = cuda.compile_ptx(kernel.dispatcher.py_func, types, cc=(9, 0))
    print(kernel.__name__, len(ptx))
"""


def test_the_model_s_own_kernels_compile_for_sm90():
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, ZOO_TARGET="gpu")
    r = subprocess.run(
        [sys.executable, "-c", COMPILE_MODEL_KERNELS], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(r.stdout.split("\n")) > 10  # every kernel printed its PTX's length
