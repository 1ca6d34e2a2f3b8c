"""The bundled demo class: four students generated from the release notebooks.

Submissions are generated, never committed, so they cannot go stale:

* ``s01_correct``       every solution cell holds the instructor's solution (from the source)
* ``s02_blank``         the release notebook untouched (stubs raise NotImplementedError)
* ``s03_misconception`` correct, except the cells in the assignment's ``MISCONCEPTION``
* ``s04_crash``         correct, except the cells in ``CRASH`` (raise, or loop forever in lesson 01)

Each assignment has a module ``grading/demo/<assignment>.py`` with ``MISCONCEPTION``,
``CRASH`` (grade_id -> cell source) and ``EXPECTED`` (student -> autograded points).
"""
from __future__ import annotations

import copy
import datetime
import importlib.util
import os
import re
from typing import Dict

import nbformat

from grading import GRADING_DIR, NOTEBOOKS_DIR

DEMO_DIR = os.path.dirname(os.path.abspath(__file__))
STUDENTS = ("s01_correct", "s02_blank", "s03_misconception", "s04_crash")
# the submission time the pipeline gives the demo class: regenerating it writes the same bytes, so a
# resumed run (which compares submissions by content) keeps what was already graded
FIXED_TIMESTAMP = "2026-01-01 00:00:00.000000 UTC"

_SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def load_spec(assignment: str):
    """The demo module of one assignment (MISCONCEPTION, CRASH, EXPECTED)."""
    path = os.path.join(DEMO_DIR, f"{assignment}.py")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no demo class for assignment {assignment!r}: expected {path}")
    spec = importlib.util.spec_from_file_location(f"grading.demo._{assignment}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("MISCONCEPTION", "CRASH", "EXPECTED"):
        if not hasattr(module, name):
            raise ValueError(f"{path} must define {name}")
    missing = set(STUDENTS) - set(module.EXPECTED)
    if missing:
        raise ValueError(f"{path}: EXPECTED lacks scores for {sorted(missing)}")
    return module


def expected_scores() -> Dict[str, Dict[str, float]]:
    """{assignment: {student: expected autograded points}} for every assignment with a demo module."""
    return {a: dict(load_spec(a).EXPECTED) for a in assignments_with_demo()}


def assignments_with_demo() -> list[str]:
    return sorted(f[:-3] for f in os.listdir(DEMO_DIR) if re.match(r"^\d\d_.*\.py$", f))


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def solutions_from_source(source_nb) -> Dict[str, str]:
    """grade_id -> the solution cell's source with the BEGIN/END SOLUTION marker lines removed."""
    out = {}
    for cell in source_nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            out[meta["grade_id"]] = _SOLUTION_MARKERS.sub("", cell.source)
    return out


def build_submission(release_nb, replacements: Dict[str, str]):
    """A copy of the release notebook with the given solution cells replaced."""
    nb = copy.deepcopy(release_nb)
    seen = set()
    for cell in nb.cells:
        gid = _grade_id(cell)
        if gid in replacements:
            cell.source = replacements[gid].strip("\n")
            seen.add(gid)
    unknown = set(replacements) - seen
    if unknown:
        raise ValueError(f"demo replacements name cells that are not in the notebook: {sorted(unknown)}")
    return nb


def generate(assignment: str, submitted_dir: str | None = None, release_dir: str | None = None,
             timestamp: str | None = None) -> list[str]:
    """Write the four demo students' submissions of ``assignment`` into submitted/. Returns the paths.
    ``timestamp``: the submission time written to timestamp.txt (default: now)."""
    spec = load_spec(assignment)
    submitted_dir = submitted_dir or os.path.join(GRADING_DIR, "submitted")
    release_dir = release_dir or os.path.join(GRADING_DIR, "release")
    rel_assignment = os.path.join(release_dir, assignment)
    notebooks = sorted(f for f in os.listdir(rel_assignment) if f.endswith(".ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no release notebook in {rel_assignment}: run generate_assignment first")
    written = []
    timestamp = timestamp or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    for nb_name in notebooks:
        release_nb = nbformat.read(os.path.join(rel_assignment, nb_name), as_version=4)
        source_nb = nbformat.read(os.path.join(NOTEBOOKS_DIR, assignment, nb_name), as_version=4)
        correct = solutions_from_source(source_nb)
        variants = {
            "s01_correct": correct,
            "s02_blank": {},
            "s03_misconception": {**correct, **spec.MISCONCEPTION},
            "s04_crash": {**correct, **spec.CRASH},
        }
        for student, replacements in variants.items():
            dest = os.path.join(submitted_dir, student, assignment)
            os.makedirs(dest, exist_ok=True)
            path = os.path.join(dest, nb_name)
            nbformat.write(build_submission(release_nb, replacements), path)
            with open(os.path.join(dest, "timestamp.txt"), "w") as fh:
                fh.write(timestamp)
            written.append(path)
    return written
