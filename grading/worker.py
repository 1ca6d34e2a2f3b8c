"""Autograde workers: each takes (assignment, student) tasks one at a time, in one process.

    python -m grading.worker --results DIR [--workers N] ASSIGNMENT/STUDENT [ASSIGNMENT/STUDENT ...]

With ``--workers N`` the command imports what every worker imports (nbgrader, torch, the
checks) once and forks N workers (``supervise``). Several workers get the same task list; each
task is claimed atomically (a claim file created with O_EXCL), so workers share the class
dynamically without a coordinator. For each claimed task the worker runs nbgrader's autograde and
generate_feedback through ``NbGraderAPI`` (no new process per student) and writes
``DIR/<assignment>/<student>.json`` atomically, so the coordinating command can
report failures by name and a re-run after a killed worker grades only what is
missing. One student's broken submission never stops the others: every step is
caught and recorded.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

import grading
from grading import NOTEBOOKS_DIR, PACKAGE_DIR
from grading.kernel import protocol, warm
from grading.course import Course
from grading.failures import fault_of, find_problems, probe_machine
from grading.intake import read_timestamp


def alembic_version_in_process(asked):
    """nbgrader's ``get_alembic_version`` (``asked``: it runs ``alembic heads`` in a process of its own and takes the
    first head) read in this process instead, once: the head of nbgrader's migrations, from alembic's own reading
    of nbgrader's ``alembic`` folder. Where that folder has more than one head, or cannot be read, ``asked``
    answers. ``__wrapped__`` is ``asked`` (a test compares the two)."""
    @functools.lru_cache(maxsize=1)
    def get_alembic_version() -> str:
        try:
            import nbgrader
            from alembic.config import Config
            from alembic.script import ScriptDirectory

            config = Config()
            config.set_main_option("script_location", os.path.join(os.path.dirname(nbgrader.__file__), "alembic"))
            heads = ScriptDirectory.from_config(config).get_heads()
        except Exception:  # noqa: BLE001 - nbgrader's own way then, whatever went wrong here
            heads = []
        return heads[0] if len(heads) == 1 else asked()

    get_alembic_version.__wrapped__ = asked
    get_alembic_version._course_in_process = True
    return get_alembic_version


def import_nbgrader() -> None:
    """Import nbgrader's API and converters (``grading.without_iri_grammar`` first)."""
    grading.without_iri_grammar()
    import nbgrader.api
    import nbgrader.apps  # noqa: F401
    import nbgrader.converters  # noqa: F401

    accept_byte_order_mark()
    # a new gradebook asks the `alembic heads` command for nbgrader's schema version (a process of its own:
    # 2.3 s, against 0.1 s read here); the answer is nbgrader's, the same all along: read once per process (a
    # Dask worker makes a private gradebook for every submission it grades)
    if not getattr(nbgrader.api.get_alembic_version, "_course_in_process", False):
        nbgrader.api.get_alembic_version = alembic_version_in_process(nbgrader.api.get_alembic_version)
    if not getattr(nbgrader.api.create_engine, "_course_shared", False):
        nbgrader.api.create_engine = shared_engines(nbgrader.api.create_engine)
    metadata = nbgrader.api.Base.metadata
    if "create_all" not in vars(metadata):
        metadata.create_all = functools.partial(create_missing_tables, metadata, metadata.create_all)
    import nbgrader.nbgraderformat.common as nbformat_common

    if not isinstance(nbformat_common.jsonschema, SchemaCheckedOnce):
        nbformat_common.jsonschema = SchemaCheckedOnce(nbformat_common.jsonschema)


def create_missing_tables(metadata, create_all, bind=None, tables=None, checkfirst=True):
    """``metadata.create_all`` for nbgrader's ``Gradebook``, which calls it on every open (a dozen times per
    submission): one query for the table names, and ``create_all`` itself (a query per table, then the
    missing tables created) only when a table is missing. Same tables in the end."""
    from sqlalchemy import inspect

    if bind is not None and tables is None and checkfirst:
        if set(metadata.tables) <= set(inspect(bind).get_table_names()):
            return None
    return create_all(bind=bind, tables=tables, checkfirst=checkfirst)


class SchemaCheckedOnce:
    """``jsonschema`` as nbgrader's cell-metadata validator uses it, ``validate`` with its schema checked
    once per process: ``jsonschema.validate`` checks the schema against its meta-schema on every call,
    and nbgrader calls it for every graded cell, twice per submission (``CheckCellMetadata``): about a
    tenth of a submission's fixed cost on lesson 05. Same verdict and error (the validator class
    ``jsonschema`` picks for the schema, its best-matching error raised); any other name is jsonschema's."""

    def __init__(self, module):
        self._module = module
        self._validators: dict = {}

    def __getattr__(self, name):
        return getattr(self._module, name)

    def validate(self, instance, schema, cls=None, *args, **kwargs):
        import json

        if args or kwargs:
            return self._module.validate(instance, schema, cls, *args, **kwargs)
        key = (json.dumps(schema, sort_keys=True), cls)
        validator = self._validators.get(key)
        if validator is None:
            kind = cls or self._module.validators.validator_for(schema)
            kind.check_schema(schema)
            validator = self._validators[key] = kind(schema)
        error = self._module.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error


