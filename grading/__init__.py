"""Instructor tooling around nbgrader: preflight, parallel autograding, demo class, feedback.

Run from the repository root:  python -m grading grade   (see README.md).
This package is not installed and never imported by student kernels.
"""
import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(PACKAGE_DIR)
NOTEBOOKS_DIR = os.path.join(REPO_DIR, "notebooks")
# The nbgrader course root (release/, submitted/, gradebook.db, ...): this folder,
# unless COURSE_ROOT points elsewhere (the tests grade in a temporary folder).
GRADING_DIR = os.path.abspath(os.environ.get("COURSE_ROOT") or PACKAGE_DIR)
