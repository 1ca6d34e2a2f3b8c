"""Grading on Dask: one task per submission, on a local cluster or on a department's cluster.

The split (issue 36):

* the **client** (``python -m grading grade``, :func:`autograde`) reads each submission's files into
  bytes and sends them, with a copy of the assignment's part of the gradebook (cells, points, due date;
  no student's data), to a worker as one Dask task; when the task comes back it writes the autograded
  notebooks into the course, records the grades in the course's gradebook (nbgrader's own
  ``SaveAutoGrades`` and ``AssignLatePenalties``, run on the returned notebooks: the client is the
  gradebook's one writer, so PostgreSQL or SQLite see one process), writes the feedback page (the
  worker's, or, for a submission with a hand grade, its own from that gradebook, so hand grades already
  given show), and the result file ``--resume`` reads;
* a **worker** (:func:`grade_submission`) needs no shared file system: it writes the files into a course
  folder private to its process, runs nbgrader's autograde there exactly as a local worker does
  (``grading.worker.grade_one``: the sandboxed kernel, the verifier, the integrity scan, time limits,
  warm kernels) and returns the autograded notebooks as bytes, the log, the problems and the timings as
  plain data.

``--scheduler ADDRESS`` or ``COURSE_DASK_SCHEDULER`` connects to a running scheduler; without one (the
default) the command starts a ``LocalCluster`` of N single-threaded worker processes (``--workers N``),
forked from it after the imports they share, with one template of warm kernels for all of them (as the
forked workers of grading/worker.py, ``--engine processes``, share one) (grading/docs/scale.md, "Grading on several
machines"). A worker writes the feedback page too when the course's gradebook holds no hand grade for
the submission (its own gradebook then gives the same page); the client writes the others, and the
grades, as the one writer. Before anything is graded every worker's environment is compared with
the client's (:func:`fingerprint`: the course's files, Python, torch, nbgrader, the sandbox); a worker
that differs is refused by name. A worker killed in the middle of a submission: Dask gives the task to
another worker (up to ``distributed.scheduler.allowed-failures`` times); a task that fails on every try
comes back as the grader's fault, never as a 0.

Security (issue 61): an address off loopback is ``tls://`` with the course's certificates
(:func:`security`, made by ``python -m grading cluster-certs``: one CA, one certificate per machine, mutual
authentication), or refused unless the instructor says ``--insecure``; the scheduler's environment is
checked like the workers'. Faults: every worker the scheduler loses and every task it hands to another
worker is printed (:class:`FaultReporter`); a worker removes its own stale private folders (those of a
dead process of this user) when it starts, a nanny's restart included (:class:`CourseWorkerPlugin`), and
its kernels' output goes to a log in its private folder, not to the worker's log. What this module does
not do: start a scheduler or workers on other machines (grading/docs/scale-out.md gives the commands).
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
import warnings
import zlib

from grading import NOTEBOOKS_DIR, PACKAGE_DIR, REPO_DIR, failures
from grading.course import Course

SCHEDULER_ENV = "COURSE_DASK_SCHEDULER"
TASK_RETRIES = 2  # a task that raised (not a killed worker: Dask retries those itself) is tried again
# the environment a worker must share with the client (the rest, e.g. the machine's name, may differ)
FINGERPRINT_KEYS = ("course", "python", "torch", "nbgrader", "dask", "sandbox", "kernel")
# what the scheduler must share: it unpickles the tasks (grading's functions) and runs Dask's protocol
SCHEDULER_KEYS = ("course", "python", "dask", "cloudpickle")
# the course's certificates for tls:// (grading/docs/scale-out.md); the command's options set them
TLS_ENV = {"ca": "COURSE_DASK_TLS_CA_FILE", "cert": "COURSE_DASK_TLS_CERT", "key": "COURSE_DASK_TLS_KEY"}
INSECURE_ENV = "COURSE_DASK_INSECURE"  # "1": a tcp:// address off loopback is accepted (--insecure)
WORKER_PREFIX = "course-dask-worker-"  # a worker's private folder: WORKER_PREFIX<pid>-<random>


# the client's seconds by step in the last autograde() (start: the cluster's; check: the environments;
# seeds: the assignments' gradebooks; send: reading and submitting the files; wait: idle until a task came
# back; fetch: its data; grades and feedback: recording; store: the result file), for the benchmark
LAST_TIMES: dict = {}


class ClusterError(RuntimeError):
    """The cluster cannot grade (no scheduler, no worker, a worker whose environment differs)."""


# ------------------------------------------------------------------ the scheduler's address and the course's certificates
def _host_of(address: str) -> str:
    """``tls://lab01:8786`` -> ``lab01``; ``tcp://[::1]:8786`` -> ``::1``."""
    rest = address.split("://", 1)[1] if "://" in address else address
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


def is_loopback(host: str) -> bool:
    """``127.0.0.1``, ``::1``, ``localhost``: True; ``lab01``, ``10.0.0.5``, ``0.0.0.0``: False."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_files(environ=None) -> dict:
    """{ca, cert, key}: the paths the command's --tls-ca-file, --tls-cert, --tls-key set (empty if none)."""
    environ = os.environ if environ is None else environ
    return {k: environ[v] for k, v in TLS_ENV.items() if environ.get(v)}


