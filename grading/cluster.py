"""Grading on Dask: one task per submission, on a local cluster or on a department's cluster.

The split (issue 36):

* the **client** (``python -m grading grade``, :func:`autograde`) reads each submission's files into
  bytes and sends them, with a copy of the assignment's part of the gradebook (cells, points, due date;
  no student's data), to a worker as one Dask task; when the task comes back it writes the autograded
  notebooks into the course, records the grades in the course's gradebook (nbgrader's own
  ``SaveAutoGrades`` and ``AssignLatePenalties``, run on the returned notebooks: the client is the
  gradebook's one writer, so PostgreSQL or SQLite see one process), writes the feedback page from that
  gradebook (so hand grades already given show), and the result file ``--resume`` reads;
* a **worker** (:func:`grade_submission`) needs no shared file system: it writes the files into a course
  folder private to its process, runs nbgrader's autograde there exactly as a local worker does
  (``grading.worker.grade_one``: the sandboxed kernel, the verifier, the integrity scan, time limits,
  warm kernels) and returns the autograded notebooks as bytes, the log, the problems and the timings as
  plain data.

``--scheduler ADDRESS`` or ``COURSE_DASK_SCHEDULER`` connects to a running scheduler; ``--engine dask``
without one starts a ``LocalCluster`` of N single-threaded worker processes (``--workers N``; not the
default on one machine, where the forked workers of grading/worker.py were measured faster) (README,
"Grading on several machines"). Before anything is graded every worker's environment is compared with
the client's (:func:`fingerprint`: the course's files, Python, torch, nbgrader, the sandbox); a worker
that differs is refused by name. A worker killed in the middle of a submission: Dask gives the task to
another worker (up to ``distributed.scheduler.allowed-failures`` times); a task that fails on every try
comes back as the grader's fault, never as a 0.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import sys
import tempfile
import time

from grading import NOTEBOOKS_DIR, PACKAGE_DIR, REPO_DIR

SCHEDULER_ENV = "COURSE_DASK_SCHEDULER"
TASK_RETRIES = 2  # a task that raised (not a killed worker: Dask retries those itself) is tried again
# the environment a worker must share with the client (the rest, e.g. the machine's name, may differ)
FINGERPRINT_KEYS = ("course", "python", "torch", "nbgrader", "dask", "sandbox", "kernel")


class ClusterError(RuntimeError):
    """The cluster cannot grade (no scheduler, no worker, a worker whose environment differs)."""


# ------------------------------------------------------------------ the environment a worker must share
def _course_files():
    """The files that decide a grade: course_lib and grading's Python files and the source notebooks."""
    for top in (os.path.join(REPO_DIR, "course_lib"), PACKAGE_DIR):
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")) and d != "demo_class")
            for name in sorted(filenames):
                if name.endswith(".py") and os.path.dirname(os.path.join(dirpath, name)) != os.path.join(PACKAGE_DIR, "demo"):
                    yield os.path.join(dirpath, name)
    for a in sorted(os.listdir(NOTEBOOKS_DIR)) if os.path.isdir(NOTEBOOKS_DIR) else []:
        folder = os.path.join(NOTEBOOKS_DIR, a)
        if os.path.isdir(folder):
            for name in sorted(os.listdir(folder)):
                if name.endswith(".ipynb"):
                    yield os.path.join(folder, name)


_FINGERPRINT: dict = {}


