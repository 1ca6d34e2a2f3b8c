"""The static scan of a student's code: what in it could change a later test's verdict (one implementation).

Read by the grader (``grading.integrity``: ``ScanSubmission`` scans each cell a student wrote, ``ApplyIntegrity``
zeroes the tests after a cell with a finding) and, in JupyterLab, by the visible tests
(:func:`kernel_findings`, called by every visible check), so that what grading will zero says so before the
notebook is handed in. It ships with the students' edition of ``course_lib`` (the grader's tools do not): what
it finds, and how it words it, is the grader's own. ``grading/integrity.py``'s docstring lists what costs points
and what is allowed.
"""
from __future__ import annotations

import ast
import builtins
import functools
import os

NOTEBOOKS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                             "notebooks")

_EXCEPTIONS = {name for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)}
_FORBIDDEN_MODULES = {"builtins": "uses the builtins module", "ctypes": "uses ctypes (raw memory access)",
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
                    "multi_head_attention_forward": (None, "calls PyTorch's built-in multi-head attention"),
                    "importlib": (None, "uses importlib"), "import_module": (None, "uses importlib"),
                    "__setattr__": (None, "sets attributes through __setattr__"),
                    "__delattr__": (None, "deletes attributes through __delattr__")}


def _root_name(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


@functools.lru_cache(maxsize=1024)
def _installed(top: str) -> bool:
    """A top-level module the grading environment has (built in, or found on its path outside the working
    folder: the kernel's working folder is the student's, where a cell can write a module and import it)."""
    import importlib.machinery
    import sys

    if not top or top.startswith("."):
        return False
    if top in sys.builtin_module_names or top == "__future__":
        return True
    here = {"", os.getcwd()}
    path = [p for p in sys.path if p not in here]
    for finder in sys.meta_path:  # the path finder on the path without the working folder; editable installs' own
        find = getattr(finder, "find_spec", None)
        try:
            spec = importlib.machinery.PathFinder.find_spec(top, path) if finder is importlib.machinery.PathFinder \
                else find(top, None) if find is not None else None
        except (ImportError, ValueError, TypeError, AttributeError):
            spec = None
        if spec is not None:
            return True
    return False


def _owned_by(node, owner: str) -> bool:
    """``node`` is the module ``owner`` by its name or as another module's attribute (``os.sys``)."""
    return _root_name(node) == owner or (isinstance(node, ast.Attribute) and node.attr == owner)


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
        return _allow_harmless_magics(ast.parse(TransformerManager().transform_cell(source)))
    except (SyntaxError, ValueError, TypeError):
        return None


# magics that only display or time: `obj?`, `%whos`; %time / %timeit run code, which is read
_DISPLAY_MAGICS = {"pinfo", "pinfo2", "pdef", "pdoc", "psource", "who", "whos", "who_ls", "precision"}
_TIMING_MAGICS = {"time", "timeit"}
# %matplotlib runs (in the kernel) only with one of these arguments: a backend named by a module
# (`module://x`) imports that module, which a submission can write
MATPLOTLIB_RUN = frozenset({"", "inline", "agg", "--list", "-l"})
# interactive backends a student's notebook commonly selects: not run in grading (no display), noted
MATPLOTLIB_NOT_RUN = frozenset({"widget", "ipympl", "notebook", "nbagg", "qt", "qt5", "qt6", "tk", "osx", "gtk3",
                                "gtk4", "wx"})


def _magic_call(node) -> tuple[str, str, list] | None:
    """(kind, magic name, other args) of ``get_ipython().run_line_magic('name', ...)`` and its cell twin."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    if not (isinstance(call.func, ast.Attribute) and call.func.attr in ("run_line_magic", "run_cell_magic")
            and isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name)
            and call.func.value.func.id == "get_ipython" and not call.func.value.args and call.args
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)):
        return None
    return call.func.attr, call.args[0].value, [a.value for a in call.args[1:]]


def _allow_harmless_magics(tree):
    """Replace display magics by ``pass`` and timing magics by the code they time (then read as any
    code); every other magic, and shell escapes, stay ``get_ipython()`` calls (a finding)."""

    class Rewrite(ast.NodeTransformer):
        def visit_Expr(self, node):
            magic = _magic_call(node)
            if magic is None:
                return node
            kind, name, args = magic
            if name == "matplotlib" and kind == "run_line_magic" and args[0].strip() in MATPLOTLIB_RUN:
                return ast.copy_location(ast.Pass(), node)
            if name in _DISPLAY_MAGICS and not any(ch in a for a in args for ch in "{}$"):
                # IPython expands `{expr}` and `$name` in these magics' arguments before they run
                # (`%precision {anything()}` runs anything): such an argument is code, kept a finding
                return ast.copy_location(ast.Pass(), node)
            if name in _TIMING_MAGICS:
                line, body = (args + ["", ""])[:2]
                words = line.split()
                while words and words[0].startswith("-"):  # %timeit -n 10 -r 3 f(x): the options, then the code
                    words = words[(2 if words[0] in ("-n", "-r", "-p") else 1):]
                code = "\n".join(filter(None, [" ".join(words) if kind == "run_line_magic" else "", body]))
                if kind == "run_cell_magic" and words:
                    code = " ".join(words) + "\n" + body  # %%timeit setup-statement, then the body
                try:
                    inner = ast.parse(code).body
                except SyntaxError:
                    inner = None
                if inner is not None:
                    return inner or ast.copy_location(ast.Pass(), node)
            return node

    return ast.fix_missing_locations(Rewrite().visit(tree))


# ------------------------------------------------------------ notebook habits: not run in grading, noted, no cost
_INSTALL = "installing packages is not possible while grading (the grading environment has the course's packages)"
_SHELL_NOT_RUN = {"pip": _INSTALL, "pip3": _INSTALL, "conda": _INSTALL, "mamba": _INSTALL, "uv": _INSTALL,
                  "nvidia-smi": "it only shows the GPU; shell commands do not run while grading"}
_MAGIC_NOT_RUN = {"pip": _INSTALL, "conda": _INSTALL, "mamba": _INSTALL,
                  "config": "kernel and display settings are the grader's while grading",
                  "autoreload": "the notebook runs once, top to bottom, while grading: nothing to reload"}
_EXTENSIONS_NOT_RUN = {"autoreload"}  # %load_ext / %reload_ext of these: not run
# %env NAME=value of these names changes where Python finds modules: a finding, never a habit
_IMPORT_PATH_VARS = ("PYTHON", "LD_PRELOAD", "LD_LIBRARY_PATH", "PATH")


def _env_name(arg: str) -> str:
    """'PYTHONPATH=.' / 'PYTHONPATH .' / 'PYTHONPATH' -> 'PYTHONPATH'; '' -> ''."""
    import re

    m = re.match(r"\s*([^\s=]*)", arg)
    return m.group(1) if m else ""


def _sets_import_path(arg: str) -> bool:
    name = _env_name(arg).upper()
    return bool(name) and any(name == v or (v == "PYTHON" and name.startswith(v)) for v in _IMPORT_PATH_VARS) \
        and ("=" in arg or len(arg.split()) > 1)


def _why_not_run(call) -> str | None:
    """Why one escape or line magic (the transformed call) is a habit grading does not run, or None when
    it is not on the allowlist (then it stays, and the scan reads it as a finding)."""
    if isinstance(call, tuple):  # (kind, name, args) of a magic
        kind, name, args = call
        arg = args[0] if args else ""
        if kind != "run_line_magic":
            return None
        if name in _MAGIC_NOT_RUN:
            return _MAGIC_NOT_RUN[name]
        if name in ("load_ext", "reload_ext") and arg.split() and all(a in _EXTENSIONS_NOT_RUN for a in arg.split()):
            return _MAGIC_NOT_RUN["autoreload"]
        if name == "env" and not _sets_import_path(arg):
            return "environment variables are the grader's while grading"
        if name == "matplotlib" and arg.strip() in MATPLOTLIB_NOT_RUN:
            return "interactive figures are not drawn while grading"
        return None
    words = call.split()  # a shell escape's command line
    if words[:3] in (["python", "-m", "pip"], ["python3", "-m", "pip"]):
        return _INSTALL
    return _SHELL_NOT_RUN.get(words[0]) if words else None


def _escape_call(node):
    """The command line of ``get_ipython().system('...')`` (a ``!`` line), else None."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("system", "getoutput") and \
            isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name) and \
            call.func.value.func.id == "get_ipython" and len(call.args) == 1 and \
            isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def neutralise_habits(source: str) -> tuple[str, list[str]]:
    """The cell with each allowlisted habit (``!pip install``, ``%pip``, ``%config``, ``%load_ext autoreload``,
    ``%autoreload``, ``%env NAME=value``, an interactive ``%matplotlib`` backend, ``%%capture``) replaced by
    ``pass`` with the line as a comment, and the lines replaced. The cell runs without them; any other
    magic or escape stays as it is (the scan reads it). Example: ``"!pip install -q x\nx = 1"`` ->
    ``("pass  # not run in grading: !pip install -q x\nx = 1", ["!pip install -q x"])``."""
    from IPython.core.inputtransformer2 import TransformerManager

    lines = source.splitlines()
    done: list[str] = []
    if lines and lines[0].lstrip().startswith("%%capture"):  # the body runs, its output shown
        done.append(lines[0].strip())
        lines[0] = "# not run in grading: " + lines[0].strip()
    try:
        transformed = TransformerManager().transform_cell("\n".join(lines)).splitlines()
        tree = ast.parse("\n".join(transformed))
    except (SyntaxError, ValueError, TypeError):
        return "\n".join(lines) if done else source, done
    if len(transformed) != len(lines):
        return "\n".join(lines) if done else source, done  # a continued line: left as it is, read by the scan
    for node in ast.walk(tree):
        if not isinstance(node, ast.Expr) or node.end_lineno != node.lineno:
            continue
        call = _magic_call(node)
        call = call if call is not None else _escape_call(node)
        if call is None:
            continue
        k = node.lineno - 1
        text = lines[k].strip()
        if not text.startswith(("!", "%")) or text.startswith("%%") or _why_not_run(call) is None:
            continue
        indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
        lines[k] = f"{indent}pass  # not run in grading: {text}"
        done.append(text)
    return ("\n".join(lines) if done else source), done


def habit_note(where: str, line: str) -> str:
    """The feedback's note for one habit grading did not run."""
    if line.startswith("%%capture"):
        why = "its cell ran with the output shown"
    else:
        from IPython.core.inputtransformer2 import TransformerManager

        try:
            node = ast.parse(TransformerManager().transform_cell(line)).body[0]
        except (SyntaxError, ValueError, TypeError, IndexError):
            node = None
        call = (_magic_call(node) or _escape_call(node)) if node is not None else None
        why = (_why_not_run(call) if call is not None else None) or "it does not run while grading"
    return f"{where}: `{line}` was not run: {why}; this costs nothing"


def _written_names(sources) -> set[str]:
    """Every word of every string constant of these cells (a module a cell writes is named in one)."""
    import re

    words: set[str] = set()
    for src in sources:
        tree = _parse(src)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                words |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
    return words


def unavailable_imports(source: str) -> tuple[str, list[str]]:
    """The cell with each import of a module the grading environment lacks replaced by
    ``raise ModuleNotFoundError(...)`` where it stood, and the modules. The import never runs (so it can
    never reach a module the submission wrote); the cell fails there as it would without the package,
    and costs only what that cell earns. A cell whose lines IPython changes (a continued magic) is left
    as it is (the scan then reads the import as a finding)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        transformed = TransformerManager().transform_cell(source).splitlines()
        tree = ast.parse("\n".join(transformed))
    except (SyntaxError, ValueError, TypeError):
        return source, []
    lines = source.splitlines()
    if len(transformed) != len(lines):
        return source, []
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            mods = ["." * node.level + (node.module or "")]
        else:
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        missing = [m for m in mods if m.startswith(".") or not _installed(m.split(".")[0])]
        if not missing:
            continue
        l0, l1 = node.lineno - 1, node.end_lineno - 1
        if lines[l0: l1 + 1] != transformed[l0: l1 + 1]:
            return source, []
        spans.append((l0, node.col_offset, l1, node.end_col_offset, missing[0]))
    if not spans:
        return source, []
    for l0, c0, l1, c1, module in sorted(spans, reverse=True):
        first, last = lines[l0].encode("utf-8"), lines[l1].encode("utf-8")  # ast's columns count bytes
        stmt = (f"raise ModuleNotFoundError({f'No module named {module!r}: not installed for grading'!r}, "
                f"name={module.split('.')[0]!r})")
        lines[l0] = first[:c0].decode("utf-8") + stmt + last[c1:].decode("utf-8")
        for k in range(l0 + 1, l1 + 1):
            lines[k] = ""
    return "\n".join(lines), [m for *_, m in sorted(spans)]


# ------------------------------------------------------------ which course_lib modules an answer may import
def _solution_defs(source: str) -> set[str]:
    """Top-level functions and classes a cell defines (magic and shell lines left out)."""
    import re

    try:
        tree = ast.parse(re.sub(r"^[ \t]*[%!].*$", "", source, flags=re.M))
    except (SyntaxError, ValueError):
        tree = None
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} \
        if tree is not None else set()


@functools.lru_cache(maxsize=1)
def exercise_names() -> frozenset:
    """Names every source notebook's solution cells define (the graded exercises of the course). Read
    as plain JSON (the instructor's own files; nbformat's validation would take seconds)."""
    import json

    names: set[str] = set()
    for folder in sorted(os.listdir(NOTEBOOKS_DIR)) if os.path.isdir(NOTEBOOKS_DIR) else []:
        path = os.path.join(NOTEBOOKS_DIR, folder)
        for f in sorted(os.listdir(path)) if os.path.isdir(path) else []:
            if f.endswith(".ipynb"):
                with open(os.path.join(path, f), encoding="utf-8") as fh:
                    cells = json.load(fh).get("cells", [])
                for cell in cells:
                    if cell.get("cell_type") == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                        src = cell.get("source", "")
                        names |= _solution_defs("".join(src) if isinstance(src, list) else src)
    return frozenset(names)


@functools.lru_cache(maxsize=1)
def reference_modules() -> frozenset:
    """The ``course_lib`` modules an answer may not import: ``course_lib`` itself, the checks, and
    every module that binds a graded exercise's name at its top level (its reference, or an alias
    of one) or imports such a module. The others (``plotting``, ``pretrained``, the data loaders)
    hold no answer: importing them is harmless (a call that reaches a reference by any route is
    still caught at run time by the checks)."""
    import course_lib

    root = os.path.dirname(os.path.abspath(course_lib.__file__))
    exercises = exercise_names()
    modules: dict[str, tuple[set, set]] = {}  # module -> (names bound at top level, course_lib modules imported)
    for folder, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(folder, f), os.path.dirname(root))[:-3].replace(os.sep, ".")
            name = rel[: -len(".__init__")] if rel.endswith(".__init__") else rel
            try:
                with open(os.path.join(folder, f), encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
            except (OSError, SyntaxError, ValueError):
                modules[name] = ({"?"} | set(exercises), set())
                continue
            bound, uses = set(), set()
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound.add(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                        bound |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            for node in tree.body:  # what the module's attributes reach (a function's own imports bind nothing there)
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    bound |= set(_bindings(node))
                    if isinstance(node, ast.Import):
                        uses |= {a.name for a in node.names if a.name.startswith("course_lib")}
                    elif node.module and node.module.startswith("course_lib"):
                        uses.add(node.module)
                        uses |= {f"{node.module}.{a.name}" for a in node.names}
            modules[name] = (bound, uses)
    unsafe = {"course_lib", "course_lib.checks"} | {m for m in modules if m.startswith("course_lib.checks.")}
    unsafe |= {m for m, (bound, _) in modules.items() if bound & exercises}
    changed = True
    while changed:  # a module that imports one holding a reference reaches it as an attribute
        changed = False
        for m, (_, uses) in modules.items():
            if m not in unsafe and any(u in unsafe for u in uses):
                unsafe.add(m)
                changed = True
    return frozenset(unsafe)


def _course_lib_finding(node) -> list[str]:
    """What an import of course_lib reaches, when it reaches a reference or the checks."""
    unsafe = reference_modules()
    found = []
    if isinstance(node, ast.Import):
        for a in node.names:
            if not a.name.startswith("course_lib") or a.name.split(".")[0] != "course_lib":
                continue
            if a.name.startswith("course_lib.checks"):
                found.append("imports the grading checks")
            elif a.asname is None or a.name in unsafe or a.name == "course_lib":
                # `import course_lib.plotting` binds course_lib itself, which reaches every loaded module
                found.append(f"imports {a.name} in an answer (course_lib holds the reference implementations)")
    elif node.module and node.module.split(".")[0] == "course_lib" and not node.level:
        targets = [] if node.module == "course_lib" else [node.module]  # the package: what it hands out counts
        targets += [f"{node.module}.{a.name}" for a in node.names
                    if node.module == "course_lib" or f"{node.module}.{a.name}" in unsafe]
        for t in dict.fromkeys(targets):
            if t.startswith("course_lib.checks"):
                found.append("imports the grading checks")
            elif t in unsafe or (node.module == "course_lib" and t not in _known_modules()):
                found.append(f"imports {t} in an answer (it holds the reference of a graded exercise)")
    return found


@functools.lru_cache(maxsize=1)
def _known_modules() -> frozenset:
    import course_lib

    root = os.path.dirname(os.path.abspath(course_lib.__file__))
    return frozenset("course_lib." + (f[:-3] if f.endswith(".py") else f) for f in os.listdir(root)
                     if (f.endswith(".py") and f != "__init__.py") or os.path.isdir(os.path.join(root, f)))


def _statement_key(node) -> str:
    return ast.dump(node, include_attributes=False)


def instructor_statements(sources) -> frozenset:
    """The syntax trees (dumped) of every top-level statement of these instructor cells."""
    keys: set[str] = set()
    for src in sources:
        keys |= _statements_in(src) if len(src) <= _CACHED_SOURCE else _statements_in.__wrapped__(src)
    return frozenset(keys)


@functools.lru_cache(maxsize=1024)
def _statements_in(source: str) -> frozenset:
    """Kept per text: the source notebook's cells are the same for every submission of a class."""
    tree = _parse(source)
    return frozenset(_statement_key(n) for n in tree.body) if tree is not None else frozenset()


