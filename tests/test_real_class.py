"""A real class handled with care (issue 40, issue 43 items 3, 5, 6), as an instructor meets it.

One course root goes through README's sequence on lesson 01: the demo class first (its own course in
``demo_class/``: `make grade`'s run on a fresh clone, shared by the test session and copied here), then a real
class placed in ``submitted/`` (graded as it is: every file survives byte for byte), a correction copied in with
its old modification time (``--resume`` sees it by content), and one student's regrade (``--student``). The fast
tests check what ``--demo auto`` chooses and the refusals that come before any grading: the question
``--demo yes|no``, the lock of a course another run holds, a read-only gradebook and an unwritable output folder
(each: non-zero exit, the cause named, the previous grades.csv intact).
"""
import csv
import fcntl
import json
import errno
import os
import subprocess
import sys

import nbformat
import pytest

from grading.course import Course

from conftest import LESSON01_CELL_TIMEOUT as CELL_TIMEOUT, REPO, snapshot

ASSIGNMENT = "01_attention"
NOTEBOOK = "attention.ipynb"


def run_grading(args, root, env_extra=None, timeout=1500):
    env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT=CELL_TIMEOUT, PYTHONPATH=REPO)
    env.pop("COURSE_DB_URL", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "grading", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def csv_rows(path):
    with open(path, newline="") as fh:
        return {(r["assignment"], r["student_id"]): r for r in csv.DictReader(fh)}


def notebooks(root):
    """The correct and the blank submission of lesson 01, built from the release the demo run made."""
    from grading import demo

    release = nbformat.read(os.path.join(root, "demo_class", "release", ASSIGNMENT, NOTEBOOK), as_version=4)
    source = nbformat.read(os.path.join(REPO, "notebooks", ASSIGNMENT, NOTEBOOK), as_version=4)
    return (nbformat.writes(demo.build_submission(release, demo.solutions_from_source(source))),
            nbformat.writes(demo.build_submission(release, {})))


def result_json(root, student):
    return os.path.join(root, "logs", "results", ASSIGNMENT, f"{student}.json")


# ====================================================================== refusals before grading (fast)
def place(root, student, text="{}"):
    folder = root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_text(text)


def test_auto_grades_the_demo_in_its_own_course_when_nothing_is_submitted(tmp_path):
    """``--demo auto`` (the default) with nothing in submitted/: the run is the demo class's, in its own course
    (the lock it takes is demo_class/'s), and it creates no submitted/ of the real class. The run stops at its
    first check (a kernel that does not exist), before any grading."""
    proc = run_grading(["grade", "--assignment", ASSIGNMENT, "--kernel", "no-such-kernel"], tmp_path)
    assert proc.returncode == 2 and "no-such-kernel" in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (tmp_path / "demo_class" / ".grading.lock").is_file(), sorted(os.listdir(tmp_path))
    assert not (tmp_path / ".grading.lock").exists() and not (tmp_path / "submitted").exists()


def test_auto_asks_when_submitted_could_be_the_demo_and_deletes_nothing(tmp_path):
    place(tmp_path, "s01_correct")
    place(tmp_path, "dana")
    (tmp_path / "submitted" / ".demo-class").write_text("left by an earlier version\n")
    before = snapshot(tmp_path / "submitted")
    proc = run_grading(["grade", "--assignment", ASSIGNMENT], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--demo yes" in proc.stderr and "--demo no" in proc.stderr and "dana" in proc.stderr, proc.stderr
    assert "s01_correct" in proc.stderr and ".demo-class" in proc.stderr
    assert snapshot(tmp_path / "submitted") == before


def test_a_second_run_is_refused_naming_the_first(tmp_path):
    place(tmp_path, "dana")
    (tmp_path / "grades.csv").write_text("previous grades\n")
    fd = os.open(tmp_path / ".grading.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"424242\n")
        proc = run_grading(["grade", "--assignment", ASSIGNMENT], tmp_path)
    finally:
        os.close(fd)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "another grading run (PID 424242) holds this course" in proc.stderr, proc.stderr
    assert (tmp_path / "grades.csv").read_text() == "previous grades\n"
    assert not (tmp_path / "release").exists() and not (tmp_path / "gradebook.db").exists()


def test_a_lock_left_by_a_dead_run_is_taken_over(tmp_path):
    place(tmp_path, "dana")
    (tmp_path / ".grading.lock").write_text("999999999\n")  # no process holds it
    proc = run_grading(["grade", "--assignment", ASSIGNMENT, "--kernel", "no-such-kernel"], tmp_path)
    assert proc.returncode == 2
    assert "another grading run" not in proc.stderr and "no-such-kernel" in proc.stderr, proc.stderr
    assert (tmp_path / ".grading.lock").read_text() == "", "the lock was not released at the end"


def test_a_read_only_gradebook_stops_the_run_and_keeps_the_grades(tmp_path_factory):
    """(The run is shared with tests/test_class_mess_pages.py: tests/shared_runs.py ``read_only_gradebook``.)"""
    import shared_runs

    root, proc = shared_runs.read_only_gradebook(tmp_path_factory)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "readonly database" in proc.stderr, proc.stderr[-3000:]
    assert (root / "grades.csv").read_text() == "previous grades\n"
    assert not (root / "logs" / "results" / ASSIGNMENT / "dana.json").exists(), "a result (a zero) was recorded"


def test_a_gradebook_that_refuses_the_students_stops_the_run_naming_it(tmp_path):
    """The release writes the gradebook, then adding the class's students fails (a trigger makes the student
    table refuse every row, as a gradebook turned read-only between the two steps would): the run stops with
    the named error "could not write the gradebook", a non-zero exit and the previous grades.csv intact (this
    branch once raised UnboundLocalError: a local list shadowed the ``failures`` module)."""
    import sqlite3

    from nbgrader.api import Gradebook

    place(tmp_path, "dana")
    (tmp_path / "grades.csv").write_text("previous grades\n")
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url):  # nbgrader's own schema, so the run finds its tables
        pass
    with sqlite3.connect(tmp_path / "gradebook.db") as db:
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON student "
                   "BEGIN SELECT RAISE(ABORT, 'attempt to write a readonly database'); END")
    proc = run_grading(["grade", "--assignment", ASSIGNMENT], tmp_path, env_extra={"COURSE_DB_URL": url})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: could not write the gradebook: the gradebook is read-only"), proc.stderr[-3000:]
    assert "UnboundLocalError" not in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / "grades.csv").read_text() == "previous grades\n"
    assert not (tmp_path / "logs" / "results" / ASSIGNMENT / "dana.json").exists(), "a result was recorded"


