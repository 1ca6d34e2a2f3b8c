"""Grades for the LMS: a Canvas gradebook import CSV and a Moodle grade import CSV, from the gradebook.

No network call: the instructor uploads the file (Canvas: Grades > Import; Moodle: Grades >
Import > CSV file).

The roster (``grading/roster.csv``, git-ignored like every CSV in ``grading/``) maps each nbgrader
student id to the LMS's ids, one row per student, UTF-8, a header row naming the columns:

    nbgrader_id,name,canvas_id,sis_user_id,sis_login_id,section,moodle_idnumber,email
    s001,"Doe, Jane",48211,2024001,jdoe,Section A,2024001,jane.doe@example.edu

``nbgrader_id`` is required; every other column may be empty. The roster may instead be the LMS's own
gradebook export (Canvas: Grades > Export; Moodle: Grades > Export > Plain text file), read as it is
downloaded, the nbgrader ids in the column the instructor names (``--roster-match``, :data:`MATCH`); the
files then write back the export's own assignment headers, and Canvas's Points Possible row never changes
an existing assignment's points (:func:`canvas_points`); ``moodle_grade_items.csv`` gives each Moodle
grade item's maximum (:func:`write_moodle_items`). Canvas matches a row by its ``ID``
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
import re

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


class Roster(dict):
    """{nbgrader id: row of ROSTER_FIELDS}, and what the file it came from says about the LMS's own columns:
    ``lms`` ("roster", "canvas" or "moodle"), ``match`` (the column the nbgrader ids were matched on),
    ``columns`` ({assignment name: the export's own header}) and ``points`` ({assignment name: the export's
    Points Possible cell, Canvas only})."""

    def __init__(self, rows=(), lms: str = "roster", match: str = "nbgrader_id", columns=None, points=None):
        super().__init__(rows)
        self.lms, self.match = lms, match
        self.columns = dict(columns or {})
        self.points = dict(points or {})


# --roster-match: which column of an LMS's gradebook export holds the nbgrader ids (the instructor says which)
MATCH = {"canvas": {"sis_login_id": "SIS Login ID", "sis_user_id": "SIS User ID", "canvas_id": "ID"},
         "moodle": {"idnumber": "ID number", "email": "Email address"}}
DEFAULT_MATCH = {"canvas": "sis_login_id", "moodle": "idnumber"}
CANVAS_TEST_STUDENT = "Student, Test"  # the test student Canvas's "Student View" adds to every course
_CANVAS_COLUMN = re.compile(r"^(?P<name>.*\S)\s+\((?P<id>\d+)\)$")  # an assignment column: "Name (id)"
# a grade item's column: "Assignment: Name (Real)"
_MOODLE_ITEM = re.compile(r"^(?:[^:]+:\s*)?(?P<name>.*?)\s*\((?:Real|Percentage|Letter)\)$")


def roster_kind(header: list[str]) -> str:
    """"roster" (this course's own roster), "canvas" (Canvas's gradebook export) or "moodle" (Moodle's
    grade export, plain text): by the header, else RosterError saying what each starts with."""
    if "nbgrader_id" in header:
        return "roster"
    if header[:4] == ["Student", "ID", "SIS User ID", "SIS Login ID"] and "Section" in header:
        return "canvas"
    if header[:2] == ["First name", "Last name"] and ("ID number" in header or "Email address" in header):
        return "moodle"
    raise RosterError(f"the header {header[:8]} has no 'nbgrader_id' column; expected {','.join(ROSTER_FIELDS)} "
                      "(this course's roster), or the header of Canvas's gradebook export (Student, ID, SIS User ID, "
                      "SIS Login ID, [Integration ID,] Section, then the assignments) or of Moodle's grade export as "
                      "a CSV file (First name, Last name, ID number, ..., Email address, then the grade items)")


def read_roster(path: str, match: str | None = None) -> Roster:
    """{nbgrader id: row} from this course's roster CSV, or from the LMS's own gradebook export (Canvas:
    Grades > Export; Moodle: Grades > Export > Plain text file), told apart by the header. ``match``: the
    export's column that holds the nbgrader ids (:data:`MATCH`; else ``COURSE_ROSTER_MATCH``, which the grading
    run, its report and ``collect`` read too; else :data:`DEFAULT_MATCH`). Raises
    RosterError saying what is wrong and what was expected (a student without that id is named)."""
    if not os.path.isfile(path):
        raise RosterError(f"no roster at {path}: expected a CSV with the header "
                          f"{','.join(ROSTER_FIELDS)} (one row per student), or the LMS's own gradebook export "
                          "(Canvas or Moodle; see grading/docs/site-and-collect.md)")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            lines = list(csv.reader(fh))
    except (UnicodeDecodeError, csv.Error) as err:
        raise RosterError(f"{path}: not a UTF-8 CSV file ({err}); save it as CSV UTF-8 and try again") from None
    if not lines:
        raise RosterError(f"{path} is empty: expected a header row and one row per student")
    header = [h.strip() for h in lines[0]]
    try:
        kind = roster_kind(header)
    except RosterError as err:
        raise RosterError(f"{path}: {err}") from None
    if kind == "roster":
        if match not in (None, "nbgrader_id"):
            raise RosterError(f"--roster-match {match}: {path} is this course's roster, whose nbgrader_id column "
                              "is the nbgrader id; --roster-match is for an LMS's gradebook export")
        return _own_roster(path, header, lines[1:])
    return _export_roster(path, kind, header, lines[1:],
                          match or os.environ.get("COURSE_ROSTER_MATCH") or DEFAULT_MATCH[kind])


def _own_roster(path: str, header: list[str], lines: list[list[str]]) -> Roster:
    unknown = set(header) - set(ROSTER_FIELDS)
    if unknown:
        raise RosterError(f"{path}: unknown column(s) {sorted(unknown)}; expected {','.join(ROSTER_FIELDS)}")
    roster = Roster()
    for line, cells in enumerate(lines, start=2):
        if not any(c.strip() for c in cells):
            continue
        row = {h: (cells[i] if i < len(cells) else "").strip() for i, h in enumerate(header)}
        sid = row.get("nbgrader_id", "")
        if not sid:
            raise RosterError(f"{path}, line {line}: empty nbgrader_id")
        if sid in roster:
            raise RosterError(f"{path}, line {line}: nbgrader_id {sid!r} appears twice")
        roster[sid] = {f: row.get(f, "") for f in ROSTER_FIELDS}
    return roster


def _export_roster(path: str, kind: str, header: list[str], lines: list[list[str]], match: str) -> Roster:
    """A Canvas or Moodle gradebook export as a roster: every student row, matched on ``match``."""
    if match not in MATCH[kind]:
        raise RosterError(f"--roster-match {match}: {path} is {kind.capitalize()}'s gradebook export, whose "
                          f"nbgrader ids can be in: {', '.join(f'{k} ({v})' for k, v in MATCH[kind].items())}")
    at = {h: i for i, h in reversed(list(enumerate(header)))}  # a header's first column
    columns, points = {}, {}
    first_item = (at["Section"] + 1) if kind == "canvas" else 2
    for i, h in enumerate(header[first_item:], start=first_item):
        m = (_CANVAS_COLUMN if kind == "canvas" else _MOODLE_ITEM).match(h)
        if m and h not in ROSTER_NAMES[kind]:
            columns.setdefault(m.group("name").strip(), h)
    roster = Roster(lms=kind, match=match, columns=columns, points=points)
    lacking = []
    for line, cells in enumerate(lines, start=2):
        cell = {h: (cells[i] if i < len(cells) else "").strip() for h, i in at.items()}
        if kind == "canvas":
            name = cell["Student"]
            if (cells[0] if cells else "").strip() == "Points Possible":
                points = {a: cell[h] for a, h in columns.items()}
                roster.points = points
                continue
            if not name and not any(cell[h] for h in ("ID", "SIS User ID", "SIS Login ID")):
                continue  # a row of the export that is no student ("Manual Posting")
            if name == CANVAS_TEST_STUDENT and not (cell["SIS User ID"] or cell["SIS Login ID"]):
                continue  # Canvas's own test student (Student View)
            row = {"name": name, "canvas_id": cell["ID"], "sis_user_id": cell["SIS User ID"],
                   "sis_login_id": cell["SIS Login ID"], "section": cell["Section"]}
        else:
            if not any(c.strip() for c in cells):
                continue
            first, last = cell["First name"], cell["Last name"]
            name = f"{last}, {first}" if first and last else (first or last)
            row = {"name": name, "moodle_idnumber": cell.get("ID number", ""),
                   "email": cell.get("Email address", "")}
        row = {**{f: "" for f in ROSTER_FIELDS}, **row}
        sid = cell.get(MATCH[kind][match], "")
        if not sid:
            lacking.append(f"{name or '(no name)'} (line {line})")
            continue
        if sid in roster:
            raise RosterError(f"{path}, line {line}: {name} has the {MATCH[kind][match]} {sid!r} of "
                              f"{roster[sid]['name']}; --roster-match {match} needs it unique")
        roster[sid] = {**row, "nbgrader_id": sid}
    if lacking:
        raise RosterError(f"{path}: {len(lacking)} student(s) of the {kind.capitalize()} export have no "
                          f"{MATCH[kind][match]} (--roster-match {match}, the column that holds the nbgrader ids): "
                          f"{', '.join(lacking)}; fill it in the LMS and export again, or choose the column that holds "
                          f"the nbgrader ids (--roster-match {' | '.join(MATCH[kind])})")
    return roster


# an export's columns that are the student's, not grade items
ROSTER_NAMES = {"canvas": set(CANVAS_HEADER) | {"Integration ID"},
                "moodle": {"First name", "Last name", "ID number", "Institution", "Department", "Email address"}}


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


def canvas_points(assignments: list[tuple[str, float]], roster: dict) -> list[str]:
    """The Points Possible row's cell of each assignment. A column the roster's Canvas export already has (an
    existing Canvas assignment) gets the export's own value, unchanged, and a posted maximum that differs from
    it is a RosterError naming the assignment (the import would otherwise change the assignment's points, or
    post scores out of another maximum); a new column gets the posted maximum (Canvas creates the assignment
    with it)."""
    columns, points = getattr(roster, "columns", {}), getattr(roster, "points", {})
    cells, differ = [], []
    for a, p in assignments:
        if getattr(roster, "lms", "") == "canvas" and a in columns:
            given = points.get(a, "")
            try:
                same = abs(float(given) - p) < 1e-9
            except ValueError:
                same = False
            if not same:
                differ.append(f"{columns[a]}: {given or 'no value'} in Canvas, {p:g} posted")
            cells.append(given)
        else:
            cells.append(f"{p:g}")
    if differ:
        raise RosterError(f"{len(differ)} Canvas assignment(s) have other points than the grades posted: "
                          f"{'; '.join(differ)}. The file would change their points or post scores out of another "
                          "maximum: set each assignment's points in Canvas to the posted maximum and export again "
                          "(a maximum without hand-graded cells means they are still to grade: grade them, or "
                          "post later)")
    return cells


def write_canvas(path: str, assignments: list[tuple[str, float]], students: list[str], grades: dict,
                 roster: dict, missing: str = "blank") -> str:
    """Canvas gradebook import CSV. ``assignments``: [(name, points possible)]; ``grades``: {(a, s): score}.
    A roster read from Canvas's export gives each existing assignment's column its own header ("Name (id)")
    and Points Possible cell (:func:`canvas_points`)."""
    check_roster(roster, students)
    check_ids(roster, students, ("canvas_id", "sis_user_id"), "Canvas")
    points = canvas_points(assignments, roster)
    columns = getattr(roster, "columns", {}) if getattr(roster, "lms", "") == "canvas" else {}
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)  # every cell neutralised against formulas (issue 57)
        w.writerow([*CANVAS_HEADER, *(columns.get(a, a) for a, _ in assignments)])
        w.writerow(["Points Possible", "", "", "", "", *points])
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
    """Moodle grade import CSV (map "ID number" to useridnumber, or "Email address" to useremail, at import).
    A roster read from Moodle's export gives each existing grade item's column the export's own header."""
    check_roster(roster, students)
    check_ids(roster, students, ("moodle_idnumber", "email"), "Moodle")
    if missing == "excused":  # EX is Canvas's excused mark; Moodle's CSV import has none: left blank
        missing = "blank"
    columns = getattr(roster, "columns", {}) if getattr(roster, "lms", "") == "moodle" else {}
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)  # every cell neutralised against formulas (issue 57)
        w.writerow([*MOODLE_HEADER, *(columns.get(a, a) for a, _ in assignments)])
        for s in students:
            r = roster[s]
            first, last = _split_name(r["name"] or s)
            w.writerow([*(safe(x) for x in (first, last, r["moodle_idnumber"], r["email"])),
                        *(_score(grades, a, s, missing) for a, _ in assignments)])
    return path


MOODLE_ITEMS_HEADER = ("column of moodle_grades.csv", "grade item", "maximum grade", "in the Moodle export")


def write_moodle_items(path: str, assignments: list[tuple[str, float]], roster: dict) -> str:
    """What each Moodle grade item's maximum must be: Moodle's CSV import has no points row (a grade item
    holds its own maximum, and a grade above it is cut to it), so the instructor creates or sets each item
    with this maximum before importing ``moodle_grades.csv``."""
    columns = getattr(roster, "columns", {}) if getattr(roster, "lms", "") == "moodle" else {}
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)
        w.writerow(MOODLE_ITEMS_HEADER)
        for a, p in assignments:
            w.writerow([safe(columns.get(a, a)), safe(a), f"{p:g}", "yes" if a in columns else "no"])
    return path
