"""How grading classifies what went wrong with a submission: one module for the whole run.

A graded task ends in one of four ways, and every part of the grading command (the worker that
runs the notebook, the pipeline that decides on a second pass and writes grades.csv, the class
report) reads them from here:

* **graded**: the student's code ran; its tests passed or failed on their own (a failing test,
  a misconception named by ``course_lib.checks``, a crash in the student's code: the student's);
* **the student's problem**, recorded in the autograded notebook as an error of one of
  :data:`PROBLEM_ERRORS`: an integrity finding (:data:`INTEGRITY`), a kernel killed by the
  student's code, e.g. past the sandbox's memory limit (:data:`KERNEL_DIED`), a cell past its time
  limit (:data:`CELL_TIMEOUT`) or the notebook past its own (:data:`NOTEBOOK_TIMEOUT`); the cells
  score 0 and :func:`find_problems` lists them;
* **the machine's time**: the notebook's time limit may have been decided by a busy machine, so
  :func:`needs_second_pass` grades it once more with more time (as it does a task with no grade);
  a single cell gets back, at its limit, the time its kernel waited for a CPU (``grading.kernel.client``);
* **the grader's fault** (``grader_fault``): the gradebook, the disk or the course folder failed,
  named by :func:`fault_of` from the type and errno of an exception the grader's own step raised, or
  measured by :func:`probe_machine` after a failed step (never read from a log's text, which may hold
  a kernel's); never a student's zero, and the earlier result is kept.

:func:`failure_reason` and :func:`status_of` turn a task's result into the one line that
grades.csv and the command's summary show.
"""
from __future__ import annotations

import errno
import os
import re

from grading import GRADING_DIR

RESULTS = os.path.join(GRADING_DIR, "logs", "results")  # one JSON result per graded task

# the errors grading.kernel.client writes into a cell of the autograded notebook (and the checks' integrity error)
INTEGRITY = "IntegrityError"
KERNEL_DIED = "KernelDied"
CELL_TIMEOUT = "CellTimeoutError"
NOTEBOOK_TIMEOUT = "NotebookTimeout"
KERNEL_MESSAGE = "KernelMessageError"  # a message of the cell's kernel the grader could not take: the cell's failure
PROBLEM_ERRORS = (INTEGRITY, KERNEL_DIED, CELL_TIMEOUT, NOTEBOOK_TIMEOUT, KERNEL_MESSAGE)
# problems a busy machine may have caused: the task is graded once more, with more time
SECOND_PASS_SIGNS = (NOTEBOOK_TIMEOUT,)


def find_problems(autograded_dir: str) -> list[str]:
    """Integrity findings, dead kernels and timeouts recorded in the autograded notebooks."""
    import nbformat

    problems = []
    for name in sorted(os.listdir(autograded_dir)) if os.path.isdir(autograded_dir) else []:
        if not name.endswith(".ipynb"):
            continue
        try:
            nb = nbformat.read(os.path.join(autograded_dir, name), as_version=4)
        except Exception as err:
            problems.append(f"{name}: unreadable autograded notebook ({err})")
            continue
        for finding in nb.metadata.get("course_integrity", []):
            problems.append(f"{INTEGRITY}: {finding}")
        for cell in nb.cells:
            for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
                if out.get("output_type") == "error" and out.get("ename") in PROBLEM_ERRORS:
                    gid = cell.metadata.get("nbgrader", {}).get("grade_id", "a cell")
                    detail = out.get("evalue") or re.sub(r"\x1b\[[0-9;]*m", "", (out.get("traceback") or [""])[-1])
                    text = f"{out['ename']} in {gid}: {detail[:160]}"
                    if out["ename"] == INTEGRITY and "integrity check failed" in out.get("evalue", ""):
                        continue  # the findings themselves are listed above
                    if text not in problems:
                        problems.append(text)
    return problems


# errors of the grading machine (the gradebook, the course folder, the disk), never of a submission: a
# task that meets one is the grader's failure (``grader_fault``), not a student's zero
MACHINE_ERRORS = (
    ("readonly database", "the gradebook is read-only"),
    ("database or disk is full", "the disk holding the gradebook is full"),
    ("No space left on device", "the disk is full"),
    ("Read-only file system", "the course folder is on a read-only file system"),
    ("unable to open database file", "the gradebook cannot be opened"),
    ("disk I/O error", "a disk I/O error on the gradebook"),
    ("Disk quota exceeded", "the disk quota is exceeded"),
    ("database is locked", "the gradebook stayed locked by another process"),
)


def machine_fault(text: str) -> str | None:
    """The machinery failure named in an error or log text, e.g. 'the gradebook is read-only (attempt to
    write a readonly database)'; None when the text names none."""
    for sign, cause in MACHINE_ERRORS:
        i = text.find(sign)
        if i >= 0:
            line = text[text.rfind("\n", 0, i) + 1:]
            line = line[:line.find("\n")] if "\n" in line else line
            return f"{cause} ({line.strip()[:200]})"
    # a file of the course folder the grader may not write (a read-only autograded/ or feedback/ folder);
    # only paths of the course root count, so nothing a submission prints can pass for the machine's failure
    m = re.search(r"Permission denied: '(" + re.escape(GRADING_DIR.rstrip(os.sep) + os.sep) + r"[^']*)'", text)
    if m:
        return f"the grader may not write {m.group(1)} (Permission denied)"
    return None


