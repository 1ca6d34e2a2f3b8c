"""What the class got wrong: the class report, the LMS files and the similarity table, after grading.

    python -m grading report [--threshold 50] [--roster grading/roster.csv] [--lms-ids nbgrader]

rebuilds, from the gradebook and the autograded notebooks (nothing is graded again), the folder
``report/`` next to ``grades.csv``:

* ``index.html``: one self-contained page (plots embedded as base64 PNG, each with alt text). It
  opens with who needs help (per assignment: not submitted, below ``--threshold`` percent, crashed
  or timed out, each linked to their feedback pages), then the weakest exercises, then: the
  assignments (median and mean percent); two plots (each exercise's share of submissions passing
  all its tests, a sorted bar chart with its values; every assignment's score distribution); per
  assignment, a table; per exercise (the graded cells sharing a name stem: ``softmax_impl``,
  ``softmax_visible``, ``softmax_hidden``): the share of submissions that passed its visible and
  its hidden tests, the misconceptions the failing tests named ("likely misconception '<name>'",
  the checks' messages, decided by ``grading/verify.py``) with their students' ids, a mailto link
  to them (when the roster gives e-mail addresses) and one anonymised example message, the other
  failures by kind, and the time its test cells took; each student's misconceptions; the
  similarity table, one row per pair of students, with the matched lines side by side
  (``grading/similarity.py``; the instructor's solution takes part as a pseudo-student).
  Everything that came from a submission (messages, code) is escaped text, and the whole body
  goes through the feedback pages' sanitiser (``grading.sanitise``, re-exported by
  ``grading.feedback``) before the plots are put in.
* ``report.json``: the same numbers (the flagged cells without their code).
* ``canvas_grades.csv``, ``moodle_grades.csv``, ``moodle_grade_items.csv`` (each Moodle grade item's
  maximum): the LMS import files (``grading/lms.py``), when a roster says who is who
  (``grading/roster.csv``, this course's layout or the LMS's own gradebook export, ``--roster-match``;
  the demo class uses ``grading/demo/roster.csv``).
* ``similarity.csv``: every flagged pair of cells (assignment, exercise, students, similarity,
  shared lines, whether it matches the instructor's solution, the matched lines' numbers).
* ``misconceptions.csv``: one row per misconception: assignment, exercise, misconception, the number
  of students, their ids and their e-mail addresses (from the roster, when it has them).

Hand grading: while an assignment has hand-graded cells not graded yet, its percentages (the
distribution, the threshold, the medians) are of its autograded part, with that part's maximum,
for every student (``lms.postable``, as the LMS files post it); a pending cell is never counted as
0 and never as a missed exercise. Once everything is graded by hand, rebuild the report.

The class is the one graded (:func:`given`): the assignments of ``grades.csv`` (not every lesson the
gradebook holds), its students and the roster's; what was handed in but not graded is a section of its
own ("Not graded", ``not_graded``), never "not submitted".

Time measured: for each test cell, the wall-clock time from the kernel starting the cell to its
reply (nbclient's ``execution`` timestamps in the autograded notebook); an exercise's time is the
sum over its test cells, which call the student's function on the test inputs. It is taken on the
grading machine, in the sandbox, with other kernels running: a guide to slow solutions, not a
benchmark (grades never depend on it).

Does NOT cover: trends across terms, or any change to a grade.
"""
from __future__ import annotations

import argparse
import base64
import csv
import datetime
import html
import io
import json
import os
import re
import secrets
import statistics
import sys
import time
import urllib.parse

from grading import GRADING_DIR, NOTEBOOKS_DIR, PACKAGE_DIR, REPO_DIR
from grading import db_url as course_db_url
from grading.failures import PROBLEM_ERRORS

REPORT_DIR_NAME = "report"
DEMO_ROSTER = os.path.join(PACKAGE_DIR, "demo", "roster.csv")
HIDDEN_MARK = "BEGIN HIDDEN TESTS"
_MISCONCEPTION = re.compile(r"likely misconception '([^'\n]{1,120})'")
# failing test cells that are the student's answer being wrong or missing, not their code crashing
NOT_A_CRASH = ("misconception", "not implemented", "failed, no misconception named")
WEAKEST = 5  # exercises listed under "weakest exercises" at the top of the report
_NOT_IMPLEMENTED = re.compile(r"not implemented yet|NotImplementedError")
_STEM = re.compile(r"_(visible|hidden|impl|tests?|solution)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
MAX_IDS = 40  # student ids listed per misconception on the page (all of them in report.json and misconceptions.csv)
MAX_STUDENT_ROWS = 300  # students listed with their misconceptions on the page (all of them in report.json)
EVIDENCE_CELLS = 3  # exercises shown side by side per flagged pair of students
EVIDENCE_LINES = 40  # lines shown per cell: the matched region
MAX_CODE = 100_000  # characters of a solution cell compared for similarity
TABLE_PAIRS = 50
TIMING_NOTE = ("wall-clock seconds from the kernel starting each test cell to its reply (nbclient's execution "
               "timestamps in the autograded notebook), summed over the exercise's test cells, which run the "
               "student's function on the test inputs; measured on the grading machine under its load, so a "
               "guide to slow solutions, never part of a grade")


def exercise_of(grade_id: str) -> str:
    """``softmax_visible`` -> ``softmax``; a name without a known suffix is its own exercise."""
    return _STEM.sub("", grade_id)


# ------------------------------------------------------------------ collect: gradebook + autograded notebooks
def _cell_key(notebook: str, grade_id: str, single: bool) -> str:
    return grade_id if single else f"{notebook}/{grade_id}"


def _seconds(meta: dict) -> float | None:
    ex = meta.get("execution") or {}
    start, end = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not (isinstance(start, str) and isinstance(end, str)):
        return None
    try:
        t0 = datetime.datetime.fromisoformat(start.replace("Z", "+00:00"))
        t1 = datetime.datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, (t1 - t0).total_seconds())


def read_autograded(folder: str, single: bool) -> dict:
    """From one submission's autograded notebooks: each graded cell's error, time and each solution cell's code."""
    out = {"errors": {}, "seconds": {}, "code": {}}
    try:
        names = sorted(f for f in os.listdir(folder) if f.endswith(".ipynb"))
    except OSError:
        return out
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                nb = json.load(fh)
            _read_notebook(nb, name[:-len(".ipynb")], single, out)
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # an unreadable notebook adds nothing; its scores still come from the gradebook
    return out


def _read_notebook(nb: dict, notebook: str, single: bool, out: dict) -> None:
    """Add one autograded notebook's errors, times and solution code to ``out``."""
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata") or {}
        nbg = meta.get("nbgrader") or {}
        gid = nbg.get("grade_id")
        if not isinstance(gid, str):
            continue
        key = _cell_key(notebook, gid, single)
        if nbg.get("solution") and not nbg.get("grade"):
            src = cell.get("source", "")
            out["code"][key] = ("".join(map(str, src)) if isinstance(src, list) else str(src))[:MAX_CODE]
        if nbg.get("grade") and not nbg.get("solution"):
            seconds = _seconds(meta)
            if seconds is not None:
                out["seconds"][key] = seconds
            outputs = cell.get("outputs", [])
            errors = [o for o in outputs if isinstance(o, dict) and o.get("output_type") == "error"] \
                if isinstance(outputs, list) else []
            if errors:
                out["errors"][key] = [str(errors[-1].get("ename", "Error"))[:100],
                                      _ANSI.sub("", str(errors[-1].get("evalue", "")))[:2000]]


