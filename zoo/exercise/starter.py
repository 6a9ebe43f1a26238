"""A starter file: the earlier step with the lines the step changes replaced by TODO(exercise) blocks.

The two files are compared on their code with comments left out (a comment the step
rewrote is no change to write), after renaming the step's functions back to the
earlier step's names (a kernel called ``reduce_sequential`` instead of
``reduce_strided`` is no lesson). Each changed run of lines is widened to whole
statements of one block, so that a TODO block never cuts a statement or a ``def``
in two. Then:

- lines the step replaces become a TODO block: the earlier lines shown as comments
  (context, not the answer), a line of prose, and ``raise NotImplementedError`` for
  the learner to delete once the block is written: the starter fails until then;
- lines the step adds become a TODO block with nothing to show but the raise;
- lines the step only removes stay, between a TODO line and an end marker;
- module-level imports are merged (the earlier step's and the step's), not a TODO.

The step's own new lines never appear in the starter; its comments there become
hints (``hints``), each naming its block.
"""

import ast
import bisect
import difflib
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass, field

TODO = "TODO(exercise)"
WIDTH = 100
MERGE_GAP = 2  # lines of code between two changed runs of one block that make them one TODO block


@dataclass
class Todo:
    number: int
    kind: str  # "replace", "insert" or "delete"
    base_lines: list  # the earlier step's lines of this block (raw)
    step_lines: list  # the zoo's step's lines here: never written to the starter
    step_comments: list = field(default_factory=list)  # the step's comments on its lines here, new in the step


@dataclass
class _Stmt:
    start: int
    end: int
    block: object
    depth: int
    parent: int  # index of the enclosing statement, -1 at module level
    compound: bool
    is_import: bool


def _statements(tree):
    """Every statement of a module with its line span (decorators included), block and parent."""
    out = []

    def visit(body, block, depth, parent):
        for node in body:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            me = len(out)
            out.append(
                _Stmt(
                    start, node.end_lineno, block, depth, parent, False, isinstance(node, (ast.Import, ast.ImportFrom))
                )
            )
            bodies = [getattr(node, name, None) for name in ("body", "orelse", "finalbody")]
            bodies += [h.body for h in getattr(node, "handlers", [])] + [c.body for c in getattr(node, "cases", [])]
            for i, child in enumerate(bodies):
                if isinstance(child, list) and child and isinstance(child[0], ast.stmt):
                    out[me].compound = True
                    visit(child, (me, i), depth + 1, me)

    visit(tree.body, "module", 0, -1)
    return out


def _docstring_end(tree):
    """Number of lines up to the end of the module docstring (0 without one)."""
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
        if isinstance(first.value.value, str):
            return first.end_lineno
    return 0


def _comments(text):
    """{line number (1-based): (column, comment text without '#')} of a source text."""
    found = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = (tok.start[1], tok.string.lstrip("#").strip())
    return found


def _code_parts(lines, comments):
    """Each line without its comment and trailing blanks ('' for blank and comment-only lines)."""
    return [(line[: comments[i + 1][0]] if i + 1 in comments else line).rstrip() for i, line in enumerate(lines)]


