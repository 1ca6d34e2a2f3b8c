"""The lab-machine commands of grading/docs/scale-out.md, run as written (issue 61).

The page's fenced ``bash`` blocks are read from the file and run through bash, each from a folder of its
own (never the repository) with a temporary folder of its own and no PYTHONPATH: the certificates, a
scheduler over ``tls://`` on loopback, two workers, and the grading command on lesson 01's demo class
(three students; s04_crash's 30 s loop left out). Only the page's ``# settings`` block is replaced by
this test's values (loopback, a free port, its own certificate folder), and the grade line gets
``--assignment 01_attention --demo no`` (the class, in ``COURSE_ROOT``). While the class is graded one
worker process is killed (SIGKILL, its nanny restarts it). Checked: every demo score as expected; the
command printed the lost worker and the submission retried; its output, redirected to a file, holds no
escape sequence or carriage return and has the plain progress lines; no submission is left in any
worker's or the command's temporary folder (the killed worker's private folder removed by its
successor). One class run: Dask class runs are slow.

Cheap checks beside it: a tcp:// address that is not loopback, and tls:// without the course's
files, are refused before anything is graded, with the reason.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import REPO

PAGE = os.path.join(REPO, "grading", "docs", "scale-out.md")
ASSIGNMENT = "01_attention"
STUDENTS = ("s01_correct", "s02_blank", "s03_misconception")
SETTINGS = ("COURSE", "SCHEDULER", "PORT", "CERTS", "ME", "MACHINES", "PROCESSES")


def blocks() -> dict:
    """{first comment line: body} of the page's ```bash blocks."""
    with open(PAGE) as fh:
        text = fh.read()
    found = {}
    for body in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        first, _, rest = body.partition("\n")
        assert first.startswith("# "), f"a bash block of {PAGE} does not start with its name: {body[:80]!r}"
        found[first[2:].strip()] = rest
    return found


def test_the_page_names_the_blocks_and_settings_the_test_runs():
    found = blocks()
    assert {"settings", "certificates", "scheduler", "worker", "grade"} <= set(found), sorted(found)
    names = re.findall(r"^(\w+)=", found["settings"], flags=re.M)
    assert tuple(names) == SETTINGS, f"the settings block sets {names}; this test supplies {SETTINGS}"
    assert "0.0.0.0" not in "".join(found.values()), "the scheduler must bind to an address the instructor names"
    assert "PYTHONPATH" not in "".join(found.values()) and "tcp://" not in "".join(found.values())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "COURSE_ROOT", "COURSE_DB_URL", "COURSE_DASK_SCHEDULER")
           and not k.startswith(("COURSE_DASK_TLS", "DASK_"))}
    env.update(extra)
    return env