def test_an_unwritable_output_folder_stops_the_run_naming_it(tmp_path):
    place(tmp_path, "dana")
    (tmp_path / "grades.csv").write_text("previous grades\n")
    (tmp_path / "feedback").write_text("a file where the feedback folder should be\n")
    proc = run_grading(["grade", "--assignment", ASSIGNMENT], tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert f"cannot write {tmp_path / 'feedback'}" in proc.stderr, proc.stderr
    assert (tmp_path / "grades.csv").read_text() == "previous grades\n"
    assert not (tmp_path / "autograded").exists() or not any((tmp_path / "autograded").iterdir())


# ====================================================================== the pieces (unit)
def test_machine_faults_are_named_and_student_text_is_not_one():
    sys.path.insert(0, REPO)
    from grading import failures

    assert "read-only" in failures.machine_fault("sqlite3.OperationalError: attempt to write a readonly database")
    assert "full" in failures.machine_fault("OSError: [Errno 28] No space left on device: '/x'")
    assert failures.machine_fault("ZeroDivisionError: division by zero") is None
    assert failures.machine_fault("PermissionError: [Errno 13] Permission denied: '/etc/passwd'") is None


def test_folder_hash_follows_content_not_time(tmp_path):
    from grading import worker

    (tmp_path / "a.ipynb").write_text("one")
    first = worker.folder_hash(str(tmp_path))
    os.utime(tmp_path / "a.ipynb", (1, 1))
    assert worker.folder_hash(str(tmp_path)) == first
    (tmp_path / "a.ipynb").write_text("two")
    os.utime(tmp_path / "a.ipynb", (1, 1))
    assert worker.folder_hash(str(tmp_path)) != first


def test_findings_fill_the_status_column(tmp_path):
    from grading import pipeline

    statuses = {("06_bpe", "ana"): "not graded: no submission for 06_bpe", ("01_attention", "ana"): "graded"}
    pipeline.apply_findings(statuses, [
        {"student": "ana", "assignment": "06_bpe", "kind": "misnamed", "message": "found 'bpe (1).ipynb'",
         "fix": "rename it to bpe.ipynb"},
        {"student": "ana", "assignment": "01_attention", "kind": "extra", "message": "a second notebook",
         "fix": "none needed"}])
    assert statuses[("06_bpe", "ana")] == "not graded: misnamed: found 'bpe (1).ipynb' (fix: rename it to bpe.ipynb)"
    assert statuses[("01_attention", "ana")].startswith("graded; extra: a second notebook")
    export = tmp_path / "export.csv"
    export.write_text("assignment,student_id,score,max_score\n01_attention,ana,9.0,11.0\n01_attention,demo,3.0,11.0\n"
                      "06_bpe,ana,0.0,18.0\n")
    out = tmp_path / "grades.csv"
    grades = pipeline.write_grades_csv(str(export), ["ana"], ["01_attention", "06_bpe"], statuses, out=str(out))
    assert grades == {("01_attention", "ana"): (9.0, 11.0), ("06_bpe", "ana"): (0.0, 18.0)}
    rows = csv_rows(out)
    assert set(rows) == {("01_attention", "ana"), ("06_bpe", "ana")}
    assert rows[("06_bpe", "ana")]["status"].startswith("not graded: misnamed")
    assert not [p for p in os.listdir(tmp_path) if ".new-" in p]


def test_a_run_of_one_assignment_keeps_the_other_assignments_rows(tmp_path):
    """``grade --assignment 01_attention`` (or with ``--student``) after a run of two lessons: grades.csv keeps
    06_bpe's rows as they were (issue 66.3), for the students still in the class; 01_attention's are new."""
    from grading import pipeline

    out = tmp_path / "grades.csv"
    out.write_text("assignment,student_id,score,max_score,status\n01_attention,ana,3.0,11.0,graded\n"
                   "01_attention,bo,0.0,11.0,graded\n06_bpe,ana,18.0,18.0,graded\n06_bpe,bo,6.0,18.0,graded\n"
                   "06_bpe,gone,1.0,18.0,graded\n")
    export = tmp_path / "export.csv"
    export.write_text("assignment,student_id,score,max_score\n01_attention,ana,9.0,11.0\n01_attention,bo,2.0,11.0\n"
                      "06_bpe,ana,18.0,18.0\n06_bpe,bo,6.0,18.0\n")
    statuses = {("01_attention", "ana"): "graded", ("01_attention", "bo"): "graded"}
    grades = pipeline.write_grades_csv(str(export), ["ana", "bo"], ["01_attention"], statuses, out=str(out),
                                       keep_others=True)
    assert grades == {("01_attention", "ana"): (9.0, 11.0), ("01_attention", "bo"): (2.0, 11.0)}
    rows = csv_rows(out)
    assert set(rows) == {("01_attention", "ana"), ("01_attention", "bo"), ("06_bpe", "ana"), ("06_bpe", "bo")}
    assert rows[("01_attention", "ana")]["score"] == "9.0" and rows[("06_bpe", "bo")]["score"] == "6.0"
    assert [(r["assignment"], r["student_id"]) for r in csv.DictReader(open(out))] == \
        [("01_attention", "ana"), ("01_attention", "bo"), ("06_bpe", "ana"), ("06_bpe", "bo")]
    # without keep_others (a run of the class's every assignment) the file is exactly what was graded
    pipeline.write_grades_csv(str(export), ["ana", "bo"], ["01_attention"], statuses, out=str(out))
    assert set(csv_rows(out)) == {("01_attention", "ana"), ("01_attention", "bo")}


def test_ids_with_pattern_characters_are_refused():
    from grading import pipeline

    for bad in ("al[ei]ce", "a*", "who?"):
        assert "file pattern" in pipeline.id_refusal(bad)
    for good in ("alice", "o'neil", "José", "-dash", "a b"):
        assert pipeline.id_refusal(good) is None


def test_an_earlier_autograded_folder_survives_a_machine_failure(tmp_path):
    from grading import worker

    folder = tmp_path / "autograded" / "ana" / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_text("earlier result")
    backup = worker.set_aside(str(folder))
    assert not folder.exists()
    folder.mkdir()
    (folder / NOTEBOOK).write_text("half writt")  # the failed run's partial output
    worker.put_back(str(folder), backup, failed=True)
    assert (folder / NOTEBOOK).read_text() == "earlier result" and not os.path.exists(backup)
    backup = worker.set_aside(str(folder))
    folder.mkdir()
    (folder / NOTEBOOK).write_text("new result")
    worker.put_back(str(folder), backup, failed=False)
    assert (folder / NOTEBOOK).read_text() == "new result" and not os.path.exists(backup)
    # a worker killed between the two leaves the earlier folder aside: the next run puts it back first
    backup = worker.set_aside(str(folder))
    assert worker.set_aside(str(folder)) == backup and (tmp_path / "autograded" / "ana" / f".{ASSIGNMENT}.previous").is_dir()


# ------------------------------------------------------------- pages for what was not graded, feedback kept
def test_a_submission_not_graded_gets_a_page_saying_why_and_what_to_do(tmp_path, monkeypatch):
    """Issue 40.5: missing, unreadable or misnamed submissions get a feedback page for the student (the
    reason and the fix, escaped), not only a line in the report; graded ones get none from here."""
    from grading import pipeline

    old = tmp_path / "feedback" / "bob" / "01_attention"
    old.mkdir(parents=True)
    (old / "attention.html").write_text("an earlier run's page")
    statuses = {
        ("01_attention", "ana"): "graded",
        ("01_attention", "bob"): "not graded: unreadable: attention.ipynb is not a valid notebook: the JSON ends "
                                 "early, at line 40 (fix: download it again from JupyterLab and regrade)",
        ("06_bpe", "<b>eve</b>"): "not graded: no submission for 06_bpe",
    }
    pages = pipeline.write_not_graded_pages(Course(str(tmp_path)), statuses)
    assert sorted(os.path.relpath(p, tmp_path) for p in pages) == [
        os.path.join("feedback", "<b>eve</b>", "06_bpe", "not-graded.html"),
        os.path.join("feedback", "bob", "01_attention", "not-graded.html")]
    bob = (old / "not-graded.html").read_text()
    assert "the JSON ends early, at line 40" in bob and "What to do:</b> download it again from JupyterLab" in bob
    assert not (old / "attention.html").exists(), "an earlier page with a grade no longer stands"
    eve = (tmp_path / "feedback" / "<b>eve</b>" / "06_bpe" / "not-graded.html").read_text()
    assert "&lt;b&gt;eve&lt;/b&gt;" in eve and "<b>eve</b>" not in eve
    assert not (tmp_path / "feedback" / "ana").exists()


def test_a_feedback_page_that_fails_for_the_machine_leaves_the_earlier_page(tmp_path, monkeypatch):
    """Issue 43.3: the earlier feedback page is set aside before nbgrader writes the new one and put back
    when writing fails (here: the disk is full), so a machine failure never costs it."""
    from grading import worker

    page = tmp_path / "feedback" / "bob" / "01_attention" / "attention.html"
    page.parent.mkdir(parents=True)
    page.write_text("earlier page")

    class Api:  # nbgrader's API as grade_one uses it: a graded notebook, then feedback that hits a full disk
        def autograde(self, assignment, student, force, create):
            folder = tmp_path / "autograded" / student / assignment
            folder.mkdir(parents=True)
            (folder / "attention.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
            return {"success": True, "log": ""}

        def generate_feedback(self, assignment, student, force):
            folder = tmp_path / "feedback" / student / assignment
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "attention.html").write_text("half a page")
            return {"success": False, "error": "OSError: [Errno 28] No space left on device"}

    def full_disk(root, db_url=None):  # the probe's write meets a full disk (its errno, not a log's text)
        return failures.fault_of(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))

    from grading import failures

    monkeypatch.setattr(worker, "probe_machine", full_disk)
    result = worker.grade_one(Course(str(tmp_path)), Api(), "01_attention", "bob")
    assert result["feedback_ok"] is False and result["feedback_fault"].startswith("the disk is full"), result
    assert page.read_text() == "earlier page"
    assert not list(page.parent.parent.glob(".*previous")), "the set-aside copy is back in place, none left over"


