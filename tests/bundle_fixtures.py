"""Shared by the bundle tests (tests/test_bundle*.py): the bundles a class meets, built and installed once
per test session (pytest-xdist workers share them through a lock: tests/bundle_student.py)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bundle_student  # noqa: E402

from grading import bundle  # noqa: E402

LESSONS = bundle.assignments()
# the partly released bundle: solutions of 01-06 out, run on the lessons after them
RELEASED_UP_TO = "06_bpe"
PARTLY_RELEASED = [a for a in LESSONS if a <= RELEASED_UP_TO]

# Lessons still failing in the bundle at this branch's deadline (other helpers are making lessons
# 02-12 work in the bundle): {(bundle tag, lesson): failing cells}, measured on branch `reg` (main at
# c5e1de9 plus the registry: the equivalents are withheld too). Lesson 09 passed with 01-06 released (it uses
# no earlier lesson) but took 1200 s on the test machine at load 15 on 2 cores; in the default bundle its
# kernel died once after 31 min there (DeadKernelError), so it is left unmarked. strict: the mark goes as soon as
# the lesson passes. The coordinator removes the entries after merging.
KNOWN_FAILING: dict[tuple[str, str], str] = {
    ('default', '02_masking'): 'cells 10, 18, 29, 37: NotImplementedError (a withheld reference)',
    ('default', '03_multihead'): 'cells 16 (multi_head_attention_visible): NotImplementedYet (a visible test: a withheld reference); cells 23, 25: NotImplementedError (a withheld reference); cells 27: NameError (an earlier cell failed)',
    ('default', '04_positional'): 'cells 3, 9, 15, 17, 25, 27: NotImplementedError (a withheld reference)',
    ('default', '05_blocks'): 'cells 15 (encoder_layer_forward_visible): NotImplementedYet (a visible test: a withheld reference); cells 18, 20, 22, 30: NotImplementedError (a withheld reference); cells 31, 33: NameError (an earlier cell failed)',
    ('default', '06_bpe'): 'cells 25, 37, 39, 49: NotImplementedError (a withheld reference); cells 40, 41, 42, 50: NameError (an earlier cell failed)',
    ('default', '07_efficient'): 'cells 3, 16, 26, 28, 34, 36, 38, 42: NotImplementedError (a withheld reference); cells 43, 44, 45: NameError (an earlier cell failed)',
    ('default', '08_clinical_text'): 'cells 23: NotImplementedError (a withheld reference)',
    ('default', '10_proteins'): 'cells 10, 24, 28 (greedy_decode_visible), 31: NotImplementedError (a withheld reference); cells 12, 32: NameError (an earlier cell failed)',
    ('default', '11_read_consensus'): "cells 30, 35: NotImplementedError (a withheld reference); cells 31: KeyError ('cross-entropy'); cells 33: KeyError ('alignment loss'); cells 36: NameError (an earlier cell failed)",
    ('default', '12_long_range_dna'): 'cells 19: NotImplementedError (a withheld reference); cells 21, 22, 28, 30, 32: NameError (an earlier cell failed)',
    ('released-01-06', '07_efficient'): "cells 3, 16, 26, 28, 34, 36, 38, 44: NotImplementedError (a withheld reference); cells 45: KeyError ('linear')",
    ('released-01-06', '10_proteins'): 'cells 31, 32: NotImplementedError (a withheld reference)',
    ('released-01-06', '11_read_consensus'): 'cells 35: NotImplementedError (a withheld reference); cells 36: ValueError '
                                             '(an error rate lies in [0, 1], got np.float64(nan))',
}


def _root(tmp_path_factory) -> str:
    base = tmp_path_factory.getbasetemp()
    # under xdist each worker has its own basetemp below one per-session folder: share that one
    return str(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


def built_bundle(tmp_path_factory, released: list[str]) -> dict:
    return bundle_student.shared_build(_root(tmp_path_factory), released)


def lesson_params(tag: str, lessons: list[str]) -> list:
    out = []
    for a in lessons:
        why = KNOWN_FAILING.get((tag, a))
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(a, marks=marks, id=a))
    return out


def check_lesson(built: dict, assignment: str, work: str) -> None:
    """Zero errors in every cell of the lesson's filled release notebooks (visible tests included)."""
    results = bundle_student.run_lesson(built, assignment, work)
    bad = {nb: errors for nb, errors in results.items() if errors}
    assert results and not bad, "cells that raised in the students' bundle (released: " + \
        (", ".join(built["released"]) or "none") + "):\n" + "\n".join(
            f"{nb} cell {e['cell']} ({e['grade_id'] or 'not graded'}): {e['ename']}: {e['evalue'][:300]}"
            for nb, errors in bad.items() for e in errors)
