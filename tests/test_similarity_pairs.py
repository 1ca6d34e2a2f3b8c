"""Similarity worth trusting (issue 60 item 5): one row per pair of students, the matched lines highlighted
side by side without the release code, and the instructor's solution as a pseudo-submission."""
import re

from grading import report, similarity

GIVEN = '''def normalise_rows(x, eps=1e-9):
    """Each row of x divided by its sum.

    x: (n, d) non-negative array; returns an array of the same shape.
    """
    # YOUR CODE HERE
    raise NotImplementedError()'''
DOC = GIVEN.split("    # YOUR CODE HERE")[0]
SOLUTION = DOC + '''    x = np.asarray(x, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D, got {x.shape}")
    totals = x.sum(axis=1, keepdims=True)
    totals = np.maximum(totals, eps)
    out = x / totals
    return out'''
# two students who each handed in the solution, renamed and re-commented
LIKE_SOLUTION_1 = DOC + '''    x = np.asarray(x, dtype=float)  # to floats
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D, got {x.shape}")
    s = x.sum(axis=1, keepdims=True)
    s = np.maximum(s, eps)
    res = x / s
    return res'''
LIKE_SOLUTION_2 = DOC.replace("    ", "  ") + '''  x = np.asarray(x, dtype = float)
  if x.ndim != 2:
      raise ValueError(f"x must be 2-D, got {x.shape}")
  t = x.sum(axis = 1, keepdims = True)
  t = np.maximum(t, eps)
  r = x / t
  return r'''
# a pair who share their own way (not the instructor's), one copied from the other
OWN = DOC + '''    rows = [list(map(float, row)) for row in x]
    result = []
    for row in rows:
        total = max(sum(row), eps)
        result.append([value / total for value in row])
    return np.array(result)'''
OWN_COPY = DOC + '''    rs = [list(map(float, r)) for r in x]   # my own idea
    res = []
    for r in rs:
        tot = max(sum(r), eps)
        res.append([v / tot for v in r])
    return np.array(res)'''
INDEPENDENT = DOC + '''    x = np.clip(np.asarray(x, float), 0, None)
    return x / np.clip(x.sum(-1)[:, None], eps, None)'''


def _data(cells: dict) -> dict:
    students = sorted(cells)
    subs = [{"assignment": "01_x", "student": s, "score": 1.0, "max_score": 1.0, "cells": {"rows_visible": 1.0},
             "pending": [], "errors": {}, "seconds": {}, "code": {"rows_impl": cells[s]}} for s in students]
    return {"students": students, "submissions": subs, "assignments": [{
        "name": "01_x", "max_score": 1.0,
        "cells": [{"key": "rows_visible", "exercise": "rows", "kind": "visible", "points": 1.0}],
        "solutions": [{"key": "rows_impl", "exercise": "rows", "given": GIVEN, "solution": SOLUTION}]}]}


CLASS = {"s1": LIKE_SOLUTION_1, "s2": LIKE_SOLUTION_2, "s3": OWN, "s4": OWN_COPY, "s5": INDEPENDENT, "s6": GIVEN}


def test_the_instructors_solution_takes_part_and_labels_the_pairs_it_explains():
    pairs = report.similarity(_data(CLASS))
    flagged = {(p["a"], p["b"]): p for p in pairs}
    assert set(flagged) == {("s1", "s2"), ("s3", "s4"), ("s1", similarity.SOLUTION), ("s2", similarity.SOLUTION)}
    assert flagged[("s1", "s2")]["matches_solution"] is True
    assert flagged[("s3", "s4")]["matches_solution"] is False
    rows = report.similar_students(pairs)
    assert [(r["a"], r["b"]) for r in rows] == [("s3", "s4"), ("s1", "s2"), ("s1", similarity.SOLUTION),
                                                ("s2", similarity.SOLUTION)], "unexplained pairs come first"
    assert rows[0]["label"] == "" and rows[1]["label"] == "matches the instructor's solution"


def test_one_row_per_pair_of_students_over_exercises():
    data = _data(CLASS)
    # a second exercise, where s3 and s4 share the same answer again
    data["assignments"][0]["solutions"].append({"key": "rows2_impl", "exercise": "rows2", "given": GIVEN,
                                                "solution": SOLUTION})
    for s in data["submissions"]:
        s["code"]["rows2_impl"] = s["code"]["rows_impl"]
    rows = report.similar_students(report.similarity(data))
    keys = [(r["a"], r["b"]) for r in rows]
    assert len(keys) == len(set(keys)) == 4
    (own,) = [r for r in rows if (r["a"], r["b"]) == ("s3", "s4")]
    assert own["exercises"] == 2 and own["cells"] == ["01_x/rows", "01_x/rows2"]
    assert own["matched_lines"] == 2 * 6  # six lines of their own each time; the release lines never count


def test_the_matched_lines_are_highlighted_side_by_side_without_the_release_code(tmp_path):
    result = report.write(str(tmp_path), _data(CLASS), threshold=50)
    page = (tmp_path / "index.html").read_text()
    assert "matches the instructor's solution" in page
    page = page.replace("'", '"')
    section = page[page.index("<h2>Similar solutions"):]
    marked = re.findall(r'<span class="match">(.*?)</span>', section)
    assert "    rs = [list(map(float, r)) for r in x]   # my own idea" in marked
    assert "        res.append([v / tot for v in r])" in marked
    # the release code (signature, docstring) is never shown as matched, nor shown at all above the first match
    assert not any("def normalise_rows" in m or "Each row of x" in m for m in marked)
    assert "Each row of x" not in section
    # both cells of the pair side by side
    assert re.search(r'<th>s3</th><th>s4</th></tr><tr><td><pre>.*?</pre></td><td><pre>', section, re.S)
    (own,) = [p for p in result["report"]["similarity"] if (p["a"], p["b"]) == ("s3", "s4")]
    assert own["lines_a"] == own["lines_b"] == list(range(5, 11))


def test_line_reading_skips_strings_over_several_lines_and_keeps_what_follows():
    src = 'a = 1 + 2\nb = """x\ny = 1 + 2\n""" + c(d)\ne = f(g, h)\n'
    lines = similarity.Normaliser().reader("")(src)
    assert [n for n, _ in lines] == [0, 1, 3, 4]  # line 2 is inside the string
