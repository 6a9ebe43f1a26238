"""The library calls a practitioner would make instead of the steps, as the families' strongest rows call them.

cuBLAS's mixed-precision GEMM (``cublasGemmEx``), CUB's device-wide algorithms through ``cuda.compute`` (the
``cuda-cccl`` package: ``pip install "zoo[baselines]"``), a copy of the bytes a call must move, and a loop of CuPy
kernels replayed as a CUDA graph. A family's spec names one
of its rows STRONGEST; the row calls one of these when it runs (never when the spec loads: this is host tooling).

A library this machine lacks, or cannot use, raises ``zoo.errors.Unavailable`` with the reason, never an import
error: ``zoo run`` then prints a line saying so in place of the row.

Each CUB call is built once per kind of call (its dtypes and, for a histogram, its bins), and its temporary storage
allocated once per size, as a user who calls it in a loop would: the timed call is the algorithm alone. They run on
the current CuPy stream, which is the one the harness's events are recorded on.
"""

import numpy as np

from zoo.errors import Unavailable

CCCL_HINT = 'pip install "zoo[baselines]" (cuda-cccl, which brings CUB\'s algorithms to Python as cuda.compute)'


def cuda_compute():
    """The ``cuda.compute`` module; Unavailable, saying why, where it cannot be imported or has no CUDA bindings."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # its own warning when the bindings fail: said below
            import cuda.compute as compute
    except ImportError as e:
        raise Unavailable(f"cuda-cccl not installed ({e}): {CCCL_HINT}") from None
    except Exception as e:  # a CUDA library it preloads is missing, or a CUDA major version it was not built for
        raise Unavailable(f"cuda-cccl cannot load here: {type(e).__name__}: {e}") from None
    if not getattr(compute, "_BINDINGS_AVAILABLE", True):
        raise Unavailable("cuda-cccl is installed but its CUDA bindings are not available (no CUDA driver?)")
    return compute


# (algorithm, dtypes, ..., n) -> the built algorithm, and its temporary storage for n items
_BUILT = {}
_STORAGE = {}


def _storage(key, algorithm, **arguments):
    """The temporary storage of one size of a built algorithm (a CuPy buffer), asked of the algorithm and made once."""
    import cupy

    found = _STORAGE.get(key)
    if found is None:
        _STORAGE.clear()  # one size at a time: a 2^28 scan holds megabytes
        nbytes = algorithm(temp_storage=None, **arguments)
        found = _STORAGE[key] = cupy.empty(max(1, int(nbytes)), cupy.uint8)
    return found


def _call(key, make, **arguments):
    """Call the algorithm ``make()`` builds (built once per ``key``) on ``arguments``, with its temporary storage."""
    if key not in _BUILT:
        _BUILT[key] = make()
    algorithm = _BUILT[key]
    algorithm(temp_storage=_storage(key, algorithm, **arguments), **arguments)


def cublas_gemm_ex(A, B, out, b_rows_are_columns=False):
    """``cublasGemmEx``: out (M x N, float32, row-major) = A (M x K) @ B, float16 or bfloat16 inputs (uint16 holds
    bfloat16), float32 compute. B is K x N row-major, or with ``b_rows_are_columns`` N x K row-major (a row per
    output column, as ``torch.nn.Linear`` keeps its weights: cuBLAS's "TN" layout). cuBLAS is column-major: a
    row-major out is the column-major out^T = B^T A^T, so B goes first."""
    import cupy
    from cupy_backends.cuda.api import runtime
    from cupy_backends.cuda.libs import cublas

    m, k = A.shape
    n = B.shape[0] if b_rows_are_columns else B.shape[1]
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    inputs = runtime.CUDA_R_16BF if A.dtype == np.uint16 else runtime.CUDA_R_16F
    # row-major N x K read column-major is K x N: transposed (OP_T) it is the N x K that out^T = B^T A^T needs
    op_b, ld_b = (cublas.CUBLAS_OP_T, k) if b_rows_are_columns else (cublas.CUBLAS_OP_N, n)
    try:
        cublas.gemmEx(
            handle, op_b, cublas.CUBLAS_OP_N, n, m, k, one.ctypes.data,
            B.data.ptr, inputs, ld_b, A.data.ptr, inputs, k, zero.ctypes.data,
            out.data.ptr, runtime.CUDA_R_32F, n, cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT,
        )  # fmt: skip
    finally:
        cublas.setPointerMode(handle, mode)


def cub_reduce(x, out):
    """``cub::DeviceReduce`` of x into out[0] with ``+``, in x's dtype (float32 accumulates in float32)."""
    compute = cuda_compute()
    built = dict(d_in=x, d_out=out, op=compute.OpKind.PLUS, h_init=np.zeros(1, x.dtype))
    _call(("reduce", x.dtype.str, x.size), lambda: compute.make_reduce_into(**built), num_items=x.size, **built)


def cub_inclusive_scan(x, out):
    """``cub::DeviceScan::InclusiveSum`` of x into out, in x's dtype (an initial value of zero)."""
    compute = cuda_compute()
    built = dict(d_in=x, d_out=out, op=compute.OpKind.PLUS, init_value=np.zeros(1, x.dtype))
    _call(("scan", x.dtype.str, x.size), lambda: compute.make_inclusive_scan(**built), num_items=x.size, **built)


def cub_histogram_even(data, out, bins):
    """``cub::DeviceHistogram::HistogramEven`` of integer samples into ``bins`` counters of width one: bin b counts
    the samples equal to b (levels 0, 1, ..., bins). CUB zeroes the counters itself."""
    compute = cuda_compute()
    arguments = dict(
        d_samples=data,
        d_histogram=out,
        h_num_output_levels=np.array([bins + 1], np.int32),
        h_lower_level=np.array([0], np.int32),
        h_upper_level=np.array([bins], np.int32),
        num_samples=data.size,
    )
    key = ("histogram_even", data.dtype.str, out.dtype.str, bins, data.size)  # CUB's offset type follows the size
    _call(key, lambda: compute.make_histogram_even(**arguments), **arguments)


_SORT_KEYS = {}  # n, dtype -> a CuPy buffer for the sorted keys of a pairs sort, whose out holds the values


def cub_radix_sort(keys, values, out):
    """``cub::DeviceRadixSort`` ascending: the keys into out, or (values given) the values into out and the sorted
    keys into a scratch buffer. CUB sorts float keys by their bits mapped as a float's order, -0.0 as +0.0."""
    import cupy

    compute = cuda_compute()
    if values is None:
        built = dict(d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None)
    else:
        key = (keys.size, keys.dtype.str)
        if key not in _SORT_KEYS:
            _SORT_KEYS.clear()
            _SORT_KEYS[key] = cupy.empty(keys.size, keys.dtype)
        built = dict(d_in_keys=keys, d_out_keys=_SORT_KEYS[key], d_in_values=values, d_out_values=out)
    kind = ("radix_sort", keys.dtype.str, None if values is None else values.dtype.str, keys.size)
    make = lambda: compute.make_radix_sort(**built, order=compute.SortOrder.ASCENDING)  # noqa: E731
    _call(kind, make, num_items=keys.size, **built)


def triton_rows():
    """``zoo.bench.triton_rows``, the Triton kernels of the Triton rows; Unavailable where Triton or PyTorch (which
    hands it the arrays) is missing."""
    try:
        from zoo.bench import triton_rows
    except ImportError as e:
        raise Unavailable(f"triton not installed ({e}): Triton and PyTorch run these rows") from None
    return triton_rows


TOOLS = ("triton", "torch", "cuda_c")  # the seeds' comparisons: a row named for its tool ("torch.compile", "cuda_c")


def tool_rows(fam):
    """The family's rows that compute its result in another tool's idiom (Triton, PyTorch eager or compiled, CUDA C
    through RawModule), named for the tool; the strongest row (torch sdpa) is not one of them."""
    return [row for row in fam.baselines if row.split()[0].split(".")[0] in TOOLS and row != fam.strongest]


def _missing(error):
    """What a failed import of an optional library says: 'torch not installed', or why it could not load."""
    name = getattr(error, "name", None)
    return f"{name} not installed" if isinstance(error, ModuleNotFoundError) and name else f"cannot load: {error}"


def torch_rows():
    """``zoo.bench.torch_rows``, the PyTorch eager and ``torch.compile`` rows; Unavailable where PyTorch (or CuPy,
    which hands it the arrays) is missing or cannot load."""
    try:
        from zoo.bench import torch_rows
    except (ImportError, OSError) as e:
        raise Unavailable(f"{_missing(e)}: PyTorch runs these rows, on arrays CuPy hands it") from None
    return torch_rows


def cuda_c_rows():
    """``zoo.bench.cuda_c_rows``, the CUDA C kernels compiled by NVRTC through CuPy's RawModule; Unavailable where
    CuPy is missing."""
    try:
        from zoo.bench import cuda_c_rows
    except (ImportError, OSError) as e:
        raise Unavailable(f"{_missing(e)}: CuPy's RawModule compiles these rows with NVRTC") from None
    return cuda_c_rows


# -- a copy of the bytes a call must move ---------------------------------------------------------------------------
_COPY_DESTINATION = {}  # nbytes -> a CuPy buffer the copy rows write into, one size at a time


def copy_leading_bytes(arrays, nbytes):
    """Copy the first ``nbytes`` of the arrays' bytes, taken in order (each array flattened), into a scratch buffer
    with the driver's device-to-device copies (one an array it reaches into); return the buffer (CuPy uint8).

    A copy reads and writes each byte, so a family whose call moves B bytes copies B / 2: the physical ceiling of a
    memory-bound call, the same bytes with no arithmetic. ``leading_bytes`` is what it must hold."""
    import cupy

    if nbytes not in _COPY_DESTINATION:
        _COPY_DESTINATION.clear()
        _COPY_DESTINATION[nbytes] = cupy.empty(nbytes, cupy.uint8)
    destination = _COPY_DESTINATION[nbytes]
    done = 0
    for a in arrays:
        if done == nbytes:
            break
        count = min(a.nbytes, nbytes - done)
        destination[done:].data.copy_from_device_async(a.data, count)  # asynchronous: copies queue like launches
        done += count
    if done != nbytes:
        raise ValueError(f"the arrays hold {done} bytes, fewer than the {nbytes} to copy")
    return destination


def leading_bytes(arrays, nbytes):
    """The first ``nbytes`` of host arrays' bytes, taken in order: what ``copy_leading_bytes`` must have copied."""
    flat = np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in arrays])
    return flat[:nbytes]


# -- a loop of CuPy kernels as a CUDA graph --------------------------------------------------------------------------
_GRAPHS = {}  # (the loop, pointers of its arrays) -> the captured graph


def graph_of(loop, *arrays):
    """Launch ``loop(*arrays)`` (a function that queues CuPy kernels) as a CUDA graph on the current stream: run once
    as it is (CuPy compiles its kernels), captured once per set of arrays on a stream of its own, then replayed with
    one launch a call."""
    import cupy

    key = (loop, *(a.data.ptr for a in arrays))
    graph = _GRAPHS.get(key)
    if graph is None:
        if len(_GRAPHS) > 64:  # the harness rotates a few input sets; a new size starts afresh
            _GRAPHS.clear()
        loop(*arrays)  # compiles and loads the kernels outside the capture
        capture = cupy.cuda.Stream(non_blocking=True)
        cupy.cuda.get_current_stream().synchronize()  # the arrays are ready before the capture stream reads them
        with capture:
            capture.begin_capture()
            loop(*arrays)
            graph = _GRAPHS[key] = capture.end_capture()
        graph.upload(cupy.cuda.get_current_stream())
    graph.launch(cupy.cuda.get_current_stream())
