"""The shape of the code, computed from its source: no import circle in ``course_lib`` or ``grading``, no
function-local name that shadows a module the file imports, and no module that reassigns another module's
globals (the course being graded is a frozen ``grading.course.Course`` passed down, never a path reassigned).

An import circle is counted with every import, those inside functions included (a lazy import that only
postpones a circle is still one). ``from package import submodule`` is an edge to the submodule alone.
The shadowing rule catches the bug that once hid a branch of ``grading.pipeline``: a local list named like
the imported ``failures`` module made every earlier use of the module in that function an
``UnboundLocalError``.
"""
import ast
import os

import pytest

from conftest import REPO

PACKAGES = ("course_lib", "grading")


def _modules() -> dict:
    """{dotted module name: path} of every module of the two packages."""
    out = {}
    for pkg in PACKAGES:
        for folder, _, files in os.walk(os.path.join(REPO, pkg)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(folder, f)
                    name = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".").removesuffix(".__init__")
                    out[name] = path
    return out


def _resolve(name: str, modules: dict) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict:
    """{module: {modules it imports}} over every import statement of the module, at any depth."""
    modules = _modules()
    graph = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        with open(path) as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                for alias in node.names:
                    # `from package import submodule` imports the submodule; `from module import name` the module
                    targets.append(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
            for target in targets:
                found = _resolve(target, modules)
                if found and found != module:
                    graph[module].add(found)
    return graph


def circles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_course_lib_or_grading():
    found = circles(import_graph())
    assert not found, ("import circles (each a set of modules that import each other, lazy imports included; "
                       f"move what both need into a module below them): {found}")


def shadowed_imports(source: str) -> list:
    """(function, name, line) where a function assigns a local that has the name of a module-level import of
    the same file (the local hides the module for the whole function)."""
    tree = ast.parse(source)
    imported = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        declared_global = {n for node in ast.walk(fn) if isinstance(node, (ast.Global, ast.Nonlocal))
                           for n in node.names}
        for node in ast.walk(fn):
            names = []
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names = [node.id]
            elif isinstance(node, ast.arg):
                names = [node.arg]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                continue  # a local re-import of the same module is not a shadow
            for name in names:
                if name in imported and name not in declared_global:
                    out.append((fn.name, name, node.lineno))
    return out


def test_the_shadow_finder_finds_the_pipeline_bug():
    source = ("from grading import failures\n"
              "def grade():\n"
              "    failures.machine_fault('x')\n"
              "    failures = []\n")
    assert shadowed_imports(source) == [("grade", "failures", 4)]
    assert shadowed_imports("import os\ndef f():\n    path = os.sep\n") == []


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_local_name_shadows_an_imported_module(module):
    with open(_modules()[module]) as fh:
        found = shadowed_imports(fh.read())
    assert not found, (f"{module}: a function's local has the name of a module-level import, which hides it "
                       f"in the whole function (rename the local): {found}")


def foreign_assignments(source: str, modules: set) -> list:
    """(line, what) where the file assigns (or deletes, or ``setattr``s) an attribute of a module of ``modules``
    it imported, at any depth (``grading.GRADING_DIR = root``), or declares a module constant ``global`` (an
    upper-case name: a path or setting reassigned at run time). The standard library's and third parties'
    documented settings (``tempfile.tempdir``) are theirs to allow, not counted."""
    tree = ast.parse(source)
    bound = {}  # {local name: the module of ``modules`` it is bound to}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in modules:
                    bound[a.asname] = a.name
                elif not a.asname and a.name.split(".")[0] in modules:
                    bound[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for a in node.names:
                if f"{node.module}.{a.name}" in modules:
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"

    def module_of(expr) -> str | None:
        """The module ``expr`` names (``grading``, ``grading.worker``), or None (an object held in one)."""
        if isinstance(expr, ast.Name):
            return bound.get(expr.id)
        if isinstance(expr, ast.Attribute):
            outer = module_of(expr.value)
            return f"{outer}.{expr.attr}" if outer and f"{outer}.{expr.attr}" in modules else None
        return None

    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
              and node.args and module_of(node.args[0])):
            out.append((node.lineno, f"{node.func.id}({node.args[0].id}, ...)"))
        elif isinstance(node, ast.Global):
            out += [(node.lineno, f"global {n}") for n in node.names if n.isupper()]
        flat = []
        for t in targets:
            flat += t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        for t in flat:
            if isinstance(t, ast.Attribute) and module_of(t.value):
                out.append((node.lineno, ast.unparse(t)))
    return sorted(out)


def test_the_reassignment_finder_finds_what_set_course_root_and_the_dask_task_did():
    modules = {"grading", "grading.worker", "grading.sandbox", "course_lib", "course_lib.core"}
    source = ("import grading\n"
              "from grading import sandbox, worker\n"
              "import grading.worker\n"
              "from course_lib import core\n"
              "core._FEED.outputs = []\n"  # an object's state, held in a module: not the module's global
              "grading.worker.NOTEBOOKS_DIR = 'y'\n"
              "SUBMITTED = 'x'\n"
              "def set_root(root):\n"
              "    global SUBMITTED, GRADING_DIR\n"
              "    grading.GRADING_DIR = worker.GRADING_DIR = root\n"
              "    grading.GRADING_DIR, sandbox.GRADING_DIR = root, root\n"
              "    setattr(worker, 'NOTEBOOKS_DIR', root)\n")
    assert foreign_assignments(source, modules) == [
        (6, "grading.worker.NOTEBOOKS_DIR"), (9, "global GRADING_DIR"), (9, "global SUBMITTED"),
        (10, "grading.GRADING_DIR"), (10, "worker.GRADING_DIR"), (11, "grading.GRADING_DIR"),
        (11, "sandbox.GRADING_DIR"), (12, "setattr(worker, ...)")]
    allowed = ("import os, tempfile\nfrom grading.course import Course\n"
               "def f(root):\n    tempfile.tempdir = root\n    os.environ['COURSE_ROOT'] = root\n"
               "    course = Course(root)\n    return course\n")
    assert foreign_assignments(allowed, modules) == []


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_reassigns_another_modules_globals(module):
    with open(_modules()[module]) as fh:
        found = foreign_assignments(fh.read(), set(_modules()))
    assert not found, (f"{module} reassigns module globals (pass a value down instead, e.g. grading.course.Course "
                       f"for the course root): {found}")


def test_the_course_is_one_frozen_value():
    import dataclasses
    import doctest

    from grading import course, pipeline

    assert doctest.testmod(course).failed == 0
    c = course.Course("relative/folder")
    assert os.path.isabs(c.root) and c.demo.root == os.path.join(c.root, "demo_class")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.root = "/elsewhere"
    with pytest.raises(ValueError, match="expected submitted, autograded or feedback"):
        c.task_folder("gradebook.db", "ana", "01_attention")
    with pytest.raises(ValueError, match="non-empty string"):
        course.Course("")
    assert not hasattr(pipeline, "set_course_root") and not hasattr(pipeline, "SUBMITTED")


@pytest.mark.parametrize("name", ["grading/sandbox.py", "grading/warm.py"])
def test_the_launchers_files_import_the_standard_library_only(name):
    """The kernel's launcher runs ``grading/sandbox.py`` as a plain script (``python -I -S``: no site-packages, no
    folder of the course on its import path) and loads ``grading/warm.py`` by its path: the top level of both
    may import the standard library only."""
    import sys

    with open(os.path.join(REPO, name)) as fh:
        tree = ast.parse(fh.read())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add((node.module or "").split(".")[0])
    assert names and names <= set(sys.stdlib_module_names) | {"__future__"}, sorted(names - set(sys.stdlib_module_names))
