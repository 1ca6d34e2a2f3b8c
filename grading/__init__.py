"""Instructor tooling around nbgrader: preflight, parallel autograding, demo class, feedback.

Run:  python -m grading grade   (README.md; grading/docs/instructors.md). Installed with course_lib
(pyproject.toml), so a Dask scheduler and its workers import it from any folder
(grading/docs/scale-out.md); never imported by student kernels.
"""
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


def without_iri_grammar() -> None:
    """In this grading process, import jsonschema without its grammar for the "iri" format (rfc3987_syntax,
    which compiles 38 grammars on import, 1-3 s of CPU, when JupyterLab's dependencies installed it; no schema
    nbgrader or nbformat validates uses it). Called before anything imports nbformat, by the grading command,
    its workers and its nbgrader processes; never in a kernel or the warm-kernel template, whose imports stay
    as a student's."""
    sys.modules.setdefault("rfc3987_syntax", None)
