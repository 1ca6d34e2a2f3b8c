"""Shared by the bundle tests (tests/test_bundle*.py): the bundles a class meets, built and installed once
per test session (pytest-xdist workers share them through a lock: tests/bundle_student.py)."""
from __future__ import annotations

import ast
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bundle_student  # noqa: E402
from shared_runs import shared_root  # noqa: E402,F401 - the bundle tests' folder

from grading import bundle  # noqa: E402

LESSONS = bundle.assignments()
# the partly released bundle: solutions of 01-06 out, run on the lessons after them
RELEASED_UP_TO = "06_bpe"
PARTLY_RELEASED = [a for a in LESSONS if a <= RELEASED_UP_TO]


def _released_call(node) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return (isinstance(func, ast.Attribute) and func.attr == "released") or (isinstance(func, ast.Name)
                                                                             and func.id == "released")


def _decision(node, released: set[str]):
    """The value of a condition made of ``released("...")`` calls, ``not``, ``and``, ``or`` and constants, with
    ``released`` answering from ``released``; None when it holds anything else (then it may depend on it)."""
    if isinstance(node, ast.Constant):
        return node.value
    if _released_call(node):
        args = node.args
        if len(args) == 1 and not node.keywords and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            return args[0].value in released
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _decision(node.operand, released)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        values = [_decision(v, released) for v in node.values]
        if any(v is None for v in values):
            return None
        return all(values) if isinstance(node.op, ast.And) else any(values)
    return None


def cell_decides_differently(source: str, released: list[str]) -> bool:
    """True when the code asks ``course_lib.released(...)`` something whose answer changes once the solutions of
    ``released`` are out: each condition made of such calls (with ``not``, ``and``, ``or``) is evaluated with none
    released and with ``released``; a call inside anything else counts as a change."""
    if "released" not in source:
        return False
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return True
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not _released_call(node):
            continue
        top = node  # the whole condition this call is part of
        while isinstance(parents.get(top), (ast.BoolOp, ast.UnaryOp)):
            top = parents[top]
        before, after = _decision(top, set()), _decision(top, set(released))
        if before is None or after is None or before != after:
            return True
    return False


def decides_differently(assignment: str, released: list[str]) -> bool:
    """True when a code cell of the lesson decides differently once ``released`` are out
    (:func:`cell_decides_differently`)."""
    import nbformat

    return any(cell.cell_type == "code" and cell_decides_differently(cell.source, released)
               for path in bundle.source_notebooks(assignment) for cell in nbformat.read(path, as_version=4).cells)


# ---------------------------------------------------------------- the cells a released answer reaches
def _python(source: str) -> str:
    """A cell's code without IPython's magics and shell lines (blanked, so line numbers stay)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _module_bindings(tree) -> set[str]:
    """The names a cell binds at module level (assignments, imports, defs, loop and ``with`` targets); what a
    function, class or comprehension binds inside itself is local to it."""
    out: set[str] = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            for d in node.decorator_list:
                visit(d)
            return  # the body's names are its own
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _stored(nodes) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _free_loads(tree) -> set[str]:
    """The names a cell reads from the notebook's namespace: every name loaded, except inside a function,
    lambda or comprehension where that scope binds it (its parameters, its targets, what it assigns)."""
    out: set[str] = set()

    def visit(node, local: frozenset):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | \
                {x.arg for x in (a.vararg, a.kwarg) if x is not None}
            body = node.body if isinstance(node.body, list) else [node.body]
            for d in getattr(node, "decorator_list", []) + a.defaults + [d for d in a.kw_defaults if d is not None]:
                visit(d, local)
            inner = local | params | _stored(body)
            for stmt in body:
                visit(stmt, frozenset(inner))
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            inner = local | _stored(g.target for g in node.generators)
            for child in ast.iter_child_nodes(node):
                visit(child, frozenset(inner))
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            out.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child, local)

    visit(tree, frozenset())
    return out


def _exposed(stmts, bound: set) -> set[str]:
    """The names ``stmts`` read before binding them themselves (in order): what they take from earlier cells.
    ``bound`` (the names bound so far, updated) counts only bindings that surely happened: what a branch, loop
    body or ``try`` binds may not have, so a later read of it still counts as coming from before."""
    out: set[str] = set()
    for stmt in stmts:
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            out |= _free_loads(stmt.iter) - bound
            inner = bound | _stored([stmt.target])
            out |= _exposed(stmt.body, inner) | _exposed(stmt.orelse, set(bound))
        elif isinstance(stmt, (ast.If, ast.While)):
            out |= _free_loads(stmt.test) - bound
            out |= _exposed(stmt.body, set(bound)) | _exposed(stmt.orelse, set(bound))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                out |= _free_loads(item.context_expr) - bound
                if item.optional_vars is not None:
                    bound |= _stored([item.optional_vars])
            out |= _exposed(stmt.body, bound)
        else:
            out |= _free_loads(stmt) - bound
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id not in bound:
                out.add(stmt.target.id)
            if not isinstance(stmt, ast.Try):
                bound |= _module_bindings(ast.Module(body=[stmt], type_ignores=[]))
    return out


def _mutated(tree) -> set[str]:
    """Module-level names a cell changes in place: ``x.method(...)`` as a statement, ``x[...] = ...``,
    ``x.attr = ...``, ``x += ...`` (a model put in eval mode, a list appended to)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute):
            targets = [node.value.func.value]
        elif isinstance(node, ast.Assign):
            targets = [t for t in node.targets if isinstance(t, (ast.Attribute, ast.Subscript))]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            while isinstance(t, (ast.Attribute, ast.Subscript)):
                t = t.value
            if isinstance(t, ast.Name):
                out.add(t.id)
    return out


