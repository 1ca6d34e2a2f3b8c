"""Grades for the LMS: a Canvas gradebook import CSV and a Moodle grade import CSV, from the gradebook.

No network call: the instructor uploads the file (Canvas: Grades > Import; Moodle: Grades >
Import > CSV file).

The roster (``grading/roster.csv``, git-ignored like every CSV in ``grading/``) maps each nbgrader
student id to the LMS's ids, one row per student, UTF-8, a header row naming the columns:

    nbgrader_id,name,canvas_id,sis_user_id,sis_login_id,section,moodle_idnumber,email
    s001,"Doe, Jane",48211,2024001,jdoe,Section A,2024001,jane.doe@example.edu

``nbgrader_id`` is required; every other column may be empty. Canvas matches a row by its ``ID``
(``canvas_id``) or ``SIS User ID``; Moodle by the column chosen at import ("ID number" ->
``useridnumber`` or "Email address" -> ``useremail``). A student of the gradebook missing from the
roster is an error that names them (:class:`RosterError`): a file with a student left out would
look complete in the LMS.

Canvas's layout (its own gradebook export, which its import reads back): the columns ``Student``,
``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``, then one column per assignment; the second
row starts with ``Points Possible`` and gives each assignment's points; then one row per student.
A column whose header is not an existing assignment's ("Name (id)") creates a new assignment on
import. Moodle's CSV import has no points row (the grade item holds its maximum): ``First name``,
``Last name``, ``ID number``, ``Email address``, then one column per assignment.

Hand-graded cells not graded yet are never posted as 0 (:func:`postable`): by default an assignment
with any pending cell is posted as its autograded part, score and points possible both without the
hand-graded cells; ``--pending refuse`` writes no file and lists the pending cells. A student who did
not submit is blank by default (``--missing zero`` posts 0, ``--missing excused`` posts Canvas's ``EX``,
blank in Moodle's file). A
roster row without the id the LMS matches on (Canvas: ID or SIS User ID; Moodle: ID number or email)
is an error naming the student. Every cell is neutralised against spreadsheet formulas (:func:`safe`).

Does NOT cover: uploading, letter grades, late penalties beyond what the gradebook holds.
"""
from __future__ import annotations

import csv
import os

from grading import csvsafe

ROSTER_FIELDS = ("nbgrader_id", "name", "canvas_id", "sis_user_id", "sis_login_id", "section",
                 "moodle_idnumber", "email")
CANVAS_HEADER = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_HEADER = ("First name", "Last name", "ID number", "Email address")


class RosterError(ValueError):
    """The roster is missing, malformed, or lacks students of the gradebook."""


class PendingError(RosterError):
    """``--pending refuse`` and hand-graded cells are not graded yet."""


MISSING = {"blank": "", "zero": "0", "excused": "EX"}


def safe(value) -> str:
    """A CSV cell a spreadsheet will not run as a formula (``grading.csvsafe``: a leading = + - @ tab or CR
    gets a quote; a plain number is left as it is)."""
    return str(csvsafe.safe_cell("" if value is None else str(value)))


def postable(data: dict, pending: str = "autograded") -> tuple[list, dict]:
    """([(assignment, points possible)], {(assignment, student): score}) that post what the instructor means.

    An assignment with any hand-graded cell still to grade is posted as its autograded part (its
    maximum and every student's score without the hand-graded cells); ``pending="refuse"`` raises
    PendingError listing the pending cells. A student with no submission has no entry (see MISSING)."""
    manual = {a["name"]: {c["key"]: c["points"] for c in a["cells"] if c["kind"] == "manual"}
              for a in data["assignments"]}
    waiting = [(r["assignment"], r["student"], k) for r in data["submissions"] for k in r.get("pending", ())]
    if waiting and pending == "refuse":
        listed = "; ".join(f"{a} {s} {k}" for a, s, k in waiting)
        raise PendingError(f"{len(waiting)} hand-graded cell(s) not graded yet, no LMS file written "
                           f"(--pending refuse): {listed}; grade them (nbgrader formgrader) or use --pending autograded")
    partial = {a for a, _, _ in waiting}
    points = [(a["name"], a["max_score"] - sum(manual[a["name"]].values()) if a["name"] in partial else a["max_score"])
              for a in data["assignments"]]
    grades = {}
    for r in data["submissions"]:
        a = r["assignment"]
        score = r["score"]
        if a in partial:
            score -= sum(r["cells"].get(k, 0.0) for k in manual[a])
        grades[(a, r["student"])] = score
    return points, grades


