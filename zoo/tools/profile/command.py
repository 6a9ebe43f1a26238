"""``python -m zoo profile``: its arguments, and its three commands: count in the simulator, profile under
Nsight Compute, or set a saved profile beside the simulator's counts (``--compare``).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from rich.table import Table

from zoo.bench import results
from zoo.device import properties, slug
from zoo.registry import family
from zoo.runtime import SIMULATOR
from zoo.tools.profile import ProfileError, default_size, sim_size
from zoo.tools.profile.counters import gpu_summary
from zoo.tools.profile.ncu import run_ncu, run_setting, save
from zoo.tools.profile.prose import comparison, num, pair, pct, sentence
from zoo.tools.profile.simulated import SIM_COLUMNS, sim_summary, simulate_or_say


def add_arguments(parser):
    parser.add_argument("family")
    parser.add_argument("steps", nargs="*", help="steps to profile (default: all), e.g. v01 v03")
    parser.add_argument(
        "--size",
        help="size, or SIZE@KIND (default: the headline size on a GPU, the largest test size in the simulator)",
    )
    parser.add_argument("--sim", action="store_true", help="count in the simulator even on a GPU machine")
    parser.add_argument(
        "--no-divergence", action="store_true", help="simulator: skip line tracing (divergence), about 2x faster"
    )
    parser.add_argument(
        "--sim-constants",
        action="store_true",
        help="simulator: keep the smaller constants a step picks for the simulator (BLOCK = 64 if SIMULATOR else 256)",
    )
    parser.add_argument("--no-save", action="store_true", help="GPU: print the profile without saving it")
    parser.add_argument(
        "--compare",
        metavar="SIM_SIZE",
        help="GPU: set the saved profile (at --size, default the headline size) beside the simulator's counts at "
        "SIM_SIZE (sectors and bank conflicts); profile at --size SIM_SIZE first to compare the same launch",
    )
    parser.add_argument("--json", help="simulator: also write the step summaries to this JSON file")


def _steps(fam, names):
    return [fam[n] for n in names] if names else list(fam)


def _case(fam, text, default):
    if not text:
        return default, None
    size, kind = results.parse_case(text)
    fam.check_size(size)
    if kind is not None and kind not in fam.kinds:
        raise ValueError(f"{fam.name} has no input kind {kind!r}")
    return size, kind


def command(args, console):
    """``zoo profile``: returns the exit status; raises ProfileError, ValueError or KeyError on bad input."""
    fam = family(args.family)
    steps = _steps(fam, args.steps)
    if args.compare:
        return _compare(fam, steps, args, console)
    if SIMULATOR or args.sim:
        if not SIMULATOR:  # numba.cuda is the GPU's in this process: count in a fresh one
            env = dict(os.environ, ZOO_TARGET="sim")
            return subprocess.run([sys.executable, "-m", "zoo", "profile", *_argv(args, sim=True)], env=env).returncode
        return _simulate_command(fam, steps, args, console)
    return _gpu_command(fam, steps, args, console)


def _argv(args, sim=False, size=None, json_path=None):
    out = [args.family, *args.steps]
    if size or args.size:
        out += ["--size", str(size or args.size)]
    if args.no_divergence:
        out.append("--no-divergence")
    if args.sim_constants:
        out.append("--sim-constants")
    if json_path or args.json:
        out += ["--json", str(json_path or args.json)]
    if sim:
        out.append("--sim")
    return out


def _simulate_command(fam, steps, args, console):
    size, kind = _case(fam, args.size, sim_size(fam))
    key = results.size_key(size, kind, fam.kinds)
    table = Table(
        title=f"{fam.name} at {key} in the simulator, one call: sectors per global request, wavefronts and bank "
        "conflicts per shared request, divergent branches, threads per line"
    )
    table.add_column("step")
    for _, label in SIM_COLUMNS:
        table.add_column(label, justify="left" if label == "kernel" else "right")
    summaries, notes, constants = {}, [], {}
    for v in steps:
        counted, said = simulate_or_say(
            v, size, kind, divergence=not args.no_divergence, as_on_gpu=not args.sim_constants
        )
        notes += said
        if counted is None:
            continue
        summaries[v.name] = counted.summary
        for launch_counts in counted.launches:
            row = sim_summary([launch_counts])
            table.add_row(v.name[:3], *(_cell(row.get(k)) for k, _ in SIM_COLUMNS))
        if counted.constants:
            text = ", ".join(f"{k} = {val}" for k, val in counted.constants.items())
            constants.setdefault(text, []).append(v.name[:3])
        if not counted.check.ok and not v.demonstration:
            notes.append(f"{v.name}: WRONG OUTPUT while counted ({counted.check.detail})")
        before = v.compared_with
        if before is not None and before.name in summaries:
            said = sentence(before.name, summaries[before.name], v.name, summaries[v.name])
            if said:
                notes.append(said)
    console.print(table)
    for text, names in constants.items():
        notes.append(f"counted with the GPU's {text} (smaller in the simulator's own runs): {' '.join(names)}")
    for note in notes:
        console.print(f"- {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"family": fam.name, "size": key, "steps": summaries}, f, indent=1)
    return 0


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return num(value)
    return str(value)


def _gpu_command(fam, steps, args, console):
    size, kind = _case(fam, args.size, default_size(fam))
    key = results.size_key(size, kind, fam.kinds)
    console.print(f"profiling {len(steps)} step(s) of {fam.name} at {key} under Nsight Compute ...")
    entries, info = run_ncu(fam, steps, size, kind, echo=console.print)
    setting = run_setting(fam)
    world = f", {setting}" if setting else ""  # collectives: how many ranks on how many GPUs
    table = Table(
        title=f"{fam.name} at {key}{world} on {properties()['name']} (Nsight Compute; times at its locked clocks)"
    )
    for col in (
        "step",
        "kernel",
        "launches",
        "ms",
        "occupancy th/ach",
        "DRAM",
        "L2",
        "thr/inst",
        "top stall",
        "sectors/req ld/st",
        "conflicts/req ld/st",
        "FLOPs counted/modelled",
    ):
        table.add_column(col, justify="left" if col in ("step", "kernel", "top stall") else "right")
    notes = []
    for v in steps:
        entry = entries.get(v.name)
        if entry is None or "skipped" in entry:
            notes.append(f"{v.name}: {entry['skipped'] if entry else 'no kernel profiled'}")
            continue
        step_total = gpu_summary(entry)
        for k in entry["kernels"]:
            s = gpu_summary(entry, k["metrics"])
            flops = step_total["flops_counted"], step_total["flops_modelled"]
            table.add_row(
                v.name,
                k["name"],
                str(k["launches"]),
                num(s["duration_ms"]),
                pair(s["theoretical_occupancy"], s["achieved_occupancy"], pct),
                pct(s["dram_pct"]),
                pct(s["l2_pct"]),
                num(s["threads_per_instruction"]),
                ", ".join(f"{r} {num(x, 2)}" for r, x in s["stalls"][:1]) or "-",
                pair(s["global_load_sectors_per_request"], s["global_store_sectors_per_request"]),
                pair(s["shared_load_conflicts_per_request"], s["shared_store_conflicts_per_request"]),
                f"{_sci(flops[0])} / {_sci(flops[1])}",
            )
        if entry.get("zoo_launches", 0) > entry["launches_profiled"]:
            notes.append(
                f"{v.name}: profiled the first {entry['launches_profiled']} of {entry['zoo_launches']} launches"
            )
        before = v.compared_with
        if before is not None and "total" in entries.get(before.name, {}):
            said = sentence(before.name, gpu_summary(entries[before.name]), v.name, step_total)
            if said:
                notes.append(said)
    console.print(table)
    for note in notes:
        console.print(f"- {note}")
    if info["unavailable"]:
        console.print(f"- not offered by ncu on this GPU: {', '.join(info['unavailable'])}")
    if info["no_value"]:
        console.print(f"- ncu gave no value for: {', '.join(info['no_value'])}")
    profiled = f"{info['kernels_profiled']} kernels of {len(entries)} steps"
    console.print(f"- {profiled} profiled in {info['seconds']:.0f} s ({info['ncu']})")
    if not args.no_save:
        path = save(fam, key, entries, info, properties(), commit=results.git_commit())
        console.print(f"saved to {path.relative_to(results.ROOT)}; `python -m zoo report` puts it on the pages")
    return 0


def _sci(value):
    return "-" if not value else f"{value:.3g}"


def _compare(fam, steps, args, console):
    """The saved GPU profile beside the simulator's counts (run in a fresh simulator process)."""
    if SIMULATOR:
        raise ProfileError("--compare sets a GPU profile beside the simulator's counts: run it on the GPU")
    path = results.profile_path(slug(), fam.name)
    if not path.exists():
        raise ProfileError(f"no saved profile of {fam.name} here ({path.name}): run `zoo profile {fam.name}` first")
    data = results.load(path)
    size, kind = _case(fam, args.size, default_size(fam))
    key = results.size_key(size, kind, fam.kinds)
    gpu_entries = data["sizes"].get(key, {}).get("steps", {})
    if not gpu_entries:
        raise ProfileError(f"{path.name} has no profile at {key}: run `zoo profile {fam.name} --size {key}`")
    with tempfile.TemporaryDirectory(prefix="zoo-sim-") as tmp:
        out = os.path.join(tmp, "sim.json")
        argv = [fam.name, *args.steps, "--size", args.compare, "--no-divergence", "--json", out]
        if args.sim_constants:
            argv.append("--sim-constants")
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "zoo", "profile", *argv],
            env=dict(os.environ, ZOO_TARGET="sim"),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not os.path.exists(out):
            last = ((proc.stderr or proc.stdout).strip().splitlines() or ["?"])[-1]
            raise ProfileError(f"the simulator's count failed: {last}")
        sim = json.load(open(out))
    seconds = time.perf_counter() - started
    rows = comparison({v.name: sim["steps"][v.name] for v in steps if v.name in sim["steps"]}, gpu_entries)
    table = Table(title=f"{fam.name}: the simulator at {args.compare} against Nsight Compute at {key}")
    for col in ("step", "figure", "simulator", "ncu", "agree (10%)"):
        table.add_column(col, justify="left" if col in ("step", "figure") else "right")
    for step, label, a, b, ok in rows:
        table.add_row(step, label, num(a), num(b), {True: "yes", False: "[red]NO[/]", None: "-"}[ok])
    console.print(table)
    console.print(f"- simulator counted in {seconds:.0f} s")
    return 0
