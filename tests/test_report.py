"""The class report, the LMS files and the similarity table (issue 37; grading/report.py, lms.py, similarity.py).

Fast tests build the report from plain data; the slow ones read the demo class graded once through
``python -m grading grade`` in a temporary course root (which writes the report as its last step; shared with
tests/test_grading.py: tests/shared_runs.py), compare the report with the gradebook, and rebuild it with
``python -m grading report``.
"""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

import pytest

import shared_runs
from conftest import REPO

from grading import demo, lms, report, similarity

# ---------------------------------------------------------------- a small class for the similarity table
GIVEN = '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v); returns (output, weights).
    """
    # YOUR CODE HERE
    raise NotImplementedError()'''
DOC = GIVEN.split("    # YOUR CODE HERE")[0]

ORIGINAL = DOC + '''    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    output = weights @ v
    return output, weights'''
# the same code with every name changed, comments added and the layout changed
NEAR_COPY = DOC + '''    # dimension of the keys
    dim = q.shape[ -1 ]
    s = q@np.swapaxes(k,-1,-2)/np.sqrt(dim)   # raw scores
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    s = s - s.max(axis = -1, keepdims = True)  # stability
    w = np.exp(s)

    w = w / w.sum(axis=-1, keepdims=True)
    out = w @ v
    return out, w'''
# two students who wrote it on their own, right both times
INDEPENDENT_1 = DOC + '''    logits = np.einsum("...qd,...kd->...qk", q, k) * (1.0 / math.sqrt(k.shape[-1]))
    if mask is not None:
        logits = np.where(mask, logits, float("-inf"))
    e = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    p = e / np.sum(e, axis=-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", p, v), p'''
INDEPENDENT_2 = DOC + '''    scale = 1 / np.sqrt(q.shape[-1])
    att = np.matmul(q * scale, np.moveaxis(k, -1, -2))
    att = att if mask is None else np.where(mask, att, -np.inf)
    att = softmax(att, axis=-1)
    result = np.matmul(att, v)
    return result, att'''
OTHER = DOC + '''    kt = k.swapaxes(-1, -2)
    raw = (q @ kt) / (q.shape[-1] ** 0.5)
    if mask is not None:
        raw[~mask] = -np.inf
    probs = softmax(raw)
    return probs @ v, probs'''


def _class_cells():
    return {"s1_original": ORIGINAL, "s2_near_copy": NEAR_COPY, "s3_own": INDEPENDENT_1, "s4_own": INDEPENDENT_2,
            "s5_other": OTHER, "s6_blank": GIVEN}


def test_normalising_ignores_names_comments_and_layout():
    assert similarity.normalise(NEAR_COPY, GIVEN) == similarity.normalise(ORIGINAL, GIVEN)
    assert similarity.normalise(INDEPENDENT_1, GIVEN) != similarity.normalise(ORIGINAL, GIVEN)
    # the release cell's code is everyone's: a blank submission keeps no line
    assert similarity.fingerprints({"blank": GIVEN}, GIVEN)["blank"] == []


def test_the_fast_tokens_are_pythons_tokens():
    """similarity.raw_tokens (a regular expression) gives what the tokenize module gives, without layout,
    on every instructor's solution cell and every test cell of the course, and on awkward strings."""
    import nbformat

    from conftest import source_notebooks

    sources = ['x = rb"a\\"b" + f\'{y!r}\' + """q\n\'\'\' """ + 0x_1F + 1_000.5e-3j  # c\ny = a \\\n  ** 2 // 3 -> 4']
    for _, path in source_notebooks():
        sources += [c.source for c in nbformat.read(path, 4).cells
                    if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade_id")]
    sources.append('x = 1\ny = r"""abc\n  "q" \'\'\' def""" + f(z) + """q\nw"""  # """\nq = \'"""\'\n')
    assert len(sources) > 100
    for src in sources:
        assert similarity.raw_tokens(src) == similarity.tokenize_tokens(src), src[:300]
        # read line by line (a string over several lines is one token on its first line), as similarity compares
        by_line = [tok for _, tokens in similarity.logical_lines(src) for tok in tokens]
        assert by_line == similarity.raw_tokens(src), src[:300]


def test_near_copies_rank_first_and_independent_solutions_are_not_flagged():
    pairs = similarity.similar_pairs(_class_cells(), GIVEN)
    assert pairs, "the near copies were not flagged"
    assert (pairs[0].a, pairs[0].b) == ("s1_original", "s2_near_copy"), pairs
    assert pairs[0].similarity == pytest.approx(1.0)
    flagged = {(p.a, p.b) for p in pairs}
    assert ("s3_own", "s4_own") not in flagged, pairs
    assert all("s6_blank" not in (p.a, p.b) for p in pairs), pairs
    # the independent pair is far below the threshold, not just under it
    prints = similarity.fingerprints(_class_cells(), GIVEN)
    a, b = ({u for _, u in prints[s]} for s in ("s3_own", "s4_own"))
    assert len(a & b) / len(a | b) < similarity.THRESHOLD / 2


def _synthetic_class(cells_by_student: dict[str, str]) -> dict:
    """collect()'s data for one assignment with one exercise: attention, visible 1 point + hidden 2."""
    students = sorted(cells_by_student)
    subs = []
    for s in students:
        wrong = s in ("s3_own",)
        subs.append({"assignment": "01_attention", "student": s, "score": 0.0 if wrong else 3.0, "max_score": 3.0,
                     "cells": {"attention_visible": 0.0 if wrong else 1.0, "attention_hidden": 0.0 if wrong else 2.0},
                     "errors": ({"attention_visible": ["AssertionError", "attention: likely misconception 'missing "
                                                       f"scaling': {s} forgot <script>alert(1)</script> 1/sqrt(d_k)"],
                                 "attention_hidden": ["AssertionError", "attention: likely misconception 'missing "
                                                      "scaling': hidden"]} if wrong else {}),
                     "seconds": {"attention_visible": 0.02, "attention_hidden": 0.05},
                     "code": {"attention_impl": cells_by_student[s]}})
    return {"students": students, "submissions": subs, "assignments": [{
        "name": "01_attention", "max_score": 3.0,
        "cells": [{"key": "attention_visible", "exercise": "attention", "kind": "visible", "points": 1.0},
                  {"key": "attention_hidden", "exercise": "attention", "kind": "hidden", "points": 2.0}],
        "solutions": [{"key": "attention_impl", "exercise": "attention", "given": GIVEN}]}]}


def test_the_report_counts_ranks_and_escapes(tmp_path):
    data = _synthetic_class(_class_cells())
    result = report.write(str(tmp_path), data, threshold=50)
    numbers = json.loads((tmp_path / "report.json").read_text())
    (ex,) = numbers["assignments"][0]["exercises"]
    assert ex["visible_passed"] == {"students": 5, "of": 6, "share": pytest.approx(5 / 6, abs=1e-3)}
    assert ex["hidden_passed"]["students"] == 5
    (mis,) = ex["misconceptions"]
    assert (mis["name"], mis["students"], mis["tests"]) == ("missing scaling", 1, 2)
    assert "s3_own" not in mis["example"] and "<student>" in mis["example"], "the example names its student"
    assert ex["seconds"]["median"] == pytest.approx(0.07)
    assert [b["student"] for b in numbers["below_threshold"]] == ["s3_own"]
    assert numbers["below_threshold"][0]["missed"] == ["01_attention: attention"]
    assert (numbers["similarity"][0]["a"], numbers["similarity"][0]["b"]) == ("s1_original", "s2_near_copy")
    assert result["report"] == numbers
    page = (tmp_path / "index.html").read_text()
    assert "<script" not in page and "&lt;script&gt;" in page, "student text must reach the page as text"
    assert page.count('<img src="data:image/png;base64,') == 2
    assert 'alt=""' not in page and "01_attention (6 submissions, median 100.0%): 0-10%: 1, 90-100%: 5." in page
    assert page.index("Similar solutions") < page.index("s2_near_copy"), "the pair is not in the similarity table"
    rows = list(csv.reader(open(tmp_path / "similarity.csv")))
    assert rows[1][:4] == ["01_attention", "attention", "s1_original", "s2_near_copy"]


def test_example_messages_name_no_student_and_no_path():
    anonymise = report.anonymiser(["s1", "s10", "ana"])
    message = f"\x1b[31ms1 and s10 wrote banana in {report.GRADING_DIR}/autograded/s1/x.ipynb\x1b[0m\n" + "x" * 400
    text = anonymise(message)
    assert text.startswith("<student> and <student> wrote banana in <course>/autograded/<student>/x.ipynb x")
    assert len(text) == 300 and "\n" not in text and "\x1b" not in text


def test_odd_autograded_notebooks_add_nothing_and_break_nothing(tmp_path):
    """A submission's autograded folder is read as data: malformed notebooks, odd types and links are skipped."""
    good = {"cells": [{"cell_type": "code", "source": ["x = 1\n", "y = 2"], "outputs": [],
                       "metadata": {"nbgrader": {"grade_id": "f_impl", "solution": True, "grade": False}}},
                      {"cell_type": "code", "source": "", "metadata": {
                          "nbgrader": {"grade_id": "f_visible", "grade": True, "solution": False},
                          "execution": {"iopub.execute_input": "2026-01-01T00:00:00.000Z",
                                        "shell.execute_reply": "2026-01-01T00:00:01.500Z"}},
                       "outputs": [{"output_type": "error", "ename": "AssertionError", "evalue": "\x1b[31mno\x1b[0m"}]}]}
    (tmp_path / "a.ipynb").write_text(json.dumps(good))
    (tmp_path / "b.ipynb").write_text(json.dumps({"cells": "not a list"}))
    (tmp_path / "c.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": [], "outputs": 3}]}))
    (tmp_path / "d.ipynb").write_text("{not json")
    (tmp_path / "e.ipynb").symlink_to(tmp_path / "a.ipynb")
    out = report.read_autograded(str(tmp_path), single=False)
    assert out == {"code": {"a/f_impl": "x = 1\ny = 2"}, "seconds": {"a/f_visible": 1.5},
                   "errors": {"a/f_visible": ["AssertionError", "no"]}}