def collect(root: str = GRADING_DIR, db_url: str | None = None) -> dict:
    """The class as plain data: assignments (graded cells, release code), students, submissions."""
    from nbgrader.api import Gradebook

    if db_url is None:
        db_url = course_db_url()
    if db_url.startswith("sqlite:///"):
        path = db_url[len("sqlite:///"):].split("?", 1)[0]
        if not os.path.isfile(path):  # nbgrader would create an empty one
            raise FileNotFoundError(f"no gradebook at {path}: grade first (python -m grading grade)")
    data = {"assignments": [], "students": [], "submissions": []}
    with Gradebook(db_url) as gb:
        data["students"] = sorted(s.id for s in gb.students)
        for a in sorted(gb.assignments, key=lambda x: x.name):
            notebooks = sorted(a.notebooks, key=lambda n: n.name)
            single = len(notebooks) == 1
            cells, solutions = [], []
            for nb in notebooks:
                source = {sc.name: sc.source for sc in nb.source_cells}
                solution_names = {sc.name for sc in nb.solution_cells}
                for gc in nb.grade_cells:
                    if gc.cell_type == "markdown" or gc.name in solution_names:
                        kind = "manual"
                    elif HIDDEN_MARK in (source.get(gc.name) or ""):
                        kind = "hidden"
                    else:
                        kind = "visible"
                    cells.append({"key": _cell_key(nb.name, gc.name, single), "exercise": exercise_of(gc.name),
                                  "kind": kind, "points": float(gc.max_score)})
                grade_names = {gc.name for gc in nb.grade_cells}
                instructor = instructor_solutions(a.name, nb.name)
                for name in sorted(solution_names - grade_names):
                    solutions.append({"key": _cell_key(nb.name, name, single), "exercise": exercise_of(name),
                                      "given": source.get(name) or "", "solution": instructor.get(name, "")})
            data["assignments"].append({"name": a.name, "max_score": float(a.max_score), "cells": cells,
                                        "solutions": solutions})
            by_student: dict[str, dict] = {}
            pending_of: dict[str, list] = {}
            for student, notebook, cell, score, needs_manual in _grades(gb, a.id):
                by_student.setdefault(student, {})[_cell_key(notebook, cell, single)] = float(score or 0.0)
                if needs_manual:
                    pending_of.setdefault(student, []).append(_cell_key(notebook, cell, single))
            for sub in a.submissions:
                student = sub.student_id
                scores = by_student.get(student, {})
                # a submission's score is the sum of its grades' scores (nbgrader's SubmittedAssignment.score)
                record = {"assignment": a.name, "student": student, "score": float(sum(scores.values())),
                          "max_score": float(a.max_score), "cells": scores,
                          "pending": sorted(pending_of.get(student, []))}
                record.update(read_autograded(os.path.join(root, "autograded", student, a.name), single))
                data["submissions"].append(record)
    return data


def instructor_solutions(assignment: str, notebook: str) -> dict[str, str]:
    """{grade_id: the instructor's solution cell without its BEGIN/END SOLUTION lines} from the course's source
    notebook (``notebooks/<assignment>/<notebook>.ipynb``, nbgrader's source directory); {} when it is not there."""
    path = os.path.join(NOTEBOOKS_DIR, assignment, notebook + ".ipynb")
    try:
        with open(path, encoding="utf-8") as fh:
            cells = json.load(fh).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    for cell in cells if isinstance(cells, list) else []:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        meta = meta.get("nbgrader") if isinstance(meta, dict) else None
        if not isinstance(meta, dict):
            continue
        if meta.get("solution") and cell.get("cell_type") == "code" and isinstance(meta.get("grade_id"), str):
            src = cell.get("source", "")
            out[meta["grade_id"]] = _SOLUTION_MARKERS.sub("", "".join(src) if isinstance(src, list) else str(src))
    return out


def _grades(gb, assignment_id: str):
    """(student, notebook, grade cell, score) of every grade of one assignment, in one query (the ORM's
    per-submission loading costs about 3 ms a submission)."""
    from nbgrader.api import BaseCell, Grade, Notebook, SubmittedAssignment, SubmittedNotebook

    return (gb.db.query(SubmittedAssignment.student_id, Notebook.name, BaseCell.name, Grade.score,
                        Grade.needs_manual_grade)
            .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
            .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
            .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
            .join(BaseCell, Grade.cell_id == BaseCell.id)
            .filter(SubmittedAssignment.assignment_id == assignment_id)
            .all())


# ------------------------------------------------------------------ the class: grades.csv and the roster
_NO_SUBMISSION = ("no submission for ", "missing: no submission for ")


def read_class(root: str) -> dict | None:
    """The class as the last grading run wrote it (``grades.csv``): its assignments (in the file's order), its
    students (every student folder, refused and linked ones included) and each row's status; None when there
    is no readable grades.csv."""
    path = os.path.join(root, "grades.csv")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    rows = [r for r in rows if r.get("assignment") and r.get("student_id")]
    if not rows:
        return None
    return {"assignments": list(dict.fromkeys(r["assignment"] for r in rows)),
            "students": sorted({r["student_id"] for r in rows}),
            "status": {(r["assignment"], r["student_id"]): r.get("status") or "graded" for r in rows}}


def given(data: dict, klass: dict | None, roster_students=()) -> dict:
    """``data`` (:func:`collect`) for the class as graded: only the assignments the class was given (those in
    grades.csv; without it, those someone submitted), so a percentage is over them and not over every lesson
    the gradebook holds; every student of grades.csv and of the roster (a refused, linked or absent student
    too); ``status`` of each (assignment, student) from grades.csv."""
    if klass:
        names = set(klass["assignments"])
        students = set(klass["students"])
        status = klass["status"]
    else:
        names = {s["assignment"] for s in data["submissions"]}
        students, status = set(), {}
    return {**data, "assignments": [a for a in data["assignments"] if a["name"] in names],
            "submissions": [s for s in data["submissions"] if s["assignment"] in names],
            "students": sorted(set(data["students"]) | students | set(roster_students)),
            "status": {**data.get("status", {}), **status}}


def not_graded_of(data: dict) -> dict:
    """{(assignment, student): (why, what to do)} of what grades.csv says was not graded although something was
    handed in or the student's folder was refused (a symbolic link, an unsafe id, an unreadable or misnamed
    notebook, the grader's failure); "no submission" is not among them (that is not submitted)."""
    out = {}
    for (a, st), status in (data.get("status") or {}).items():
        if not status.startswith("not graded"):
            continue
        reason = status[len("not graded"):].lstrip(": ")
        if reason.startswith(_NO_SUBMISSION):
            continue
        why, _, fix = reason.partition(" (fix: ")
        out[(a, st)] = (why.strip(), fix.rstrip(")").strip())
    return out


