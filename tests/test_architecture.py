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


@pytest.mark.parametrize("name", ["grading/kernel/launcher.py", "grading/kernel/protocol.py"])
def test_the_launchers_files_import_the_standard_library_only(name):
    """The kernel's launcher runs ``grading/kernel/launcher.py`` as a plain script (``python -I -S``: no
    site-packages, no folder of the course on its import path) and loads ``grading/kernel/protocol.py`` by its
    path: the top level of both may import the standard library only."""
    import sys

    with open(os.path.join(REPO, name)) as fh:
        tree = ast.parse(fh.read())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{name}: a relative import cannot run in a plain script"
            names.add((node.module or "").split(".")[0])
    assert names and names <= set(sys.stdlib_module_names) | {"__future__"}, sorted(names - set(sys.stdlib_module_names))


def test_the_launcher_runs_as_a_plain_script_and_loads_the_protocol_by_path():
    """Run as the kernelspec runs it (``python -I -S <path>``, from a folder of no course): the launcher
    imports, loads ``protocol.py`` by its path (the template's module name it checks a pid against comes from
    there), and refuses a call without ``-f`` with its usage line, never a traceback."""
    import subprocess
    import sys
    import tempfile

    path = os.path.join(REPO, "grading", "kernel", "launcher.py")
    code = ("import runpy, sys; sys.argv = [" + repr(path) + "]; "
            "ns = runpy.run_path(" + repr(path) + ", run_name='not_main'); "
            "p = ns['_protocol'](); print(p.TEMPLATE_MODULE, p.__file__, 'grading' in sys.modules)")
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=folder, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        module, where, imported_grading = out.stdout.split()
        assert module == "grading.kernel.warm" and where == os.path.join(REPO, "grading", "kernel", "protocol.py")
        assert imported_grading == "False", "the launcher imported the grading package"
        usage = subprocess.run([sys.executable, "-I", "-S", path], cwd=folder, capture_output=True, text=True,
                               timeout=60)
    assert usage.returncode != 0 and "usage: python -I -S grading/kernel/launcher.py -f CONNECTION_FILE" in usage.stderr
    assert "Traceback" not in usage.stderr, usage.stderr


# ------------------------------------------------------------------ the kernel: one package
KERNEL_MODULES = {"grading.kernel", "grading.kernel.launcher", "grading.kernel.protocol", "grading.kernel.warm",
                  "grading.kernel.client", "grading.kernel.polling"}


def test_the_kernel_is_one_package():
    """The launcher, the protocol, the warm template and the client live in ``grading/kernel/``, and nowhere
    else: no module of their old names (``grading.sandbox``, ``grading.warm``, ``grading.execute``) is left, no
    module outside the package imports a name of them from anywhere but the package, and the kernel's modules
    import nothing of ``grading`` above them but the package's own constants and the edition they mount."""
    modules = _modules()
    assert KERNEL_MODULES <= set(modules), sorted(KERNEL_MODULES - set(modules))
    assert not {"grading.sandbox", "grading.warm", "grading.execute"} & set(modules)
    graph = import_graph()
    outside = {m: sorted(t for t in graph[m] if t.startswith("grading.") and t not in KERNEL_MODULES)
               for m in KERNEL_MODULES}
    # what the kernel may use of the rest of grading: its constants (grading/__init__), the failure names
    # the client marks cells with, the edition the template imports from
    allowed = {"grading", "grading.failures", "grading.edition"}
    assert all(set(v) <= allowed for v in outside.values()), outside
    with open(os.path.join(REPO, "grading", "nbgrader_config.py")) as fh:
        config = fh.read()
    assert '"grading.kernel.client.ResilientExecute"' in config and "grading.execute" not in config


_STARTS = {"Popen", "run", "call", "check_call", "check_output", "create_subprocess_exec", "execv", "execve",
           "execvp", "execl", "spawnv", "spawnve", "posix_spawn"}


def template_starts(source: str) -> list:
    """(function, line, how) where ``source`` starts a warm-kernel template itself, not through
    ``start_template``: a process started with ``grading.kernel.warm`` (or ``TEMPLATE_MODULE``, its name) in
    its arguments, a call of the template's ``serve`` or a ``Template(...)`` built by hand. ``function`` is the
    enclosing function ('' at the top level)."""
    tree = ast.parse(source)
    out = []

    def names_template(node) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and (
                    "grading.kernel.warm" in sub.value or "grading/kernel/warm.py" in sub.value):
                return True
            if isinstance(sub, (ast.Name, ast.Attribute)) and (getattr(sub, "id", None) == "TEMPLATE_MODULE"
                                                               or getattr(sub, "attr", None) == "TEMPLATE_MODULE"):
                return True
        return False

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                func = child.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                args = list(child.args) + [k.value for k in child.keywords]
                if called in _STARTS and any(names_template(a) for a in args):
                    out.append((function, child.lineno, f"{called}(... template module ...)"))
                elif called in ("serve", "Template") and (
                        isinstance(func, ast.Name) or ast.unparse(func.value).split(".")[-1] == "warm"):
                    out.append((function, child.lineno, f"{called}(...)"))
            visit(child, inner)

    visit(tree, "")
    return out


def test_the_template_finder_finds_a_second_way_to_start_one():
    source = ("import subprocess, sys\nfrom grading.kernel import warm\nfrom grading.kernel.protocol import TEMPLATE_MODULE\n"
              "def mine(path):\n"
              "    subprocess.Popen([sys.executable, '-m', 'grading.kernel.warm', path])\n"
              "    subprocess.run([sys.executable, '-m', TEMPLATE_MODULE, path])\n"
              "    warm.serve(path)\n"
              "    return warm.Template(None, '/tmp', path)\n"
              "def fine():\n"
              "    subprocess.run(['ps', '-o', 'cmd'])\n"
              "    return warm.start_template(['01_attention'])\n")
    assert template_starts(source) == [("mine", 5, "Popen(... template module ...)"),
                                       ("mine", 6, "run(... template module ...)"), ("mine", 7, "serve(...)"),
                                       ("mine", 8, "Template(...)")]


def test_one_function_starts_the_warm_template():
    """``grading.kernel.warm.start_template`` is the one place a template of warm kernels starts: across
    ``grading``, ``course_lib`` and the tests and benchmarks, nothing else runs ``python -m grading.kernel.warm``,
    calls the template's ``serve`` or builds its ``Template``; the template's own ``__main__`` block serves."""
    files = sorted(_modules().values())
    for folder, _, names in os.walk(os.path.join(REPO, "tests")):
        files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    found = {}
    for path in files:
        with open(path) as fh:
            starts = template_starts(fh.read())
        if starts:
            found[os.path.relpath(path, REPO)] = starts
    warm = os.path.join("grading", "kernel", "warm.py")
    # the one exception, no template: a process that only sleeps with the template's module in its command line,
    # the "template still importing" a launcher waits for in tests/test_interrupt.py
    stand_in = os.path.join("tests", "test_interrupt.py")
    if stand_in in found:
        assert sorted((function, how) for function, _, how in found.pop(stand_in)) == [
            ("test_a_launcher_waiting_for_an_importing_template_dies_with_its_worker",
             "Popen(... template module ...)")], found
    assert set(found) == {warm}, found
    assert sorted((function, how) for function, _, how in found[warm]) == [
        ("", "serve(...)"), ("start_template", "Popen(... template module ...)"), ("start_template", "Template(...)")]
