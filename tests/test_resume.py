"""A worker killed mid-run loses nothing: the run says it failed, and `grade --resume` grades what is missing.

One grading run of the demo class of lesson 01 (2 workers, SQLite) is interrupted by
SIGKILL to the worker that grades ``s03_misconception``, at the moment that worker's kernel
is running (its kernel process exists, the result does not). By then the first two
submissions have results, and the other worker still has ``s04_crash`` (a cell that loops
until the per-cell timeout) to grade. The test checks what an instructor would see, runs
``grade --resume`` on the same course root and compares with an uninterrupted run: the session's run of the
whole demo class as `make grade` grades it, with the per-cell limit used here (tests/shared_runs.py ``demo_class``,
lesson 01's rows). The demo class is a course of its own, in ``<root>/demo_class``.
"""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import shared_runs
from conftest import LESSON01_CELL_TIMEOUT as CELL_TIMEOUT, REPO

pytestmark = pytest.mark.slow

ASSIGNMENT = "01_attention"
VICTIM = "s03_misconception"  # the submission whose worker is killed mid-grading


def env_for(root):
    env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT=CELL_TIMEOUT, PYTHONPATH=REPO)
    env.pop("COURSE_DB_URL", None)
    return env


def grade_cmd(*extra):
    # the forked workers (--engine processes), whose claims and processes this test follows; the Dask
    # engine's killed worker is tests/test_dask.py's
    return [sys.executable, "-m", "grading", "grade", "--assignment", ASSIGNMENT, "--workers", "2",
            "--no-feedback", "--engine", "processes", *extra]


def process_table():
    """{pid: (ppid, session id, cmdline)} of every process we can read."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        table[int(name)] = (int(fields[1]), int(fields[3]), cmdline)
    return table


def forked_workers(pid, table):
    """The workers under the run ``pid``: the children of its top ``grading.worker`` process (not a worker's own
    fork, such as the verifier's child, grading/verify.py, which carries the same command line)."""
    def is_worker(p):
        return "grading.worker" in table.get(p, (0, 0, ""))[2]

    return [p for p in descendants(pid, table)
            if is_worker(p) and is_worker(table[p][0]) and not is_worker(table[table[p][0]][0])]


def descendants(pid, table):
    children = {}
    for p, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(p)
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def warm_kernels(tree, table):
    """Warm kernels (grading/kernel/warm.py) working for the processes in ``tree``: forked by the run's
    template (so not in the worker's tree, and with the template's argv) into the PID namespace of
    a sandbox the worker's launcher made."""
    def pid_ns(pid):
        try:
            return os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            return None

    sandboxes = {pid_ns(p) for p in tree} - {pid_ns("self"), None}
    return [p for p, (_, _, cmd) in table.items() if p not in tree and "grading.kernel.warm" in cmd
            and pid_ns(p) in sandboxes]


def read_grades(root):
    """The demo class's grades: its own course in ``root/demo_class`` (grading/pipeline.py DEMO_ROOT)."""
    return _grades_csv(root / "demo_class" / "grades.csv")


def _grades_csv(path):
    with open(path, newline="") as fh:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT}


def result_files(root):
    folder = root / "demo_class" / "logs" / "results" / ASSIGNMENT
    return {p.stem: p for p in folder.glob("*.json")} if folder.is_dir() else {}


def alive(pid):
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory, uninterrupted):
    """Start a run, SIGKILL the worker grading VICTIM while its kernel runs, let the run finish."""
    limit = _limit()
    root = tmp_path_factory.mktemp("course-killed")
    log = open(root.parent / "killed-run.log", "w+")
    proc = subprocess.Popen(grade_cmd("--demo", "yes"), cwd=REPO, env=env_for(root), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    claim = root / "demo_class" / "logs" / "results" / ASSIGNMENT / f".claim-{VICTIM}"
    victim_pid, others_done, workers_seen, victim_tree, hung = None, None, [], [], False
    deadline = time.monotonic() + limit
    try:
        while victim_pid is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"the run ended or stalled before {VICTIM} was claimed:\n{log.read()[-3000:]}")
            if claim.exists() and claim.read_text().strip():
                pid = int(claim.read_text())
                table = process_table()
                tree = descendants(pid, table)
                # the kernel itself (exec'd inside the sandbox, not bwrap or setpriv naming it in their argv):
                # the worker is in the middle of grading VICTIM
                kernels = [p for p in tree if table[p][2].split()[1:3] == ["-m", "ipykernel_launcher"]]
                kernels += warm_kernels(tree, table)
                tree += kernels
                if kernels:
                    # the workers, forked by one grading.worker process (--workers 2), its children
                    workers_seen = forked_workers(proc.pid, table)
                    assert pid in workers_seen, (pid, workers_seen)
                    assert not (claim.parent / f"{VICTIM}.json").exists(), "victim finished before the kill"
                    others_done = sorted(result_files(root))
                    os.kill(pid, signal.SIGKILL)
                    victim_pid, victim_tree = pid, tree
                    continue
            time.sleep(0.1)
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            hung, rc = True, None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    time.sleep(0.5)
    leftovers = [(p, table_cmd) for p, (_, sid, table_cmd) in process_table().items() if sid == proc.pid]
    survivors = [p for p in victim_tree if alive(p)]  # the dead worker's kernel (and bwrap) must die with it
    for p in survivors:  # ours: started by this test's run; never leave them running
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    log.seek(0)
    output = log.read()
    log.close()
    if hung:
        pytest.fail(f"the run did not end within {limit:.0f} s after worker {victim_pid} was killed; processes of the dead "
                    f"worker still alive: {survivors} (an orphaned kernel holds the worker's stderr pipe open)\n"
                    + output[-2000:])
    return dict(root=root, rc=rc, output=output, victim_pid=victim_pid, others_done=others_done,
                workers_seen=workers_seen, leftovers=leftovers, survivors=survivors)