def fingerprint() -> dict:
    """What a worker must share with the client to grade the same way, as plain strings (cached)."""
    if _FINGERPRINT:
        return dict(_FINGERPRINT)
    import importlib.metadata as md

    digest = hashlib.sha256()
    for path in _course_files():
        digest.update(os.path.relpath(path, REPO_DIR).encode() + b"\0")
        with open(path, "rb") as fh:
            digest.update(fh.read())
        digest.update(b"\0")

    def version(dist):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "not installed"

    from grading import sandbox

    kernel = os.environ.get("COURSE_KERNEL", sandbox.KERNEL_NAME)
    if kernel == sandbox.KERNEL_NAME:
        ok, why = sandbox.bwrap_works()
        box = "bubblewrap" if ok else f"no isolation ({why})"
    else:
        box = f"none (kernel {kernel})"
    _FINGERPRINT.update(course=digest.hexdigest()[:16], python=".".join(map(str, sys.version_info[:2])),
                        torch=version("torch"), nbgrader=version("nbgrader"), dask=version("distributed"),
                        sandbox=box, kernel=kernel, host=os.uname().nodename, pid=str(os.getpid()))
    return dict(_FINGERPRINT)


def differences(mine: dict, theirs: dict) -> list[str]:
    """The fields of FINGERPRINT_KEYS where a worker (``theirs``) differs from the client (``mine``)."""
    return [f"{k}: worker has {theirs.get(k)!r}, the client {mine.get(k)!r}"
            for k in FINGERPRINT_KEYS if theirs.get(k) != mine.get(k)]


def check_workers(client, mine: dict) -> dict:
    """Every worker's fingerprint against the client's; raise ClusterError naming each worker that differs.
    Returns {address: fingerprint}."""
    theirs = client.run(fingerprint)
    if not theirs:
        raise ClusterError("the scheduler has no worker: start `dask worker ADDRESS` on the grading machines")
    bad = {addr: differences(mine, fp) for addr, fp in theirs.items() if differences(mine, fp)}
    if bad:
        lines = [f"  {addr} ({theirs[addr].get('host')}): " + "; ".join(d) for addr, d in sorted(bad.items())]
        raise ClusterError(
            f"{len(bad)} of {len(theirs)} Dask worker(s) have an environment that differs from this one and would "
            "not grade the same way; nothing was graded. Install the same course version and environment on them "
            "(README, 'Grading on several machines'), or stop them:\n" + "\n".join(lines))
    return theirs


# ------------------------------------------------------------------ what travels: files and the gradebook's assignment
def read_submission(folder: str, held: list[str] | None = None) -> dict:
    """{relative path: bytes} of the regular files of a submission folder, without what intake holds back
    (``held``: absolute paths) and without links or special files (nbgrader copies neither)."""
    import stat

    held = set(held or ())
    files = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if os.path.join(dirpath, d) not in held)
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if path in held or not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            with open(path, "rb") as fh:
                files[os.path.relpath(path, folder)] = fh.read()
    return files


def write_files(folder: str, files: dict) -> None:
    for rel, data in files.items():
        path = os.path.normpath(os.path.join(folder, rel))
        if not path.startswith(os.path.normpath(folder) + os.sep):
            raise ValueError(f"a file name leaves its folder: {rel!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)


def assignment_gradebook(db_url: str, assignment: str) -> bytes:
    """A SQLite gradebook holding only ``assignment`` as the course's gradebook stores it (its notebooks,
    cells, points, sources, due date), no student: what a worker's nbgrader needs to grade it."""
    from nbgrader.api import Gradebook

    bin_path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="course-seed-") as tmp, _environment({"PATH": bin_path}):
        path = os.path.join(tmp, "gradebook.db")  # a new gradebook runs `alembic` (this environment's)
        with Gradebook(db_url) as src, Gradebook(f"sqlite:///{path}") as dst:
            a = src.find_assignment(assignment)
            dst.add_assignment(a.name, duedate=a.duedate, course_id=a.course_id)
            for nb in a.notebooks:
                dst.add_notebook(nb.name, a.name)
                for c in nb.grade_cells:
                    dst.add_grade_cell(c.name, nb.name, a.name, max_score=c.max_score, cell_type=c.cell_type)
                for c in nb.solution_cells:
                    dst.add_solution_cell(c.name, nb.name, a.name)
                for c in nb.task_cells:
                    dst.add_task_cell(c.name, nb.name, a.name, max_score=c.max_score, cell_type=c.cell_type)
                for c in nb.source_cells:
                    dst.add_source_cell(c.name, nb.name, a.name, cell_type=c.cell_type, locked=c.locked,
                                        source=c.source, checksum=c.checksum)
        with open(path, "rb") as fh:
            return fh.read()


