"""The shape of the code, computed from its source: no import circle in ``course_lib`` or ``grading``, and no
function-local name that shadows a module the file imports.

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
