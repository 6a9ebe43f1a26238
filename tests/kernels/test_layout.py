"""The layout rules that keep each step readable on its own (README, "Adding a variant").

- A step imports from zoo only the device-side package (``zoo.device``), the runtime below it
  (``zoo.runtime``: buffers, graphs, launch), ``zoo.errors``, ``zoo.SIMULATOR`` and its own family's
  spec and helpers; another step only when it names that step as its ``BASE`` (a step that launches the
  base's kernel differently, or one with a kernel of its own that hands the base the calls it does not take).
- Loading every family and every step loads no host tooling: no harness, results, reports,
  sweeps, tuning sweeps (a family's ``sweeps/``, which no step imports) or CLI.
- Each step's Changes and Why it is faster fit in about a screen's paragraph, and every barrier and
  fence in the kernels says why it is there.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zoo
from zoo.registry import VARIANT_FILE

STEPS = [v for fam in zoo.families() for v in fam]
HOST_TOOLING = ("zoo.bench", "zoo.tools", "zoo.cli", "zoo.exercise")  # packages, with every module in them
MAX_SECTION_LINES = 12
BARRIER = re.compile(r"\b(syncthreads\w*|syncwarp|threadfence\w*|cp_async_wait\w*)\s*\(")


def zoo_imports(source):
    """(line, module, names) for every import of a zoo module in the source, at any depth."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "zoo":
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "zoo":
                    yield node.lineno, alias.name, []


def allowed(variant, module, names):
    fam = f"zoo.kernels.{variant.family.name}"
    if module == "zoo":
        return set(names) <= {"SIMULATOR"}
    if module in ("zoo.errors", "zoo.device", "zoo.runtime") or module.startswith(("zoo.device.", "zoo.runtime.")):
        return True
    if module == fam + ".sweeps" or module.startswith(fam + ".sweeps."):  # the family's sweeps and tuning
        return False
    if module == fam:  # the spec, or modules of the family package by name
        return all((not VARIANT_FILE.match(n + ".py") or _is_base(variant, n)) and n != "sweeps" for n in names)
    if module.startswith(fam + "."):
        last = module.rsplit(".", 1)[1]
        return not VARIANT_FILE.match(last + ".py") or _is_base(variant, last)
    return False


def _is_base(variant, step_name):
    return variant.base is not None and variant.base.name == step_name


def test_launch_only_steps_are_those_with_a_base_and_no_kernel_of_their_own():
    """Which steps are launch-only (no exercise, 'Launches vNN's kernel' on the walkthrough page) is read from the
    files: a BASE and no @jit. sgemm v10 and v13 and the launch family's v02-v04 launch their base's
    kernel; gemv v07-v10 have their own and hand the base the rest."""
    launch_only = {f"{v.family.name}/{v.name[:3]}" for v in STEPS if v.launch_only}
    with_base = {f"{v.family.name}/{v.name[:3]}" for v in STEPS if v.base is not None}
    assert {"sgemm/v10", "sgemm/v13", "launch/v02", "launch/v03", "launch/v04"} <= launch_only
    assert {f"gemv/v{n:02d}" for n in range(7, 11)} <= with_base - launch_only


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: f"{v.family.name}-{v.name[:3]}")
def test_a_step_imports_only_the_device_package_its_spec_and_its_base(variant):
    wrong = [
        f"line {line}: {module} {names or ''}"
        for line, module, names in zoo_imports(variant.source)
        if not allowed(variant, module, names)
    ]
    assert not wrong, (
        f"{variant.path.name} imports what a step may not (the device package, zoo.errors, its "
        f"family's spec and helpers, and its BASE only):\n" + "\n".join(wrong)
    )


