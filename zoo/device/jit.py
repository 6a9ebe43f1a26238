"""``zoo.device.jit``: one kernel source for the GPU and for the simulator.

Use it exactly like ``numba.cuda.jit``. Two things differ:

* Options only the GPU compiler knows (``lineinfo``, ``max_registers``,
  ``launch_bounds``, ``lto``, ...) are dropped in the simulator, whose ``jit``
  rejects them with a TypeError.
* A kernel (not a device function) comes back wrapped in :class:`Kernel`, which
  launches the same way (``kernel[blocks, threads](...)``) and remembers its
  last launch configuration, so the harness can report registers, shared
  memory and occupancy for exactly the configuration a variant chose. Launches
  are numbered across all kernels, so the harness can also ask which kernel
  ran last (``launched_since``), including one that a step built at run time
  and keeps in a cache rather than under a module-level name.
* A launch that asks for more than 48 KiB of dynamic shared memory
  (``kernel[blocks, threads, stream, shared_bytes]``) first raises the
  kernel's limit (``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``), as a
  CUDA C program calls ``cudaFuncSetAttribute``: without that the driver
  refuses the launch. Hopper lets a block opt in to 227 KiB.
  ``kernel.allow_shared(nbytes)`` does the same by hand, and
  ``kernel.resident_blocks(threads, shared_bytes)`` asks the driver how many
  blocks of a configuration fit on one SM (the occupancy query).

* ``jit(arch_specific=True)`` compiles the kernel for the GPU's arch-specific
  target (``sm_90a`` on an H100 or H200: ``wgmma``, ``setmaxnreg``) and always
  launches it through the lean launch (``zoo.runtime.launch.load_arch_specific``);
  ``python -m zoo show`` assembles it for that target too. The simulator ignores it.
* ``jit(dependent_launch=True)`` launches the kernel with the driver's programmatic
  stream serialization attribute, so that it may start before the kernel ahead of
  it has finished: it must call ``zoo.device.dependent_launch.wait_for_previous_kernel``
  before it touches what that kernel writes (that module says how). Only the lean
  launch sets the attribute; numba's launch and the simulator run the kernel in
  plain stream order, which is always correct.

* Under numba-cuda-mlir (``ZOO_BACKEND``) a device function is inlined into its caller when the kernel
  is typed (numba's ``inline="always"``), as NVVM inlines numba-cuda's (no step's PTX there has a call):
  numba-cuda-mlir ignores ``forceinline``, leaves a function of more than 64 statements a call, and 0.6.0
  compiles such a call wrongly when the function declares a shared array (invalid MLIR: gemv v06-v10) or
  takes a dtype (``A.dtype``: "Type cast not implemented: f16 to none", hgemm v02-v07). An
  ``arch_specific`` kernel is compiled for ``chip="sm_90a"`` there and launched by numba-cuda-mlir.

``unrolled(count, body)`` is the ``#pragma unroll`` numba lacks: it returns a
device function that runs ``body(0, ...)``, ``body(1, ...)``, ...,
``body(count - 1, ...)`` in straight-line code, each index a constant.
"""

import contextlib
import functools
import inspect
import itertools
import weakref

from zoo.runtime import SIMULATOR, backend
from zoo.runtime import launch as lean_launch
from zoo.runtime.backend import cuda

if SIMULATOR:
    _SIM_OPTIONS = set(inspect.signature(cuda.jit).parameters) - {"func_or_sig", "link"}


class Launch:
    """A launch configuration as the variant wrote it, normalised to 3D tuples."""

    __slots__ = ("grid", "block", "stream", "shared_bytes", "dimensions")

    def __init__(self, grid, block, stream=0, shared_bytes=0):
        self.grid = _dim3(grid)
        self.block = _dim3(block)
        self.stream = stream
        self.shared_bytes = shared_bytes
        self.dimensions = (*self.grid, *self.block, shared_bytes)  # cuLaunchKernel's arguments after the function

    @property
    def threads_per_block(self):
        x, y, z = self.block
        return x * y * z

    @property
    def blocks(self):
        x, y, z = self.grid
        return x * y * z

    def __repr__(self):
        return f"Launch(grid={self.grid}, block={self.block}, shared_bytes={self.shared_bytes})"


