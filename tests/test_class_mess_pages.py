"""Pages and partial regrades of a messy class (issue 66.4): ``--resume`` rewrites a page older than its grade,
a failed feedback step leaves no old score on a page, the page names the copy that holds the work, and a
read-only gradebook is one named line. Fast: the pipeline's pieces on folders built here, and one command that
stops before grading."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import REPO

from grading import feedback, pipeline
from grading.course import Course


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course root with one graded submission (autograded notebook, result, page), as pipeline sees it."""
    graded = tmp_path / "autograded" / "ana" / "01_attention"
    pages = tmp_path / "feedback" / "ana" / "01_attention"
    graded.mkdir(parents=True)
    pages.mkdir(parents=True)
    (tmp_path / "logs" / "results" / "01_attention").mkdir(parents=True)
    (pages / "attention.html").write_text("<p>6 / 11</p>")
    (graded / "attention.ipynb").write_text("{}")
    os.utime(pages / "attention.html", (time.time() - 3600,) * 2)  # the page of an earlier grading
    result = {"assignment": "01_attention", "student": "ana", "autograded": True, "feedback_ok": False}
    (tmp_path / "logs" / "results" / "01_attention" / "ana.json").write_text(json.dumps(result))
    monkeypatch.setattr(pipeline, "_task_done", lambda course, a, s: True)  # graded from the same files
    return tmp_path


def test_resume_grades_again_a_submission_whose_page_is_stale(course):
    task = ("01_attention", "ana")
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=True) == [task], \
        "feedback failed: redo it"
    result = course / "logs" / "results" / "01_attention" / "ana.json"
    result.write_text(json.dumps({"autograded": True, "feedback_ok": True}))
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=True) == [task], \
        "the page is older than the grade"
    os.utime(course / "feedback" / "ana" / "01_attention" / "attention.html", None)  # written after the grade
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=True) == [], "current: nothing to redo"
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=False) == []
    assert pipeline._resumed(Course(str(course)), [task], resume=False, feedback=True) == [task]
    os.remove(course / "feedback" / "ana" / "01_attention" / "attention.html")
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=True) == [task], \
        "a missing page is written"


def test_a_failed_feedback_step_leaves_no_old_score_on_a_page(course):
    page = course / "feedback" / "ana" / "01_attention" / "attention.html"
    assert pipeline._remove_stale_pages(Course(str(course)), [("01_attention", "ana")]) == [str(page)]
    assert not page.exists()
    assert (course / "autograded" / "ana" / "01_attention" / "attention.ipynb").exists()
    page.write_text("current")  # written after the grade: kept
    assert pipeline._remove_stale_pages(Course(str(course)), [("01_attention", "ana")]) == [] and page.exists()


def test_the_page_names_the_copy_that_holds_the_work(tmp_path, monkeypatch):
    import grading
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))  # as a Dask worker's private course root too
    folder = tmp_path / "submitted" / "ana" / "01_attention"
    folder.mkdir(parents=True)
    blank = new_notebook(cells=[new_code_cell("raise NotImplementedError()",
                                              metadata={"nbgrader": {"solution": True, "grade_id": "a"}})])
    work = new_notebook(cells=[new_code_cell("def softmax(x):\n    return x",
                                             metadata={"nbgrader": {"solution": True, "grade_id": "a"}})])
    (folder / "attention.ipynb").write_text(nbformat.writes(blank))
    (folder / "attention-Copy1.ipynb").write_text(nbformat.writes(work))
    resources = {"nbgrader": {"student": "ana", "assignment": "01_attention", "notebook": "attention"}}
    nb, _ = feedback.FeedbackSummary().preprocess(new_notebook(), resources)
    note = nb.cells[0].source
    assert "Your other notebooks" in note and "attention-Copy1.ipynb was not graded" in note, note
    assert "answers filled in&#58; attention-Copy1.ipynb 1, attention.ipynb 0" in note, note
    assert "the work seems to be in attention-Copy1.ipynb" in note and "ask your instructor to grade it again" in note
    os.remove(folder / "attention-Copy1.ipynb")
    nb, _ = feedback.FeedbackSummary().preprocess(new_notebook(), resources)
    assert "other notebooks" not in nb.cells[0].source


def test_a_read_only_gradebook_is_one_named_line(tmp_path_factory):
    """(The run is shared with tests/test_real_class.py: tests/shared_runs.py ``read_only_gradebook``.)"""
    import shared_runs

    _, proc = shared_runs.read_only_gradebook(tmp_path_factory)
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert proc.stderr.strip().count("\n") == 0, f"not one line:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr and "the gradebook is read-only" in proc.stderr, proc.stderr
    assert "readonly database" in proc.stderr and "previous results are unchanged" in proc.stderr


def test_resume_writes_again_a_page_that_shows_another_score_than_the_gradebook(course, monkeypatch):
    """Issue 66.4: a page written after its grading but showing 6/11 while the gradebook holds 9/11 (a hand grade
    given since, a page an earlier run left) is written again by --resume; one showing the gradebook's score is
    kept."""
    task = ("01_attention", "ana")
    (course / "logs" / "results" / "01_attention" / "ana.json").write_text(
        json.dumps({"autograded": True, "feedback_ok": True}))
    page = course / "feedback" / "ana" / "01_attention" / "attention.html"
    page.write_text("<h4>attention (Score: 6.0 / 11.0)</h4>")  # nbgrader's feedback template's title line
    assert pipeline.page_score(str(page)) == (6.0, 11.0)
    holds = {}
    monkeypatch.setattr(pipeline, "_gradebook_scores", lambda tasks: {(*t, "attention"): holds[t] for t in tasks})
    holds[task] = (9.0, 11.0)
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=True) == [task], \
        "6/11 on the page, 9/11 in the gradebook"
    holds[task] = (6.0, 11.0)
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=True) == [], \
        "the page shows the gradebook's score"
    holds[task] = (6.0, 12.0)
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=True) == [task], "another maximum"
    page.write_text("<p>no score line</p>")
    assert pipeline.page_score(str(page)) is None
    assert pipeline._resumed(Course(str(course)), [task], resume=True, feedback=True) == [], \
        "nothing to compare: the dates decide"
