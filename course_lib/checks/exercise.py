"""One graded exercise, declared once, beside its hidden cases and declared answers.

Each lesson's judge module (``course_lib/judge/<topic>.py``) holds its ``EXERCISES``: one :func:`declare` per
exercise, in that exercise's block, which says

* which assignment and which solution-cell name (``name``) it is, and so its reference
  (``course_lib.<topic>.<name>``);
* the check functions its graded cells call (in ``course_lib/checks/<topic>.py``, with their visible cases; a
  check takes its hidden ones from the judge module, ``core.hidden_part``; outputs compare through
  ``core.compare_with_reference``);
* ``misconceptions``: the known wrong answers its checks name (the ``WRONG_*`` list of ``Wrong(name, fn,
  message)`` the check uses: ``tests/test_exercises.py`` holds the two the same); each must get its message
  alone, live, recorded and replayed, and from the bundle's stored values
  (``tests/test_messages_across_modes.py``), and the hidden test must name it and no other
  (``tests/test_exercises.py``). ``wrong_as_answer`` turns a known wrong answer into a student's answer
  where the check compares something else than the function's whole output (lesson 11's ``edit_distance``:
  the wrong answers compute the distance, a student returns (distance, operations));
* ``equivalents``: other ``course_lib.<topic>`` functions that compute the same answer (or the private
  machinery that does the whole computation): withheld from the students' and the kernel's editions with
  the reference, and forbidden while a student's answer runs (``tests/test_registry.py``);
* ``promises``: what the reference's docstring promises, each a :class:`Breaks`: the promise in short, an
  answer that breaks only it, and the words the check's message must then hold;
* ``right``: right alternatives (another dtype, einsum or a loop, another valid formulation), each a
  :class:`Right` that must keep full marks in the visible and the hidden test.

``course_lib.checks.registry`` gathers every judge module's ``EXERCISES`` in lesson order, and the tests are
parametrised over it (``tests/test_exercises.py``): adding an exercise adds its tests. The answers of
``Right`` and ``Breaks`` are near-solutions, as are the known wrong answers of ``Wrong``: they live in the
lesson's judge module (``course_lib/judge/<topic>.py``), which the students' and the kernel's editions leave
out, and are private there (``_right_*``, ``_breaks_*``).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

from course_lib.checks import lessons
from course_lib.checks.core import Wrong


@dataclasses.dataclass(frozen=True)
class Right:
    """A right alternative: it must keep full marks."""

    fn: Callable


@dataclasses.dataclass(frozen=True)
class Breaks:
    """An answer that breaks one docstring promise, and the words the check's message must hold for it.
    ``hidden``: the test that must catch it (the hidden one, which holds the visible cases, unless said)."""

    promise: str
    fn: Callable
    words: str
    hidden: bool = True


@dataclasses.dataclass(frozen=True)
class Exercise:
    assignment: str  # "01_attention": the notebook folder
    name: str  # the name the solution cell defines (and the student writes)
    reference: str  # "course_lib.attention.softmax"
    checks: tuple[str, ...]  # "course_lib.checks.attention.check_softmax", ...
    equivalents: tuple[str, ...] = ()  # withheld with the reference
    misconceptions: tuple[Wrong, ...] = ()  # the known wrong answers its checks name
    breaks: tuple[Breaks, ...] = ()  # the docstring's promises, each with an answer that breaks it
    right: tuple[Right, ...] = ()  # right alternatives
    wrong_as_answer: Callable | None = None  # a known wrong answer's function -> a student's answer

    def answer(self, wrong: Wrong) -> Callable:
        """The known wrong answer ``wrong`` as a student would hand it in."""
        return wrong.fn if self.wrong_as_answer is None else self.wrong_as_answer(wrong.fn)

    @property
    def module(self) -> str:
        """The module that holds the reference: "course_lib.attention"."""
        return self.reference.rsplit(".", 1)[0]

    @property
    def withheld(self) -> tuple[str, ...]:
        return (self.reference,) + self.equivalents

    @property
    def promises(self) -> tuple[str, ...]:
        """What the reference's docstring promises, in short."""
        return tuple(b.promise for b in self.breaks)


def declare(assignment: str, name: str, *checks: Callable, equivalents: tuple[str, ...] = (),
            misconceptions: Iterable[Wrong] = (), promises: tuple[Breaks, ...] = (),
            right: tuple[Right, ...] = (), wrong_as_answer: Callable | None = None) -> Exercise:
    """The exercise ``name`` of ``assignment``, graded by ``checks`` (functions of the lesson's checks module,
    ``course_lib.checks.<topic>``); its reference is ``course_lib.<topic>.<name>``, its ``equivalents`` are
    names in the same module. The topic is the lesson's (``lessons.LESSONS``), so a checks module loaded
    from its file under another name (the students' edition, in a test) declares the same exercises."""
    topic = lessons.lesson(assignment).module.rsplit(".", 1)[1]
    if not checks or not all(callable(fn) and getattr(fn, "__name__", "").startswith("check_") for fn in checks):
        raise ValueError(f"{assignment}.{name}: declare its check functions (check_*), got {checks!r}")
    if len({fn.__module__ for fn in checks}) != 1:
        raise ValueError(f"{assignment}.{name}: the checks must be functions of one module, "
                         f"got {sorted({fn.__module__ for fn in checks})}")
    misconceptions = tuple(misconceptions)
    for kind, items, wanted in (("misconceptions", misconceptions, Wrong), ("promises", promises, Breaks),
                                ("right", right, Right)):
        bad = [x for x in items if not isinstance(x, wanted)]
        if bad:
            raise TypeError(f"{assignment}.{name}: {kind} holds {bad!r}; expected {wanted.__name__}(...) items")
    for item in tuple(promises) + tuple(right):
        if not callable(item.fn) or isinstance(item, Breaks) and not (item.promise and item.words):
            raise ValueError(f"{assignment}.{name}: {item!r} needs an answer (a function) and, for a promise, its "
                             f"text and the words the check's message must hold")
    return Exercise(assignment=assignment, name=name, reference=f"course_lib.{topic}.{name}",
                    checks=tuple(f"course_lib.checks.{topic}.{fn.__name__}" for fn in checks),
                    equivalents=tuple(f"course_lib.{topic}.{e}" for e in equivalents),
                    misconceptions=misconceptions, breaks=tuple(promises), right=tuple(right),
                    wrong_as_answer=wrong_as_answer)


def known_wrong(table, name: str | None = None, fn_name: str | None = None) -> Wrong:
    """The one known wrong answer of a ``WRONG_*`` list named ``name`` and/or implemented by ``fn_name`` (a
    partial's function counts by its own name): found by name, not by list position."""
    def implemented_by(fn) -> str:
        return getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "")

    found = [w for w in table if (name is None or w.name == name)
             and (fn_name is None or implemented_by(w.fn) == fn_name)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} known wrong answers named {name!r} implemented by {fn_name!r} in that list; "
                          f"expected one")
    return found[0]


def wrong_answer(table, name: str, fn_name: str | None = None) -> Callable:
    """The implementation of the known wrong answer named ``name`` (and implemented by ``fn_name``, where a name has
    variants): a promise's breaking answer."""
    return known_wrong(table, name, fn_name).fn