def test_no_gradebook_is_an_error_not_an_empty_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="no gradebook at .*grade first"):
        report.collect(str(tmp_path), db_url=f"sqlite:///{tmp_path / 'gradebook.db'}?timeout=60")
    assert not (tmp_path / "gradebook.db").exists()


# ---------------------------------------------------------------- LMS files
ROSTER = ("nbgrader_id,name,canvas_id,sis_user_id,sis_login_id,section,moodle_idnumber,email\n"
          's1,"Doe, Jane",101,S-1,jdoe,A,S-1,jane@example.edu\n'
          "s2,Max Mustermann,102,S-2,mmu,B,S-2,max@example.edu\n")


def test_canvas_and_moodle_files_have_the_documented_layout(tmp_path):
    (tmp_path / "roster.csv").write_text(ROSTER)
    roster = lms.read_roster(str(tmp_path / "roster.csv"))
    points = [("01_attention", 11.0), ("02_masking", 16.0)]
    grades = {("01_attention", "s1"): 9.0, ("02_masking", "s1"): 15.5, ("01_attention", "s2"): 0.0,
              ("02_masking", "s2"): 12.0}
    rows = list(csv.reader(open(lms.write_canvas(str(tmp_path / "c.csv"), points, ["s1", "s2"], grades, roster))))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_attention", "02_masking"]
    assert rows[1] == ["Points Possible", "", "", "", "", "11", "16"]
    assert rows[2:] == [["Doe, Jane", "101", "S-1", "jdoe", "A", "9", "15.5"],
                        ["Max Mustermann", "102", "S-2", "mmu", "B", "0", "12"]]
    rows = list(csv.reader(open(lms.write_moodle(str(tmp_path / "m.csv"), points, ["s1", "s2"], grades, roster))))
    assert rows[0] == ["First name", "Last name", "ID number", "Email address", "01_attention", "02_masking"]
    assert rows[1] == ["Jane", "Doe", "S-1", "jane@example.edu", "9", "15.5"]
    with pytest.raises(lms.RosterError, match=r"1 student\(s\) .* not in the roster: s3"):
        lms.write_canvas(str(tmp_path / "c.csv"), points, ["s1", "s2", "s3"], grades, roster)