@contextlib.contextmanager
def quiet_occupancy():
    """numba's low-occupancy warning off for the launchers made inside: zoo's own small launches.

    numba warns "Grid size N will likely result in GPU under-utilization" whenever it configures a launch of
    fewer than 128 blocks. zoo launches small grids on purpose (a one-block scan, a small test size, the
    timing harness's one-thread hold), so its launch paths configure inside this block; a user's own kernels,
    configured outside it, still get the warning, which is meant for them."""
    from numba.cuda.core import config

    saved = config.CUDA_LOW_OCCUPANCY_WARNINGS
    config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    try:
        yield
    finally:
        config.CUDA_LOW_OCCUPANCY_WARNINGS = saved


def _dim3(d):
    if isinstance(d, int):
        return (d, 1, 1)
    d = tuple(int(v) for v in d)
    return d + (1,) * (3 - len(d))


MAX_CONFIGURATIONS = 256  # configured launchers a kernel keeps (one per grid, block, stream, shared bytes)
DEFAULT_SHARED_LIMIT = 48 * 1024  # bytes of shared memory a block gets without opting in

_numbers = itertools.count(1)
_latest = None  # the Kernel launched most recently, by any step


def launch_count():
    """How many zoo kernels have been launched so far in this process."""
    return _latest.launch_number if _latest else 0


def launched_since(count):
    """The kernel launched last, if it was launched after ``launch_count()`` returned ``count``; else None."""
    return _latest if _latest is not None and _latest.launch_number > count else None


_side_streams = {}  # id -> each stream other than the default one that a zoo kernel was launched on, since taken


def take_side_streams():
    """The streams other than the default one that zoo kernels were launched on since the last call (numba or CuPy
    streams, or raw handles), forgotten here: a timer makes its stop event wait for each (``zoo.bench.harness``)."""
    found = list(_side_streams.values())
    _side_streams.clear()
    return found