# ------------------------------------------------------------------ the worker's side
_WORKER: dict = {}  # per worker process: its private folder, its warm-kernel template


def _quiet() -> None:
    """A local cluster's worker writes its kernels' chatter (ipykernel's notes on stderr) to a log in its
    folder, not on the grading command's terminal, as the forked workers do (their stderr is read only
    when one fails)."""
    if _WORKER.get("quiet"):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    log = os.open(os.path.join(_worker_folder(), "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(null, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    _WORKER["quiet"] = True


def _worker_folder() -> str:
    if "folder" not in _WORKER:
        from grading import warm

        # this worker dies with the process that started it (a LocalCluster's client, `dask worker`'s nanny),
        # and its kernels and template with it (their own PR_SET_PDEATHSIG, bwrap --die-with-parent)
        with contextlib.suppress(OSError):
            warm.prctl(warm.PR_SET_PDEATHSIG, signal.SIGKILL)
        _WORKER["folder"] = tempfile.mkdtemp(prefix="course-dask-worker-")
        import atexit

        atexit.register(_worker_cleanup)
    return _WORKER["folder"]


def _worker_cleanup() -> None:
    template = _WORKER.pop("template", None)
    if template is not None:
        template.terminate()
        with contextlib.suppress(Exception):
            template.wait(timeout=10)
    shutil.rmtree(_WORKER.pop("folder", ""), ignore_errors=True)


def _warm_template(assignments: list[str], kernel: str) -> dict:
    """One template of warm kernels per worker process (grading/warm.py), started at its first task."""
    from grading import warm

    if kernel != "course-sandbox" or not warm.enabled():
        return {}
    if "template" not in _WORKER or _WORKER["template"].poll() is not None:
        folder = os.path.join(_worker_folder(), "warm")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        _WORKER["template"], _WORKER["socket"] = warm.start(folder, assignments)
    return warm.environment(_WORKER["template"], _WORKER["socket"])


@contextlib.contextmanager
def _environment(values: dict):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def grade_submission(task: dict) -> dict:
    """A Dask task: grade one submission in a course folder private to this worker process; return plain
    data (``result``: as ``grading.worker.grade_one`` records it; ``autograded``: {path: bytes}).

    ``task``: assignment, student, files {path: bytes}, gradebook (bytes, :func:`assignment_gradebook`),
    fingerprint (the client's), kernel, env (e.g. the second pass's time limits), assignments (what
    the run grades: the warm kernels' warm-ups)."""
    import grading
    from grading import sandbox, worker

    a, s = task["assignment"], task["student"]
    mine = fingerprint()
    refused = differences(task["fingerprint"], mine)
    if refused:  # a worker that joined after the check: it grades nothing
        return {"refused": f"worker {mine['host']} (pid {mine['pid']}) differs from the client: " + "; ".join(refused)}
    if task.get("local"):
        _quiet()
    root = os.path.join(_worker_folder(), "course")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "submitted", s, a))
    with open(os.path.join(root, "gradebook.db"), "wb") as fh:
        fh.write(task["gradebook"])
    write_files(os.path.join(root, "submitted", s, a), task["files"])
    if task["kernel"] == sandbox.KERNEL_NAME:
        from grading import edition

        edition.ensure()  # the kernels' course_lib on this worker: the students' edition, built once per process
    env = {"COURSE_ROOT": root, "COURSE_DB_URL": f"sqlite:///{os.path.join(root, 'gradebook.db')}?timeout=60",
           "COURSE_KERNEL": task["kernel"], **task.get("env", {}),
           **_warm_template(task.get("assignments") or [a], task["kernel"])}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    saved = grading.GRADING_DIR, worker.GRADING_DIR, sandbox.GRADING_DIR
    start = time.perf_counter()
    try:
        with _environment(env):
            grading.GRADING_DIR = worker.GRADING_DIR = sandbox.GRADING_DIR = root
            api = worker.load_api()
            result = worker.grade_one(api, a, s, feedback=False)
            shutil.rmtree(os.path.dirname(api.config.KernelManager.ip), ignore_errors=True)
    finally:
        grading.GRADING_DIR, worker.GRADING_DIR, sandbox.GRADING_DIR = saved
    folder = os.path.join(root, "autograded", s, a)
    autograded = read_submission(folder) if os.path.isdir(folder) else {}
    result["worker"] = f"{mine['host']}:{mine['pid']}"
    result["worker_pid"] = os.getpid()
    result["task_seconds"] = round(time.perf_counter() - start, 2)
    shutil.rmtree(root, ignore_errors=True)
    return {"result": result, "autograded": autograded}


