"""The host side in layers: every zoo module imports only from its own layer or those below it, and no import
cycle joins any two modules (docs/DEVELOPING.md, "The layers", draws them).

Every ``import zoo...`` and ``from zoo... import`` in zoo/ is read, at any depth (inside functions too), and a
name the package face hands on (``from zoo import SIMULATOR``, ``zoo.family``) counts as an import of the module
that defines it. An import under ``if TYPE_CHECKING:`` (a name for an annotation, never imported when the code runs:
the registry's Variant names the Family that makes it) counts for the layers but closes no cycle.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("errors", "simulator", "runtime", "device", "kernels", "registry", "llm", "bench", "tools", "cli")
FACE = {  # what ``zoo`` (zoo/__init__.py) hands on, and where it is defined
    "SIMULATOR": "zoo.runtime",
    "MODE": "zoo.runtime",
    "family": "zoo.registry",
    "families": "zoo.registry",
    "registry": "zoo.registry",
    "graph": "zoo.runtime.graphs",
    "Graph": "zoo.runtime.graphs",
}
# A family spec's library and ceiling rows (EXTRA_BASELINES, CEILINGS, STRONGEST) are functions that the bench
# calls; each imports what it runs (a library's wrapper, the copy ceiling) when it runs, so that importing the
# families loads no host tooling (tests/kernels/test_layout.py). The only upward imports there are.
ROW_IMPORTS = {"zoo.bench.libraries", "zoo.bench.ceilings"}


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted((ROOT / "zoo").rglob("*.py"))}


def layer(module):
    """The layer of a zoo module, by its package; a family's sweeps and tuning run in the bench, its exercises
    in the tools."""
    parts = module.split(".")
    if module == "zoo":
        return None  # the face: its names count as the modules that define them
    if parts[1] == "kernels":
        if "sweeps" in parts[3:]:
            return "bench"
        return "tools" if parts[-1] == "exercises" else "kernels"
    return {"exercise": "tools", "__main__": "cli"}.get(parts[1], parts[1])


def resolve(name):
    """The module a dotted name imports: the longest prefix that is a zoo module (zoo.device.jit.jit ->
    zoo.device.jit), a name of the face where it is defined."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] == "zoo" and parts[1] in FACE and f"zoo.{parts[1]}" not in MODULES:
        return FACE[parts[1]]  # a name, not a module: zoo.registry.variant is a module of its own
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate
    return None


def _attribute_chain(node):
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(names)])
    return None


def imports(module):
    """[(line, imported module, inside a function)] for every zoo import of ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    found, bare_zoo = [], []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and child.level == 0 and (child.module or "").split(".")[0] == "zoo":
                for alias in child.names:
                    target = resolve(f"{child.module}.{alias.name}")
                    if target is not None:
                        found.append((child.lineno, target, inner))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "zoo":
                        if alias.name == "zoo":
                            bare_zoo.append(inner)
                        elif resolve(alias.name):
                            found.append((child.lineno, resolve(alias.name), inner))
            elif isinstance(child, ast.Attribute) and bare_zoo:
                chain = _attribute_chain(child)
                if chain and chain.startswith("zoo.") and resolve(chain) not in (None, "zoo"):
                    found.append((child.lineno, resolve(chain), in_function))
                    continue  # zoo.a.b.c: the outermost chain only
            visit(child, inner)

    visit(tree, False)
    return [(line, target, inner) for line, target, inner in found if target != module]


GRAPH = {m: imports(m) for m in MODULES}


def typing_only(module):
    """The lines of ``module``'s imports under ``if TYPE_CHECKING:``, which never run."""
    lines = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.If) and _attribute_chain(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.body:
                lines.update(n.lineno for n in ast.walk(child) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return lines


def rank(module):
    return LAYERS.index(layer(module))


def test_every_module_has_a_layer():
    assert not [m for m in MODULES if m != "zoo" and layer(m) not in LAYERS]


@pytest.mark.parametrize("module", [m for m in MODULES if m != "zoo"])
def test_a_module_imports_only_its_own_layer_and_those_below(module):
    upward = [
        f"line {line}: {target} ({layer(target)})"
        for line, target, inner in GRAPH[module]
        if target != "zoo"
        and rank(target) > rank(module)
        and not (layer(module) == "kernels" and inner and target in ROW_IMPORTS)
    ]
    assert not upward, f"{module} ({layer(module)}) imports from above its layer: {upward}"


def test_the_face_hands_on_only_the_runtime_and_the_registry():
    assert {target for _, target, _ in GRAPH["zoo"]} <= set(FACE.values())


def test_no_import_cycle():
    """Depth-first search for a cycle among the zoo modules, every import counted (inside functions too) but those
    for annotations only."""
    skipped = {m: typing_only(m) for m in MODULES}
    edges = {m: sorted({t for line, t, _ in GRAPH[m] if t != "zoo" and line not in skipped[m]}) for m in MODULES}
    state, stack = {}, []

    def walk(m):
        state[m] = "open"
        stack.append(m)
        for t in edges[m]:
            if state.get(t) == "open":
                return stack[stack.index(t) :] + [t]
            if t not in state:
                cycle = walk(t)
                if cycle:
                    return cycle
        stack.pop()
        state[m] = "done"
        return None

    for m in MODULES:
        if m not in state:
            cycle = walk(m)
            assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_check_sees_an_upward_import():
    """The rule can fail: the device package importing the bench is an upward import, the bench importing the
    runtime is not."""
    assert rank("zoo.bench.harness") > rank("zoo.device.jit") > rank("zoo.runtime.launch")
    assert resolve("zoo.SIMULATOR") == "zoo.runtime" and resolve("zoo.device.jit.jit") == "zoo.device.jit"
    assert resolve("zoo.family") == "zoo.registry" and resolve("zoo.registry.variant.Variant") == "zoo.registry.variant"
    assert layer("zoo.kernels.sgemm.sweeps.tune") == "bench" and layer("zoo.kernels.sgemm.v01_naive") == "kernels"


def test_an_import_for_annotations_only_is_seen_and_set_apart():
    """The registry's Variant names Family under TYPE_CHECKING: an import the graph holds (so a typing-only import
    from above would still be upward) and the cycle search skips (family.py imports variant.py when it runs)."""
    (line,) = [line for line, target, _ in GRAPH["zoo.registry.variant"] if target == "zoo.registry.kernel_family"]
    assert line in typing_only("zoo.registry.variant")
    assert not typing_only("zoo.registry.kernel_family") & {ln for ln, t, _ in GRAPH["zoo.registry.kernel_family"]}