class Kernel:
    """A compiled-on-first-launch kernel that records how it was launched."""

    def __init__(self, dispatcher, arch_specific=False, dependent_launch=False):
        self.dispatcher = dispatcher
        self.arch_specific = arch_specific  # compiled for sm_90a and launched by the lean launch only
        # the lean launch packs numba-cuda's kernels: under numba-cuda-mlir its own launch runs every kernel
        lean = not SIMULATOR and not backend.MLIR and (lean_launch.ENABLED or arch_specific)
        self.lean = lean_launch.LeanLauncher(dispatcher, arch_specific, dependent_launch) if lean else None
        self.last_launch = None
        self.launch_number = 0
        self._shared_opt_in = {}  # argument types -> dynamic shared bytes allowed so far
        self._configured = {}  # launch configuration -> its launcher
        _kernels.add(self)
        if _shared_directory:
            self._share()
        functools.update_wrapper(self, dispatcher.py_func)

    def __getitem__(self, config):
        """The launcher of one configuration, ``kernel[grid, block]`` or ``[grid, block, stream, shared_bytes]``:
        made once per configuration on the default stream and kept (a stream object is not kept alive here)."""
        if SIMULATOR or not (len(config) < 3 or config[2] == 0):
            return self._launcher(config)
        found = self._configured.get(config)
        if found is None:
            if len(self._configured) >= MAX_CONFIGURATIONS:
                self._configured.clear()
            found = self._configured[config] = self._launcher(config)
        return found

    def _launcher(self, config):
        launch = Launch(*config)
        lean = self.lean
        side = launch.stream or None  # a stream of the step's own: a timer must wait for it too

        def run(*args):
            global _latest
            self.last_launch = launch
            self.launch_number = next(_numbers)
            _latest = self
            if side is not None:
                _side_streams[id(side)] = side
            if lean is not None and lean.launch(launch, args):  # the driver launched it: done
                return None
            if launch.shared_bytes > DEFAULT_SHARED_LIMIT and not SIMULATOR:
                self._allow_shared(args, launch.shared_bytes)
            # numba's launch: the simulator, or arguments the lean launch cannot pack. numba's configured
            # launcher is made here only: it normalises the dimensions (and would warn about the small grids
            # that zoo's steps launch on purpose at small sizes: see quiet_occupancy).
            with quiet_occupancy():
                configured = self.dispatcher[config]
            return configured(*args)

        return run

    def _allow_shared(self, args, nbytes):
        """Raise the kernel's dynamic shared memory limit for these arguments' types (compiles it first)."""
        signature = tuple(self.dispatcher.typeof_pyval(a) for a in args)
        if self._shared_opt_in.get(signature, 0) >= nbytes:  # the usual case: no compile lookup, no driver call
            return
        _set_max_dynamic_shared(self.dispatcher.compile(signature)._codelibrary.get_cufunc(), nbytes)
        self._shared_opt_in[signature] = nbytes

    def allow_shared(self, nbytes):
        """Let the most recently compiled specialisation launch with ``nbytes`` of dynamic shared memory.

        Returns False when the driver binding cannot set kernel attributes (the kernel stays at 48 KiB)."""
        try:
            _set_max_dynamic_shared(self._cufunc(), nbytes)
        except Exception:  # a driver binding without kernel attributes
            return False
        return True

    def resident_blocks(self, threads, shared_bytes=0):
        """Blocks of ``threads`` threads and ``shared_bytes`` of dynamic shared memory that fit on one SM,
        for the most recently compiled specialisation (the driver's occupancy calculator)."""
        from numba import cuda as _cuda

        return _cuda.current_context().get_active_blocks_per_multiprocessor(self._cufunc(), threads, shared_bytes)

    def _cufunc(self):
        compiled = self.compiled()
        if compiled is None:
            raise RuntimeError(f"{self.__name__} has not been compiled on a GPU yet: launch it first")
        if self.arch_specific:  # the function the lean launch loaded (and opted in to its shared memory)
            return lean_launch.load_arch_specific(compiled)
        return compiled._codelibrary.get_cufunc()

    def _share(self):
        """Save this kernel's compiled code to the shared directory and look there before compiling, where that
        is safe: not an ``arch_specific`` kernel (the lean launch loads its PTX for sm_90a itself), not one
        compiled with ``lto=False`` (its ``__constant__`` symbols are looked up by name), and not one whose
        closure does not pickle (numba's cache key is a hash of the pickled closure)."""
        options = getattr(self.dispatcher, "targetoptions", {})
        if self.arch_specific or options.get("lto") is False or not _closure_pickles(self.dispatcher.py_func):
            return
        self.dispatcher.enable_caching()

    def compiled(self):
        """The most recently compiled specialisation (GPU only), or None."""
        if SIMULATOR:
            return None
        overloads = list(self.dispatcher.overloads.values())
        return overloads[-1] if overloads else None


_kernels = weakref.WeakSet()  # every Kernel made in this process
_shared_directory = None


def share_compiled_kernels(directory):
    """Compile each kernel once for several processes: from now on every kernel of this process (those made
    before and after this call) saves what it compiles to ``directory`` and loads from there what another
    process compiled (numba's on-disk cache, ``cache=True``, pointed at ``directory``).

    ``zoo run`` checks the families in parallel processes that share a fresh temporary directory, then times
    them in one process, which loads the checked kernels instead of compiling them again. The directory
    lives for one run only: numba's cache key covers a kernel's own source, closure and argument types but
    not the device functions it calls, so a cache kept across edits could serve stale code. No-op in the
    simulator, which compiles nothing."""
    global _shared_directory
    if SIMULATOR:
        return
    from numba.cuda.core import config

    config.CACHE_DIR = str(directory)
    _shared_directory = str(directory)
    for k in list(_kernels):
        k._share()


