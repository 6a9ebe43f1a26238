"""The lean launch: numba compiles the kernel, the driver launches it, with the arguments packed by hand.

numba's own launch, ``kernel[grid, block](*args)``, costs about 37 us of host time on
an H100 machine (vector_add at n = 4096), against 8 us for ``cupy.add``: it types
every argument, looks the specialisation up, builds a list of ctypes objects for
the parameters and launches through ``cuda.core``. The GPU finishes a small
kernel long before the host has issued the next one.

This module keeps numba's compiler and its compiled function, and replaces the
rest with what a C++ program does: one call to the driver's ``cuLaunchKernel``
with an array of pointers to the parameters. For each kernel and each tuple of
argument types it makes, once, a *plan*: the compiled ``CUfunction``, a buffer of
8-byte slots (one per kernel parameter, as numba lays them out: an array is
meminfo, parent, element count, item size, data pointer, then its shape and its
strides in bytes; a scalar is its value) and the array of pointers to those
slots. A call only writes the arguments' current values into the slots and
calls the driver: about 7 us a launch on the same machine.

It takes CuPy arrays, numba device arrays and NumPy or Python scalars. Anything
else (a host array numba would copy, a record, a tuple) returns False and the
caller falls back to numba's launch, with a one-time note. Plans are found by
each argument's layout (its type, dtype, shape and strides, which decide numba's
type for it), so the per-call work is a dictionary lookup, the slots and the
driver call. ``ZOO_LAUNCH=numba``
turns the lean path off everywhere (to compare, or to rule it out).

Arch-specific kernels (``zoo.device.jit.jit(arch_specific=True)``) always launch
here, with the same plans: their code is compiled for the GPU's arch-specific
target (``sm_90a`` on an H100 or H200, which ``wgmma`` and ``setmaxnreg`` need; PTX
for plain ``sm_90`` refuses them) by ``load_arch_specific``: numba's NVVM writes the
PTX for that target (``retarget`` makes sure of its ``.target`` line), numba's
linker (nvJitLink) assembles it, and the cubin is loaded through cuda-python's
``cuda.core`` (``cuLibraryLoadData``), not through numba's dispatcher. (numba-cuda
0.30 itself asks for the "a" target when it compiles for a device of compute
capability 9.0 or more, but not when ``NUMBA_FORCE_CUDA_CC`` or ``compile_ptx``
names a plain one; the arch-specific path does not depend on that default.)
"""

import ctypes
import os
import re
import struct
import warnings

import numpy as np

ENV = "ZOO_LAUNCH"
ENABLED = os.environ.get(ENV, "lean").strip().lower() != "numba"

_noted = set()
capture_stream = None  # a stream being captured into a CUDA graph (zoo.runtime.graphs): launches on "stream 0" go there


class LaunchError(RuntimeError):
    """The driver refused a launch (bad configuration, too much shared memory, ...)."""


def _note_fallback(kernel_name, why):
    if (kernel_name, why) not in _noted:
        _noted.add((kernel_name, why))
        warnings.warn(
            f"zoo: {kernel_name} launched through numba ({why}); the lean launch takes CuPy and "
            "numba device arrays and NumPy or Python scalars",
            stacklevel=4,
        )


# -- argument types -------------------------------------------------------------------------------
_SCALARS = (int, float, bool, np.bool_, *np.sctypeDict.values())
_SCALAR_TYPES = {t for t in _SCALARS if isinstance(t, type) and issubclass(t, (int, float, bool, np.number, np.bool_))}
_CUPY, _NUMBA, _SCALAR, _OTHER = "cupy", "numba", "scalar", "other"  # what the lean launch does with an argument
_ARGUMENT_KINDS = dict.fromkeys(_SCALAR_TYPES, _SCALAR)  # argument type -> its kind, decided once per type
MAX_KEYS = 4096  # argument layouts a launcher remembers (a new shape is a new key)


def _argument_kind(t):
    """The kind of arguments of type ``t``, decided at its first sight and kept in ``_ARGUMENT_KINDS``."""
    if t.__module__.startswith("cupy") and hasattr(t, "__cuda_array_interface__"):
        kind = _CUPY
    elif hasattr(t, "device_ctypes_pointer"):  # numba's DeviceNDArray (and its views)
        kind = _NUMBA
    else:  # a NumPy array (numba copies it to the device and back), a record, a tuple ...
        kind = _OTHER
    _ARGUMENT_KINDS[t] = kind
    return kind


