"""Integrity checks in proportion: what could change a test's verdict costs that test, nothing more.

Two nbgrader preprocessors, wired in ``nbgrader_config.py``:

``ScanSubmission`` (first step of autograde's sanitize pass, before nbgrader
restores the locked cells) compares the submission with the gradebook and the
instructor's source notebook, puts the notebook's structure back as released, and
reads the code a student could write.

*Restored, at no cost* (the release notebook tells students "grading restores test
cells"; each restoration is a note in the feedback, never an accusation):

* a locked cell (setup, tests) that was edited: nbgrader's ``OverwriteCells`` puts the
  released source back and it runs;
* a locked or graded cell that was deleted: inserted again where the release has it;
* nbgrader metadata that was changed (points, a test turned into a solution, the cell
  type): put back as released;
* cells whose nbgrader metadata is gone (copied into a fresh notebook): matched to the
  release by their content (a locked cell by its text, an answer by the functions it
  defines, a written answer by the prompt above it) and graded as those cells;
* a cell with a grade id of no cell of this assignment: graded as a plain cell.

*A cell is the instructor's* when it matches one of the source notebook's cells up to
whitespace and line endings; in a cell the student edited (the clinical-sentence cell
of lesson 01 invites it), every top-level statement equal to one of the instructor's
(same syntax tree) stays the instructor's, and only the rest is read as the student's.

*Costs points* (found in code the student wrote): monkeypatching (assigning attributes
of imported names: ``np.allclose = ...``, ``checks.attention.check_softmax = ...``),
rebinding names the setup cell imported (``checks = ...``), ``setattr``/``delattr`` on
anything but self/cls, redefining exception classes (``AssertionError``),
``builtins``/``__builtins__``, ``sys.modules``, ``ctypes``, ``gc``, ``importlib``,
``eval``/``exec``/``compile``/``__import__``, frame and history introspection
(``inspect``, ``sys._getframe``, ``get_ipython``, ``_ih``), shell escapes and magics
other than display and timing ones, importing the checks, ``course_lib`` itself or a
``course_lib`` module that holds a graded exercise's reference (:func:`reference_modules`),
calling PyTorch's built-in attention, ``__code__``/``__globals__``/``__dict__``/``__setattr__``
(also by ``getattr`` with the name as a string; a computed name in ``getattr`` is a finding), and
importing a module the grading environment lacks (one the submission wrote into its folder).
Every copy of a grade id's cell but the last is read as the student's (nbgrader's DeduplicateIds
keeps the last; the others run as plain cells). Allowed: ``%matplotlib``, ``%time``/``%timeit``
(their code is read), ``obj?``, ``help(...)`` (a display magic whose argument holds ``{...}`` or
``$`` is not: IPython evaluates it), and importing the ``course_lib`` modules
that hold no graded reference (``plotting``, ``pretrained``, the data loaders).

``ApplyIntegrity`` (autograde pass, right after execution) turns every autograded test
that runs after the first cell with a finding into 0 with an ``IntegrityError`` output
naming the finding (cells run in order: code can only change the tests after it), and
puts a note at the top of the notebook listing the findings and the restorations.
Calling the course's reference implementation at run time is caught separately by
``course_lib.checks`` (that test scores 0, ``IntegrityError``).

Static checks cannot see everything a determined student could write; together
with the sandbox (grading/sandbox.py) and the verifier outside the kernel
(grading/verify.py) they close the routes that need no effort to take.
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


NOTES_KEY = "course_integrity_notes"  # restorations: shown in the feedback, cost nothing
HABITS_KEY = "course_integrity_habits"  # habits not run (!pip, %config, ...), unavailable imports: cost nothing
CELL_KEY = "course_integrity"  # on the cell where a finding is: the autograded tests after it score 0


def _source_notebook(assignment: str, notebook: str) -> list:
    """The instructor's notebook's cells (unlocked instructor cells are not the student's)."""
    import nbformat

    path = os.path.join(NOTEBOOKS_DIR, assignment, f"{notebook}.ipynb")
    if not os.path.exists(path):
        return []
    return list(nbformat.read(path, as_version=4).cells)


@functools.lru_cache(maxsize=1)
def _lessons_by_grade_id() -> dict:
    """grade id -> (assignment, notebook) of every source notebook (read as plain JSON)."""
    import json

    out: dict = {}
    for folder in sorted(os.listdir(NOTEBOOKS_DIR)) if os.path.isdir(NOTEBOOKS_DIR) else []:
        path = os.path.join(NOTEBOOKS_DIR, folder)
        for f in sorted(os.listdir(path)) if os.path.isdir(path) else []:
            if f.endswith(".ipynb"):
                with open(os.path.join(path, f), encoding="utf-8") as fh:
                    for cell in json.load(fh).get("cells", []):
                        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                        if gid:
                            out.setdefault(gid, (folder, f[:-6]))
    return out


def _lesson_of(grade_ids, assignment: str):
    """(assignment, notebook) of another lesson whose cells these mostly are, or None."""
    import collections

    known = _lessons_by_grade_id()
    counts = collections.Counter(known[g] for g in grade_ids if g in known and known[g][0] != assignment)
    if not counts:
        return None
    lesson, n = counts.most_common(1)[0]
    return lesson if n * 2 > len(grade_ids) else None


def _gid(cell):
    meta = cell.metadata.get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) else None


