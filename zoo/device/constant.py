"""``zoo.device.constant``: a ``__constant__`` array that the host fills before each launch.

Constant memory is 64 KiB of device memory read through a small cache on each
SM that serves one address per request: when every lane of a warp reads the same
word (a filter tap, a coefficient) the word goes to all 32 lanes at once, a
broadcast, and ptxas lets an FFMA take it straight from the constant bank as an
operand (``FFMA R0, R1, c[0x3][0x8], R0``), with no load instruction at all.
Lanes that read different addresses are served one address after another.

numba's own ``cuda.const.array_like(host_array)`` copies a NumPy array into the
kernel when it compiles: NVVM then folds each element read at a constant index
into the instruction as an immediate, so new values mean a new compilation (a
few hundred milliseconds), and the host must hold the values, which a launch on
device arrays can only get by copying them back and waiting for the GPU. This
module declares the array as CUDA C's ``__constant__ float w[5][5];`` does: the
compiled module holds zeros under a visible name, and the host copies the
values in before each launch with a device-to-device copy queued on the launch's
stream (``cudaMemcpyToSymbolAsync``), so nothing recompiles and nothing waits:

    read_filter = constant.declare("stencil_filter", (5, 5), np.float32)

    @jit(lto=False)  # see below
    def kernel(image, out):
        weights = read_filter()   # a read-only (5, 5) float32 array in constant memory
        ...

    constant.copy_to_symbol(kernel, (image, out), "stencil_filter", weights)   # weights: a device array
    kernel[grid, block](image, out)

numba compiles a module for each kernel specialisation (each tuple of argument
types), each with its own copy of the array, so ``copy_to_symbol`` takes the
arguments the launch will pass and finds that specialisation's symbol (compiling
it first if needed; the symbol's address is kept per argument layout). Call the
reader in the kernel itself, not in a device function: each compiled module
defines the symbol once. Compile the kernel with ``lto=False``: numba-cuda links with
link-time optimization by default where nvJitLink is installed, and LTO, seeing the whole
program and no writer of the array, makes it internal, so the driver cannot find it by name
(``copy_to_symbol`` refuses such a kernel with that reason). The copy goes to the legacy default stream, where zoo
launches, or to the stream a CUDA graph is capturing. In the simulator the array
is a NumPy array that the copy fills; in a dry run (``zoo show``) nothing is
copied.
"""

import math

import numpy as np

from zoo.runtime import SIMULATOR

MAX_KEYS = 4096  # argument layouts remembered (a new image shape is a new key)
_SYMBOLS = {}  # (kernel, name, argument layout) -> (device address of the symbol, its bytes)

if SIMULATOR:
    _STORAGE = {}  # (name, shape, dtype) -> the NumPy array every simulated kernel reads

    def declare(name, shape, dtype):
        """The device function that returns the constant array ``name`` (read-only ``shape`` of ``dtype``)."""
        shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        storage = _STORAGE.setdefault((name, shape, dtype.str), np.zeros(shape, dtype))
        view = storage.view()
        view.flags.writeable = False  # as on the GPU: a kernel cannot store to constant memory

        def read():
            return view

        return read

    def copy_to_symbol(kernel, args, name, source):
        """Fill the constant array ``name`` with the device array ``source`` (shape and dtype must match)."""
        host = source.copy_to_host() if hasattr(source, "copy_to_host") else np.asarray(source)
        storage = _STORAGE.get((name, tuple(host.shape), host.dtype.str))
        if storage is None:
            raise ValueError(f"no constant array {name!r} of shape {tuple(host.shape)} and dtype {host.dtype}")
        storage[...] = host