def rerun_cells(sources: list[str], released: list[str]) -> set[int]:
    """The code cells (indices into ``sources``, None for a markdown cell) that must run again once ``released``
    are out: the cells whose ``released(...)`` answers change, every later cell that reads a name they bound
    (and so on, in notebook order), and every earlier cell those read a name from (the cell that last bound it
    before, and the cells between that changed it in place), so that the cells run again have their inputs.
    The other cells run the same code on the same inputs as in the default bundle (where no earlier lesson's
    exercise exists, so none of them reads one), so they were shown there. Names are read from the code, not
    run: a name a cell cannot be parsed for makes the whole notebook run again."""
    cells = {}
    for i, src in enumerate(sources):
        if src is None:
            continue
        try:
            tree = ast.parse(_python(src))
        except SyntaxError:
            return {i for i, src in enumerate(sources) if src is not None}
        bound = _module_bindings(tree)  # a name it binds and then changes (`rows = []`, `rows.append`) is its own
        imports = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                   for a in n.names}
        cells[i] = {"bound": bound, "reads": _exposed(tree.body, set()), "mutates": _mutated(tree) - bound,
                    "imports": imports}
    order = sorted(cells)
    modules = set().union(*(c["imports"] for c in cells.values())) if cells else set()
    for c in cells.values():  # a module's functions called for their effect (plt.show(), torch.manual_seed(...))
        c["mutates"] -= modules  # change no value a later cell reads

    def source_of(k: int, name: str) -> list[int]:
        """The cells before ``k`` that gave ``name`` its value: the last that bound it, and those after that
        changed it in place."""
        before = [j for j in order if j < k]
        binders = [j for j in before if name in cells[j]["bound"]]
        start = binders[-1] if binders else -1
        return ([start] if binders else []) + [j for j in before if j > start and name in cells[j]["mutates"]]

    affected = {i for i in order if cell_decides_differently(sources[i], released)}
    for k in order:  # forward: what reads a value an affected cell made
        if k not in affected and any(j in affected for name in cells[k]["reads"] for j in source_of(k, name)):
            affected.add(k)
    needed, todo = set(affected), list(affected)
    while todo:  # backward: the inputs of every cell that runs again
        k = todo.pop()
        for name in cells[k]["reads"] | cells[k]["mutates"]:
            for j in source_of(k, name):
                if j not in needed:
                    needed.add(j)
                    todo.append(j)
    return needed


NOT_RERUN = ("# not run again in this bundle: neither this cell nor its inputs depend on an answer of "
             "course_lib.released() that changed (tests/bundle_fixtures.py rerun_cells); the default bundle ran it")


def keep_rerun_cells(released: list[str]):
    """An ``edit`` for ``bundle_student.run_lesson``: each code cell :func:`rerun_cells` leaves out becomes a
    comment (the indices of the others, and so the errors' cell numbers, stay)."""
    def edit(nb) -> None:
        sources = [c.source if c.cell_type == "code" else None for c in nb.cells]
        keep = rerun_cells(sources, released)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and i not in keep:
                cell.source = NOT_RERUN
    return edit


# The lessons after 06 that run differently once 01-06 are released: the ones where an answer of
# course_lib.released() changes (10 today: lesson 01's attention is measured; lesson 07 asks about 01 only
# together with 07, unreleased in both bundles, so it takes the same branches). The others execute the same
# code in both bundles: the default bundle's run, where no earlier lesson's exercise exists, shows they read
# none, and the partly released bundle only adds such names, so that run covers them. The same holds for the
# cells of a rerun lesson that neither read nor feed a changed answer: only rerun_cells() runs again.
RELEASED_RERUN = [a for a in LESSONS if a > RELEASED_UP_TO and decides_differently(a, PARTLY_RELEASED)]

# Lessons known to fail in the bundle, {(bundle tag, lesson): failing cells}, each marked xfail(strict=True) so
# that the mark goes as soon as the lesson passes. None at present: every lesson runs without an error in the
# default bundle and with the solutions of 01-06 released (tests/bundle_student.py, 2026-11-25).
KNOWN_FAILING: dict[tuple[str, str], str] = {}


def built_bundle(tmp_path_factory, released: list[str]) -> dict:
    return bundle_student.shared_build(shared_root(tmp_path_factory), released)


def lesson_params(tag: str, lessons: list[str]) -> list:
    out = []
    for a in lessons:
        why = KNOWN_FAILING.get((tag, a))
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(a, marks=marks, id=a))
    return out


def check_lesson(built: dict, assignment: str, work: str, edit=None) -> None:
    """Zero errors in every cell of the lesson's filled release notebooks (visible tests included), run
    under the device audit (tests/device_audit.py: a virtual CUDA device on the CPU), so that the same run
    also shows the lesson runs on a GPU unchanged: a tensor left on the CPU raises as on CUDA."""
    results = bundle_student.run_lesson(built, assignment, work, audit_devices=True, edit=edit)
    bad = {nb: errors for nb, errors in results.items() if errors}
    assert results and not bad, "cells that raised in the students' bundle (released: " + \
        (", ".join(built["released"]) or "none") + "):\n" + "\n".join(
            f"{nb} cell {e['cell']} ({e['grade_id'] or 'not graded'}): {e['ename']}: {e['evalue'][:300]}"
            for nb, errors in bad.items() for e in errors)
