"""Grading on Dask (grading/cluster.py, issue 36), through real processes on loopback.

A scheduler and two workers run as separate processes, each in a working directory and a temporary
folder of its own (no shared course folder: a task carries its submission as bytes); the grading
command connects to the scheduler's address. Checked: the grades equal those of the default local run
(a LocalCluster); a worker killed (with its nanny, for good) while it grades loses no grade and
counts none twice; a worker whose environment differs (bubblewrap missing from its PATH) is refused by
name before anything is graded. One assignment of the demo class, three students, to stay quick: the class and its
local run are tests/lesson01_runs.py's, made once per test session (tests/test_interrupt.py reads the same run).
"""
import json
import os
import shutil
import tempfile
import pathlib
import atexit
import signal
import subprocess
import sys
import time
import types

import pytest

import lesson01_runs
from conftest import REPO
from lesson01_runs import ASSIGNMENT, STUDENTS, env_for, read_grades

pytestmark = pytest.mark.slow

DASK = os.path.join(os.path.dirname(sys.executable), "dask")


def grade_cmd(*extra):
    return [sys.executable, "-m", "grading", "grade", "--assignment", ASSIGNMENT, "--workers", "2", "--demo", "no",
            *extra]


@pytest.fixture(scope="module")
def class_dir(tmp_path_factory):
    """The release of lesson 01 and three demo students' submissions (s04_crash's 30 s loop left out)."""
    return lesson01_runs.class_dir(tmp_path_factory)


def fresh_root(tmp_path_factory, class_dir, name):
    root = tmp_path_factory.mktemp(name)
    lesson01_runs.copy_class(class_dir, root)
    # short: the kernels' IPC socket paths live below it and a Unix socket path has at most 107 bytes
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="dk-", dir="/tmp"))
    atexit.register(shutil.rmtree, tmp, True)
    return root, tmp


def results(root):
    folder = root / "logs" / "results" / ASSIGNMENT
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}


