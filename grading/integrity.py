"""Integrity checks: cheating becomes a visible zero with a reason, not full marks.

Two nbgrader preprocessors, wired in ``nbgrader_config.py``:

``ScanSubmission`` (first step of autograde's sanitize pass, before nbgrader
restores the locked cells) compares the submission with the gradebook and reads
the code a student could write, and records its findings in the notebook's
metadata (``course_integrity``):

* a locked cell (setup, tests) whose source or metadata was edited;
* nbgrader metadata changed (a test cell turned into a solution, points edited);
* a graded cell deleted; cells from another assignment;
* in student-editable code (solution cells, cells the student added or changed):
  monkeypatching (assigning attributes of imported names: ``np.allclose = ...``,
  ``checks.attention.check_softmax = ...``), rebinding names the setup cell
  imported (``checks = ...``), ``setattr``/``delattr`` on anything but self/cls,
  redefining exception classes (``AssertionError``), ``builtins``/``__builtins__``,
  ``sys.modules``, ``ctypes``, ``gc``, ``importlib``, ``eval``/``exec``/``compile``/
  ``__import__``, frame and history introspection (``inspect``, ``sys._getframe``,
  ``get_ipython``, ``_ih``), IPython magics and shell escapes, importing the checks,
  and calling PyTorch's built-in attention (``scaled_dot_product_attention``,
  ``multi_head_attention_forward``).

``ApplyIntegrity`` (autograde pass, right after execution) turns every autograded
test of a notebook with findings into 0 with an ``IntegrityError`` output naming
the reasons, and puts a note at the top of the notebook, so the student's
feedback shows why. Calling the course's reference implementation at run time is
caught separately by ``course_lib.checks`` (that test scores 0, ``IntegrityError``).

Static checks cannot see everything a determined student could write; together
with the sandbox (grading/sandbox.py) and the checks binding their comparison
functions at import, they close the routes that need no effort to take.
"""
from __future__ import annotations

import ast
import builtins
import functools
import os

from nbformat.v4 import new_markdown_cell, new_output
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import NbGraderPreprocessor

from grading import NOTEBOOKS_DIR

META_KEY = "course_integrity"

_EXCEPTIONS = {name for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)}
_FORBIDDEN_MODULES = {"builtins": "uses the builtins module",
                      "course_lib": "imports course_lib in an answer (the reference implementations and checks)", "ctypes": "uses ctypes (raw memory access)",
                      "gc": "uses the garbage collector's object graph", "importlib": "uses importlib",
                      "inspect": "uses frame/source introspection", "grading": "imports the grading tools"}
_FORBIDDEN_NAMES = {"__builtins__": "touches __builtins__", "eval": "calls eval", "exec": "calls exec",
                    "compile": "calls compile", "__import__": "calls __import__", "globals": "calls globals()",
                    "vars": "calls vars()", "get_ipython": "uses get_ipython (magics / shell commands)",
                    "_ih": "reads the input history", "_oh": "reads the output history",
                    "In": "reads the input history", "Out": "reads the output history",
                    "_getframe": "inspects stack frames", "checks": "uses the grading checks in an answer",
                    "getipython": "uses IPython internals"}
_FORBIDDEN_ATTRS = {"modules": ("sys", "patches sys.modules"), "_getframe": (None, "inspects stack frames"),
                    "__code__": (None, "rewrites function code"), "__globals__": (None, "reaches function globals"),
                    "__dict__": (None, "edits an object's __dict__"),
                    "set_custom_exc": (None, "installs a custom exception handler in the kernel"),
                    "showtraceback": (None, "replaces the kernel's traceback display"),
                    "scaled_dot_product_attention": (None, "calls PyTorch's built-in attention"),
                    "multi_head_attention_forward": (None, "calls PyTorch's built-in multi-head attention")}


def _root_name(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _bindings(node) -> dict[str, str]:
    """name -> what it is bound to, for one import statement ('import numpy as np' -> {'np': 'numpy'})."""
    if isinstance(node, ast.Import):
        return {(a.asname or a.name.split(".")[0]): (a.name if a.asname else a.name.split(".")[0]) for a in node.names}
    return {(a.asname or a.name): f"{node.module}.{a.name}" for a in node.names}


def imported_names(sources: list[str]) -> dict[str, str]:
    """Every name bound by an import statement in these cells -> what it is bound to."""
    names: dict[str, str] = {}
    for src in sources:
        names.update(_imports_in(src) if len(src) <= _CACHED_SOURCE else _imports_in.__wrapped__(src))
    return names


_CACHED_SOURCE = 20_000  # characters: a cell longer than this is parsed every time, never kept


@functools.lru_cache(maxsize=4096)
def _imports_in(source: str) -> tuple[tuple[str, str], ...]:
    """(name, what it is bound to) for each import in one cell, in order. Kept per text: the source
    notebook's cells, and the cells a student left as released, are the same in every submission
    of a class (about 60 ms per notebook to parse again)."""
    tree = _parse(source)
    if tree is None:
        return ()
    return tuple(pair for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for pair in _bindings(node).items())


def _parse(source: str):
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError, TypeError):
        return None