def _closure_pickles(func):
    """True when numba can make a cache key of the function's closure: nothing, or values that pickle (numbers,
    tuples, dtypes, device functions: numba's key is a hash of the pickled closure)."""
    if not func.__closure__:
        return True
    from numba.cuda.serialize import dumps

    try:
        dumps(tuple(cell.cell_contents for cell in func.__closure__))
    except Exception:  # an empty cell, an object that does not pickle, a chain too deep for the pickler
        return False
    return True


def _set_max_dynamic_shared(cufunc, nbytes):
    lean_launch.set_max_dynamic_shared(cufunc.handle, cufunc.device.id, nbytes)


def jit(func=None, **options):
    """``numba.cuda.jit`` that runs in the simulator too (see module docstring)."""
    if func is None:
        return functools.partial(jit, **options)
    arch_specific = options.pop("arch_specific", False)
    dependent_launch = options.pop("dependent_launch", False)
    if SIMULATOR:
        options = {k: v for k, v in options.items() if k in _SIM_OPTIONS}
    elif backend.MLIR and options.get("device"):
        options.pop("forceinline", None)  # numba-cuda-mlir takes it and ignores it: its inlining is numba's
        options.setdefault("inline", "always")  # as NVVM inlines numba-cuda's (see module docstring)
    elif backend.MLIR and arch_specific:
        options.setdefault("chip", "sm_90a")  # wgmma and setmaxnreg: Hopper's arch-specific target
    dispatcher = cuda.jit(func, **options)
    return dispatcher if options.get("device") else Kernel(dispatcher, arch_specific, dependent_launch)


def unrolled(count, body):
    """A device function ``f(*args)`` that runs ``body(i, *args)`` for i = 0 .. count - 1, fully unrolled.

    numba has no ``#pragma unroll``, and LLVM does not unroll a loop whose body is long (a k slice of
    SGEMM is 128 FMAs): the loop stays a loop, with a counter, index arithmetic on every trip, and
    register arrays that a variable index would send to local memory. Here each ``i`` is a constant
    ``uint32`` in its own inlined call, so indices such as ``i % 2`` fold away and the compiler
    schedules the whole sequence at once. ``body`` is a device function; ``count`` is a Python int
    (a compile-time constant). In the simulator the same chain runs as Python calls.
    """
    if count < 1:
        raise ValueError(f"unrolled needs a count of at least 1, got {count}")
    from zoo.runtime.backend import uint32

    if backend.MLIR:
        return _named_chain(count, body, uint32)

    def link(i, rest):  # body(i, ...) then the rest of the chain: i is a closure constant
        if rest is None:

            @jit(device=True, forceinline=True)
            def last(*args):
                body(uint32(i), *args)

            return last

        @jit(device=True, forceinline=True)
        def step(*args):
            body(uint32(i), *args)
            rest(*args)

        return step

    chain = None
    for i in reversed(range(count)):
        chain = link(i, chain)
    return chain


def _named_chain(count, body, uint32):
    """``unrolled``'s chain for numba-cuda-mlir, which calls no closure with ``*args``: each link written out with
    as many named arguments as ``body`` takes after its index, and the index a literal of its source."""
    names = ", ".join(f"a{j}" for j in range(len(inspect.signature(body.py_func).parameters) - 1))
    chain = None
    for i in reversed(range(count)):
        scope = {"body": body, "rest": chain, "uint32": uint32}
        rest = f"\n    rest({names})" if chain is not None else ""
        exec(f"def step({names}):\n    body(uint32({i}), {names}){rest}\n", scope)
        chain = jit(device=True, forceinline=True)(scope["step"])
    return chain