def check_address(address: str, insecure: bool = False, files: dict | None = None) -> None:
    """Raise ClusterError unless the scheduler's address is safe to send student work and code to:
    ``tls://`` with the course's three files (CA, this machine's certificate and key), or ``tcp://`` on
    loopback, or ``tcp://`` anywhere when the instructor said ``--insecure``."""
    files = tls_files() if files is None else files
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    host = _host_of(address)
    if scheme == "tls":
        missing = [f"--{'tls-ca-file' if k == 'ca' else 'tls-' + k} (${TLS_ENV[k]})" for k in TLS_ENV if k not in files]
        if missing:
            raise ClusterError(f"{address} is a TLS address but no {', '.join(missing)} was given: the client "
                               "proves itself to the scheduler with a certificate signed by the course's CA "
                               "(`python -m grading cluster-certs`, grading/docs/scale-out.md)")
        for k, path in files.items():
            if not os.path.isfile(path):
                raise ClusterError(f"the TLS file {path!r} (${TLS_ENV[k]}) does not exist")
        return
    if scheme != "tcp":
        raise ClusterError(f"unsupported scheduler address {address!r}: expected tls://HOST:PORT (or tcp:// on "
                           "loopback)")
    if not is_loopback(host) and not insecure:
        raise ClusterError(
            f"refusing the unencrypted address {address}: {host} is not this machine (loopback), and over "
            "tcp:// anyone who reaches the port can send any Python to the workers, which run student code "
            "(as root with warm kernels), and every submission crosses the network in clear text. Use "
            "tls://HOST:PORT with the course's certificates (`python -m grading cluster-certs`, "
            "grading/docs/scale-out.md), or say --insecure on a network you trust")


def security(files: dict | None = None):
    """Dask's ``Security`` for the client, from the course's files (mutual TLS: the scheduler checks this
    certificate against the course's CA, this client checks the scheduler's); None without files."""
    files = tls_files() if files is None else files
    if not files:
        return None
    from distributed.security import Security

    return Security(tls_ca_file=files["ca"], tls_client_cert=files["cert"], tls_client_key=files["key"],
                    require_encryption=True)


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

    from grading.kernel import launcher

    kernel = os.environ.get("COURSE_KERNEL", launcher.KERNEL_NAME)
    if kernel == launcher.KERNEL_NAME:
        ok, why = launcher.bwrap_works()
        box = "bubblewrap" if ok else f"no isolation ({why})"
    else:
        box = f"none (kernel {kernel})"
    _FINGERPRINT.update(course=digest.hexdigest()[:16], python=".".join(map(str, sys.version_info[:2])),
                        torch=version("torch"), nbgrader=version("nbgrader"), dask=version("distributed"),
                        cloudpickle=version("cloudpickle"), sandbox=box, kernel=kernel, host=os.uname().nodename, pid=str(os.getpid()),
                        user="root" if os.geteuid() == 0 else f"uid {os.geteuid()}")
    return dict(_FINGERPRINT)


def differences(mine: dict, theirs: dict) -> list[str]:
    """The fields of FINGERPRINT_KEYS where a worker (``theirs``) differs from the client (``mine``)."""
    return [f"{k}: worker has {theirs.get(k)!r}, the client {mine.get(k)!r}"
            for k in FINGERPRINT_KEYS if theirs.get(k) != mine.get(k)]


def check_scheduler(client, mine: dict) -> dict:
    """The scheduler's fingerprint against the client's (:data:`SCHEDULER_KEYS`: it unpickles every task, so
    it must import the same ``grading``); raise ClusterError naming what differs, or why it could not
    answer (``grading`` not installed there)."""
    try:
        theirs = client.run_on_scheduler(fingerprint)
    except Exception as err:  # noqa: BLE001 - e.g. ModuleNotFoundError on the scheduler: named
        raise ClusterError(
            f"the Dask scheduler could not run the course's environment check ({type(err).__name__}: {err}); "
            "it unpickles every task, so it needs this course installed in its Python (`pip install -e .` in "
            "the course's checkout, grading/docs/scale-out.md); nothing was graded") from err
    bad = [f"{k}: scheduler has {theirs.get(k)!r}, the client {mine.get(k)!r}"
           for k in SCHEDULER_KEYS if theirs.get(k) != mine.get(k)]
    if bad:
        raise ClusterError(
            f"the Dask scheduler ({theirs.get('host')}) has an environment that differs from this one; nothing "
            "was graded. Start it from the same course version and environment (grading/docs/scale-out.md):\n  "
            + "; ".join(bad))
    return theirs


def privilege_line(theirs: dict) -> str:
    """Which user the workers run as, and what root exposes (grading/docs/scale-out.md, 'Least privilege')."""
    users = sorted({fp.get("user", "?") for fp in theirs.values()})
    roots = sum(1 for fp in theirs.values() if fp.get("user") == "root")
    line = f"[cluster] the workers run as: {', '.join(users)}"
    if roots:
        line += (f"; {roots} of {len(theirs)} as root, needed only for warm kernels (setns into the sandbox's "
                 "namespaces): any task their scheduler accepts runs as root there, so only TLS keeps others out; "
                 "run them as an unprivileged user (cold kernels, the same sandbox) where that matters")
    return line


def check_workers(client, mine: dict) -> dict:
    """Every worker's fingerprint against the client's; raise ClusterError naming each worker that differs.
    Returns {address: fingerprint}."""
    try:
        theirs = client.run(fingerprint)
    except Exception as err:  # noqa: BLE001 - e.g. ModuleNotFoundError on a worker: named
        raise ClusterError(
            f"a Dask worker could not run the course's environment check ({type(err).__name__}: {err}); every "
            "worker needs this course installed in its Python (`pip install -e .` in the course's checkout, "
            "grading/docs/scale-out.md); nothing was graded") from err
    if not theirs:
        raise ClusterError("the scheduler has no worker: start `dask worker ADDRESS` on the grading machines")
    bad = {addr: differences(mine, fp) for addr, fp in theirs.items() if differences(mine, fp)}
    if bad:
        lines = [f"  {addr} ({theirs[addr].get('host')}): " + "; ".join(d) for addr, d in sorted(bad.items())]
        raise ClusterError(
            f"{len(bad)} of {len(theirs)} Dask worker(s) have an environment that differs from this one and would "
            "not grade the same way; nothing was graded. Install the same course version and environment on them "
            "(grading/docs/scale-out.md), or stop them:\n" + "\n".join(lines))
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