@pytest.fixture(scope="module")
def resumed(killed_run):
    root = killed_run["root"]
    before = {s: (p.stat().st_mtime_ns, json.loads(p.read_text())["worker_pid"]) for s, p in result_files(root).items()}
    # the demo class is generated again, with the same bytes: --resume compares content, so it keeps what was graded
    proc = subprocess.run(grade_cmd("--resume", "--demo", "yes"), cwd=REPO, env=env_for(root),
                          capture_output=True, text=True, timeout=_limit())
    return dict(root=root, proc=proc, before=before)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Lesson 01's grades of the demo class graded without interruption: the session's run of the whole demo
    class (the grading command `make grade` runs, the default engine; shared by several files), which also gives
    the time limits below."""
    from grading import demo

    course, run = shared_runs.demo_class(tmp_path_factory)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    total = re.findall(r"^\[report\] total time ([0-9.]+) s$", run.stdout, re.MULTILINE)
    assert total, "the demo class's run printed no total time:\n" + run.stdout[-3000:]
    _BASELINE["wall"] = float(total[-1])
    grades = _grades_csv(course / "grades.csv")
    assert set(demo.STUDENTS) <= set(grades), sorted(grades)
    return {s: grades[s] for s in demo.STUDENTS}


_BASELINE: dict = {}


def _limit() -> float:
    """Time limits of the other runs: derived from the uninterrupted run measured on this machine, in this
    session (the whole demo class's command, its own total time: a busy CI runner is slow for all of them
    alike), never a fixed number of seconds."""
    return 3 * _BASELINE["wall"] + 30


def expected():
    from grading import demo

    return demo.expected_scores()[ASSIGNMENT]


def test_kill_hit_a_running_worker_while_the_other_ran(killed_run):
    assert len(killed_run["workers_seen"]) == 2, killed_run["workers_seen"]
    assert killed_run["others_done"], "no submission was graded before the kill"
    assert VICTIM not in killed_run["others_done"] and "s04_crash" not in killed_run["others_done"]


def test_killed_run_reports_the_failure(killed_run):
    assert killed_run["rc"] != 0, killed_run["output"][-3000:]
    out = killed_run["output"]
    assert str(killed_run["victim_pid"]) in out and re.search(r"-9\b|SIGKILL", out), out[-3000:]


def test_only_the_submission_in_flight_is_missing(killed_run):
    """The other worker took every task the dead one had not claimed; only VICTIM has no result."""
    from grading import demo

    results = result_files(killed_run["root"])
    assert set(results) == set(demo.STUDENTS) - {VICTIM}, sorted(results)
    for student, path in results.items():
        assert json.loads(path.read_text())["autograded"], student


def test_killed_worker_left_no_process_behind(killed_run):
    """Its kernel (bwrap --die-with-parent) died with it; nothing of the run keeps running."""
    assert killed_run["survivors"] == [], killed_run["survivors"]
    assert killed_run["leftovers"] == [], killed_run["leftovers"]


def test_resume_grades_only_what_is_missing(resumed):
    proc = resumed["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    after = result_files(resumed["root"])
    from grading import demo

    assert set(after) == set(demo.STUDENTS)
    for student, (mtime, pid) in resumed["before"].items():
        assert after[student].stat().st_mtime_ns == mtime, f"{student} was graded again"
        assert json.loads(after[student].read_text())["worker_pid"] == pid
    victim = json.loads(after[VICTIM].read_text())
    assert victim["autograded"], victim


def test_resumed_grades_equal_expected_and_an_uninterrupted_run(resumed, uninterrupted):
    grades = read_grades(resumed["root"])
    assert grades == pytest.approx(expected(), abs=1e-9)
    assert grades == uninterrupted
