"""Collecting a class from an LMS download (grading/collect.py, issue 64 item 3).

The fast tests build Canvas-style and Moodle-style downloads (a ZIP and a folder) with the LMS's file
names and check the mapping to ``submitted/<student>/<assignment>/<notebook>``: every file not collected
is named with its reason, the download is left byte for byte as it was, a different notebook already in
``submitted/`` is kept unless ``--replace``. The slow test collects the demo's lesson 01 notebooks from a
Canvas ZIP (two students, one late with a resubmission suffix) and a Moodle ZIP (two students, one folder
each) into one course and grades that class with the real pipeline: the scores are the demo's.
"""
import csv
import json
import os
import stat
import subprocess
import sys
import zipfile

import nbformat
import pytest

from conftest import LESSON01_CELL_TIMEOUT, REPO, snapshot

ASSIGNMENT, NOTEBOOK = "01_attention", "attention.ipynb"
ROSTER = [
    # nbgrader_id, name, canvas_id  (the demo student whose notebook each one hands in)
    ("alice", "Doe, Alice", "48211"),    # s01_correct, Canvas
    ("bob", "Roe, Bob", "48212"),        # s02_blank, Canvas, late and submitted twice (attention-1.ipynb)
    ("carol", "Carol Poe", "48213"),     # s03_misconception, Moodle
    ("dan", "Loe, Dan", "48214"),        # s04_crash, Moodle
    ("erin", "Erin Koe", "48215"),       # submits nothing
]
DEMO_OF = {"alice": "s01_correct", "bob": "s02_blank", "carol": "s03_misconception", "dan": "s04_crash"}


def write_roster(path, rows=ROSTER):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["nbgrader_id", "name", "canvas_id", "sis_user_id", "sis_login_id", "section",
                    "moodle_idnumber", "email"])
        for sid, name, canvas in rows:
            w.writerow([sid, name, canvas, "", "", "", "", f"{sid}@example.edu"])
    return str(path)


def canvas_files(notebooks: dict) -> dict:
    """Canvas's "Download Submissions" names: <name>[_LATE]_<user id>_<submission id>_<original name>."""
    return {
        "doealice_48211_900101_attention.ipynb": notebooks["alice"],
        "roebob_LATE_48212_900102_attention-1.ipynb": notebooks["bob"],
        "strangerzed_99999_900103_attention.ipynb": notebooks["alice"],      # not in the roster
        "doealice_48211_900101_notes.txt": b"my notes\n",                     # not a notebook of 01_attention
    }


def moodle_files(notebooks: dict) -> dict:
    """Moodle's "Download all submissions", in folders: <Full Name>_<participant id>_assignsubmission_file_/<file>."""
    return {
        "Carol Poe_1043_assignsubmission_file_/attention.ipynb": notebooks["carol"],
        "Dan Loe_1044_assignsubmission_file_/attention.ipynb": notebooks["dan"],
        "Zed Stranger_1045_assignsubmission_file_/attention.ipynb": notebooks["carol"],   # not in the roster
        "Dan Loe_1044_assignsubmission_onlinetext_onlinetext.html": b"<p>see my notebook</p>",
    }


def write_zip(path, files: dict) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return str(path)


def write_folder(folder, files: dict) -> str:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return str(folder)


