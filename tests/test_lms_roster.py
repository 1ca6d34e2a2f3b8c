"""The roster from the LMS's own gradebook export (issue 60 item 1), and the LMS files and report of the class as
graded (issue 66.3): Canvas's and Moodle's exports as rosters, matched on the column the instructor names, the
export's own assignment headers written back, Canvas's Points Possible never changing an existing assignment, the
maximum of each Moodle grade item given, every roster student in the files, only the assignments given counted.

The export files in tests/lms_exports/ are written by hand in the layout each LMS exports (Canvas: Grades > Export,
with its Points Possible row, read-only score columns and the test student of Student View; Moodle: Grades >
Export > Plain text file, with its profile fields, "Type: name (Real)" items and the download time); the names,
ids and scores in them are made up.
"""
from __future__ import annotations

import csv
import json
import os
import shutil

import pytest

from grading import lms, report

EXPORTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lms_exports")
CANVAS = os.path.join(EXPORTS, "canvas_gradebook_export.csv")
MOODLE = os.path.join(EXPORTS, "moodle_grades_export.csv")


def _rows(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _copy(tmp_path, source, edit=None) -> str:
    text = open(source, encoding="utf-8").read()
    path = tmp_path / os.path.basename(source)
    path.write_text(edit(text) if edit else text, encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- reading the exports
def test_canvas_export_is_a_roster_matched_on_the_sis_login_id_by_default():
    roster = lms.read_roster(CANVAS)
    assert roster.lms == "canvas" and roster.match == "sis_login_id"
    assert sorted(roster) == ["anakamura", "jdoe", "mmuster"], "the test student of Student View is no student"
    assert roster["jdoe"] == {"nbgrader_id": "jdoe", "name": "Doe, Jane", "canvas_id": "48211",
                              "sis_user_id": "2024001", "sis_login_id": "jdoe", "section": "Section A",
                              "moodle_idnumber": "", "email": ""}
    assert roster.columns == {"01_attention": "01_attention (48213)", "Reading quiz 1": "Reading quiz 1 (48219)"}
    assert roster.points == {"01_attention": "9.00", "Reading quiz 1": "5.00"}


@pytest.mark.parametrize("match, ids", [("sis_user_id", ["2024001", "2024002", "2024005"]),
                                        ("canvas_id", ["48211", "48212", "48215"])])
def test_canvas_export_matched_on_the_column_the_instructor_names(match, ids):
    roster = lms.read_roster(CANVAS, match)
    assert sorted(roster) == ids and roster.match == match


def test_a_canvas_student_without_the_matching_id_is_an_error_naming_them(tmp_path):
    path = _copy(tmp_path, CANVAS, lambda t: t.replace(",2024005,anakamura,", ",2024005,,"))
    with pytest.raises(lms.RosterError, match=r"1 student\(s\) of the Canvas export have no SIS Login ID "
                                              r"\(--roster-match sis_login_id.*Nakamura, Aiko \(line 5\)"):
        lms.read_roster(path)
    assert sorted(lms.read_roster(path, "sis_user_id")) == ["2024001", "2024002", "2024005"]


def test_two_students_with_one_id_and_a_match_the_export_has_not_are_errors(tmp_path):
    path = _copy(tmp_path, CANVAS, lambda t: t.replace("mmuster", "jdoe"))
    with pytest.raises(lms.RosterError, match="Mustermann, Max has the SIS Login ID 'jdoe' of Doe, Jane"):
        lms.read_roster(path)
    with pytest.raises(lms.RosterError, match=r"--roster-match email: .* Canvas's gradebook export"):
        lms.read_roster(CANVAS, "email")
    with pytest.raises(lms.RosterError, match="--roster-match is for an LMS's gradebook export"):
        lms.read_roster(os.path.join(os.path.dirname(EXPORTS), "..", "grading", "demo", "roster.csv"), "email")


def test_moodle_export_is_a_roster_matched_on_the_id_number_or_the_email():
    roster = lms.read_roster(MOODLE)
    assert roster.lms == "moodle" and sorted(roster) == ["2024001", "2024002", "2024005"]
    assert roster["2024001"]["name"] == "Doe, Jane" and roster["2024001"]["email"] == "jane.doe@example.edu"
    assert roster.columns["01_attention"] == "Assignment: 01_attention (Real)"
    assert roster.columns["Reading quiz 1"] == "Quiz: Reading quiz 1 (Real)"
    by_email = lms.read_roster(MOODLE, "email")
    assert sorted(by_email) == ["aiko.nakamura@example.edu", "jane.doe@example.edu", "max.mustermann@example.edu"]


def test_a_moodle_student_without_an_id_number_is_an_error_naming_them(tmp_path):
    path = _copy(tmp_path, MOODLE, lambda t: t.replace("Aiko,Nakamura,2024005", "Aiko,Nakamura,"))
    with pytest.raises(lms.RosterError, match=r"no ID number .*Nakamura, Aiko \(line 4\)"):
        lms.read_roster(path)


def test_a_file_that_is_no_roster_says_what_was_expected(tmp_path):
    path = tmp_path / "grades.csv"
    path.write_text("Name,Score\nJane,3\n")
    with pytest.raises(lms.RosterError, match=r"no 'nbgrader_id' column; .*Canvas's gradebook export .*Moodle's"):
        lms.read_roster(str(path))


# ---------------------------------------------------------------- writing back what the importers read
def _grades():
    """01_attention graded (9 points, autograded), 02_masking a new assignment (16 points); anakamura has
    no submission."""
    points = [("01_attention", 9.0), ("02_masking", 16.0)]
    grades = {("01_attention", "jdoe"): 9.0, ("02_masking", "jdoe"): 12.5, ("01_attention", "mmuster"): 4.0}
    return points, grades


def test_canvas_file_keeps_the_exports_headers_and_points_and_every_student(tmp_path):
    roster = lms.read_roster(CANVAS)
    points, grades = _grades()
    rows = _rows(lms.write_canvas(str(tmp_path / "c.csv"), points, sorted(roster), grades, roster))
    # Canvas's importer: the five student columns, then one column per assignment; "Name (id)" updates
    # that assignment, a header it does not know creates one
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_attention (48213)", "02_masking"]
    # the existing assignment's Points Possible is the export's own (unchanged); the new one gets its maximum
    assert rows[1] == ["Points Possible", "", "", "", "", "9.00", "16"]
    assert rows[2:] == [["Nakamura, Aiko", "48215", "2024005", "anakamura", "Section B", "", ""],
                        ["Doe, Jane", "48211", "2024001", "jdoe", "Section A", "9", "12.5"],
                        ["Mustermann, Max", "48212", "2024002", "mmuster", "Section A", "4", ""]]
    assert all(float(x) >= 0 for r in rows[2:] for x in r[5:] if x), "scores are plain numbers"


def test_canvas_points_that_differ_from_the_existing_assignment_are_an_error(tmp_path):
    roster = lms.read_roster(CANVAS)
    _, grades = _grades()
    with pytest.raises(lms.RosterError, match=r"01_attention \(48213\): 9.00 in Canvas, 11 posted.*set each "
                                              r"assignment's points in Canvas"):
        lms.write_canvas(str(tmp_path / "c.csv"), [("01_attention", 11.0)], sorted(roster), grades, roster)
    assert not (tmp_path / "c.csv").exists()


def test_moodle_file_keeps_the_exports_item_headers_and_gives_each_items_maximum(tmp_path):
    roster = lms.read_roster(MOODLE)
    points, _ = _grades()
    grades = {("01_attention", "2024001"): 9.0, ("02_masking", "2024001"): 12.5}
    rows = _rows(lms.write_moodle(str(tmp_path / "m.csv"), points, sorted(roster), grades, roster))
    assert rows[0] == ["First name", "Last name", "ID number", "Email address", "Assignment: 01_attention (Real)",
                       "02_masking"]
    assert rows[1] == ["Jane", "Doe", "2024001", "jane.doe@example.edu", "9", "12.5"]
    assert [r[2] for r in rows[1:]] == ["2024001", "2024002", "2024005"], "every student of the export"
    items = _rows(lms.write_moodle_items(str(tmp_path / "items.csv"), points, roster))
    assert items == [list(lms.MOODLE_ITEMS_HEADER), ["Assignment: 01_attention (Real)", "01_attention", "9", "yes"],
                     ["02_masking", "02_masking", "16", "no"]]


# ---------------------------------------------------------------- the class as graded (issue 66.3)
def _sub(assignment, student, score, top):
    return {"assignment": assignment, "student": student, "score": score, "max_score": top,
            "cells": {"ex_visible": score}, "pending": [], "errors": {}, "seconds": {}, "code": {}}


def _gradebook_data():
    """What collect() reads from a gradebook that holds every lesson released (two here): only 01_attention
    was given to the class."""
    cells = [{"key": "ex_visible", "exercise": "ex", "kind": "visible", "points": 9.0}]
    return {"assignments": [{"name": "01_attention", "max_score": 9.0, "cells": cells, "solutions": []},
                            {"name": "02_masking", "max_score": 16.0, "cells": [], "solutions": []}],
            "students": ["jdoe", "mmuster"],
            "submissions": [_sub("01_attention", "jdoe", 9.0, 9.0), _sub("01_attention", "mmuster", 3.0, 9.0)]}


GRADES_CSV = ("assignment,duedate,timestamp,student_id,last_name,first_name,email,raw_score,late_submission_penalty,"
              "score,max_score,status\n"
              "01_attention,,,jdoe,,,,9.0,0.0,9.0,9.0,graded\n"
              "01_attention,,,linked,,,,0.0,0.0,0.0,9.0,\"not graded: submitted/linked is a symbolic link, not a "
              "folder (fix: replace the link by a copy of the folder it points to)\"\n"
              "01_attention,,,mmuster,,,,3.0,0.0,3.0,9.0,graded\n"
              "01_attention,,,nosub,,,,0.0,0.0,0.0,9.0,not graded: no submission for 01_attention\n")


def test_the_report_and_lms_files_count_the_assignments_given_and_every_student(tmp_path):
    (tmp_path / "grades.csv").write_text(GRADES_CSV)
    shutil.copy(CANVAS, tmp_path / "roster.csv")
    data = _gradebook_data()
    roster_ids = ["anakamura", "jdoe", "linked", "mmuster", "nosub"]
    (tmp_path / "roster.csv").write_text(
        "nbgrader_id,name,canvas_id,sis_user_id,sis_login_id,section,moodle_idnumber,email\n"
        + "".join(f"{s},{s.title()},{100 + i},S-{i},{s},A,S-{i},{s}@example.edu\n" for i, s in enumerate(roster_ids)))
    result = report.build(root=str(tmp_path), data=data)
    numbers = json.loads(open(result["paths"]["json"]).read())
    assert [a["name"] for a in numbers["assignments"]] == ["01_attention"], "only the assignment the class was given"
    below = {b["student"]: b for b in numbers["below_threshold"]}
    assert "jdoe" not in below, "full marks on what was given is 100%, not 9 of 25"
    assert below["mmuster"]["percent"] == pytest.approx(33.3)
    assert numbers["students"] == 5, "every roster student, with a folder or not"
    help_ = numbers["assignments"][0]["needs_help"]
    assert help_["not_submitted"] == ["anakamura", "nosub"], "handed-in work that was not graded is not 'not submitted'"
    assert numbers["not_graded"] == [{"assignment": "01_attention", "student": "linked",
                                      "reason": "submitted/linked is a symbolic link, not a folder",
                                      "fix": "replace the link by a copy of the folder it points to"}]
    assert below["linked"]["missed"] == ["01_attention: not graded"]
    page = open(result["paths"]["html"], encoding="utf-8").read()
    section = page[page.index("<h2>Not graded</h2>"):]
    section = section[:section.index("<h2>", 5)]
    assert "linked" in section and "is a symbolic link" in section and "replace the link" in section
    assert "nosub" not in section and "mmuster" not in section
    canvas = _rows(os.path.join(tmp_path, "report", "canvas_grades.csv"))
    assert canvas[0][5:] == ["01_attention"] and canvas[1][5:] == ["9"], "no column for a lesson nobody was given"
    assert sorted(r[3] for r in canvas[2:]) == roster_ids, "every roster student has a row"
    items = _rows(os.path.join(tmp_path, "report", "moodle_grade_items.csv"))
    assert items[1:] == [["01_attention", "01_attention", "9", "no"]]


def test_without_grades_csv_the_assignments_given_are_those_submitted(tmp_path):
    result = report.build(root=str(tmp_path), data=_gradebook_data(), lms_ids="nbgrader")
    numbers = result["report"]
    assert [a["name"] for a in numbers["assignments"]] == ["01_attention"]
    assert numbers["not_graded"] == [] and "jdoe" not in {b["student"] for b in numbers["below_threshold"]}
    assert _rows(os.path.join(tmp_path, "report", "canvas_grades.csv"))[0][5:] == ["01_attention"]


def test_the_match_comes_from_the_environment_for_every_command(monkeypatch):
    monkeypatch.setenv("COURSE_ROSTER_MATCH", "sis_user_id")
    assert sorted(lms.read_roster(CANVAS)) == ["2024001", "2024002", "2024005"]
    assert sorted(lms.read_roster(CANVAS, "canvas_id")) == ["48211", "48212", "48215"], "the flag wins"
    demo = os.path.join(os.path.dirname(EXPORTS), "..", "grading", "demo", "roster.csv")
    assert "s01_correct" in lms.read_roster(demo), "ignored for this course's own roster"


def test_grading_lists_every_roster_student_and_reports_a_roster_it_cannot_read(tmp_path, monkeypatch, capsys):
    from grading import pipeline
    from grading.course import Course

    course = Course(str(tmp_path))
    assert pipeline.roster_students(course, ) == [], "no roster: the class is the folders"
    shutil.copy(CANVAS, tmp_path / "roster.csv")
    assert pipeline.roster_students(course, ) == ["anakamura", "jdoe", "mmuster"]
    assert pipeline.roster_students(course, use_demo=True) == [], "the demo class is its folders"
    _copy(tmp_path, CANVAS, lambda t: t.replace(",2024005,anakamura,", ",2024005,,"))
    shutil.copy(tmp_path / os.path.basename(CANVAS), tmp_path / "roster.csv")
    assert pipeline.roster_students(course, ) == []
    out = capsys.readouterr().out
    assert "[roster] WARNING:" in out and "Nakamura, Aiko" in out, out