# ====================================================================== the sequence (slow; last in the file: under
# pytest-xdist a worker whose shared demo class is still being graded by another waits after the fast tests)
@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """README's sequence in one course root. Its first step, the demo class of every lesson as `make grade` grades
    it on a fresh clone (with the suite's per-cell limit), is graded once per test session (tests/shared_runs.py
    ``demo_class``, ``--demo yes``) and copied into this course's demo_class/; that ``--demo auto`` (`make grade`'s)
    chooses it when nothing is submitted is test_auto_grades_the_demo_in_its_own_course_when_nothing_is_submitted's."""
    import shutil
    import types

    import shared_runs

    demo_root, demo_run = shared_runs.demo_class(tmp_path_factory)
    root = tmp_path_factory.mktemp("course")
    out = {"root": root}
    out["demo"] = types.SimpleNamespace(returncode=demo_run.returncode, stdout=demo_run.stdout, stderr=demo_run.stderr)
    assert out["demo"].returncode == 0, out["demo"].stdout[-3000:] + out["demo"].stderr[-3000:]
    out["submitted_after_demo"] = (demo_root.parent / "submitted").exists()
    shutil.copytree(demo_root, root / "demo_class", symlinks=True)
    out["demo_csv"] = (root / "demo_class" / "grades.csv").read_bytes()
    correct, blank = notebooks(root)
    # the real class, placed after the demo run where README says
    for student, text in (("alice", correct), ("bob", blank), ("al[ei]ce", correct)):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_text(text)
    (root / "submitted" / "alice" / ASSIGNMENT / "notes.txt").write_text("my notes\n")
    out["placed"] = snapshot(root / "submitted")
    out["real"] = run_grading(["grade", "--assignment", ASSIGNMENT, "--workers", "2"], root)
    out["after_real"] = snapshot(root / "submitted")
    out["real_csv"] = csv_rows(root / "grades.csv")
    out["demo_csv_after"] = (root / "demo_class" / "grades.csv").read_bytes()
    # a correction: bob's corrected notebook copied in with the old file's modification time (cp -p)
    bob = root / "submitted" / "bob" / ASSIGNMENT / NOTEBOOK
    old = os.stat(bob)
    bob.write_text(correct)
    os.utime(bob, ns=(old.st_atime_ns, old.st_mtime_ns))
    out["alice_result_mtime"] = os.stat(result_json(root, "alice")).st_mtime_ns
    out["resume"] = run_grading(["grade", "--workers", "2", "--resume"], root)  # no --assignment: the class's
    out["resume_csv"] = csv_rows(root / "grades.csv")
    out["alice_result_mtime_after_resume"] = os.stat(result_json(root, "alice")).st_mtime_ns
    out["bob_result_mtime"] = os.stat(result_json(root, "bob")).st_mtime_ns
    out["regrade"] = run_grading(["grade", "--assignment", ASSIGNMENT, "--student", "alice"], root)
    out["regrade_csv"] = csv_rows(root / "grades.csv")
    out["bob_result_mtime_after_regrade"] = os.stat(result_json(root, "bob")).st_mtime_ns
    out["alice_result_mtime_after_regrade"] = os.stat(result_json(root, "alice")).st_mtime_ns
    return out


