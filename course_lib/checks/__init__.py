"""Assertion helpers for graded test cells, one submodule per lesson.

    from course_lib import checks
    checks.attention.check_softmax(softmax)          # visible test
    checks.attention.check_softmax(softmax, hidden=True)  # hidden test, other inputs

Lesson submodules (``checks.attention``, ``checks.masking``, ...) are imported on
first use, so one lesson's checks never slow down or break another's notebook.
The shared machinery (comparison with the reference, named misconceptions,
forbidden calls) lives in :mod:`course_lib.checks.core`.
"""
from __future__ import annotations

import importlib

from course_lib.checks.core import IntegrityError, NotImplementedYet  # noqa: F401


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name == f"{__name__}.{name}":
            raise AttributeError(f"course_lib.checks has no lesson module {name!r}") from None
        raise
