"""What the compiler made of a step: PTX and SASS of each kernel, with a summary.

``python -m zoo show FAMILY STEP --ptx`` (or ``--sass``) runs here. No GPU is
needed: the step's ``launch`` is *dry-run* once on small NumPy inputs with every
kernel launch replaced by a compilation (``numba.cuda.compile_ptx``, NVVM from
the ``gpu`` extra) for the chosen compute capability, so the kernels compiled are
exactly the ones the step launches, with the argument types it passes (kernels a
factory builds at run time included). Device allocations, streams and events
become host stand-ins during the dry run, and ``zoo.device.sm_count()`` answers
for the target GPU.

``ptxas -v`` then reports registers, spills, stack and shared memory; ``ptxas``
plus ``nvdisasm`` (or ``cuobjdump``) give the SASS. The summary counts the
instructions of each kernel's innermost hot loop (the innermost loop holding the
most FMAs): FMAs, global and shared loads and stores with their widths, integer
index arithmetic, and instructions per FMA.

The dry run needs numba in GPU mode (``ZOO_TARGET=gpu``), which a process that
chose the simulator cannot switch to: the CLI then runs itself again in a fresh
process with ``ZOO_TARGET=gpu``.
"""

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import zoo
import zoo.device
from zoo.device.jit import Kernel
from zoo.runtime.launch import arch_specific, retarget


class ToolMissing(RuntimeError):
    """A compiler tool is not installed; the message says how to get it."""


class UnknownTarget(RuntimeError):
    """The compiler installed cannot compile for the compute capability asked for; the message says which."""


@dataclass
class CompiledKernel:
    name: str
    signature: str
    ptx: str
    max_registers: object = None
    report: dict = field(default_factory=dict)  # ptxas -v
    sass: str = ""
    arch: str = ""  # what ptxas assembles for when it is not sm_XY of the cc asked: "sm_90a" (jit(arch_specific=True))


# -- the dry run ----------------------------------------------------------------------------------
class _DeviceStandIn(np.ndarray):
    """A host array that answers the device-array calls a launch makes."""

    def copy_to_device(self, ary, stream=0):
        self[...] = np.asarray(ary)

    def copy_to_host(self, ary=None, stream=0):
        if ary is None:
            return np.array(self)
        ary[...] = self
        return ary

    def is_c_contiguous(self):
        return self.flags.c_contiguous

    def is_f_contiguous(self):
        return self.flags.f_contiguous

    def bind(self, stream=0):
        return self


def _stand_in(a):
    return np.ascontiguousarray(a).view(_DeviceStandIn)


class _Stream:
    handle = 0

    def synchronize(self):
        pass

    @contextlib.contextmanager
    def auto_synchronize(self):
        yield self


class _Event:
    def record(self, stream=0):
        pass

    def synchronize(self):
        pass

    def wait(self, stream=0):
        pass

    def elapsed_time(self, other):
        return 0.0


def _host_array(shape, dtype=np.float64, *args, **kwargs):
    return np.empty(shape, dtype).view(_DeviceStandIn)


_FAKE_CUDA = {
    "device_array": _host_array,
    "device_array_like": lambda a, *args, **kwargs: _host_array(a.shape, a.dtype),
    "to_device": lambda a, *args, **kwargs: _stand_in(a),
    "pinned_array": _host_array,
    "pinned_array_like": lambda a, *args, **kwargs: _host_array(a.shape, a.dtype),
    "mapped_array": _host_array,
    "as_cuda_array": lambda a, *args, **kwargs: _stand_in(a),
    "stream": lambda *args, **kwargs: _Stream(),
    "default_stream": lambda *args, **kwargs: _Stream(),
    "external_stream": lambda *args, **kwargs: _Stream(),
    "event": lambda *args, **kwargs: _Event(),
    "event_elapsed_time": lambda *args, **kwargs: 0.0,
    "synchronize": lambda *args, **kwargs: None,
    "pinned": lambda *arrays, **kwargs: contextlib.nullcontext(),
}


