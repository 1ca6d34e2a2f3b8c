"""What several test files need and is expensive to make, made once per test session and shared by its processes
(pytest-xdist workers wait on a lock for the one that makes it): the folder it lives in, the demo class graded
by the command instructors run, lesson 01's release, lesson 01's hostile and messy class graded together, and
one run refused by a read-only gradebook.

Each run's result is written to a JSON file in or beside what it made, so every process reads the same run: the
run is made by whichever test first needs it, and the others wait on its lock.

What each shared run replaced (issue 62): ``lesson01_class`` is the one class run of tests/test_adversarial.py
(it was that file's own) and of tests/test_class_mess.py (whose messy class had a run, a release and a course root
of its own); ``lesson01_release`` is the release both files' fast tests scan against (each file made its own), copied
into the course roots of ``lesson01_class``, of tests/lesson01_runs.py's class and of the lesson 01 courses of
tests/test_collect.py, tests/test_browser.py and tests/test_dask_tls.py (each ran ``nbgrader generate_assignment``
again);
``demo_class`` is also the first step of tests/test_real_class.py's sequence (copied into its course; it graded
lesson 01's demo class itself) and holds the releases and gradebook that tests/test_class_mess.py's scan of every
lesson's demo students reads (it generated every release again); ``read_only_gradebook`` is the one refused run
of tests/test_real_class.py and tests/test_class_mess_pages.py (each made the same run); ``lesson01_site`` is
the one execution and build of lesson 01's rendered course, read by tests/test_site.py (which built it in its own
process) and tests/test_browser.py (which built the students' variant again with the command). Separate runs stay where
the behaviour is the run itself: test_real_class's real class, ``--resume`` and ``--student`` in one course."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

from bundle_student import _locked

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shared_root(tmp_path_factory) -> str:
    """A folder shared by every process of the test session (what is built once for all of them goes there)."""
    base = tmp_path_factory.getbasetemp()
    # under xdist each worker has its own basetemp below one per-session folder: share that one
    return str(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


def demo_class(tmp_path_factory) -> tuple[Path, types.SimpleNamespace]:
    """The whole demo class graded once, as `make grade` grades it (``python -m grading grade --demo yes
    --workers 2``, feedback and the report included) in a course root of its own: (the demo course's folder,
    the command's returncode, stdout and stderr). The tests that read it must leave its grades as they are.
    One setting differs from `make grade`'s: the per-cell limit is the suite's (tests/conftest.py
    ``LESSON01_CELL_TIMEOUT``, 8 s, not 30 s), which only the crash student's endless loop reaches."""
    from conftest import LESSON01_CELL_TIMEOUT

    root = Path(shared_root(tmp_path_factory)) / "demo-class-graded"
    done = root / "RUN.json"
    with _locked(str(root) + ".lock"):
        if not done.exists():
            root.mkdir(exist_ok=True)
            env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT=LESSON01_CELL_TIMEOUT, PYTHONPATH=REPO)
            proc = subprocess.run([sys.executable, "-m", "grading", "grade", "--demo", "yes", "--workers", "2"],
                                  cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
            done.write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}))
    run = json.loads(done.read_text())
    return root / "demo_class", types.SimpleNamespace(**run)


def lesson01_release(tmp_path_factory):
    """Lesson 01's release and its tests in a gradebook (``nbgrader generate_assignment``, about 5 s), made once:
    the context the fast tests of tests/test_adversarial.py and tests/test_class_mess.py build submissions from
    and scan against (``adversarial.classrun.Context``). The tests only read it."""
    from adversarial import classrun

    root = Path(shared_root(tmp_path_factory)) / "lesson01-release"
    done = root / "READY"
    with _locked(str(root) + ".lock"):
        if not done.exists():
            root.mkdir(exist_ok=True)
            classrun.generate_release(str(root))
            done.write_text("made\n")
    return classrun.context(str(root))


def copy_lesson01_release(tmp_path_factory, root: Path):
    """Lesson 01's release and gradebook (``lesson01_release``, made once) copied into the course root ``root``:
    what ``nbgrader generate_assignment`` would write there (an nbgrader process and its ``alembic`` process,
    about 7 s of CPU each time). Returns the root's ``classrun.Context``."""
    from adversarial import classrun

    made = Path(lesson01_release(tmp_path_factory).root)
    shutil.copytree(made / "release", root / "release")
    shutil.copy2(made / "gradebook.db", root / "gradebook.db")
    return classrun.context(str(root))


