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

Does NOT cover: uploading, letter grades, late penalties beyond what the gradebook holds, or
hand-graded cells that are not graded yet (they count 0 in the gradebook's score, as in grades.csv).
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


def read_roster(path: str) -> dict[str, dict]:
    """{nbgrader id: row} from a roster CSV; raises RosterError saying what is wrong and what was expected."""
    if not os.path.isfile(path):
        raise RosterError(f"no roster at {path}: expected a CSV with the header "
                          f"{','.join(ROSTER_FIELDS)} (one row per student; see README, 'After grading')")
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


def _score(grades: dict, assignment: str, student: str) -> str:
    score = grades.get((assignment, student))
    return "" if score is None else f"{score:g}"


def write_canvas(path: str, assignments: list[tuple[str, float]], students: list[str], grades: dict,
                 roster: dict) -> str:
    """Canvas gradebook import CSV. ``assignments``: [(name, points possible)]; ``grades``: {(a, s): score}."""
    check_roster(roster, students)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)  # every cell neutralised against formulas (issue 57)
        w.writerow([*CANVAS_HEADER, *(a for a, _ in assignments)])
        w.writerow(["Points Possible", "", "", "", "", *(f"{p:g}" for _, p in assignments)])
        for s in students:
            r = roster[s]
            w.writerow([r["name"] or s, r["canvas_id"], r["sis_user_id"], r["sis_login_id"], r["section"],
                        *(_score(grades, a, s) for a, _ in assignments)])
    return path


def _split_name(name: str) -> tuple[str, str]:
    """("First", "Last") from "Last, First" or "First Last"."""
    if "," in name:
        last, first = (p.strip() for p in name.split(",", 1))
        return first, last
    parts = name.split()
    return (" ".join(parts[:-1]), parts[-1]) if len(parts) > 1 else (name, "")


def write_moodle(path: str, assignments: list[tuple[str, float]], students: list[str], grades: dict,
                 roster: dict) -> str:
    """Moodle grade import CSV (map "ID number" to useridnumber, or "Email address" to useremail, at import)."""
    check_roster(roster, students)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh)  # every cell neutralised against formulas (issue 57)
        w.writerow([*MOODLE_HEADER, *(a for a, _ in assignments)])
        for s in students:
            r = roster[s]
            first, last = _split_name(r["name"] or s)
            w.writerow([first, last, r["moodle_idnumber"], r["email"], *(_score(grades, a, s) for a, _ in assignments)])
    return path