def read_roster(path: str) -> dict[str, dict]:
    """{nbgrader id: row} from a roster CSV; raises RosterError saying what is wrong and what was expected."""
    if not os.path.isfile(path):
        raise RosterError(f"no roster at {path}: expected a CSV with the header "
                          f"{','.join(ROSTER_FIELDS)} (one row per student; see grading/docs/after-grading-report.md)")
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in reader.fieldnames or []]
        if "nbgrader_id" not in header:
            raise RosterError(f"{path}: the header {header} has no 'nbgrader_id' column; expected "
                              f"{','.join(ROSTER_FIELDS)}")
        unknown = set(header) - set(ROSTER_FIELDS)
        if unknown:
            raise RosterError(f"{path}: unknown column(s) {sorted(unknown)}; expected {','.join(ROSTER_FIELDS)}")
        roster: dict[str, dict] = {}
        for line, row in enumerate(reader, start=2):
            row = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
            sid = row.get("nbgrader_id", "")
            if not sid:
                raise RosterError(f"{path}, line {line}: empty nbgrader_id")
            if sid in roster:
                raise RosterError(f"{path}, line {line}: nbgrader_id {sid!r} appears twice")
            roster[sid] = {f: row.get(f, "") for f in ROSTER_FIELDS}
    return roster


def nbgrader_roster(students) -> dict[str, dict]:
    """A roster that uses the nbgrader id as every LMS id (``--lms-ids nbgrader``: the instructor's explicit choice)."""
    return {s: {**{f: "" for f in ROSTER_FIELDS}, "nbgrader_id": s, "name": s, "sis_user_id": s, "sis_login_id": s,
                "moodle_idnumber": s} for s in students}


def check_roster(roster: dict, students, where: str = "the roster") -> None:
    missing = sorted(set(students) - set(roster))
    if missing:
        raise RosterError(f"{len(missing)} student(s) of the gradebook are not in {where}: {', '.join(missing)}; "
                          "add a row for each (nbgrader_id and their LMS ids), or the LMS file would leave them out")


def check_ids(roster: dict, students, fields: tuple, lms: str) -> None:
    """Every student has one of the ids ``lms`` matches on, or RosterError naming them."""
    lacking = [f"{roster[s]['name'] or s} ({s})" for s in students if not any(roster[s].get(f) for f in fields)]
    if lacking:
        raise RosterError(f"{len(lacking)} student(s) have none of the ids {lms} matches on "
                          f"({' or '.join(fields)}) in the roster: {', '.join(lacking)}; expected one per student, "
                          f"or {lms} would skip or mismatch the row")


def _score(grades: dict, assignment: str, student: str, missing: str = "blank") -> str:
    if missing not in MISSING:
        raise ValueError(f"missing={missing!r}: expected one of {', '.join(MISSING)}")
    score = grades.get((assignment, student))
    return MISSING[missing] if score is None else f"{score:g}"


def write_canvas(path: str, assignments: list[tuple[str, float]], students: list[str], grades: dict,
                 roster: dict, missing: str = "blank") -> str:
    """Canvas gradebook import CSV. ``assignments``: [(name, points possible)]; ``grades``: {(a, s): score}."""
    check_roster(roster, students)
    check_ids(roster, students, ("canvas_id", "sis_user_id"), "Canvas")
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)  # every cell neutralised against formulas (issue 57)
        w.writerow([*CANVAS_HEADER, *(a for a, _ in assignments)])
        w.writerow(["Points Possible", "", "", "", "", *(f"{p:g}" for _, p in assignments)])
        for s in students:
            r = roster[s]
            w.writerow([*(safe(x) for x in (r["name"] or s, r["canvas_id"], r["sis_user_id"], r["sis_login_id"],
                                            r["section"])), *(_score(grades, a, s, missing) for a, _ in assignments)])
    return path


def _split_name(name: str) -> tuple[str, str]:
    """("First", "Last") from "Last, First" or "First Last"."""
    if "," in name:
        last, first = (p.strip() for p in name.split(",", 1))
        return first, last
    parts = name.split()
    return (" ".join(parts[:-1]), parts[-1]) if len(parts) > 1 else (name, "")


def write_moodle(path: str, assignments: list[tuple[str, float]], students: list[str], grades: dict,
                 roster: dict, missing: str = "blank") -> str:
    """Moodle grade import CSV (map "ID number" to useridnumber, or "Email address" to useremail, at import)."""
    check_roster(roster, students)
    check_ids(roster, students, ("moodle_idnumber", "email"), "Moodle")
    if missing == "excused":  # EX is Canvas's excused mark; Moodle's CSV import has none: left blank
        missing = "blank"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)  # every cell neutralised against formulas (issue 57)
        w.writerow([*MOODLE_HEADER, *(a for a, _ in assignments)])
        for s in students:
            r = roster[s]
            first, last = _split_name(r["name"] or s)
            w.writerow([*(safe(x) for x in (first, last, r["moodle_idnumber"], r["email"])),
                        *(_score(grades, a, s, missing) for a, _ in assignments)])
    return path
