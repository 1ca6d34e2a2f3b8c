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

import functools
import importlib
import os
import re
import textwrap
import traceback

from course_lib.checks.core import IntegrityError, NotImplementedYet  # noqa: F401


_CHECKS_DIR = os.path.dirname(os.path.abspath(__file__))
_CELL_FILE = re.compile(r".*ipykernel_\d+[/\\]\d+\.py$")


def teacher_note(err: BaseException, width: int = 88) -> list[str]:
    """What a student sees for a failed check: where *their* code raised (if it did), then the message.

    No frame from inside ``course_lib.checks`` and no path of the machine: IPython shows
    these lines in place of its traceback (the ``_render_traceback_`` hook), in JupyterLab
    and in the grader's feedback alike. The message is wrapped to ``width`` columns: 88 fit a JupyterLab
    output at 1200 px with the file browser open (about 100 columns; at 100 the browser broke the longest
    lines again, leaving a few characters on a line of their own: tests/test_browser.py).
    """
    lines: list[str] = []
    cause = err.__cause__
    if cause is not None and not isinstance(cause, AssertionError):
        frames = [f for f in traceback.extract_tb(cause.__traceback__)
                  if not os.path.abspath(f.filename).startswith(_CHECKS_DIR + os.sep)]
        for f in frames:
            if _CELL_FILE.match(f.filename) or f.filename.startswith("<"):
                f.filename = "your notebook cell"
        if frames:
            lines.append(f"Your code raised {type(cause).__name__} here:")
            lines += [chunk.rstrip("\n") for chunk in traceback.format_list(frames)]
            lines += [f"{type(cause).__name__}: {cause}", ""]
    text = f"{type(err).__name__}: {err}"
    for par in text.split("\n"):
        lines += textwrap.wrap(par, width=width, subsequent_indent="    ", break_long_words=False,
                               break_on_hyphens=False) or [par]
    return lines


def _as_teacher_note(fn):
    """``fn`` whose failure reads like a teacher's note (:func:`teacher_note`), not the checker's frames."""
    @functools.wraps(fn)
    def check(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 - IPython hides frames that set it
        try:
            if not kwargs.get("hidden", False):
                _integrity_first(fn)
            return fn(*args, **kwargs)
        except AssertionError as err:
            err._render_traceback_ = functools.partial(teacher_note, err)  # IPython's hook
            raise err.with_traceback(None)  # noqa: B904 - the same error, its traceback cut here

    return check


def _integrity_first(fn) -> None:
    """In JupyterLab (live or stored mode, in an IPython kernel), a visible test says first what grading's
    integrity scan will zero (course_lib.checks.scan): the same scan, on the code this kernel ran."""
    from course_lib.checks import lessons, scan, transcript

    if transcript.mode() not in ("live", "stored"):
        return  # grading (record) and the verifier: the grader's own scan decides
    topic = "course_lib." + fn.__module__.rsplit(".", 1)[-1]
    assignment = next((les.assignment for les in lessons.LESSONS if les.module == topic), None)
    note = scan.kernel_note(assignment, fn.__name__.removeprefix("check_")) if assignment else None
    if note:
        raise IntegrityError(note)


def _teach(module):
    """Wrap every public ``check_*`` / ``assert_*`` of a lesson module, once."""
    if not getattr(module, "_teacher_notes", False):
        for attr, obj in list(vars(module).items()):
            if attr.startswith(("check_", "assert_")) and callable(obj) and \
                    getattr(obj, "__module__", None) == module.__name__:
                setattr(module, attr, _as_teacher_note(obj))
        module._teacher_notes = True
    return module


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name == f"{__name__}.{name}":
            raise AttributeError(f"course_lib.checks has no lesson module {name!r}") from None
        raise
    return _teach(module) if name not in ("core", "transcript") else module
