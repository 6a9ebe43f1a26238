"""Every install that README.md and docs/ name resolves, and brings CUDA wheels of one major.

pip resolves each combination of extras without installing anything (``pip install --dry-run --report``), all of
them at once; it needs the package index, which CI has. Without the index the test is skipped, and says so.
"""

import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later

INSTALL = re.compile(r"pip install -e \"?\.\[([\w,-]+)\]\"?")  # pip install -e ".[gpu,test]"
SELF = re.compile(r"^zoo\[([\w,-]+)\]$")  # an extra that names others: zoo[ptx]
OFFLINE = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution", "unreachable")
# CUDA wheels whose version is their CUDA major (cuda-core and cuda-pathfinder are versioned on their own)
CUDA_WHEEL = re.compile(r"^(cuda-bindings|cuda-toolkit|nvidia-(cuda|nvvm|nvjitlink|cublas|cufft|curand|cusolver)\S*)$")
# CUDA 12 has no nvdisasm wheel: the CUDA 12 extras take CUDA 13's, a disassembler that shares no library with them
ALLOWED_ACROSS = {"nvidia-cuda-nvdisasm"}


def documented():
    """Each combination of extras that an install command in README.md or docs/*.md names, sorted."""
    found = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for extras in INSTALL.findall(path.read_text()):
            found.add(tuple(sorted(extras.split(","))))
    return sorted(found)


def requirements(extras):
    """The requirements of the project with these extras, the extras that name other extras expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    found, seen, todo = list(project["dependencies"]), set(), list(extras)
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        assert extra in optional, f"pyproject.toml has no extra {extra!r}"
        for requirement in optional[extra]:
            named = SELF.match(requirement)
            if named:
                todo += named.group(1).split(",")
            else:
                found.append(requirement)
    return found


def resolve(extras):
    """(exit code, {wheel: version} pip would install, pip's messages)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-"]
        + requirements(extras),
        capture_output=True,
        text=True,
        timeout=900,
    )
    wheels = {}
    if done.returncode == 0:
        report = json.loads(done.stdout)
        wheels = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}
    return done.returncode, wheels, done.stderr


def cuda_majors(wheels):
    """{wheel: the CUDA major it is built for} of the CUDA wheels among ``wheels``."""
    majors = {}
    for name, version in wheels.items():
        cupy = re.match(r"^cupy-cuda(\d\d)x$", name)
        if cupy:
            majors[name] = int(cupy.group(1))
        elif CUDA_WHEEL.match(name):
            majors[name] = int(version.split(".")[0])
    return majors


def test_the_documents_name_both_cuda_majors_with_test_and_dev():
    combinations = documented()
    for wanted in (("gpu", "test"), ("gpu-cu13", "test"), ("dev", "gpu"), ("dev", "gpu-cu13")):
        assert wanted in combinations, f"no install command names .[{','.join(wanted)}]: {combinations}"


def widest(combinations):
    """The combinations whose requirements no other one holds all of: a solution for those is one for the rest
    (the extras that bring CUDA libraries are the same in both, so the CUDA major is too)."""
    reqs = {c: set(requirements(c)) for c in combinations}
    return [c for c in combinations if not any(o != c and reqs[c] < reqs[o] for o in combinations)]


def test_every_documented_install_resolves_with_one_cuda_major():
    combinations = widest(documented())
    with ThreadPoolExecutor(len(combinations)) as pool:
        resolved = dict(zip(combinations, pool.map(resolve, combinations), strict=True))
    assert len(combinations) >= 2, combinations  # CUDA 12 and 13 at least
    for extras, (code, wheels, messages) in resolved.items():
        if code and any(word in messages for word in OFFLINE):
            pytest.skip(f"the package index cannot be reached: {messages.strip().splitlines()[-1]}")
        name = f".[{','.join(extras)}]"
        tail = "\n".join(line for line in messages.splitlines() if not line.startswith("WARNING"))[-2000:]
        assert code == 0, f"pip cannot install {name}:\n{tail}"
        if not set(extras) & {"gpu", "gpu-cu13", "ptx"}:
            continue  # no CUDA extra: numba-cuda's own choice (README, "a bare pip install")
        majors = cuda_majors(wheels)
        wanted = 13 if "gpu-cu13" in extras else 12
        wrong = {w: m for w, m in majors.items() if m != wanted and w not in ALLOWED_ACROSS}
        assert not wrong, f"{name} brings CUDA {wanted} wheels and also {wrong}"
        assert majors.get("cuda-bindings") == wanted, f"{name}: cuda-bindings {wheels.get('cuda-bindings')}"


OUTSIDE = "../" + "shared/"  # the folder beside the checkout that notes were once cited in (spelled apart: not here)


def test_the_notes_the_project_cites_live_in_the_repository():
    """No file points outside the repository for a note (a reader of a clone has no ../shared)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    outside = []
    for name in tracked:
        path = ROOT / name
        if path.suffix in (".png", ".json", ".ipynb") or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        outside += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1) if OUTSIDE in line]
    assert not outside, f"notes cited outside the repository: {outside}"