def shared_engines(create, keep: int = 4):
    """``create_engine`` for nbgrader's ``Gradebook``, one engine per database URL in this process.

    nbgrader opens a new ``Gradebook`` a dozen times per submission it autogrades and gives feedback on,
    and each made a new SQLAlchemy engine, whose cache of compiled statements started empty: every
    query of every submission was compiled again. The engine is kept (``Gradebook.close`` still
    disposes of its connections; the next use opens one); the ``keep`` most recently used URLs are
    kept, per process (a forked worker makes its own), so a Dask worker's private gradebook per
    submission does not pile up engines."""
    import collections

    engines: collections.OrderedDict = collections.OrderedDict()

    def create_engine(url, **kwargs):
        key = (os.getpid(), str(url), tuple(sorted(kwargs.items())))
        engine = engines.get(key)
        if engine is None:
            engine = engines[key] = create(url, **kwargs)
            while len(engines) > keep:
                engines.popitem(last=False)[1].dispose()
        engines.move_to_end(key)
        return engine

    create_engine._course_shared = True
    return create_engine


def accept_byte_order_mark() -> None:
    """Read a notebook whose JSON starts with a UTF-8 byte-order mark (an editor's signature) as if it had
    none, in this process (nbgrader reads the submissions here): grading never rewrites a file in
    ``submitted/`` to remove it. Idempotent."""
    import nbformat.reader

    if getattr(nbformat.reader.parse_json, "_course_bom", False):
        return
    original = nbformat.reader.parse_json

    def parse_json(s, **kwargs):
        if isinstance(s, (bytes, bytearray)) and s.startswith(b"\xef\xbb\xbf"):
            s = s[3:]
        elif isinstance(s, str) and s.startswith("\ufeff"):
            s = s[1:]
        return original(s, **kwargs)

    parse_json._course_bom = True
    nbformat.reader.parse_json = parse_json


def _undated_course_directory():
    """nbgrader's ``CourseDirectory`` whose submission time is read by :func:`read_timestamp`: a
    timestamp it cannot read grades the notebook undated (intake's ``undated`` finding says so)."""
    from nbgrader.coursedir import CourseDirectory

    class UndatedCourseDirectory(CourseDirectory):
        def get_existing_timestamp(self, dest_path):
            path = os.path.join(dest_path, "timestamp.txt")
            return read_timestamp(path) if os.path.isfile(path) and not os.path.islink(path) else None

    return UndatedCourseDirectory


def load_api(all_cells: bool = False):
    import_nbgrader()
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=PACKAGE_DIR).load_config()
    # IPC sockets under a folder private to this worker: the kernel runs in the
    # submission's folder while we run here, so the path must be absolute, and
    # distinct per worker so two workers never pick the same socket name.
    config.KernelManager.ip = os.path.join(tempfile.mkdtemp(prefix="nbg-ipc-"), "kernel")
    if all_cells:
        config.ResilientExecute.skip_demo_cells = False
    coursedir = _undated_course_directory()(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)


def _tail(text: str | None, n: int = 4000) -> str:
    return (text or "")[-n:]


def folder_hash(folder: str) -> str | None:
    """sha256 over the regular files of a folder (relative names and bytes, in sorted order, links and
    other special files not followed); None when the folder does not exist. What ``--resume`` compares:
    a notebook copied back with its old modification time (``cp -p``, an unzipped archive) still counts
    as changed, and a folder rewritten with the same bytes as unchanged."""
    import stat

    if not os.path.isdir(folder):
        return None
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, folder)
            digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            if not stat.S_ISREG(st.st_mode):
                digest.update(f"<not a regular file {st.st_mode:o}>".encode())
                continue
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            digest.update(b"\0")
    return digest.hexdigest()


def grader_hash() -> str:
    """sha256 over the grader's and the checks' code (``grading/*.py`` and ``course_lib/checks/*.py``: names
    and bytes, in sorted order): the fingerprint a result records, so ``--resume`` grades again what an
    older grader or older checks graded (a door closed since regrades everyone)."""
    import importlib.util

    digest = hashlib.sha256()
    spec = importlib.util.find_spec("course_lib")  # found, not imported: the checks pull in torch
    checks = [os.path.join(p, "checks") for p in (spec.submodule_search_locations or [])] if spec else []
    for label, folder in [("grading", os.path.dirname(os.path.abspath(__file__)))] + [("checks", c) for c in checks]:
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as fh:
                    digest.update(f"{label}/{name}\0".encode() + fh.read() + b"\0")
    return digest.hexdigest()


