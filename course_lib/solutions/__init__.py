"""The reference solutions of the graded exercises: one file per lesson topic (``solutions/attention.py`` holds
the bodies of lesson 01's exercises, ``solutions/bpe.py`` lesson 06's).

A topic module keeps each exercise's signature and docstring, and its body hands the call on::

    _solution = solutions.of("course_lib.attention")   # in course_lib/attention.py

    def softmax(x, axis: int = -1) -> np.ndarray:
        \"\"\"Numerically stable softmax along ``axis`` ... \"\"\"
        return _solution.softmax(x, axis)

so notebooks import the topic module for its building blocks and its exercises alike. An edition of course_lib
is a copy: the students' bundle and the grading kernel's leave out the files of this package whose lesson's
solutions are not released (``grading.bundle.write_course_lib``), and a call then raises NotImplementedError
saying so. No code is rewritten to make an edition.

Does NOT cover: hiding anything else (the judge's material is ``course_lib/judge/``, left out whole).
"""
from __future__ import annotations

import importlib

NOT_RELEASED = "the reference solution of this exercise is not released yet: write your own in the notebook"


class _Solutions:
    """The solutions of one topic module, imported when first asked for (the topic module is then complete, so
    the solutions file may import its building blocks from it)."""

    __slots__ = ("_topic", "_module")

    def __init__(self, topic_module: str):
        self._topic = topic_module
        self._module = None

    def __getattr__(self, name: str):
        if self._module is None:
            file = f"{__name__}.{self._topic.rsplit('.', 1)[1]}"
            try:
                self._module = importlib.import_module(file)
            except ModuleNotFoundError as err:
                if err.name != file:
                    raise
                raise NotImplementedError(f"{self._topic}.{name}: {NOT_RELEASED}") from None
        return getattr(self._module, name)

    def __repr__(self) -> str:
        return f"<the solutions of {self._topic}>"


def of(topic_module: str) -> _Solutions:
    """The solutions of ``topic_module`` (``"course_lib.attention"``): ``of("course_lib.attention").softmax`` is
    ``course_lib.solutions.attention.softmax``, or raises NotImplementedError where this edition leaves it out.
    A topic module names itself here rather than passing ``__name__``, so its file run by path (``runpy``) hands
    its calls to the same place."""
    if not topic_module.startswith("course_lib.") or topic_module.count(".") != 1:
        raise ValueError(f"expected a topic module of course_lib such as 'course_lib.attention', got {topic_module!r}")
    return _Solutions(topic_module)
