"""The grading chain end to end, through the real nbgrader commands, in a temporary course root."""
import csv
import json
import os
import subprocess
import sys

import pytest

import shared_runs
from conftest import REPO

pytestmark = pytest.mark.slow


def run_grading(args, root, env_extra=None, timeout=1500):
    env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT="30", PYTHONPATH=REPO)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "grading", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The whole demo class, graded once for this file and tests/test_report.py (tests/shared_runs.py)."""
    root, proc = shared_runs.demo_class(tmp_path_factory)
    # the demo class is a course of its own (grading/pipeline.py DEMO_ROOT): its grades, feedback and logs
    assert not (root.parent / "submitted").exists(), "the demo class was written into the real class's folder"
    return root, proc


def test_demo_class_gets_exactly_its_expected_scores(demo_run):
    root, proc = demo_run
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    sys.path.insert(0, REPO)
    from grading import demo

    expected = demo.expected_scores()
    with open(root / "grades.csv", newline="") as fh:
        rows = {(r["assignment"], r["student_id"]): float(r["score"]) for r in csv.DictReader(fh)}
    # every lesson's graded path, as grading runs it: the instructor's solutions earn every autograded point,
    # the untouched release (hidden tests included) none (what tests/test_notebooks.py relies on)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for assignment in expected:
            for student, full in (("s01_correct", True), ("s02_blank", False)):
                auto = [(g.name, g.auto_score, g.max_score) for nb in gb.find_submission(assignment, student).notebooks
                        for g in nb.grades if g.auto_score is not None]
                assert auto, (assignment, student)
                wrong = [a for a in auto if a[1] != (a[2] if full else 0)]
                assert not wrong, f"{assignment} {student}: (test, points, max) {wrong}"
    for assignment, scores in expected.items():
        for student, score in scores.items():
            assert rows[(assignment, student)] == pytest.approx(score, abs=1e-9), (assignment, student)
    assert "every demo score equals its expected value" in proc.stdout


def test_every_demo_submission_has_feedback_and_is_reported(demo_run):
    root, proc = demo_run
    from grading import demo

    for assignment in demo.assignments_with_demo():
        for student in demo.STUDENTS:
            folder = root / "feedback" / student / assignment
            assert folder.is_dir() and any(f.suffix == ".html" for f in folder.iterdir()), folder
            assert student in proc.stdout


def test_crash_student_is_graded_not_fatal(demo_run):
    root, proc = demo_run
    result = json.loads((root / "logs" / "results" / "01_attention" / "s04_crash.json").read_text())
    assert result["autograded"], result
    html = (root / "feedback" / "s04_crash" / "01_attention" / "attention.html").read_text()
    assert "CellTimeoutError" in html or "KeyboardInterrupt" in html
    # issue 40: the message says the limit and the likely cause
    import re

    assert re.search(r"time limit of \d+ s per cell", html) and "endless loop" in html, "no limit or cause named"


def test_feedback_reads_like_a_teachers_note(demo_run):
    """Issue 18: each misconception student's page opens with the failed tests and their whole messages,
    in an element that wraps; no frame from inside course_lib.checks, no path of the grading machine."""
    import html as html_lib
    import re

    root, _ = demo_run
    from grading import demo

    for assignment in demo.assignments_with_demo():
        folder = root / "feedback" / "s03_misconception" / assignment
        for page in folder.glob("*.html"):
            text = page.read_text()
            assert "overflow-wrap: anywhere" in text, f"{page}: no wrapping CSS"
            top = text[text.index("What to look at"):]
            summary = html_lib.unescape(re.sub(r"<[^>]+>", "", top[:top.index("</ul>")]))
            assert "likely misconception" in summary, f"{assignment}: the summary names no misconception:\n{summary[:600]}"
            visible = html_lib.unescape(re.sub(r"<[^>]+>", "", text))
            assert "course_lib/checks" not in visible, f"{assignment}: a frame of the checks in the feedback"
            assert REPO not in visible and str(root) not in visible, f"{assignment}: a path of the grading machine"


def test_preflight_stops_on_a_missing_kernel(tmp_path):
    proc = run_grading(["grade", "--assignment", "01_attention", "--kernel", "no-such-kernel"], tmp_path)
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and "no-such-kernel" in proc.stderr
    assert not (tmp_path / "submitted").exists(), "nothing is graded after a failed preflight"


def test_preflight_stops_when_course_lib_does_not_import(tmp_path):
    kernels = tmp_path / "jupyter" / "kernels" / "broken"
    kernels.mkdir(parents=True)
    launcher = ("import sys; sys.modules['course_lib'] = None; "
                "from ipykernel import kernelapp; kernelapp.launch_new_instance()")
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", launcher, "-f", "{connection_file}"],
        "display_name": "broken", "language": "python"}))
    proc = run_grading(["preflight", "--kernel", "broken"], tmp_path / "root",
                       env_extra={"JUPYTER_PATH": str(tmp_path / "jupyter")})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "course_lib does not import" in proc.stderr


def test_feedback_hides_hidden_tests_but_names_the_failure(demo_run):
    root, _ = demo_run
    from grading import demo

    for assignment in demo.assignments_with_demo():
        for student in demo.STUDENTS:
            for html in (root / "feedback" / student / assignment).glob("*.html"):
                text = html.read_text()
                assert "BEGIN HIDDEN TESTS" not in text and "hidden=True" not in text, html
    text = (root / "feedback" / "s03_misconception" / "01_attention" / "attention.html").read_text()
    assert "hidden tests: not shown in feedback" in text
    assert "attention_numpy_hidden" in text and "missing scaling" in text
    # the instructor's autograded copy keeps everything
    autograded = (root / "autograded" / "s03_misconception" / "01_attention" / "attention.ipynb").read_text()
    assert "hidden=True" in autograded


def test_demo_runs_in_the_sandbox(demo_run):
    _, proc = demo_run
    assert "sandboxed; notebooks/ hidden" in proc.stdout or "no isolation" in proc.stdout


def test_preflight_refuses_a_kernel_on_another_interpreter(tmp_path):
    """A kernel that imports course_lib but runs another interpreter (here the venv's base Python, so
    another sys.prefix) would grade with other packages: preflight refuses to grade."""
    import sysconfig

    base = os.path.realpath(sys.executable)
    kernels = tmp_path / "jupyter" / "kernels" / "other-python"
    kernels.mkdir(parents=True)
    launcher = (f"import sys; sys.path[:0] = [{sysconfig.get_paths()['purelib']!r}, {REPO!r}]; "
                "from ipykernel import kernelapp; kernelapp.launch_new_instance()")
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [base, "-c", launcher, "-f", "{connection_file}"], "display_name": "other", "language": "python"}))
    proc = run_grading(["preflight", "--kernel", "other-python"], tmp_path / "root",
                       env_extra={"JUPYTER_PATH": str(tmp_path / "jupyter")})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refusing to grade" in proc.stderr and "not the course environment's" in proc.stderr, proc.stderr


def test_new_gradebooks_ask_alembic_for_the_schema_version_once_per_process(tmp_path, monkeypatch):
    """nbgrader runs `alembic heads` for every new gradebook; the grading processes read the head of nbgrader's
    migrations themselves, once (a Dask worker makes a private gradebook per submission), start no `alembic`
    process, and record the same version nbgrader's own call gives."""
    import subprocess as sp

    import nbformat.reader
    import nbgrader.api
    from nbgrader.api import Gradebook

    from grading import worker

    # what import_nbgrader changes in this process, put back after the test (other tests in this process need
    # plain nbformat: tests/test_class_mess.py's byte-order-mark test)
    monkeypatch.setattr(nbformat.reader, "parse_json", nbformat.reader.parse_json)
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", nbgrader.api.get_alembic_version)
    monkeypatch.setitem(sys.modules, "rfc3987_syntax", sys.modules.get("rfc3987_syntax"))
    worker.import_nbgrader()
    nbgrader.api.get_alembic_version.cache_clear()
    calls = []
    original = sp.check_output
    monkeypatch.setattr(nbgrader.api.sp, "check_output", lambda *a, **k: calls.append(a) or original(*a, **k))
    versions = []
    for i in range(3):
        with Gradebook(f"sqlite:///{tmp_path / f'gradebook{i}.db'}") as gb:
            versions.append(gb.db.execute(nbgrader.api.text("SELECT version_num FROM alembic_version")).scalar())
    assert calls == [], f"a grading process started alembic: {calls}"
    assert nbgrader.api.get_alembic_version.cache_info().misses == 1
    assert versions == [nbgrader.api.get_alembic_version.__wrapped__()] * 3  # nbgrader's own `alembic heads`
    assert len(calls) == 1 and calls[0][0][:1] == ["alembic"], "the comparison did not ask the alembic command"