def content_hashes(course: Course, assignment: str, student: str) -> dict:
    """The submission's and the instructor's source notebooks' hashes a result was graded from, and the
    grader's own (:func:`grader_hash`); ``--resume`` grades again when any of them differs."""
    return {"submission_hash": folder_hash(course.task_folder("submitted", student, assignment)),
            "source_hash": folder_hash(os.path.join(NOTEBOOKS_DIR, assignment)),
            "grader_hash": grader_hash()}


def remove_submission(api, assignment: str, student: str) -> bool:
    from nbgrader.api import Gradebook, MissingEntry

    try:
        with Gradebook(api.coursedir.db_url) as gb:
            gb.remove_submission(assignment, student)
        return True
    except MissingEntry:
        return False


def set_aside(folder: str) -> str | None:
    """Rename an earlier run's output folder (autograded/<student>/<assignment>) to a hidden sibling before
    nbgrader replaces it; ``put_back`` restores it when the grading machine fails, so a failure never costs
    the earlier result. A rename needs no disk space. A sibling left by a killed worker is restored first."""
    backup = os.path.join(os.path.dirname(folder), f".{os.path.basename(folder)}.previous")
    if os.path.isdir(backup):
        if os.path.isdir(folder):
            shutil.rmtree(backup)
        else:
            os.rename(backup, folder)
    if not os.path.isdir(folder):
        return None
    os.rename(folder, backup)
    return backup


def put_back(folder: str, backup: str | None, failed: bool) -> None:
    """After grading: the earlier folder back in place when the machine failed, else dropped."""
    if backup is None or not os.path.isdir(backup):
        return
    if failed:
        shutil.rmtree(folder, ignore_errors=True)
        os.rename(backup, folder)
    else:
        shutil.rmtree(backup, ignore_errors=True)


