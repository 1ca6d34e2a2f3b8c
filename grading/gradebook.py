"""nbgrader's two preprocessors that read and write a notebook's grades, one query and one transaction each.

nbgrader's ``SaveAutoGrades`` (autograde) and ``GetGrades`` (feedback) look up each graded cell's row
with its own query (``Gradebook.find_grade`` / ``find_comment``: six joins each) and ``SaveAutoGrades``
commits after every cell: about 25 queries and 15 commits per notebook on lesson 05. The two classes here
do the same per cell, with the notebook's grades and comments read in one query each, and
``SaveAutoGradesOnce`` commits once, at the end, so a submission's automatic grades are written together
or not at all. What they write and read is nbgrader's (the same columns, the same rule for
``needs_manual_grade``, the same "No response." comment, the same metadata and resources); a cell the
gradebook has no row for raises ``MissingEntry``, as ``find_grade`` does.

    c.Autograde.autograde_preprocessors = [..., "grading.gradebook.SaveAutoGradesOnce", ...]
    c.GenerateFeedback.preprocessors = ["grading.gradebook.GetGradesOnce", ...]

(``grading/nbgrader_config.py``; ``tests/test_grading.py`` compares both with nbgrader's own.)
"""
from __future__ import annotations

from nbgrader import utils
from nbgrader.api import BaseCell, Comment, Grade, Gradebook, MissingEntry
from nbgrader.preprocessors import GetGrades, NbGraderPreprocessor, SaveAutoGrades


def notebook_rows(gradebook: Gradebook, notebook: str, assignment: str, student: str):
    """(the submitted notebook, {cell name: its Grade}, {cell name: its Comment})."""
    submitted = gradebook.find_submission_notebook(notebook, assignment, student)
    grades = {name: grade for grade, name in gradebook.db.query(Grade, BaseCell.name)
              .join(BaseCell, BaseCell.id == Grade.cell_id).filter(Grade.notebook_id == submitted.id)}
    comments = {name: comment for comment, name in gradebook.db.query(Comment, BaseCell.name)
                .join(BaseCell, BaseCell.id == Comment.cell_id).filter(Comment.notebook_id == submitted.id)}
    return submitted, grades, comments


def _row(rows: dict, cell, what: str):
    name = cell.metadata["nbgrader"]["grade_id"]
    if name not in rows:
        raise MissingEntry(f"no {what} for the cell {name!r} in the gradebook")
    return rows[name]


class _OneQuery:
    def _open(self, resources) -> Gradebook:
        """The gradebook, open; the caller reads the notebook's rows (:meth:`_read`) inside its ``with`` block, so
        that a failed read still closes it."""
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.student_id = resources["nbgrader"]["student"]
        self.db_url = resources["nbgrader"]["db_url"]
        self.gradebook = Gradebook(self.db_url)
        return self.gradebook

    def _read(self) -> None:
        self._submitted, self._grades, self._comments = notebook_rows(
            self.gradebook, self.notebook_id, self.assignment_id, self.student_id)


class SaveAutoGradesOnce(_OneQuery, SaveAutoGrades):
    """nbgrader's ``SaveAutoGrades``: the notebook's rows read once, written in one commit."""

    def preprocess(self, nb, resources):
        with self._open(resources):
            self._read()
            nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)
            self.gradebook.db.commit()
        return nb, resources

    def _add_score(self, cell, resources) -> None:
        grade = _row(self._grades, cell, "grade")
        auto_score, _ = utils.determine_grade(cell, self.log)
        grade.auto_score = auto_score
        # a manual grade given earlier, or no automatic score: the cell needs a look (nbgrader's rule)
        grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None

    def _add_comment(self, cell, resources) -> None:
        comment = _row(self._comments, cell, "comment")
        if cell.metadata.nbgrader.get("checksum", None) == utils.compute_checksum(cell) and not utils.is_task(cell):
            comment.auto_comment = "No response."
        else:
            comment.auto_comment = None


class GetGradesOnce(_OneQuery, GetGrades):
    """nbgrader's ``GetGrades``: the notebook's rows read once."""

    def preprocess(self, nb, resources):
        with self._open(resources):
            self._read()
            nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)
            late_penalty = self._submitted.late_submission_penalty
            if late_penalty is None:
                late_penalty = 0
            else:
                self.log.warning("Late submission penalty: {}".format(late_penalty))
            resources["nbgrader"]["score"] = self._submitted.score - late_penalty
            resources["nbgrader"]["max_score"] = self._submitted.max_score
            resources["nbgrader"]["late_penalty"] = late_penalty
        return nb, resources

    def _get_comment(self, cell, resources) -> None:
        cell.metadata.nbgrader["comment"] = _row(self._comments, cell, "comment").comment

    def _get_score(self, cell, resources) -> None:
        grade = _row(self._grades, cell, "grade")
        cell.metadata.nbgrader["score"] = grade.score
        cell.metadata.nbgrader["points"] = grade.max_score