_PATH_EDITS = {"append", "insert", "extend", "remove", "pop", "clear", "reverse", "sort", "__setitem__", "__iadd__"}


def scan_code(source: str, where: str, imported, protected: dict[str, str],
              instructor: frozenset = frozenset()) -> list[str]:
    """Findings in one student-editable code cell (``where`` names it in messages). Top-level
    statements whose syntax tree is one of ``instructor`` (the instructor's own, in a cell the
    student edited) are not the student's and are not read."""
    tree = _parse(source)
    if tree is None:
        return []  # a syntax error is a broken answer, not cheating: its tests fail on their own
    if instructor:
        tree.body = [n for n in tree.body if _statement_key(n) not in instructor]
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
                if top in _FORBIDDEN_MODULES:
                    add(_FORBIDDEN_MODULES[top])
            for msg in _course_lib_finding(node):
                add(msg)
            for m in mods if not (isinstance(node, ast.ImportFrom) and node.level) else ["." * node.level + (node.module or "")]:
                if not _installed(m.split(".")[0]):
                    add(f"imports {m}, which is not installed: a module written by the submission, "
                        "whose code this check cannot read")
            for bound, target in _bindings(node).items():
                if bound in protected and protected[bound] != target:  # `import math` again is fine
                    add(f"rebinds {bound!r}, which the locked setup cell imported")
        elif isinstance(node, ast.Expr) and (_magic_call(node) or _escape_call(node)) is not None:
            magic = _magic_call(node)
            if magic is None:
                add(f"runs a shell command (!{_escape_call(node)[:60]}), which grading does not allow")
            elif magic[1] == "matplotlib":
                add(f"selects the matplotlib backend {(magic[2] or [''])[0].strip()[:60]!r}; grading allows only "
                    f"{', '.join(sorted(b for b in MATPLOTLIB_RUN | MATPLOTLIB_NOT_RUN if b and not b.startswith('-')))}"
                    " (a backend named by a module imports that module)")
            elif magic[1] == "env" and _sets_import_path((magic[2] or [''])[0]):
                add(f"sets {_env_name(magic[2][0])} with %env, which changes where Python imports modules from")
            else:
                add(f"runs the magic %{magic[1]}, which grading does not allow")
        elif isinstance(node, ast.Name) and node.id in _FORBIDDEN_NAMES:
            add(_FORBIDDEN_NAMES[node.id])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _PATH_EDITS and isinstance(node.func.value, ast.Attribute) and \
                node.func.value.attr == "path" and _owned_by(node.func.value.value, "sys"):
            add(f"edits sys.path ({ast.unparse(node.func)[:60]}), which changes where Python imports modules from")
        elif isinstance(node, ast.Attribute) and node.attr == "addsitedir":
            add("adds a folder to sys.path (site.addsitedir), which changes where Python imports modules from")
        elif isinstance(node, ast.Attribute) and node.attr in _FORBIDDEN_ATTRS:
            owner, msg = _FORBIDDEN_ATTRS[node.attr]
            if owner is None or _owned_by(node.value, owner):  # sys.modules, os.sys.modules
                add(msg)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "hasattr", "setattr", "delattr"):
            first = node.args[0] if node.args else None
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value in _FORBIDDEN_ATTRS:
                owner, msg = _FORBIDDEN_ATTRS[name.value]  # getattr(f, "__code__") is f.__code__
                if owner is None or first is None or _owned_by(first, owner):
                    add(msg)
            elif name is not None and not isinstance(name, (ast.Constant, ast.Name)):
                add(f"calls {node.func.id} with a computed attribute name ({ast.unparse(name)})")
            if node.func.id in ("setattr", "delattr") and \
                    not (isinstance(first, ast.Name) and first.id in ("self", "cls")):
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


