"""Shared by the bundle tests (tests/test_bundle*.py): the bundles a class meets, built and installed once
per test session (pytest-xdist workers share them through a lock: tests/bundle_student.py)."""
from __future__ import annotations

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


def reads_released(assignment: str, lessons: list[str]) -> bool:
    """True when a code cell of the lesson asks ``course_lib.released(...)`` about one of ``lessons``."""
    import re

    import nbformat

    names = "|".join(re.escape(a) for a in lessons)
    pattern = re.compile(r"released\(\s*[\"'](?:%s)[\"']" % names)
    return any(cell.cell_type == "code" and pattern.search(cell.source)
               for path in bundle.source_notebooks(assignment) for cell in nbformat.read(path, as_version=4).cells)


# The lessons after 06 that run differently once 01-06 are released: the ones whose cells ask
# course_lib.released() about a released lesson (07 and 10 today). The others execute the same code in
# both bundles: the default bundle's run, where no earlier lesson's exercise exists, shows they read none,
# and the partly released bundle only adds such names, so that run covers them.
RELEASED_RERUN = [a for a in LESSONS if a > RELEASED_UP_TO and reads_released(a, PARTLY_RELEASED)]

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
