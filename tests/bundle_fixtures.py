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


def decides_differently(assignment: str, released: list[str]) -> bool:
    """True when a code cell of the lesson asks ``course_lib.released(...)`` something whose answer changes once
    the solutions of ``released`` are out: each condition made of such calls (with ``not``, ``and``, ``or``) is
    evaluated with none released and with ``released``; a call inside anything else counts as a change."""
    import nbformat

    for path in bundle.source_notebooks(assignment):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code" or "released" not in cell.source:
                continue
            try:
                tree = ast.parse(cell.source)
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


# The lessons after 06 that run differently once 01-06 are released: the ones where an answer of
# course_lib.released() changes (10 today: lesson 01's attention is measured; lesson 07 asks about 01 only
# together with 07, unreleased in both bundles, so it takes the same branches). The others execute the same
# code in both bundles: the default bundle's run, where no earlier lesson's exercise exists, shows they read
# none, and the partly released bundle only adds such names, so that run covers them.
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


def check_lesson(built: dict, assignment: str, work: str) -> None:
    """Zero errors in every cell of the lesson's filled release notebooks (visible tests included), run
    under the device audit (tests/device_audit.py: a virtual CUDA device on the CPU), so that the same run
    also shows the lesson runs on a GPU unchanged: a tensor left on the CPU raises as on CUDA."""
    results = bundle_student.run_lesson(built, assignment, work, audit_devices=True)
    bad = {nb: errors for nb, errors in results.items() if errors}
    assert results and not bad, "cells that raised in the students' bundle (released: " + \
        (", ".join(built["released"]) or "none") + "):\n" + "\n".join(
            f"{nb} cell {e['cell']} ({e['grade_id'] or 'not graded'}): {e['ename']}: {e['evalue'][:300]}"
            for nb, errors in bad.items() for e in errors)