# ------------------------------------------------------------------ the client's side: the one writer
def save_grades(api, assignment: str, student: str, folder: str) -> None:
    """Record the grades of the autograded notebooks in ``folder`` in the course's gradebook, as nbgrader's
    autograde does after its kernel: the submission (with its timestamp), ``SaveAutoGrades`` on each
    notebook, ``AssignLatePenalties``, and 0 for a notebook of the assignment that was not submitted."""
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades

    import warnings

    coursedir = api.coursedir
    db_url = coursedir.db_url
    src = coursedir.format_path(coursedir.submitted_directory, student, assignment)
    timestamp = coursedir.get_existing_timestamp(src)
    with Gradebook(db_url, coursedir.course_id) as gb, warnings.catch_warnings():
        # SQLAlchemy's note on nbgrader's new submission (its autograde meets it too, on a worker's stderr)
        warnings.filterwarnings("ignore", message=r".*not in session, add operation along")
        gb.update_or_create_student(student)
        if timestamp:
            gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        else:
            gb.update_or_create_submission(assignment, student)
        names = [nb.name for nb in gb.find_assignment(assignment).notebooks]
        for name in names:
            if not os.path.exists(os.path.join(folder, f"{name}.ipynb")):
                for grade in gb.find_submission_notebook(name, assignment, student).grades:
                    grade.auto_score = 0
                    grade.needs_manual_grade = False
                gb.db.commit()
    for name in names:
        path = os.path.join(folder, f"{name}.ipynb")
        if not os.path.exists(path):
            continue
        nb = nbformat.read(path, as_version=4)
        resources = {"nbgrader": {"notebook": name, "assignment": assignment, "student": student, "db_url": db_url}}
        nb, resources = SaveAutoGrades(parent=api).preprocess(nb, resources)
        AssignLatePenalties(parent=api).preprocess(nb, resources)


def write_feedback(api, assignment: str, student: str, result: dict) -> None:
    """The feedback page from the course's gradebook (hand grades included), the earlier page set aside
    while it is written (as ``grading.worker.grade_one`` does)."""
    from grading import worker

    fb_dir = os.path.join(api.coursedir.root, "feedback", student, assignment)
    fb_backup = worker.set_aside(fb_dir)
    fb_failed = True
    try:
        fb = api.generate_feedback(assignment, student, force=True)
        fb_failed = not fb.get("success")
        result["feedback_ok"] = not fb_failed
        if fb_failed:
            result["feedback_error"] = (fb.get("error") or fb.get("log") or "")[-4000:]
            fault = worker.machine_fault(result["feedback_error"])
            if fault:
                result["feedback_fault"] = fault
    except Exception as err:  # noqa: BLE001 - recorded: the grade stands, the page is the grader's failure
        result["feedback_ok"] = False
        result["feedback_error"] = f"{type(err).__name__}: {err}"
        result["feedback_fault"] = worker.machine_fault(result["feedback_error"]) or result["feedback_error"]
    finally:
        try:
            worker.put_back(fb_dir, fb_backup, failed=fb_failed)
        except OSError as err:
            result["feedback_fault"] = f"could not restore the earlier feedback page: {err}"