@pytest.fixture(scope="module")
def local_course(tmp_path_factory):
    """A LocalCluster of --workers processes started by the command (``grade --engine dask``): the session's
    run of the class (tests/lesson01_runs.py), which this file's later tests may change (a page graded by hand)."""
    run = lesson01_runs.dask_local_run(tmp_path_factory)
    proc = types.SimpleNamespace(**{k: run[k] for k in ("returncode", "stdout", "stderr")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "[cluster] grading on a local Dask cluster of 2 worker process(es)" in proc.stdout
    assert run["tmp_left"] == [], f"left in the temporary folder: {run['tmp_left']}"
    # not a terminal: plain progress lines, no cursor movement (issue 61)
    assert "\x1b" not in proc.stdout + proc.stderr and "\r" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    assert f"[progress] {ASSIGNMENT}: 3 of 3 graded in" in proc.stderr, proc.stderr[-2000:]
    grades = run["grades"]
    assert set(grades) == set(STUDENTS) and grades["s01_correct"][0] == 9.0, grades
    return run["root"], grades, proc


@pytest.fixture(scope="module")
def local_run(local_course):
    return local_course[1]


def test_the_forked_workers_show_the_same_plain_progress_and_grades(tmp_path_factory, class_dir, local_run):
    """--engine processes: the progress read from the workers' claims and results, as plain lines in a log."""
    root, tmp = fresh_root(tmp_path_factory, class_dir, "processes")
    proc = subprocess.run(grade_cmd("--engine", "processes"), cwd=REPO, env=env_for(root, tmp), capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert read_grades(root) == local_run
    assert "\x1b" not in proc.stdout + proc.stderr and "\r" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    assert f"[progress] {ASSIGNMENT}: 3 of 3 graded in" in proc.stderr, proc.stderr[-2000:]
    assert "[progress] 3 of 3 graded" in proc.stderr, proc.stderr[-2000:]


def test_the_engine_dask_by_default_the_forked_workers_when_asked_or_without_dask(monkeypatch):
    sys.path.insert(0, REPO)
    from grading import pipeline

    assert pipeline.engine_for("auto", None) == "dask"
    assert pipeline.Options(assignments=[]).engine == "dask"
    monkeypatch.setattr(pipeline, "dask_installed", lambda: False)
    assert pipeline.engine_for("auto", None) == "processes"
    assert pipeline.engine_for("auto", "tcp://lab01:8786") == "dask"
    monkeypatch.undo()
    assert pipeline.engine_for("auto", "tcp://lab01:8786") == "dask"
    assert pipeline.engine_for("dask", None) == "dask"
    assert pipeline.engine_for("processes", None) == "processes"
    with pytest.raises(ValueError, match="--engine dask"):
        pipeline.engine_for("processes", "tcp://lab01:8786")


def test_local_workers_share_one_warm_template_and_write_the_clients_feedback_pages(local_course, tmp_path):
    """The feedback pages of submissions nobody graded by hand are written on the workers: byte for byte
    the pages nbgrader writes in the course from the course's gradebook. Every kernel of a local cluster
    came from the one template the command started (none of a worker's own)."""
    root, _, _ = local_course
    done = results(root)
    assert {r.get("feedback_by") for r in done.values()} == {"worker"}, done
    sys.path.insert(0, REPO)
    from grading.kernel import launcher, warm

    templates = {r.get("warm_template_pid") for r in done.values()}
    if warm.enabled() and launcher.bwrap_works()[0]:
        assert len(templates) == 1 and None not in templates, templates
        assert int(templates.pop()) not in {r["worker_pid"] for r in done.values()}
    else:
        assert templates == {None}, templates
    pages = {p.relative_to(root / "feedback"): p.read_bytes() for p in (root / "feedback").rglob("*.html")}
    assert len(pages) == len(STUDENTS), sorted(pages)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--force"],
                          cwd=os.path.join(REPO, "grading"), env=env_for(root, tmp), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = {p.relative_to(root / "feedback"): p.read_bytes() for p in (root / "feedback").rglob("*.html")}
    assert again.keys() == pages.keys()
    differ = [str(k) for k in pages if pages[k] != again[k]]
    assert not differ, f"the workers' pages differ from the course's own: {differ}"


def test_a_hand_graded_submissions_page_is_written_by_the_client(local_course, tmp_path):
    """A comment given by hand is in the course's gradebook only: that submission's page is written by the
    client, from the course's gradebook, and shows it."""
    root, _, _ = local_course
    from nbgrader.api import Gradebook

    note = "Hand note from the teacher: look at the scaling again."
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        comment = gb.find_submission(ASSIGNMENT, "s02_blank").notebooks[0].comments[0]
        comment.manual_comment = note
        gb.db.commit()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="dk-", dir="/tmp"))
    try:
        proc = subprocess.run(grade_cmd("--engine", "dask", "--student", "s02_blank"), cwd=REPO, env=env_for(root, tmp),
                              capture_output=True, text=True, timeout=1200)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    done = results(root)
    assert done["s02_blank"]["feedback_by"] == "client", done["s02_blank"]
    assert done["s02_blank"]["feedback_ok"] is True
    page = "".join(p.read_text() for p in (root / "feedback" / "s02_blank" / ASSIGNMENT).glob("*.html"))
    assert note in page


class Cluster:
    """`dask scheduler` and `dask worker`s as separate processes on loopback, each in its own folder."""

    def __init__(self, base, env):
        self.base, self.env, self.workers = base, env, []
        folder = base / "scheduler"
        folder.mkdir()
        self.file = folder / "scheduler.json"
        self.scheduler = subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(self.file)],
            cwd=folder, env=dict(env, TMPDIR=str(folder)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 120
        while not self.file.exists():
            assert self.scheduler.poll() is None and time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.2)
        time.sleep(0.2)
        self.address = json.loads(self.file.read_text())["address"]

    def add_worker(self, name, **extra):
        folder = self.base / name
        (folder / "tmp").mkdir(parents=True)
        log = open(folder / "worker.log", "w")
        proc = subprocess.Popen(
            [DASK, "worker", self.address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--name", name,
             "--local-directory", str(folder)],
            cwd=folder, env=dict(self.env, TMPDIR=str(folder / "tmp"), **extra), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.workers.append(proc)
        return proc

    def client(self):
        from distributed import Client

        return Client(self.address, timeout="60s")

    def wait_for_workers(self, n):
        with self.client() as client:
            client.wait_for_workers(n, timeout=180)

    def stop(self):
        for proc in [*self.workers, self.scheduler]:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # a worker killed by SIGKILL (here, or mid-run) leaves the IPC tmpfs of its kernels mounted in its folder:
        # released as the grading command releases its own (else pytest cannot remove the folder later: "Device or
        # resource busy", a warning in every later session)
        from grading.kernel import launcher

        with open("/proc/self/mountinfo") as fh:
            points = [line.split()[4] for line in fh]
        for point in sorted((p for p in points if p.startswith(str(self.base) + "/")), reverse=True):
            launcher.release_ipc_folder(point)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, class_dir):
    base = tmp_path_factory.mktemp("dask-cluster")
    env = env_for(base, base)
    env.pop("COURSE_ROOT")
    c = Cluster(base, env)
    try:
        c.add_worker("w1")
        c.add_worker("w2")
        c.wait_for_workers(2)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def remote_run(tmp_path_factory, class_dir, cluster):
    """The class graded through the scheduler's address, by the cluster's two workers and a third one that is
    killed (with its nanny, for good) while it grades a submission: one run shows both that a class graded on
    the scheduler's workers gets the local grades and that a lost worker costs none (a run of its own for each
    graded the same three submissions twice)."""
    root, tmp = fresh_root(tmp_path_factory, class_dir, "dask-remote")
    cluster.add_worker("w3")  # the one to kill: a third worker, so two stay for the later tests
    cluster.wait_for_workers(3)
    with cluster.client() as client:
        pids = set(client.run(os.getpid).values())
        nanny_of = client.run(os.getppid)  # {address: pid of its `dask worker` nanny, the process we started}
        log = open(root.parent / "dask-remote.log", "w+")
        proc = subprocess.Popen(grade_cmd("--scheduler", cluster.address), cwd=REPO, env=env_for(root, tmp),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        victim, since, deadline = None, {}, time.monotonic() + 900
        try:
            while victim is None:
                assert proc.poll() is None and time.monotonic() < deadline, "the run ended before a worker was killed"
                for addr, keys in client.processing().items():
                    if any(str(k).startswith("grade-") for k in keys):
                        since.setdefault(addr, time.monotonic())
                        if time.monotonic() - since[addr] > 2.0:  # it is in the middle of a submission
                            victim = addr
                            in_flight = {str(k)[len(f"grade-{ASSIGNMENT}-"):].rsplit("-", 1)[0]
                                         for k in keys if str(k).startswith("grade-")}
                    else:
                        since.pop(addr, None)
                time.sleep(0.1)
            started = {p.pid: p for p in cluster.workers}
            dead = started[nanny_of[victim]]
            os.killpg(dead.pid, signal.SIGKILL)  # the worker and its nanny: gone for good
            dead.wait()
            rc = proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    log.seek(0)
    output = log.read()
    log.close()
    return dict(root=root, tmp=tmp, rc=rc, output=output, pids=pids, victim=victim, in_flight=in_flight)


def test_a_class_graded_through_a_schedulers_address_gets_the_local_grades(remote_run, local_run, cluster):
    root, tmp, output = remote_run["root"], remote_run["tmp"], remote_run["output"]
    assert remote_run["rc"] == 0, output[-3000:]
    assert f"[cluster] grading on the Dask scheduler at {cluster.address} (3 worker(s))" in output, output[-3000:]
    assert read_grades(root) == local_run, output[-3000:]  # every grade, each once
    done = results(root)
    assert set(done) == set(STUDENTS)
    # graded in the worker processes, not in the command: each result names the worker that ran its kernel
    assert {r["worker_pid"] for r in done.values()} <= remote_run["pids"], (done, remote_run["pids"])
    # the course's own folder holds what the client wrote from the returned bytes
    for s in STUDENTS:
        assert list((root / "autograded" / s / ASSIGNMENT).glob("*.ipynb")), s
        assert list((root / "feedback" / s / ASSIGNMENT).glob("*.html")), s
    assert os.listdir(tmp) == [], f"left in the temporary folder: {os.listdir(tmp)}"


def test_a_worker_killed_while_it_grades_loses_no_grade(remote_run, cluster):
    """The run above lost a worker in the middle of a submission: every grade is there once (the test above),
    and what the killed worker was grading was graded again by a surviving worker (what it had finished before
    the kill was recorded then, once)."""
    done, in_flight, output = results(remote_run["root"]), remote_run["in_flight"], remote_run["output"]
    survivors = set(client_pids(cluster).values())
    assert remote_run["rc"] == 0, output[-3000:]
    assert in_flight and in_flight <= set(STUDENTS), in_flight
    assert all(done[s]["worker_pid"] in survivors for s in in_flight), (in_flight, done, survivors)
    # the instructor is told which worker was lost and which submissions went to another (issue 61)
    lost = [line for line in output.splitlines() if line.startswith(f"[cluster] lost worker {remote_run['victim']}")]
    assert lost and all(f"{ASSIGNMENT}/{s} (its try 2)" in lost[0] for s in in_flight), output[-3000:]


def client_pids(cluster):
    with cluster.client() as client:
        return client.run(os.getpid)


def test_a_worker_without_bubblewrap_is_refused_before_anything_is_graded(tmp_path_factory, class_dir, cluster,
                                                                          remote_run, local_run):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed here: the client itself grades without it")
    root, tmp = fresh_root(tmp_path_factory, class_dir, "dask-refused")
    # a worker whose PATH has this environment's bin but not bubblewrap's: it would grade without the sandbox
    odd = cluster.add_worker("nobwrap", PATH=os.path.dirname(sys.executable))
    try:
        cluster.wait_for_workers(len(client_pids(cluster)) + 1)
        proc = subprocess.run(grade_cmd("--scheduler", cluster.address), cwd=REPO, env=env_for(root, tmp),
                              capture_output=True, text=True, timeout=600)
    finally:
        os.killpg(odd.pid, signal.SIGKILL)
        odd.wait()
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "have an environment that differs" in proc.stderr and "sandbox: worker has 'no isolation" in proc.stderr, \
        proc.stderr[-3000:]
    assert not results(root), "a worker graded before the refusal"


def test_a_gradebook_left_without_its_schema_version_gets_nbgraders(tmp_path):
    """nbgrader creates a gradebook's tables, then asks `alembic` for the schema version: a run interrupted in
    between (tests/test_interrupt.py, seed 1, found it) left a course gradebook without the version, and the
    Dask client, which copies the version into the assignments' gradebooks, failed on --resume."""
    import sqlite3

    sys.path.insert(0, REPO)
    from grading import cluster  # not worker.import_nbgrader: it would leave nbformat patched in this process
    from nbgrader.api import Gradebook

    path = tmp_path / "gradebook.db"
    url = f"sqlite:///{path}"
    with Gradebook(url):
        pass
    with sqlite3.connect(path) as db:
        (head,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
        db.execute("DROP TABLE alembic_version")
    empty = cluster.empty_gradebook(url)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(head,)]
    copy = tmp_path / "empty.db"
    copy.write_bytes(empty)
    with sqlite3.connect(copy) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(head,)]
        assert db.execute("SELECT count(*) FROM student").fetchone() == (0,)