def scan_code(source: str, where: str, imported, protected: dict[str, str]) -> list[str]:
    """Findings in one student-editable code cell (``where`` names it in messages)."""
    tree = _parse(source)
    if tree is None:
        return []  # a syntax error is a broken answer, not cheating: its tests fail on their own
    found = []

    def add(msg):
        text = f"{where}: {msg}"
        if text not in found:
            found.append(text)

    def check_target(t):
        if isinstance(t, ast.Attribute) or isinstance(t, ast.Subscript):
            root = _root_name(t)
            if root in imported or root in ("sys", "__builtins__"):
                add(f"monkeypatches {ast.unparse(t)} (assigning to an imported module or function)")
        elif isinstance(t, ast.Name):
            if t.id in protected:
                add(f"rebinds {t.id!r}, which the locked setup cell imported")
            if t.id in _EXCEPTIONS:
                add(f"redefines the exception class {t.id}")
        elif isinstance(t, (ast.Tuple, ast.List)):
            for elt in t.elts:
                check_target(elt)
        elif isinstance(t, ast.Starred):
            check_target(t.value)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                check_target(t)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            check_target(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    check_target(item.optional_vars)
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                check_target(t)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in protected:
                add(f"redefines {node.name!r}, which the locked setup cell imported")
            if node.name in _EXCEPTIONS:
                add(f"redefines the exception class {node.name}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in mods:
                top = m.split(".")[0]
                if top == "course_lib":
                    add(f"imports {m} in an answer (the course's reference implementations and checks)")
                elif top in _FORBIDDEN_MODULES:
                    add(_FORBIDDEN_MODULES[top])
                if m.startswith("course_lib.checks") or (isinstance(node, ast.ImportFrom) and m == "course_lib"
                                                         and any(a.name == "checks" for a in node.names)):
                    add("imports the grading checks")
            for bound, target in _bindings(node).items():
                if bound in protected and protected[bound] != target:  # `import math` again is fine
                    add(f"rebinds {bound!r}, which the locked setup cell imported")
        elif isinstance(node, ast.Name) and node.id in _FORBIDDEN_NAMES:
            add(_FORBIDDEN_NAMES[node.id])
        elif isinstance(node, ast.Attribute) and node.attr in _FORBIDDEN_ATTRS:
            owner, msg = _FORBIDDEN_ATTRS[node.attr]
            if owner is None or _root_name(node.value) == owner:
                add(msg)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Name) and first.id in ("self", "cls")):
                add(f"calls {node.func.id} on {ast.unparse(first) if first is not None else 'something'}")
    return found


def _without_hidden_tests(source: str) -> str:
    """The cell as released: nbgrader removes the hidden region, delimiters included."""
    out, inside = [], False
    for line in source.splitlines():
        if "### BEGIN HIDDEN TESTS" in line:
            inside = True
        elif "### END HIDDEN TESTS" in line:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def _normalise(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines() if line.strip())


def _source_notebook_cells(assignment: str, notebook: str) -> list[str]:
    """Sources of every cell of the instructor's notebook (unlocked instructor cells are not the student's)."""
    import nbformat

    path = os.path.join(NOTEBOOKS_DIR, assignment, f"{notebook}.ipynb")
    if not os.path.exists(path):
        return []
    return [c.source for c in nbformat.read(path, as_version=4).cells]