@pytest.mark.slow
def test_demo_class_lives_in_its_own_course(course):
    root = course["root"]
    assert (root / "demo_class" / "gradebook.db").is_file()
    assert not course["submitted_after_demo"], "the demo run wrote into the real class's submitted/"
    assert "demo_class" in course["demo"].stdout and "every demo score equals" in course["demo"].stdout


@pytest.mark.slow
def test_a_real_class_placed_after_the_demo_survives_byte_for_byte(course):
    out = course["real"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "grading the class in" in out.stdout and "generated the demo class" not in out.stdout
    assert course["after_real"] == course["placed"], "a file in submitted/ was changed, added or removed"
    assert course["demo_csv_after"] == course["demo_csv"], "grading the real class rewrote the demo's grades"


@pytest.mark.slow
def test_grades_hold_exactly_the_class_graded(course):
    rows = course["real_csv"]
    assert set(rows) == {(ASSIGNMENT, s) for s in ("alice", "bob", "al[ei]ce")}, sorted(rows)
    assert float(rows[(ASSIGNMENT, "alice")]["score"]) == 9.0
    assert float(rows[(ASSIGNMENT, "bob")]["score"]) == 0.0
    assert rows[(ASSIGNMENT, "alice")]["status"] == "graded"
    feedback = sorted(p.name for p in (course["root"] / "feedback").iterdir())
    assert feedback == ["al[ei]ce", "alice", "bob"], feedback
    refused = course["root"] / "feedback" / "al[ei]ce" / ASSIGNMENT
    assert [p.name for p in refused.iterdir()] == ["not-graded.html"], "a refused id gets only the page saying why"
    page = (refused / "not-graded.html").read_text()
    assert "reads as a file pattern" in page and "rename the folder" in page, page
    assert "s01_correct" not in course["real"].stdout


@pytest.mark.slow
def test_an_id_with_pattern_characters_is_refused_by_name_and_harms_no_one(course):
    rows = course["real_csv"]
    status = rows[(ASSIGNMENT, "al[ei]ce")]["status"]
    assert status.startswith("not graded:") and "file pattern" in status and "rename" in status, status
    assert "al[ei]ce" in course["real"].stdout and "file pattern" in course["real"].stdout
    assert json.load(open(result_json(course["root"], "alice")))["autograded"]
    assert not os.path.exists(result_json(course["root"], "al[ei]ce"))


@pytest.mark.slow
def test_resume_sees_a_correction_copied_with_its_old_time(course):
    out = course["resume"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = course["resume_csv"]
    assert float(rows[(ASSIGNMENT, "bob")]["score"]) == 9.0, rows[(ASSIGNMENT, "bob")]
    assert course["alice_result_mtime_after_resume"] == course["alice_result_mtime"], "alice was graded again"
    # every assignment was released, but only the one the class submitted is in grades.csv and the totals
    assert {a for a, _ in rows} == {ASSIGNMENT}, sorted({a for a, _ in rows})
    assert "02_masking" not in out.stdout.split("[release]")[-1].split("\n", 1)[1]


@pytest.mark.slow
def test_one_students_regrade_touches_no_one_else(course):
    out = course["regrade"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "regrading alice: 1 submission(s)" in out.stdout
    assert course["alice_result_mtime_after_regrade"] != course["alice_result_mtime_after_resume"]
    assert course["bob_result_mtime_after_regrade"] == course["bob_result_mtime"]
    rows = course["regrade_csv"]
    assert set(rows) == {(ASSIGNMENT, s) for s in ("alice", "bob", "al[ei]ce")}
    assert float(rows[(ASSIGNMENT, "bob")]["score"]) == 9.0 and float(rows[(ASSIGNMENT, "alice")]["score"]) == 9.0


@pytest.mark.slow
def test_feedback_marks_an_ungraded_written_answer_pending(course):
    html = (course["root"] / "feedback" / "alice" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "pending" in html.lower() and "graded by hand" in html
    assert "Score: 0.0 / 2.0" not in html
