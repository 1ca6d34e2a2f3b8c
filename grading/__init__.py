"""Instructor tooling around nbgrader: preflight, parallel autograding, demo class, feedback.

Run from the repository root:  python -m grading grade   (see README.md).
This package is not installed and never imported by student kernels.
"""
import os

GRADING_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(GRADING_DIR)
NOTEBOOKS_DIR = os.path.join(REPO_DIR, "notebooks")