def test_each_kernel_runs_the_cores_shared_among_the_workers(monkeypatch):
    """Issue 38: N kernels side by side start no more OpenMP threads than there are cores (cores // workers,
    at least 1), unless the instructor chose OMP_NUM_THREADS; the name reaches the kernel's environment."""
    from grading import pipeline
    from grading.kernel import launcher

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert launcher.kernel_threads(2, {}) == {"OMP_NUM_THREADS": "4"}
    assert launcher.kernel_threads(3, {}) == {"OMP_NUM_THREADS": "2"}
    assert launcher.kernel_threads(16, {}) == {"OMP_NUM_THREADS": "1"}
    assert launcher.kernel_threads(2, {"OMP_NUM_THREADS": "3"}) == {}
    assert "OMP_NUM_THREADS" in launcher.KERNEL_ENV_NAMES  # passed to every kernel (and the warm template)
    # the grade command sets it for its run only, and gives the caller's environment back
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    seen = {}

    def fake_grade(opts):
        seen["threads"] = os.environ.get("OMP_NUM_THREADS")
        return 0

    monkeypatch.setattr(pipeline, "_grade", fake_grade)
    assert pipeline.grade(pipeline.Options(assignments=[], workers=2)) == 0
    assert seen["threads"] == "4" and "OMP_NUM_THREADS" not in os.environ


