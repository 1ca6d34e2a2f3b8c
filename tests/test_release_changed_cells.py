"""A source notebook whose graded cells changed after a class was graded (grading/pipeline.release_assignments).

nbgrader refuses to regenerate such an assignment ("Cannot add or remove cells ... because there are
submissions associated with it"). Found on this project's own machine: `make grade` after lesson 09 gained a
cell crashed with nbgrader's traceback, because the demo class's gradebook of an earlier run held lesson 09.
"""
import os

import pytest

from grading import pipeline
from grading.course import Course

REFUSAL = ("`nbgrader generate_assignment 09_prompt_tuning --force` failed (exit 1):\n[GenerateAssignmentApp | ERROR] "
           "RuntimeError: Cannot add or remove cells for notebook 'prompt_tuning' because there are submissions "
           "associated with it")


def _fake_nbgrader(monkeypatch, refuse_once: str):
    """pipeline.generate_assignments as nbgrader behaves: in order, stopping at the first refusal, which names
    its assignment."""
    calls = []

    def run(assignments):
        for a in assignments:
            calls.append(a)
            if a == refuse_once and calls.count(refuse_once) == 1:
                err = pipeline.GradingError(REFUSAL)
                err.assignment = a
                raise err

    monkeypatch.setattr(pipeline, "generate_assignments", run)
    return calls


def test_the_demo_class_starts_afresh_and_every_assignment_is_released_again(tmp_path, monkeypatch):
    (tmp_path / "gradebook.db").write_text("old")
    (tmp_path / "autograded" / "s01" / "09_prompt_tuning").mkdir(parents=True)
    logged = []
    monkeypatch.setattr(pipeline, "log", logged.append)
    calls = _fake_nbgrader(monkeypatch, "09_prompt_tuning")
    pipeline.release_assignments(Course(str(tmp_path)), ["08_clinical_text", "09_prompt_tuning", "10_proteins"],
                                 use_demo=True)
    assert calls == ["08_clinical_text", "09_prompt_tuning", "08_clinical_text", "09_prompt_tuning", "10_proteins"]
    assert not (tmp_path / "gradebook.db").exists() and not (tmp_path / "autograded").exists()
    assert any("starts afresh" in line and "09_prompt_tuning" in line for line in logged)


def test_a_real_class_gets_a_clear_error_and_keeps_its_gradebook(tmp_path, monkeypatch):
    (tmp_path / "gradebook.db").write_text("grades")
    monkeypatch.setattr(pipeline, "db_url", lambda: f"sqlite:///{tmp_path}/gradebook.db")
    _fake_nbgrader(monkeypatch, "09_prompt_tuning")
    with pytest.raises(pipeline.GradingError, match=r"graded cells of 09_prompt_tuning's source notebook were "
                                                    r"added or removed.*restore.*COURSE_ROOT"):
        pipeline.release_assignments(Course(str(tmp_path)), ["08_clinical_text", "09_prompt_tuning"], use_demo=False)
    assert (tmp_path / "gradebook.db").read_text() == "grades"


def test_other_failures_are_not_mistaken_for_changed_cells(tmp_path, monkeypatch):

    def run(assignments):
        raise pipeline.GradingError("`nbgrader generate_assignment` failed: no such assignment")

    monkeypatch.setattr(pipeline, "generate_assignments", run)
    with pytest.raises(pipeline.GradingError, match="no such assignment"):
        pipeline.release_assignments(Course(str(tmp_path)), ["01_attention"], use_demo=True)


def test_assignments_are_released_in_one_nbgrader_process_that_names_the_one_that_failed(tmp_path, monkeypatch):
    """The real generate_assignments: the releases before a failure are made; the failure names its assignment."""
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    with pytest.raises(pipeline.GradingError) as err:
        pipeline.generate_assignments(["02_masking", "99_no_such_lesson", "04_positional"])
    assert err.value.assignment == "99_no_such_lesson"
    assert "generate_assignment 99_no_such_lesson --force" in str(err.value)
    assert os.path.isfile(tmp_path / "release" / "02_masking" / "masking.ipynb")
    assert not (tmp_path / "release" / "04_positional").exists()
    assert os.listdir(scratch) == [], "left in the temporary folder"