# ------------------------------------------------------------------ analyse: the numbers (report.json)
def anonymiser(students):
    """A function that replaces, in a message, each student id (a whole word) with ``<student>`` and the
    grading machine's paths with ``<course>``, and puts it on one line of at most 300 characters."""
    ids = sorted((s for s in students if s), key=len, reverse=True)
    pattern = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, ids)) + r")(?![\w-])") if ids else None
    paths = sorted({GRADING_DIR, REPO_DIR}, key=len, reverse=True)

    def anonymise(message: str) -> str:
        text = _ANSI.sub("", message)
        for path in paths:
            text = text.replace(path, "<course>")
        if pattern is not None:
            text = pattern.sub("<student>", text)
        text = " ".join(text.split())
        return text if len(text) <= 300 else text[:297] + "..."

    return anonymise


def failure_kind(ename: str, message: str) -> tuple[str, str | None]:
    """('misconception', name) or (a kind of failure, None) for one failing test cell."""
    m = _MISCONCEPTION.search(message)
    if m:
        return "misconception", m.group(1)
    if ename == "NotImplementedError" or _NOT_IMPLEMENTED.search(message):
        return "not implemented", None
    if ename in PROBLEM_ERRORS:
        return ename, None
    if ename == "AssertionError":
        return "failed, no misconception named", None
    return ename or "failed", None


