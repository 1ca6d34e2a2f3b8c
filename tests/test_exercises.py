"""Every exercise is tested as its declaration says (``EXERCISES`` at the end of each lesson's checks module,
``course_lib/checks/exercise.py``), parametrised over the registry: adding an exercise adds these tests.

* every right alternative keeps full marks, in the visible and in the hidden test;
* every promise of the reference's docstring has an answer that breaks it, which loses points with a
  message holding the declared words;
* the declared misconceptions are the known wrong answers its checks name, and the hidden test names each one
  and no other;
* lessons 01-07 give each exercise at least three right alternatives (issue 10: another dtype, einsum or a
  loop, another valid formulation);
* the students' edition of the checks ships none of the declared answers (right, breaking, wrong).
"""
import ast
import os

import pytest

from conftest import check_tables
from course_lib.checks import registry
from named import assert_named_alone, assert_promise_broken


def _id(e, fn) -> str:
    return f"{e.assignment[:2]}.{e.name}:{getattr(fn, '__name__', type(fn).__name__)}"


RIGHT = [pytest.param(e, check, r.fn, id=_id(e, r.fn)) for e in registry.exercises() for check in e.checks
         for r in e.right]
BREAKS = [pytest.param(e, check, b, id=f"{e.assignment[:2]}.{e.name}:{b.promise}") for e in registry.exercises()
          for check in e.checks for b in e.breaks]


WRONG = [pytest.param(e, check, w, id=f"{e.assignment[:2]}.{e.name}:{w.name}") for e in registry.exercises()
         for check in e.checks for w in e.misconceptions]


@pytest.mark.parametrize("e, check, w", WRONG)
def test_the_hidden_test_names_every_declared_misconception_and_no_other(e, check, w):
    """(What the visible test names, with each lesson's finer points: tests/test_checks_<topic>.py.)"""
    assert_named_alone(registry.resolve(check), e.answer(w), w.name, hidden=True)


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("e, check, answer", RIGHT)
def test_every_right_alternative_keeps_full_marks(e, check, answer, hidden):
    registry.resolve(check)(answer, hidden=hidden)


@pytest.mark.parametrize("e, check, b", BREAKS)
def test_every_broken_promise_loses_points_with_its_words(e, check, b):
    assert_promise_broken(registry.resolve(check), b.fn, b.promise, b.words, hidden=b.hidden)


@pytest.mark.parametrize("e", registry.exercises(), ids=lambda e: f"{e.assignment}.{e.name}")
def test_every_exercise_declares_its_promises_once(e):
    assert e.breaks, f"{e.assignment}.{e.name}: the declaration lists no promise of the reference's docstring"
    assert len(set(e.promises)) == len(e.promises), f"{e.assignment}.{e.name}: a promise is declared twice"


@pytest.mark.parametrize("e", registry.exercises(), ids=lambda e: f"{e.assignment}.{e.name}")
def test_the_declared_misconceptions_are_the_wrong_answers_its_checks_name(e):
    """The declaration's ``misconceptions`` are exactly the ``WRONG_*`` lists its checks' code names (so the tests
    parametrised over the declarations, tests/test_messages_across_modes.py, run every one the checks can name)."""
    named = [w for qualified in e.checks for table in check_tables(qualified, "WRONG_").values() for w in table]
    assert e.misconceptions, f"{e.assignment}.{e.name}: no known wrong answer declared"
    assert [id(w) for w in e.misconceptions] == [id(w) for w in named], (
        f"{e.assignment}.{e.name}: declared {[w.name for w in e.misconceptions]}, its checks name "
        f"{[w.name for w in named]}")


@pytest.mark.parametrize("e", [e for e in registry.exercises() if e.assignment[:2] <= "07"],
                         ids=lambda e: f"{e.assignment}.{e.name}")
def test_lessons_01_to_07_give_three_right_alternatives(e):
    assert len(e.right) >= 3, f"{e.assignment}.{e.name}: {len(e.right)} right alternatives declared, expected 3"
    assert len({r.fn for r in e.right}) == len(e.right), f"{e.assignment}.{e.name}: an alternative is listed twice"


@pytest.mark.parametrize("topic", sorted({e.module.rsplit(".", 1)[1] for e in registry.exercises()}))
def test_the_students_edition_ships_no_declared_answer(topic):
    """A lesson's declared answers (known wrong ones, right alternatives, promise breakers: near-solutions) live in
    its judge module, course_lib/judge/<topic>.py, which no edition holds; the checks module, which ships as it is,
    declares none and defines none."""
    path = os.path.join(os.path.dirname(registry.__file__), f"{topic}.py")
    with open(path) as fh:
        tree = ast.parse(fh.read())
    assert os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(path)), "judge", f"{topic}.py")), topic
    calls = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)
             and (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) in ("Wrong", "Right", "Breaks")]
    defs = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and n.name.startswith(("_right_", "_breaks_", "_judge_"))]
    assert not calls and not defs, (calls, defs)


def test_a_declaration_says_what_is_missing():
    from course_lib.checks import efficient as C
    from course_lib.checks.exercise import Breaks, Right, declare
    from course_lib.judge import efficient as J

    ok = declare("07_efficient", "elu_feature_map", C.check_elu_feature_map, equivalents=("elu_feature_map_torch",),
                 promises=(Breaks("always > 0", J._breaks_elu_negative, "elu without +1"),),
                 right=(Right(J._right_elu_where),))
    assert ok.reference == "course_lib.efficient.elu_feature_map" and ok.promises == ("always > 0",)
    assert ok.checks == ("course_lib.checks.efficient.check_elu_feature_map",)
    with pytest.raises(TypeError, match=r"expected Breaks\(\.\.\.\) items"):
        declare("07_efficient", "elu_feature_map", C.check_elu_feature_map, promises=("always > 0",))
    with pytest.raises(ValueError, match="needs an answer"):
        declare("07_efficient", "elu_feature_map", C.check_elu_feature_map,
                promises=(Breaks("always > 0", J._breaks_elu_negative, ""),))
    with pytest.raises(ValueError, match="check functions"):
        declare("07_efficient", "elu_feature_map", J._right_elu_where)
    with pytest.raises(KeyError, match="no assignment"):
        declare("13_nothing", "elu_feature_map", C.check_elu_feature_map)