def _numba_type(value):
    if zoo.runtime.backend.MLIR:  # its own types, the same names
        from numba_cuda_mlir.numba_cuda import types
        from numba_cuda_mlir.numba_cuda.typing.typeof import typeof
    else:
        from numba import typeof, types

    if isinstance(value, np.ndarray):
        layout = "C" if value.flags.c_contiguous else ("F" if value.flags.f_contiguous else "A")
        return types.Array(typeof(value.dtype.type(0)), value.ndim, layout)
    return typeof(value)


def _compile_options(dispatcher):
    options = dispatcher.targetoptions
    keep = {k: options[k] for k in ("fastmath", "lineinfo", "opt", "launch_bounds") if options.get(k) is not None}
    return keep, options.get("max_registers")


def _mlir_ptx(func, argtypes, options, chip):
    """numba-cuda-mlir's PTX of kernel ``func`` for ``chip`` ("sm_90a"), as its compile_ptx would make it."""
    from numba_cuda_mlir.compiler import _compile_and_optimize
    from numba_cuda_mlir.numba_cuda import types
    from numba_cuda_mlir.numba_cuda.typing import signature

    targetoptions = {**options, "chip": chip, "abi": "numba", "_compile_output": "ptx", "lto": False}
    return _compile_and_optimize(func, signature(types.none, *argtypes), targetoptions).ptx


# PTX already compiled in this process, by (function, argument types, target, arch, options): the same kernel on the
# same types compiles to the same PTX, however many launches or steps ask for it
_PTX_COMPILED = {}


@contextlib.contextmanager
def _dry_run(cc, record):
    """Launches compile instead of running; device calls get host stand-ins; sm_count answers for cc."""
    if zoo.runtime.backend.MLIR:  # numba-cuda-mlir's dispatcher and module (zoo.tools.backends' compile survey)
        import numba_cuda_mlir.descriptor as mlir_descriptor

        dispatcher = {"CUDADispatcher": mlir_descriptor.MLIRDispatcher, "get_current_device": None}
        numba_dispatcher = type("Dispatchers", (), dispatcher)  # what numba.cuda.dispatcher offers below
    else:
        import numba.cuda.dispatcher as numba_dispatcher
    from zoo.runtime.backend import cuda

    def compile_instead(kernel, config):
        def run(*args):
            argtypes = tuple(_numba_type(a) for a in args)
            options, max_registers = _compile_options(kernel.dispatcher)
            target, arch = cc, ""
            if getattr(kernel, "arch_specific", False):  # wgmma and friends: the arch-specific target (sm_90a)
                if cc < (9, 0):
                    raise ValueError(f"{kernel.__name__} is arch-specific (sm_90a): compile it for 9.0, not {cc}")
                target = arch_specific(cc)
                arch = "sm_{}{}{}".format(*target)
            key = (kernel.dispatcher.py_func, argtypes, target, arch, repr(sorted(options.items())))
            ptx = _PTX_COMPILED.get(key)
            if ptx is None:  # a kernel launched again (a sort's passes, a later step's BASE launch) compiles once
                if arch and zoo.runtime.backend.MLIR:  # its compile_ptx takes no chip (no cc: the host's is used)
                    ptx = _mlir_ptx(kernel.dispatcher.py_func, argtypes, options, arch)
                else:
                    ptx, _ = cuda.compile_ptx(kernel.dispatcher.py_func, argtypes, cc=target, **options)
                if arch:
                    ptx = retarget(ptx, arch)
                _PTX_COMPILED[key] = ptx
            record.append(
                CompiledKernel(
                    kernel.__name__, "(" + ", ".join(map(str, argtypes)) + ")", ptx, max_registers, arch=arch
                )
            )

        return run

    class Target:
        compute_capability = cc

    class Plain:  # a numba.cuda.jit kernel launched through numba's own dispatcher (launch v01, v02)
        def __init__(self, dispatcher):
            self.dispatcher, self.__name__ = dispatcher, dispatcher.py_func.__name__

    # host code that allocates through numba-cuda itself under either backend (collectives' world, TMA maps) gets the
    # same stand-ins: its arrays are what a kernel of numba-cuda-mlir is launched on there too
    stood_in = [cuda]
    if zoo.runtime.backend.MLIR:
        from numba import cuda as numba_cuda

        stood_in.append(numba_cuda)
    saved_cuda = [(m, {k: getattr(m, k) for k in _FAKE_CUDA if hasattr(m, k)}) for m in stood_in]
    saved = (
        Kernel.__getitem__,
        numba_dispatcher.CUDADispatcher.__getitem__,
        zoo.runtime.OFFLINE,
        numba_dispatcher.get_current_device,
    )
    Kernel.__getitem__ = compile_instead
    numba_dispatcher.CUDADispatcher.__getitem__ = lambda dispatcher, config: compile_instead(Plain(dispatcher), config)
    zoo.runtime.OFFLINE = dict(zoo.runtime.OFFLINE or zoo.device.properties(), compute_capability=f"{cc[0]}.{cc[1]}")
    numba_dispatcher.get_current_device = lambda: Target()  # device functions ask for the current device
    for m in stood_in:
        for k, v in _FAKE_CUDA.items():
            setattr(m, k, v)
    try:
        yield
    finally:
        (
            Kernel.__getitem__,
            numba_dispatcher.CUDADispatcher.__getitem__,
            zoo.runtime.OFFLINE,
            numba_dispatcher.get_current_device,
        ) = saved
        for m, saved_attributes in saved_cuda:
            for k, v in saved_attributes.items():
                setattr(m, k, v)


