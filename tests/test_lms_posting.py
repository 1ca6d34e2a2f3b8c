"""What the LMS files post (issue 60 item 1): pending hand-graded cells, missing submissions, ids, formulas."""
import csv

import pytest

from grading import lms

ROSTER = ("nbgrader_id,name,canvas_id,sis_user_id,sis_login_id,section,moodle_idnumber,email\n"
          's1,"Doe, Jane",101,S-1,jdoe,A,S-1,jane@example.edu\n'
          "s2,=HYPERLINK(1),102,S-2,mmu,B,S-2,max@example.edu\n"
          "s3,No Ids,,,nid,C,,\n")


def _data(pending_for=("s1",)):
    cells = [{"key": "ex1", "exercise": "ex1", "kind": "visible", "points": 9.0},
             {"key": "written", "exercise": "written", "kind": "manual", "points": 2.0}]
    subs = [{"assignment": "01_attention", "student": s, "score": score, "max_score": 11.0,
             "cells": {"ex1": score, "written": 0.0}, "pending": ["written"] if s in pending_for else []}
            for s, score in (("s1", 9.0), ("s2", 4.0))]
    return {"assignments": [{"name": "01_attention", "max_score": 11.0, "cells": cells, "solutions": []},
                            {"name": "02_masking", "max_score": 16.0, "cells": [], "solutions": []}],
            "students": ["s1", "s2"], "submissions": subs}


def test_pending_hand_graded_points_post_the_autograded_part_with_its_own_maximum():
    points, grades = lms.postable(_data())
    assert points == [("01_attention", 9.0), ("02_masking", 16.0)]
    assert grades == {("01_attention", "s1"): 9.0, ("01_attention", "s2"): 4.0}
    points, grades = lms.postable(_data(pending_for=()))  # all hand-graded: the whole assignment
    assert points == [("01_attention", 11.0), ("02_masking", 16.0)]


def test_pending_refuse_lists_the_pending_cells():
    with pytest.raises(lms.PendingError, match=r"1 hand-graded cell\(s\) not graded yet.*01_attention s1 written"):
        lms.postable(_data(), pending="refuse")


@pytest.mark.parametrize("missing,cell", [("blank", ""), ("zero", "0"), ("excused", "EX")])
def test_missing_submissions_follow_the_flag(tmp_path, missing, cell):
    (tmp_path / "r.csv").write_text(ROSTER)
    roster = lms.read_roster(str(tmp_path / "r.csv"))
    points, grades = lms.postable(_data())
    rows = list(csv.reader(open(lms.write_canvas(str(tmp_path / "c.csv"), points, ["s1", "s2"], grades, roster,
                                                 missing=missing))))
    assert rows[1] == ["Points Possible", "", "", "", "", "9", "16"]
    assert rows[2][5:] == ["9", cell]
    rows = list(csv.reader(open(lms.write_moodle(str(tmp_path / "m.csv"), points, ["s1", "s2"], grades, roster,
                                                 missing=missing))))
    assert rows[1][4:] == ["9", "" if missing == "excused" else cell]  # Moodle has no excused mark


def test_student_cells_are_neutralised_against_formulas(tmp_path):
    (tmp_path / "r.csv").write_text(ROSTER)
    roster = lms.read_roster(str(tmp_path / "r.csv"))
    points, grades = lms.postable(_data())
    rows = list(csv.reader(open(lms.write_canvas(str(tmp_path / "c.csv"), points, ["s1", "s2"], grades, roster))))
    assert rows[3][0] == "'=HYPERLINK(1)"
    assert [lms.safe(x) for x in ("+x", "-x", "@a", "\tb", "\rc", "ok", "=1+1")] == \
        ["'+x", "'-x", "'@a", "'\tb", "'\rc", "ok", "'=1+1"]


def test_a_roster_row_without_the_lms_id_is_an_error_naming_the_student(tmp_path):
    (tmp_path / "r.csv").write_text(ROSTER)
    roster = lms.read_roster(str(tmp_path / "r.csv"))
    points, grades = lms.postable(_data())
    with pytest.raises(lms.RosterError, match=r"none of the ids Canvas matches on .*No Ids \(s3\)"):
        lms.write_canvas(str(tmp_path / "c.csv"), points, ["s1", "s3"], grades, roster)
    with pytest.raises(lms.RosterError, match=r"none of the ids Moodle matches on .*No Ids \(s3\)"):
        lms.write_moodle(str(tmp_path / "m.csv"), points, ["s1", "s3"], grades, roster)
    assert not (tmp_path / "c.csv").exists()
