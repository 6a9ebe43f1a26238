"""Arrays in, arrays out: NumPy on the host, CuPy or numba on the device.

A variant called with NumPy arrays copies them to the GPU and returns NumPy; called
with CuPy or numba device arrays it works in place on the device and returns the
same kind. On the GPU, CuPy arrays go to the step as they are: the lean launch
(``zoo.runtime.launch``) reads their pointer, shape and strides directly, the
cheapest path there is. With ``ZOO_LAUNCH=numba`` (numba launches every kernel)
they are wrapped once in a numba view instead (``cupy_view``), which numba launches
with less host time than a CuPy object.
"""

import weakref

import numpy as np

from zoo.runtime import SIMULATOR as _SIMULATOR
from zoo.runtime import backend
from zoo.runtime import launch as lean_launch
from zoo.runtime.backend import cuda  # the backend's device arrays: the kernels' own kind

NUMPY, CUPY, NUMBA = "numpy", "cupy", "numba"


def address(arr):
    """Address of arr's first element: device memory, or host memory in the simulator.

    For a numba device array it reads the pointer numba keeps, rather than
    ``__cuda_array_interface__``, which builds a dictionary on every access.
    """
    gpu_data = getattr(arr, "gpu_data", None)
    if gpu_data is not None:
        return int(gpu_data.device_pointer)
    data = getattr(arr, "data", None)
    if data is not None and hasattr(data, "ptr"):  # a CuPy array (or a view of one): its MemoryPointer
        return data.ptr
    interface = getattr(arr, "__cuda_array_interface__", None)
    return interface["data"][0] if interface else arr.ctypes.data


_FLAT_VIEWS = weakref.WeakKeyDictionary()  # array -> its 1-D view (the view holds the memory, not the array)


def flat_view(arr):
    """``arr`` (C-contiguous) as a 1-D array over the same memory, made on the first call for this array object
    and kept while it lives. numba's ``reshape`` builds a new DeviceNDArray, ~7.5 us of host time each (H100
    machine): a GEMM step that flattened three matrices a call spent ~23 us of its ~33 us launch call on them.
    Arrays that take no weak reference or no hash (NumPy's, CuPy's, whose reshape is cheap) are reshaped."""
    if arr.ndim == 1:
        return arr
    try:
        view = _FLAT_VIEWS.get(arr)
        if view is None:
            view = _FLAT_VIEWS[arr] = arr.reshape(arr.size)
        return view
    except TypeError:
        return arr.reshape(arr.size)


def aligned(arr, to=16):
    """Whether arr starts on a ``to``-byte boundary (16: a 128-bit load or copy)."""
    return address(arr) % to == 0


_LIBRARY = {np.ndarray: NUMPY}  # type -> library: every call asks, for every array


def library_of(x):
    """Which family of array ``x`` is, or TypeError for anything else."""
    found = _LIBRARY.get(type(x))
    if found is not None:
        return found
    if isinstance(x, np.ndarray):
        return NUMPY
    if type(x).__module__.split(".")[0] == "cupy":
        _LIBRARY[type(x)] = CUPY
        return CUPY
    if hasattr(x, "copy_to_host"):  # numba DeviceNDArray, or the simulator's FakeCUDAArray
        return NUMBA
    raise TypeError(f"expected a NumPy, CuPy or numba device array, got {type(x).__name__}")


def common_kind(arrays):
    first = library_of(arrays[0])
    if len(arrays) == 1 or all(library_of(a) == first for a in arrays):
        return first
    kinds = {library_of(a) for a in arrays}
    if len(kinds) > 1:
        raise TypeError(f"arrays of mixed kinds ({', '.join(sorted(kinds))}): pass all host or all device arrays")
    return kinds.pop()


def is_c_contiguous(x, library=None):
    """Whether x is C-contiguous; ``library`` (library_of(x)) when the caller knows it already."""
    known = getattr(x, "_c_contiguous", None)  # CuPy keeps the flag: no flags object built on every call
    if known is not None:
        return known
    if (library or library_of(x)) == NUMBA:
        return x.is_c_contiguous()
    return bool(x.flags.c_contiguous)


_DTYPES = {}


def as_dtype(dtype):
    """numpy.dtype(dtype), looked up once per spelling (np.float32, "float32", a dtype): every call compares one."""
    found = _DTYPES.get(dtype)
    if found is None:
        found = _DTYPES[dtype] = np.dtype(dtype)
    return found


# CuPy arrays reach the kernels unwrapped when the lean launch packs them (not in the simulator, whose
# kernels index NumPy-like arrays, nor under ZOO_LAUNCH=numba), and under numba-cuda-mlir, whose launch
# reads their __cuda_array_interface__ itself
CUPY_AS_IS = not _SIMULATOR and (lean_launch.ENABLED or backend.MLIR)


def to_device(x):
    """What a step's launch gets for ``x``: a copy on the device of a host array, a device array as it is
    (a CuPy array as it is for the lean launch, else a zero-copy numba view)."""
    k = library_of(x)
    if k == NUMPY:
        return cuda.to_device(x)
    if k == CUPY and not CUPY_AS_IS:
        return cupy_view(x)
    return x


_VIEWS = {}  # id(CuPy array) -> (weak reference to it, its layout, its numba view)


def cupy_view(x):
    """A numba view of a CuPy array: no copy, no wait for the device, built once per array.

    Building a numba device array costs about 20 us of host time (numba asks the
    driver for the current context and builds a description of the layout), and
    the first launch on it costs more again (numba derives the array's type and
    caches it on the object). A call through ``Variant`` would pay that for every
    array on every call, so the view is cached: keyed by the array's identity and
    checked against its pointer, shape, strides and dtype, so an array reshaped in
    place gets a new view. The cache holds the array only by a weak reference and
    drops the entry when the array goes, and the view does not own the memory:
    it is for launches made while the array is alive, which is all zoo uses it for.

    Streams: ``cuda.as_cuda_array`` synchronizes the stream that CuPy names in its
    ``__cuda_array_interface__`` (a host wait on every call) and wraps it as an
    external stream object. zoo launches on the legacy default stream, which
    already runs after all work queued on CuPy's default stream and on any
    blocking stream, so the view drops the stream and skips the wait. (Work on a
    CuPy stream made with ``non_blocking=True`` is not ordered with it: synchronize
    that stream yourself before calling a variant.)
    """
    layout = (x.data.ptr, x.shape, x.strides, x.dtype)
    key = id(x)
    entry = _VIEWS.get(key)
    if entry is not None and entry[0]() is x and entry[1] == layout:
        return entry[2]
    desc = dict(x.__cuda_array_interface__)
    desc.pop("stream", None)
    view = cuda.from_cuda_array_interface(desc, owner=None, sync=False)

    def forget(ref):  # the array is gone: drop its entry, unless a newer one took the key
        if _VIEWS.get(key, (None,))[0] is ref:
            del _VIEWS[key]

    _VIEWS[key] = (weakref.ref(x, forget), layout, view)
    return view


def device_empty(shape, dtype, like_kind):
    """(device view for the kernel, object to hand back) for a new output."""
    if like_kind == CUPY:
        import cupy

        out = cupy.empty(shape, dtype=dtype)
        return (out if CUPY_AS_IS else cupy_view(out)), out
    out = cuda.device_array(shape, dtype=dtype)
    return out, out


def host(x):
    """A NumPy copy of any supported array."""
    k = library_of(x)
    if k == NUMPY:
        return x
    if k == CUPY:
        return x.get()
    return x.copy_to_host()


def poison_value(dtype):
    """What an unwritten output element holds in a check: NaN, or an integer no kernel produces."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max
