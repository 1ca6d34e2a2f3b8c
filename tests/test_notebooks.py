"""Every source notebook follows the course's nbgrader pattern; its tests pass on the
instructor's solutions and fail on the release stubs (the demo class: tests/test_grading.py)."""
import ast
import importlib
import inspect
import os
import pkgutil
import re

import nbformat
import pytest

import course_lib
from conftest import source_notebooks

NOTEBOOKS = source_notebooks()
IDS = [a for a, _ in NOTEBOOKS]


def nbg(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def reference_functions():
    """name -> function for every public function/class of course_lib's lesson modules."""
    out = {}
    for mod in pkgutil.iter_modules(course_lib.__path__):
        if mod.name in ("checks", "plotting") or mod.name.startswith("_") or mod.ispkg:
            continue
        module = importlib.import_module(f"course_lib.{mod.name}")
        for name, obj in vars(module).items():
            if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj)) \
                    and getattr(obj, "__module__", "") == module.__name__:
                out.setdefault(name, obj)
    return out


def test_at_least_the_first_seven_lessons_exist():
    assert [a for a in IDS][:1] == ["01_attention"]


@pytest.mark.parametrize("assignment,path", NOTEBOOKS, ids=IDS)
def test_structure(assignment, path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", "kernelspec must be python3"
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for c in code_cells:
        assert not c.outputs and c.execution_count is None, f"{path}: commit notebooks without outputs"
    assert nbg(code_cells[0]).get("grade_id") == "setup", "the first code cell is the locked setup cell"
    ids = [nbg(c)["grade_id"] for c in nb.cells if nbg(c)]
    assert len(ids) == len(set(ids)), f"duplicate grade_ids: {ids}"
    solutions = [c for c in code_cells if nbg(c).get("solution") and not nbg(c).get("grade")]
    assert len(solutions) >= 3, f"{assignment}: at least three graded exercises, found {len(solutions)}"
    by_id = {nbg(c)["grade_id"]: c for c in nb.cells if nbg(c)}
    refs = reference_functions()
    for sol in solutions:
        gid = nbg(sol)["grade_id"]
        assert gid.endswith("_impl"), f"solution cell {gid} should be named <exercise>_impl"
        assert "### BEGIN SOLUTION" in sol.source and "### END SOLUTION" in sol.source, gid
        ex = gid[: -len("_impl")]
        visible, hidden = by_id.get(f"{ex}_visible"), by_id.get(f"{ex}_hidden")
        assert visible is not None and hidden is not None, f"{gid}: needs {ex}_visible and {ex}_hidden test cells"
        for test in (visible, hidden):
            meta = nbg(test)
            assert meta.get("grade") and meta.get("locked") and meta.get("points", 0) > 0, meta
            assert test.source.lstrip().startswith('"""'), f"{meta['grade_id']}: open with a docstring"
            assert "checks." in test.source, f"{meta['grade_id']}: tests call course_lib.checks"
        assert "### BEGIN HIDDEN TESTS" in hidden.source and "### END HIDDEN TESTS" in hidden.source
        assert "HIDDEN TESTS" not in visible.source
        # the stub has the reference's name and signature
        tree = ast.parse(re.sub(r"^[%!].*$", "", sol.source, flags=re.M))
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert defs, f"{gid}: the solution cell defines the function the student writes"
        for d in defs:
            assert d.name in refs, f"{gid}: {d.name} has no reference of the same name in course_lib"
            if isinstance(d, ast.FunctionDef):
                for a in d.args.posonlyargs + d.args.args + d.args.kwonlyargs + [d.args.vararg, d.args.kwarg]:
                    if a is not None:
                        a.annotation = None  # compare names only; annotations may name notebook globals
                ns = {}
                defaults = [ast.Constant(None)] * len(d.args.defaults)
                kw_defaults = [None if x is None else ast.Constant(None) for x in d.args.kw_defaults]
                d.args.defaults, d.args.kw_defaults = defaults, kw_defaults  # defaults may name globals too
                stub = "def " + d.name + ast.unparse(d.args).join(["(", "): pass"])
                exec(stub, ns)
                want = [p.name for p in inspect.signature(refs[d.name]).parameters.values()]
                got = [p.name for p in inspect.signature(ns[d.name]).parameters.values()]
                assert got == want, f"{gid}: signature {d.name}{tuple(got)} differs from the reference {tuple(want)}"


def _defined_and_read(source: str) -> tuple[set, set]:
    """Top-level names a cell binds, and names it reads anywhere (magics and shell lines ignored)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    tree = ast.parse(code)
    defined, read, local = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else local).add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
    for node in tree.body:  # names bound at the top level outlive the cell
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []:
            if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
                defined.add(sub.id)
    return defined, read - local - defined


@pytest.mark.parametrize("assignment,path", NOTEBOOKS, ids=IDS)
def test_no_cell_reads_a_name_only_a_demo_cell_defines(assignment, path):
    """The grader skips demo-only cells (grading/kernel/client.py): nothing that still runs may need them."""
    from grading.kernel.client import is_demo_cell

    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    demo_defs, other_defs = set(), set()
    for c in code:
        (demo_defs if is_demo_cell(c) else other_defs).update(_defined_and_read(c.source)[0])
    only_demo = demo_defs - other_defs
    for c in code:
        if is_demo_cell(c):
            continue
        assert not nbg(c).get("grade") or "demo-only" not in (c.metadata.get("tags") or []), \
            f"a graded cell tagged demo-only: {c.source[:120]!r}"
        needs = _defined_and_read(c.source)[1] & only_demo
        assert not needs, (f"{assignment}: this cell reads {sorted(needs)}, defined only in demo-only cells, "
                           f"which grading skips:\n{c.source[:300]}")


# The graded path of each notebook (demo-only cells skipped) is run by the tests that grade the demo class, which
# hold these two facts for every lesson: the instructor's solutions earn every point (s01_correct) and the
# untouched release, hidden tests included, earns none (s02_blank) (tests/test_grading.py,
# test_demo_class_gets_exactly_its_expected_scores). In live mode, nbval runs every source notebook top to
# bottom (`make test`), and test_no_cell_reads_a_name_only_a_demo_cell_defines above checks statically that
# nothing graded needs a demo-only cell. (Until 2026-11-26 two tests here ran each notebook twice more through
# nbgrader's Validator for the same facts.)
