"""The runner: Nsight Compute (``ncu``) over ``python -m zoo.tools.profile.target``, which calls each step once
between marker kernels, and the profile files a run is saved to (``results/profiles/<gpu>-<family>.json``).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from zoo.bench import results
from zoo.device import slug
from zoo.tools.profile import ProfileError
from zoo.tools.profile.counters import MARKER, METRICS, parse_ncu_csv, split_steps, step_entry

LAUNCHES_PER_STEP = 16  # launches profiled per step at most (a loop of launches keeps the first ones: same kernel)

TARGET_LINE = "ZOO-PROFILE "  # how zoo.tools.profile.target reports each step on its stdout


def ncu_executable():
    """The ncu on the PATH (or $ZOO_NCU), or a ProfileError saying it is missing."""
    exe = os.environ.get("ZOO_NCU") or shutil.which("ncu")
    if not exe:
        raise ProfileError(
            "profiling on a GPU needs Nsight Compute's `ncu` on the PATH (not found; ZOO_NCU may name it)"
        )
    return exe


def ncu_command(exe, fam, size_key, steps, metrics, log):
    """The ncu command line that profiles each step's call (and only that) through zoo.tools.profile.target."""
    cap = (LAUNCHES_PER_STEP + 1) * len(steps) + 256  # a CUDA graph's kernels are not capped by the target
    return [
        exe,
        "--profile-from-start",
        "off",  # zoo.tools.profile.target opens the profiler around each step's call only
        "--target-processes",
        "all",
        "--replay-mode",
        "kernel",
        "--launch-count",
        str(cap),
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--log-file",
        str(log),
        "--metrics",
        ",".join(metrics),
        sys.executable,
        "-m",
        "zoo.tools.profile.target",
        fam.name,
        size_key,
        *steps,
    ]


def run_ncu(fam, steps, size, kind=None, echo=None):
    """Profile ``steps`` (Variants) of ``fam`` at ``size`` under ncu; returns (entries by step name, info dict).

    A metric this GPU or this ncu does not offer is dropped (and named in info['unavailable']) and the
    run repeated; any other failure is a ProfileError with ncu's own first error line."""
    exe = ncu_executable()
    key = results.size_key(size, kind, fam.kinds)
    names = [v.name for v in steps]
    metrics, unavailable = list(METRICS), []
    env = dict(os.environ, ZOO_TARGET="gpu", PYTHONUNBUFFERED="1")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="zoo-ncu-") as tmp:
        log = os.path.join(tmp, "ncu.csv")
        for _ in range(4):
            if os.path.exists(log):
                os.remove(log)
            proc = subprocess.run(
                ncu_command(exe, fam, key, names, metrics, log), capture_output=True, text=True, env=env
            )
            text = open(log).read() if os.path.exists(log) else ""
            errors = [line for line in (text + "\n" + proc.stdout + "\n" + proc.stderr).splitlines() if "ERROR" in line]
            missing = [m for m in metrics if any(m.split(".")[0] in e for e in errors)]
            if missing and len(missing) < len(metrics):
                unavailable += missing
                metrics = [m for m in metrics if m not in missing]
                if echo:
                    echo(f"ncu does not offer {', '.join(missing)} here: profiling without them")
                continue
            break
        rows = parse_ncu_csv(text)
    seconds = time.perf_counter() - started
    reported = [
        json.loads(line[len(TARGET_LINE) :]) for line in proc.stdout.splitlines() if line.startswith(TARGET_LINE)
    ]
    if proc.returncode != 0 or not rows:
        raise ProfileError(_ncu_failure(proc, errors, rows))
    by_step = split_steps(rows, [r["step"] for r in reported if r.get("marked", not r.get("skipped"))])
    entries = {}
    for r in reported:
        if r.get("skipped"):
            entries[r["step"]] = {"skipped": r["skipped"]}
        elif by_step.get(r["step"]):
            entries[r["step"]] = step_entry(fam, size, by_step[r["step"]], r.get("zoo_launches"))
        else:  # its call ran no kernel here (an all-reduce of one rank, on a one-GPU machine, exchanges nothing)
            entries[r["step"]] = {"skipped": "its call launched no kernel at this size on this machine"}
    silent = sorted({m for m in metrics if all(row["metrics"].get(m) is None for row in rows)})
    info = {
        "unavailable": sorted(set(unavailable)),
        "no_value": silent,
        "seconds": seconds,
        "kernels_profiled": sum(1 for row in rows if MARKER not in row["name"]),
        "ncu": _ncu_version(exe),
        "metrics": metrics,
    }
    return entries, info


def _ncu_failure(proc, errors, rows):
    text = "\n".join(errors) + proc.stderr
    if "ERR_NVGPUCTRPERM" in text or "permission" in text.lower():
        return (
            "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or let every "
            "user profile (the driver's NVreg_RestrictProfilingToAdminUsers=0)"
        )
    for line in errors + proc.stderr.splitlines()[::-1]:
        if line.strip():
            return f"ncu failed: {line.strip()[:300]}"
    if not rows:
        return f"ncu profiled no kernel (exit status {proc.returncode})"
    return f"ncu exited with status {proc.returncode}"


def _ncu_version(exe):
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else "?"


# -- the profile files ----------------------------------------------------------------------------
def run_setting(fam):
    """The spec's ``setting()``, what a run depended on besides its size and GPU (collectives: how many ranks on
    how many GPUs), or None for a family without one."""
    setting = getattr(fam.module, "setting", None)
    return setting() if setting is not None else None


def save(fam, size_key, entries, info, device, commit=None):
    """Merge one run's step entries into results/profiles/<gpu>-<family>.json; returns its path."""
    path = results.profile_path(slug(), fam.name)
    data = results.load(path) if path.exists() else {"family": fam.name, "sizes": {}}
    data["device"] = device
    data["family"] = fam.name
    data["updated"] = results.now()
    at = data["sizes"].setdefault(size_key, {"steps": {}})
    at["steps"].update(entries)
    at.update(
        ncu=info.get("ncu"),
        metrics=info.get("metrics"),
        unavailable=info.get("unavailable", []),
        commit=commit,
        updated=data["updated"],
    )
    setting = run_setting(fam)
    if setting:
        at["setting"] = setting
    results.write(path, data)
    return path
