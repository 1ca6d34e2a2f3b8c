"""Collect a class's submissions from an LMS download into ``grading/submitted/<student>/<assignment>/``.

    python -m grading collect --lms canvas|moodle DOWNLOAD [--assignment 01_attention] [--roster grading/roster.csv]
                              [--replace] [--dry-run]

``DOWNLOAD`` is the ZIP the LMS gives for one assignment (or the folder it was unpacked into); it is
only read: nothing in it is moved, renamed or deleted. The roster (``grading/roster.csv``, the same
file the LMS grade files use, ``grading/lms.py``) says which nbgrader id each LMS student has:

* **Canvas** ("Download Submissions"): one flat file per submitted file,
  ``<name>[_LATE]_<canvas user id>_<submission id>_<original file name>``, e.g.
  ``doejane_LATE_48211_9931205_attention.ipynb`` (``name`` is Canvas's, in lower case, without spaces;
  the ``late`` marker in any case). A student is matched by the Canvas user id (the roster's ``canvas_id``),
  never by name. Canvas appends ``-1``, ``-2`` ... to a file submitted again (``attention-1.ipynb``): that
  suffix is dropped when what is left is one of the assignment's notebooks.
* **Moodle** ("Download all submissions"): ``<Full Name>_<participant id>_assignsubmission_file_/<file>``
  (one folder per student, the option "Download submissions in folders") or the same prefix on a flat
  file name. The participant id is the assignment's own (not the user id and not the ID number), so a
  student is matched by full name: the roster's ``name`` with case, punctuation and word order ignored
  ("Doe, Jane" matches "Jane Doe"); two roster rows with the same name match no one.

Without ``--assignment``, the assignment is the one whose notebooks the submitted files are named after
(a download is for one assignment; two or none is an error asking for ``--assignment``).
Each notebook of the assignment (``notebooks/<assignment>/*.ipynb``) goes to
``grading/submitted/<student>/<assignment>/<notebook>``. Every file of the download that is not collected is
reported by name with the reason (no roster row, not a notebook of the assignment, two files for the same
notebook, a link, larger than ``COURSE_INTAKE_MAX_BYTES``, an online-text or feedback entry, ...); a file
already in ``submitted/`` with other content is kept unless ``--replace``. A summary of every entry
(``late`` included) is written to ``grading/logs/collect/``. Exit 0 when every file was collected or was
already there, 1 when some file was not, 2 on a usage error (unknown assignment, unreadable roster).

Does NOT cover: the LMS's APIs (no network), group submissions, Canvas's anonymous grading file names
(``anon_...``), or a late penalty (``late`` is reported, never applied).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import stat
import sys
import unicodedata
import zipfile
from dataclasses import asdict, dataclass, field

from grading import GRADING_DIR, NOTEBOOKS_DIR, lms

LMS = ("canvas", "moodle")
# <name>[_late]_<user id>_<submission id>_<original file name>
CANVAS = re.compile(r"^(?P<name>[^_/]*?)(?:_(?P<late>late))?_(?P<user>\d+)_(?P<submission>\d+)_(?P<file>.+)$",
                    re.IGNORECASE)
# <Full Name>_<participant id>_assignsubmission_<plugin>_[<file>]
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.*)$")
RESUBMITTED = re.compile(r"^(?P<stem>.+?)-\d+(?P<ext>\.ipynb)$")
UNSAFE_ID = re.compile(r"[\[\]*?/\\]|^\.|^$")


class CollectError(ValueError):
    """A usage error: an unknown assignment, an unreadable download or roster."""


@dataclass
class Entry:
    """One file of the download and what became of it."""

    name: str                    # its path inside the download
    status: str = "not collected"  # collected | unchanged | replaced | kept | not collected
    why: str = ""
    student: str = ""
    dest: str = ""
    late: bool = False
    assignment: str = ""
    _data: bytes | None = field(default=None, repr=False)


def _normal_name(name: str) -> tuple[str, ...]:
    """A person's name as sorted lower-case words: "Doe, Jane" and "jane  DOE" -> ('doe', 'jane')."""
    return tuple(sorted(re.findall(r"\w+", unicodedata.normalize("NFC", name).casefold())))