def assignment_gradebook(db_url: str, assignment: str, empty: bytes | None = None) -> bytes:
    """A SQLite gradebook holding only ``assignment`` as the course's gradebook stores it (its notebooks,
    cells, points, sources, due date), no student: what a worker's nbgrader needs to grade it. ``empty``:
    an empty gradebook's bytes (:func:`empty_gradebook`) to fill, instead of creating one (nbgrader runs
    the ``alembic`` command to create one: seconds, once per run is enough)."""
    from nbgrader.api import Gradebook

    bin_path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="course-seed-") as tmp, _environment({"PATH": bin_path}):
        path = os.path.join(tmp, "gradebook.db")  # a new gradebook runs `alembic` (this environment's)
        if empty is not None:
            with open(path, "wb") as fh:
                fh.write(empty)
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


def empty_gradebook(db_url: str) -> bytes:
    """An empty SQLite gradebook (nbgrader's tables, no course, no student) at the course gradebook's
    schema version, copied from it: nbgrader would run the ``alembic`` command to find the version
    (seconds)."""
    import sqlite3

    from nbgrader.api import Gradebook
    from sqlalchemy import inspect, text

    with Gradebook(db_url) as src:
        has_table = "alembic_version" in inspect(src.engine).get_table_names()
        version = src.db.execute(text("SELECT version_num FROM alembic_version")).scalar() if has_table else None
        if version is None:
            # nbgrader makes a new gradebook's tables, then asks `alembic` for the version and writes it: a run
            # interrupted in between leaves the tables without it, and nbgrader never adds it later. Written
            # now as nbgrader would have (its answer, asked once per process: worker.import_nbgrader)
            from nbgrader import api as nbapi

            bin_path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
            with _environment({"PATH": bin_path}):  # this environment's `alembic`
                version = nbapi.get_alembic_version()
            if not has_table:
                src.db.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            src.db.execute(text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": version})
            src.db.commit()
    with tempfile.TemporaryDirectory(prefix="course-seed-") as tmp:
        path = os.path.join(tmp, "gradebook.db")
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
            db.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (version,))
            db.commit()
        with Gradebook(f"sqlite:///{path}"):  # nbgrader's tables (the version is there: no alembic call)
            pass
        with open(path, "rb") as fh:
            return fh.read()


@contextlib.contextmanager
def one_engine_per_database():
    """While the client records: one SQLAlchemy engine per gradebook URL for every nbgrader ``Gradebook``
    this process opens (nbgrader opens one per step, ``SaveAutoGrades``, ``AssignLatePenalties``, the
    feedback's reads, each with an engine of its own, so SQLAlchemy compiled the same queries again for
    every submission: most of the client's recording time). Same database, same queries, same commits;
    a closed Gradebook still closes its connections (``dispose``)."""
    from nbgrader import api as nbapi

    original = nbapi.create_engine
    engines: dict = {}

    def create_engine(url, *args, **kwargs):
        key = (str(url), repr(sorted(kwargs.items())))
        if key not in engines:
            engines[key] = original(url, *args, **kwargs)
        return engines[key]

    nbapi.create_engine = create_engine
    try:
        yield
    finally:
        nbapi.create_engine = original
        for engine in engines.values():
            with contextlib.suppress(Exception):
                engine.dispose()


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