def _function_renames(base_tree, step_tree):
    """{step's name: earlier step's name} for functions defined in the same place under another name: among the
    functions of one parent, those that take the place of as many others (difflib's one-for-one replacements)."""
    renames = {}

    def children(node):
        return [n for n in ast.iter_child_nodes(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def pair(base_parent, step_parent):
        old, new = children(base_parent), children(step_parent)
        matcher = difflib.SequenceMatcher(None, [n.name for n in old], [renames.get(n.name, n.name) for n in new])
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                for a, b in zip(old[i1:i2], new[j1:j2], strict=True):
                    if a.name != b.name:
                        renames[b.name] = a.name
                    pair(a, b)

    pair(base_tree, step_tree)
    base_names = {n.name for n in ast.walk(base_tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return {new: old for new, old in renames.items() if new not in base_names}


def _rename(parts, renames):
    if not renames:
        return parts
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b")
    return [pattern.sub(lambda m: renames[m.group(1)], p) for p in parts]


def _top_keys(tree, renames):
    """{line: the module-level definition holding it ('def name'), or 'module'} (names renamed as the diff is)."""
    keys = {}
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            key = f"def {renames.get(node.name, node.name)}"
        else:
            key = "module"
        for line in range(start, node.end_lineno + 1):
            keys[line] = key
    return keys


def _groups(keys, lo, hi):
    """[(key, first, end)]: runs of one key among code lines lo .. hi - 1."""
    runs = []
    for i in range(lo, hi):
        if runs and runs[-1][0] == keys[i]:
            runs[-1][2] = i + 1
        else:
            runs.append([keys[i], i, i + 1])
    return runs


def _split_by_definition(opcodes, base_keys, step_keys):
    """difflib's runs cut where they cross from one module-level definition to another.

    A change at the end of a kernel and the removal of the function after it are one run to difflib
    (no equal line of code between them); as two they become two TODO blocks, each in its own place."""
    out = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            out.append((tag, i1, i2, j1, j2))
            continue
        steps = _groups(step_keys, j1, j2)
        at_i, at_j = i1, j1
        for key, b_lo, b_hi in _groups(base_keys, i1, i2):
            match = next((g for g in steps if g[0] == key), None)
            if match is None:
                continue
            while steps[0] is not match:  # the step's definitions before it: added before this one
                _, s_lo, s_hi = steps.pop(0)
                out.append(("insert", at_i, at_i, s_lo, s_hi))
                at_j = s_hi
            steps.pop(0)
            if b_lo > at_i:  # the earlier step's definitions before it: dropped
                out.append(("delete", at_i, b_lo, at_j, at_j))
            out.append(("replace", b_lo, b_hi, match[1], match[2]))
            at_i, at_j = b_hi, match[2]
        if at_i < i2 or at_j < j2:
            out.append(
                ("replace" if at_i < i2 and at_j < j2 else ("delete" if at_i < i2 else "insert"), at_i, i2, at_j, j2)
            )
    return out


class _Diff:
    """The changed runs of two sources, widened to whole statements of the earlier one."""

    def __init__(self, base_text, step_text):
        self.base_lines = base_text.splitlines()
        self.step_lines = step_text.splitlines()
        self.base_tree, self.step_tree = ast.parse(base_text), ast.parse(step_text)
        self.base_comments, self.step_comments = _comments(base_text), _comments(step_text)
        self.base_code = _code_parts(self.base_lines, self.base_comments)
        self.step_code = _code_parts(self.step_lines, self.step_comments)
        self.b0, self.s0 = _docstring_end(self.base_tree), _docstring_end(self.step_tree)
        renames = _function_renames(self.base_tree, self.step_tree)
        renamed = _rename(self.step_code, renames)
        # compared on lines of code only: blank and comment-only lines would pair up the wrong places
        self.base_keep = [k for k in range(self.b0, len(self.base_code)) if self.base_code[k].strip()]
        self.step_keep = [k for k in range(self.s0, len(self.step_code)) if self.step_code[k].strip()]
        a = [self.base_code[k].strip() for k in self.base_keep]
        b = [renamed[k].strip() for k in self.step_keep]
        opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()  # in code lines
        base_keys = _top_keys(self.base_tree, {})
        step_keys = _top_keys(self.step_tree, renames)
        self.opcodes = _split_by_definition(
            opcodes, [base_keys.get(k + 1) for k in self.base_keep], [step_keys.get(k + 1) for k in self.step_keep]
        )
        self.stmts = _statements(self.base_tree)
        self.step_stmts = _statements(self.step_tree)

    # -- positions: 0-based line indices, ranges half-open ------------------------------------------
    @staticmethod
    def _lines(keep, c_lo, c_hi, first):
        """Lines of code lines [c_lo, c_hi): from the first one's line to the end of the last, or the empty
        run just after the code line before (``first`` when there is none)."""
        if c_hi > c_lo:
            return keep[c_lo], keep[c_hi - 1] + 1
        at = keep[c_lo - 1] + 1 if c_lo > 0 else first
        return at, at

    def _code_map(self, c, end, to_step=True):
        """The other file's code-line boundary matching code-line boundary c of this one: where lines were
        added at c, before them for the start of a run and after them for its end."""
        found = []
        for tag, i1, i2, j1, j2 in self.opcodes:
            if not to_step:
                i1, i2, j1, j2 = j1, j2, i1, i2
            if i1 <= c <= i2:
                found.append(j1 + (c - i1) if tag == "equal" else (j1 if c == i1 else j2) if c in (i1, i2) else j1)
        if not found:
            return len(self.step_keep if to_step else self.base_keep)
        return max(found) if end else min(found)

    def step_range(self, lo, hi):
        """The step's lines in place of the earlier step's lines [lo, hi)."""
        c_lo, c_hi = bisect.bisect_left(self.base_keep, lo), bisect.bisect_left(self.base_keep, hi)
        return self._lines(self.step_keep, self._code_map(c_lo, False), self._code_map(c_hi, True), self.s0)

    def base_range(self, lo, hi):
        """The earlier step's lines in place of the step's lines [lo, hi)."""
        c_lo, c_hi = bisect.bisect_left(self.step_keep, lo), bisect.bisect_left(self.step_keep, hi)
        return self._lines(
            self.base_keep, self._code_map(c_lo, False, False), self._code_map(c_hi, True, False), self.b0
        )

    def _changes(self):
        """[(lo, hi)]: the earlier step's lines of each run whose code differs (empty where the step adds)."""
        return [self._lines(self.base_keep, i1, i2, self.b0) for tag, i1, i2, _, _ in self.opcodes if tag != "equal"]

    @staticmethod
    def _widen_in(stmts, code, lo, hi):
        """(lo, hi, block): the smallest run of a file holding [lo, hi) that is whole statements of one block."""
        code_lines = [k + 1 for k in range(lo, hi) if code[k].strip()]
        if not code_lines:  # an insertion: move it off the inside of a simple statement
            for s in stmts:
                if not s.compound and s.start <= lo < s.end:  # lo (0-based) is a line after s.start
                    return min(lo, s.start - 1), max(hi, s.end), s.block
            return lo, hi, None

        def innermost(line):
            best = None
            for i, s in enumerate(stmts):
                if s.start <= line <= s.end and (best is None or s.depth > stmts[best].depth):
                    best = i
            return best

        current = {innermost(line) for line in code_lines}
        current.discard(None)
        while len({stmts[i].block for i in current}) > 1:
            deepest = max(stmts[i].depth for i in current)
            current = {stmts[i].parent if stmts[i].depth == deepest else i for i in current}
        block = stmts[next(iter(current))].block
        first, last = min(code_lines), max(code_lines)
        chosen = [s for s in stmts if s.block == block and s.start <= last and s.end >= first]
        return min(lo, min(s.start for s in chosen) - 1), max(hi, max(s.end for s in chosen)), block

    def _widen(self, lo, hi):
        """Whole statements of one block in both files: the earlier step's run, widened until the step's
        lines in its place are whole statements of one block too (a loop the step closes earlier, say)."""
        while True:
            lo, hi, block = self._widen_in(self.stmts, self.base_code, lo, hi)
            s_lo, s_hi = self.step_range(lo, hi)
            w_lo, w_hi, _ = self._widen_in(self.step_stmts, self.step_code, s_lo, s_hi)
            if (w_lo, w_hi) == (s_lo, s_hi):
                return lo, hi, block
            b_lo, b_hi = self.base_range(w_lo, w_hi)
            if b_lo >= lo and b_hi <= hi:
                return lo, hi, block
            lo, hi = min(lo, b_lo), max(hi, b_hi)

    def _indent(self, lo, hi):
        """Indentation of a run's first line of code (the step's, for lines the step adds)."""
        for lines, code, (a, b) in (
            (self.base_lines, self.base_code, (lo, hi)),
            (self.step_lines, self.step_code, self.step_range(lo, hi)),
        ):
            for k in range(a, b):
                if code[k].strip():
                    return _indent_of(lines[k])
        return ""

    def _same_block(self, hi, lo, indent):
        """True when the earlier step's lines [hi, lo) hold at most MERGE_GAP lines of code, all inside the block
        of that indentation (none of them less indented)."""
        between = [k for k in range(hi, lo) if self.base_code[k].strip()]
        return len(between) <= MERGE_GAP and all(_indent_of(self.base_lines[k]).startswith(indent) for k in between)

    def regions(self):
        """[(i1, i2, j1, j2)]: the earlier step's lines to replace and the step's lines in their place.

        Runs inside one function's block with at most MERGE_GAP lines of code between them are one region: one
        idea, one TODO block (a barrier between two changed lines is part of the change)."""
        runs = sorted(self._changes())
        regions = []
        while runs:
            lo, hi = runs.pop(0)
            while True:
                lo, hi, _ = self._widen(lo, hi)
                touching = [r for r in runs if (r[0] < hi and r[1] > lo) or (r[0] == r[1] and lo < r[0] < hi)]
                if not touching:
                    break
                for r in touching:
                    runs.remove(r)
                    lo, hi = min(lo, r[0]), max(hi, r[1])
            indent = self._indent(lo, hi)
            if regions and (
                regions[-1][1] > lo
                or (indent and regions[-1][2] == indent and self._same_block(regions[-1][1], lo, indent))
            ):
                plo, phi, _ = regions.pop()
                lo, hi, _ = self._widen(min(lo, plo), max(hi, phi))
                indent = self._indent(lo, hi)
            regions.append((lo, hi, indent))
        return [(i1, i2, *self.step_range(i1, i2)) for i1, i2, _ in regions]

    # -- imports ------------------------------------------------------------------------------------
    def import_lines(self, stmts, lo, hi):
        """0-based indices of the lines of module-level imports inside [lo, hi)."""
        found = set()
        for s in stmts:
            if s.is_import and s.block == "module" and lo < s.start and s.end <= hi:
                found |= set(range(s.start - 1, s.end))
        return found


def _merged_imports(texts):
    """One import block from the import statements of both files: 'from m import a, b' merged by module."""
    order, names, plain = [], {}, []
    for text in texts:
        for node in ast.parse(text).body:
            if isinstance(node, ast.ImportFrom):
                key = ("." * node.level) + (node.module or "")
                if key not in names:
                    order.append(key)
                    names[key] = []
                for alias in node.names:
                    spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
                    if spelled not in names[key]:
                        names[key].append(spelled)
            elif isinstance(node, ast.Import):
                line = ast.unparse(node)
                if line not in plain:
                    plain.append(line)
    return plain + [f"from {key} import {', '.join(names[key])}" for key in order]


def _indent_of(line):
    return line[: len(line) - len(line.lstrip())]


def _wrap(text, indent, width=WIDTH):
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent) or [indent.rstrip()]


def plan(exercise):
    """(the earlier step's lines, [(i1, i2, replacement lines)], [Todo]): how the starter's code is made."""
    d = _Diff(exercise.start.source, exercise.step.source)
    edits, todos = [], []
    for i1, i2, j1, j2 in d.regions():
        base_idx, step_idx = list(range(i1, i2)), list(range(j1, j2))
        out = []
        if _indent_of(d.base_lines[i1] if i1 < len(d.base_lines) else "") == "" or (
            step_idx and _indent_of(d.step_lines[j1]) == ""
        ):
            base_imports = d.import_lines(d.stmts, i1, i2)
            step_imports = d.import_lines(d.step_stmts, j1, j2)
            if base_imports or step_imports:
                out += _merged_imports(
                    [
                        "\n".join(d.base_lines[k] for k in sorted(base_imports)),
                        "\n".join(d.step_lines[k] for k in sorted(step_imports)),
                    ]
                )
                base_idx = [k for k in base_idx if k not in base_imports]
                step_idx = [k for k in step_idx if k not in step_imports]
        base_code = [k for k in base_idx if d.base_code[k].strip()]
        step_code = [k for k in step_idx if d.step_code[k].strip()]
        if base_code or step_code:
            # keep the run's blank edges outside the TODO block
            while base_idx and not d.base_lines[base_idx[-1]].strip():
                base_idx.pop()
            while base_idx and not d.base_lines[base_idx[0]].strip():
                out.append(d.base_lines[base_idx.pop(0)])
            kind = "replace" if base_code and step_code else ("insert" if step_code else "delete")
            number = len(todos) + 1
            own = [d.step_comments[k + 1][1] for k in step_idx if k + 1 in d.step_comments]
            known = {d.base_comments[k + 1][1] for k in base_idx if k + 1 in d.base_comments}
            todo = Todo(
                number,
                kind,
                [d.base_lines[k] for k in base_idx],
                [d.step_lines[k] for k in step_idx],
                [c for c in own if c and c not in known],
            )
            todos.append(todo)
            indent = _indent_of(d.base_lines[base_code[0]] if base_code else d.step_lines[step_code[0]])
            out += _todo_block(todo, indent, len(step_code), exercise.todo.get(number))
            if i2 > i1 and not d.base_lines[i2 - 1].strip():
                out.append("")
        edits.append((i1, i2, out))
    return d, edits, todos


def _todo_block(todo, indent, step_code_lines, prose):
    comment, more = f"{indent}# ", f"{indent}#   "
    lines_word = f"{step_code_lines} line{'s' if step_code_lines != 1 else ''} of code"
    if todo.kind == "delete":
        head = (
            f'the step changes or drops the lines from here down to "end of {TODO} {todo.number}": '
            "decide what they become."
        )
    elif todo.kind == "replace":
        head = (
            f"write what goes here instead of the previous step's lines below (the zoo's step has {lines_word} here)."
        )
    else:
        head = f"write the new code that goes here (the zoo's step has {lines_word} here; the previous step had none)."
    lines = textwrap.wrap(f"{TODO} {todo.number}: {head}", width=WIDTH, initial_indent=comment, subsequent_indent=more)
    if prose:
        lines += _wrap(prose, more)
    if todo.kind == "delete":
        return lines + todo.base_lines + [f"{indent}# end of {TODO} {todo.number}"]
    if todo.kind == "replace":
        lines.append(f"{more}The previous step had:")
        for line in todo.base_lines:
            shown = line[len(indent) :] if line.startswith(indent) else line.lstrip()
            lines.append(f"{more}|   {shown}".rstrip())
    lines.append(
        f'{indent}raise NotImplementedError("{TODO} {todo.number}")  # delete this line once the block is written'
    )
    return lines


def _bullet(text):
    return textwrap.wrap(text, width=WIDTH, initial_indent="    - ", subsequent_indent="      ")


def _size_list(exercise):
    from zoo.bench import results

    keys = []
    for size, kind in exercise.cases():
        key = results.size_key(size, kind, exercise.family.kinds)
        if key not in keys:
            keys.append(key)
    return ", ".join(keys[:-1]) + (" and " if len(keys) > 1 else "") + keys[-1]


def header(exercise, todos, shown_path):
    """The starter's docstring and EXERCISE line."""
    from zoo.exercise import observe

    fam, step, start = exercise.family, exercise.step, exercise.start
    inputs = ", ".join(n.rstrip("?") for n in fam.INPUTS)
    lines = [f"Exercise {exercise.key}: {step.summary}", ""]
    lines += _wrap(
        f"This file is {fam.name}/{start.path.name}, an earlier step of the {fam.name} family, with the lines "
        f"that {fam.name}/{step.path.name} changes replaced by {len(todos)} {TODO} block"
        f"{'s' if len(todos) != 1 else ''}. Write them. A block that ends in `raise NotImplementedError` is done "
        "when you have written it and deleted that line.",
        "",
    )
    lines += ["", "Your task (the step's Changes):"]
    lines += _wrap(step.sections.get("Changes", ""), "    ")
    lines += ["", f"What `python -m zoo exercise check {shown_path}` checks, in the simulator (no GPU needed):"]
    lines += _bullet(
        f"launch({inputs}, out) gives the reference result at size {_size_list(exercise)}"
        + (
            f" (the family's test sizes, then {', '.join(map(str, exercise.sizes))}: what the step adds)"
            if exercise.sizes
            else ""
        )
    )
    lines += _bullet("the same result when it runs a second time (a race shows as two different results)")
    for figure, relation, why in exercise.lesson:
        text = observe.describe(figure, exercise.figures)
        bound = {"<=": "at most the zoo's", ">=": "at least the zoo's", "==": "the same as the zoo's"}[relation]
        lines += _bullet(f"{text}: {bound} {step.name[:3]}, at size {_size_key(exercise)} ({why})")
    lines += _bullet(
        f"on a GPU, also the family's GPU test sizes, and the time it takes against the zoo's {step.name[:3]}"
    )
    lines += ["", f"Stuck? `python -m zoo exercise hint {shown_path}` shows one hint more each time."]
    body = "\n".join(lines)
    quote = 'r"""' if "\\" in body else '"""'
    line = f'EXERCISE = "{exercise.key}"  # the step this file writes: `zoo exercise check` reads it'
    return f'{quote}{body}\n"""\n\n{line}\n'


def _size_key(exercise):
    from zoo.bench import results

    size = exercise.lesson_size
    return results.size_key(size) if size is not None else "-"


def build(exercise, shown_path=None):
    """(the starter's text, its Todo blocks)."""
    shown_path = shown_path or exercise.file_name
    d, edits, todos = plan(exercise)
    code = list(d.base_lines)
    for i1, i2, out in reversed(edits):
        code[i1:i2] = out
    body = code[d.b0 :]
    while body and not body[0].strip():
        body.pop(0)
    text = header(exercise, todos, shown_path) + "\n" + "\n".join(body).rstrip() + "\n"
    ast.parse(text)  # a starter that does not parse is a bug here, not the learner's
    return text, todos


def hints(exercise):
    """The hints, in order, each about code the learner writes in this exercise: the exercise's own (its
    ``hints`` in exercises.py, about the change as a whole), then for each TODO block of the starter, in order,
    what the zoo's step has there: its comments on its lines, and the names its lines use that the lines the
    block replaces did not. The step's *Why it is faster* is no hint: it says why the change pays, not how to
    write it (the starter's docstring gives the step's Changes as the task)."""
    found = list(exercise.hints)
    for todo in plan(exercise)[2]:
        head = f"{TODO} {todo.number}"
        if todo.kind == "delete":
            found.append(f"{head}: the zoo's step has none of these lines; what they did is done elsewhere now")
            continue
        if todo.step_comments:
            found.append(
                f"{head}: the zoo's comments on its lines there: " + "; ".join(f"“{c}”" for c in todo.step_comments)
            )
        names = _new_names(todo)
        if names:
            found.append(
                f"{head}: the zoo's lines there use {', '.join(f'`{n}`' for n in names)}"
                + (", which the lines it replaces did not" if todo.kind == "replace" else "")
            )
        else:  # the same names: what differs is in its words, its numbers or its order
            texts = [t for t in _strings(todo.step_lines) if t not in _strings(todo.base_lines)]
            found.append(
                f"{head}: the zoo's lines there say “{' '.join(texts)}”"
                if texts
                else f"{head}: the zoo's "
                + ("line there uses" if len(todo.step_lines) == 1 else f"{len(todo.step_lines)} lines there use")
                + " the names of the lines it replaces, with other numbers or in another order"
            )
    return found


def _strings(lines):
    """The text of the string literals in lines of code, pieces of f-strings included."""
    return [m.group(2).strip() for line in lines for m in re.finditer(r"(\"|')(.*?)\1", line) if m.group(2).strip()]


NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
MAX_NAMES = 6


def _new_names(todo):
    """Names (dotted, as written) in the step's lines of a block that the earlier lines there lack, in order of
    first use, keywords and one-letter names left out: ``x.dtype.itemsize``, ``cuda.gridsize``."""
    import keyword

    def names(lines):
        found = []
        for line in lines:
            code = re.sub(r"#.*", "", re.sub(r"(\"[^\"]*\"|'[^']*')", "", line))  # strings and comments out
            found += [n for n in NAME.findall(code) if not keyword.iskeyword(n) and len(n) > 1]
        return found

    before = set(names(todo.base_lines))
    new = []
    for name in names(todo.step_lines):
        if name not in before and name not in new:
            new.append(name)
    return new[:MAX_NAMES]