def _read_download(path: str, max_bytes: int) -> list[tuple[Entry, bytes | None]]:
    """(entry, its bytes or None when it may not be read) of every file in a ZIP or folder, sorted by name."""
    out = []
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):  # links to folders are not followed
            for d in dirs:
                if os.path.islink(os.path.join(root, d)):
                    out.append((Entry(os.path.relpath(os.path.join(root, d), path), why="a link, not followed"), None))
            for f in files:
                full = os.path.join(root, f)
                e = Entry(os.path.relpath(full, path))
                st = os.lstat(full)
                if not stat.S_ISREG(st.st_mode):
                    e.why = "not a regular file (a link or a special file)"
                elif st.st_size > max_bytes:
                    e.why = f"{st.st_size} bytes, more than COURSE_INTAKE_MAX_BYTES ({max_bytes})"
                else:
                    with open(full, "rb") as fh:
                        out.append((e, fh.read()))
                    continue
                out.append((e, None))
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    continue
                e = Entry(info.filename)
                kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the ZIP says nothing (Windows, writestr)
                if kind and kind != stat.S_IFREG:
                    e.why = "not a regular file in the ZIP (a link or a special file)"
                elif info.file_size > max_bytes:
                    e.why = f"{info.file_size} bytes, more than COURSE_INTAKE_MAX_BYTES ({max_bytes})"
                else:
                    out.append((e, zf.read(info)))
                    continue
                out.append((e, None))
    else:
        raise CollectError(f"{path} is neither a folder nor a ZIP file: expected the LMS's submissions download")
    return sorted(out, key=lambda pair: pair[0].name)


def _match_canvas(e: Entry, roster: dict) -> str | None:
    """The original file name, with e.student and e.late set; None (e.why set) when no student matches."""
    m = CANVAS.match(os.path.basename(e.name))
    if not m:
        e.why = "not a Canvas submission file name (<name>[_LATE]_<user id>_<submission id>_<file>)"
        return None
    e.late = bool(m["late"])
    ids = [sid for sid, row in roster.items() if row.get("canvas_id") == m["user"]]
    if len(ids) != 1:
        e.why = (f"no roster row has canvas_id {m['user']} (Canvas name {m['name']!r})" if not ids else
                 f"canvas_id {m['user']} is in the roster {len(ids)} times ({', '.join(ids)})")
        return None
    e.student = ids[0]
    return m["file"]


def _match_moodle(e: Entry, roster: dict) -> str | None:
    parts = e.name.split("/")
    for i, part in enumerate(parts):
        m = MOODLE.match(part)
        if m:
            break
    else:
        e.why = "not in a Moodle submission folder or file name (<Full Name>_<id>_assignsubmission_file_)"
        return None
    if m["plugin"] != "file":
        e.why = f"a Moodle {m['plugin']!r} entry, not a submitted file"
        return None
    rest = parts[i + 1:]
    if m["file"] and rest:
        e.why = "inside a folder whose name is a Moodle file name"
        return None
    if len(rest) > 1:
        e.why = f"in a subfolder of the student's folder ({'/'.join(rest[:-1])}): the notebook must be at its top"
        return None
    original = m["file"] or (rest[0] if rest else "")
    want = _normal_name(m["name"])
    ids = [sid for sid, row in roster.items() if row.get("name") and _normal_name(row["name"]) == want]
    if len(ids) != 1:
        e.why = (f"no roster row is named {m['name']!r} (Moodle participant {m['participant']})" if not ids else
                 f"{len(ids)} roster rows are named {m['name']!r} ({', '.join(ids)}): add the student by hand")
        return None
    e.student = ids[0]
    return original