def compile_step(variant, cc=(9, 0), size=None, kind=None):
    """The kernels ``variant``'s launch compiles, each with its PTX, for compute capability ``cc``, on the inputs
    of ``size`` (the family's last test size when None) and ``kind`` (its first kind of input when None)."""
    if zoo.SIMULATOR:
        raise RuntimeError("compiling PTX needs numba in GPU mode: run with ZOO_TARGET=gpu")
    fam = variant.family
    size = size if size is not None else fam.TEST_SIZES[-1]
    host_inputs = fam.inputs(size, 0, kind)
    shape, dtype = fam.output_for(*host_inputs)
    inputs = [_stand_in(a) for a in variant.packed(host_inputs)]  # in the step's own layout, if it has one
    out = _host_array(shape, dtype)
    record = []
    with _dry_run(tuple(cc), record):
        variant.launch(inputs, out)
    unique = {}
    for k in record:
        unique.setdefault((k.name, k.signature), k)  # a kernel launched many times is shown once
    return list(unique.values())


# -- ptxas, nvdisasm ------------------------------------------------------------------------------
def _tool(name):
    """The path of a CUDA tool: on PATH, beside nvcc, or in the pip wheels (nvidia/*/bin)."""
    found = shutil.which(name)
    if found:
        return found
    roots = [Path(sys.prefix) / "lib", Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))]
    for root in roots:
        for candidate in root.glob(f"**/nvidia/*/bin/{name}") if root.name == "lib" else [root / "bin" / name]:
            if candidate.exists():
                return str(candidate)
    return None


HOW_TO_GET = {
    "ptxas": 'pip install "numba-cuda[cu12]" (the gpu extra brings ptxas), or a CUDA toolkit',
    "nvdisasm": "pip install nvidia-cuda-nvdisasm, or a CUDA toolkit (cuobjdump works too)",
}


def _arch(cc):
    return f"sm_{cc[0]}{cc[1]}"