class Shell:
    """One of the page's blocks run by bash in a folder of its own, with this test's settings."""

    def __init__(self, base, name, settings, script, append="", **env):
        self.folder = base / name
        self.folder.mkdir()
        # short: the kernels' IPC socket paths live below the temporary folder (a Unix socket path: 107 bytes)
        self.tmp = tempfile.mkdtemp(prefix="dkt-", dir="/tmp")
        self.log_path = self.folder / "out.log"
        self.log = open(self.log_path, "w")
        lines = [f"{k}={v!r}" if " " not in str(v) else f"{k}='{v}'" for k, v in settings.items()]
        body = script.rstrip() + (" " + append if append else "") + "\n"
        self.proc = subprocess.Popen(["bash", "-ec", "\n".join(lines) + "\n" + body], cwd=self.folder,
                                     env=clean_env(TMPDIR=self.tmp, **env), stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def left_of_students(folder: str) -> list[str]:
    """Paths under ``folder`` that hold a submission: a notebook, or a course's submitted/ folder."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        out += [os.path.join(dirpath, d) for d in dirnames if d in ("submitted", "autograded", "feedback")]
        out += [os.path.join(dirpath, f) for f in filenames if f.endswith(".ipynb")]
    return out


@pytest.fixture(scope="module")
def tls_class(tmp_path_factory):
    """Lesson 01's release and three demo students, in a course folder of their own."""
    base = tmp_path_factory.mktemp("tls-class")
    sys.path.insert(0, REPO)
    from grading import demo

    from shared_runs import copy_lesson01_release

    copy_lesson01_release(tmp_path_factory, base)  # `nbgrader generate_assignment 01_attention`, made once
    demo.generate(ASSIGNMENT, str(base / "submitted"), release_dir=str(base / "release"))
    shutil.rmtree(base / "submitted" / "s04_crash")
    return base


@pytest.mark.slow
def test_the_lab_machine_commands_grade_over_tls_and_survive_a_killed_worker(tmp_path, tls_class):
    found = blocks()
    port = free_port()
    certs = tmp_path / "certs"
    common = {"COURSE": REPO, "SCHEDULER": "127.0.0.1", "PORT": port, "CERTS": str(certs),
              "MACHINES": "scheduler w1 w2 instructor", "PROCESSES": 1}
    shells = []
    try:
        made = Shell(tmp_path, "certificates", {**common, "ME": "instructor"}, found["certificates"])
        shells.append(made)
        assert made.proc.wait(timeout=120) == 0, made.output()
        for name in ("ca", "scheduler", "w1", "w2", "instructor"):
            assert (certs / f"{name}.pem").exists() and (certs / f"{name}-key.pem").exists(), made.output()
        assert (certs / "w1-key.pem").stat().st_mode & 0o077 == 0, "a key readable by others"

        scheduler = Shell(tmp_path, "scheduler", {**common, "ME": "scheduler"}, found["scheduler"])
        shells.append(scheduler)
        address = f"tls://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while address not in scheduler.output():
            assert scheduler.proc.poll() is None and time.monotonic() < deadline, scheduler.output()[-3000:]
            time.sleep(0.5)
        workers = [Shell(tmp_path, w, {**common, "ME": w}, found["worker"]) for w in ("w1", "w2")]
        shells += workers

        from distributed import Client
        from distributed.security import Security

        security = Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / "instructor.pem"),
                            tls_client_key=str(certs / "instructor-key.pem"), require_encryption=True)
        with Client(address, security=security, timeout="60s") as client:
            client.wait_for_workers(2, timeout=240)
            pid_of = client.run(os.getpid)  # {worker address: its worker process (the nanny's child)}
            grade = Shell(tmp_path, "grade", {**common, "ME": "instructor"}, found["grade"],
                          append=f"--assignment {ASSIGNMENT} --demo no --workers 2",
                          COURSE_ROOT=str(tls_class), COURSE_CELL_TIMEOUT="30")
            shells.append(grade)
            victim, since, deadline = None, {}, time.monotonic() + 900
            while victim is None:
                assert grade.proc.poll() is None and time.monotonic() < deadline, \
                    "the run ended before a worker was killed:\n" + grade.output()[-3000:]
                for addr, keys in client.processing().items():
                    mine = [str(k) for k in keys if str(k).startswith("grade-")]
                    if mine:
                        since.setdefault(addr, time.monotonic())
                        if time.monotonic() - since[addr] > 2.0:  # in the middle of a submission
                            victim = addr
                            in_flight = {k[len(f"grade-{ASSIGNMENT}-"):].rsplit("-", 1)[0] for k in mine}
                    else:
                        since.pop(addr, None)
                time.sleep(0.1)
            victim_pid = pid_of[victim]
            os.kill(victim_pid, signal.SIGKILL)  # the worker process; its nanny starts a new one
            rc = grade.proc.wait(timeout=900)
            output = grade.output()
            assert rc == 0, output[-4000:]
            client.wait_for_workers(2, timeout=240)  # the nanny's new worker has started (and cleaned)
            time.sleep(1.0)

        # every demo score as expected
        from grading import demo

        expected = demo.expected_scores()[ASSIGNMENT]
        with open(tls_class / "grades.csv") as fh:
            import csv

            rows = [r for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT]
        assert {r["student_id"]: float(r["score"]) for r in rows} == {s: expected[s] for s in STUDENTS}, output[-3000:]
        assert f"[cluster] grading on the Dask scheduler at {address} (2 worker(s))" in output, output[-3000:]
        user = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
        assert f"[cluster] the workers run as: {user}" in output, output[-3000:]
        # the fault lines: which worker, which submission went to another worker
        lost = [line for line in output.splitlines() if line.startswith(f"[cluster] lost worker {victim}")]
        assert lost, f"no line names the lost worker {victim}:\n{output[-3000:]}"
        assert in_flight and all(f"{ASSIGNMENT}/{s} (its try 2)" in lost[0] for s in in_flight), (in_flight, lost)
        for s in in_flight:  # and where the next try started: not on the killed worker
            again = [line for line in output.splitlines() if line.startswith(f"[cluster] retried {ASSIGNMENT}/{s}: try 2")]
            assert len(again) == 1 and f"started on worker {victim}" not in again[0], output[-3000:]
        done = {}
        for s in STUDENTS:
            with open(tls_class / "logs" / "results" / ASSIGNMENT / f"{s}.json") as fh:
                done[s] = json.load(fh)
        assert all(done[s]["worker_pid"] != victim_pid for s in in_flight), done
        # a log an instructor can read: no cursor movement, the plain progress lines
        assert "\x1b" not in output and "\r" not in output, repr(output[-2000:])
        assert f"[progress] {ASSIGNMENT}: 3 of 3 graded in" in output, output[-3000:]
        assert "[progress] 3 of 3 graded" in output, output[-3000:]
        # kernels' banners out of the workers' logs
        for w in workers:
            assert "--existing" not in w.output() and "To connect another client" not in w.output(), w.output()[-2000:]
            assert "SAWarning" not in w.output(), w.output()[-2000:]
        # nothing of a student left in any temporary folder; the killed worker's private folder removed
        for shell in shells:
            assert not left_of_students(shell.tmp), (shell.folder.name, left_of_students(shell.tmp))
            stale = [n for n in os.listdir(shell.tmp) if n.startswith(f"course-dask-worker-{victim_pid}-")]
            assert not stale, f"the killed worker's private folder is still there: {stale}"
        from grading import cluster

        for w in workers:  # the surviving workers' kernels are gone: no kernel's IPC tmpfs is left mounted
            assert not [p for p in cluster.mounts_below(w.tmp) if f"course-dask-worker-{victim_pid}-" in p], \
                cluster.mounts_below(w.tmp)
        assert any("removed 1 stale private folder" in w.output() for w in workers), \
            "\n".join(w.output()[-1500:] for w in workers)
    finally:
        for shell in reversed(shells):
            shell.stop()