# ------------------------------------------------------------ the same scan in the student's kernel
def _notebook_folder(assignment: str) -> str:
    """The assignment's notebook folder: the repository's (``notebooks/<assignment>`` beside ``course_lib``), else
    the kernel's working folder when it is that assignment's (JupyterLab starts a kernel in its notebook's
    folder; the students' bundle installs ``course_lib`` into the environment, away from its notebooks)."""
    beside = os.path.join(NOTEBOOKS_DIR, assignment)
    if os.path.isdir(beside):
        return beside
    here = os.getcwd()
    return here if os.path.basename(here) == assignment else beside


@functools.lru_cache(maxsize=16)
def _instructor(assignment: str) -> tuple:
    """(normalised sources of the notebook's cells as released but its answer cells, the statements of its cells
    that are not answers, the names its cells import, the names its answer cells define) of the assignment's
    notebook (:func:`_notebook_folder`); empty when it is not there. In the students' bundle the notebook is the
    student's working copy: a cell the student changed and saved that is not an answer cell reads as the
    instructor's here (the grader compares with the instructor's own notebook)."""
    import json

    folder = _notebook_folder(assignment)
    cells = []
    for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if f.endswith(".ipynb"):
            with open(os.path.join(folder, f), encoding="utf-8") as fh:
                cells += [c for c in json.load(fh).get("cells", []) if c.get("cell_type") == "code"]
    sources = ["".join(c.get("source", "")) for c in cells]
    answer = [c.get("metadata", {}).get("nbgrader", {}).get("solution", False) for c in cells]
    # an answer cell is never the instructor's here (the notebook may be the student's own working copy)
    released = frozenset(_normalise(s) for s, a in zip(sources, answer) if not a) | \
        frozenset(_normalise(_without_hidden_tests(s)) for s, a in zip(sources, answer) if not a)
    shared = instructor_statements([s for s, a in zip(sources, answer) if not a])
    defined = frozenset().union(*(_solution_defs(s) for s, a in zip(sources, answer) if a))
    return released, shared, imported_names(sources), defined


