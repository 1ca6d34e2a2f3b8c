"""What a check's message names: the shared assertions of the tests that feed known wrong answers
(tests/test_checks_*.py) and answers that break a docstring promise (the declarations' ``Breaks``,
tests/test_exercises.py).

A message names a misconception only when the student's output shows it (issue 10): each wrong
answer must be named, and no other misconception with it, unless both give the very same output
on every input the check tries (then the message says so: "The same output also fits ...")."""
from __future__ import annotations

import re

import pytest

_NAMED = re.compile(r"likely misconception '([^']+)'")
_ALSO = re.compile(r"The same output also fits ((?:'[^']+'(?:, )?)+)")


def named_in(message: str) -> set[str]:
    """Every misconception a message names."""
    names = set(_NAMED.findall(message))
    for group in _ALSO.findall(message):
        names |= set(re.findall(r"'([^']+)'", group))
    return names


def wrong(table, fn_name: str, name: str | None = None):
    """The known wrong answer of a ``WRONG_*`` list implemented by ``fn_name`` (and named ``name``, where one
    implementation stands for two misconceptions): found by name, so a test does not depend on the list's
    order (issue 34)."""
    from course_lib.checks.exercise import known_wrong

    return known_wrong(table, name, fn_name)


def declared_wrong_answers(assignment: str) -> list:
    """One pytest param (check, wrong) per misconception the exercises of ``assignment`` declare, for each of their
    checks (``course_lib/checks/<topic>.py``, ``EXERCISES``)."""
    from course_lib.checks import registry

    return [pytest.param(registry.resolve(q), w, id=f"{q.rsplit('.', 1)[1]}:{w.name}")
            for e in registry.exercises(assignment) for q in e.checks for w in e.misconceptions]


def assert_named_alone(check, answer, name: str, *, same_output: frozenset = frozenset(), may_pass: bool = False,
                       **kwargs) -> str:
    """``check(answer, **kwargs)`` fails naming ``name`` and nothing else (but the names in
    ``same_output``, wrong answers whose output equals this one's on every input). Returns the message.

    ``may_pass``: a visible test need not catch every wrong answer (the hidden one must), but
    when it fails it names no misconception the answer does not have."""
    try:
        check(answer, **kwargs)
    except AssertionError as err:
        message = str(err)
    else:
        if may_pass:
            return ""
        pytest.fail(f"{name!r}: the check passed this wrong answer")
    names = named_in(message)
    if not may_pass:
        assert name in names, f"{name!r} is not named: {message}"
    assert names - {name} <= set(same_output), f"{name!r}: the message also names {sorted(names - {name})}: {message}"
    return message


def assert_promise_broken(check, wrong, promise: str, words: str, *, hidden: bool = True) -> str:
    """An answer that breaks ``promise`` fails ``check`` with a message containing ``words``."""
    with pytest.raises(AssertionError) as err:
        check(wrong, hidden=hidden)
    assert words in str(err.value), (promise, str(err.value))
    return str(err.value)