_ERRNO_CAUSES = {
    errno.ENOSPC: "the disk is full",
    errno.EROFS: "the course folder is on a read-only file system",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EIO: "a disk I/O error",
    errno.EACCES: "the grader may not write the course folder (Permission denied)",
    errno.EPERM: "the grader may not write the course folder (Operation not permitted)",
}


def fault_of(err: BaseException | None) -> str | None:
    """The machinery failure an exception of the grader's own step names, by its type and errno (never its
    text): an ``OSError`` with ENOSPC, EROFS, EDQUOT, EIO, EACCES or EPERM, or a gradebook
    ``OperationalError`` (sqlite3's or SQLAlchemy's), followed through ``__cause__``/``__context__``;
    e.g. ``OSError(errno.ENOSPC, "x")`` -> 'the disk is full (errno ENOSPC)'; None for anything else."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _ERRNO_CAUSES:
            return f"{_ERRNO_CAUSES[err.errno]} (errno {errno.errorcode[err.errno]})"
        if type(err).__name__ == "OperationalError" and type(err).__module__.split(".")[0] in ("sqlite3", "sqlalchemy"):
            return f"the gradebook failed ({type(err).__module__}.OperationalError)"
        err = err.__cause__ or err.__context__
    return None


def probe_machine(root: str = GRADING_DIR, db_url: str | None = None) -> str | None:
    """Measure, never read: after a failed step whose only account is a log (which may hold a kernel's
    text), write and sync a small file in the course folder and, given ``db_url``, open a write
    transaction on the gradebook (SQLite) or connect to it (others); the machinery failure the exception
    names (:func:`fault_of`), or None when both take writes."""
    import tempfile

    if db_url:
        try:
            from sqlalchemy import create_engine

            engine = create_engine(db_url)
            try:
                with engine.connect() as conn:
                    if engine.dialect.name == "sqlite":
                        conn.exec_driver_sql("BEGIN IMMEDIATE")
                        conn.exec_driver_sql("CREATE TEMP TABLE IF NOT EXISTS grader_probe (x)")
                        conn.exec_driver_sql("ROLLBACK")
                    else:
                        conn.exec_driver_sql("SELECT 1")
            finally:
                engine.dispose()
        except Exception as err:  # noqa: BLE001 - classified by type below, else named by type only
            return fault_of(err) or f"the gradebook cannot be opened ({type(err).__module__}.{type(err).__name__})"

    try:
        fd, path = tempfile.mkstemp(prefix=".grader-probe-", dir=root)
        try:
            os.write(fd, b"\0" * 65536)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(path)
    except OSError as err:
        return fault_of(err) or f"the course folder cannot be written ({type(err).__name__}, errno {err.errno})"
    return None


def needs_second_pass(result: dict) -> bool:
    """A submission whose outcome a busy machine may have decided: no grade at all because the grading
    machinery failed (a kernel that did not start, a killed worker), or the whole-notebook time limit.
    (A single cell gets back, at its limit, the time its kernel waited for a CPU held by other work
    (``ResilientExecute``); one that had its limit of running time and did not end is the student's.)"""
    if result.get("second_pass"):
        return False
    if not result.get("autograded") or not result.get("autograde_ok"):
        return True
    return any(str(p).startswith(SECOND_PASS_SIGNS) for p in result.get("problems") or [])


_PLAIN_CAUSES = re.compile(r"(Skipping unknown notebook[^\n]*|No notebooks were matched[^\n]*|"
                           r"Notebook does not appear to be JSON[^\n]*|does not appear to be JSON[^\n]*)")
_ROOT_CAUSES = re.compile(r"\b(?!NbGraderException)[A-Z]\w*(?:Error|Exception): [^\n]+")


def failure_reason(result: dict) -> str | None:
    """One line saying why a submission has problems, or None when it graded cleanly."""
    problems = result.get("problems") or []
    if result.get("autograded") and result.get("autograde_ok"):
        return "; ".join(problems[:4]) + (f"; (+{len(problems) - 4} more)" if len(problems) > 4 else "") \
            if problems else None
    text = "\n".join(str(result.get(k) or "") for k in ("log", "error", "exception"))
    causes = [m.group(0).strip() for m in _PLAIN_CAUSES.finditer(text)]  # nbgrader's own words first
    causes += [m.group(0).strip() for m in _ROOT_CAUSES.finditer(text) if "Please see the" not in m.group(0)]
    if not result.get("autograded"):
        head = "not graded (scored 0)"
    else:
        head = "graded with errors"
    why = causes[0] if causes else "see the log in " + os.path.join(RESULTS, result.get("assignment", ""),
                                                                     f"{result.get('student', '')}.json")
    return f"{head}: {why[:200]}" + (f"; {'; '.join(problems[:3])}" if problems else "")


def status_of(result: dict | None) -> str:
    """The grades.csv status of one graded task: 'graded', 'graded with problems: ...' or 'not graded: ...'."""
    if result is None:
        return "not graded: no result yet (re-run with --resume)"
    if result.get("grader_fault"):
        return f"not graded: the grader's failure, not the student's: {result['grader_fault']}"
    why = failure_reason(result)
    if why is None:
        return "graded"
    if why.startswith("not graded"):
        return "not graded: " + why.split(": ", 1)[-1]
    return "graded with problems: " + why.split(": ", 1)[-1] if why.startswith("graded with errors") \
        else "graded with problems: " + why
