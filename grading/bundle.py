"""The students' bundle: what a graded class receives, with no solution in it.

    python -m grading bundle [--out DIR]

The repository is the instructor's course (and the self-study edition, where
everything is open). A graded class gets a bundle built from it:

* ``notebooks/<assignment>/``: the release notebooks (``nbgrader generate_assignment``:
  solutions replaced by stubs, hidden tests removed) and the data files next to them;
* ``course_lib/``: the student edition of the package. For every assignment whose
  solutions are not out yet (``c.CourseBundle.solutions_released`` in
  ``grading/nbgrader_config.py`` lists those that are), the reference of each exercise
  (every function or class the assignment's solution cells define, by name) keeps its
  signature and docstring but its body raises ``NotImplementedError``; private helpers
  only those references used go the same way. In the checks, every known wrong
  implementation (``Wrong(...)``) is replaced by a stub: they are near-solutions;
* ``course_lib/checks/_stored.json``: the reference's and each known misconception's
  output on the *visible* tests' inputs only (captured by running the visible tests on
  the instructor's solutions, ``course_lib.checks.transcript`` capture mode). With it the
  visible tests run in stored mode and give the same messages as in the repository;
  hidden inputs and their outputs never ship;
* ``pyproject.toml`` and a README: ``pip install ./bundle`` (offline: the wheels of the
  course's dependencies can be handed out with it).

Does NOT cover: handing the bundle out (an LMS, nbgrader's exchange, a USB stick), or
grading (the grader uses the repository's own ``course_lib``).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import sys

import nbformat

from grading import GRADING_DIR, NOTEBOOKS_DIR, PACKAGE_DIR, REPO_DIR

COURSE_LIB = os.path.join(REPO_DIR, "course_lib")
NOT_RELEASED = "the reference solution of this exercise is not released yet: write your own in the notebook"
_STUB_NAME = "_not_shipped"
_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def solutions_released() -> list[str]:
    """Assignments whose solutions are out (course config: c.CourseBundle.solutions_released)."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=PACKAGE_DIR).load_config()
    released = config.get("CourseBundle", {}).get("solutions_released", [])
    return list(released) if released else []


def assignments() -> list[str]:
    return sorted(a for a in os.listdir(NOTEBOOKS_DIR)
                  if a[:2].isdigit() and os.path.isdir(os.path.join(NOTEBOOKS_DIR, a))
                  and any(f.endswith(".ipynb") for f in os.listdir(os.path.join(NOTEBOOKS_DIR, a))))


def _nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def source_notebooks(assignment: str) -> list[str]:
    folder = os.path.join(NOTEBOOKS_DIR, assignment)
    return [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".ipynb")]


def exercise_names(assignment: str) -> set[str]:
    """Names of the functions and classes the assignment's solution cells define."""
    names = set()
    for path in source_notebooks(assignment):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and _nbg(cell).get("solution"):
                src = re.sub(r"^[ \t]*[%!].*$", "", cell.source, flags=re.M)
                try:
                    tree = ast.parse(src)
                except SyntaxError:
                    continue
                names |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names


# ---------------------------------------------------------------- AST surgery
def _raise_body(message: str) -> list[ast.stmt]:
    return [ast.Raise(exc=ast.Call(func=ast.Name("NotImplementedError", ast.Load()),
                                   args=[ast.Constant(message)], keywords=[]), cause=None)]


def _keep_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        return [body[0]]
    return []


def _strip_def(node, message: str) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node.body = _keep_docstring(node.body) + _raise_body(message)
    elif isinstance(node, ast.ClassDef):
        init = ast.parse("def __init__(self, *args, **kwargs):\n    raise NotImplementedError(%r)" % message).body[0]
        node.body = _keep_docstring(node.body) + [init]