def lesson01_class(tmp_path_factory) -> types.SimpleNamespace:
    """Lesson 01's class graded once, on the default engine (``--engine auto``: Dask on a LocalCluster of the 2
    workers where Dask is installed, as `make test` installs it) and a SQLite gradebook, by
    ``python -m grading grade --demo no --assignment 01_attention --workers 2`` (``adversarial.classrun.grade``:
    COURSE_CELL_TIMEOUT=10, the grader's environment holding credentials, a TMPDIR of its own): the four demo
    students, every hostile submission of ``tests/adversarial/cases.py`` and the messy class of
    ``tests/adversarial/messy.py`` side by side (its control is the demo's ``s01_correct``). Returns
    ``outcome`` (``classrun.Outcome``), ``guarded_before`` / ``guarded_after`` (the digests of the repository's files
    a submission aims at, ``classrun.digest``), ``submitted_before`` (``messy.tree_digest`` of the messy students'
    folders before grading) and ``ctx`` (the course root's ``classrun.Context``). The tests only read it."""
    from adversarial import classrun, messy
    from adversarial.cases import CASES

    root = Path(shared_root(tmp_path_factory)) / "lesson01-class"
    done = Path(str(root) + ".json")  # beside the course root: nothing of the run's own in it
    with _locked(str(root) + ".lock"):
        if not done.exists():
            root.mkdir(exist_ok=True)
            before = classrun.digest()
            ctx = copy_lesson01_release(tmp_path_factory, root)
            classrun.write_class(ctx)
            messy.place_class(ctx, control_present=True)
            submitted = messy.tree_digest(root / "submitted", only=messy.STUDENTS)
            outcome = classrun.grade(str(root), workers=2, timeout=1500)
            print(f"\n[lesson01_class] grade exited {outcome.returncode} after {outcome.seconds:.0f} s "
                  f"({len(CASES)} hostile and honest submissions and {len(messy.STUDENTS) - 1} messy ones, 2 workers, "
                  f"COURSE_CELL_TIMEOUT={classrun.CELL_TIMEOUT})")
            done.write_text(json.dumps({"outcome": dataclasses.asdict(outcome), "guarded_before": before,
                                        "guarded_after": classrun.digest(), "submitted_before": submitted}))
    run = json.loads(done.read_text())
    fields = dict(run["outcome"], grades={s: tuple(v) for s, v in run["outcome"]["grades"].items()})
    return types.SimpleNamespace(outcome=classrun.Outcome(**fields), guarded_before=run["guarded_before"],
                                 guarded_after=run["guarded_after"], ctx=classrun.context(str(root)),
                                 submitted_before={k: tuple(v) for k, v in run["submitted_before"].items()})


def read_only_gradebook(tmp_path_factory) -> tuple[Path, types.SimpleNamespace]:
    """One ``python -m grading grade --assignment 01_attention`` on a course whose gradebook is read-only (a SQLite
    URL with ``mode=ro``, read-only even for root), with one student and an earlier grades.csv ("previous
    grades"): (the course root, the command's returncode, stdout and stderr). Made once for
    tests/test_real_class.py (the run stops, the grades stay) and tests/test_class_mess_pages.py (one named line)."""
    import sqlite3

    root = Path(shared_root(tmp_path_factory)) / "read-only-gradebook"
    done = Path(str(root) + ".json")
    with _locked(str(root) + ".lock"):
        if not done.exists():
            folder = root / "submitted" / "dana" / "01_attention"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "attention.ipynb").write_text("{}")
            sqlite3.connect(root / "gradebook.db").close()
            (root / "grades.csv").write_text("previous grades\n")
            url = f"sqlite:///file:{root / 'gradebook.db'}?mode=ro&uri=true"
            env = dict(os.environ, COURSE_ROOT=str(root), PYTHONPATH=REPO, COURSE_DB_URL=url)
            proc = subprocess.run([sys.executable, "-m", "grading", "grade", "--assignment", "01_attention"],
                                  cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
            done.write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}))
    return root, types.SimpleNamespace(**json.loads(done.read_text()))


def lesson01_site(tmp_path_factory) -> tuple[Path, types.SimpleNamespace]:
    """Lesson 01's rendered course in both variants, built once by the command (``python -m grading site
    --lessons 01 --out <folder>``: one execution of the notebook, two Sphinx builds): (the site folder, the command's
    returncode, stdout and stderr). The folder holds ``instructor/html``, ``students/html`` and the execution
    cache (``.cache``). The tests only read it; a test that builds again builds a copy."""
    root = Path(shared_root(tmp_path_factory)) / "lesson01-site"
    done = Path(str(root) + ".json")
    with _locked(str(root) + ".lock"):
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            proc = subprocess.run([sys.executable, "-m", "grading", "site", "--lessons", "01", "--out", str(root)],
                                  cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), capture_output=True, text=True,
                                  timeout=1500)
            done.write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}))
    return root, types.SimpleNamespace(**json.loads(done.read_text()))
