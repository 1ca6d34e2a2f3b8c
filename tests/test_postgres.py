"""The gradebook on PostgreSQL: the demo class of lesson 01 graded by 2 workers gets the same grades as on SQLite
(the session's SQLite run of the whole demo class, tests/shared_runs.py ``demo_class``: lesson 01's rows).

A real PostgreSQL server runs on loopback for this module (tests/pg.py: found, or installed
with apt-get when we are root; the module is skipped, saying why, when neither works).
"""
import csv
import os
import subprocess
import sys

import pytest

import pg
import shared_runs
from conftest import LESSON01_CELL_TIMEOUT as CELL_TIMEOUT, REPO

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ASSIGNMENT = "01_attention"


@pytest.fixture(scope="module")
def pg_server():
    try:
        server = pg.start(dbname="gradebook", fast=True)
    except pg.PostgresUnavailable as err:
        pytest.skip(f"no PostgreSQL server for the gradebook tests: {err}")
    yield server
    server.stop()


def grade(root, db_url):
    env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT=CELL_TIMEOUT, PYTHONPATH=REPO,
               COURSE_DB_URL=db_url)
    args = ["grade", "--assignment", ASSIGNMENT, "--workers", "2", "--demo", "yes"]
    proc = subprocess.run([sys.executable, "-m", "grading", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    with open(root / "demo_class" / "grades.csv", newline="") as fh:  # the demo class's own course
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT}


@pytest.fixture(scope="module")
def pg_grades(pg_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("course-pg")
    return root, grade(root, pg_server.url)


def expected():
    from grading import demo

    return demo.expected_scores()[ASSIGNMENT]


def test_server_is_real_postgresql_on_loopback(pg_server):
    conn = pg_server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT version(), inet_server_addr()::text, current_database()")
            version, addr, db = cur.fetchone()
    finally:
        conn.close()
    assert version.startswith("PostgreSQL"), version
    assert addr.startswith("127.0.0.1"), addr
    assert db == "gradebook"
    assert pg_server.url.startswith("postgresql+psycopg2://"), pg_server.url


def test_demo_class_on_postgres_gets_expected_scores(pg_grades):
    root, grades = pg_grades
    assert grades == pytest.approx(expected(), abs=1e-9)
    assert not (root / "demo_class" / "gradebook.db").exists(), "COURSE_DB_URL was ignored: a SQLite gradebook was created"
    for student in expected():
        folder = root / "demo_class" / "feedback" / student / ASSIGNMENT
        assert folder.is_dir() and any(f.suffix == ".html" for f in folder.iterdir()), folder


def test_grades_are_stored_in_postgres(pg_server, pg_grades):
    """nbgrader's own Gradebook API, reading PostgreSQL directly, has every submission and its score."""
    from nbgrader.api import Gradebook

    _, grades = pg_grades
    with Gradebook(pg_server.url, course_id="transformers-for-medicine") as gb:
        stored = {s.student.id: s.score for s in gb.assignment_submissions(ASSIGNMENT)}
    assert stored == pytest.approx(grades, abs=1e-9)
    conn = pg_server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM submitted_assignment")
            (n,) = cur.fetchone()
    finally:
        conn.close()
    assert n == len(expected())


def test_postgres_and_sqlite_grades_are_identical(pg_grades, tmp_path_factory):
    _, on_pg = pg_grades
    course, run = shared_runs.demo_class(tmp_path_factory)  # the same command on SQLite, every lesson
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (course / "gradebook.db").exists()  # the demo class is a course of its own, on SQLite
    with open(course / "grades.csv", newline="") as fh:
        on_sqlite = {r["student_id"]: float(r["score"]) for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT}
    assert set(on_pg) == set(expected()) and set(on_pg) <= set(on_sqlite), (sorted(on_pg), sorted(on_sqlite))
    assert {s: on_sqlite[s] for s in on_pg} == on_pg
