"""The library all-reduce the steps are held to, NCCL through ``cupy.cuda.nccl``, and its fallback.

Host tooling, used by the family's baseline and ceiling rows and by the sweeps; no step
imports it. NCCL runs one rank a GPU: ``NcclCommunicator.initAll(devices)`` makes the R
communicators of one process, and an all-reduce is ``groupStart()``, one ``allReduce``
per rank on that rank's stream, ``groupEnd()``. NVLink multicast (NVLS) is switched off
before any communicator is made, and stays off: it can put the host's shared GPUs out of
service.

When CuPy cannot load NCCL (no ``libnccl.so.2``: ``pip install nvidia-nccl-cu12``, or
-cu13, to match CuPy), or ranks share a GPU (NCCL refuses two ranks on one device),
``available`` says why; the family's baseline row then falls back to CuPy's own
reduce-to-one-GPU and warns once, and the sweeps leave the NCCL row out with the reason.
"""

import atexit
import os
import warnings

from zoo.kernels.collectives.world import device_count

_COMMS = {}  # devices -> their communicators, made once
_WARNED = set()


def nccl_status():
    """(True, 'NCCL x.y.z') when cupy.cuda.nccl can run, else (False, why)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CuPy warns on import when libnccl is missing: said below instead
            from cupy.cuda import nccl
    except Exception as e:  # CuPy itself cannot load
        return False, f"cupy.cuda.nccl cannot be imported ({type(e).__name__}: {e})"
    if not getattr(nccl, "available", False):
        return False, "CuPy cannot load libnccl.so.2 (pip install nvidia-nccl-cu12 or nvidia-nccl-cu13, matching CuPy)"
    version = nccl.get_version()
    return True, f"NCCL {version // 10000}.{version // 100 % 100}.{version % 100}"


def available(devices):
    """(True, 'NCCL x.y.z') when NCCL can all-reduce over these devices (one rank each), else (False, why)."""
    ok, why = nccl_status()
    if ok and len(set(devices)) != len(devices):
        return False, f"NCCL runs one rank a GPU; these {len(devices)} ranks share {len(set(devices))} GPU(s)"
    return ok, why


_exit_registered = False


def communicators(devices):
    """The NCCL communicators of ranks on ``devices`` (one each), made once per tuple of devices."""
    devices = tuple(int(d) for d in devices)
    found = _COMMS.get(devices)
    if found is None:
        ok, why = available(devices)
        if not ok:
            raise RuntimeError(why)
        from cupy.cuda import nccl

        os.environ["NCCL_NVLS_ENABLE"] = "0"  # never NVLink multicast, whatever the environment said
        global _exit_registered
        if not _exit_registered:  # destroyed at exit while CUDA is still up: left to the interpreter's teardown,
            atexit.register(release)  # they outlived the contexts and the process crashed (two H100s)
            _exit_registered = True
        found = _COMMS[devices] = nccl.NcclCommunicator.initAll(list(devices))
    return found


def nccl_allreduce(devices, pointers, count, streams):
    """In-place sum all-reduce of ``count`` float32 at each rank's device pointer, rank r on streams[r] (handles)."""
    from cupy.cuda import nccl

    comms = communicators(devices)
    nccl.groupStart()  # one call per rank of a single process: NCCL launches them together at groupEnd
    try:
        for comm, pointer, stream in zip(comms, pointers, streams, strict=True):
            comm.allReduce(pointer, pointer, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream)
    finally:
        nccl.groupEnd()


def _on_devices(x):
    """(devices, CuPy copies of the rows, rank r's on device r % D)."""
    import cupy

    devices = [r % device_count() for r in range(x.shape[0])]
    rows = []
    for r, d in enumerate(devices):
        with cupy.cuda.Device(d):
            rows.append(cupy.asarray(x[r]))
    return devices, rows


def baseline(x, out):
    """Every rank's copy of the sum of x's rows, by NCCL (or CuPy, warned, where NCCL cannot run)."""
    import cupy

    devices, rows = _on_devices(x)
    ok, why = available(devices)
    if ok:
        streams = []
        for d in devices:
            with cupy.cuda.Device(d):
                streams.append(cupy.cuda.get_current_stream().ptr)
        nccl_allreduce(devices, [a.data.ptr for a in rows], x.shape[1], streams)
    else:
        if why not in _WARNED:
            _WARNED.add(why)
            warnings.warn(f"zoo collectives: the baseline is CuPy's reduce-to-one-GPU, not NCCL: {why}", stacklevel=2)
        with cupy.cuda.Device(devices[0]):
            total = rows[0].copy()
            for a in rows[1:]:
                total += cupy.asarray(a)  # a peer copy to the first GPU, then an add there
        for r, d in enumerate(devices):
            with cupy.cuda.Device(d):
                rows[r][...] = cupy.asarray(total)
    for r, d in enumerate(devices):
        with cupy.cuda.Device(d):
            rows[r].get(out=out[r])


def placement(x, out):
    """x's rows to their ranks' GPUs and straight back into out: the timed call's copies, no sum."""
    import cupy

    devices, rows = _on_devices(x)
    for r, d in enumerate(devices):
        with cupy.cuda.Device(d):
            rows[r].get(out=out[r])


def release():
    """Destroy the NCCL communicators."""
    while _COMMS:
        _, comms = _COMMS.popitem()
        for comm in comms:
            comm.destroy()
