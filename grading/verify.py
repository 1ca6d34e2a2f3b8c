"""Verdicts decided outside the student's process.

The judge is not in the dock: when grading, each graded test cell's checks run in the
student's kernel in *record* mode (``course_lib.checks.transcript``): they call the
student's functions on the test's inputs and publish every output as plain data (a
``display_data`` output of MIME type ``RECORD_MIME``). They compute no reference, so no
expected value exists in the kernel to be read.

``VerifyOutsideKernel`` runs in nbgrader's own process right after the kernel has
finished (``c.Autograde.autograde_preprocessors``, after ``ResilientExecute``). For each
graded test cell it

1. takes the checks the cell calls from the cell's *source* (restored from the
   gradebook by nbgrader before execution, so the submission cannot change it):
   every ``checks.<lesson>.check_<exercise>(..., hidden=...)`` call, in order;
2. takes the records from the cell's outputs (data only: decoded without pickle,
   arrays of an allowlist of plain dtypes);
3. replays each check, in a child process forked from this one and bounded in CPU time and
   memory (:func:`bounded_verdicts`): inputs regenerated, the reference computed, every call
   of the student's function answered from the record (decoded only within the record's
   bounds, ``transcript.record_bounds``); the first failing check's message is the verdict,
   and a record that exceeds a bound scores 0 for its test with a note;
4. removes the records from the outputs and, when the verdict is a failure, appends
   it as an ``AssertionError`` output, which nbgrader's ``SaveAutoGrades`` scores 0.

So a cell scores its points only when the kernel ran it without an error *and* the
verifier accepts what it recorded. The kernel can lower its score (a cell that raised
scores 0, a cell without a record scores 0), never raise it: patching numpy, tracing
the checker, forging replies or objects that compare equal to anything change at most
what is recorded, and only right outputs pass. Students see the verifier's message in
their feedback; in JupyterLab nothing changes for them (checks run live there).

Does NOT cover: the sandbox (``grading.kernel.launcher``), static integrity findings
(``grading.integrity``), or how the student's function reaches the record (core).
"""
from __future__ import annotations

import ast
import importlib
import json
import os
import re
import resource
import select
import signal
import time

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from traitlets import Bool

from course_lib.checks import transcript

_CHECK_MODULE = re.compile(r"^[a-z_][a-z0-9_]*$")


def check_calls(source: str) -> list[tuple[str, str, dict]]:
    """(lesson module, check name, literal keyword arguments) of every check call, in order.

    Raises ValueError when the source cannot be parsed or a call's keywords are not literals.
    """
    tree = ast.parse(re.sub(r"^[ \t]*[%!].*$", "", source, flags=re.M))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr.startswith("check_") and isinstance(f.value, ast.Attribute)
                and isinstance(f.value.value, ast.Name) and f.value.value.id == "checks"):
            kwargs = {}
            for kw in node.keywords:
                if kw.arg is None:
                    raise ValueError("a check call with **kwargs cannot be verified")
                kwargs[kw.arg] = ast.literal_eval(kw.value)
            found.append((node.lineno, node.col_offset, f.value.attr, f.attr, kwargs))
    return [(m, name, kw) for _, _, m, name, kw in sorted(found)]


def verify_cell(source: str, records: list) -> str | None:
    """The verifier's verdict for one test cell: None (pass) or the failure message."""
    try:
        calls = check_calls(source)
    except (SyntaxError, ValueError) as err:
        return f"this test cell could not be verified outside the kernel ({err})"
    if not calls:
        return "this test cell calls no course check, so it cannot be verified outside the kernel"
    position = 0
    for module_name, check_name, kwargs in calls:
        if not _CHECK_MODULE.match(module_name):
            return f"unknown check module {module_name!r}"
        try:
            module = importlib.import_module(f"course_lib.checks.{module_name}")
            check = getattr(module, check_name)
        except (ImportError, AttributeError):
            return f"unknown check checks.{module_name}.{check_name}"
        verdict, used = transcript.replay(check, kwargs, records[position:])
        position += used
        if verdict is not None:
            return verdict
    return None


