"""Lines of code: what a reader writes to get a row's figure, counted the same way for every row of a table.

A step's lines are its file's, and its BASE's where it launches an earlier step's kernel (one level deep, as the
step reads). A library row's are those of the code the spec names for it in ROW_CODE (``"module.function"``: a
Triton kernel and its launch, a torch function, CUDA C and its RawModule call), else of the spec's own row function
(a cuBLAS call is a line or two); a CPU row's, of its function. A function counts with the module-level functions,
classes and constants of its own module that it uses, and those they use: a Triton launch brings its kernel, a
RawModule call its CUDA C source.

Counted: the lines that hold code. Not counted: blank lines, comment lines (``#``, and ``//`` in CUDA C held in a
string), docstrings and import statements, which every row and step has alike. The source is read with ``ast``,
never imported: a Triton row is counted on a machine without Triton.
"""

import ast
import functools
import importlib.util
import sys
from pathlib import Path

COMMENT_PREFIXES = ("#", "//", "/*", "*")  # Python comments, and CUDA C's in a source string


@functools.cache
def _parsed(path):
    """(source lines, module tree) of a Python file."""
    text = Path(path).read_text()
    return text.splitlines(), ast.parse(text)


def _docstring_lines(node):
    """Line numbers of the docstring of a module, class or function node (empty when it has none)."""
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            return set(range(body[0].lineno, body[0].end_lineno + 1))
    return set()


def _skipped_lines(node):
    """Docstrings and import statements anywhere inside ``node``."""
    skipped = set()
    for inner in ast.walk(node):
        if isinstance(inner, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            skipped |= _docstring_lines(inner)
        elif isinstance(inner, (ast.Import, ast.ImportFrom)):
            skipped |= set(range(inner.lineno, inner.end_lineno + 1))
    return skipped


def _span(node):
    """The line numbers a top-level statement covers, its decorators included."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return set(range(first, node.end_lineno + 1))


def count(lines, numbers):
    """How many of the given line numbers (1-based) of ``lines`` hold code: not blank, not a comment."""
    return sum(1 for i in numbers if lines[i - 1].strip() and not lines[i - 1].strip().startswith(COMMENT_PREFIXES))


def _defined_names(node):
    """The module-level names a top-level statement defines."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def _used_names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def function_lines(path, name):
    """Lines of code of the module-level ``name`` in the Python file ``path`` (a function, class or constant), with
    every module-level definition of the same file it uses, and those they use; None where the file defines no
    such name."""
    lines, tree = _parsed(str(path))
    definitions = {}
    for node in tree.body:
        for defined in _defined_names(node):
            definitions.setdefault(defined, node)
    if name not in definitions:
        return None
    taken, waiting = [], [definitions[name]]
    while waiting:
        node = waiting.pop()
        if any(node is t for t in taken):
            continue
        taken.append(node)
        waiting += [definitions[n] for n in _used_names(node) if n in definitions]
    numbers = set().union(*(_span(n) for n in taken)) - set().union(*(_skipped_lines(n) for n in taken))
    return count(lines, numbers)


def file_lines(path):
    """Lines of code of a whole Python file (its docstring and imports left out)."""
    lines, tree = _parsed(str(path))
    return count(lines, set(range(1, len(lines) + 1)) - _skipped_lines(tree))


def step_lines(variant):
    """A step's lines: its file's, and its base's where it names one (BASE: the kernel it launches)."""
    total = file_lines(variant.path)
    if variant.base is not None:
        total += file_lines(variant.base.path)
    return total


def _module_file(module_name):
    """The file of a module, found without importing it (a Triton row's module imports Triton)."""
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "__file__", None):
        return loaded.__file__
    spec = importlib.util.find_spec(module_name)
    return spec.origin if spec is not None else None


def row_lines(fam, name):
    """A library or CPU row's lines of code (see the module docstring); None where they cannot be found (a lambda, a
    row built elsewhere)."""
    declared = getattr(fam.module, "ROW_CODE", {}).get(name)
    if declared is not None:
        module_name, _, function = declared.rpartition(".")
        path = _module_file(module_name)
        return None if path is None else function_lines(path, function)
    row = fam.baselines.get(name) or fam.cpu_rows.get(name, (None,))[0]
    path = getattr(sys.modules.get(getattr(row, "__module__", "")), "__file__", None)
    if row is None or path is None or row.__name__ == "<lambda>":
        return None
    return function_lines(path, row.__name__)


def lines(fam, name):
    """Lines of code of the row or step ``name`` of a family (None where they cannot be counted)."""
    for variant in fam:
        if variant.name == name:
            return step_lines(variant)
    return row_lines(fam, name)
