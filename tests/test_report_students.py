"""The students behind each misconception, pending hand grading never counted as 0, and the plots
(issue 60 items 1 (the report's part), 3 and 4), on a small class given as data."""
import csv
import json
import re
import urllib.parse

import pytest

from grading import report

CELLS = [{"key": "scale_visible", "exercise": "scale", "kind": "visible", "points": 2.0},
         {"key": "scale_hidden", "exercise": "scale", "kind": "hidden", "points": 2.0},
         {"key": "mask_visible", "exercise": "mask", "kind": "visible", "points": 5.0},
         {"key": "why", "exercise": "why", "kind": "manual", "points": 2.0}]


def _sub(student, scores, errors=None, pending=("why",)):
    return {"assignment": "01_attention", "student": student, "score": sum(scores.values()), "max_score": 11.0,
            "cells": scores, "pending": list(pending), "errors": errors or {}, "seconds": {}, "code": {}}


def _class():
    full = {"scale_visible": 2.0, "scale_hidden": 2.0, "mask_visible": 5.0, "why": 0.0}
    forgot = {"scale_visible": ["AssertionError", "scale: likely misconception 'missing scaling': s2_forgot's "
                                                  "scores are sqrt(d_k) too large"]}
    return {"students": ["s1_perfect", "s2_forgot", "s3_forgot_too", "s4_absent"],
            "assignments": [{"name": "01_attention", "max_score": 11.0, "cells": CELLS, "solutions": []}],
            "submissions": [
                _sub("s1_perfect", full),
                _sub("s2_forgot", {**full, "scale_visible": 0.0}, forgot),
                _sub("s3_forgot_too", {**full, "scale_visible": 0.0, "scale_hidden": 0.0},
                     {"scale_visible": forgot["scale_visible"],
                      "scale_hidden": ["AssertionError", "scale: likely misconception 'missing scaling': hidden"],
                      "mask_visible": ["AssertionError", "mask: likely misconception 'mask after softmax': x"]}
                     ) | {"cells": {**full, "scale_visible": 0.0, "scale_hidden": 0.0, "mask_visible": 0.0},
                          "score": 2.0}]}


EMAILS = {"s2_forgot": "forgot@example.edu", "s3_forgot_too": "too@example.edu"}


def test_each_misconception_lists_its_students_with_a_csv_and_a_mailto(tmp_path):
    result = report.write(str(tmp_path), _class(), threshold=50, emails=EMAILS)
    numbers = json.loads((tmp_path / "report.json").read_text())
    assert numbers == result["report"]
    ex = {e["name"]: e for e in numbers["assignments"][0]["exercises"]}
    (scaling,) = ex["scale"]["misconceptions"]
    assert scaling["student_ids"] == ["s2_forgot", "s3_forgot_too"] and scaling["students"] == 2
    assert "s2_forgot" not in scaling["example"], "the example message stays anonymised"
    query = urllib.parse.parse_qs(scaling["mailto"].split("?", 1)[1])
    assert query["bcc"] == ["forgot@example.edu,too@example.edu"]
    assert query["subject"] == ["01_attention, scale: missing scaling"]
    rows = list(csv.reader(open(tmp_path / "misconceptions.csv", newline="")))
    assert rows[0] == ["assignment", "exercise", "misconception", "students", "student_ids", "emails"]
    assert ["01_attention", "scale", "missing scaling", "2", "s2_forgot s3_forgot_too",
            "forgot@example.edu too@example.edu"] in rows
    assert ["01_attention", "mask", "mask after softmax", "1", "s3_forgot_too", "too@example.edu"] in rows
    # each student's own row lists their misconceptions
    assert numbers["student_misconceptions"]["s3_forgot_too"] == [
        {"assignment": "01_attention", "exercise": "scale", "misconception": "missing scaling"},
        {"assignment": "01_attention", "exercise": "mask", "misconception": "mask after softmax"}]
    assert "s1_perfect" not in numbers["student_misconceptions"]
    page = (tmp_path / "index.html").read_text().replace("'", '"')
    section = page[page.index("<h2>Students and their misconceptions"):page.index("<h2>Similar solutions")]
    row = re.search(r"<tr><td>s3_forgot_too</td><td>(.*?)</td></tr>", section).group(1)
    assert "missing scaling" in row and "mask after softmax" in row
    table = page[page.index("<h2>01_attention"):]
    assert "s2_forgot, s3_forgot_too" in table
    assert 'href="mailto:?bcc=forgot%40example.edu%2Ctoo%40example.edu' in table