def _kernels_out_of_the_log() -> None:
    """A worker started by ``dask worker``: what its kernels write (ipykernel's connection banner, about 10
    lines per submission) goes to ``kernels.log`` in its private folder (removed with it), while the worker's
    own messages (Dask's log, Python's warnings) still go where its stderr went. The kernels inherit file
    descriptors 1 and 2; the worker's log handlers and ``sys.stderr`` get a copy of the original stderr."""
    if _WORKER.get("quiet"):
        return
    import logging

    keep = os.fdopen(os.dup(2), "w", buffering=1)
    loggers = [logging.getLogger()] + [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            with contextlib.suppress(AttributeError, ValueError, OSError):
                if isinstance(handler, logging.StreamHandler) and handler.stream.fileno() in (1, 2):
                    handler.setStream(keep)
    sys.stdout.flush()
    sys.stderr.flush()
    log = os.open(os.path.join(_worker_folder(), "kernels.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stderr = keep
    _WORKER["quiet"] = True


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, /proc/PID/stat's 22nd field), None when no
    such process: with the pid, it names one process (a pid is reused, a start time with it is not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def remove_stale_folders(tmp: str | None = None) -> list[str]:
    """Remove the private folders (:data:`WORKER_PREFIX`) that a worker process of this user left in
    ``tmp`` (default: this process's temporary folder) when it was killed: a student's submission may be in
    one. A folder is stale when the process that made it (pid and start time, in its ``owner`` file) is
    gone; another user's folder, a link, or a live worker's folder is left alone. Returns the removed paths.
    e.g. ``course-dask-worker-4242-k3j1/owner`` holds ``4242 98765``; no process 4242 started at 98765 ->
    removed."""
    import stat

    tmp = tmp or tempfile.gettempdir()
    removed = []
    if _process_start(os.getpid()) is None:  # no /proc (not Linux): no way to tell a live worker; remove nothing
        return removed
    try:
        names = os.listdir(tmp)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(WORKER_PREFIX):
            continue
        path = os.path.join(tmp, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            with open(os.path.join(path, "owner")) as fh:
                pid, started = fh.read().split()
        except (OSError, ValueError):
            # no owner file: made before it was written, or half made; stale only when its pid is gone
            pid, started = name[len(WORKER_PREFIX):].split("-", 1)[0], None
            if not pid.isdigit() or _process_start(int(pid)) is not None:
                continue
        if int(pid) == os.getpid() or (started is not None and _process_start(int(pid)) == started):
            continue
        unmount_below(path)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def mounts_below(path: str) -> list[str]:
    """The mount points strictly below ``path`` (/proc/self/mounts), deepest first: e.g. a kernel's IPC
    tmpfs (grading/kernel/launcher.py ``bound_ipc_folder``) that a killed worker could not unmount."""
    prefix = os.path.realpath(path).rstrip("/") + "/"
    try:
        with open("/proc/self/mounts") as fh:
            points = [line.split()[1].encode().decode("unicode_escape") for line in fh if len(line.split()) > 1]
    except OSError:
        return []
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def unmount_below(path: str) -> None:
    """As root: detach the mounts below ``path`` (a dead worker's kernels' IPC tmpfs), so it can be removed."""
    if os.geteuid() != 0:
        return
    from grading.kernel import launcher

    for point in mounts_below(path):
        with contextlib.suppress(OSError):
            launcher.release_ipc_folder(point)


def _worker_folder() -> str:
    if "folder" not in _WORKER:
        from grading.kernel import protocol

        # this worker dies with the process that started it (a LocalCluster's client, `dask worker`'s nanny),
        # and its kernels and template with it (their own PR_SET_PDEATHSIG, bwrap --die-with-parent)
        with contextlib.suppress(OSError):
            protocol.prctl(protocol.PR_SET_PDEATHSIG, signal.SIGKILL)
        remove_stale_folders()  # a killed predecessor's (a worker started without the plugin cleans here)
        folder = tempfile.mkdtemp(prefix=f"{WORKER_PREFIX}{os.getpid()}-")
        with open(os.path.join(folder, "owner"), "w") as fh:
            fh.write(f"{os.getpid()} {_process_start(os.getpid())}\n")
        _WORKER["folder"] = folder
        import atexit

        atexit.register(_worker_cleanup)
    return _WORKER["folder"]


try:  # the plugin's base; an install without Dask grades with the forked workers and never uses it
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:  # pragma: no cover - Dask is in the grade extra
    _WorkerPlugin = object


class CourseWorkerPlugin(_WorkerPlugin):
    """Registered by the grading command on every worker of the scheduler, and by the scheduler on every worker
    that joins later (a nanny's restart of a killed worker included): at the worker's start it removes the
    stale private folders a killed worker of this user left (:func:`remove_stale_folders`) and, on a worker
    of ``dask worker``, sends its kernels' output to a log in its private folder
    (:func:`_kernels_out_of_the_log`). Names what it removed in the worker's log."""

    name = "course-grading"
    idempotent = True

    def setup(self, worker=None):
        import logging

        removed = remove_stale_folders()
        if removed:
            logging.getLogger("distributed.worker").warning(
                "course grading: removed %d stale private folder(s) of killed workers: %s",
                len(removed), ", ".join(removed))
        if not _WORKER.get("local"):
            _worker_folder()
            _kernels_out_of_the_log()
            if os.geteuid() == 0:
                logging.getLogger("distributed.worker").warning(
                    "course grading: this worker runs as root, which only warm kernels need (setns into the "
                    "sandbox's namespaces); any task its scheduler accepts runs as root here. Run it as an "
                    "unprivileged user (cold kernels, the same sandbox) unless its scheduler is reached over "
                    "tls:// only (grading/docs/scale-out.md, 'Least privilege')")

    def teardown(self, worker=None):
        pass


def _worker_cleanup() -> None:
    template = _WORKER.pop("template", None)
    if template is not None:
        template.stop()  # its folder is inside the worker's, removed below anyway
    folder = _WORKER.pop("folder", "")
    if folder:
        unmount_below(folder)
        shutil.rmtree(folder, ignore_errors=True)


def _warm_template(assignments: list[str], kernel: str) -> dict:
    """One template of warm kernels per worker process (grading/kernel/warm.py), started at its first task."""
    from grading.kernel import warm

    if kernel != "course-sandbox" or not warm.enabled():
        return {}
    if "template" not in _WORKER or not _WORKER["template"].alive():
        _WORKER["template"] = warm.start_template(assignments, os.path.join(_worker_folder(), "warm"))
    return _WORKER["template"].env


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


START_TOPIC = "course-grading-start"  # a grading task's every try, as the client hears it (FaultReporter)


def _announce_start() -> None:
    """Tell the client (through the scheduler's events) that this try of the running task has started here:
    a second start of the same task is a retry, which the command prints, whatever caused it."""
    with contextlib.suppress(Exception):  # not on a Dask worker (a direct call): nothing to tell
        from distributed import get_worker

        w = get_worker()
        w.log_event(START_TOPIC, {"key": str(w.get_current_task()), "worker": w.address})


def grade_submission(task: dict) -> dict:
    """A Dask task: grade one submission in a course folder private to this worker process; return plain
    data (``result``: as ``grading.worker.grade_one`` records it; ``autograded``: {path: bytes}).

    ``task``: assignment, student, files {path: bytes}, gradebook (bytes, :func:`assignment_gradebook`),
    fingerprint (the client's), kernel, env (e.g. the second pass's time limits), assignments (what
    the run grades: the warm kernels' warm-ups)."""
    from grading import worker
    from grading.kernel import launcher

    _announce_start()
    a, s = task["assignment"], task["student"]
    started_at = time.time()
    gradebook = task["gradebook"] if "gradebook" in task else zlib.decompress(task["gradebook_z"])
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
        fh.write(gradebook)
    write_files(os.path.join(root, "submitted", s, a), task["files"])
    if task["kernel"] == launcher.KERNEL_NAME:
        from grading import edition

        edition.ensure()  # the kernels' course_lib on this worker: the students' edition, built once per process
    # a local cluster's workers share the client's template (``task["warm"]``, as the forked workers share
    # the pipeline's); a worker on another machine starts its own
    warm_env = task.get("warm") or _warm_template(task.get("assignments") or [a], task["kernel"])
    env = {"COURSE_ROOT": root, "COURSE_DB_URL": f"sqlite:///{os.path.join(root, 'gradebook.db')}?timeout=60",
           "COURSE_KERNEL": task["kernel"], **task.get("env", {}), **warm_env}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    start = time.perf_counter()
    # this task's course (``root``) is passed to grade_one; nbgrader's config and the feedback steps it runs
    # read it from COURSE_ROOT, set here for the task's duration
    with _environment(env):
        # a worker of `dask worker`: its kernels' IPC folder inside its private folder, so that a successor
        # removes (and unmounts) it if this worker is killed (a local cluster's run folder is short-lived)
        saved_tmp = tempfile.tempdir
        if not task.get("local"):
            tempfile.tempdir = _worker_folder()
        try:
            api = worker.load_api()
        finally:
            tempfile.tempdir = saved_tmp
        # the feedback page too when the client asks (``task["feedback"]``: the course's gradebook holds no
        # hand grade for this submission, so this worker's gradebook, with the same automatic grades, gives
        # the same page)
        with warnings.catch_warnings():  # SQLAlchemy's note on nbgrader's new submission, 6 lines each
            warnings.filterwarnings("ignore", message=r".*not in session, add operation along")
            result = worker.grade_one(Course(root), api, a, s, feedback=bool(task.get("feedback")))
        shutil.rmtree(os.path.dirname(api.config.KernelManager.ip), ignore_errors=True)
    folder = os.path.join(root, "autograded", s, a)
    autograded = read_submission(folder) if os.path.isdir(folder) else {}
    pages = os.path.join(root, "feedback", s, a)
    feedback = read_submission(pages) if result.get("feedback_ok") and os.path.isdir(pages) else None
    result["worker"] = f"{mine['host']}:{mine['pid']}"
    result["worker_pid"] = os.getpid()
    result["warm_template_pid"] = warm_env.get("COURSE_WARM_PID")  # the template its kernel was forked from
    result["task_seconds"] = round(time.perf_counter() - start, 2)
    result["started_at"], result["finished_at"] = started_at, time.time()  # the worker's timeline (bench_grading.py)
    shutil.rmtree(root, ignore_errors=True)
    return {"result": result, "autograded": autograded, "feedback": feedback}


# ------------------------------------------------------------------ the client's side: the one writer
def hand_graded(gb, assignment: str, student: str) -> bool:
    """Does the gradebook hold anything a person gave this submission, which its feedback page shows: a
    manual score, extra credit, a comment, an extension (its late penalty)? A worker's gradebook holds
    none of it, so only the client can write such a submission's page."""
    from nbgrader.api import MissingEntry

    try:
        sub = gb.find_submission(assignment, student)
    except MissingEntry:
        return False
    if sub.extension is not None:
        return True
    for nb in sub.notebooks:
        if any(g.manual_score is not None or g.extra_credit for g in nb.grades):
            return True
        if any(c.manual_comment for c in nb.comments):
            return True
    return False


def hand_graded_tasks(db_url: str, tasks) -> set:
    """The (assignment, student) of ``tasks`` the gradebook holds a hand grade for (:func:`hand_graded`)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return {(a, s) for a, s in tasks if hand_graded(gb, a, s)}


def save_grades(api, assignment: str, student: str, folder: str) -> bool:
    """Record the grades of the autograded notebooks in ``folder`` in the course's gradebook, as nbgrader's
    autograde does after its kernel: the submission (with its timestamp), ``SaveAutoGrades`` (in its one-commit
    form, ``grading.gradebook``) on each notebook, ``AssignLatePenalties``, and 0 for a notebook of the
    assignment that was not submitted.
    Returns whether the gradebook holds a hand grade for the submission (:func:`hand_graded`)."""
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import AssignLatePenalties

    from grading.gradebook import SaveAutoGradesOnce

    import warnings

    coursedir = api.coursedir
    db_url = coursedir.db_url
    src = coursedir.format_path(coursedir.submitted_directory, student, assignment)
    timestamp = coursedir.get_existing_timestamp(src)
    with Gradebook(db_url, coursedir.course_id) as gb, warnings.catch_warnings():
        # SQLAlchemy's note on nbgrader's new submission (its autograde meets it too, on a worker's stderr)
        warnings.filterwarnings("ignore", message=r".*not in session, add operation along")
        gb.update_or_create_student(student)
        hand = hand_graded(gb, assignment, student)
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
        nb, resources = SaveAutoGradesOnce(parent=api).preprocess(nb, resources)
        AssignLatePenalties(parent=api).preprocess(nb, resources)
    return hand


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
            fault = failures.probe_machine(api.coursedir.root)  # measured: the log may hold student text
            if fault:
                result["feedback_fault"] = fault
    except Exception as err:  # noqa: BLE001 - recorded: the grade stands, the page is the grader's failure
        result["feedback_ok"] = False
        result["feedback_error"] = f"{type(err).__name__}: {err}"
        result["feedback_fault"] = failures.fault_of(err) or result["feedback_error"]
    finally:
        try:
            worker.put_back(fb_dir, fb_backup, failed=fb_failed)
        except OSError as err:
            result["feedback_fault"] = f"could not restore the earlier feedback page: {err}"


def write_pages(api, assignment: str, student: str, pages: dict, result: dict) -> None:
    """The feedback page a worker wrote (``pages``: {name: bytes}) into the course, the earlier page set
    aside while it is written, as :func:`write_feedback` does."""
    from grading import worker

    fb_dir = os.path.join(api.coursedir.root, "feedback", student, assignment)
    fb_backup = worker.set_aside(fb_dir)
    fb_failed = True
    try:
        os.makedirs(fb_dir)
        write_files(fb_dir, pages)
        fb_failed = False
        result["feedback_ok"] = True
        result["feedback_by"] = "worker"
    except OSError as err:
        text = f"{type(err).__name__}: {err}"
        result["feedback_ok"] = False
        result["feedback_error"] = text
        result["feedback_fault"] = failures.fault_of(err) or text
    finally:
        try:
            worker.put_back(fb_dir, fb_backup, failed=fb_failed)
        except OSError as err:
            result["feedback_fault"] = f"could not restore the earlier feedback page: {err}"


def record(api, assignment: str, student: str, returned: dict, feedback: bool, times: dict | None = None) -> dict:
    """Write what a task returned into the course: autograded notebooks, grades, feedback. Returns the
    result to store. A failure of this machine (disk, gradebook) is the grader's, and the earlier
    autograded folder is put back. The feedback page: the worker's (``returned["feedback"]``) when the
    gradebook holds no hand grade for the submission, else written here from the course's gradebook.
    ``times``: seconds spent here, added up by step (grades, feedback)."""
    from grading import worker

    start = time.perf_counter()
    hand = True
    root = api.coursedir.root
    result = dict(returned["result"])
    # this machine's files are what --resume compares
    result.update(worker.content_hashes(Course(root), assignment, student))
    folder = os.path.join(root, "autograded", student, assignment)
    backup = None
    try:
        if result.get("grader_fault"):
            return result  # the worker's machine failed: this course keeps what it had
        backup = worker.set_aside(folder)
        if result.get("autograded"):
            write_files(folder, returned["autograded"])
            hand = save_grades(api, assignment, student, folder)
        else:  # nbgrader keeps an earlier run's grades when this one fails: drop them (the export says 0)
            result["stale_grades_removed"] = worker.remove_submission(api, assignment, student)
    except Exception as err:  # noqa: BLE001 - this machine's failure, named; never a student's 0
        text = f"{type(err).__name__}: {err}"
        result["autograde_ok"] = False
        result["grader_fault"] = failures.fault_of(err) or f"could not record the grades: {text}"
    try:
        worker.put_back(folder, backup, failed=bool(result.get("grader_fault")))
    except OSError as err:
        result.setdefault("grader_fault", f"could not restore the earlier autograded folder: {err}")
    for key in ("feedback_ok", "feedback_error", "feedback_fault"):  # the worker's: decided here
        result.pop(key, None)
    graded = time.perf_counter()
    if feedback and result.get("autograded") and not result.get("grader_fault"):
        if returned.get("feedback") and not hand:
            write_pages(api, assignment, student, returned["feedback"], result)
        else:  # a hand grade the page must show, or the worker wrote none: from the course's gradebook
            write_feedback(api, assignment, student, result)
            result["feedback_by"] = "client"
    end = time.perf_counter()
    result["record_seconds"] = round(end - start, 3)  # this process's share (the one writer)
    if times is not None:
        times["grades"] = times.get("grades", 0.0) + graded - start
        times["feedback"] = times.get("feedback", 0.0) + end - graded
    return result


# ------------------------------------------------------------------ the cluster
def _has_dashboard() -> bool:
    import importlib.util

    return importlib.util.find_spec("bokeh") is not None  # Dask's dashboard needs it; the course does not install it


class Cluster:
    """A Dask client for one grading run: a LocalCluster of ``workers`` single-threaded worker processes
    in this machine's run folder, or a running scheduler's address. ``kill()`` ends a local cluster's
    processes at once (an interrupt); ``close()`` ends it in order."""

    def __init__(self, workers: int, scheduler: str | None = None, log=print, assignments=None,
                 kernel: str | None = None):
        import logging

        import dask
        from distributed import Client, LocalCluster

        start = time.perf_counter()
        self.local = not scheduler
        self.cluster = None
        self.warm_env: dict = {}  # a local cluster's template of warm kernels, shared by its workers
        self._template = None
        if self.local:
            _WORKER["local"] = True  # inherited by the forked workers: they quiet their kernels per task
            self._start_template(assignments or [], kernel)
            _preload()  # before the fork: the workers start with it imported
            # fork: the workers start from this process, which has imported what they import (nbgrader,
            # torch, the checks) once; spawn would import all of it again in each
            dask.config.set({"distributed.worker.multiprocessing-method": "fork",
                             "distributed.worker.daemon": False,  # a worker starts kernels (processes)
                             "distributed.scheduler.work-stealing": False,
                             # the workers' statistical profiler samples the running task's stack every 10 ms,
                             # taking the GIL from the submission's verification each time
                             "distributed.worker.profile.enabled": False,
                             "distributed.admin.tick.interval": "1s",
                             "distributed.admin.system-monitor.interval": "2s",
                             "distributed.worker.memory.monitor-interval": "1s"})
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        local_directory=tempfile.gettempdir(), host="127.0.0.1",
                                        dashboard_address=":0" if _has_dashboard() else None,
                                        silence_logs=logging.ERROR)
            self.client = Client(self.cluster)
            where = f"a local Dask cluster of {workers} worker process(es)"
        else:
            check_address(scheduler, insecure=os.environ.get(INSECURE_ENV) == "1")
            sec = security() if scheduler.startswith("tls://") else None
            try:
                self.client = Client(scheduler, timeout="30s", **({"security": sec} if sec else {}))
            except OSError as err:
                raise ClusterError(f"cannot reach the Dask scheduler at {scheduler}: {err} (start it with "
                                   "`dask scheduler`, grading/docs/scale-out.md; over tls:// the scheduler and "
                                   "this client need certificates of the same course CA)") from err
            n = len(self.client.scheduler_info().get("workers", {}))
            where = f"the Dask scheduler at {scheduler} ({n} worker(s))"
        # every worker, and each that joins later (a nanny's restart): stale folders removed, kernels' output
        # out of the worker's log
        self.client.register_plugin(CourseWorkerPlugin(), name=CourseWorkerPlugin.name)
        link = self.client.dashboard_link if _has_dashboard() else None
        log(f"[cluster] grading on {where}" + (f"; dashboard {link}" if link else
                                                "; dashboard: install bokeh to see it")
            + ("; one template of warm kernels for its workers" if self.warm_env else ""))
        self.start_seconds = time.perf_counter() - start

    def _start_template(self, assignments: list[str], kernel: str | None) -> None:
        """One template of warm kernels (grading/kernel/warm.py) for all the local workers, started before them so
        that it imports while they start, as the pipeline does for its forked workers: the workers are
        this machine's processes of this user, and their launchers reach its socket (a folder only this
        user opens). A worker on another machine starts its own (``_warm_template``)."""
        from grading.kernel import launcher, warm

        if (kernel or os.environ.get("COURSE_KERNEL", launcher.KERNEL_NAME)) != launcher.KERNEL_NAME or not warm.enabled():
            return
        self._template = warm.start_template(assignments)
        self.warm_env = self._template.env

    def _stop_template(self, kill: bool = False) -> None:
        if self._template is None:
            return
        template, self._template = self._template, None
        template.stop(kill=kill)

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
        self._stop_template(kill=True)
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close(timeout=10)
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close(timeout=10)
        self._stop_template()


def _preload() -> None:
    """What every grading worker imports (nbgrader, the course's preprocessors, the checks, torch), imported
    in the client before a LocalCluster forks its workers, as grading.worker does before it forks: once,
    not once per worker."""
    from grading import worker

    with contextlib.suppress(Exception):  # then each worker imports it, or its submission reports why
        import course_lib.checks  # noqa: F401
        import torch  # noqa: F401
    worker.import_nbgrader()
    from grading import feedback, integrity, verify  # noqa: F401 - nbgrader_config's
    from grading.kernel import client  # noqa: F401 - nbgrader_config's ResilientExecute


def scheduler_address(option: str | None) -> str | None:
    return option or os.environ.get(SCHEDULER_ENV) or None


def task_failure(future, err: BaseException) -> str:
    """Why a grading task came back without a result, as the run reports it (never a student's 0):
    workers died while running it (KilledWorker), it raised in the worker on every try, or it never ran
    (the scheduler or a worker could not even load it: e.g. ``grading`` not installed there)."""
    from distributed import KilledWorker

    what = f"{type(err).__name__}: {err}"
    if isinstance(err, KilledWorker):
        return ("the workers grading it died more times than the scheduler allows (killed or out of memory; "
                f"distributed.scheduler.allowed-failures, 3 by default): {what}")
    tb = None
    with contextlib.suppress(Exception):
        tb = future.traceback()
    import traceback as tbmod

    frames = [f.name for f in tbmod.extract_tb(tb)] if tb is not None else []
    if "grade_submission" in frames:
        return f"the grading task raised on every try ({TASK_RETRIES + 1} tries): {what}"
    return (f"the grading task never ran (the scheduler or a worker could not load it; is the course "
            f"installed there, grading/docs/scale-out.md?): {what}")


class FaultReporter:
    """Prints, as the scheduler reports it, each worker it lost and the submissions that worker was grading
    (the scheduler gives them to another worker), e.g.
    ``[cluster] lost worker tls://10.0.0.7:40123 (lab07, pid 811): retrying 01_attention/s02_blank on
    another worker (its try 2)``, and each try after the first of a task, whatever caused it (a lost worker, the
    task raised), where it started: ``[cluster] retried 01_attention/s02_blank: try 2 started on worker
    tls://10.0.0.8:40511 (lab08, pid 902)``. ``tasks``: {task key: (assignment, student)}, filled as they are
    sent."""

    def __init__(self, client, workers: dict, write=print):
        self.client, self.write = client, write
        self.names = {addr: f"{fp.get('host')}, pid {fp.get('pid')}" for addr, fp in (workers or {}).items()}
        self.tasks: dict = {}
        self.tries: dict = {}
        self.lost: list[str] = []
        self.starts: dict = {}
        client.subscribe_topic("all", self._event)
        client.subscribe_topic(START_TOPIC, self._started)

    def _started(self, event) -> None:
        _, msg = event
        key = msg.get("key") if isinstance(msg, dict) else None
        if key not in self.tasks:
            return
        self.starts[key] = self.starts.get(key, 0) + 1
        if self.starts[key] > 1:
            a, s = self.tasks[key]
            addr = msg.get("worker", "?")
            who = f"{addr} ({self.names[addr]})" if addr in self.names else str(addr)
            self.write(f"[cluster] retried {a}/{s}: try {self.starts[key]} started on worker {who}")

    def _event(self, event) -> None:
        _, msg = event
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        addr = msg.get("worker", "?")
        ours = [k for k in (*msg.get("processing-tasks", ()), *msg.get("lost-computed-tasks", ()))
                if k in self.tasks]
        who = f"{addr} ({self.names[addr]})" if addr in self.names else str(addr)
        self.lost.append(addr)
        if not ours:
            self.write(f"[cluster] lost worker {who}" + (" (it closed)" if msg.get("expected") else "")
                       + ": it was grading nothing of this run")
            return
        parts = []
        for k in sorted(ours):
            self.tries[k] = self.tries.get(k, 1) + 1
            a, s = self.tasks[k]
            parts.append(f"{a}/{s} (its try {self.tries[k]})")
        self.write(f"[cluster] lost worker {who}" + (" (it closed)" if msg.get("expected") else "")
                   + f": retrying on another worker {', '.join(parts)}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic("all")
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(START_TOPIC)


def autograde(cluster: Cluster, tasks: list[tuple[str, str]], *, submitted: str, db_url: str, kernel: str,
              feedback: bool, held: list[str], env_extra: dict | None, one_at_a_time: bool,
              on_result, on_submit=None, log=print) -> dict:
    """Grade ``tasks`` on the cluster; ``on_submit(assignment, student)`` is called as a task is sent,
    ``on_result(assignment, student, result)`` stores each result as it is recorded. Returns
    {(assignment, student): result}. Progress: grading/progress.py (one bar for the run, or plain lines
    in a log); each worker the scheduler loses and each task it retries elsewhere: printed (FaultReporter)."""
    from distributed import as_completed

    from grading import worker
    from grading.progress import Progress

    client = cluster.client
    times = {"start": cluster.start_seconds}
    t = time.perf_counter()
    mine = fingerprint()
    check_scheduler(client, mine)
    theirs = check_workers(client, mine)
    if not cluster.local:
        log(privilege_line(theirs))
    times["check"] = time.perf_counter() - t
    t = time.perf_counter()
    api = worker.load_api()
    assignments = list(dict.fromkeys(a for a, _ in tasks))
    empty = empty_gradebook(db_url)
    seeds: dict = {}

    def seed(a):
        """The assignment's gradebook, compressed (a 168 KB SQLite file is 9 KB), made once and sent inside
        each of its tasks. Not scattered to the workers beforehand: a broadcast waits for every worker's
        answer, and a worker busy in a submission's verification answered in up to 3 s while the worker
        just freed stood idle (measured on the demo class)."""
        if a not in seeds:
            seeds[a] = zlib.compress(assignment_gradebook(db_url, a, empty), 6)
        return seeds[a]
    # the workers write the feedback pages of the submissions that no person has graded yet (record())
    by_hand = hand_graded_tasks(db_url, tasks) if feedback else set()
    times["seeds"] = time.perf_counter() - t
    progress = Progress({a: sum(1 for t in tasks if t[0] == a) for a in assignments})
    faults = FaultReporter(client, theirs, progress.write)

    def submit(a, s):
        t = time.perf_counter()
        payload = {"assignment": a, "student": s, "files": read_submission(os.path.join(submitted, s, a), held),
                   "fingerprint": mine, "kernel": kernel, "env": dict(env_extra or {}), "assignments": assignments,
                   "local": cluster.local, "feedback": feedback and (a, s) not in by_hand,
                   "warm": cluster.warm_env if kernel == "course-sandbox" else {}}
        if on_submit is not None:
            on_submit(a, s)
        progress.started(a)
        payload["gradebook_z"] = seed(a)
        key = f"grade-{a}-{s}-{time.time_ns()}"
        faults.tasks[key] = (a, s)
        future = client.submit(grade_submission, payload, key=key, pure=False, retries=TASK_RETRIES)
        times["send"] = times.get("send", 0.0) + time.perf_counter() - t
        return future

    results = {}
    engines = contextlib.ExitStack()
    engines.enter_context(one_engine_per_database())
    try:
        pending = list(tasks)
        futures = {}

        def window() -> int:
            """Tasks in flight: one per worker thread, as the forked workers each claim one task at a
            time. The scheduler places a task when it is sent, on what it guesses of the tasks' lengths
            (unknown here: every submission is a task of its own), so more in flight queued several
            behind one worker while another had none (measured: workers idle a quarter of the run)."""
            return 1 if one_at_a_time else max(1, sum(client.nthreads().values()))

        def top_up(queue=None) -> None:
            n = window()
            while pending and len(futures) < n:
                nxt = pending.pop(0)
                f = submit(*nxt)
                futures[f] = nxt
                if queue is not None:
                    queue.add(f)

        top_up()
        queue = as_completed(list(futures))
        waited = time.perf_counter()
        for future in queue:
            times["wait"] = times.get("wait", 0.0) + time.perf_counter() - waited
            a, s = futures.pop(future)
            top_up(queue)  # the next submission goes to the worker just freed, before this one is recorded
            try:
                t = time.perf_counter()
                returned = future.result()
                times["fetch"] = times.get("fetch", 0.0) + time.perf_counter() - t
            except Exception as err:  # noqa: BLE001 - the task failed on every try: the grader's, never a 0
                returned = {"result": {"assignment": a, "student": s, "autograde_ok": False,
                                       "grader_fault": task_failure(future, err)}}
            if "refused" in returned:
                returned = {"result": {"assignment": a, "student": s, "autograde_ok": False,
                                       "grader_fault": returned["refused"]}}
            result = record(api, a, s, returned, feedback, times) if "autograded" in returned else returned["result"]
            t = time.perf_counter()
            on_result(a, s, result)
            times["store"] = times.get("store", 0.0) + time.perf_counter() - t
            results[(a, s)] = result
            progress.finished(a, failed=bool(result.get("grader_fault") or not result.get("autograde_ok")))
            future.release()
            waited = time.perf_counter()
    finally:
        engines.close()
        faults.close()
        progress.close()
        for f in list(futures):
            f.cancel()
        shutil.rmtree(os.path.dirname(api.config.KernelManager.ip), ignore_errors=True)
    LAST_TIMES.clear()
    LAST_TIMES.update(times, submissions=len(results),
                      worker_pages=sum(1 for r in results.values() if r.get("feedback_by") == "worker"))
    log("[cluster] the client's time: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
        + f"; feedback pages written by the workers: {LAST_TIMES['worker_pages']} of {len(results)}")
    cluster.start_seconds = 0.0  # paid once per run (the second pass reuses the cluster)
    return results