class ScanSubmission(NbGraderPreprocessor):
    """Put the notebook's structure back as released (restorations are notes), and record what in the
    student's code could change a later test's verdict (findings, on the cell where each is).
    Runs before nbgrader restores the locked cells' sources."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        try:
            with Gradebook(info["db_url"]) as gb:
                stored = gb.find_notebook(info["notebook"], info["assignment"])
                source_cells = {c.name: (c.locked, c.source, c.cell_type) for c in stored.source_cells}
                grade_cells = {c.name: c.max_score for c in stored.grade_cells}
                solution_cells = {c.name for c in stored.solution_cells}
        except MissingEntry:  # a notebook beside the assignment's own: nothing of it is graded, no accusation
            other = _lesson_of({_gid(c) for c in nb.cells} - {None}, info["assignment"])
            nb.metadata[META_KEY] = []
            nb.metadata[NOTES_KEY] = [f"notebook {info['notebook']!r} is not part of assignment {info['assignment']!r}"
                                      + (f" (it is {other[0]}'s {other[1]}.ipynb: the wrong assignment's notebook)"
                                         if other else "") + "; it is not graded"]
            return nb, resources
        source_nb = _source_notebook(info["assignment"], info["notebook"])
        order = [g for g in (_gid(c) for c in source_nb) if g in source_cells] or list(source_cells)
        notes: list[str] = []
        self._adopt_cells_without_metadata(nb, source_nb, source_cells, grade_cells, solution_cells, notes)

        instructor = [c for c in source_nb if c.cell_type == "code"]
        ids = {_gid(c) for c in nb.cells} - {None}
        foreign = ids - set(source_cells)  # ("setup" is every lesson's)
        other = _lesson_of(foreign, info["assignment"]) if len(foreign) > len(ids - foreign) else None
        if other:
            # the wrong assignment's notebook: that lesson's own cells are an instructor's, not the student's
            # code; this assignment's cells are put back as released below and score what they earn
            notes.append(f"this is {other[0]}'s notebook ({other[1]}.ipynb), not {info['assignment']}'s: the wrong "
                         f"assignment's notebook was handed in, so none of {info['assignment']}'s answers are in it; "
                         f"its cells were put back as released and scored as they ran (hand in {info['notebook']}"
                         f".ipynb of {info['assignment']} and ask for a regrade)")
            instructor = instructor + [c for c in _source_notebook(*other) if c.cell_type == "code"]
        instructor_sources = {_normalise(c.source) for c in instructor}
        instructor_sources |= {_normalise(_without_hidden_tests(c.source)) for c in instructor}  # as released
        # the statements of the instructor's own cells (not answers): an edited demo cell keeps them
        shared = instructor_statements([c.source for c in instructor if not c.metadata.get("nbgrader", {}).get("solution")])
        # what the locked cells import as released (they are restored so): an import a student added to the
        # setup cell is not run, so it protects nothing
        locked_sources = [src for locked, src, kind in source_cells.values() if locked and kind == "code"]
        protected = imported_names([c.source for c in instructor] + locked_sources)
        imported = set(protected) | set(imported_names([c.source for c in nb.cells if c.cell_type == "code"]))
        findings: list[str] = []
        habits_noted: list[str] = []
        # the words of the student's string constants: an unavailable module named there may be one a cell writes
        written = _written_names([c.source for c in nb.cells if c.cell_type == "code"
                                  and _normalise(c.source) not in instructor_sources])
        seen = set()
        # nbgrader's DeduplicateIds (after this scan) keeps the last cell of a grade id and turns the
        # others into plain cells, which nbgrader neither restores nor grades: they are read as the student's
        last = {_gid(c): i for i, c in enumerate(nb.cells)}
        for i, cell in enumerate(nb.cells):
            meta = cell.metadata.get("nbgrader", {})
            gid = _gid(cell)
            editable, solution = False, False
            if gid is not None and last.get(gid) != i:
                editable = _normalise(cell.source) not in instructor_sources  # an exact copy runs as released
            elif gid is not None and gid in source_cells:
                seen.add(gid)
                locked, stored_source, cell_type = source_cells[gid]
                if bool(meta.get("solution", False)) != (gid in solution_cells) or \
                        bool(meta.get("grade", False)) != (gid in grade_cells) or bool(meta.get("locked", False)) != locked:
                    notes.append(f"cell {gid}: its nbgrader metadata (grade/solution/locked) had changed; "
                                 "it was put back as released")
                elif gid in grade_cells and meta.get("points") is not None and \
                        float(meta["points"]) != float(grade_cells[gid]):
                    notes.append(f"cell {gid}: its points had been changed to {meta['points']}; "
                                 f"graded out of {grade_cells[gid]:g} as released")
                if locked and _normalise(cell.source) != _normalise(_without_hidden_tests(stored_source)):
                    notes.append(f"cell {gid}: this locked cell was edited; the released cell was restored and run")
                if cell.cell_type != cell_type:
                    notes.append(f"cell {gid}: its type had been changed from {cell_type} to {cell.cell_type}; "
                                 "put back as released")
                editable, solution = not locked, gid in solution_cells
            elif gid is not None and other:  # said once, above
                editable = _normalise(cell.source) not in instructor_sources
            elif gid is not None:
                notes.append(f"cell {gid}: not a cell of this assignment (a notebook from elsewhere?); "
                             "run as an ordinary cell")
                editable = True
            else:
                editable = _normalise(cell.source) not in instructor_sources  # a cell the student added or changed
            if editable and cell.cell_type == "code":
                where = f"cell {gid or i}"
                cell.source, habits = neutralise_habits(cell.source)
                habits_noted += [habit_note(where, line) for line in habits]
                cell.source, missing = unavailable_imports(cell.source)
                found = scan_code(cell.source, where, imported, protected, frozenset() if solution else shared)
                for m in missing:
                    if m.lstrip(".").split(".")[0] in written or m.startswith("."):
                        found.append(f"{where}: imports {m}, which is not installed: a module written by the "
                                     "submission, whose code this check cannot read")
                    else:
                        habits_noted.append(f"{where}: imports {m}, which the grading environment does not have: "
                                            "the import raised ModuleNotFoundError there, so that cell failed and "
                                            "the cells after it ran; this costs only what that cell earns")
                if found:
                    cell.metadata[CELL_KEY] = found
                    findings += found
        self._restore_deleted(nb, order, source_cells, grade_cells, solution_cells, seen, notes)
        nb.metadata[META_KEY] = findings
        nb.metadata[NOTES_KEY] = notes
        nb.metadata[HABITS_KEY] = habits_noted
        self._repair_metadata(nb, source_cells, grade_cells, solution_cells)
        return nb, resources

    @staticmethod
    def _adopt_cells_without_metadata(nb, source_nb, source_cells, grade_cells, solution_cells, notes) -> None:
        """Cells copied into a fresh notebook lose their nbgrader metadata: give each graded, locked or
        answer cell of the release that is missing the cell that matches it by content (a locked cell
        by its text, an answer by the functions it defines, a written answer by the prompt above it)."""
        present = {_gid(c) for c in nb.cells}
        missing = [g for g in source_cells if g not in present]
        if not missing:
            return
        bare = [c for c in nb.cells if _gid(c) is None]
        taken = set()
        source_by_gid = {_gid(c): (k, c) for k, c in enumerate(source_nb) if _gid(c)}
        for gid in missing:
            locked, stored_source, cell_type = source_cells[gid]
            match = None
            for cell in bare:
                if id(cell) in taken or cell.cell_type != cell_type:
                    continue
                if locked and _normalise(cell.source) == _normalise(_without_hidden_tests(stored_source)):
                    match = cell
                elif gid in solution_cells and cell_type == "code":
                    names = _solution_defs(stored_source)
                    if names and names <= _solution_defs(cell.source):
                        match = cell
                if match is not None:
                    break
            if match is None and gid in solution_cells and cell_type == "markdown" and gid in source_by_gid:
                k = source_by_gid[gid][0]
                prompt = _normalise(source_nb[k - 1].source) if k > 0 else None
                for j, cell in enumerate(nb.cells[:-1]):
                    after = nb.cells[j + 1]
                    if prompt and _normalise(cell.source) == prompt and _gid(after) is None \
                            and after.cell_type == "markdown" and id(after) not in taken:
                        match = after
                        break
            if match is not None:
                taken.add(id(match))
                match.metadata["nbgrader"] = {"grade_id": gid, "grade": gid in grade_cells,
                                              "solution": gid in solution_cells, "locked": bool(locked)}
                if gid in grade_cells:
                    match.metadata["nbgrader"]["points"] = float(grade_cells[gid])
                notes.append(f"cell {gid}: it had lost its nbgrader metadata (copied into a new notebook?); "
                             "matched to the release by its content and graded as that cell")

    @staticmethod
    def _restore_deleted(nb, order, source_cells, grade_cells, solution_cells, seen, notes) -> None:
        """Insert every deleted locked or graded cell again, as released, after the cell that precedes it
        in the release (nbgrader then restores its full source, hidden tests included)."""
        from nbformat.v4 import new_code_cell

        for k, gid in enumerate(order):
            locked, stored_source, cell_type = source_cells[gid]
            if gid in seen or not (locked or gid in grade_cells):
                continue
            source = _without_hidden_tests(stored_source)
            cell = new_code_cell(source) if cell_type == "code" else new_markdown_cell(source)
            cell.metadata["nbgrader"] = {"grade_id": gid, "grade": gid in grade_cells,
                                         "solution": gid in solution_cells, "locked": bool(locked)}
            before = {g for g in order[:k]}
            at = 0
            for i, c in enumerate(nb.cells):
                if _gid(c) in before:
                    at = i + 1
            nb.cells.insert(at, cell)
            seen.add(gid)
            what = "written answer (left blank)" if gid in solution_cells else "cell"
            notes.append(f"cell {gid}: this {'graded ' if gid in grade_cells else ''}{what} was deleted; "
                         "the released cell was put back" + (" and run" if cell_type == "code" else ""))

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
    """Zero the autograded tests that run after a cell with a finding, with the finding shown there; a
    note at the top lists the findings (what they cost) and the cells grading restored (no cost)."""

    def preprocess(self, nb, resources):
        findings = list(nb.metadata.get(META_KEY, []))
        notes = list(nb.metadata.get(NOTES_KEY, []))
        habits = list(nb.metadata.get(HABITS_KEY, []))
        if not findings and not notes and not habits:
            return nb, resources
        whole = findings and not any(c.metadata.get(CELL_KEY) for c in nb.cells)  # not of this assignment
        seen: list[str] = []
        zeroed: list[str] = []
        for cell in nb.cells:
            seen += [f for f in cell.metadata.get(CELL_KEY, []) if f not in seen]
            if (seen or whole) and cell.cell_type == "code" and utils.is_grade(cell):
                shown = seen or findings
                reason = "; ".join(shown[:6]) + (f"; and {len(shown) - 6} more" if len(shown) > 6 else "")
                cell.outputs = list(cell.get("outputs", [])) + [new_output(
                    "error", ename="IntegrityError", evalue=f"integrity check failed: {reason}",
                    traceback=[f"IntegrityError: integrity check failed: {reason}",
                               "This test runs after that code, which can change how it runs, so it scores 0."])]
                zeroed.append(str(cell.metadata.get("nbgrader", {}).get("grade_id", "?")))
        parts = []
        if findings:
            parts.append(
                "**Grading note: integrity check failed for the tests after this code, so they score 0** "
                f"({', '.join(quote(z) for z in zeroed) or 'none'}). The check reads the code you wrote for "
                "what can change how a later test runs (patching a module or the checks, redefining names "
                "the setup cell imported, reaching the course's reference implementation); the tests before "
                "it count as they ran.\n\n" + "\n".join(f"- {quote(f)}" for f in findings)
                + "\n\nIf you believe this is a mistake, talk to your instructor; they can review and regrade.")
        if notes:
            parts.append("**Grading note: restored as released** (test and locked cells are always graded as "
                         "released; this costs nothing).\n\n" + "\n".join(f"- {quote(n)}" for n in notes))
        if habits:
            parts.append("**Grading note: not run while grading** (lines a notebook commonly holds, such as package "
                         "installs and display settings; this costs nothing, except that a cell whose import failed "
                         "scores what it earned).\n\n" + "\n".join(f"- {quote(h)}" for h in habits))
        nb.cells.insert(0, new_markdown_cell("\n\n".join(parts)))
        return nb, resources