def test_without_a_roster_there_is_no_mailto_but_the_ids_are_there(tmp_path):
    numbers = report.write(str(tmp_path), _class(), threshold=50)["report"]
    (scaling,) = numbers["assignments"][0]["exercises"][0]["misconceptions"]
    assert scaling["mailto"] is None and scaling["student_ids"] == ["s2_forgot", "s3_forgot_too"]
    assert "mailto:" not in (tmp_path / "index.html").read_text()


def test_pending_hand_grading_is_never_counted_as_zero():
    numbers = report.analyse(_class(), threshold=50)
    (a,) = numbers["assignments"]
    assert (a["max_score"], a["graded_max"], a["pending_submissions"]) == (11.0, 9.0, 3)
    # the perfect autograded notebook is 100 %, not 9 of 11 (82 %)
    # s1_perfect 9/9 = 100 %, s2_forgot 7/9 = 77.8 %, s3_forgot_too 2/9 = 22.2 %
    assert a["histogram"]["counts"] == [0, 0, 1, 0, 0, 0, 0, 1, 0, 1]
    assert a["median_percent"] == 77.8
    below = {r["student"]: r["percent"] for r in a["needs_help"]["below"]}
    assert below == {"s3_forgot_too": 22.2}, below
    why = next(e for e in a["exercises"] if e["name"] == "why")
    assert why["manual_passed"] is None and why["manual_pending"] == 3
    assert not any("why" in m for r in numbers["below_threshold"] for m in r["missed"])
    page = report.render(numbers, {})
    assert "9 autograded; 2 hand-graded pending (3 submission(s))" in page
    assert "Students below" not in page, "the old section is gone: who needs help says it first"


def _exercise(name, passed, of):
    share = {"students": passed, "of": of, "share": round(passed / of, 3)}
    return {"name": name, "visible_passed": share, "hidden_passed": None, "all_tests_passed": share}


@pytest.mark.parametrize("of", [4, 1000])
def test_the_exercise_plot_is_sorted_bars_with_values_and_labelled_axes(monkeypatch, of):
    """The same figure, readable, at 4 and at 1,000 students: one bar per exercise, weakest on top, each
    labelled with its percent and count; the figure's size depends on the exercises, not the students."""
    monkeypatch.setattr(report, "_png", lambda fig: fig)
    numbers = {"assignments": [{"name": "01_a", "submissions": of, "exercises": [
        _exercise("easy", of, of), _exercise("hard", of // 4, of), _exercise("middle", of // 2, of)]}]}
    fig, alt = report.plot_exercises(numbers)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["01_a: hard", "01_a: middle", "01_a: easy"]
    assert ax.yaxis_inverted(), "the weakest exercise is drawn on top"
    assert [t.get_text() for t in ax.texts] == [f"25% ({of // 4}/{of})", f"50% ({of // 2}/{of})",
                                                f"100% ({of}/{of})"]
    assert "passing all the exercise's tests" in ax.get_xlabel() and ax.get_ylabel() == "assignment: exercise"
    assert alt.index("01_a: hard: 25%") < alt.index("01_a: middle: 50%") < alt.index("01_a: easy: 100%")
    assert tuple(fig.get_size_inches()) == pytest.approx((7.5, 0.19 * 3 + 1.3))
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_the_score_plot_has_labelled_axes_and_a_colour_bar(monkeypatch):
    monkeypatch.setattr(report, "_png", lambda fig: fig)
    numbers = report.analyse(_class(), threshold=50)
    fig, alt = report.plot_scores(numbers)
    ax, bar = fig.axes
    assert ax.get_xlabel().startswith("score, % of the points graded so far") and ax.get_ylabel() == "assignment"
    assert bar.get_ylabel() == "share of the assignment's submissions"
    assert sorted(t.get_text() for t in ax.texts) == ["1", "1", "1"]
    assert "01_attention (3 submissions, median 77.8%): 20-30%: 1, 70-80%: 1, 90-100%: 1." in alt
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_misconceptions_csv_neutralises_formulas(tmp_path):
    data = _class()
    evil = '=HYPERLINK("http://x")'
    data["students"][1] = evil
    data["submissions"][1]["student"] = evil
    report.write(str(tmp_path), data, threshold=50, emails={evil: "+1@example.edu"})
    rows = list(csv.reader(open(tmp_path / "misconceptions.csv", newline="")))
    (scaling,) = [r for r in rows if r[2] == "missing scaling"]
    assert scaling[4] == "'" + evil + " s3_forgot_too" and scaling[5] == "'+1@example.edu", scaling