def record(api, assignment: str, student: str, returned: dict, feedback: bool) -> dict:
    """Write what a task returned into the course: autograded notebooks, grades, feedback. Returns the
    result to store. A failure of this machine (disk, gradebook) is the grader's, and the earlier
    autograded folder is put back."""
    from grading import worker

    start = time.perf_counter()
    root = api.coursedir.root
    result = dict(returned["result"])
    result.update(worker.content_hashes(assignment, student))  # this machine's files are what --resume compares
    folder = os.path.join(root, "autograded", student, assignment)
    backup = None
    try:
        if result.get("grader_fault"):
            return result  # the worker's machine failed: this course keeps what it had
        backup = worker.set_aside(folder)
        if result.get("autograded"):
            write_files(folder, returned["autograded"])
            save_grades(api, assignment, student, folder)
        else:  # nbgrader keeps an earlier run's grades when this one fails: drop them (the export says 0)
            result["stale_grades_removed"] = worker.remove_submission(api, assignment, student)
    except Exception as err:  # noqa: BLE001 - this machine's failure, named; never a student's 0
        text = f"{type(err).__name__}: {err}"
        result["autograde_ok"] = False
        result["grader_fault"] = worker.machine_fault(text) or f"could not record the grades: {text}"
    try:
        worker.put_back(folder, backup, failed=bool(result.get("grader_fault")))
    except OSError as err:
        result.setdefault("grader_fault", f"could not restore the earlier autograded folder: {err}")
    if feedback and result.get("autograded") and not result.get("grader_fault"):
        write_feedback(api, assignment, student, result)
    result["record_seconds"] = round(time.perf_counter() - start, 3)  # this process's share (the one writer)
    return result


# ------------------------------------------------------------------ the cluster
def _has_dashboard() -> bool:
    import importlib.util

    return importlib.util.find_spec("bokeh") is not None  # Dask's dashboard needs it; the course does not install it


class Cluster:
    """A Dask client for one grading run: a LocalCluster of ``workers`` single-threaded worker processes
    in this machine's run folder, or a running scheduler's address. ``kill()`` ends a local cluster's
    processes at once (an interrupt); ``close()`` ends it in order."""

    def __init__(self, workers: int, scheduler: str | None = None, log=print):
        import logging

        import dask
        from distributed import Client, LocalCluster

        self.local = not scheduler
        self.cluster = None
        if self.local:
            # fork: the workers start from this process, which has imported what they import (nbgrader,
            # torch, the checks) once; spawn would import all of it again in each
            dask.config.set({"distributed.worker.multiprocessing-method": "fork",
                             "distributed.worker.daemon": False,  # a worker starts kernels (processes)
                             "distributed.scheduler.work-stealing": False})
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        local_directory=tempfile.gettempdir(), host="127.0.0.1",
                                        dashboard_address=":0" if _has_dashboard() else None,
                                        silence_logs=logging.ERROR)
            self.client = Client(self.cluster)
            where = f"a local Dask cluster of {workers} worker process(es)"
        else:
            try:
                self.client = Client(scheduler, timeout="30s")
            except OSError as err:
                raise ClusterError(f"cannot reach the Dask scheduler at {scheduler}: {err} (start it with "
                                   "`dask scheduler`, README 'Grading on several machines')") from err
            n = len(self.client.scheduler_info().get("workers", {}))
            where = f"the Dask scheduler at {scheduler} ({n} worker(s))"
        link = self.client.dashboard_link if _has_dashboard() else None
        log(f"[cluster] grading on {where}" + (f"; dashboard {link}" if link else
                                                "; dashboard: install bokeh to see it"))

    def pids(self) -> list[int]:
        if not self.local:
            return []
        out = []
        for nanny in list(self.cluster.workers.values()):
            with contextlib.suppress(AttributeError):
                pid = nanny.process.process.pid
                if pid:
                    out.append(pid)
        return out

    def kill(self) -> None:
        """SIGKILL the local workers (their kernels and templates die with them), then close."""
        if self.local:
            for nanny in list(self.cluster.workers.values()):
                nanny.autorestart = False  # a nanny would start a new worker in place of the killed one
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in self.pids():
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close(timeout=10)
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close(timeout=10)