def assemble(kernel, cc, want_sass=False):
    """Fill kernel.report from ptxas -v, and kernel.sass if asked; ToolMissing names what to install."""
    ptxas = _tool("ptxas")
    if ptxas is None:
        raise ToolMissing(f"ptxas not found: {HOW_TO_GET['ptxas']}")
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(kernel.ptx)
        cmd = [ptxas, f"-arch={kernel.arch or _arch(cc)}", "-v", str(ptx), "-o", str(cubin)]
        if kernel.max_registers:
            cmd.insert(1, f"-maxrregcount={kernel.max_registers}")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 and "gpu-name" in r.stderr:  # "Value 'sm_70' is not defined for option 'gpu-name'"
            version = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout.strip()
            release = re.search(r"release ([\d.]+)", version)
            raise UnknownTarget(
                f"{ptxas} (CUDA {release.group(1) if release else '?'}) does not know {_arch(cc)}: "
                "name a compute capability this CUDA supports (CUDA 13 starts at 7.5, CUDA 12 at 5.0)"
            )
        if r.returncode != 0:
            raise RuntimeError(f"ptxas failed on {kernel.name}:\n{r.stderr}")
        kernel.report = parse_ptxas(r.stderr)
        if want_sass:
            nvdisasm, cuobjdump = _tool("nvdisasm"), _tool("cuobjdump")
            if nvdisasm:
                r = subprocess.run([nvdisasm, "-c", "-g", str(cubin)], capture_output=True, text=True)
            elif cuobjdump:
                r = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True)
            else:
                raise ToolMissing(f"nvdisasm or cuobjdump not found: {HOW_TO_GET['nvdisasm']}")
            if r.returncode != 0:
                raise RuntimeError(f"disassembly failed on {kernel.name}:\n{r.stderr}")
            kernel.sass = r.stdout
    return kernel


def parse_ptxas(text):
    """registers, spills, stack and shared memory from ptxas -v output."""
    found = {}
    for key, pattern in (
        ("registers", r"Used (\d+) registers"),
        ("stack_bytes", r"(\d+) bytes stack frame"),
        ("spill_stores", r"(\d+) bytes spill stores"),
        ("spill_loads", r"(\d+) bytes spill loads"),
        ("shared_bytes", r"(\d+) bytes smem"),
        ("barriers", r"used (\d+) barriers"),
    ):
        m = re.search(pattern, text)
        found[key] = int(m.group(1)) if m else 0
    return found


# -- the innermost loop's instruction mix ----------------------------------------------------------
_PTX_LABEL = re.compile(r"^(\$L__\w+):")
_PTX_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$L__\w+);")
_SASS_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_SASS_BRANCH = re.compile(r"\bBRA\s+(?:`\()?(\.L_x_\d+|0x[0-9a-f]+)")
_SASS_ADDR = re.compile(r"/\*([0-9a-f]{4,})\*/")


def _ptx_instructions(ptx):
    """[(label or None, opcode line)] of the PTX body, in order."""
    out = []
    for raw in ptx.splitlines():
        line = raw.split("//")[0].strip()
        if not line or line in "{}" or line.startswith("."):
            continue
        m = _PTX_LABEL.match(line)
        out.append((m.group(1), "") if m else (None, line))
    return out


def _sass_instructions(sass):
    out = []
    for raw in sass.splitlines():
        m = _SASS_LABEL.match(raw)
        if m:
            out.append((m.group(1), ""))
            continue
        a = _SASS_ADDR.search(raw)
        body = raw.split("*/", 1)[-1].split("/*")[0].strip() if a else ""
        if a and body and not body.startswith("."):
            out.append((f"0x{int(a.group(1), 16):x}", body))  # cuobjdump branches to addresses
    return out


def _innermost_loops(items, branch):
    labels = {lab: i for i, (lab, _) in enumerate(items) if lab}
    loops = []
    for j, (_, line) in enumerate(items):
        m = branch.search(line) if line else None
        if m:
            target = m.group(1)
            target = f"0x{int(target, 16):x}" if target.startswith("0x") else target
            i = labels.get(target)
            if i is not None and i < j:
                loops.append((i, j))
    return [lp for lp in loops if not any(o != lp and lp[0] <= o[0] and o[1] <= lp[1] for o in loops)]


