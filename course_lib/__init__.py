"""Transformers for Medicine: reference implementations and grading checks.

One module per lesson topic (``attention``, ``masking``, ``multihead``,
``positional``, ``blocks``, ``bpe``, ``efficient``, and the case studies'), ``checks`` for the graded
tests, ``plotting`` for the pictures, ``bio`` for the case studies' data. A graded exercise's signature and
docstring are in its topic module and its body in ``solutions/<topic>.py``, the file an edition leaves out
until that lesson's solutions are released (:mod:`course_lib.solutions`).
Numpy versions teach; torch versions train. Submodules are imported explicitly:
``from course_lib import attention``.
"""
__version__ = "0.1.0"

import json as _json
import os as _os

EDITION_FILE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_edition.json")


def edition() -> dict:
    """Which edition of course_lib this is: the instructor's (the repository: everything in it) or the
    students' (``grading.bundle`` writes ``_edition.json``: {"edition": "students", "released": [...]})."""
    try:
        with open(EDITION_FILE) as fh:
            return _json.load(fh)
    except OSError:
        return {"edition": "instructor", "released": None}


def released(assignment: str) -> bool:
    """Are the solutions of ``assignment`` (e.g. "01_attention") in this edition of course_lib?

    Always True in the instructor's edition; in the students' bundle, True for the assignments
    whose solutions the instructor has released. A demonstration cell that needs an earlier
    lesson's reference checks this and prints a note instead of failing."""
    listed = edition().get("released")
    return True if listed is None else assignment in listed