def _histogram(values: list[float]) -> dict:
    edges = list(range(0, 101, 10))
    counts = [0] * 10
    for v in values:
        counts[min(9, max(0, int(v // 10)))] += 1
    return {"edges_percent": edges, "counts": counts}


def analyse(data: dict, threshold: float = 50.0, similarity_pairs: list | None = None,
            emails: dict | None = None) -> dict:
    """The report's numbers from :func:`collect`'s data. ``threshold``: percent of each assignment's maximum.

    Scores and percentages count what is graded: an assignment with hand-graded cells still pending is
    counted, for everyone, as its autograded part with its own maximum (``lms.postable``, as the LMS
    files post it), never with the pending points as 0. ``emails`` ({student: address}, from the
    roster) adds a mailto link to each misconception's students."""
    from grading import lms

    students = data["students"]
    emails = emails or {}
    anonymise = anonymiser(students)
    by_assignment: dict[str, list] = {}
    for sub in data["submissions"]:
        by_assignment.setdefault(sub["assignment"], []).append(sub)
    points, graded = lms.postable(data, "autograded")
    points = dict(points)
    report = {"generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "threshold_percent": threshold, "timing": TIMING_NOTE, "students": len(students),
              "submissions": len(data["submissions"]), "assignments": []}
    missed: dict[str, list[str]] = {s: [] for s in students}
    totals = {s: [0.0, 0.0] for s in students}
    not_graded = not_graded_of(data)  # handed in (or refused) but not graded: never "not submitted"
    report["not_graded"] = [{"assignment": a, "student": st, "reason": why, "fix": fix}
                            for (a, st), (why, fix) in sorted(not_graded.items())]
    mistakes: dict[str, list] = {}
    for a in data["assignments"]:
        subs = sorted(by_assignment.get(a["name"], []), key=lambda r: r["student"])
        top = points.get(a["name"], a["max_score"])
        pct = [100.0 * graded[(a["name"], s["student"])] / top if top else 0.0 for s in subs]
        pending_subs = sum(bool(s.get("pending")) for s in subs)
        exercises: dict[str, dict] = {}
        for c in a["cells"]:
            ex = exercises.setdefault(c["exercise"], {"name": c["exercise"], "points": 0.0, "cells": []})
            ex["points"] += c["points"]
            ex["cells"].append(c)
        rows = []
        crashed: dict[str, set] = {}
        for name, ex in exercises.items():
            row = {"name": name, "points": ex["points"], "kinds": sorted({c["kind"] for c in ex["cells"]})}
            for kind in ("visible", "hidden", "manual"):
                kc = [c for c in ex["cells"] if c["kind"] == kind]
                # a hand-graded cell not graded yet is neither passed nor failed: those submissions are left out
                done = [s for s in subs if not any(c["key"] in s.get("pending", ()) for c in kc)]
                if kind == "manual" and kc:
                    row["manual_pending"] = len(subs) - len(done)
                if not kc or not done:
                    row[f"{kind}_passed"] = None
                    continue
                passed = sum(all(s["cells"].get(c["key"], 0.0) >= c["points"] - 1e-9 for c in kc) for s in done)
                row[f"{kind}_passed"] = {"students": passed, "of": len(done), "share": round(passed / len(done), 3)}
            tested = [c for c in ex["cells"] if c["kind"] != "manual"]
            if tested and subs:
                passed = sum(all(s["cells"].get(c["key"], 0.0) >= c["points"] - 1e-9 for c in tested) for s in subs)
                row["all_tests_passed"] = {"students": passed, "of": len(subs), "share": round(passed / len(subs), 3)}
            else:
                row["all_tests_passed"] = None
            mis: dict[str, dict] = {}
            other: dict[str, dict] = {}
            times = []
            for s in subs:
                seen_here = set()
                t = [s["seconds"][c["key"]] for c in tested if c["key"] in s["seconds"]]
                if t:
                    times.append(sum(t))
                for c in tested:
                    if s["cells"].get(c["key"], 0.0) >= c["points"] - 1e-9:
                        continue
                    ename, message = s["errors"].get(c["key"], ["", ""])
                    if not ename and not message:
                        kind, label = "no error recorded (not run or not graded)", None
                    else:
                        kind, label = failure_kind(ename, message)
                    bucket = mis.setdefault(label, {"name": label, "students": 0, "tests": 0, "example": "",
                                                    "student_ids": []}) \
                        if label else other.setdefault(kind, {"kind": kind, "students": 0, "tests": 0, "example": "",
                                                              "student_ids": []})
                    bucket["tests"] += 1
                    if (kind, label) not in seen_here:
                        seen_here.add((kind, label))
                        bucket["students"] += 1
                        bucket["student_ids"].append(s["student"])
                        if label:
                            mistakes.setdefault(s["student"], []).append(
                                {"assignment": a["name"], "exercise": name, "misconception": label})
                        elif kind not in NOT_A_CRASH and not kind.startswith("no error recorded"):
                            crashed.setdefault(s["student"], set()).add(kind)
                    if not bucket["example"] and message:
                        bucket["example"] = anonymise(message)
            for m in mis.values():
                m["mailto"] = _mailto(m["student_ids"], emails, f"{a['name']}, {name}: {m['name']}")
            row["misconceptions"] = sorted(mis.values(), key=lambda m: (-m["students"], m["name"]))
            row["other_failures"] = sorted(other.values(), key=lambda m: (-m["students"], m["kind"]))
            row["seconds"] = ({"median": round(statistics.median(times), 3), "max": round(max(times), 3),
                               "submissions": len(times)} if times else None)
            rows.append(row)
            for s in subs:
                pending = s.get("pending", ())
                if any(s["cells"].get(c["key"], 0.0) < c["points"] - 1e-9 and c["key"] not in pending
                       for c in ex["cells"]):
                    hand = " (graded by hand)" if row["kinds"] == ["manual"] else ""
                    missed[s["student"]].append(f"{a['name']}: {name}{hand}")
        submitted = {s["student"] for s in subs}
        for s in subs:
            totals[s["student"]][0] += graded[(a["name"], s["student"])]
        for st in students:
            totals[st][1] += top
            if st not in submitted:
                why = "not graded" if (a["name"], st) in not_graded else "not submitted"
                missed[st].append(f"{a['name']}: {why}")
        report["assignments"].append({
            "name": a["name"], "max_score": a["max_score"], "submissions": len(subs),
            # the maximum the percentages are of: the autograded part's while hand grading is pending
            "graded_max": top, "pending_submissions": pending_subs,
            "mean_percent": round(statistics.fmean(pct), 1) if pct else None,
            "median_percent": round(statistics.median(pct), 1) if pct else None,
            "histogram": _histogram(pct), "exercises": rows,
            "needs_help": {
                "not_submitted": sorted(st for st in students if st not in submitted
                                        and (a["name"], st) not in not_graded),
                "below": [{"student": s["student"], "percent": round(p, 1)} for s, p in zip(subs, pct)
                          if p < threshold],
                "crashed": [{"student": st, "kinds": sorted(k)} for st, k in sorted(crashed.items())]}})
    below = []
    for st in students:
        score, top = totals[st]
        share = 100.0 * score / top if top else 0.0
        if share < threshold:
            below.append({"student": st, "score": score, "max_score": top, "percent": round(share, 1),
                          "missed": missed[st]})
    report["below_threshold"] = sorted(below, key=lambda b: (b["percent"], b["student"]))
    report["student_misconceptions"] = {st: mistakes[st] for st in sorted(mistakes)}
    shares = []
    for a in report["assignments"]:
        for ex in a["exercises"]:
            passed = [ex[k] for k in ("visible_passed", "hidden_passed") if ex.get(k)]
            if passed:
                shares.append({"assignment": a["name"], "exercise": ex["name"],
                               "share": round(min(p["share"] for p in passed), 3)})
    report["weakest_exercises"] = sorted(shares, key=lambda e: (e["share"], e["assignment"], e["exercise"]))[:WEAKEST]
    report["similarity"] = [p for p in (similarity_pairs or [])]
    report["similar_students"] = similar_students(report["similarity"])
    return report


def _mailto(student_ids: list, emails: dict, subject: str) -> str | None:
    """A mailto link to the students' roster addresses (Bcc), or None when the roster gives none of them."""
    known = [emails[s] for s in student_ids if emails.get(s)]
    if not known:
        return None
    return "mailto:?" + urllib.parse.urlencode({"bcc": ",".join(known), "subject": subject},
                                               quote_via=urllib.parse.quote)


def similarity(data: dict) -> list[dict]:
    """Flagged pairs of cells of every exercise, most similar first, with both cells' code and matched lines
    (grading/similarity.py). The instructor's solution takes part as the pseudo-student ``similarity.SOLUTION``
    (always ``b`` of its pairs); ``matches_solution``: the pair is a student and the solution, or two students
    who are each flagged with it."""
    from grading import similarity as sim

    norm = sim.Normaliser()
    by_assignment: dict[str, list] = {}
    for s in data["submissions"]:
        by_assignment.setdefault(s["assignment"], []).append(s)
    out = []
    for a in data["assignments"]:
        subs = by_assignment.get(a["name"], [])
        for sol in a["solutions"]:
            cells = {s["student"]: s["code"][sol["key"]] for s in subs if sol["key"] in s.get("code", {})}
            if sol.get("solution") and sim.SOLUTION not in cells:
                cells[sim.SOLUTION] = sol["solution"]
            pairs = [p.as_dict() for p in sim.similar_pairs(cells, sol["given"], norm=norm)]
            for p in pairs:
                if p["a"] == sim.SOLUTION:  # the student first, the solution second
                    p.update(a=p["b"], b=p["a"], lines_a=p["lines_b"], lines_b=p["lines_a"])
            like_solution = {p["a"] for p in pairs if p["b"] == sim.SOLUTION}
            for p in pairs:
                p["matches_solution"] = p["b"] == sim.SOLUTION or {p["a"], p["b"]} <= like_solution
                out.append({"assignment": a["name"], "exercise": sol["exercise"], "cell": sol["key"], **p,
                            "code_a": cells[p["a"]], "code_b": cells[p["b"]]})
    out.sort(key=lambda p: (-p["similarity"], -p["shared"], p["assignment"], p["exercise"], p["a"], p["b"]))
    return out


def similar_students(cell_pairs: list[dict]) -> list[dict]:
    """One row per pair of students (or a student and the instructor's solution): how many exercises were
    flagged, how many of those match the instructor's solution, the lines matched, the mean similarity;
    pairs whose matches the instructor's solution does not explain first, then by exercises and lines."""
    from grading import similarity as sim

    rows: dict[tuple, dict] = {}
    for p in cell_pairs:
        r = rows.setdefault((p["a"], p["b"]), {"a": p["a"], "b": p["b"], "exercises": 0, "solution_exercises": 0,
                                               "matched_lines": 0, "similarity_sum": 0.0, "cells": []})
        r["exercises"] += 1
        r["solution_exercises"] += bool(p.get("matches_solution"))
        r["matched_lines"] += p["shared"]
        r["similarity_sum"] += p["similarity"]
        r["cells"].append(f"{p['assignment']}/{p['exercise']}")
    out = []
    for r in rows.values():
        mean = r.pop("similarity_sum") / r["exercises"]
        r["mean_similarity"] = round(mean, 3)
        r["with_solution"] = r["b"] == sim.SOLUTION
        r["label"] = ("matches the instructor's solution" if r["solution_exercises"] == r["exercises"] else
                      f"matches the instructor's solution in {r['solution_exercises']} of {r['exercises']} "
                      "exercise(s)" if r["solution_exercises"] else "")
        out.append(r)
    out.sort(key=lambda r: (r["with_solution"], -(r["exercises"] - r["solution_exercises"]), -r["exercises"],
                            -r["matched_lines"], r["a"], r["b"]))
    return out


# ------------------------------------------------------------------ render: plots and the page
def _pyplot():
    """pyplot on the Agg backend (no display is probed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    plt = _pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


BLUE = "#0173b2"  # the first colour of seaborn's colour-blind palette, the course's plots' palette


def plot_scores(report: dict) -> tuple[str, str] | None:
    """(base64 PNG, alt text): every assignment's score distribution: one row per assignment, one column per
    10-point bin of percent (of the points graded so far), the number of submissions written in each cell and
    its shade the share of the assignment's submissions (the colour bar)."""
    rows = [a for a in report["assignments"] if a["submissions"]]
    if not rows:
        return None
    plt = _pyplot()
    from matplotlib.colors import LinearSegmentedColormap

    edges = rows[0]["histogram"]["edges_percent"]
    counts = [a["histogram"]["counts"] for a in rows]
    share = [[c / max(1, a["submissions"]) for c in row] for a, row in zip(rows, counts)]
    fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(rows) + 1.6), layout="constrained")
    image = ax.imshow(share, cmap=LinearSegmentedColormap.from_list("share", ["#ffffff", BLUE]), vmin=0, vmax=1,
                      aspect="auto", interpolation="nearest")
    for i, row in enumerate(counts):
        for j, c in enumerate(row):
            if c:
                ax.text(j, i, str(c), ha="center", va="center", fontsize=7,
                        color="white" if share[i][j] > 0.6 else "black")
    ax.set_xticks(range(len(edges) - 1), [f"{e}-{e + 10}" for e in edges[:-1]], fontsize=7)
    ax.set_yticks(range(len(rows)), [a["name"] for a in rows], fontsize=7)
    ax.set_xlabel("score, % of the points graded so far (10-point bins)", fontsize=8)
    ax.set_ylabel("assignment", fontsize=8)
    ax.set_title("Score distribution: number of submissions per bin", fontsize=9)
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("share of the assignment's submissions", fontsize=7)
    bar.ax.tick_params(labelsize=6)
    alt = "Score distributions, submissions per 10-point bin of percent. " + " ".join(
        f"{a['name']} ({a['submissions']} submissions, median {a['median_percent']}%): "
        + ", ".join(f"{e}-{e + 10}%: {c}" for e, c in zip(edges, row) if c) + "." for a, row in zip(rows, counts))
    return _png(fig), alt


def plot_exercises(report: dict) -> tuple[str, str] | None:
    """(base64 PNG, alt text): each exercise's share of submissions passing all its tests (visible and hidden),
    a horizontal bar per exercise, sorted from the weakest (top), each labelled with its percent and count."""
    bars = []
    for a in report["assignments"]:
        for ex in a["exercises"]:
            p = ex.get("all_tests_passed")
            if p:
                bars.append((100.0 * p["share"], f"{a['name']}: {ex['name']}", p))
    if not bars:
        return None
    bars.sort(key=lambda b: (b[0], b[1]))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 0.19 * len(bars) + 1.3), layout="constrained")
    y = range(len(bars))
    ax.barh(y, [b[0] for b in bars], color=BLUE, height=0.7)
    for i, (value, _, p) in enumerate(bars):
        ax.text(value + 1, i, f"{value:.0f}% ({p['students']}/{p['of']})", va="center", fontsize=6.5)
    ax.set_yticks(y, [b[1] for b in bars], fontsize=6.5)
    ax.invert_yaxis()  # the weakest exercise on top
    ax.set_xlim(0, 125)
    ax.set_xticks(range(0, 101, 20))
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("submissions passing all the exercise's tests, visible and hidden (%)", fontsize=8)
    ax.set_ylabel("assignment: exercise", fontsize=8)
    ax.set_title("Exercises, weakest first", fontsize=9)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)
    alt = "Bar chart of the percent of submissions passing all of each exercise's tests, weakest first: " + "; ".join(
        f"{name}: {value:.0f}% ({p['students']} of {p['of']})" for value, name, p in bars) + "."
    return _png(fig), alt


CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.85em; margin: 0; }
.note { color: #555; font-size: 0.9em; }
.example { font-family: monospace; font-size: 0.85em; overflow-wrap: anywhere; }
img { max-width: 100%; }
td ul { margin: 0; padding-left: 1.1em; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.match { background: #ffe08a; }
table.side { table-layout: fixed; width: 100%; }
table.side td { width: 50%; }
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _share(p) -> str:
    return "-" if not p else f"{100 * p['share']:.0f}% ({p['students']}/{p['of']})"


def _feedback_link(student: str, assignment: str) -> str:
    """A link from report/index.html to the student's feedback pages (feedback/<student>/<assignment>/)."""
    href = f"../feedback/{urllib.parse.quote(student)}/{urllib.parse.quote(assignment)}/"
    return f"<a href='{_e(href)}'>{_e(student)}</a>"


def _needs_help(report: dict) -> list[str]:
    """The report's first section: per assignment who did not submit, scored below the threshold of that
    assignment's maximum, or crashed / timed out (each linked to their feedback pages); the weakest exercises."""
    b = [f"<h2>Who needs help</h2><p class='note'>Per assignment: not submitted, below "
         f"{report['threshold_percent']:g}% of the assignment's maximum (<code>--threshold</code>), and code that "
         "crashed or timed out in a test. Each name links to the student's feedback pages.</p>"]
    b.append("<table><thead><tr><th>assignment</th><th>not submitted</th><th>below threshold</th>"
             "<th>crashed or timed out</th></tr></thead><tbody>")
    for a in report["assignments"]:
        h = a["needs_help"]
        miss = ", ".join(_e(st) for st in h["not_submitted"]) or "-"
        low = ", ".join(f"{_feedback_link(r['student'], a['name'])} ({r['percent']:g}%)" for r in h["below"]) or "-"
        crash = ", ".join(f"{_feedback_link(r['student'], a['name'])} ({_e(', '.join(r['kinds']))})"
                          for r in h["crashed"]) or "-"
        b.append(f"<tr><td>{_e(a['name'])}</td><td>{miss}</td><td>{low}</td><td>{crash}</td></tr>")
    b.append("</tbody></table>")
    b.append("<h2>Weakest exercises</h2>")
    if report["weakest_exercises"]:
        b.append("<ol>" + "".join(f"<li>{_e(w['assignment'])} / {_e(w['exercise'])}: "
                                  f"{100 * w['share']:.0f}% passed</li>" for w in report["weakest_exercises"]) + "</ol>")
    else:
        b.append("<p>None.</p>")
    return b


def _not_graded(report: dict) -> list[str]:
    """A section of its own: who handed something in (or has a folder) but was not graded, why, and what to do;
    each name links to the page that tells the student."""
    rows = report.get("not_graded") or []
    b = ["<h2>Not graded</h2><p class='note'>Handed in, or a folder in <code>submitted/</code>, but not graded "
         "(a symbolic link, an unsafe id, an unreadable, misnamed or missing notebook, the grader's failure): scored "
         "0 in grades.csv until it is fixed and graded again; never counted as not submitted.</p>"]
    if not rows:
        b.append("<p>None.</p>")
        return b
    b.append("<table><thead><tr><th>assignment</th><th>student</th><th>why</th><th>what to do</th></tr></thead>"
             "<tbody>")
    for r in rows:
        b.append(f"<tr><td>{_e(r['assignment'])}</td><td>{_feedback_link(r['student'], r['assignment'])}</td>"
                 f"<td>{_e(r['reason'])}</td><td>{_e(r['fix']) or '-'}</td></tr>")
    b.append("</tbody></table>")
    return b


def _ids(student_ids: list) -> str:
    shown = ", ".join(_e(s) for s in student_ids[:MAX_IDS])
    more = len(student_ids) - MAX_IDS
    return shown + (f" and {more} more: misconceptions.csv" if more > 0 else "")


def _students_misconceptions(report: dict) -> list[str]:
    """Each student who made a named misconception, with all of theirs."""
    rows = report.get("student_misconceptions") or {}
    b = ["<h2>Students and their misconceptions</h2>"]
    if not rows:
        return b + ["<p>No failing test named a misconception.</p>"]
    shown = sorted(rows.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:MAX_STUDENT_ROWS]
    more = (f" The {MAX_STUDENT_ROWS} students with the most are listed here; all {len(rows)} are in report.json "
            "(<code>student_misconceptions</code>).") if len(rows) > MAX_STUDENT_ROWS else ""
    b.append(f"<p class='note'>Every student whose failing tests named a misconception, with all of theirs.{more}"
             "</p><table><thead><tr><th>student</th><th>misconceptions (assignment / exercise: misconception)</th>"
             "</tr></thead><tbody>")
    for st, items in sorted(shown):
        b.append(f"<tr><td>{_e(st)}</td><td>" + "; ".join(
            f"{_e(m['assignment'])} / {_e(m['exercise'])}: <b>{_e(m['misconception'])}</b>" for m in items)
            + "</td></tr>")
    b.append("</tbody></table>")
    return b


def _region(code: str, lines: list) -> str:
    """The matched region of a cell: from its first to its last matched line (at most EVIDENCE_LINES), the
    matched lines highlighted; what lies outside it (the release docstring, unmatched code) is left out."""
    text = code.split("\n")
    if not lines:
        return "<pre>(no line matched)</pre>"
    first, last = min(lines), max(lines)
    last_shown = min(last, first + EVIDENCE_LINES - 1)
    hit = set(lines)
    out = [f"<span class='match'>{_e(t)}</span>" if i in hit else _e(t)
           for i, t in enumerate(text[first:last_shown + 1], first)]
    before = f"[{first} line(s) above]\n" if first else ""
    after = len(text) - 1 - last_shown
    return (f"<pre>{_e(before)}" + "\n".join(out) + (f"\n[{after} line(s) below]" if after > 0 else "")
            + "</pre>")


def _similar(report: dict) -> list[str]:
    """The similarity section: one row per pair of students, then each pair's matched lines side by side."""
    rows = report.get("similar_students") or []
    b = ["<h2>Similar solutions</h2><p class='note'>One row per pair of students whose solution cells are unusually "
         "alike after names, comments and layout are normalised and the release code is removed "
         "(grading/similarity.py): in how many exercises, how many lines matched, the mean similarity (Jaccard "
         "index of the lines left). The instructor's solution takes part as a pseudo-student: a pair whose "
         "matches it explains says \"matches the instructor's solution\" (both handed in a renaming of it), and "
         "a student who handed it in is paired with it. A flag for a person to look at: it changes no grade. "
         "Every flagged cell is in similarity.csv.</p>"]
    if not rows:
        return b + ["<p>No pair flagged.</p>"]
    b.append("<table><thead><tr><th>#</th><th>students</th><th>exercises flagged</th><th>lines matched</th>"
             "<th>mean similarity</th><th></th></tr></thead><tbody>")
    for i, r in enumerate(rows[:TABLE_PAIRS], 1):
        b.append(f"<tr><td class='num'>{i}</td><td>{_e(r['a'])} / {_e(r['b'])}</td>"
                 f"<td class='num'>{r['exercises']}</td><td class='num'>{r['matched_lines']}</td>"
                 f"<td class='num'>{r['mean_similarity']:.2f}</td><td>{_e(r['label'])}</td></tr>")
    b.append("</tbody></table>")
    if len(rows) > TABLE_PAIRS:
        b.append(f"<p class='note'>{len(rows) - TABLE_PAIRS} more pair(s) in similarity.csv.</p>")
    cells: dict[tuple, list] = {}
    for p in report["similarity"]:
        cells.setdefault((p["a"], p["b"]), []).append(p)
    b.append("<h3>Matched lines, side by side</h3><p class='note'>Per pair, its most similar exercises (at most "
             f"{EVIDENCE_CELLS}): each cell from its first to its last matched line, the matched lines "
             "<span class='match'>highlighted</span>; the release code never counts as a match.</p>")
    for i, r in enumerate(rows[:TABLE_PAIRS], 1):
        pairs = cells.get((r["a"], r["b"]), [])
        if not pairs or "code_a" not in pairs[0]:
            continue
        b.append(f"<details><summary>{i}. {_e(r['a'])} / {_e(r['b'])}: {r['exercises']} exercise(s), "
                 f"{r['matched_lines']} line(s) {_e(r['label'])}</summary>")
        for p in pairs[:EVIDENCE_CELLS]:
            note = " (matches the instructor's solution)" if p.get("matches_solution") else ""
            b.append(f"<p>{_e(p['assignment'])} / {_e(p['exercise'])}: similarity {p['similarity']:.2f}, "
                     f"{p['shared']} line(s){_e(note)}</p><table class='side'><tr><th>{_e(p['a'])}</th>"
                     f"<th>{_e(p['b'])}</th></tr><tr><td>{_region(p['code_a'], p.get('lines_a') or [])}</td>"
                     f"<td>{_region(p['code_b'], p.get('lines_b') or [])}</td></tr></table>")
        b.append("</details>")
    return b


def render(report: dict, plots: dict) -> str:
    """The page: a sanitised body (grading.sanitise, the feedback pages' sanitiser), then the plots put in where their markers are."""
    from grading.sanitise import sanitise

    nonce = secrets.token_hex(8)
    marks = {}

    def plot(key):
        if key not in plots or plots[key] is None:
            return ""
        mark = f"@@plot-{nonce}-{len(marks)}@@"
        marks[mark] = plots[key]
        return f"<p>{mark}</p>"

    b = [f"<h1>Class report</h1><p class='note'>{report['students']} students, {report['submissions']} submissions, "
         f"generated {_e(report['generated'])} from the gradebook and the autograded notebooks "
         "(<code>python -m grading report</code> rebuilds it). Student text and code below are shown as text.</p>"]
    b.extend(_needs_help(report))
    b.extend(_not_graded(report))
    b.append("<h2>Assignments</h2><p class='note'>Percentages are of the points graded so far: while an "
             "assignment's hand-graded cells are pending, its score and maximum are its autograded part's "
             "(as the LMS files post it), never the pending points counted as 0.</p>"
             "<table><thead><tr><th>assignment</th><th>submissions</th><th>max points</th>"
             "<th>median</th><th>mean</th></tr></thead><tbody>")
    for a in report["assignments"]:
        top = f"{a['max_score']:g}"
        if a.get("pending_submissions"):
            top = (f"{a['graded_max']:g} autograded; {a['max_score'] - a['graded_max']:g} hand-graded pending "
                   f"({a['pending_submissions']} submission(s))")
        b.append(f"<tr><td>{_e(a['name'])}</td><td class='num'>{a['submissions']}</td><td class='num'>"
                 f"{_e(top)}</td><td class='num'>{_e(a['median_percent'])}%</td>"
                 f"<td class='num'>{_e(a['mean_percent'])}%</td></tr>")
    b.append("</tbody></table>")
    b.append(f"<div class='plots'>{plot('exercises')}{plot('scores')}</div>")
    b.append(f"<p class='note'>Time per exercise: {_e(report['timing'])}. A misconception's students are listed "
             f"by id (up to {MAX_IDS} on this page; all of them in misconceptions.csv), with a link that writes to "
             "them when the roster gives their e-mail addresses; the example message has its student's id "
             "removed.</p>")
    for a in report["assignments"]:
        b.append(f"<h2>{_e(a['name'])}</h2>")
        b.append("<table><thead><tr><th>exercise</th><th>points</th><th>passed visible tests</th>"
                 "<th>passed hidden tests</th><th>misconceptions seen (students; one example message)</th>"
                 "<th>other failures (students)</th><th>time, median / max (s)</th></tr></thead><tbody>")
        for ex in a["exercises"]:
            mis = "".join(f"<li><b>{_e(m['name'])}</b>: {m['students']} ({_ids(m['student_ids'])})"
                          + (f" <a href='{_e(m['mailto'])}'>write to them</a>" if m.get("mailto") else "")
                          + f"<br><span class='example'>{_e(m['example'])}</span></li>" for m in ex["misconceptions"])
            other = "".join(f"<li>{_e(o['kind'])}: {o['students']}</li>" for o in ex["other_failures"])
            sec = ex["seconds"]
            timing = "-" if not sec else f"{sec['median']:.2f} / {sec['max']:.2f}"
            manual = " (graded by hand)" if ex["kinds"] == ["manual"] else ""
            if ex.get("manual_pending"):
                manual += f" (pending for {ex['manual_pending']})"
            b.append(f"<tr><td>{_e(ex['name'])}{manual}</td><td class='num'>{ex['points']:g}</td>"
                     f"<td>{_share(ex.get('visible_passed'))}</td><td>{_share(ex.get('hidden_passed'))}</td>"
                     f"<td>{'<ul>' + mis + '</ul>' if mis else '-'}</td>"
                     f"<td>{'<ul>' + other + '</ul>' if other else '-'}"
                     f"</td><td class='num'>{timing}</td></tr>")
        b.append("</tbody></table>")
    b.extend(_students_misconceptions(report))
    b.extend(_similar(report))
    body = sanitise("".join(b))
    for mark, (png, alt) in marks.items():
        body = body.replace(mark, f'<img src="data:image/png;base64,{png}" alt="{_e(alt)}">')
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Class report</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>")


# ------------------------------------------------------------------ build: the files
def _roster(root: str, roster_path: str | None, lms_ids: str | None, match: str | None = None) -> dict:
    """Who is who in the LMS: {'roster': lms.Roster, 'source': where from}, {'nbgrader': True} (``--lms-ids
    nbgrader``), or {'note'/'error': why there is none}. ``roster_path``, else ``root/roster.csv``, else the demo
    class's own; each may be this course's roster or the LMS's gradebook export (``match``: --roster-match)."""
    from grading import lms

    default = os.path.join(root, "roster.csv")
    # the demo class is a course of its own (grading/demo_class/, pipeline.DEMO_ROOT); an earlier version
    # generated it into submitted/ with this marker
    is_demo = (os.path.basename(os.path.normpath(root)) == "demo_class"
               or os.path.exists(os.path.join(root, "submitted", ".demo-class")))
    path = roster_path or (default if os.path.exists(default) else
                           DEMO_ROSTER if is_demo and os.path.exists(DEMO_ROSTER) else None)
    if path is None:
        if lms_ids == "nbgrader":
            return {"nbgrader": True, "source": "nbgrader ids (--lms-ids nbgrader)"}
        return {"note": f"no roster at {default}: the Canvas and Moodle files are not written. Write it "
                        f"(header {','.join(lms.ROSTER_FIELDS)}), or put the LMS's own gradebook export there "
                        "(Canvas or Moodle; grading/docs/site-and-collect.md), or pass --lms-ids nbgrader to use "
                        "the nbgrader ids as the LMS ids"}
    try:
        return {"roster": lms.read_roster(path, match), "source": path}
    except lms.RosterError as err:
        return {"error": str(err)}


def _lms(out: str, data: dict, who: dict, pending: str = "autograded", missing: str = "blank") -> dict:
    """Write the Canvas and Moodle files (and what each Moodle grade item's maximum must be) for every student of
    ``data`` (the class and the roster); {'files': [...]} or {'error'/'note': why not}. Stale files are removed."""
    from grading import lms

    files = {"canvas": os.path.join(out, "canvas_grades.csv"), "moodle": os.path.join(out, "moodle_grades.csv"),
             "moodle_items": os.path.join(out, "moodle_grade_items.csv")}
    for f in files.values():
        if os.path.exists(f):
            os.remove(f)
    if "note" in who or "error" in who:
        return {k: v for k, v in who.items() if k in ("note", "error")}
    students = data["students"]
    roster = lms.nbgrader_roster(students) if who.get("nbgrader") else who["roster"]
    try:
        points, grades = lms.postable(data, pending)
        lms.write_canvas(files["canvas"], points, students, grades, roster, missing=missing)
        lms.write_moodle(files["moodle"], points, students, grades, roster, missing=missing)
        lms.write_moodle_items(files["moodle_items"], points, roster)
    except lms.RosterError as err:
        for f in files.values():
            if os.path.exists(f):
                os.remove(f)
        return {"error": str(err)}
    return {"roster": who["source"], "files": list(files.values())}


def build(root: str = GRADING_DIR, threshold: float = 50.0, roster: str | None = None, lms_ids: str | None = None,
          db_url: str | None = None, data: dict | None = None,
          pending: str = "autograded", missing: str = "blank", roster_match: str | None = None) -> dict:
    """Collect, analyse, render and write everything; {'paths': {...}, 'lms': {...}, 'seconds': ...}. The
    class is the one graded (:func:`given`: its assignments and students from grades.csv, and every roster
    student)."""
    t0 = time.perf_counter()
    data = collect(root, db_url) if data is None else data
    who = _roster(root, roster, lms_ids, roster_match)
    data = given(data, read_class(root), who.get("roster") or ())
    out = os.path.join(root, REPORT_DIR_NAME)
    os.makedirs(out, exist_ok=True)
    t1 = time.perf_counter()
    result = write(out, data, threshold, emails=roster_emails(who))
    result["lms"] = _lms(out, data, who, pending=pending, missing=missing)
    result["seconds"] = {"collect": round(t1 - t0, 2), "render": round(result.pop("render_seconds"), 2)}
    return result


def write(out: str, data: dict, threshold: float = 50.0, emails: dict | None = None) -> dict:
    """Analyse and render ``data`` into ``out``: index.html, report.json, similarity.csv, misconceptions.csv.
    ``emails``: {student: e-mail address} from the roster, for the mailto links (none without it)."""
    from grading import csvsafe

    t = time.perf_counter()
    pairs = similarity(data)
    report = analyse(data, threshold, pairs, emails=emails)
    plots = {"scores": plot_scores(report), "exercises": plot_exercises(report)}
    page = render(report, plots)
    paths = {"html": os.path.join(out, "index.html"), "json": os.path.join(out, "report.json"),
             "similarity": os.path.join(out, "similarity.csv"),
             "misconceptions": os.path.join(out, "misconceptions.csv")}
    with open(paths["html"], "w", encoding="utf-8") as fh:
        fh.write(page)
    slim = {**report, "similarity": [{k: v for k, v in p.items() if not k.startswith("code_")} for p in pairs]}
    with open(paths["json"], "w", encoding="utf-8") as fh:
        json.dump(slim, fh, indent=1)
    with open(paths["similarity"], "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)  # every cell neutralised against formulas (issue 57)
        w.writerow(["assignment", "exercise", "student_a", "student_b", "similarity", "shared_lines",
                    "matches_instructor_solution", "lines_a", "lines_b"])
        for p in pairs:
            w.writerow([p["assignment"], p["exercise"], p["a"], p["b"], p["similarity"], p["shared"],
                        "yes" if p.get("matches_solution") else "no",
                        " ".join(str(n + 1) for n in p.get("lines_a", [])),
                        " ".join(str(n + 1) for n in p.get("lines_b", []))])
    with open(paths["misconceptions"], "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)
        w.writerow(["assignment", "exercise", "misconception", "students", "student_ids", "emails"])
        for a in report["assignments"]:
            for ex in a["exercises"]:
                for m in ex["misconceptions"]:
                    w.writerow([a["name"], ex["name"], m["name"], m["students"], " ".join(m["student_ids"]),
                                " ".join((emails or {}).get(st, "") for st in m["student_ids"]
                                         if (emails or {}).get(st))])
    return {"paths": paths, "report": slim, "render_seconds": time.perf_counter() - t}


def roster_emails(who: dict) -> dict:
    """{student: e-mail} from the roster the LMS files use (:func:`_roster`); {} when there is none."""
    return {s: row.get("email", "") for s, row in (who.get("roster") or {}).items() if row.get("email")}


def after_grading(log, root: str = GRADING_DIR) -> int:
    """The last step of ``python -m grading grade``: rebuild the report and the LMS files, print where they are.
    Returns 0, or 1 when the report could not be built (the grades in grades.csv stand either way)."""
    try:
        # the course just graded (``root``: the demo class's own, grading/demo_class/); an LMS export as the
        # roster is matched on COURSE_ROSTER_MATCH (lms.read_roster)
        result = build(root=root)
    except Exception as err:  # noqa: BLE001 - the grades are written; say what failed
        log(f"[report] ERROR: the class report could not be built ({type(err).__name__}: {err}); "
            "grades.csv stands; rerun `python -m grading report`")
        return 1
    _log_result(result, log)
    return 0


def _rel(path: str) -> str:
    return os.path.relpath(path, REPO_DIR) if path.startswith(REPO_DIR) else path


def _log_result(result: dict, log) -> None:
    p = result["paths"]
    log(f"[report] class report: {_rel(p['html'])} (numbers: {_rel(p['json'])}); "
        f"similarity: {_rel(p['similarity'])} ({len(result['report']['similarity'])} flagged pair(s))")
    lms_result = result["lms"]
    if "files" in lms_result:
        log(f"[report] LMS import files (roster: {_rel(lms_result['roster'])}): "
            + ", ".join(_rel(f) for f in lms_result["files"]))
        log("[report] Moodle: set each grade item's maximum grade as moodle_grade_items.csv gives it before importing "
            "moodle_grades.csv (its import has no points row)")
    elif "error" in lms_result:
        log(f"[report] ERROR: LMS files not written: {lms_result['error']}")
    else:
        log(f"[report] LMS files not written: {lms_result['note']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grading report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser) -> None:
    parser.add_argument("--threshold", type=float, default=50.0,
                        help="who needs help: the students below this percent of each assignment's maximum (its "
                             "autograded part's while hand grading is pending; default 50)")
    parser.add_argument("--roster", default=None,
                        help="roster CSV for the LMS files (default: grading/roster.csv; the demo class: "
                             "grading/demo/roster.csv)")
    parser.add_argument("--roster-match", default=None,
                        choices=["canvas_id", "email", "idnumber", "sis_login_id", "sis_user_id"],  # lms.MATCH
                        help="when the roster is the LMS's gradebook export: the column that holds the nbgrader "
                             "ids (Canvas: sis_login_id (default), sis_user_id, canvas_id; Moodle: idnumber "
                             "(default), email); a student without it is an error naming them")
    parser.add_argument("--lms-ids", choices=["nbgrader"], default=None,
                        help="without a roster, write the LMS files with the nbgrader ids as the LMS ids")
    parser.add_argument("--pending", choices=["autograded", "refuse"], default="autograded",
                        help="hand-graded cells not graded yet: post each such assignment's autograded part with "
                             "its own maximum (default), or write no LMS file and list the pending cells")
    parser.add_argument("--missing", choices=["blank", "zero", "excused"], default="blank",
                        help="a student who did not submit: blank cell (default), 0, or EX (excused; Canvas)")
    parser.add_argument("--demo", action="store_true",
                        help="the demo class's course (grading/demo_class/, graded by `make grade` when "
                             "grading/submitted/ holds no class); the default when only it has a gradebook")


def run(args) -> int:
    if not 0 <= args.threshold <= 100:
        print(f"error: --threshold is a percent between 0 and 100, got {args.threshold:g}", file=sys.stderr)
        return 2
    root = GRADING_DIR
    demo_root = os.path.join(GRADING_DIR, "demo_class")
    if getattr(args, "demo", False) or (not os.environ.get("COURSE_DB_URL")
                                        and not os.path.exists(os.path.join(GRADING_DIR, "gradebook.db"))
                                        and os.path.exists(os.path.join(demo_root, "gradebook.db"))):
        root = demo_root
        os.environ["COURSE_ROOT"] = root  # nbgrader's config (its gradebook URL) follows, as in the grading run
        print(f"[report] the demo class's course: {_rel(root)}")
    result = build(root=root, threshold=args.threshold, roster=args.roster, lms_ids=args.lms_ids,
                   pending=getattr(args, "pending", "autograded"), missing=getattr(args, "missing", "blank"),
                   roster_match=getattr(args, "roster_match", None))
    _log_result(result, print)
    print(f"[report] built in {sum(result['seconds'].values()):.1f} s")
    return 2 if "error" in result["lms"] else 0