def classify_ptx(line):
    op = line.split()[0] if not line.startswith("@") else line.split()[1]
    if op.startswith(("fma.", "mad.f", "mad.rn.f")):
        return "fma"
    if op.startswith(("ld.global", "ld.shared", "st.global", "st.shared", "ld.local", "st.local")):
        space = op.split(".")[0] + "." + op.split(".")[1]
        width = 4 if ".v4" in op else 2 if ".v2" in op else 1
        bits = int(re.search(r"(\d+)$", op).group(1)) if re.search(r"(\d+)$", op) else 32
        return f"{space} {width * bits}-bit"
    if op.startswith(("bra", "ret", "exit")):
        return "branch"
    if op.startswith(("bar.", "barrier", "membar", "fence")):
        return "barrier/fence"
    if op.startswith(("shfl", "atom", "red.", "vote", "match", "wgmma", "mbarrier")):
        return op.split(".")[0]
    if re.search(r"\.(f32|f64|f16|bf16)", op):
        return "other float"
    if op.startswith("mov"):
        return "move"
    return "integer/index"


def classify_sass(line):
    body = re.sub(r"^@!?U?P\w+\s+", "", line)
    op = body.split()[0].rstrip(";") if body else ""
    base = op.split(".")[0]
    if base in ("FFMA", "DFMA", "HFMA2", "FFMA2"):
        return "fma"
    if base in ("LDG", "STG", "LDS", "STS", "LDL", "STL", "LDSM"):
        width = re.search(r"\.(128|64|U8|S8|U16|S16)\b", op)
        return f"{base} {width.group(1) if width else '32'}"
    if base in ("BRA", "EXIT", "RET", "BSYNC", "BSSY"):
        return "branch"
    if base in ("BAR", "MEMBAR", "FENCE", "WARPSYNC"):
        return "barrier/fence"
    if base in ("SHFL", "ATOM", "ATOMG", "ATOMS", "RED", "REDG", "VOTE", "MATCH", "HMMA", "HGMMA", "UTMALDG"):
        return base
    if base.startswith(("F", "D", "H", "MUFU")):
        return "other float"
    if base in ("MOV", "UMOV", "S2R", "S2UR", "CS2R", "NOP"):
        return "move"
    return "integer/index"


def loop_mix(text, isa="ptx"):
    """(counts of the innermost hot loop, whether a loop was found); the whole kernel when it has none."""
    items = _ptx_instructions(text) if isa == "ptx" else _sass_instructions(text)
    branch, classify = (_PTX_BRANCH, classify_ptx) if isa == "ptx" else (_SASS_BRANCH, classify_sass)
    loops = _innermost_loops(items, branch)
    spans = [items[i : j + 1] for i, j in loops] or [items]

    def mix(span):
        return Counter(classify(line) for _, line in span if line)

    mixes = [mix(s) for s in spans]
    best = max(mixes, key=lambda c: (c["fma"], sum(c.values())))
    return best, bool(loops)


def summary_lines(kernel, isa):
    r = kernel.report
    lines = [
        f"{kernel.name}{kernel.signature}",
        f"  ptxas: {r.get('registers', '?')} registers, {r.get('spill_stores', 0)} B spill stores, "
        f"{r.get('spill_loads', 0)} B spill loads, {r.get('stack_bytes', 0)} B stack, "
        f"{r.get('shared_bytes', 0)} B static shared",
    ]
    for name, text in (("PTX", kernel.ptx), ("SASS", kernel.sass)):
        if not text or (name == "SASS" and isa != "sass"):
            continue
        counts, looped = loop_mix(text, name.lower())
        total = sum(counts.values())
        where = "innermost hot loop" if looped else "whole kernel (no loop)"
        parts = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        per_fma = f"; {total / counts['fma']:.1f} instructions per FMA" if counts["fma"] else ""
        lines.append(f"  {name} {where}: {total} instructions{per_fma}")
        lines.append(f"    {parts}")
    return lines
