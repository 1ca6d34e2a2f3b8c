"""The exercise registry (course_lib/checks/registry.py) matches the notebooks and course_lib.

Every function or class a solution cell defines is declared, under the module that holds its
reference; every check a graded test cell calls is declared for the exercise it tests; every
qualified name resolves in the instructor's edition; every public function and class of a
lesson's topic module is exactly one of reference, equivalent, building block.
"""
import ast
import importlib
import os
import inspect
import re

import nbformat
import pytest

from conftest import REPO, check_tables, source_notebooks
from course_lib.checks import registry

_CHECK_CALL = re.compile(r"checks\.(\w+)\.(\w+)\(\s*(\w+)")


def _cells(kind: str):
    """(assignment, grade_id, source) of every solution (kind="solution") or graded test ("grade") cell."""
    for a, path in source_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get(kind) and not (kind == "grade" and meta.get("solution")):
                yield a, meta.get("grade_id"), cell.source


def _defined(source: str) -> list[str]:
    tree = ast.parse(re.sub(r"^[ \t]*[%!].*$", "", source, flags=re.M))
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def test_every_solution_definition_is_declared_under_its_references_module():
    declared = {(e.assignment, e.name): e for e in registry.exercises()}
    seen = set()
    for a, gid, source in _cells("solution"):
        for name in _defined(source):
            assert (a, name) in declared, f"{a} cell {gid} defines {name!r}, which the registry does not declare"
            e = declared[(a, name)]
            assert e.reference.rsplit(".", 1)[1] == name, e
            assert getattr(registry.resolve(e.module), name, None) is not None, \
                f"{e.module} holds no {name!r} (the reference of {a}'s {name})"
            seen.add((a, name))
    assert seen == set(declared), f"declared but defined by no solution cell: {sorted(set(declared) - seen)}"


def test_every_check_a_graded_cell_calls_is_declared_for_its_exercise():
    calls = 0
    for a, gid, source in _cells("grade"):
        for module, check, student in _CHECK_CALL.findall(source):
            e = registry.exercise(a, student)
            assert f"course_lib.checks.{module}.{check}" in e.checks, \
                f"{a} cell {gid} calls checks.{module}.{check}({student}, ...), not declared in {e}"
            calls += 1
    assert calls >= 2 * len(registry.exercises()), "every exercise has a visible and a hidden test cell"


@pytest.mark.parametrize("e", registry.exercises(), ids=lambda e: f"{e.assignment}.{e.name}")
def test_every_qualified_name_resolves_in_the_instructors_edition(e):
    for qual in e.withheld + e.checks:
        assert callable(registry.resolve(qual)), qual
        assert qual.startswith(e.module + ".") or qual in e.checks, \
            f"{qual}: an equivalent lives in the reference's own module ({e.module}) in this registry"
    assert e.assignment in registry.assignments()


def test_lessons_classify_every_public_function_of_their_topic_module():
    for les in registry.LESSONS:
        module = registry.resolve(les.module)
        withheld = {q for e in registry.exercises(les.assignment) for q in e.withheld}
        assert not withheld & set(les.building_blocks), f"{les.assignment}: a building block is also withheld"
        for qual in les.building_blocks:
            registry.resolve(qual)
        public = {f"{les.module}.{n}" for n, obj in vars(module).items()
                  if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                  and obj.__module__ == module.__name__}
        unclassified = public - withheld - set(les.building_blocks)
        assert not unclassified, (f"{les.module}: {sorted(unclassified)} are neither a reference, an equivalent "
                                  f"nor a building block: add them to course_lib/checks/registry.py")


def _top_level(path) -> dict:
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def _hands_on(fn: ast.FunctionDef) -> bool:
    """Is ``fn``'s body its docstring and ``return _solution.<its name>(<its parameters, in order>)``?"""
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return False
    call = body[0].value
    a = fn.args
    positional = [ast.unparse(x) for x in call.args]
    wanted = [x.arg for x in a.posonlyargs + a.args] + ([f"*{a.vararg.arg}"] if a.vararg else [])
    keywords = [(k.arg, ast.unparse(k.value)) for k in call.keywords]
    wanted_kw = [(x.arg, x.arg) for x in a.kwonlyargs] + ([(None, a.kwarg.arg)] if a.kwarg else [])
    return (ast.unparse(call.func) == f"_solution.{fn.name}" and positional == wanted
            and keywords == wanted_kw)