def _loaded_names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
           {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _strip_unused_private(tree: ast.Module, roots: list, stub: str) -> int:
    """Stub every top-level private function not reachable from ``roots`` (nodes)."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_")}
    reachable: set[str] = set()
    todo = list(roots)
    while todo:
        node = todo.pop()
        for name in _loaded_names(node):
            if name in defs and name not in reachable:
                reachable.add(name)
                todo.append(defs[name])
    count = 0
    for name, node in defs.items():
        if name not in reachable and name != _STUB_NAME:
            if stub == "raise":
                _strip_def(node, NOT_RELEASED)
            else:
                node.body = _keep_docstring(node.body) + [ast.Return(ast.Name(_STUB_NAME, ast.Load()))]
                if isinstance(node, ast.ClassDef):
                    node.body = _keep_docstring(node.body) + [ast.Pass()]
            count += 1
    return count


def student_edition_of_module(source: str, exercises: set[str]) -> tuple[str, list[str]]:
    """A lesson module with the references of ``exercises`` stripped; (new source, stripped names)."""
    tree = ast.parse(source)
    stripped = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in exercises:
            _strip_def(node, NOT_RELEASED)
            stripped.append(node.name)
    if not stripped:
        return source, []
    kept = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_"))]
    _strip_unused_private(tree, kept, "raise")
    return ast.unparse(tree) + "\n", stripped


class _ReplaceWrongFns(ast.NodeTransformer):
    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "Wrong":
            if len(node.args) >= 2:
                node.args[1] = ast.Name(_STUB_NAME, ast.Load())
            for kw in node.keywords:
                if kw.arg == "fn":
                    kw.value = ast.Name(_STUB_NAME, ast.Load())
        return node


def student_edition_of_checks(source: str) -> str:
    """A lesson's checks with every known wrong implementation replaced by a stub."""
    tree = _ReplaceWrongFns().visit(ast.parse(source))
    stub = ast.parse(f"def {_STUB_NAME}(*args, **kwargs):\n"
                     f"    raise RuntimeError('known wrong answers are not shipped in the student edition')").body[0]
    # after the module docstring and the __future__ import
    at = 0
    while at < len(tree.body) and (isinstance(tree.body[at], ast.ImportFrom) and tree.body[at].module == "__future__"
                                   or at == 0 and isinstance(tree.body[0], ast.Expr)):
        at += 1
    tree.body.insert(at, stub)
    roots = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_"))]
    _strip_unused_private(tree, roots, "stub")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


# ---------------------------------------------------------------- capture of the visible tests
def capture_visible(assignment: str) -> dict:
    """Run the visible tests on the instructor's solutions in capture mode; return the store."""
    import matplotlib

    matplotlib.use("Agg")
    from course_lib.checks import transcript

    store: dict = {}
    for path in source_notebooks(assignment):
        nb = nbformat.read(path, as_version=4)
        cwd = os.getcwd()
        os.chdir(os.path.dirname(path))
        try:
            ns: dict = {"__name__": "__notebook__"}
            for cell in nb.cells:
                meta = _nbg(cell)
                if cell.cell_type != "code":
                    continue
                if meta.get("grade_id") == "setup" or meta.get("solution"):
                    exec(compile(_MARKERS.sub("", cell.source), f"<{meta.get('grade_id')}>", "exec"), ns)
                elif meta.get("grade") and "BEGIN HIDDEN TESTS" not in cell.source:
                    with transcript.using("capture") as state:
                        exec(compile(cell.source, f"<{meta.get('grade_id')}>", "exec"), dict(ns))
                        store.update(state.store)
        finally:
            os.chdir(cwd)
    return store


# ---------------------------------------------------------------- the bundle
def capture_all() -> dict:
    """The stored values of every assignment's visible tests."""
    store: dict = {}
    for a in assignments():
        store.update(capture_visible(a))
    return store


def build(out: str, released: list[str] | None = None, release_dir: str | None = None,
          store: dict | None = None) -> dict:
    """Write the bundle into ``out``; return a summary (what was stripped, stored, copied).

    ``store``: the visible tests' values from :func:`capture_all` (computed when not given).
    """
    released = solutions_released() if released is None else released
    all_assignments = assignments()
    unknown = sorted(set(released) - set(all_assignments))
    if unknown:
        raise ValueError(f"c.CourseBundle.solutions_released names unknown assignments {unknown}; "
                         f"expected some of {all_assignments}")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    summary = {"released": released, "stripped": {}, "stored_values": 0, "notebooks": []}

    # release notebooks: nbgrader's own release (solutions -> stubs, hidden tests removed)
    release_dir = release_dir or os.path.join(GRADING_DIR, "release")
    for a in all_assignments:
        src = os.path.join(release_dir, a)
        if not os.path.isdir(src):
            raise FileNotFoundError(f"no release of {a} in {release_dir}: run `python -m grading release` "
                                    "(or `nbgrader generate_assignment`) first")
        shutil.copytree(src, os.path.join(out, "notebooks", a))
        summary["notebooks"] += [f"{a}/{f}" for f in sorted(os.listdir(src)) if f.endswith(".ipynb")]

    # course_lib, student edition
    lib = os.path.join(out, "course_lib")
    shutil.copytree(COURSE_LIB, lib, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_stored.json", "_edition.json"))
    secret = set()
    for a in all_assignments:
        if a not in released:
            secret |= exercise_names(a)
    for folder, _, files in os.walk(lib):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, lib)
            with open(path) as fh:
                source = fh.read()
            if rel.startswith("checks" + os.sep):
                if rel in (os.path.join("checks", n) for n in ("__init__.py", "core.py", "transcript.py")):
                    continue
                new = student_edition_of_checks(source)
            else:
                new, stripped = student_edition_of_module(source, secret)
                if stripped:
                    summary["stripped"][rel] = stripped
            with open(path, "w") as fh:
                fh.write(new)

    if store is None:
        store = capture_all()
    with open(os.path.join(lib, "checks", "_stored.json"), "w") as fh:
        json.dump(store, fh)
    with open(os.path.join(lib, "_edition.json"), "w") as fh:  # course_lib.released() reads it
        json.dump({"edition": "students", "released": sorted(released)}, fh)
    summary["stored_values"] = len(store)

    shutil.copy(os.path.join(REPO_DIR, "pyproject.toml"), os.path.join(out, "pyproject.toml"))
    with open(os.path.join(out, "README.md"), "w") as fh:
        fh.write("# Transformers for Medicine: student edition\n\n"
                 "Install (from this folder; offline with the wheels your instructor hands out):\n\n"
                 f"    {student_install('./')}\n\n"
                 "then open `notebooks/` in JupyterLab. The visible tests compare your answers with stored "
                 "outputs; your instructor grades with hidden tests.\n")
    with open(os.path.join(out, "BUNDLE.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    return summary


def makefile_nodeps() -> list[str]:
    """The Makefile's NODEPS: the packages installed without their declared dependencies."""
    with open(os.path.join(REPO_DIR, "Makefile")) as fh:
        text = fh.read().replace("\\\n", " ")
    m = re.search(r"^NODEPS\s*:=(.*)$", text, re.M)
    if not m:
        raise RuntimeError("the Makefile has no NODEPS := line")
    return [tok.strip('"') for tok in re.findall(r'"[^"]+"|\S+', m.group(1))]


def student_install(path: str) -> str:
    """The students' install line for the course folder at ``path`` (what `make lab` installs)."""
    nodeps = " ".join(f'"{r}"' if any(c in r for c in "<>,") else r for r in makefile_nodeps())
    return (f'pip install torch==2.13.0 && pip install --no-deps {nodeps} && '
            f'pip install "{path}[lab,data,grade]"')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(GRADING_DIR, "bundle"), help="folder to write (replaced)")
    args = parser.parse_args(argv)
    summary = build(args.out)
    n = sum(len(v) for v in summary["stripped"].values())
    print(f"[bundle] {args.out}: {len(summary['notebooks'])} release notebook(s), {n} reference(s) withheld "
          f"(solutions released: {', '.join(summary['released']) or 'none'}), "
          f"{summary['stored_values']} stored visible-test value(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