def test_a_malformed_roster_says_what_was_expected(tmp_path):
    path = tmp_path / "roster.csv"
    with pytest.raises(lms.RosterError, match="no roster at"):
        lms.read_roster(str(path))
    path.write_text("student,canvas\ns1,1\n")
    with pytest.raises(lms.RosterError, match="no 'nbgrader_id' column; expected nbgrader_id,name"):
        lms.read_roster(str(path))
    path.write_text("nbgrader_id,name\ns1,A\ns1,B\n")
    with pytest.raises(lms.RosterError, match="line 3: nbgrader_id 's1' appears twice"):
        lms.read_roster(str(path))


# ---------------------------------------------------------------- the demo class, graded once
GRADED = tuple(demo.assignments_with_demo())  # the whole demo class (graded once for two test files)
# every misconception the demo class's failing tests name, by assignment: (exercise, misconception), one student
# each. s03_misconception's named mistake (grading/demo/<assignment>.py), plus one the checks also see: lesson 03's
# multi_head_attention calls the student's wrong merge_heads. Lesson 11's s04_crash pileup raises IndexError where
# advancing the read on a deletion would too, but its outputs show nothing of that mistake: it is named no
# misconception (issue 34: never by a crash's text; until 2026-11-26 it was named by the same IndexError message).
NAMED = {
    "01_attention": [("attention_numpy", "missing scaling")],
    "02_masking": [("masked_softmax", "mask after softmax")],
    "03_multihead": [("merge_heads", "heads merged without transposing back"),
                     ("multi_head_attention", "heads merged without transposing back")],
    "04_positional": [("sinusoidal_encoding", "sin and cos swapped")],
    "05_blocks": [("encoder_layer_forward", "residual added after the norm in a pre-norm block")],
    "06_bpe": [("decode_ids", "decoding token by token")],
    "07_efficient": [("linear_attention", "forgot the normaliser"),
                     ("positive_random_features", "forgot exp(-|x|^2/2)")],
    "08_clinical_text": [("cosine_top_k", "unnormalised dot product")],
    "09_prompt_tuning": [("answer_only_labels", "labels shifted here")],
    "10_proteins": [("greedy_decode", "no causal mask")],
    "11_read_consensus": [("soft_alignment_loss", "max instead of min")],
    "12_long_range_dna": [("reverse_complement", "complemented but not reversed")],
}


