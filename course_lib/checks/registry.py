"""The exercise registry: every graded exercise of every lesson, and what each lesson releases on purpose.

    from course_lib.checks import registry
    registry.exercises()                      # every graded exercise, lesson order
    registry.exercises("06_bpe")              # one assignment's
    registry.exercise("06_bpe", "train_naive").equivalents
    registry.withheld(["01_attention"])       # qualified names the students' edition leaves out

An exercise is declared once, in its lesson's judge module (``course_lib/judge/<topic>.py``, ``EXERCISES``, one
block per exercise with its hidden cases and declared answers); :mod:`course_lib.checks.exercise` says what a
declaration holds (reference, checks, equivalents, the docstring's promises with an answer that breaks each, right
alternatives). This module gathers them in lesson order.

A :class:`Lesson` lists the ``building_blocks`` its topic module releases on purpose: public
functions and classes that are not a graded answer (lessons may use them freely). Every public
function and class of a lesson's topic module is exactly one of: a reference, an equivalent,
or a building block (``tests/test_registry.py``), so a new function must be classified.
Modules with no graded exercise in them (``training``, ``plotting``, ``pretrained``, ``bio``)
are released whole.

``grading.bundle`` strips, for every assignment whose solutions are not released, exactly the
references and equivalents, in their own modules (never by bare name across modules).
"""
from __future__ import annotations

import functools
import importlib

from course_lib.checks.exercise import Exercise
from course_lib.checks.lessons import LESSONS, Lesson, assignments, lesson  # noqa: F401 (the registry's lookups)
from course_lib.checks.lessons import known as _known

_MODULES = frozenset(les.module for les in LESSONS)


# ---------------------------------------------------------------- lookups
def _declaring_module(topic: str):
    """The module that declares a lesson's exercises: its judge module (``course_lib/judge/<topic>.py``)."""
    from course_lib.checks import core

    module = core.judge(f"course_lib.checks.{topic}")
    if module is None:  # an edition: the judge package is not there
        raise LookupError(DECLARATIONS_NOT_SHIPPED)
    return module


DECLARATIONS_NOT_SHIPPED = ("the exercises' declarations and their answers are not shipped in the student edition: "
                            "they are the judge's (course_lib/judge/), which only your instructor's grader holds")


@functools.lru_cache(maxsize=1)
def _gathered() -> tuple[Exercise, ...]:
    """Every lesson checks module's ``EXERCISES``, in lesson order (imported on first use: the checks of a
    lesson are not imported until a lesson or the grader asks)."""
    out: list[Exercise] = []
    for les in LESSONS:
        topic = les.module.rsplit(".", 1)[1]
        declared = _declaring_module(topic).EXERCISES
        stray = [e for e in declared if e.assignment != les.assignment or e.module != les.module]
        if stray:
            raise LookupError(f"the judge's module of {topic} declares exercises of another lesson: {stray}")
        out += declared
    return tuple(out)


def exercises(assignment: str | None = None) -> tuple[Exercise, ...]:
    """Every exercise (lesson order), or those of one assignment."""
    if assignment is None:
        return _gathered()
    _known(assignment)
    return tuple(e for e in _gathered() if e.assignment == assignment)


def exercise(assignment: str, name: str) -> Exercise:
    """The exercise ``name`` of ``assignment``."""
    for e in exercises(assignment):
        if e.name == name:
            return e
    raise KeyError(f"{assignment} has no exercise {name!r}; it has {[e.name for e in exercises(assignment)]}")


def withheld(released: list[str] | tuple[str, ...] | set[str] = ()) -> dict[str, list[str]]:
    """{module: [names]} that the students' edition leaves out when the solutions of ``released`` are out:
    the references and equivalents of every other assignment, each in its own module."""
    for a in released:
        _known(a)
    out: dict[str, list[str]] = {}
    for e in exercises():
        if e.assignment in released:
            continue
        for qual in e.withheld:
            module, name = qual.rsplit(".", 1)
            out.setdefault(module, []).append(name)
    return out


def resolve(qualified: str):
    """The object a qualified name ("course_lib.attention.softmax", or a lesson's module) names, imported."""
    module, _, name = qualified.rpartition(".")
    if qualified in _MODULES:
        return importlib.import_module(qualified)
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise LookupError(f"{qualified!r} does not resolve: {err}") from err
