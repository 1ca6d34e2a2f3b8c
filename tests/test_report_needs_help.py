"""The report opens with who needs help (issue 60 item 2), on a small class given as data."""
import json
import re

from grading import report


def _class():
    cells = [{"key": "ex1_visible", "exercise": "ex1", "kind": "visible", "points": 4.0},
             {"key": "ex2_visible", "exercise": "ex2", "kind": "visible", "points": 6.0}]

    def sub(student, ex1, ex2, errors):
        return {"assignment": "01_attention", "student": student, "score": ex1 + ex2, "max_score": 10.0,
                "cells": {"ex1_visible": ex1, "ex2_visible": ex2}, "pending": [], "errors": errors, "seconds": {}}

    return {"assignments": [{"name": "01_attention", "max_score": 10.0, "cells": cells, "solutions": []}],
            "students": ["s01_correct", "s02_blank", "s03_crash", "s04_low"],
            "submissions": [sub("s01_correct", 4.0, 6.0, {}),
                            sub("s03_crash", 4.0, 0.0, {"ex2_visible": ["IndexError", "list index out of range"]}),
                            sub("s04_low", 4.0, 0.0, {"ex2_visible": ["AssertionError", "wrong shape"]})]}


def test_the_first_section_lists_who_did_not_submit_scored_low_or_crashed_with_links():
    numbers = report.analyse(_class(), threshold=50.0)
    help_ = numbers["assignments"][0]["needs_help"]
    assert help_["not_submitted"] == ["s02_blank"]
    assert help_["below"] == [{"student": "s03_crash", "percent": 40.0}, {"student": "s04_low", "percent": 40.0}]
    assert help_["crashed"] == [{"student": "s03_crash", "kinds": ["IndexError"]}]
    assert numbers["weakest_exercises"][0] == {"assignment": "01_attention", "exercise": "ex2", "share": 0.333}
    json.dumps(numbers)
    page = report.render(numbers, {})
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings[:2] == ["Who needs help", "Weakest exercises"], headings
    first = page[page.index("<h2>Who needs help"):page.index("<h2>Weakest exercises")]
    assert "s02_blank" in first
    assert 'href="../feedback/s03_crash/01_attention/"' in first.replace("'", '"'), first
    assert "IndexError" in first and "s04_low" in first
    assert "s01_correct" not in first