def test_the_one_query_gradebook_steps_write_and_read_what_nbgraders_do(demo_run, tmp_path):
    """grading.gradebook's SaveAutoGradesOnce and GetGradesOnce (one query per notebook, one commit) against
    nbgrader's SaveAutoGrades and GetGrades, on every autograded notebook of the demo class, each on its own copy
    of the gradebook: the same rows written (from values first set to something else, a hand grade included),
    the same metadata and resources read."""
    import copy
    import shutil
    import sqlite3

    import nbformat

    root, proc = demo_run
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    sys.path.insert(0, REPO)
    # plain nbgrader, without grading.worker.import_nbgrader's changes to this process (other tests in it need
    # plain nbformat: tests/test_class_mess.py's byte-order-mark test)
    from nbgrader.api import MissingEntry
    from nbgrader.preprocessors import GetGrades, SaveAutoGrades

    from grading.gradebook import GetGradesOnce, SaveAutoGradesOnce

    def rows(db):
        with sqlite3.connect(db) as con:
            return (con.execute("SELECT id, auto_score, manual_score, needs_manual_grade FROM grade ORDER BY id").fetchall(),
                    con.execute("SELECT id, auto_comment, manual_comment FROM comment ORDER BY id").fetchall())

    notebooks = sorted((root / "autograded").glob("*/*/*.ipynb"))
    assert len(notebooks) == 48, len(notebooks)
    original = rows(root / "gradebook.db")
    hand = next(r[0] for r in original[0] if r[3] == 0)  # a grade that needs no person: given a hand grade below
    dbs = {}
    for name in ("nbgrader", "course"):
        dbs[name] = tmp_path / f"{name}.db"
        shutil.copy(root / "gradebook.db", dbs[name])
        with sqlite3.connect(dbs[name]) as con:
            con.execute("UPDATE grade SET auto_score = -1, needs_manual_grade = 1")
            con.execute("UPDATE comment SET auto_comment = 'set before'")
            con.execute("UPDATE grade SET manual_score = 0.5 WHERE id = ?", (hand,))
    pairs = {"nbgrader": (SaveAutoGrades, GetGrades), "course": (SaveAutoGradesOnce, GetGradesOnce)}
    read = {name: [] for name in pairs}
    for path in notebooks:
        student, assignment = path.parent.parent.name, path.parent.name
        nb = nbformat.read(path, as_version=4)
        for name, (save, get) in pairs.items():
            resources = {"nbgrader": {"notebook": path.stem, "assignment": assignment, "student": student,
                                      "db_url": f"sqlite:///{dbs[name]}"}}
            save().preprocess(copy.deepcopy(nb), copy.deepcopy(resources))
            got, res = get().preprocess(copy.deepcopy(nb), copy.deepcopy(resources))
            read[name].append((nbformat.writes(got), {k: v for k, v in res["nbgrader"].items() if k != "db_url"}))
    theirs, mine = rows(dbs["nbgrader"]), rows(dbs["course"])
    assert mine == theirs
    assert [r for r in mine[0] if r[1] == -1] == [] and mine != original  # every grade written; the hand grade kept
    assert sum(r[3] for r in mine[0]) == sum(r[3] for r in original[0]) + 1  # the hand-graded one needs a look
    assert next(r for r in mine[0] if r[0] == hand)[2:] == (0.5, 1)
    assert read["course"] == read["nbgrader"]
    # a graded cell the gradebook does not know: nbgrader's MissingEntry, as find_grade raises it
    nb = nbformat.read(notebooks[0], as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    cell.metadata.nbgrader["grade_id"] = "not-in-the-gradebook"
    resources = {"nbgrader": {"notebook": notebooks[0].stem, "assignment": notebooks[0].parent.name,
                              "student": notebooks[0].parent.parent.name, "db_url": f"sqlite:///{dbs['course']}"}}
    with pytest.raises(MissingEntry):
        SaveAutoGradesOnce().preprocess(nb, resources)


def test_the_in_process_export_writes_what_nbgrader_export_writes(demo_run, tmp_path):
    """grades.csv is made from nbgrader's CSV export, now run in the grading process
    (grading.pipeline.export_gradebook): byte for byte what `nbgrader export` writes, on the demo class's
    gradebook (12 assignments, 4 students, a hand grade pending)."""
    import shutil

    root, proc = demo_run
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(root / "gradebook.db", course / "gradebook.db")  # a copy: the shared run stays as it was
    env = dict(os.environ, COURSE_ROOT=str(course), PYTHONPATH=REPO)
    cli = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--to", str(tmp_path / "cli.csv")],
                         cwd=os.path.join(REPO, "grading"), env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr[-3000:]
    ours = subprocess.run([sys.executable, "-c", "import sys; from grading import pipeline; "
                           "pipeline.export_gradebook(sys.argv[1])", str(tmp_path / "ours.csv")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert ours.returncode == 0, ours.stderr[-3000:]
    text = (tmp_path / "cli.csv").read_text()
    assert len(text.splitlines()) == 1 + 12 * 4, text[:500]
    assert (tmp_path / "ours.csv").read_text() == text


def test_an_export_from_an_unreadable_gradebook_names_the_cause(tmp_path, monkeypatch):
    from grading import pipeline

    (tmp_path / "gradebook.db").write_text("not a database")
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    monkeypatch.delenv("COURSE_DB_URL", raising=False)
    with pytest.raises(pipeline.GradingError, match=r"`nbgrader export` failed: .*DatabaseError.*previous results are "
                                                    r"unchanged"):
        pipeline.export_gradebook(str(tmp_path / "out.csv"))
    assert not (tmp_path / "out.csv").exists()
