"""Two families' kernels written in CUDA C and compiled at run time by NVRTC through CuPy's ``RawModule``: the entry
path of the seeds' first deck, beside the same arithmetic written in Python for numba (vector_add's v01, roofline's
v05). A row of each shows what hand-written CUDA C costs in lines and buys in time against the numba step.

Imported only when such a row runs, through ``zoo.bench.libraries.cuda_c_rows``, which says "CuPy not installed"
(``zoo.errors.Unavailable``) where CuPy is missing. Each module is compiled once (NVRTC, then the driver loads it);
the kernels run on CuPy's current stream, the one the harness records its events on.
"""

import functools

import cupy
import numpy as np

THREADS_PER_BLOCK = 256

VECTOR_ADD = r"""
extern "C" __global__ void add(const float* a, const float* b, float* c, unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)  // the last block sticks out past n
        c[i] = a[i] + b[i];
}
"""


@functools.cache
def _vector_add_kernel():
    return cupy.RawModule(code=VECTOR_ADD).get_function("add")


def vector_add(a, b, out):
    """c = a + b, a thread an element: vector_add's v01 in CUDA C."""
    n = out.size
    blocks = (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    _vector_add_kernel()((blocks,), (THREADS_PER_BLOCK,), (a, b, out, np.uint64(n)))


# roofline's v05: Horner's chain q <- q x + x on FMAs (x + x^2 + ... + x^k), K compiled in as a template argument,
# eight elements a thread loaded as two float4 a grid's width apart, the last n % 4 elements one a thread.
ROOFLINE = r"""
template <int K>
__device__ float horner(float x)
{
    float q = x;
#pragma unroll 16
    for (int t = 1; t < K; ++t)
        q = fmaf(q, x, x);
    return q;
}

template <int K>
__global__ void __launch_bounds__(256, 8) horner_kernel(const float* a, float* b, unsigned int n)
{
    unsigned int quads = n / 4;  // whole groups of four elements
    unsigned int stride = gridDim.x * blockDim.x;
    unsigned int g = blockIdx.x * blockDim.x + threadIdx.x;  // this thread's first group of four
    if (g < quads) {
        unsigned int h = g + stride;  // the second group, a grid's width on: coalesced like the first
        float4 x = reinterpret_cast<const float4*>(a)[g];
        float4 y = h < quads ? reinterpret_cast<const float4*>(a)[h] : make_float4(0.f, 0.f, 0.f, 0.f);
        float4 p = x, q = y;
#pragma unroll 16
        for (int t = 1; t < K; ++t) {  // eight independent chains: an FMA of each in flight
            p.x = fmaf(p.x, x.x, x.x); p.y = fmaf(p.y, x.y, x.y); p.z = fmaf(p.z, x.z, x.z); p.w = fmaf(p.w, x.w, x.w);
            q.x = fmaf(q.x, y.x, y.x); q.y = fmaf(q.y, y.y, y.y); q.z = fmaf(q.z, y.z, y.z); q.w = fmaf(q.w, y.w, y.w);
        }
        reinterpret_cast<float4*>(b)[g] = p;
        if (h < quads)
            reinterpret_cast<float4*>(b)[h] = q;
    }
    unsigned int i = quads * 4 + blockIdx.x * blockDim.x + threadIdx.x;  // the last n % 4 elements
    if (i < n)
        b[i] = horner<K>(a[i]);
}
"""


@functools.cache
def _roofline_kernel(k):
    """The kernel with k built in: NVRTC instantiates the template once per k."""
    name = f"horner_kernel<{k}>"
    return cupy.RawModule(code=ROOFLINE, options=("-std=c++17",), name_expressions=(name,)).get_function(name)


def roofline(a, out, k):
    """b[i] = a[i] + a[i]^2 + ... + a[i]^k: roofline's v05 in CUDA C, a thread per pair of float4 groups."""
    n = out.size
    pairs = (n // 4 + 1) // 2
    blocks = max(1, (pairs + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK)
    _roofline_kernel(int(k))((blocks,), (THREADS_PER_BLOCK,), (a, out, np.uint32(n)))