def notebooks_of(assignment: str, notebooks_dir: str = NOTEBOOKS_DIR) -> list[str]:
    folder = os.path.join(notebooks_dir, assignment)
    names = sorted(f for f in os.listdir(folder) if f.endswith(".ipynb")) if os.path.isdir(folder) else []
    if not names:
        known = sorted(a for a in os.listdir(notebooks_dir) if os.path.isdir(os.path.join(notebooks_dir, a)))
        raise CollectError(f"no assignment {assignment!r} with notebooks in {notebooks_dir}; the assignments are {known}")
    return names


def _original(lms_name: str, name: str) -> str | None:
    """The file name the student submitted, read from an entry's name in the download (no roster needed)."""
    if lms_name == "canvas":
        m = CANVAS.match(os.path.basename(name))
        return m["file"] if m else None
    parts = name.split("/")
    for i, part in enumerate(parts):
        m = MOODLE.match(part)
        if m and m["plugin"] == "file":
            return m["file"] or ("/".join(parts[i + 1:]) or None)
    return None


def infer_assignment(lms_name: str, names: list[str], notebooks_dir: str = NOTEBOOKS_DIR) -> str:
    """The one assignment whose notebooks the download's submitted files are named after (``attention.ipynb``,
    or Canvas's ``attention-1.ipynb``): an LMS download is for one assignment."""
    owner = {}
    for a in sorted(os.listdir(notebooks_dir)):
        if os.path.isdir(os.path.join(notebooks_dir, a)):
            for f in os.listdir(os.path.join(notebooks_dir, a)):
                if f.endswith(".ipynb"):
                    owner.setdefault(f, set()).add(a)
    found = set()
    for name in names:
        original = _original(lms_name, name)
        if original:
            again = RESUBMITTED.match(original)
            found |= owner.get(original, set()) or (owner.get(again["stem"] + again["ext"], set()) if again else set())
    if len(found) != 1:
        raise CollectError(f"cannot tell which assignment this download is for: its notebooks belong to "
                           f"{sorted(found) or 'no assignment'}; name it with --assignment")
    return found.pop()


def collect(lms_name: str, download: str, assignment: str | None, roster: dict, submitted: str, *,
            replace: bool = False, dry_run: bool = False, notebooks_dir: str = NOTEBOOKS_DIR,
            max_bytes: int | None = None) -> list[Entry]:
    """Copy the download's notebooks of ``assignment`` (None: the one its notebooks are named after) into
    ``submitted``; return every entry of the download with what became of it. Reads the download only."""
    if lms_name not in LMS:
        raise CollectError(f"unknown LMS {lms_name!r}: expected one of {', '.join(LMS)}")
    read = _read_download(download, max_bytes or int(os.environ.get("COURSE_INTAKE_MAX_BYTES", 50_000_000)))
    if assignment is None:
        assignment = infer_assignment(lms_name, [e.name for e, _ in read], notebooks_dir)
    wanted = notebooks_of(assignment, notebooks_dir)
    bad = sorted(sid for sid in roster if UNSAFE_ID.search(sid) or sid in (".", ".."))
    if bad:
        raise CollectError(f"roster ids that cannot be folder names or that nbgrader reads as patterns "
                           f"([, ], *, ?, /, \\, a leading dot): {bad}")
    match = _match_canvas if lms_name == "canvas" else _match_moodle
    entries, targets = [], {}
    for e, data in read:
        entries.append(e)
        if data is None:
            continue
        original = match(e, roster)
        if original is None:
            continue
        notebook = original
        if notebook not in wanted:
            again = RESUBMITTED.match(notebook)
            notebook = again["stem"] + again["ext"] if again else notebook
        if notebook not in wanted:
            e.why = f"{original!r} is not a notebook of {assignment} (expected {', '.join(wanted)})"
            continue
        e.assignment = assignment
        e.dest = os.path.join(submitted, e.student, assignment, notebook)
        e._data = data
        targets.setdefault(e.dest, []).append(e)
    for dest, same in targets.items():
        if len(same) > 1:
            for e in same:
                e.why = (f"{len(same)} files of the download are {e.student}'s {os.path.basename(dest)} "
                         f"({', '.join(x.name for x in same)}): none is collected, copy the right one by hand")
            continue
        e = same[0]
        if os.path.lexists(dest):
            if os.path.islink(dest) or not os.path.isfile(dest):
                e.why = f"{dest} exists and is not a regular file"
                continue
            with open(dest, "rb") as fh:
                if fh.read() == e._data:
                    e.status, e.why = "unchanged", "already in submitted/ with the same content"
                    continue
            if not replace:
                e.status, e.why = "kept", "submitted/ holds another version: kept (--replace copies the download's)"
                continue
            e.status = "replaced"
        else:
            e.status = "collected"
        if not dry_run:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            tmp = f"{dest}.collect-{os.getpid()}.tmp"
            with open(tmp, "wb") as fh:
                fh.write(e._data)
            os.replace(tmp, dest)
    for e in entries:
        e._data = None
    return entries