def kernel_findings(assignment: str, history: list[str] | None = None) -> list[str]:
    """What grading's scan (``grading.integrity.ScanSubmission``) would find in the code this kernel ran: every
    cell it ran that is not one of the notebook's cells as released, read as the grader reads it (an answer cell,
    one that defines an exercise's function, in full; another cell without the instructor's own statements;
    habits such as ``!pip install`` and imports of uninstalled modules are not findings). ``history``: the cells'
    sources, in order (default: IPython's input history; none outside IPython)."""
    if history is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return []
        shell = get_ipython()
        manager = getattr(shell, "history_manager", None)
        history = list(getattr(manager, "input_hist_raw", []) or [])
    if not any(s.strip() for s in history):
        return []
    released, shared, protected, defined = _instructor(assignment)
    if not released:
        return []
    imported = set(protected) | set(imported_names(history))
    found: list[str] = []
    for k, source in enumerate(history):
        if not source.strip() or _normalise(source) in released:
            continue
        source, _ = neutralise_habits(source)
        source, _ = unavailable_imports(source)
        first = source.strip().splitlines()[0][:60] if source.strip() else ""
        where = f"the cell you ran as In[{k}] ({first!r})"
        answer = bool(_solution_defs(source) & defined)
        for finding in scan_code(source, where, imported, dict(protected), frozenset() if answer else shared):
            if finding not in found:
                found.append(finding)
    return found


def kernel_note(assignment: str, exercise: str) -> str | None:
    """The visible test's message when the scan finds something in this kernel's code, or None."""
    found = kernel_findings(assignment)
    if not found:
        return None
    shown = "; ".join(found[:4]) + (f"; and {len(found) - 4} more" if len(found) > 4 else "")
    return (f"{exercise}: when graded, this test and every test after that cell score 0 (integrity check): "
            f"{shown}. Grading reads the code you wrote for what can change how a later test runs; rewrite that "
            "code without it. If you have already removed it, restart the kernel and run the notebook again "
            "(this check reads the code this kernel ran).")