def records_of(cell) -> list:
    """The recorded calls in a cell's outputs, in order (decoded later, as data)."""
    out = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "display_data" and transcript.RECORD_MIME in output.get("data", {}):
            entry = output["data"][transcript.RECORD_MIME]
            out.append(entry if isinstance(entry, dict) else {})
    return out


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _vm_bytes() -> int:
    """This process's address space now (what RLIMIT_AS counts)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


MAX_VERDICT_CHARS = 20_000  # one verdict, as the verifier's child reports it


def _child_verdicts(jobs: list, write_fd: int, cpu_seconds: int, memory_bytes: int) -> None:
    """In the forked child: each job's verdict, one JSON line each, as soon as it is known."""
    try:
        if memory_bytes > 0:
            limit = _vm_bytes() + memory_bytes
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        import sys

        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)  # the parent's OpenMP pool did not survive the fork
        # the hard limit is set once (an unprivileged process cannot raise it again): the whole batch's
        # budget; each job gets its own soft limit below it (SIGXCPU when a job's own seconds are spent)
        used = resource.getrusage(resource.RUSAGE_SELF)
        hard = int(used.ru_utime + used.ru_stime) + 1 + cpu_seconds * len(jobs) + 5
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
        for key, source, records in jobs:
            used = resource.getrusage(resource.RUSAGE_SELF)
            spent = int(used.ru_utime + used.ru_stime) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (min(spent + cpu_seconds, hard), hard))
            try:
                verdict = verify_cell(source, records)
                # what the parent reads from this child is bounded too (a message quoting a record)
                line = {"key": key, "verdict": verdict if verdict is None else verdict[:MAX_VERDICT_CHARS]}
            except MemoryError:
                line = {"key": key, "limit": "memory"}
            except Exception as err:  # fail closed: a cell the verifier cannot judge earns nothing
                line = {"key": key, "verdict": f"this test could not be verified ({type(err).__name__}: "
                                               f"{str(err)[:300]})"}
            data = (json.dumps(line) + "\n").encode()
            while data:
                data = data[os.write(write_fd, data):]
    except BaseException as err:  # the grader's own failure (not a record's): say what it was, never hide it
        data = (json.dumps({"error": f"{type(err).__name__}: {str(err)[:300]}"}) + "\n").encode()
        try:
            while data:
                data = data[os.write(write_fd, data):]
        finally:
            os._exit(3)
    finally:
        os._exit(0)


def internal_note(what: str) -> str:
    return (f"the grader's verifier failed before it judged this test ({what}): an error in the grading "
            "tools, not in this submission; this test scores 0 here, so tell the course staff, who can regrade "
            "once it is fixed")


def limit_note(kind: str, cpu_seconds: int, memory_mb: int) -> str:
    what = (f"more than {cpu_seconds} s of CPU time" if kind == "time" else
            f"more than {memory_mb} MiB of memory" if kind == "memory" else
            "more than the verifier's time or memory (it stopped)")
    return (f"the verifier stopped on this test's record: checking it needed {what}, the bound for one "
            "test's record; this test scores 0 (the rest of the submission and the class were graded as usual)")


def bounded_verdicts(jobs: list, cpu_seconds: int | None = None, memory_mb: int | None = None) -> dict:
    """``{key: verdict}`` for jobs ``(key, cell source, records)``, each judged by :func:`verify_cell` in a
    child process forked from this one, under a CPU-time limit per job (``COURSE_VERIFY_CPU_SECONDS``,
    60 s: CPU time, so a busy machine does not shorten it) and a memory limit (``COURSE_VERIFY_MEMORY_MB``,
    4096 MiB of address space above this process's). One child judges a notebook's cells in turn; a
    job that exceeds a limit (or kills its child) gets :func:`limit_note` as its verdict and the jobs
    after it go on in a fresh child, so a record built to be slow or huge costs its own test only. A
    child that fails for its own reasons (an error of the verifier, not a bound) gives the job it was on
    :func:`internal_note` instead, which says so."""
    cpu = _env_int("COURSE_VERIFY_CPU_SECONDS", 60) if cpu_seconds is None else cpu_seconds
    memory = _env_int("COURSE_VERIFY_MEMORY_MB", 4096) if memory_mb is None else memory_mb
    wall = max(30, 10 * cpu)  # a backstop for a child that stops without using CPU
    results: dict = {}
    pending = list(jobs)
    while pending:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (measured by the tests through its results)
            os.close(read_fd)
            _child_verdicts(pending, write_fd, cpu, memory * 1024 * 1024)
        os.close(write_fd)
        buffer, deadline, killed, child_error = b"", time.monotonic() + wall, False, None
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    os.kill(pid, signal.SIGKILL)
                    killed = True
                    break
                ready, _, _ = select.select([read_fd], [], [], min(left, 1.0))
                if not ready:
                    continue
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    item = json.loads(line)
                    if "error" in item:
                        child_error = str(item["error"])
                        continue
                    key = item["key"]
                    if "limit" in item:
                        results[key] = limit_note(item["limit"], cpu, memory)
                    else:
                        results[key] = item.get("verdict")
                    deadline = time.monotonic() + wall
        finally:
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
        rest = [job for job in pending if job[0] not in results]
        if not rest:
            break
        culprit = rest[0][0]  # the job the child was on when it stopped
        signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        kind = "time" if killed or signum == signal.SIGXCPU else "memory" if signum in (signal.SIGKILL, signal.SIGSEGV,
                                                                                        signal.SIGABRT) else "other"
        if child_error is not None or os.WIFEXITED(status):
            # the child ended by itself without this job's verdict: a failure of the verifier, not a bound
            results[culprit] = internal_note(child_error or f"its process exited with status "
                                                            f"{os.WEXITSTATUS(status)}")
        else:
            results[culprit] = limit_note(kind, cpu, memory)
        pending = rest[1:]
    return results