# struct codes of a scalar parameter, padded to its 8-byte slot (the driver reads the parameter's own size)
_SCALAR_CODES = {
    "int8": "b7x",
    "uint8": "B7x",
    "int16": "h6x",
    "uint16": "H6x",
    "int32": "i4x",
    "uint32": "I4x",
    "int64": "q",
    "uint64": "Q",
    "float16": "e6x",
    "float32": "f4x",
    "float64": "d",
    "bool": "?7x",
}


class Plan:
    """One kernel specialisation's compiled function and its parameter slots, made once.

    The slots are one ctypes buffer of 8 bytes a parameter; a launch packs its values into them with one
    ``layout.pack_into`` (an array is meminfo 0, parent 0, element count, item size, data pointer, shape,
    strides; a scalar its value in its own type), and ``pointers`` holds each slot's address for the driver.
    """

    __slots__ = (
        "function",
        "function_address",
        "kernel_handle",
        "device_id",
        "shared_allowed",
        "slots",
        "pointers",
        "address",
        "layout",
        "arguments",
    )

    def __init__(self, cufunc, numba_types):
        from numba.cuda import types

        codes, count = ["<"], 0
        for t in numba_types:
            if isinstance(t, types.Array):
                # meminfo and parent are never read by numba's kernels: 0; then nitems, itemsize, data, shape, strides
                codes.append("qqqqQ" + "q" * (2 * t.ndim))
                count += 5 + 2 * t.ndim
            elif str(t) in _SCALAR_CODES:
                codes.append(_SCALAR_CODES[str(t)])
                count += 1
            else:
                raise TypeError(f"no lean packing for {t}")
        self.kernel_handle, self.device_id = cufunc.handle, cufunc.device.id  # a CUkernel: launched as a function
        self.function = _driver().CUfunction(int(cufunc.handle))
        self.function_address = int(cufunc.handle)  # the same, for a launch through ctypes
        # dynamic shared bytes a launch may ask for without opting in: 48 KiB less the kernel's static shared memory
        # (the limit counts both: 1 KiB static and 48 KiB dynamic fails). Unknown static size: opt in for any.
        static = getattr(getattr(cufunc, "attrs", None), "shared", None)
        self.shared_allowed = 0 if static is None else 48 * 1024 - static
        self.layout = struct.Struct("".join(codes))
        self.slots = (ctypes.c_uint64 * max(count, 1))()
        base = ctypes.addressof(self.slots)
        self.pointers = (ctypes.c_void_p * max(count, 1))(*[base + 8 * i for i in range(count)])
        self.address = ctypes.addressof(self.pointers)