def run_grading(args, root, timeout=1500):
    env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT="30", PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-m", "grading", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo_class(tmp_path_factory):
    """The whole demo class, graded once for this file and tests/test_grading.py (tests/shared_runs.py)."""
    root, proc = shared_runs.demo_class(tmp_path_factory)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return root, proc  # the demo class is a course of its own (pipeline.DEMO_ROOT)


def _gradebook_passes(root, assignment: str, exercise: str, kind: str) -> int:
    """Students whose every ``kind`` test cell of the exercise has full points, read from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        a = gb.find_assignment(assignment)
        passed = 0
        for sub in a.submissions:
            cells = [g for nb in sub.notebooks for g in nb.grades
                     if g.name == f"{exercise}_{kind}" and g.cell_type == "code"]
            assert cells, (assignment, exercise, kind)
            passed += all((g.score or 0) >= g.max_score for g in cells)
        return passed


@pytest.mark.slow
def test_grading_writes_the_report_and_prints_where(demo_class):
    root, proc = demo_class
    out = root / "report"
    for name in ("index.html", "report.json", "similarity.csv", "canvas_grades.csv", "moodle_grades.csv"):
        assert (out / name).is_file(), name
        assert name in proc.stdout, f"grading did not print where {name} is:\n{proc.stdout[-3000:]}"


@pytest.mark.slow
def test_the_report_matches_the_gradebook(demo_class):
    root, _ = demo_class
    numbers = json.loads((root / "report" / "report.json").read_text())
    with open(root / "grades.csv", newline="") as fh:
        grades = {(r["assignment"], r["student_id"]): float(r["score"]) for r in csv.DictReader(fh)}
    assert [a["name"] for a in numbers["assignments"]] == list(GRADED)
    for a in numbers["assignments"]:
        assert a["submissions"] == 4
        hist = a["histogram"]["counts"]
        assert sum(hist) == 4
        for ex in a["exercises"]:
            for kind in ("visible", "hidden"):
                if ex[f"{kind}_passed"] is not None:
                    assert ex[f"{kind}_passed"]["students"] == _gradebook_passes(root, a["name"], ex["name"], kind), \
                        (a["name"], ex["name"], kind)
        named = {(ex["name"], m["name"]): m for ex in a["exercises"] for m in ex["misconceptions"]}
        for exercise, name in NAMED[a["name"]]:
            assert (exercise, name) in named, f"{a['name']}: '{name}' of {exercise} is not in the report: {named}"
            m = named[(exercise, name)]
            assert m["students"] == 1 and m["tests"] == 2, m
            assert f"likely misconception '{name}'" in m["example"]
            assert not any(s in m["example"] for s in ("s01_correct", "s02_blank", "s03_misconception", "s04_crash"))
        assert set(named) == set(NAMED[a["name"]]), f"{a['name']}: misconceptions nobody made: {set(named)}"
    below = {b["student"]: b for b in numbers["below_threshold"]}
    assert set(below) == {"s02_blank"}, below
    total = sum(grades[(a, "s02_blank")] for a in GRADED)
    assert below["s02_blank"]["score"] == total == 0


@pytest.mark.slow
def test_collect_reads_what_the_gradebook_api_reads(demo_class):
    """collect() reads the grades in one query per assignment: the same scores as nbgrader's own objects."""
    from nbgrader.api import Gradebook

    root, _ = demo_class
    url = f"sqlite:///{root / 'gradebook.db'}"
    data = report.collect(str(root), url)
    assert len(data["submissions"]) == 4 * len(GRADED)
    with Gradebook(url) as gb:
        for r in data["submissions"]:
            sub = gb.find_submission(r["assignment"], r["student"])
            assert r["score"] == pytest.approx(sub.score, abs=1e-9)
            grades = {g.name: g.score for nb in sub.notebooks for g in nb.grades}
            assert r["cells"] == grades, (r["assignment"], r["student"])