def write_log(entries: list[Entry], folder: str, lms_name: str, assignment: str, download: str) -> str:
    os.makedirs(folder, exist_ok=True)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    path = os.path.join(folder, f"{assignment}-{lms_name}-{when}.json")
    rows = [{k: v for k, v in asdict(e).items() if not k.startswith("_")} for e in entries]
    with open(path, "w") as fh:
        json.dump({"lms": lms_name, "assignment": assignment, "download": os.path.abspath(download),
                   "entries": rows}, fh, indent=1)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grading collect", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("download", help="the LMS's submissions download: a ZIP file or the folder it was unpacked into")
    p.add_argument("--lms", choices=LMS, required=True)
    p.add_argument("--assignment", default=None,
                   help="the assignment this download is for, e.g. 01_attention (default: the one whose notebooks "
                        "the submitted files are named after)")
    p.add_argument("--roster", default=os.path.join(GRADING_DIR, "roster.csv"),
                   help="roster CSV (default grading/roster.csv; grading/docs/after-grading-report.md)")
    p.add_argument("--submitted", default=os.path.join(GRADING_DIR, "submitted"), help=argparse.SUPPRESS)
    p.add_argument("--replace", action="store_true",
                   help="replace a notebook already in submitted/ whose content differs (default: keep it)")
    p.add_argument("--dry-run", action="store_true", help="say what would be collected, write nothing")
    args = p.parse_args(argv)
    try:
        roster = lms.read_roster(args.roster)
        entries = collect(args.lms, args.download, args.assignment, roster, args.submitted,
                          replace=args.replace, dry_run=args.dry_run)
    except (CollectError, lms.RosterError, zipfile.BadZipFile, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    assignment = args.assignment or next((e.assignment for e in entries if e.assignment), None)
    if assignment is None:  # nothing matched a notebook: name it from the download, for the messages
        assignment = infer_assignment(args.lms, [e.name for e in entries])
    verb = "would be " if args.dry_run else ""
    for e in entries:
        late = " (LATE)" if e.late else ""
        if e.status in ("collected", "replaced"):
            print(f"[collect] {e.name} -> {e.dest}: {verb}{e.status}{late}")
        elif e.status == "unchanged":
            print(f"[collect] {e.name} -> {e.dest}: unchanged{late}")
    missed = [e for e in entries if e.status in ("not collected", "kept")]
    for e in missed:
        print(f"[collect] NOT COLLECTED {e.name}: {e.why}", file=sys.stderr)
    students = sorted({e.student for e in entries if e.status in ("collected", "replaced", "unchanged")})
    absent = sorted(set(roster) - set(students))
    if not args.dry_run:
        course = os.path.dirname(os.path.abspath(args.submitted))
        log = write_log(entries, os.path.join(course, "logs", "collect"), args.lms, assignment, args.download)
        print(f"[collect] summary of every entry: {log}")
    print(f"[collect] {assignment}: {len(students)} student(s) collected from {len(entries)} file(s); "
          f"{len(missed)} file(s) not collected" + (" (listed above)" if missed else "")
          + (f"; no submission from {len(absent)} roster student(s): {', '.join(absent)}" if absent else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