class LeanLauncher:
    """The lean launch of one numba dispatcher: plans by argument layout, then one driver call per launch.

    ``arch_specific``: the kernel's code is compiled for the GPU's arch-specific target and loaded here
    (``load_arch_specific``); arguments the plans cannot pack then raise instead of going to numba.
    ``dependent_launch``: every launch carries the programmatic stream serialization attribute
    (``cuLaunchKernelEx``), so that the kernel may start before the one ahead of it in the stream has finished
    (``zoo.device.dependent_launch``)."""

    def __init__(self, dispatcher, arch_specific=False, dependent_launch=False):
        self.dispatcher = dispatcher
        self.arch_specific = arch_specific
        self.dependent_launch = dependent_launch
        self._configs = {}  # (dimensions, stream) -> the CUlaunchConfig of a dependent launch, made once
        self._plans = {}  # tuple of argument keys -> Plan (or None: numba launches these)
        self._refused = False

    def launch(self, launch, args):
        """Launch with ``launch`` (a zoo.device.jit.Launch); False when the arguments need numba's path.

        This runs on every call of every step, so it is written for the interpreter: one pass over the
        arguments, each argument's type looked up once in ``_ARGUMENT_KINDS``, no helper calls on the way."""
        keys, values = [], []  # the plan's key, then the parameters' values
        for v in args:
            t = type(v)
            kind = _ARGUMENT_KINDS.get(t) or _argument_kind(t)
            if kind is _CUPY:  # a CuPy array: its pointer is .data.ptr
                shape, strides, dtype = v.shape, v.strides, v.dtype
                keys.append((t, dtype, shape, strides))  # decides the numba type: dtype, rank, layout
                # meminfo and parent are 0 (numba's kernels never read them), then nitems, itemsize, data
                values += (0, 0, v.size, dtype.itemsize, v.data.ptr, *shape, *strides)
            elif kind is _SCALAR:
                keys.append(t)
                values.append(v)
            elif kind is _NUMBA:  # a numba device array
                shape, strides, dtype = v.shape, v.strides, v.dtype
                keys.append((t, dtype, shape, strides))
                values += (0, 0, v.size, dtype.itemsize, v.device_ctypes_pointer.value or 0, *shape, *strides)
            else:  # a host array (numba copies it to the device and back), or anything else
                keys.append(None)
        keys = tuple(keys)
        plan = self._plans.get(keys, False)
        if plan is False:
            plan = self._plan(keys, args)
        if plan is None:
            if self.arch_specific:
                raise LaunchError(
                    f"{self.dispatcher.py_func.__name__} is arch-specific (sm_90a): it launches only through the "
                    "lean launch, which takes CuPy and numba device arrays and NumPy or Python scalars"
                )
            if capture_stream is not None:
                raise LaunchError(
                    f"{self.dispatcher.py_func.__name__} cannot be captured in a CUDA graph: numba "
                    "launches it (see the note above), on the default stream"
                )
            return False
        if launch.shared_bytes > plan.shared_allowed:  # opt in once, as cudaFuncSetAttribute does in CUDA C
            set_max_dynamic_shared(plan.kernel_handle, plan.device_id, launch.shared_bytes)
            plan.shared_allowed = launch.shared_bytes
        stream = launch.stream
        if stream:
            handle = _stream_handle(stream)
        elif capture_stream is None:
            handle = _DEFAULT if _DEFAULT is not None else _default_stream()
        else:
            handle = _driver().CUstream(capture_stream)
        plan.layout.pack_into(plan.slots, 0, *values)  # this call's values into the parameter slots
        if self.dependent_launch:
            err = _launch_kernel_ex(self._dependent_config(launch, handle), plan.function_address, plan.address, None)
        else:
            (err,) = _launch_kernel(plan.function, *launch.dimensions, handle, plan.address, 0)
        if err:
            grid, block = launch.grid, launch.block
            raise LaunchError(
                f"cuLaunchKernel of {self.dispatcher.py_func.__name__} with grid {grid}, block "
                f"{block}, {launch.shared_bytes} B of dynamic shared memory failed: {err!r}"
            )
        return True

    def _dependent_config(self, launch, stream):
        """cuLaunchKernelEx's configuration for ``launch`` on ``stream`` with the programmatic stream serialization
        attribute: the kernel's blocks may start once every block of the kernel ahead of it has called
        ``let_next_kernel_start`` or exited. A C struct made once per configuration and stream, passed by pointer
        (cuda-python's CUlaunchConfig would be converted on every call). Measured on an H100: 13.6-13.8 us of host
        time a launch call of gemv v09, against 14.1-14.4 for v08's plain cuLaunchKernel."""
        key = (launch.dimensions, int(stream))
        config = self._configs.get(key)
        if config is None:
            config = _LaunchConfig(
                (ctypes.c_uint * 3)(*launch.grid), (ctypes.c_uint * 3)(*launch.block), launch.shared_bytes, key[1]
            )
            config.attribute.id = int(
                _driver().CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            )
            config.attribute.value[0] = 1  # programmaticStreamSerializationAllowed: the union's first int
            config.attrs = ctypes.pointer(config.attribute)
            config.count = 1
            if len(self._configs) >= MAX_KEYS:
                self._configs.clear()
            self._configs[key] = config
        return ctypes.byref(config)

    def _plan(self, keys, args):
        """The plan for arguments laid out as ``keys`` (made and kept), or None when numba must launch them."""
        name = self.dispatcher.py_func.__name__
        plan = None
        if None in keys:
            bad = next(type(v).__name__ for v, k in zip(args, keys, strict=True) if k is None)
            _note_fallback(name, f"an argument of type {bad}")
        else:
            signature = tuple(self.dispatcher.typeof_pyval(v) for v in args)
            compiled = self.dispatcher.overloads.get(signature)
            if compiled is None:
                compiled = self.dispatcher.compile(signature)
            try:
                function = load_arch_specific(compiled) if self.arch_specific else compiled._codelibrary.get_cufunc()
                plan = Plan(function, signature)
            except TypeError as e:
                _note_fallback(name, str(e))
        if len(self._plans) >= MAX_KEYS:
            self._plans.clear()
        self._plans[keys] = plan
        return plan


# -- arch-specific code (sm_90a) -------------------------------------------------------------------------
def arch_specific(cc):
    """numba's compute capability triple for the arch-specific target of ``cc``: (9, 0) -> (9, 0, "a")."""
    return (cc[0], cc[1], "a")


def retarget(ptx, arch):
    """``ptx`` with its ``.target`` line naming ``arch`` (``"sm_90a"``): PTX written for plain sm_90 declares
    ``.target sm_90``, on which ptxas refuses wgmma; the instructions themselves are the same text."""
    found = re.search(r"^\.target\s+sm_\w+", ptx, flags=re.M)
    if found is None:
        raise ValueError("no .target line in this PTX")
    return ptx[: found.start()] + f".target {arch}" + ptx[found.end() :]


