"""The results file: one JSON per GPU under results/, written by ``zoo run --save``.

Everything that shows a figure (docs/results.md and the README's headline table,
the plots, each family's page and ``zoo show``) is generated from these files by
``zoo report``; no figure is typed by hand, and none is written into a step file. A step folded into another or
removed keeps its measured rows under its old name (nothing in results/ is rewritten), and nothing shows them:
``load_all`` and ``load_profiles`` read every family's rows of the steps it has (``current_rows``).
"""

import dataclasses
import datetime
import json
import math
import os
import subprocess
from pathlib import Path

from zoo.device import slug
from zoo.registry import families, family
from zoo.registry.spec import VARIANT_FILE

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "results"


KIND_SEPARATOR = "@"


# A timed figure is marked as the host's pace (README tables) where a launch call's host time is this much of it or
# more. Where the host is slower than the kernel, back-to-back launches leave the GPU idle between kernels and the
# figure is the call's time (about 1x); where the kernel is slower, the figure is the kernel's and the call takes less.
# Measured on the H100 (gemv int4, v08 to v10 at 4096 x 14336 and 8192 x 8192, kernels of 11.3 to 14.8 us in a CUDA
# graph): launch calls of 11.4 to 18.9 us on the host (median of 200 queued calls), eager figures of 11.5 to 19.1 us.
# The host time is a batch's calls over their number: a batch's first call alone took 20.5 us where the figure was
# 12.3 (v09, 14336 x 4096).
HOST_PACED = 0.8


def host_paced(host_us, ms):
    """Whether a figure of ``ms`` a call, timed with launch calls of ``host_us`` each, is (about) the host's pace
    rather than the kernel's. False where the host time is unknown (None or NaN: a wall-clock timer, a CPU row,
    or a row recorded before host times were kept)."""
    if host_us is None or host_us != host_us or not ms:
        return False
    return host_us * 1e-3 >= HOST_PACED * ms


def size_key(size, kind=None, kinds=(None,)):
    """'4096', '1000x777x333'; with a kind of input other than the family's first, '268435456@int32'."""
    key = "x".join(str(s) for s in size) if isinstance(size, (tuple, list)) else str(size)
    return key if kind is None or kind == kinds[0] else f"{key}{KIND_SEPARATOR}{kind}"


def parse_case(text):
    """'4096' -> (4096, None); '268435456@skewed' -> (268435456, 'skewed'). ValueError otherwise."""
    size, sep, kind = text.partition(KIND_SEPARATOR)
    if sep and not kind:
        raise ValueError(f"name a kind of input after {KIND_SEPARATOR!r}, as in 4099{KIND_SEPARATOR}int32")
    return parse_size(size), (kind or None)


def parse_size(text):
    """'4096' -> 4096; '1000x777x333' -> (1000, 777, 333); '2^24' -> 16777216 (a power as B^E). ValueError
    otherwise."""

    def number(part):
        base, power, exponent = part.partition("^")
        return int(base) ** int(exponent) if power else int(part)

    parts = text.lower().split("x")
    try:
        values = tuple(number(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"a size is an integer or integers joined by 'x' (1000x777x333; a power as 2^24), not {text!r}"
        ) from None
    if any(v < 1 for v in values):
        raise ValueError(f"sizes are positive, got {text!r}")
    return values[0] if len(values) == 1 else values


PROFILES_DIR = RESULTS_DIR / "profiles"  # Nsight Compute profiles, one file per GPU and family (zoo profile)


def git_commit():
    """The short hash of the checkout's HEAD, which a results file records; ``$ZOO_COMMIT`` where the tree has no
    history (a copy on the lent GPU); None outside a git checkout."""
    if os.environ.get("ZOO_COMMIT"):
        return os.environ["ZOO_COMMIT"]
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def path_for(slug):
    return RESULTS_DIR / f"{slug}.json"


def profile_path(slug, family):
    return PROFILES_DIR / f"{slug}-{family}.json"


def load_profiles(family):
    """{gpu slug: profile data} of every GPU profiled for ``family`` (the file names the family inside)."""
    found = {}
    for path in sorted(PROFILES_DIR.glob(f"*-{family}.json")):
        data = load(path)
        if data.get("family") == family:
            _current_profile(data)
            found[path.name[: -len(f"-{family}.json")]] = data
    return found


def _current_profile(data):
    """A family's profile file with the profiles of steps it no longer has left out (``current_rows``)."""
    if data["family"] not in {f.name for f in families()}:
        return
    fam = family(data["family"])
    for at in data.get("sizes", {}).values():
        if "steps" in at:
            at["steps"] = current_rows(fam, at["steps"])


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def write(path, data):
    """Write a results JSON the way every results file is written (sorted keys, NaN as null)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_clean(data), indent=1, sort_keys=True) + "\n")
    return path


def load(path):
    return json.loads(Path(path).read_text())


def load_all(current=True):
    """{GPU slug: its results file} (not results/mlir-*.json: zoo.tools.backends' numba-cuda-mlir survey); with
    ``current`` (what every page and table reads), each family's rows of the
    steps it has (``current_rows``), and only the families the zoo has."""
    found = {p.stem: load(p) for p in sorted(RESULTS_DIR.glob("*.json")) if not p.name.startswith("mlir-")}
    if current:
        for data in found.values():
            data["families"] = _current_families(data.get("families", {}))
    return found


def is_step_row(name):
    """Whether a row is named as a step's file is (``vNN_technique``); library and CPU rows are not."""
    return VARIANT_FILE.match(f"{name}.py") is not None


def current_rows(fam, rows):
    """``rows`` ({row name: entry}) without those of steps ``fam`` no longer has (folded or removed: gemv's old
    v11-v14, sgemm's old v14, hgemm's old v05), which results/ keeps under their old names as they were measured."""
    steps = {v.name for v in fam}
    return {name: row for name, row in rows.items() if name in steps or not is_step_row(name)}


def _current_families(by_family):
    """{family: {size key: rows}} of the zoo's families, each size's rows ``current_rows`` (a size left with none
    is left out)."""
    kept = {}
    for fam in families():
        by_size = {key: current_rows(fam, rows) for key, rows in by_family.get(fam.name, {}).items()}
        by_size = {key: rows for key, rows in by_size.items() if rows}
        if by_size:
            kept[fam.name] = by_size
    return kept


def _clean(value):
    """JSON has no NaN: store it as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def save(family_runs, device, versions, commit=None):
    """Merge {family: {size key: [Measurement, ...]}} into this GPU's results file; returns its path."""
    path = path_for(slug())
    data = load(path) if path.exists() else {"device": device, "families": {}}
    data["device"] = device
    data["versions"] = versions
    data["updated"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if commit:
        data["commit"] = commit
    for fam, by_size in family_runs.items():
        fam_data = data["families"].setdefault(fam, {})
        for key, measurements in by_size.items():
            entry = fam_data.setdefault(key if isinstance(key, str) else size_key(key), {})
            for m in measurements:
                entry[m.name] = _clean(dict(dataclasses.asdict(m), commit=commit, date=data["updated"]))
    RESULTS_DIR.mkdir(exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path