_PREPARED: set = set()


def prepare(sources) -> None:
    """Load, in this (the parent) process, what the checks of these cells load on first use: their
    modules, the modules' ``warm_up()`` and the course data loaders they import that take no argument
    (lesson 06's corpus). A forked verifier child then finds them in memory instead of loading them
    again for every notebook (what is loaded in a child is gone with it). A step that fails is skipped:
    the child loads it, or fails on it, as before."""
    import inspect

    for source in sources:
        try:
            names = [m for m, _, _ in check_calls(source)]
        except (SyntaxError, ValueError):
            continue
        for name in names:
            if name in _PREPARED or not _CHECK_MODULE.match(name):
                continue
            _PREPARED.add(name)
            try:
                module = importlib.import_module(f"course_lib.checks.{name}")
                own = getattr(module, "warm_up", None)
                if callable(own):
                    own()
                text = inspect.getsource(module)
            except Exception:  # noqa: BLE001 - see the docstring
                continue
            for bio, imported in re.findall(r"from course_lib\.bio\.(\w+) import ([\w, ]+)", text):
                for fn_name in (n.strip() for n in imported.split(",")):
                    try:
                        fn = getattr(importlib.import_module(f"course_lib.bio.{bio}"), fn_name)
                        params = inspect.signature(fn).parameters.values()
                        if getattr(fn, "cache_info", None) and all(
                                p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                                for p in params):
                            fn()
                    except Exception:  # noqa: BLE001 - see the docstring
                        pass


def _strip_records(cell) -> list:
    records = records_of(cell)
    cell.outputs = [o for o in cell.get("outputs", [])
                    if not (o.get("output_type") == "display_data" and transcript.RECORD_MIME in o.get("data", {}))]
    return records


class VerifyOutsideKernel(Preprocessor):
    """Replay every graded test cell's checks on its record; a failing verdict scores the cell 0.

    The verdicts of a notebook are computed first, together, in a bounded child process
    (:func:`bounded_verdicts`), then applied cell by cell."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        jobs = []
        self._verdicts = {}
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not (meta.get("grade") and not meta.get("solution")):
                continue
            records = records_of(cell)
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if errors and not (records and all("AssertionError" in str(o.get("ename"))
                                               or o.get("ename") == "NotImplementedYet" for o in errors)):
                continue  # scored 0 by its own error; the verifier has nothing to add
            jobs.append((index, cell.source, records))
        if jobs:
            prepare(source for _, source, _ in jobs)
            self._verdicts = bounded_verdicts(jobs)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        records = _strip_records(cell)
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not (meta.get("grade") and not meta.get("solution")):
            return cell, resources
        verdicts = getattr(self, "_verdicts", None)
        if verdicts is None or index not in verdicts and not any(
                o.get("output_type") == "error" for o in cell.get("outputs", [])):
            verdicts = bounded_verdicts([(index, cell.source, records)])  # called for one cell alone
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        if errors:
            # the kernel's failure already scores 0; when its checks failed on recorded outputs, the
            # verifier's message (which names misconceptions from the reference) replaces the kernel's
            verdict = verdicts.get(index)
            if verdict is not None and not verdict.startswith("this test could not be verified"):
                cell.outputs = [o for o in cell.outputs if o.get("output_type") != "error"]
                cell.outputs.append(new_output("error", ename="AssertionError", evalue=verdict,
                                               traceback=[f"AssertionError: {verdict}"]))
            return cell, resources
        verdict = verdicts.get(index, "this test could not be verified (no verdict)")
        if verdict is not None:
            # what the kernel printed ("visible tests passed") is not the verdict: only the verifier's message stays
            cell.outputs = [o for o in cell.outputs if o.get("output_type") != "stream"]
            cell.outputs.append(new_output("error", ename="AssertionError", evalue=verdict,
                                           traceback=[f"AssertionError: {verdict}"]))
            resources.setdefault("course_verifier", []).append(
                {"grade_id": meta.get("grade_id"), "message": verdict[:500]})
        return cell, resources