def arch_specific_cubin(compiled, cc):
    """The cubin of a compiled numba kernel for the arch-specific target of ``cc`` (no GPU needed): numba's
    NVVM writes the PTX for ``compute_90a``, numba's linker (nvJitLink, as numba links) assembles it."""
    library = compiled._codelibrary
    if library._linking_files:
        raise NotImplementedError("an arch-specific kernel that links other files (link=...) is not supported")
    return link_arch_specific(library.get_asm_str(cc=arch_specific(cc)), cc, library._max_registers)


def link_arch_specific(ptx, cc, max_registers=None):
    """PTX (its ``.target`` made arch-specific) assembled by numba's linker for ``sm_XYa``: a cuda.core ObjectCode
    holding the cubin (``.code``), whose ``get_kernel`` loads it (``cuLibraryLoadData``)."""
    from numba.cuda.cudadrv.driver import _Linker

    target = arch_specific(cc)
    linker = _Linker(max_registers=max_registers, cc=target)
    linker.add_ptx(retarget(ptx, "sm_{}{}{}".format(*target)).encode())
    return linker.complete()


class ArchSpecificFunction:
    """A kernel loaded from an arch-specific cubin: what a Plan reads of numba's function (handle, device.id)."""

    def __init__(self, kernel, device, keep):
        self.handle = kernel.handle if hasattr(kernel, "handle") else kernel._handle  # a CUkernel (cuLibraryGetKernel)
        self.device = device
        self._keep = keep  # the loaded library lives as long as this function


_arch_specific_functions = {}  # (id of numba's code library, device id) -> ArchSpecificFunction


def load_arch_specific(compiled):
    """``compiled`` (a numba kernel specialisation) built for the current GPU's arch-specific target and loaded
    through cuda-python's cuda.core (``cuLibraryLoadData``, ``cuLibraryGetKernel``), once per device."""
    from numba import cuda

    device = cuda.get_current_device()
    key = (id(compiled._codelibrary), device.id)
    found = _arch_specific_functions.get(key)
    if found is None:
        code = arch_specific_cubin(compiled, device.compute_capability)
        kernel = code.get_kernel(compiled._codelibrary._entry_name)
        found = _arch_specific_functions[key] = ArchSpecificFunction(kernel, device, (compiled, code, kernel))
    return found


def set_max_dynamic_shared(kernel_handle, device_id, nbytes):
    """Let a compiled kernel launch with ``nbytes`` of dynamic shared memory (above the 48 KiB every kernel may use):
    ``cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, ...)`` in CUDA C. numba's driver
    wrapper raises on an error."""
    from numba.cuda.cudadrv.driver import binding, driver

    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attr, int(nbytes), kernel_handle, device_id)


def _stream_handle(stream):
    """The driver's handle of a launch's stream: 0 (the legacy default stream), a numba stream, an int."""
    if not stream:
        return _default_stream() if capture_stream is None else _driver().CUstream(capture_stream)
    if isinstance(stream, int):
        return _driver().CUstream(stream)
    handle = getattr(stream, "handle", None)
    if handle is not None:
        value = getattr(handle, "value", handle)
        return _driver().CUstream(int(value) if value is not None else 0)
    return _driver().CUstream(int(getattr(stream, "ptr", 0)))


_DRIVER = None
_DEFAULT = None


def _driver():
    global _DRIVER
    if _DRIVER is None:
        from cuda.bindings import driver

        _DRIVER = driver
    return _DRIVER


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, and a 64-byte union of values."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint64 * 8)]  # 8-aligned, as in C


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (grid, block, dynamic shared bytes, stream, attributes), followed by the one attribute it
    points to, so that both live as long as the struct."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_LaunchAttribute)),
        ("count", ctypes.c_uint),
        ("attribute", _LaunchAttribute),  # not the driver's: the storage attrs points to
    ]


def _launch_kernel_ex(config, function, params, extra):
    """cuLaunchKernelEx(config, f, kernelParams, extra) through ctypes: the error code (0 on success)."""
    global _launch_kernel_ex
    launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
    launch.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    launch.restype = ctypes.c_int
    _launch_kernel_ex = launch  # bound once: the first launch replaces this function
    return launch(config, function, params, extra)


def _launch_kernel(*args):
    global _launch_kernel
    _launch_kernel = _driver().cuLaunchKernel  # bound once: the first launch replaces this function
    return _launch_kernel(*args)


def _default_stream():
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = _driver().CUstream(0)
    return _DEFAULT