def scheduler_address(option: str | None) -> str | None:
    return option or os.environ.get(SCHEDULER_ENV) or None


def autograde(cluster: Cluster, tasks: list[tuple[str, str]], *, submitted: str, db_url: str, kernel: str,
              feedback: bool, held: list[str], env_extra: dict | None, one_at_a_time: bool,
              on_result, on_submit=None, log=print) -> dict:
    """Grade ``tasks`` on the cluster; ``on_submit(assignment, student)`` is called as a task is sent,
    ``on_result(assignment, student, result)`` stores each result as it is recorded. Returns
    {(assignment, student): result}. One tqdm bar per assignment."""
    from distributed import as_completed
    from tqdm import tqdm

    from grading import worker

    client = cluster.client
    mine = fingerprint()
    check_workers(client, mine)
    api = worker.load_api()
    assignments = list(dict.fromkeys(a for a, _ in tasks))
    seeds = {a: client.scatter(assignment_gradebook(db_url, a), broadcast=True, hash=False) for a in assignments}
    bars = {a: tqdm(total=sum(1 for t in tasks if t[0] == a), desc=a, unit="sub", position=i, leave=True,
                    file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
            for i, a in enumerate(assignments)}
    failed = dict.fromkeys(assignments, 0)

    def submit(a, s):
        payload = {"assignment": a, "student": s, "files": read_submission(os.path.join(submitted, s, a), held),
                   "fingerprint": mine, "kernel": kernel, "env": dict(env_extra or {}), "assignments": assignments,
                   "local": cluster.local}
        if on_submit is not None:
            on_submit(a, s)
        return client.submit(_grade_with_seed, payload, seeds[a], key=f"grade-{a}-{s}-{time.time_ns()}",
                             pure=False, retries=TASK_RETRIES)

    results = {}
    try:
        pending = list(tasks)
        futures = {}
        # a window of tasks in flight (each carries its files): enough to keep every worker busy
        window = 1 if one_at_a_time else max(8, 3 * len(client.scheduler_info().get("workers", {})))
        first = pending[:window]
        for a, s in first:
            futures[submit(a, s)] = (a, s)
        pending = pending[len(first):]
        queue = as_completed(list(futures))
        for future in queue:
            a, s = futures.pop(future)
            try:
                returned = future.result()
            except Exception as err:  # noqa: BLE001 - the task failed on every try: the grader's, never a 0
                returned = {"result": {"assignment": a, "student": s, "autograde_ok": False,
                                       "grader_fault": f"the grading task failed on every try ({TASK_RETRIES + 1} "
                                                       f"tries or killed workers): {type(err).__name__}: {err}"}}
            if "refused" in returned:
                returned = {"result": {"assignment": a, "student": s, "autograde_ok": False,
                                       "grader_fault": returned["refused"]}}
            result = record(api, a, s, returned, feedback) if "autograded" in returned else returned["result"]
            on_result(a, s, result)
            results[(a, s)] = result
            if result.get("grader_fault") or not result.get("autograde_ok"):
                failed[a] += 1
                bars[a].set_postfix(failed=failed[a], refresh=False)
            bars[a].update(1)
            future.release()
            if pending:
                nxt = pending.pop(0)
                f = submit(*nxt)
                futures[f] = nxt
                queue.add(f)
    finally:
        for bar in bars.values():
            bar.close()
        for f in list(futures):
            f.cancel()
        shutil.rmtree(os.path.dirname(api.config.KernelManager.ip), ignore_errors=True)
    return results


def _grade_with_seed(payload: dict, gradebook: bytes) -> dict:
    return grade_submission({**payload, "gradebook": gradebook})
