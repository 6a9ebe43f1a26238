"""zoo's asv suite: a bench_<family>.py a family, the machinery in common.py (docs/performance-history.md).

The suite measures kernels on an NVIDIA GPU and nothing else. asv imports this package first in each of its
processes; in the discovery that starts an ``asv run`` (or continuous, dev, profile, find) on a host without
a GPU, this stops the run with one line: without it asv went on to skip every benchmark, minutes a family,
and filed the skips under a machine of its own. ``asv check`` and .ci/asv-discover (ZOO_ASV_DISCOVER_ONLY),
which only read the suite, pass. The probe asks the driver (libcuda) in this process: discovery forks no
benchmark, and the processes that measure (asv's forkserver) never run it.
"""

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

NO_GPU = "zoo: the asv suite measures kernels on an NVIDIA GPU (libcuda and a device): none here, nothing recorded"
MEASURING = {"run", "continuous", "dev", "profile", "find"}  # asv commands that go on to time the benchmarks


def gpu_here():
    """Whether the CUDA driver loads and sees a device."""
    lib = ctypes.util.find_library("cuda")
    if not lib:
        return False
    try:
        cuda = ctypes.CDLL(lib)
    except OSError:
        return False
    count = ctypes.c_int()
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def asv_command():
    """The asv command (run, check, ...) of the process that started this one, or None where it is not asv or
    cannot be read (no /proc)."""
    try:
        words = [w.decode(errors="replace") for w in Path(f"/proc/{os.getppid()}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return None
    for i, word in enumerate(words[:-1]):
        if Path(word).name == "asv" or (word == "-m" and words[i + 1] == "asv"):
            rest = [w for w in words[i + 1 :] if w and w != "asv" and not w.startswith("-")]
            return rest[0] if rest else None
    return None


if sys.argv[1:2] == ["discover"] and not os.environ.get("ZOO_ASV_DISCOVER_ONLY"):
    if asv_command() in MEASURING and not gpu_here():
        raise SystemExit(NO_GPU)