@pytest.mark.slow
def test_the_canvas_file_has_one_row_per_student(demo_class):
    """Before hand grading, each assignment with a pending written answer is posted as its autograded part:
    the perfect student has full marks on it (never 9 of 11), and a blank row is never a 0 for a pending cell."""
    root, _ = demo_class
    rows = list(csv.reader(open(root / "report" / "canvas_grades.csv", newline="")))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *GRADED]
    assert rows[1][0] == "Points Possible"
    data = report.collect(str(root), db_url=f"sqlite:///{root / 'gradebook.db'}")
    manual = {a["name"]: sum(c["points"] for c in a["cells"] if c["kind"] == "manual") for a in data["assignments"]}
    pending = {r["assignment"] for r in data["submissions"] if r["pending"]}
    assert pending, "the demo class has no pending hand-graded cell: this test checks nothing"
    autograded_max = {a["name"]: a["max_score"] - (manual[a["name"]] if a["name"] in pending else 0.0)
                      for a in data["assignments"]}
    assert [float(x) for x in rows[1][5:]] == [autograded_max[a] for a in GRADED]
    roster = lms.read_roster(os.path.join(REPO, "grading", "demo", "roster.csv"))
    by_sis = {r["sis_user_id"]: s for s, r in roster.items()}
    assert sorted(by_sis[r[2]] for r in rows[2:]) == ["s01_correct", "s02_blank", "s03_misconception", "s04_crash"]
    perfect = next(r for r in rows[2:] if by_sis[r[2]] == "s01_correct")
    assert [float(x) for x in perfect[5:]] == [autograded_max[a] for a in GRADED], (rows[1], perfect)