else:
    from llvmlite import ir
    from numba import from_dtype
    from numba.cuda import types
    from numba.cuda.cudadrv import nvvm
    from numba.cuda.extending import intrinsic

    from zoo import runtime  # OFFLINE: read at each call, a dry run sets it
    from zoo.device.memory import address
    from zoo.runtime import launch as lean_launch

    def declare(name, shape, dtype):
        """The device function that returns the constant array ``name`` (read-only ``shape`` of ``dtype``)."""
        shape = tuple(int(s) for s in shape)
        element = from_dtype(np.dtype(dtype))
        array_type = types.Array(element, len(shape), "C", readonly=True)
        count = math.prod(shape)
        strides = [int(np.dtype(dtype).itemsize * math.prod(shape[k + 1 :])) for k in range(len(shape))]

        @intrinsic
        def read(typingctx):
            def codegen(context, builder, sig, args):
                storage_type = ir.ArrayType(context.get_data_type(element), count)
                symbol = builder.module.globals.get(name)
                if symbol is None:
                    # A visible, writable global in the constant address space: `.visible .const` in the PTX.
                    # Not marked constant and not internal, so NVVM cannot fold the zeros into the code.
                    symbol = ir.GlobalVariable(builder.module, storage_type, name, addrspace=nvvm.ADDRSPACE_CONSTANT)
                    symbol.initializer = ir.Constant(storage_type, None)
                    symbol.align = 16
                generic = builder.addrspacecast(symbol, ir.PointerType(ir.IntType(8)), "generic")
                array = context.make_array(array_type)(context, builder)
                intp = types.intp
                context.populate_array(
                    array,
                    data=builder.bitcast(generic, array.data.type),
                    shape=[context.get_constant(intp, s) for s in shape],
                    strides=[context.get_constant(intp, s) for s in strides],
                    itemsize=context.get_constant(intp, np.dtype(dtype).itemsize),
                    meminfo=None,
                    parent=None,
                )
                return array._getvalue()

            return array_type(), codegen

        return read

    def copy_to_symbol(kernel, args, name, source):
        """Queue a copy of the device array ``source`` into the constant array ``name`` of the specialisation of
        ``kernel`` (a zoo.device.jit kernel) that ``args`` select: cudaMemcpyToSymbolAsync on zoo's stream."""
        if runtime.OFFLINE:  # a dry run compiles, it has no device memory to copy into
            return
        key = (kernel, name, _layout(args))
        found = _SYMBOLS.get(key)
        if found is None:
            found = _symbol(kernel, args, name)
            if len(_SYMBOLS) >= MAX_KEYS:
                _SYMBOLS.clear()
            _SYMBOLS[key] = found
        pointer, size = found
        nbytes = source.size * source.dtype.itemsize
        if nbytes != size:
            raise ValueError(f"constant array {name!r} holds {size} bytes, the source has {nbytes}")
        driver = lean_launch._driver()
        (err,) = driver.cuMemcpyDtoDAsync(
            driver.CUdeviceptr(pointer), driver.CUdeviceptr(address(source)), nbytes, lean_launch._stream_handle(0)
        )
        if err:
            raise RuntimeError(f"copy into constant array {name!r} failed: {err!r}")

    def _layout(args):
        """What decides numba's argument types: each array's type, dtype, shape and strides; a scalar's type."""
        return tuple((type(a), a.dtype, a.shape, a.strides) if hasattr(a, "strides") else type(a) for a in args)

    def _symbol(kernel, args, name):
        """(device address, bytes) of ``name`` in the module of the specialisation ``args`` select (compiled now if
        it was not yet)."""
        dispatcher = kernel.dispatcher
        if dispatcher.targetoptions.get("lto", False):  # numba-cuda links with LTO by default where nvJitLink is
            raise ValueError(
                f"{kernel.__name__} reads the constant array {name!r}: compile it with @jit(lto=False). Link-time "
                "optimization sees the whole program, finds no writer of the array and makes it internal, so the "
                "host cannot find it (cuLibraryGetGlobal: CUDA_ERROR_NOT_FOUND)"
            )
        signature = tuple(dispatcher.typeof_pyval(a) for a in args)
        compiled = dispatcher.overloads.get(signature) or dispatcher.compile(signature)
        cufunc = compiled._codelibrary.get_cufunc()
        try:
            memory, size = cufunc.module.get_global_symbol(name)  # cuLibraryGetGlobal on numba's library
            return int(memory.device_pointer_value), int(size)
        except Exception as library_error:  # noqa: BLE001 - the driver's own lookup below says what is wrong
            return _symbol_of_function(cufunc.handle, name, library_error)

    def _symbol_of_function(kernel_handle, name, library_error):
        """(device address, bytes) of ``name`` in the module that holds the kernel: cuKernelGetFunction for this
        context, then cuFuncGetModule and cuModuleGetGlobal (for when the library lookup does not find it)."""
        driver = lean_launch._driver()
        err, function = driver.cuKernelGetFunction(driver.CUkernel(int(kernel_handle)))
        if not err:
            err, module = driver.cuFuncGetModule(function)
        if not err:
            err, pointer, size = driver.cuModuleGetGlobal(module, name.encode())
        if err:
            raise RuntimeError(f"constant array {name!r} not found in its kernel's module: {err!r}") from library_error
        return int(pointer), int(size)