def run_collect(args, root):
    env = dict(os.environ, COURSE_ROOT=str(root), PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-m", "grading", "collect", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


FAKE = {s: f'{{"cells": [], "who": "{s}"}}'.encode() for s in DEMO_OF}


# ====================================================================== the mapping (fast)
def test_canvas_zip_lands_by_user_id_and_names_every_file_left_out(tmp_path):
    from grading import collect, lms

    roster = lms.read_roster(write_roster(tmp_path / "roster.csv"))
    download = write_zip(tmp_path / "submissions.zip", canvas_files(FAKE))
    with zipfile.ZipFile(download, "a") as zf:  # a symbolic link stored in the ZIP
        link = zipfile.ZipInfo("danloe_48214_900104_attention.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    before = open(download, "rb").read()
    entries = {e.name: e for e in collect.collect("canvas", download, ASSIGNMENT, roster, str(tmp_path / "submitted"))}
    assert "not a regular file" in entries["danloe_48214_900104_attention.ipynb"].why
    assert open(download, "rb").read() == before, "the download was changed"
    sub = tmp_path / "submitted"
    assert (sub / "alice" / ASSIGNMENT / NOTEBOOK).read_bytes() == FAKE["alice"]
    # Canvas's resubmission suffix is dropped: nbgrader grades attention.ipynb
    assert (sub / "bob" / ASSIGNMENT / NOTEBOOK).read_bytes() == FAKE["bob"]
    bob = entries["roebob_LATE_48212_900102_attention-1.ipynb"]
    assert bob.status == "collected" and bob.late, bob
    assert not entries["doealice_48211_900101_attention.ipynb"].late
    stranger = entries["strangerzed_99999_900103_attention.ipynb"]
    assert stranger.status == "not collected" and "no roster row has canvas_id 99999" in stranger.why, stranger
    notes = entries["doealice_48211_900101_notes.txt"]
    assert notes.status == "not collected" and "'notes.txt' is not a notebook of 01_attention" in notes.why, notes
    assert sorted(p.name for p in sub.iterdir()) == ["alice", "bob"]
    assert sorted(os.listdir(sub / "alice" / ASSIGNMENT)) == [NOTEBOOK], "only the notebook is collected"


def test_moodle_folder_lands_by_full_name_and_is_left_as_it_was(tmp_path):
    from grading import collect, lms

    roster = lms.read_roster(write_roster(tmp_path / "roster.csv"))
    download = write_folder(tmp_path / "moodle", moodle_files(FAKE))
    os.symlink("/etc/hostname", os.path.join(download, "Erin Koe_1046_assignsubmission_file_"))  # a link, not followed
    before = snapshot(download)
    entries = {e.name: e for e in collect.collect("moodle", download, ASSIGNMENT, roster, str(tmp_path / "submitted"))}
    assert snapshot(download) == before, "the download folder was changed (a file moved, rewritten or deleted)"
    sub = tmp_path / "submitted"
    # "Carol Poe" is "Carol Poe" in the roster, "Dan Loe" is "Loe, Dan": word order and punctuation ignored
    assert (sub / "carol" / ASSIGNMENT / NOTEBOOK).read_bytes() == FAKE["carol"]
    assert (sub / "dan" / ASSIGNMENT / NOTEBOOK).read_bytes() == FAKE["dan"]
    stranger = entries["Zed Stranger_1045_assignsubmission_file_/attention.ipynb"]
    assert "no roster row is named 'Zed Stranger'" in stranger.why, stranger
    online = entries["Dan Loe_1044_assignsubmission_onlinetext_onlinetext.html"]
    assert online.status == "not collected" and "'onlinetext' entry" in online.why, online
    erin = entries["Erin Koe_1046_assignsubmission_file_"]
    assert erin.status == "not collected" and "not a regular file" in erin.why, erin
    assert not (sub / "erin").exists()


def test_moodle_flat_names_and_ambiguous_names(tmp_path):
    """Without folders Moodle prefixes each file; two roster rows with one name match neither (never a guess)."""
    from grading import collect, lms

    rows = ROSTER + [("carol2", "Poe, Carol", "48299")]
    roster = lms.read_roster(write_roster(tmp_path / "roster.csv", rows))
    download = write_folder(tmp_path / "moodle", {
        "Carol Poe_1043_assignsubmission_file_attention.ipynb": FAKE["carol"],
        "Dan Loe_1044_assignsubmission_file_attention.ipynb": FAKE["dan"]})
    entries = {e.name: e for e in collect.collect("moodle", download, ASSIGNMENT, roster, str(tmp_path / "submitted"))}
    assert entries["Dan Loe_1044_assignsubmission_file_attention.ipynb"].status == "collected"
    carol = entries["Carol Poe_1043_assignsubmission_file_attention.ipynb"]
    assert carol.status == "not collected" and "2 roster rows are named 'Carol Poe' (carol, carol2)" in carol.why
    assert not (tmp_path / "submitted" / "carol").exists() and not (tmp_path / "submitted" / "carol2").exists()


def test_an_existing_different_notebook_is_kept_unless_replace_and_duplicates_are_refused(tmp_path):
    from grading import collect, lms

    roster = lms.read_roster(write_roster(tmp_path / "roster.csv"))
    sub = tmp_path / "submitted"
    (sub / "alice" / ASSIGNMENT).mkdir(parents=True)
    (sub / "alice" / ASSIGNMENT / NOTEBOOK).write_bytes(b"an earlier version")
    download = write_zip(tmp_path / "s.zip", {
        "doealice_48211_900101_attention.ipynb": FAKE["alice"],
        "roebob_48212_900102_attention.ipynb": FAKE["bob"],
        "roebob_48212_900102_attention-2.ipynb": FAKE["alice"]})
    entries = {e.name: e for e in collect.collect("canvas", download, ASSIGNMENT, roster, str(sub))}
    assert entries["doealice_48211_900101_attention.ipynb"].status == "kept"
    assert (sub / "alice" / ASSIGNMENT / NOTEBOOK).read_bytes() == b"an earlier version"
    for name in ("roebob_48212_900102_attention.ipynb", "roebob_48212_900102_attention-2.ipynb"):
        assert entries[name].status == "not collected" and "2 files of the download are bob's" in entries[name].why
    assert not (sub / "bob").exists()
    entries = {e.name: e for e in collect.collect("canvas", download, ASSIGNMENT, roster, str(sub), replace=True)}
    assert entries["doealice_48211_900101_attention.ipynb"].status == "replaced"
    assert (sub / "alice" / ASSIGNMENT / NOTEBOOK).read_bytes() == FAKE["alice"]
    entries = {e.name: e for e in collect.collect("canvas", download, ASSIGNMENT, roster, str(sub))}
    assert entries["doealice_48211_900101_attention.ipynb"].status == "unchanged"


def test_the_command_names_what_it_left_out_and_exits_1(tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    roster = write_roster(tmp_path / "roster.csv")
    download = write_zip(tmp_path / "submissions.zip", canvas_files(FAKE))
    dry = run_collect(["--lms", "canvas", "--assignment", ASSIGNMENT, "--roster", roster, "--dry-run", download], root)
    assert dry.returncode == 1 and "attention.ipynb: would be collected" in dry.stdout, dry.stdout + dry.stderr
    assert os.listdir(root) == [], f"--dry-run wrote {os.listdir(root)}"
    proc = run_collect(["--lms", "canvas", "--roster", roster, download], root)  # the assignment from the names
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[collect] 01_attention: 2 student(s) collected from 4 file(s)" in proc.stdout, proc.stdout
    assert "NOT COLLECTED strangerzed_99999_900103_attention.ipynb: no roster row has canvas_id 99999" in proc.stderr
    assert "NOT COLLECTED doealice_48211_900101_notes.txt" in proc.stderr, proc.stderr
    assert "(LATE)" in proc.stdout and "no submission from 3 roster student(s): carol, dan, erin" in proc.stdout, \
        proc.stdout
    logs = list((root / "logs" / "collect").glob("01_attention-canvas-*.json"))
    assert len(logs) == 1, "the summary of every entry was not written"
    assert {e["name"] for e in json.load(open(logs[0]))["entries"]} == set(canvas_files(FAKE))
    bad = run_collect(["--lms", "canvas", "--assignment", "99_nothing", "--roster", roster, download], root)
    assert bad.returncode == 2 and "no assignment '99_nothing'" in bad.stderr, bad.stderr
    notes = write_zip(tmp_path / "notes.zip", {"doealice_48211_900101_notes.txt": b"notes\n"})
    unknown = run_collect(["--lms", "canvas", "--roster", roster, notes], root)
    assert unknown.returncode == 2 and "cannot tell which assignment" in unknown.stderr \
        and "--assignment" in unknown.stderr, unknown.stderr


# ====================================================================== collected, then graded (slow)
@pytest.mark.slow
def test_canvas_and_moodle_downloads_of_the_demo_class_are_collected_and_graded(tmp_path, tmp_path_factory):
    """The demo's four lesson 01 notebooks, two from a Canvas ZIP and two from a Moodle ZIP, collected into one
    course by the command and graded by the real pipeline: each student gets the demo notebook's score."""
    from grading import demo
    from shared_runs import copy_lesson01_release

    root = tmp_path / "course"
    root.mkdir()
    env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT=LESSON01_CELL_TIMEOUT, PYTHONPATH=REPO)
    env.pop("COURSE_DB_URL", None)
    copy_lesson01_release(tmp_path_factory, root)  # `nbgrader generate_assignment 01_attention`, made once
    demo.generate(ASSIGNMENT, str(tmp_path / "demo"), release_dir=str(root / "release"))
    notebooks = {s: (tmp_path / "demo" / d / ASSIGNMENT / NOTEBOOK).read_bytes() for s, d in DEMO_OF.items()}
    roster = write_roster(root / "roster.csv")
    canvas = write_zip(tmp_path / "canvas.zip", canvas_files(notebooks))
    moodle = write_zip(tmp_path / "moodle.zip", moodle_files(notebooks))
    zips = {p: open(p, "rb").read() for p in (canvas, moodle)}

    for lms_name, download in (("canvas", canvas), ("moodle", moodle)):
        proc = run_collect(["--lms", lms_name, "--assignment", ASSIGNMENT, download], root)  # grading/roster.csv
        assert proc.returncode == 1, f"{lms_name}: each download holds files to leave out:\n{proc.stdout}{proc.stderr}"
        assert proc.stderr.count("NOT COLLECTED") == 2, proc.stderr
    assert {p: open(p, "rb").read() for p in zips} == zips, "a download was changed"
    submitted = root / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == sorted(DEMO_OF), "the class in submitted/"
    for s in DEMO_OF:
        assert (submitted / s / ASSIGNMENT / NOTEBOOK).read_bytes() == notebooks[s], f"{s}'s notebook changed on the way"

    grade = subprocess.run([sys.executable, "-m", "grading", "grade", "--demo", "no", "--assignment", ASSIGNMENT,
                            "--workers", "2"], cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    assert grade.returncode == 0, grade.stdout[-3000:] + grade.stderr[-3000:]
    with open(root / "grades.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT}
    expected = demo.load_spec(ASSIGNMENT).EXPECTED
    got = {s: float(rows[s]["score"]) for s in DEMO_OF if s in rows}
    assert got == {s: expected[DEMO_OF[s]] for s in DEMO_OF}, f"scores {got}, expected the demo's {expected}"
    # and every roster student (issue 66.3): erin, who submitted nothing, has a row that says so
    assert set(rows) == set(DEMO_OF) | {"erin"}, f"grades.csv should list the collected class and the roster: {sorted(rows)}"
    assert float(rows["erin"]["score"]) == 0 and "no submission" in " ".join(map(str, rows["erin"].values())), rows["erin"]


def test_a_roster_id_that_cannot_be_a_folder_is_refused_before_anything_is_written(tmp_path):
    from grading import collect, lms

    roster = lms.read_roster(write_roster(tmp_path / "roster.csv", ROSTER + [("al[ei]ce", "Ali Ce", "1"),
                                                                              ("../up", "Up Per", "2")]))
    download = write_zip(tmp_path / "s.zip", canvas_files(FAKE))
    with pytest.raises(collect.CollectError, match=r"reads as patterns.*\['\.\./up', 'al\[ei\]ce'\]"):
        collect.collect("canvas", download, ASSIGNMENT, roster, str(tmp_path / "submitted"))
    assert not (tmp_path / "submitted").exists()