@pytest.mark.slow
def test_report_rebuilds_without_grading_and_names_students_missing_from_the_roster(demo_class, tmp_path):
    root, _ = demo_class
    before = (root / "gradebook.db").stat().st_mtime
    (root / "report" / "index.html").unlink()
    proc = run_grading(["report", "--threshold", "80"], root, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "report" / "index.html").is_file() and "index.html" in proc.stdout
    numbers = json.loads((root / "report" / "report.json").read_text())
    assert numbers["threshold_percent"] == 80 and len(numbers["below_threshold"]) == 3
    assert (root / "gradebook.db").stat().st_mtime == before, "report wrote to the gradebook"

    partial = tmp_path / "roster.csv"
    partial.write_text("nbgrader_id,name,sis_user_id\ns01_correct,A,1\ns02_blank,B,2\n")
    proc = run_grading(["report", "--roster", str(partial)], root, timeout=600)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "s03_misconception, s04_crash" in proc.stdout and "not in the roster" in proc.stdout
    assert not (root / "report" / "canvas_grades.csv").exists(), "a file that leaves students out was written"
    proc = run_grading(["report"], root, timeout=600)  # the demo roster again
    assert proc.returncode == 0 and (root / "report" / "canvas_grades.csv").exists()


@pytest.mark.slow
def test_the_report_opens_with_the_demo_classs_blank_and_crashing_students(demo_class):
    root, _ = demo_class
    page = (root / "report" / "index.html").read_text()
    assert re.findall(r"<h2>(.*?)</h2>", page)[:2] == ["Who needs help", "Weakest exercises"]
    first = page[page.index("<h2>Who needs help"):page.index("<h2>Weakest exercises")].replace("'", '"')
    numbers = json.loads((root / "report" / "report.json").read_text())
    for a in numbers["assignments"]:
        crashed = {r["student"] for r in a["needs_help"]["crashed"]}
        below = {r["student"] for r in a["needs_help"]["below"]}
        assert "s01_correct" not in crashed | below, a["name"]
        assert "s02_blank" in below | set(a["needs_help"]["not_submitted"]), a["name"]
    assert any("s04_crash" in {r["student"] for r in a["needs_help"]["crashed"]} for a in numbers["assignments"])
    assert f'href="../feedback/s02_blank/{GRADED[0]}/"' in first
    assert any(f'href="../feedback/s04_crash/{a}/"' in first for a in GRADED)