def test_loading_every_step_loads_no_host_tooling():
    code = (
        "import sys, zoo\n"
        "for f in zoo.families():\n"
        "    [v.module for v in f]\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('zoo')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = r.stdout.split()
    tooling = [
        m
        for m in loaded
        if m.startswith(HOST_TOOLING) or re.search(r"\.sweeps\b|\.(sweep\w*|tuning_sweep|exercises)$", m)
    ]
    assert not tooling, f"importing the families and their steps loaded host tooling: {tooling}"


def test_importing_a_step_reads_no_measured_file():
    """A step's module-level code reads no results/, tune table or user cache: what it launches is decided when it
    is called, so importing the zoo gives the same steps on every machine. Every file opened while the families
    and steps load is recorded (an audit hook) and only Python's own files are allowed."""
    code = (
        "import sys, zoo\n"
        "opened = []\n"
        "sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == 'open' else None)\n"
        "for f in zoo.families():\n"
        "    [v.module for v in f]\n"
        "print('\\n'.join(p for p in opened if not p.endswith(('.py', '.pyc', '.so')) and not p.startswith('/proc')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    read = [line for line in r.stdout.splitlines() if line.strip()]
    assert not read, f"importing the steps read files: {read}"


def test_a_family_folder_opens_with_its_lesson_its_sweeps_and_tuning_in_sweeps():
    """The spec, the steps, the exercises and the helpers the steps share sit in the family folder; the sweeps and
    the tuning sweep (``zoo.bench.sweeps``) in its ``sweeps/`` subpackage."""
    beside_steps = {
        f"{fam.name}/{p.name}"
        for fam in zoo.families()
        for p in fam.path.glob("*.py")
        if re.fullmatch(r"(sweep\w*|tune|tuning\w*)\.py", p.name)
    }
    assert not beside_steps, f"move these into the family's sweeps/: {sorted(beside_steps)}"


def _section_lengths(doc):
    found, current = {}, None
    for line in doc.splitlines():
        m = re.match(r"^\s*(Changes|Why it is faster):\s*(.*)$", line)
        if m:
            current = m.group(1)
            found[current] = 1 if m.group(2).strip() else 0
        elif current and line.strip():
            found[current] += 1
    return found


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: f"{v.family.name}-{v.name[:3]}")
def test_changes_and_why_are_short(variant):
    lengths = _section_lengths(ast.get_docstring(ast.parse(variant.source), clean=False) or "")
    long = {h: n for h, n in lengths.items() if n > MAX_SECTION_LINES}
    assert not long, (
        f"{variant.path.name}: {long} lines; keep Changes and Why it is faster to about "
        f"{MAX_SECTION_LINES} lines and move derivations beside the code they explain"
    )


def _simulator_sizes(source):
    """The names a file sets with ``NAME = a if SIMULATOR else b``: a size picked for the simulator."""
    return [
        node.targets[0].id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.IfExp)
        and isinstance(node.value.test, ast.Name)
        and node.value.test.id == "SIMULATOR"
    ]


def test_a_step_takes_its_simulator_sizes_from_its_spec():
    """Sizes for the simulator are the spec's (docs/DEVELOPING.md): each is declared once there, ``BLOCK = 64 if
    SIMULATOR else 256``, and the steps import it; a step branches on SIMULATOR only for what the simulator cannot
    do (launch v04: no CUDA graphs). The rule can fail: a spec's own line is found."""
    own = {f"{v.family.name}/{v.name}": _simulator_sizes(v.source) for v in STEPS}
    assert not {step: names for step, names in own.items() if names}, "move these sizes to the family's spec"
    assert "BLOCK" in _simulator_sizes(zoo.family("reduce").spec_source)


# what `zoo report` used to write into every step: a Measured heading and the file it quoted
GENERATED_FIGURES = re.compile(r"^\s*Measured:\s*$|From\s+results/[\w.-]+\.json", re.M)


@pytest.mark.parametrize("variant", STEPS, ids=lambda v: f"{v.family.name}-{v.name[:3]}")
def test_a_step_carries_no_generated_figures(variant):
    """A step file changes only when its kernel or its explanation does: its measured figures live in results/ and
    are generated onto its walkthrough page and `zoo show`, so a results refresh never touches a lesson."""
    found = [m.group(0).strip() for m in GENERATED_FIGURES.finditer(variant.source)]
    assert not found, (
        f"{variant.path.name} carries generated figures ({found}): delete its Measured section; "
        "`python -m zoo report` shows the step's figures on its page from results/"
    )


def test_every_barrier_and_fence_has_a_comment():
    bare = []
    for path in sorted((Path(zoo.__file__).parent / "kernels").rglob("*.py")):
        source = path.read_text()
        prose = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Expr) and isinstance(getattr(node.value, "value", None), str):
                prose |= set(range(node.lineno, node.end_lineno + 1))  # a docstring: barrier names there are prose
        lines = source.splitlines()
        for i, line in enumerate(lines):
            code = line.split("#", 1)[0]
            if i + 1 in prose or not BARRIER.search(code) or code.lstrip().startswith(("def ", "from ", "import ")):
                continue
            if "#" not in line and not (i and lines[i - 1].strip().startswith("#")):
                bare.append(f"{path.name}:{i + 1}: {line.strip()}")
    assert not bare, "barriers and fences without a comment saying why:\n" + "\n".join(bare)
