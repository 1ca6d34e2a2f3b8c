"""Lesson 01's small class and its uninterrupted grading on a local Dask cluster, made once per test session and
shared by the files that read it (tests/test_dask.py, tests/test_interrupt.py, tests/test_browser.py; pytest-xdist
workers wait on a lock for the one that makes it: tests/shared_runs.py's pattern).

The class: the release of lesson 01 and three demo students' submissions (correct, blank, one misconception),
placed in submitted/ as an instructor would; s04_crash is left out (its loop costs a whole per-cell limit).
The run: ``python -m grading grade --assignment 01_attention --workers 2 --demo no --engine dask`` (feedback on) in
a course root of its own, once; what it printed, its wall time and the grades it wrote are kept in RUN.json
when it ends, its feedback pages and class report in a copy beside it, so a test that later changes that course
(tests/test_dask.py grades a page by hand) changes nothing another file reads.
"""
from __future__ import annotations

import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from bundle_student import _locked
from shared_runs import copy_lesson01_release, shared_root

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSIGNMENT = "01_attention"
STUDENTS = ("s01_correct", "s02_blank", "s03_misconception")


def env_for(root, tmp, cell_timeout: str = "30", **extra) -> dict:
    env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT=cell_timeout, PYTHONPATH=REPO, TMPDIR=str(tmp))
    env.pop("COURSE_DB_URL", None)
    env.pop("COURSE_DASK_SCHEDULER", None)
    env.update(extra)
    return env


def read_grades(root) -> dict:
    """{student: (score, status)} of lesson 01 in the course's grades.csv (a student counted twice fails)."""
    with open(pathlib.Path(root) / "grades.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT]
    assert len(rows) == len({r["student_id"] for r in rows}), f"a student counted twice: {rows}"
    return {r["student_id"]: (float(r["score"]), r["status"]) for r in rows}


def class_dir(tmp_path_factory) -> pathlib.Path:
    """The release of lesson 01 and the three students' submissions (``<dir>/release``, ``<dir>/submitted``)."""
    base = pathlib.Path(shared_root(tmp_path_factory)) / "lesson01-three-students"
    done = base / "MADE"
    with _locked(str(base) + ".lock"):
        if not done.exists():
            shutil.rmtree(base, ignore_errors=True)
            (base / "tmp").mkdir(parents=True)
            copy_lesson01_release(tmp_path_factory, base)  # the session's one release of lesson 01
            sys.path.insert(0, REPO)
            from grading import demo

            demo.generate(ASSIGNMENT, str(base / "submitted"), release_dir=str(base / "release"))
            shutil.rmtree(base / "submitted" / "s04_crash")
            assert sorted(os.listdir(base / "submitted")) == sorted(STUDENTS)
            done.write_text("")
    return base


def copy_class(class_dir: pathlib.Path, root: pathlib.Path) -> None:
    """A fresh course root holding the class: its submitted/ and release/ (as an instructor places them)."""
    shutil.copytree(class_dir / "submitted", root / "submitted")
    shutil.copytree(class_dir / "release", root / "release")


def pages_of(root: pathlib.Path) -> pathlib.Path:
    """Where :func:`dask_local_run` keeps the feedback pages and class report its run wrote, as it wrote them."""
    return root.parent / (root.name + "-pages")


def dask_local_run(tmp_path_factory) -> dict:
    """The class graded once on a local Dask cluster (the command starts it): {"root", "returncode", "stdout",
    "stderr", "wall", "grades" ({student: [score, status]} as written then), "tmp_left" (what the run left in
    its temporary folder), "pages" (a copy of the ``feedback/`` and ``report/`` it wrote, read by
    tests/test_browser.py)}."""
    base = class_dir(tmp_path_factory)
    root = pathlib.Path(shared_root(tmp_path_factory)) / "lesson01-dask-local"
    done = root / "RUN.json"
    with _locked(str(root) + ".lock"):
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            copy_class(base, root)
            # short: the kernels' IPC socket paths live below it and a Unix socket path has at most 107 bytes
            tmp = tempfile.mkdtemp(prefix="dk-", dir="/tmp")
            try:
                t0 = time.monotonic()
                proc = subprocess.run([sys.executable, "-m", "grading", "grade", "--assignment", ASSIGNMENT,
                                       "--workers", "2", "--demo", "no", "--engine", "dask"], cwd=REPO,
                                      env=env_for(root, tmp), capture_output=True, text=True, timeout=1200)
                wall = time.monotonic() - t0
                left = sorted(os.listdir(tmp))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            grades = read_grades(root) if proc.returncode == 0 else {}
            pages = pages_of(root)
            shutil.rmtree(pages, ignore_errors=True)
            for folder in ("feedback", "report"):  # as the run wrote them (test_dask later grades a page by hand)
                if (root / folder).is_dir():
                    shutil.copytree(root / folder, pages / folder)
            done.write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                                        "wall": wall, "grades": grades, "tmp_left": left}))
    run = json.loads(done.read_text())
    run["root"] = root
    run["pages"] = pages_of(root)
    run["grades"] = {s: tuple(v) for s, v in run["grades"].items()}
    return run
