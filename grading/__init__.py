"""Instructor tooling around nbgrader: preflight, parallel autograding, demo class, feedback.

Run:  python -m grading grade   (README.md; grading/docs/instructors.md). Installed with course_lib
(pyproject.toml), so a Dask scheduler and its workers import it from any folder
(grading/docs/scale-out.md); never imported by student kernels.
"""
import gc
import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(PACKAGE_DIR)
NOTEBOOKS_DIR = os.path.join(REPO_DIR, "notebooks")
# The nbgrader course root (release/, submitted/, gradebook.db, ...): this folder,
# unless COURSE_ROOT points elsewhere (the tests grade in a temporary folder).
GRADING_DIR = os.path.abspath(os.environ.get("COURSE_ROOT") or PACKAGE_DIR)


def db_url() -> str:
    """The gradebook URL exactly as nbgrader_config.py computes it (it follows ``COURSE_ROOT`` and
    ``COURSE_DB_URL``)."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=PACKAGE_DIR).load_config()
    return config.CourseDirectory.db_url


PYTHON_GC = gc.get_threshold()  # Python's own (700, 10, 10): what a kernel runs with
GRADER_GC = (10_000, 10, 10)


def collect_less() -> None:
    """In this grading process, run Python's cyclic garbage collector after 10,000 net allocations instead of
    700 (``gc.set_threshold``): nbgrader, Dask, torch and the checks allocate millions of objects on import that
    live as long as the process, and collecting among them was about 13% of a grading command's own CPU
    (measured on a 2-core machine, lesson 01's demo class: the command's process 4.5 s of CPU, 3.8 s with
    ``gc.disable()``, 3.9 s with this; the whole run with its workers, template and release 18.7 -> 16.8 s).
    Garbage with cycles is still collected, a little later. Never in a kernel: the warm-kernel template collects
    less only while it imports, and forks its kernels with Python's thresholds (:data:`PYTHON_GC`)."""
    gc.set_threshold(*GRADER_GC)


def without_iri_grammar() -> None:
    """In this grading process, import jsonschema without its grammar for the "iri" format (rfc3987_syntax,
    which compiles 38 grammars on import, 1-3 s of CPU, when JupyterLab's dependencies installed it; no schema
    nbgrader or nbformat validates uses it). Called before anything imports nbformat, by the grading command,
    its workers and its nbgrader processes; never in a kernel or the warm-kernel template, whose imports stay
    as a student's."""
    sys.modules.setdefault("rfc3987_syntax", None)