@pytest.mark.parametrize("les", registry.LESSONS, ids=lambda les: les.assignment)
def test_references_hand_on_to_their_lessons_solutions_file(les):
    """Every reference and equivalent is, in its topic module, a signature, a docstring and one line that hands
    the call to ``course_lib/solutions/<topic>.py`` (or, for a whole class, only there, found by the module's
    ``__getattr__``); every function or class of the solutions file is one of them or a private helper. So an
    edition that leaves the file out holds no reference's body, and no edition needs code rewritten."""
    topic = les.module.rsplit(".", 1)[1]
    assert repr(registry.resolve(les.module)._solution) == f"<the solutions of {les.module}>"
    here = _top_level(os.path.join(REPO, "course_lib", f"{topic}.py"))
    there = _top_level(os.path.join(REPO, "course_lib", "solutions", f"{topic}.py"))
    withheld = {q.rsplit(".", 1)[1] for e in registry.exercises(les.assignment) for q in e.withheld}
    for name in sorted(withheld):
        assert name in there, f"{les.module}.{name}: its body is not in course_lib/solutions/{topic}.py"
        if name in here:
            assert isinstance(here[name], ast.FunctionDef) and _hands_on(here[name]), \
                f"{les.module}.{name} does more than hand the call to _solution.{name}"
        else:
            assert isinstance(there[name], ast.ClassDef), f"{les.module}.{name} is missing from its topic module"
            assert getattr(registry.resolve(les.module), name) is getattr(importlib.import_module(
                f"course_lib.solutions.{topic}"), name)
    stray = sorted(n for n in there if n not in withheld and not n.startswith("_"))
    assert not stray, f"course_lib/solutions/{topic}.py: {stray} are neither a reference nor an equivalent"
    twice = sorted(n for n in there if n in here and n not in withheld)
    assert not twice, f"{twice} are defined in both {les.module} and its solutions file"


def test_lookups():
    assert registry.assignments()[0] == "01_attention" and len(registry.assignments()) == 12
    assert registry.exercise("06_bpe", "train_naive").equivalents == (
        "course_lib.bpe.train_fast", "course_lib.bpe.WordBPE", "course_lib.bpe.ByteBPE")
    assert registry.lesson("11_read_consensus").module == "course_lib.consensus"
    everything = registry.withheld()
    assert "reverse_complement" in everything["course_lib.dna"]
    assert "reverse_complement" not in everything["course_lib.consensus"]  # lesson 11's own, released
    assert "course_lib.attention" not in registry.withheld(["01_attention"])
    with pytest.raises(KeyError, match="no assignment"):
        registry.exercises("13_nothing")
    with pytest.raises(KeyError, match="has no exercise"):
        registry.exercise("01_attention", "nothing")
    with pytest.raises(LookupError, match="does not resolve"):
        registry.resolve("course_lib.attention.nothing")


@pytest.mark.parametrize("e", registry.exercises(), ids=lambda e: f"{e.assignment}.{e.name}")
def test_every_name_an_exercise_withholds_is_a_door_its_checks_shut(e):
    """What the editions withhold for an exercise (its reference and equivalents) is, in the repository's open
    edition, forbidden while the student's function runs in each of its checks: a student who calls any of them
    gets an IntegrityError, not the points (an equivalent added to the registry must be added to a FORBIDDEN table
    of its checks)."""
    from course_lib.checks import core

    for qualified in e.checks:
        tables = check_tables(qualified, "FORBIDDEN")
        doors = {p for table in tables.values() for p in core.forbid(*table)}
        missing = [name for name in e.withheld if name not in doors]
        assert tables and not missing, (f"{qualified} shuts no door to {missing} (its tables: "
                                        f"{', '.join(tables) or 'none'}); add them to one")


@pytest.mark.parametrize("les", registry.LESSONS, ids=lambda les: les.assignment)
def test_calling_a_references_body_directly_trips_like_the_reference(les):
    """Where a lesson's solutions file is in the edition (the instructor's, or a released lesson's), an answer
    that calls the body in it (``course_lib.solutions.dna.reverse_complement``) instead of the topic module's
    name is caught the same way: ``core.forbid`` adds the body beside every forbidden reference."""
    from course_lib.checks import core

    topic = les.module.rsplit(".", 1)[1]
    solutions = importlib.import_module(f"course_lib.solutions.{topic}")
    forbidden = {p for e in registry.exercises(les.assignment) for p in core.forbid(*e.withheld)}
    functions = [e.reference for e in registry.exercises(les.assignment)
                 if inspect.isfunction(getattr(solutions, e.reference.rsplit(".", 1)[1]))]
    assert functions
    for ref in functions:
        name = ref.rsplit(".", 1)[1]
        assert f"course_lib.solutions.{topic}.{name}" in forbidden
        with pytest.raises(core.IntegrityError, match=f"reference implementation .*course_lib.solutions.{topic}"):
            with core.forbidden_calls(forbidden, name):
                getattr(solutions, name)(*[None] * 8)