class ScanSubmission(NbGraderPreprocessor):
    """Record tampering and forbidden code in the notebook metadata (runs before nbgrader restores cells)."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        findings: list[str] = []
        try:
            with Gradebook(info["db_url"]) as gb:
                stored = gb.find_notebook(info["notebook"], info["assignment"])
                source_cells = {c.name: (c.locked, c.source, c.cell_type) for c in stored.source_cells}
                grade_cells = {c.name: c.max_score for c in stored.grade_cells}
                solution_cells = {c.name for c in stored.solution_cells}
        except MissingEntry:
            nb.metadata[META_KEY] = [f"notebook {info['notebook']!r} is not part of assignment {info['assignment']!r}"]
            return nb, resources
        instructor_sources = set(_source_notebook_cells(info["assignment"], info["notebook"]))
        locked_sources = [c.source for c in nb.cells if c.cell_type == "code"
                          and source_cells.get(c.metadata.get("nbgrader", {}).get("grade_id"), (False,))[0]]
        protected = imported_names([s for s in instructor_sources] + locked_sources)
        imported = set(protected) | set(imported_names([c.source for c in nb.cells if c.cell_type == "code"]))
        seen = set()
        for i, cell in enumerate(nb.cells):
            meta = cell.metadata.get("nbgrader", {})
            gid = meta.get("grade_id")
            editable = False
            if gid is not None and gid in source_cells:
                seen.add(gid)
                locked, stored_source, cell_type = source_cells[gid]
                if bool(meta.get("solution", False)) != (gid in solution_cells) or \
                        bool(meta.get("grade", False)) != (gid in grade_cells) or bool(meta.get("locked", False)) != locked:
                    findings.append(f"cell {gid}: its nbgrader metadata (grade/solution/locked) was changed")
                elif gid in grade_cells and meta.get("points") is not None and \
                        float(meta["points"]) != float(grade_cells[gid]):
                    findings.append(f"cell {gid}: its points were changed from {grade_cells[gid]:g} to {meta['points']}")
                if locked and _normalise(cell.source) != _normalise(_without_hidden_tests(stored_source)):
                    findings.append(f"cell {gid}: a locked cell was edited")
                if cell.cell_type != cell_type:
                    findings.append(f"cell {gid}: its type was changed from {cell_type} to {cell.cell_type}")
                editable = not locked
            elif gid is not None:
                findings.append(f"cell {gid}: not a cell of this assignment (notebook from elsewhere?)")
            else:
                editable = cell.source not in instructor_sources  # a cell the student added or changed
            if editable and cell.cell_type == "code":
                findings += scan_code(cell.source, f"cell {gid or i}", imported, protected)
        for gid in grade_cells:
            if gid not in seen:
                findings.append(f"cell {gid}: a graded cell was deleted")
        nb.metadata[META_KEY] = findings
        self._repair_metadata(nb, source_cells, grade_cells, solution_cells)
        return nb, resources

    @staticmethod
    def _repair_metadata(nb, source_cells, grade_cells, solution_cells) -> None:
        """Put nbgrader's metadata back as released, so nbgrader grades (and shows the findings)
        instead of stopping on "Inconsistent checksums" or a cell without grade_id."""
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader")
            if meta is None:
                continue
            gid = meta.get("grade_id") if isinstance(meta, dict) else None
            if gid not in source_cells:
                del cell.metadata["nbgrader"]  # unknown or broken: a plain cell, never graded
                continue
            meta["grade"] = gid in grade_cells
            meta["solution"] = gid in solution_cells
            meta["locked"] = bool(source_cells[gid][0])
            meta["schema_version"] = 3
            if gid in grade_cells:
                meta["points"] = float(grade_cells[gid])
            else:
                meta.pop("points", None)
            if cell.cell_type != source_cells[gid][2]:
                cell.cell_type = source_cells[gid][2]
                if cell.cell_type == "markdown":
                    cell.pop("outputs", None)
                    cell.pop("execution_count", None)
                else:
                    cell["outputs"], cell["execution_count"] = [], None


class DropEmptyMetadata(NbGraderPreprocessor):
    """nbgrader's DeduplicateIds leaves ``nbgrader: {}`` on a copied cell, which later fails the
    schema check: a copy-pasted test cell is a plain cell, not a reason to lose the grade."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", None) == {}:
                del cell.metadata["nbgrader"]
        return nb, resources


def quote(text: str) -> str:
    """A finding quoted in the grader's markdown note: HTML-escaped and markdown-inert (it quotes
    grade ids, names and code a student wrote)."""
    import html
    import re

    text = html.escape(str(text), quote=False).replace("\n", " ")
    return re.sub(r"([\\`*_{}\[\]()#+!|~$<>-])", r"\\\1", text)


class ApplyIntegrity(NbGraderPreprocessor):
    """Zero every autograded test of a notebook with integrity findings, with the reasons shown."""

    def preprocess(self, nb, resources):
        findings = list(nb.metadata.get(META_KEY, []))
        if not findings:
            return nb, resources
        reason = "; ".join(findings[:6]) + (f"; and {len(findings) - 6} more" if len(findings) > 6 else "")
        for cell in nb.cells:
            if cell.cell_type == "code" and utils.is_grade(cell):
                cell.outputs = list(cell.get("outputs", [])) + [new_output(
                    "error", ename="IntegrityError", evalue=f"integrity check failed: {reason}",
                    traceback=[f"IntegrityError: integrity check failed: {reason}"])]
        note = new_markdown_cell(
            "**Grading note: integrity check failed, so every autograded test of this notebook scores 0.**\n\n"
            + "\n".join(f"- {quote(f)}" for f in findings)
            + "\n\nIf you believe this is a mistake, talk to your instructor; they can review and regrade.")
        nb.cells.insert(0, note)
        return nb, resources