def grade_one(course: Course, api, assignment: str, student: str, feedback: bool = True) -> dict:
    """Autograde one submission of ``course`` with nbgrader's ``api`` (and write its feedback page); return
    its result (the JSON of ``logs/results``)."""
    start = time.perf_counter()
    result = {"assignment": assignment, "student": student, **content_hashes(course, assignment, student)}
    autograded = course.task_folder("autograded", student, assignment)
    backup = None
    try:
        backup = set_aside(autograded)
        out = api.autograde(assignment, student, force=True, create=True)
        result["autograde_ok"] = bool(out.get("success"))
        result["log"] = _tail(out.get("log"))
        if out.get("error"):
            result["error"] = _tail(out["error"])
        result["autograded"] = os.path.isdir(autograded) and any(
            f.endswith(".ipynb") for f in os.listdir(autograded))
        result["problems"] = find_problems(autograded)
        # measured, never read from the log (which holds a kernel's text): the course folder and the gradebook
        fault = None if result["autograde_ok"] else probe_machine(course.root, getattr(
            getattr(api, "coursedir", None), "db_url", None))
        if fault:
            result["grader_fault"] = fault  # the machine's failure: the gradebook keeps what it had
        elif not result["autograded"]:
            # nbgrader keeps the grades of an earlier run when this one fails: drop them,
            # so the export says 0 for this submission instead of a stale score
            result["stale_grades_removed"] = remove_submission(api, assignment, student)
        if feedback and result["autograded"] and not fault:
            # the earlier page set aside like the autograded folder: a machine failure while writing the new
            # one (disk full, read-only folder) leaves the earlier page in place
            fb_dir = course.task_folder("feedback", student, assignment)
            fb_backup = set_aside(fb_dir)
            fb_failed = True
            try:
                fb = api.generate_feedback(assignment, student, force=True)
                fb_failed = not fb.get("success")
                result["feedback_ok"] = not fb_failed
                if fb_failed:
                    result["feedback_error"] = _tail(fb.get("error") or fb.get("log"))
                    fb_fault = probe_machine(course.root)  # measured: the log may hold the student's text
                    if fb_fault:
                        result["feedback_fault"] = fb_fault
            finally:
                try:
                    put_back(fb_dir, fb_backup, failed=fb_failed)
                except OSError as err:
                    result["feedback_fault"] = f"could not restore the earlier feedback page: {err}"
    except Exception as err:  # record and go on: one submission never stops the others
        import traceback

        result["autograde_ok"] = False
        result["error"] = _tail(traceback.format_exc())
        result["exception"] = f"{type(err).__name__}: {err}"
        fault = fault_of(err)
        if fault:
            result["grader_fault"] = fault
    try:
        put_back(autograded, backup, failed=bool(result.get("grader_fault")))
    except OSError as err:
        result.setdefault("grader_fault", f"could not restore the earlier autograded folder: {err}")
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def claim(results: str, assignment: str, student: str) -> bool:
    """Atomically claim one task; False when another worker already has it."""
    folder = os.path.join(results, assignment)
    os.makedirs(folder, exist_ok=True)
    try:
        fd = os.open(os.path.join(folder, f".claim-{student}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def write_result(results: str, result: dict) -> None:
    folder = os.path.join(results, result["assignment"])
    tmp = os.path.join(folder, f".{result['student']}.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=1)
    os.replace(tmp, os.path.join(folder, f"{result['student']}.json"))  # atomic: never half a result


def grade_tasks(args) -> None:
    """Claim and grade tasks until none is left (one worker)."""
    api = load_api(all_cells=args.all_cells)
    course = Course.from_env()  # the command's: COURSE_ROOT, as nbgrader's config reads it
    for task in args.tasks:
        assignment, student = task.split("/", 1)
        if not claim(args.results, assignment, student):
            continue
        started_at = time.time()
        result = grade_one(course, api, assignment, student, feedback=not args.no_feedback)
        result["worker_pid"] = os.getpid()
        result["started_at"], result["finished_at"] = started_at, time.time()  # the worker's timeline (bench_grading.py)
        write_result(args.results, result)


def supervise(args) -> int:
    """``--workers N``: N workers forked from this process once it has imported what they all import
    (nbgrader, torch, the checks: seconds of CPU each, once instead of N times); this process only
    waits for them and says which one failed. A worker that dies leaves the others grading."""
    import signal

    pids = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                protocol.prctl(protocol.PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor was killed: so is this worker
                grade_tasks(args)
                code = 0
            except BaseException:  # noqa: BLE001 - report it; the supervisor names this worker
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    failed = []
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            failed.append(f"worker {pid} was killed by signal {sig} ({signal.Signals(sig).name})")
        elif os.WEXITSTATUS(status) != 0:
            failed.append(f"worker {pid} exited {os.WEXITSTATUS(status)}")
    for line in failed:
        print(line, file=sys.stderr)
    return 1 if failed else 0


def main(argv=None) -> int:
    grading.collect_less()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="+", help="ASSIGNMENT/STUDENT")
    parser.add_argument("--results", required=True, help="folder for one JSON result per task")
    parser.add_argument("--workers", type=int, default=1,
                        help="N > 1: N workers forked from this process after the imports they share")
    parser.add_argument("--no-feedback", action="store_true")
    parser.add_argument("--cold", action="store_true", help="no warm kernels (grading/kernel/warm.py)")
    parser.add_argument("--all-cells", action="store_true", help="run the demo-only cells too (as before issue 16)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    grader = os.environ.pop("COURSE_GRADER_PID", None)
    if grader:
        # started by a grading run (grading/pipeline.py), in a process group of its own: the run stops this
        # group when interrupted; should the run die without that chance (SIGKILL), this process dies too,
        # and its forked workers with it, instead of grading on beside the next run
        import signal

        protocol.prctl(protocol.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != int(grader):
            return 1  # the run was already gone
    if os.environ.get("COURSE_KERNEL", "course-sandbox") == "course-sandbox":
        from grading import edition

        edition.ensure()  # the kernels' course_lib: the students' edition (the pipeline's, or one of its own)
    template = None
    if args.cold:
        for k in ("COURSE_WARM_SOCKET", "COURSE_WARM_PID"):
            os.environ.pop(k, None)
    elif "COURSE_WARM_SOCKET" not in os.environ and warm.enabled() \
            and os.environ.get("COURSE_KERNEL", "course-sandbox") == "course-sandbox":
        # on its own (the pipeline starts one template for all its workers, warm.shared): a template
        # of its own, importing while this worker imports nbgrader; its first launcher waits for it
        template = warm.start_template([t.split("/", 1)[0] for t in args.tasks])
        os.environ.update(template.env)
    try:
        # what the verifier's replays import (grading/verify.py: the checks, torch) and nbgrader, loaded
        # while the template starts, not after the first kernel has run, and before any fork
        try:
            import course_lib.checks  # noqa: F401
            import torch  # noqa: F401
        except Exception:  # noqa: BLE001 - then each submission's verifier reports it, as before
            pass
        if args.workers > 1:
            import_nbgrader()
            from grading import feedback, integrity, verify  # noqa: F401 - nbgrader_config's
            from grading.kernel import client  # noqa: F401 - nbgrader_config's ResilientExecute

            return supervise(args)
        grade_tasks(args)
    finally:
        if template is not None:
            template.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