@pytest.mark.slow
def test_each_misconception_of_the_demo_lists_the_student_who_made_it(demo_class):
    """Issue 60 item 3 on the demo class: report.json, the page, misconceptions.csv and the mailto link name
    s03_misconception for each of its misconceptions; its own row lists them all; the examples stay anonymised."""
    root, _ = demo_class
    out = root / "report"
    numbers = json.loads((out / "report.json").read_text())
    rows = list(csv.DictReader(open(out / "misconceptions.csv", newline="")))
    page = (out / "index.html").read_text().replace("'", '"')
    for a in numbers["assignments"]:
        named = {(ex["name"], m["name"]): m for ex in a["exercises"] for m in ex["misconceptions"]}
        for exercise, name in NAMED[a["name"]]:
            m = named[(exercise, name)]
            assert m["student_ids"] == ["s03_misconception"], (a["name"], exercise, m)
            assert "s03_misconception" not in m["example"]
            assert "s03_misconception%40demo.invalid" in m["mailto"]  # the demo roster's simulated address
            assert {"assignment": a["name"], "exercise": exercise, "misconception": name, "students": "1",
                    "student_ids": "s03_misconception", "emails": "s03_misconception@demo.invalid"} in rows
        table = page[page.index(f"<h2>{a['name']}</h2>"):]
        table = table[:table.index("</table>")]
        assert table.count("<b>") == len(NAMED[a["name"]]) and table.count("(s03_misconception)") == len(
            NAMED[a["name"]]), table
    assert {(r["assignment"], r["exercise"], r["misconception"]) for r in rows} == {
        (a, e, n) for a, named in NAMED.items() for e, n in named}
    mine = numbers["student_misconceptions"]
    assert list(mine) == ["s03_misconception"]
    assert {(m["assignment"], m["exercise"], m["misconception"]) for m in mine["s03_misconception"]} == {
        (a, e, n) for a, named in NAMED.items() for e, n in named}
    section = page[page.index("<h2>Students and their misconceptions"):page.index("<h2>Similar solutions")]
    assert section.count("<tr><td>s03_misconception</td>") == 1
    assert all(n in section for named in NAMED.values() for _, n in named)


@pytest.mark.slow
def test_the_demo_report_counts_pending_hand_grading_as_pending_not_zero(demo_class):
    root, _ = demo_class
    numbers = json.loads((root / "report" / "report.json").read_text())
    page = (root / "report" / "index.html").read_text()
    pending = [a for a in numbers["assignments"] if a["pending_submissions"]]
    assert pending, "the demo class has no pending hand-graded cell: this test checks nothing"
    for a in numbers["assignments"]:
        # s01_correct's autograded part is perfect: 100 %, in the top bin, whatever is still to grade by hand
        assert a["histogram"]["counts"][9] >= 1, a["name"]
        assert "s01_correct" not in {r["student"] for r in a["needs_help"]["below"]}
    for a in pending:
        assert a["graded_max"] < a["max_score"]
        assert f"{a['graded_max']:g} autograded; {a['max_score'] - a['graded_max']:g} hand-graded pending" in page
    assert "Students below" not in page


@pytest.mark.slow
def test_the_demo_similarity_table_has_one_row_per_pair_and_says_it_matches_the_solution(demo_class):
    """Issue 60 item 5 on the demo class: its correct, misconception and crash students hand in the instructor's
    solution for most cells; every pair is one row, labelled as matching the instructor's solution, and the
    matched lines are highlighted side by side."""
    root, _ = demo_class
    out = root / "report"
    numbers = json.loads((out / "report.json").read_text())
    rows = numbers["similar_students"]
    keys = [(r["a"], r["b"]) for r in rows]
    assert len(keys) == len(set(keys)) and len(rows) >= 2, rows
    students = [r for r in rows if r["b"] != similarity.SOLUTION]
    assert students and all(r["label"] == "matches the instructor's solution" for r in students), students
    assert ("s01_correct", similarity.SOLUTION) in keys
    assert all(r["exercises"] == r["solution_exercises"] >= 1 for r in students)
    assert sum(r["exercises"] for r in rows) == len(numbers["similarity"])
    assert not any("s02_blank" in k for k in keys), "a blank submission is never paired"
    page = (out / "index.html").read_text()
    section = page[page.index("<h2>Similar solutions"):]
    table = section[:section.index("</table>")]
    assert table.count("<tr><td class=") == min(len(rows), report.TABLE_PAIRS)
    assert "matches the instructor's solution" in table
    assert section.count('<span class="match">') > 10
    assert re.search(r'<th>s01_correct</th><th>s0[34]_\w+</th></tr><tr><td><pre>', section)
    flagged = list(csv.DictReader(open(out / "similarity.csv", newline="")))
    assert len(flagged) == len(numbers["similarity"])
    assert {r["matches_instructor_solution"] for r in flagged} == {"yes"}