def run_grade(*args):
    return subprocess.run([sys.executable, "-m", "grading", "grade", "--demo", "no", *args], cwd="/",
                          env=clean_env(), capture_output=True, text=True, timeout=300)


def test_an_unencrypted_address_off_loopback_is_refused_with_the_reason():
    proc = run_grade("--scheduler", "tcp://10.1.2.3:8786")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refusing the unencrypted address tcp://10.1.2.3:8786" in proc.stderr, proc.stderr
    assert "tls://" in proc.stderr and "--insecure" in proc.stderr, proc.stderr
    proc = run_grade("--scheduler", "tls://lab01:8786")
    assert proc.returncode == 2 and "no --tls-ca-file" in proc.stderr, proc.stderr


def test_loopback_and_tls_addresses_pass_the_check(tmp_path):
    sys.path.insert(0, REPO)
    from grading import cluster

    cluster.check_address("tcp://127.0.0.1:8786", files={})
    cluster.check_address("tcp://[::1]:8786", files={})
    cluster.check_address("tcp://lab01:8786", insecure=True, files={})
    files = {}
    for k in ("ca", "cert", "key"):
        (tmp_path / k).write_text("x")
        files[k] = str(tmp_path / k)
    cluster.check_address("tls://lab01:8786", files=files)
    for bad in ("tcp://0.0.0.0:8786", "tcp://lab01:8786", "lab01:8786"):
        with pytest.raises(cluster.ClusterError, match="refusing the unencrypted address"):
            cluster.check_address(bad, files={})


@pytest.mark.slow
def test_a_scheduler_that_cannot_import_the_course_is_named_before_anything_is_graded(tmp_path, tls_class):
    """A scheduler started from a Python where ``grading`` does not import (here: a folder on its PYTHONPATH
    whose ``grading`` fails as a missing package would) unpickles no task: the command says so and why."""
    shadow = tmp_path / "shadow" / "grading"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'grading'\", name='grading')\n")
    port = free_port()
    log = open(tmp_path / "scheduler.log", "w")
    scheduler = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "dask"), "scheduler", "--host",
                                  "127.0.0.1", "--port", str(port), "--no-dashboard"], cwd=tmp_path,
                                 env=clean_env(PYTHONPATH=str(shadow.parent)), stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while f"tcp://127.0.0.1:{port}" not in (tmp_path / "scheduler.log").read_text():
            assert scheduler.poll() is None and time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.3)
        tmp = tempfile.mkdtemp(prefix="dkt-", dir="/tmp")
        proc = subprocess.run([sys.executable, "-m", "grading", "grade", "--assignment", ASSIGNMENT, "--demo", "no",
                               "--scheduler", f"tcp://127.0.0.1:{port}"], cwd=tmp,
                              env=clean_env(COURSE_ROOT=str(tls_class), TMPDIR=tmp), capture_output=True, text=True,
                              timeout=600)
        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        os.killpg(scheduler.pid, signal.SIGKILL)
        scheduler.wait()
        log.close()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "the Dask scheduler could not run the course's environment check" in proc.stderr, proc.stderr[-2000:]
    assert "No module named 'grading'" in proc.stderr and "nothing was graded" in proc.stderr, proc.stderr[-2000:]
