"""The main job: grade a class from release to CSV, in parallel, without losing anyone.

Steps (each reported on stdout):

1. preflight: the grading kernel exists and imports course_lib (``preflight``);
2. release: ``generate_assignment --force`` for every assignment, so the gradebook
   holds the current tests (nbgrader grades against the tests it stored, not the
   ones in the submission or in notebooks/);
3. submissions: when ``submitted/`` has no real submissions, the demo class is
   generated into it (``grading.demo``); a real class is never overwritten;
   intake (:func:`intake`) then keeps only regular files in each submission, bounded in
   count and bytes, and moves everything else to ``logs/intake/`` (reported by name);
4. autograde + feedback: N worker processes share the (assignment, student) tasks
   (``grading.worker``), kernels over IPC sockets so no two race for a TCP port;
5. export: ``nbgrader export`` to ``grading/grades.csv``;
6. a table of students x assignments, the failures by name, where the feedback is;
7. the class report, LMS files and similarity table (``grading.report``), and where they are.

The command exits non-zero only when the machinery fails (preflight, release,
a worker process crashing, export), or when the demo class does not get exactly
its expected scores. A student's broken code is reported, never fatal.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

from grading import PACKAGE_DIR, REPO_DIR, db_url, demo, preflight
from grading.kernel import launcher, warm
from grading import intake as intake_mod
from grading import failures
from grading.course import Course
from grading.failures import failure_reason, needs_second_pass, status_of

# the demo class is a course of its own (its submitted/, gradebook, feedback, grades.csv), beside the real one
DEMO_ROOT = Course.from_env().demo.root
# left in submitted/ by versions that generated the demo class there; read, never acted on by deleting
LEGACY_DEMO_MARKER = ".demo-class"
LOCK_NAME = ".grading.lock"


class GradingError(RuntimeError):
    """The grading machinery (not a student) failed."""


@dataclasses.dataclass
class Options:
    assignments: list[str]
    workers: int = 2
    demo: str = "auto"  # auto: demo class when submitted/ holds no real class; yes; no
    resume: bool = False  # skip tasks already graded from identical files (after a killed run)
    feedback: bool = True
    kernel: str = "course-sandbox"
    second_pass: bool = True  # re-grade timeouts and infrastructure failures once, alone, with more time
    listed: bool = False  # the assignments were named (--assignment): all count in the totals, submitted or not
    students: list[str] | None = None  # --student: regrade only these students (the CSV keeps the whole class)
    scheduler: str | None = None  # --scheduler / COURSE_DASK_SCHEDULER: a running Dask scheduler's address
    engine: str = "dask"  # dask: a LocalCluster (or the scheduler); processes: forked workers (grading.worker)


def engine_for(engine: str, scheduler: str | None) -> str:
    """The engine a run uses: ``dask`` grades on Dask (a LocalCluster of the workers, or ``scheduler``'s
    cluster); ``processes`` forks the workers of grading/worker.py on this machine and cannot use a
    scheduler; ``auto`` (the default): dask, on a LocalCluster when no scheduler is given, unless Dask
    is not installed (a lean install without the ``grade`` extra): then the forked workers. On one
    machine the two are measured within 10% of each other (grading/docs/scale-out.md)."""
    if engine not in ("auto", "dask", "processes"):
        raise ValueError(f"unknown engine {engine!r}: expected auto, dask or processes")
    if engine == "processes" and scheduler:
        raise ValueError("--scheduler / COURSE_DASK_SCHEDULER need --engine dask (or auto)")
    if engine == "auto":
        return "dask" if scheduler or dask_installed() else "processes"
    return engine


def dask_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("distributed") is not None


def log(msg: str) -> None:
    from grading import csvsafe

    print(csvsafe.safe_text(msg), flush=True)  # a file name in non-UTF-8 bytes never stops the run


def nbgrader_env() -> dict:
    env = dict(os.environ)
    env.setdefault("COURSE_KERNEL", "course-sandbox")
    # nbgrader calls `alembic` (and jupyter calls kernels) from PATH: this environment's bin first
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = REPO_DIR + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _nbgrader_process(cmd: list[str]) -> subprocess.CompletedProcess:
    """Run an nbgrader process in the course root, in a process group of its own (nbgrader starts `alembic`
    for the gradebook): an interrupt kills all of it."""
    popen = subprocess.Popen(cmd, cwd=PACKAGE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=nbgrader_env(), start_new_session=True)
    try:
        out, err = popen.communicate()
    except BaseException:
        _stop_workers(popen)
        raise
    return subprocess.CompletedProcess(cmd, popen.returncode, out, err)


def export_gradebook(dest: str) -> None:
    """nbgrader's CSV export of the gradebook into ``dest``: its ``CsvExportPlugin`` on a ``Gradebook`` opened as
    ``nbgrader export`` opens it (the course's URL and course id, from nbgrader_config.py), in this process (a
    process of its own imported nbgrader again: about a second of every run). A failure raises GradingError."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins.export import CsvExportPlugin
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=PACKAGE_DIR).load_config()
    try:
        with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gb:
            CsvExportPlugin(config=config, to=dest).export(gb)
    except Exception as err:  # noqa: BLE001 - the gradebook is the grader's: name the cause and stop
        text = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"  # SQLAlchemy adds the SQL
        raise GradingError(f"`nbgrader export` failed: {failures.machine_fault(text) or text}; the previous "
                           "results are unchanged") from err


_CELLS_CHANGED = "Cannot add or remove cells for notebook"

# run by generate_assignments in one nbgrader process: nbgrader's API, configured as the workers configure it
_GENERATE = """
import os, shutil, sys
import grading
grading.collect_less()
from grading import worker

api = worker.load_api()
try:
    for assignment in sys.argv[1:]:
        out = api.generate_assignment(assignment, force=True, create=True)
        log = out.get("log") or ""
        sys.stderr.write(log + (out.get("error") or ""))
        if not out.get("success") or "[ERROR]" in log:
            print(f"FAILED {assignment}", flush=True)
            sys.exit(1)
        print(f"RELEASED {assignment}", flush=True)
finally:  # the kernels' socket folder load_api made (no kernel runs here)
    shutil.rmtree(os.path.dirname(api.config.KernelManager.ip), ignore_errors=True)
"""


def generate_assignments(assignments: list[str]) -> None:
    """``nbgrader generate_assignment --force`` for each assignment, in order, in one process (nbgrader's
    imports are paid once, not once per assignment); the first that fails raises GradingError naming it."""
    if not assignments:
        return
    proc = _nbgrader_process([sys.executable, "-c", _GENERATE, *assignments])
    if proc.returncode:
        failed = next((line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("FAILED ")),
                      None)
        fault = failures.machine_fault(proc.stderr)  # the grader's machinery (a read-only gradebook): one line
        error = GradingError(f"`nbgrader generate_assignment {failed or ' '.join(assignments)} --force` failed: "
                             f"{fault}; nothing was graded and the previous results are unchanged" if fault else
                             f"`nbgrader generate_assignment {failed or ' '.join(assignments)} --force` failed "
                             f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        error.assignment = failed
        raise error


def release_assignments(course: Course, assignments: list[str], use_demo: bool) -> None:
    """``nbgrader generate_assignment`` for each assignment. nbgrader refuses once a source notebook's graded
    cells were added or removed after submissions of it entered the gradebook (a course update, an edited
    lesson). The demo class is regenerated on every run, so its course then starts afresh (gradebook and
    results) and every assignment is released again; a real class gets an error that says what happened and
    what to do, and nothing of it is changed."""
    try:
        generate_assignments(assignments)
        return
    except GradingError as err:
        if _CELLS_CHANGED not in str(err):
            raise
        changed = getattr(err, "assignment", None) or ", ".join(assignments)
        if not use_demo:
            raise GradingError(
                f"the graded cells of {changed}'s source notebook were added or removed after this "
                f"class's submissions of it were graded, and nbgrader refuses to change a gradebook that holds "
                f"them ({db_url()}). Either restore the notebook's cells as they were when the class was graded "
                f"(git log notebooks/{changed}), or grade this class in a new course folder (COURSE_ROOT) whose gradebook "
                f"starts empty; the grades already recorded are unchanged.") from None
    log(f"[release] the demo class's gradebook predates a change of {changed}'s graded cells: the demo course "
        "starts afresh (gradebook and results; it is regenerated on every run)")
    for name in ("gradebook.db", "autograded", os.path.join("logs", "results")):
        path = os.path.join(course.root, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    generate_assignments(assignments)


def student_folders(submitted: str) -> list[str]:
    """The student folders in submitted/ (folders themselves, not links; hidden names are not students)."""
    if not _real_dir(submitted):
        return []
    return sorted(s for s in os.listdir(submitted)
                  if not s.startswith(".") and _real_dir(os.path.join(submitted, s)))


def choose_class(course: Course, demo_option: str) -> bool:
    """True: grade the demo class (in ``DEMO_ROOT``); False: the class in submitted/ as it is.

    ``--demo auto`` grades the demo class only when submitted/ holds no student folder. When both could
    be meant (submitted/ holds folders named like the demo students, or the marker ``.demo-class`` that
    versions before issue 40 left there) it refuses and asks for ``--demo yes|no``, saying why; nothing
    in submitted/ is ever deleted or rewritten either way."""
    if demo_option in ("yes", "no"):
        return demo_option == "yes"
    students = student_folders(course.submitted)
    if not students:
        return True
    demo_like = [s for s in students if s in demo.STUDENTS]
    legacy = os.path.exists(os.path.join(course.submitted, LEGACY_DEMO_MARKER))
    if demo_like or legacy:
        others = [s for s in students if s not in demo.STUDENTS]
        why = []
        if demo_like:
            why.append(f"folders named like the demo students ({', '.join(demo_like)})")
        if legacy:
            why.append("the marker .demo-class that an earlier version's demo run left there")
        raise GradingError(
            f"{course.submitted} holds {' and '.join(why)}"
            + (f", beside {len(others)} other student folder(s) ({', '.join(others[:6])}"
               f"{', ...' if len(others) > 6 else ''})" if others else "")
            + ": is this your class or the demo? Say which with --demo:\n"
            f"  --demo no   grade every folder in {course.submitted} as your class, as it is (move the demo "
            "students' folders out first if they are not your students; delete .demo-class if you like)\n"
            f"  --demo yes  grade the demo class in {DEMO_ROOT}, its own course; {course.submitted} is not touched\n"
            "Nothing in submitted/ is ever deleted or rewritten by grading.")
    return False


def prepare_demo(course: Course, assignments: list[str]) -> list[str]:
    """(Re)generate the demo class into the demo course's own submitted/ (``course``, which must be
    ``DEMO_ROOT``) for the assignments that have a demo module. The folder is the
    generator's alone: it is rewritten on every run, with the same bytes for the same release, so
    ``--resume`` (which compares content) keeps what was graded."""
    if os.path.abspath(course.root) != os.path.abspath(DEMO_ROOT):
        raise GradingError(f"refusing to write the demo class outside {DEMO_ROOT} (course root {course.root})")
    if os.path.isdir(course.submitted):
        shutil.rmtree(course.submitted)
    os.makedirs(course.submitted)
    done = []
    for a in assignments:
        if a in demo.assignments_with_demo():
            demo.generate(a, course.submitted, release_dir=os.path.join(course.root, "release"),
                          timestamp=demo.FIXED_TIMESTAMP)
            done.append(a)
    return done


def register_students(students: list[str]) -> None:
    """Every student with a folder gets a gradebook row, so the export lists them even when
    nothing of theirs could be graded (an empty folder, a file that is not a notebook)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url()) as gb:
        for s in students:
            gb.update_or_create_student(s)


def roster_students(course: Course, use_demo: bool = False) -> list[str]:
    """The nbgrader ids of the course's roster (``roster.csv`` in the course folder, read as ``grading.lms``
    reads it, ``COURSE_ROSTER_MATCH`` naming an LMS export's column), or none when there is no roster (the demo
    class: its students are its folders). A roster that cannot be read is reported and left out of grading
    (its error is the report's LMS step's too)."""
    from grading import lms

    path = os.path.join(course.root, "roster.csv")
    if use_demo or not os.path.isfile(path):
        return []
    try:
        return sorted(lms.read_roster(path))  # an LMS export: matched on COURSE_ROSTER_MATCH
    except lms.RosterError as err:
        log(f"[roster] WARNING: {err}; the class is the folders in submitted/ alone")
        return []


def _real_dir(path: str) -> bool:
    """A directory itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def submissions(course: Course, assignment: str) -> list[str]:
    if not _real_dir(course.submitted):
        return []
    return sorted(s for s in os.listdir(course.submitted)
                  if _real_dir(os.path.join(course.submitted, s))
                  and _real_dir(course.task_folder("submitted", s, assignment)))


# intake: submissions are data, and every notebook is accounted for (grading/intake.py)
intake = intake_mod.intake


def read_result(course: Course, assignment: str, student: str) -> dict | None:
    path = os.path.join(course.results, assignment, f"{student}.json")
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _task_done(course: Course, assignment: str, student: str) -> bool:
    """Graded already, from the same submission and the same source notebooks, by the same grader and
    checks (compared by content, a sha256 of their bytes: ``worker.content_hashes``), and not stopped by
    the grader's own failure or an interrupt. A result written before issue 40 (no hashes) or by an older
    grader (issue 57: no or another ``grader_hash``) is graded again."""
    from grading import worker

    result = read_result(course, assignment, student)
    if not result or not result.get("autograded") or result.get("grader_fault") or result.get("interrupted"):
        return False
    if not os.path.isdir(os.path.join(course.root, "autograded", student, assignment)):
        return False
    now = worker.content_hashes(course, assignment, student)
    return all(result.get(k) is not None and result.get(k) == v for k, v in now.items())


def _feedback_current(course: Course, assignment: str, student: str) -> bool:
    """The submission's feedback pages were written for its latest grading: its result does not record a
    failed feedback step, and each autograded notebook has its page, written after it (a page left by an
    earlier run, when a full disk stopped the new one, is stale: ``--resume`` grades it again)."""
    result = read_result(course, assignment, student) or {}
    if result.get("feedback_ok") is False:
        return False
    graded = os.path.join(course.root, "autograded", student, assignment)
    pages = os.path.join(course.root, "feedback", student, assignment)
    try:
        notebooks = [f for f in os.listdir(graded) if f.endswith(".ipynb")]
        for f in notebooks:
            page = os.path.join(pages, f[:-6] + ".html")
            if os.path.getmtime(page) < os.path.getmtime(os.path.join(graded, f)):
                return False
    except OSError:
        return False
    return True


def _remove_stale_pages(course: Course, tasks: list[tuple[str, str]]) -> list[str]:
    """Remove the feedback pages older than their autograded notebook (an earlier grading's score); generated
    output only, never anything in submitted/. Returns the pages removed."""
    removed = []
    for a, s in tasks:
        graded = os.path.join(course.root, "autograded", s, a)
        pages = os.path.join(course.root, "feedback", s, a)
        if not (_real_dir(graded) and _real_dir(pages)):
            continue
        for f in sorted(os.listdir(graded)):
            page = os.path.join(pages, f[:-6] + ".html")
            try:
                if f.endswith(".ipynb") and os.path.getmtime(page) < os.path.getmtime(os.path.join(graded, f)):
                    os.remove(page)
                    removed.append(page)
            except OSError:
                continue
    return removed


# the score nbgrader's feedback template prints under a page's title: "<h4>attention (Score: 6.0 / 11.0)</h4>"
_PAGE_SCORE = re.compile(r"\(Score: (-?\d+(?:\.\d+)?) / (-?\d+(?:\.\d+)?)\)</h4>")


def page_score(path: str) -> tuple[float, float] | None:
    """(score, maximum) a feedback page shows for its notebook, or None when it shows none that can be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            m = _PAGE_SCORE.search(fh.read(2_000_000))  # the title comes after the page's CSS (~125 KB)
    except OSError:
        return None
    return (float(m.group(1)), float(m.group(2))) if m else None


def _gradebook_scores(tasks: list[tuple[str, str]]) -> dict:
    """{(assignment, student, notebook): (score, max_score)} the gradebook holds now for the tasks (an empty dict
    when there is no gradebook yet: one is never created here)."""
    from nbgrader.api import Assignment, Grade, Gradebook, Notebook, SubmittedAssignment, SubmittedNotebook
    from sqlalchemy import func

    url = db_url()
    if url.startswith("sqlite:///") and not os.path.isfile(url[len("sqlite:///"):].split("?", 1)[0]):
        return {}
    wanted = set(tasks)
    out = {}
    try:
        with Gradebook(url) as gb:
            # one query (a submitted notebook's score and maximum are the sums of its grades', as nbgrader's)
            rows = (gb.db.query(Assignment.name, SubmittedAssignment.student_id, Notebook.name,
                                func.sum(Grade.score), func.sum(Grade.max_score))
                    .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
                    .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                    .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                    .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
                    .filter(Assignment.name.in_(sorted({a for a, _ in wanted})))
                    .group_by(Assignment.name, SubmittedAssignment.student_id, Notebook.name).all())
    except Exception as err:  # noqa: BLE001 - a check of the pages only: the grading run reports the gradebook
        log(f"[resume] could not compare the feedback pages with the gradebook ({type(err).__name__}: {err}); "
            "pages are compared by date only")
        return {}
    for a, s, nb, score, top in rows:
        if (a, s) in wanted:
            out[(a, s, nb)] = (float(score or 0.0), float(top or 0.0))
    return out


def _stale_against_gradebook(course: Course, tasks: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The tasks whose feedback page shows another score than the gradebook holds now (a hand grade given in
    the formgrader, a page left by an earlier grading: 6/11 on the page, 9/11 in grades.csv)."""
    shown = {}
    for a, s in tasks:
        pages = os.path.join(course.root, "feedback", s, a)
        try:
            names = [f for f in os.listdir(pages) if f.endswith(".html") and f != NOT_GRADED_PAGE]
        except OSError:
            continue
        for f in names:
            score = page_score(os.path.join(pages, f))
            if score is not None:
                shown[(a, s, f[:-len(".html")])] = score
    if not shown:
        return set()
    now = _gradebook_scores(sorted({(a, s) for a, s, _ in shown}))
    return {(a, s) for (a, s, nb), (score, top) in shown.items()
            if (a, s, nb) in now and (abs(round(now[(a, s, nb)][0], 2) - score) > 0.006
                                      or abs(round(now[(a, s, nb)][1], 2) - top) > 0.006)}


def _resumed(course: Course, tasks: list[tuple[str, str]], resume: bool, feedback: bool) -> list[tuple[str, str]]:
    """The tasks to (re)do: all, or with ``resume`` those without a current result (and, with feedback, current
    pages: written after their grading and showing the score the gradebook holds)."""
    if not resume:
        return list(tasks)
    kept = [t for t in tasks if _task_done(course, *t) and (not feedback or _feedback_current(course, *t))]
    stale = _stale_against_gradebook(course, kept) if feedback else set()
    if stale:
        log(f"[resume] {len(stale)} feedback page(s) show another score than the gradebook: written again: "
            + ", ".join(f"{a}/{s}" for a, s in sorted(stale)[:10]) + (" ..." if len(stale) > 10 else ""))
    done = set(kept) - stale
    return [t for t in tasks if t not in done]


SECOND_PASS_FACTOR = 3  # the cell and notebook time limits of the second pass, times the first pass's
def second_pass_env() -> dict:
    cell = int(os.environ.get("COURSE_CELL_TIMEOUT", "30"))
    notebook = int(os.environ.get("COURSE_NOTEBOOK_TIMEOUT", "600"))
    return {"COURSE_CELL_TIMEOUT": str(cell * SECOND_PASS_FACTOR),
            "COURSE_NOTEBOOK_TIMEOUT": str(notebook * SECOND_PASS_FACTOR)}


def _template(assignments: list[str]):
    """The run's template of warm kernels (``warm.shared``), where its kernels are the course sandbox."""
    if nbgrader_env()["COURSE_KERNEL"] != "course-sandbox":
        return contextlib.nullcontext({})
    return warm.shared(assignments)


class Interrupted(BaseException):
    """SIGINT or SIGTERM reached the grading command (a BaseException, as KeyboardInterrupt: no
    ``except Exception`` of the run swallows it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_INTERRUPT = {"at": None}  # when the first interrupt arrived (time.time()); results written after it are not kept


def _on_signal(signum, frame) -> None:
    if _INTERRUPT["at"] is not None:
        return  # already stopping: the cleanup finishes
    _INTERRUPT["at"] = time.time()
    raise Interrupted(signum)


def _stop_workers(proc: subprocess.Popen) -> None:
    """Kill a process group of the run (the workers': the supervisor and its forked workers, whose kernels
    and sandboxes die with them: PR_SET_PDEATHSIG, bwrap --die-with-parent; or an nbgrader command's) and
    wait until it is gone."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the group's other members (forked workers) are gone too
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _discard_interrupted(course: Course, tasks: list[tuple[str, str]], since: float) -> list[tuple[str, str]]:
    """Results written after the interrupt arrived may come from a kernel the stop killed: each is marked
    the grader's (``interrupted``), never the student's, and ``--resume`` grades it again."""
    marked = []
    for a, s in tasks:
        path = os.path.join(course.results, a, f"{s}.json")
        try:
            if os.path.getmtime(path) < since:
                continue
        except OSError:
            continue
        result = read_result(course, a, s) or {"assignment": a, "student": s}
        result.update(interrupted=True, autograde_ok=False,
                      grader_fault="the grading run was interrupted while this submission was graded")
        _write_json(path, result)
        marked.append((a, s))
    return marked


def _write_json(path: str, data: dict) -> None:
    tmp = path + f".tmp-{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, path)


# ------------------------------------------------------------------ the engines: who runs the graded tasks
# Two engines behind one interface (``autograde``, ``describe``, ``close``, ``kill``); the run's is _RUN["engine"].
# * DaskEngine (the default): one Dask task per submission on a LocalCluster of the workers, or on a running
#   scheduler's cluster (grading/cluster.py); the only engine that grades on more than this machine.
# * ForkedEngine: worker processes forked by grading/worker.py from one process after their shared imports.
#   It keeps its place because Dask is optional: a lean install (course_lib without the ``grade`` extra, no
#   ``distributed``) grades with it (``engine_for``: auto), ``--engine processes`` chooses it, and
#   tests/test_dask.py grades the same class on both and requires the same grades. On one machine the two
#   take about the same time (grading/docs/scale-out.md has the measurement).
class ForkedEngine:
    name = "processes"

    def autograde(self, course: Course, tasks: list[tuple[str, str]], workers: int, feedback: bool = True,
                  resume: bool = False, env_extra: dict | None = None) -> dict:
        return autograde_processes(course, tasks, workers, feedback=feedback, resume=resume, env_extra=env_extra)

    def describe(self, workers: int) -> str:
        return f"{workers} worker(s)"

    def close(self) -> None:
        pass  # the workers of each call are gone when it returns

    def kill(self) -> None:
        pass  # an interrupted call kills its own process group (autograde_processes)


class DaskEngine:
    name = "dask"

    def __init__(self, cluster):
        self.cluster = cluster

    @classmethod
    def start(cls, workers: int, scheduler: str | None, assignments: list[str]) -> DaskEngine:
        from grading import cluster

        try:
            return cls(cluster.Cluster(workers, cluster.scheduler_address(scheduler), log=log,
                                       assignments=assignments, kernel=nbgrader_env()["COURSE_KERNEL"]))
        except cluster.ClusterError as err:
            raise GradingError(str(err)) from err

    def autograde(self, course: Course, tasks: list[tuple[str, str]], workers: int, feedback: bool = True,
                  resume: bool = False, env_extra: dict | None = None) -> dict:
        return autograde_dask(self.cluster, course, tasks, workers, feedback=feedback, resume=resume,
                              env_extra=env_extra)

    def describe(self, workers: int) -> str:
        if self.cluster.local:
            return f"{workers} worker(s)"
        return f"the Dask scheduler's {len(self.cluster.client.scheduler_info().get('workers', {}))} worker(s)"

    def close(self) -> None:
        self.cluster.close()

    def kill(self) -> None:
        self.cluster.kill()  # its workers, their kernels and sandboxes: at once


def start_engine(opts: Options, tasks: list[tuple[str, str]]):
    """The run's engine (``opts.engine``, chosen by :func:`engine_for`); with nothing to grade, the forked
    workers' (which then start nothing)."""
    if opts.engine == "dask" and tasks:
        return DaskEngine.start(opts.workers, opts.scheduler, list(dict.fromkeys(a for a, _ in tasks)))
    return ForkedEngine()


def autograde_dask(dask_cluster, course: Course, tasks: list[tuple[str, str]], workers: int, feedback: bool = True,
                   resume: bool = False, env_extra: dict | None = None) -> dict:
    """One Dask task per submission (grading/cluster.py); this process records each result as it comes
    back (autograded notebooks, the gradebook, feedback, ``logs/results``). ``workers == 1`` (the second
    pass): one submission at a time, alone on the cluster."""
    from grading import cluster

    todo = _resumed(course, tasks, resume, feedback)
    for a, s in todo:
        for name in (f".claim-{s}", f"{s}.json"):
            p = os.path.join(course.results, a, name)
            if os.path.exists(p):
                os.remove(p)

    def store(a, s, result):
        os.makedirs(os.path.join(course.results, a), exist_ok=True)
        _write_json(os.path.join(course.results, a, f"{s}.json"), result)

    def sent(a, s):  # as the forked workers' claims: this submission is being graded
        os.makedirs(os.path.join(course.results, a), exist_ok=True)
        with open(os.path.join(course.results, a, f".claim-{s}"), "w") as fh:
            fh.write("dask\n")

    if todo:
        try:
            cluster.autograde(dask_cluster, todo, submitted=course.submitted, db_url=db_url(),
                              kernel=nbgrader_env()["COURSE_KERNEL"], feedback=feedback,
                              held=intake_mod._read_held(course.root), env_extra=env_extra,
                              one_at_a_time=workers == 1, on_result=store, on_submit=sent, log=log)
        except cluster.ClusterError as err:
            raise GradingError(str(err)) from err
    results = {}
    for a, s in tasks:
        result = read_result(course, a, s)
        results[(a, s)] = result if result is not None else {
            "assignment": a, "student": s, "autograde_ok": False,
            "error": "no result recorded (worker killed?); re-run with --resume"}
    return results


def autograde_processes(course: Course, tasks: list[tuple[str, str]], workers: int, feedback: bool = True,
                        resume: bool = False, env_extra: dict | None = None) -> dict:
    """Run ``workers`` worker processes over the tasks; return {(assignment, student): result}.

    The workers run in a process group of their own, so a signal meant for the command (Ctrl-C in the
    terminal, SIGTERM) reaches only the command, which then stops the whole group (``Interrupted``)."""
    todo = _resumed(course, tasks, resume, feedback)
    for a, s in todo:  # fresh claims and results for the tasks to (re)do
        for name in (f".claim-{s}", f"{s}.json"):
            p = os.path.join(course.results, a, name)
            if os.path.exists(p):
                os.remove(p)
    if todo:
        arg_tasks = [f"{a}/{s}" for a, s in todo]
        cmd = [sys.executable, "-m", "grading.worker", "--results", course.results, *arg_tasks]
        if not feedback:
            cmd.append("--no-feedback")
        # one template of warm kernels for all the workers (grading/kernel/warm.py), importing while they start
        # the workers are forked from one process, after the imports they share (grading.worker --workers)
        cmd += ["--workers", str(max(1, min(workers, len(todo))))]
        with _template([a for a, _ in todo]) as warm_env:
            env = {**nbgrader_env(), **warm_env, **(env_extra or {}), "COURSE_GRADER_PID": str(os.getpid())}
            proc = subprocess.Popen(cmd, cwd=REPO_DIR, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            try:
                err = _wait_with_progress(course, proc, todo)
            except BaseException:
                _stop_workers(proc)
                _discard_interrupted(course, todo, _INTERRUPT["at"] or time.time())
                raise
        if proc.returncode != 0:
            raise GradingError(f"autograde worker failed:\nworkers (process {proc.pid}) exited "
                               f"{proc.returncode}: {err[-2000:]}")
    results = {}
    for a, s in tasks:
        result = read_result(course, a, s)
        if result is not None:
            results[(a, s)] = result
        else:
            results[(a, s)] = {"assignment": a, "student": s, "autograde_ok": False,
                               "error": "no result recorded (worker killed?); re-run with --resume"}
    return results


def _wait_with_progress(course: Course, proc: subprocess.Popen, todo: list[tuple[str, str]]) -> str:
    """Wait for the forked workers (their stderr read by a thread) while showing the run's progress
    (grading/progress.py) from what they write: a claim file when a submission starts, its result when it is
    done. Returns their stderr."""
    import threading

    from grading.progress import Progress

    out: dict = {}
    reader = threading.Thread(target=lambda: out.update(err=proc.communicate()[1]), daemon=True)
    reader.start()
    progress = Progress({a: sum(1 for t in todo if t[0] == a) for a in dict.fromkeys(a for a, _ in todo)})
    left = list(todo)
    try:
        while left:
            ended = proc.poll() is not None  # then one last look: results written just before the end
            for a, s in list(left):
                if os.path.exists(os.path.join(course.results, a, f".claim-{s}")):
                    progress.started(a)
                result = read_result(course, a, s) if os.path.exists(course.result_path(a, s)) else None
                if result is not None:
                    left.remove((a, s))
                    progress.finished(a, failed=bool(result.get("grader_fault") or not result.get("autograde_ok")))
            if ended:
                break
            time.sleep(0.5)
        reader.join()
    finally:
        progress.close()
    return out.get("err") or ""


def read_grades(path: str) -> dict:
    """{(assignment, student): (score, max_score)} from a grades CSV (nbgrader's export or grades.csv)."""
    out = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            out[(row["assignment"], row["student_id"])] = (float(row["score"] or 0), float(row["max_score"] or 0))
    return out


# ------------------------------------------------------------------ the class's grades, written safely
PATTERN_CHARS = "[]*?"  # nbgrader reads a student id as a file pattern (glob): these make it match others


def id_refusal(student: str) -> str | None:
    """Why a student id cannot be graded safely, or None. nbgrader globs ``submitted/<id>/<assignment>``:
    ``al[ei]ce`` would grade alice's notebook and remove her autograded folder, so such an id is refused
    before grading, by name."""
    bad = sorted({c for c in student if c in PATTERN_CHARS})
    if not bad:
        return None
    return (f"the student id {student!r} contains {' '.join(repr(c) for c in bad)}, which nbgrader reads as a "
            f"file pattern (it would grade another student's files); rename the folder submitted/{student} "
            "(and the student's id) without [ ] * ? and grade again")


def apply_findings(statuses: dict, findings: list[dict]) -> dict:
    """Merge findings about submissions (dicts with ``student, assignment, kind, message, fix``, e.g. kind
    'missing', 'unreadable', 'misnamed', 'extra') into ``{(assignment, student): status}``; returns it.

    A finding of a submission that was graded keeps 'graded' in front; one of a submission that was not
    becomes its reason: e.g. ``not graded: missing: no submission for 06_bpe (fix: ...)``."""
    for f in findings:
        key = (f["assignment"], f["student"])
        note = f"{f['kind']}: {f['message']}" + (f" (fix: {f['fix']})" if f.get("fix") else "")
        current = statuses.get(key)
        if current is None or current.startswith("not graded: no submission"):
            statuses[key] = f"not graded: {note}"
        elif note not in current:
            statuses[key] = f"{current}; {note}"
    return statuses


def _kept_rows(path: str, students: list[str], assignments: list[str]) -> tuple[list[str], list[dict]]:
    """(fields, rows) of the grades.csv at ``path`` for the other assignments than ``assignments``, of the
    students in ``students``: what a run that graded only some assignments leaves as it was."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            fields = list(reader.fieldnames or [])
            rows = [r for r in reader if r.get("assignment") not in assignments and r.get("student_id") in students]
    except (OSError, UnicodeDecodeError, csv.Error):
        return [], []
    return (fields, rows) if {"assignment", "student_id"} <= set(fields) else ([], [])


def write_grades_csv(export: str, students: list[str], assignments: list[str], statuses: dict,
                     out: str, keep_others: bool = False) -> dict:
    """Write grades.csv from nbgrader's export: exactly the rows of ``students`` x ``assignments`` (the
    class graded, whatever else the gradebook holds), with a ``status`` column. With ``keep_others`` (a run
    of some assignments, ``--assignment``), the previous file's rows of the other assignments stay, for the
    students of the class (issue 66.3: a partial regrade never drops another lesson's rows). Written beside
    the old file and swapped in (``os.replace``), so a failure leaves the previous grades.csv intact. Returns
    {(assignment, student): (score, max_score)} of ``assignments``."""
    from grading import csvsafe

    with open(export, newline="") as fh:
        reader = csv.DictReader(fh)
        fields = list(reader.fieldnames or [])
        rows = {(r["assignment"], r["student_id"]): r for r in reader}
    if "status" not in fields:
        fields.append("status")
    kept_fields, kept = _kept_rows(out, students, assignments) if keep_others else ([], [])
    fields += [f for f in kept_fields if f not in fields]
    max_of = {a: r["max_score"] for (a, _), r in rows.items()}
    grades, lines = {}, []
    for a in assignments:
        for s in students:
            row = dict(rows.get((a, s)) or {k: "" for k in fields})
            if (a, s) not in rows:  # not in the gradebook (an id refused before grading)
                row.update(assignment=a, student_id=s, score="0.0", raw_score="0.0", max_score=max_of.get(a, "0.0"))
            row["status"] = statuses.get((a, s), "graded")
            lines.append(row)
            grades[(a, s)] = (float(row["score"] or 0), float(row["max_score"] or 0))
    if kept:  # in the file's order: assignment by assignment (lesson order), then student
        order = {s: i for i, s in enumerate(students)}
        lines = sorted(lines + [{f: r.get(f, "") for f in fields} for r in kept],
                       key=lambda r: (r["assignment"], order.get(r["student_id"], len(order))))
    tmp = f"{out}.new-{os.getpid()}"
    try:
        with open(tmp, "w", newline="") as fh:
            writer = csvsafe.dict_writer(fh, fields)  # student text escaped, formulas neutralised (issue 57)
            writer.writeheader()
            writer.writerows(lines)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise GradingError(f"could not write {out}: {err.strerror or err} ({type(err).__name__}); "
                           "the previous grades.csv is unchanged") from err
    return grades


@contextlib.contextmanager
def course_lock(root: str):
    """One grading run at a time per course folder: an exclusive ``flock`` on ``root/.grading.lock``,
    which holds the run's PID. The kernel releases the lock when its holder dies however it dies, so a
    lock left by a dead run is simply taken over. A second run stops at once, naming the first."""
    import fcntl

    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, LOCK_NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise GradingError(f"another grading run (PID {holder}) holds this course ({root}); wait for it to "
                           f"finish, or stop it (kill {holder}) and re-run with --resume") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    try:
        yield path
    finally:
        os.ftruncate(fd, 0)
        os.close(fd)  # releases the lock


def check_writable(course: Course) -> None:
    """Before anything is graded: every folder the run writes, and the SQLite gradebook, can be written.
    Otherwise the run stops naming the cause, the earlier results untouched (a read-only gradebook would
    otherwise fail every submission, one by one)."""
    for folder in (course.root, os.path.join(course.root, "autograded"), os.path.join(course.root, "feedback"),
                   os.path.join(course.root, "logs"), course.results, os.path.join(course.root, "release")):
        try:
            os.makedirs(folder, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=folder)
            os.close(fd)
            os.remove(probe)
        except OSError as err:
            raise GradingError(f"cannot write {folder}: {err.strerror or err} ({type(err).__name__}); nothing was "
                               "graded and the previous results are unchanged") from err


def print_table(assignments, students, grades, expected, results) -> list[str]:
    """Print students x assignments; return the demo mismatches."""
    mismatches = []
    width = max([len(s) for s in students] + [7])
    header = "student".ljust(width) + "".join(f"  {a:>14s}" for a in assignments) + "     total"
    log(header)
    log("-" * len(header))
    for s in students:
        cells, total, total_max = [], 0.0, 0.0
        for a in assignments:
            score, max_score = grades.get((a, s), (0.0, 0.0))
            total += score
            total_max += max_score
            mark = ""
            if expected and s in expected.get(a, {}):
                ok = abs(expected[a][s] - score) < 1e-9
                mark = " ok" if ok else " !!"
                if not ok:
                    mismatches.append(f"{a}/{s}: got {score:g}, expected {expected[a][s]:g}")
            cells.append(f"  {f'{score:g}/{max_score:g}{mark}':>14s}")
        log(s.ljust(width) + "".join(cells) + f"  {total:g}/{total_max:g}")
    return mismatches


def prune_feedback(course: Course, students: list[str]) -> list[str]:
    """feedback/ holds exactly the class's pages: a generated folder of a student who is not in submitted/
    (an earlier run's class, the demo students of versions before issue 40) is removed. Only generated
    output is removed here, never anything in submitted/."""
    folder = os.path.join(course.root, "feedback")
    if not _real_dir(folder):
        return []
    keep = set(students)
    stale = sorted(n for n in os.listdir(folder) if n not in keep and _real_dir(os.path.join(folder, n)))
    for name in stale:
        shutil.rmtree(os.path.join(folder, name))
    return stale


NOT_GRADED_PAGE = "not-graded.html"


def write_not_graded_pages(course: Course, statuses: dict) -> list[str]:
    """A feedback page for each submission that was not graded (missing, unreadable, misnamed, a refused
    id): ``feedback/<student>/<assignment>/not-graded.html`` says why and what to do, so the student
    hears it as a graded student hears their feedback. It replaces that folder's earlier pages (generated
    output only; nothing in submitted/ is touched). Every text is escaped. Returns the pages written."""
    import html

    written = []
    for (a, s), status in sorted(statuses.items()):
        if not status.startswith("not graded"):
            continue
        folder = os.path.join(course.root, "feedback", s, a)
        if os.path.lexists(folder):
            shutil.rmtree(folder) if _real_dir(folder) else os.unlink(folder)
        os.makedirs(folder)
        reasons = status[len("not graded"):].lstrip(": ").split("; ")
        items = []
        for r in reasons:
            text, _, fix = r.partition(" (fix: ")
            items.append(f"<li>{html.escape(text)}" + (f"<br><b>What to do:</b> {html.escape(fix.rstrip(')'))}"
                                                        if fix else "") + "</li>")
        page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(a)}: not graded"
                f"</title></head><body><h1>{html.escape(a)}: not graded</h1><p>Student: {html.escape(s)}. "
                "Your submission for this assignment could not be graded, so it scores 0 for now:</p>"
                f"<ul>{''.join(items)}</ul><p>Once it is fixed, your instructor grades it again "
                "(<code>python -m grading grade --student ID</code>).</p></body></html>")
        path = os.path.join(folder, NOT_GRADED_PAGE)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(page)
        written.append(path)
    return written


_RUN: dict = {}  # the run's course, tasks and engine: what an interrupt stops and reports


def grade(opts: Options) -> int:
    """Grade a class; every temporary folder of the run (kernels' sockets, preflight) lives in one
    private folder under TMPDIR that is removed at the end, so a run leaves nothing in /tmp.

    SIGINT and SIGTERM stop the run: the workers' process group (workers, kernels, sandboxes) is killed
    and waited for, results written after the signal are marked the grader's, the private folder is
    removed, and the command says what was finished and how to resume; exit 128 + the signal's number."""
    run_tmp = tempfile.mkdtemp(prefix="course-grading-")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = run_tmp, run_tmp
    _INTERRUPT["at"] = None
    _RUN.clear()
    handlers = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    # each kernel's threads: the cores shared among this machine's workers (the template, the workers and
    # their kernels inherit it; a Dask scheduler's workers keep their own environment)
    with launcher.kernel_threads_set(opts.workers):
        try:
            return _grade(opts)
        except Interrupted as stop:
            if _RUN.get("engine") is not None:
                _RUN.pop("engine").kill()
            _report_interrupt(stop)
            return 128 + stop.signum
        finally:
            if _RUN.get("engine") is not None:
                _RUN.pop("engine").close()
            if _INTERRUPT["at"] is None:
                _INTERRUPT["at"] = time.time()  # a signal from now on only waits for the cleanup
            if saved[0] is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = saved[0]
            tempfile.tempdir = saved[1]
            remove_run_folder(run_tmp)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)


def remove_run_folder(folder: str, wait: float = 5.0) -> bool:
    """Remove the run's private temporary folder. After an interrupt, processes of the run that outlive
    the killed workers for a moment (a kernel's launcher and its output relay, ended by their parent's
    death) may still be removing their own files and the IPC folder's tmpfs there, so one ``rmtree``
    could meet a folder that is not empty yet: tried again (and any tmpfs left mounted under it
    unmounted) until it is gone, for at most ``wait`` seconds. True when it is gone."""
    deadline = time.monotonic() + wait
    while True:
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.exists(folder) or time.monotonic() > deadline:
            return not os.path.exists(folder)
        try:
            with open("/proc/self/mountinfo") as fh:
                mounts = [line.split()[4] for line in fh]
        except OSError:
            mounts = []
        for point in sorted((m for m in mounts if m.startswith(folder.rstrip("/") + "/")), reverse=True):
            launcher.release_ipc_folder(point)
        time.sleep(0.1)


def _report_interrupt(stop: Interrupted) -> None:
    tasks = _RUN.get("tasks") or []
    course = _RUN.get("course") or Course.from_env()
    done = [t for t in tasks if _task_done(course, *t)]
    left = [t for t in tasks if t not in done]
    log("")
    log(f"[interrupted] {stop.args[0]}: stopped the workers, their kernels and sandboxes; nothing of the run "
        "is left running or in the temporary folder")
    if tasks:
        log(f"[interrupted] {len(done)} of {len(tasks)} submission(s) graded and kept"
            + (f"; not graded yet: {', '.join(f'{a}/{s}' for a, s in left[:10])}"
               f"{' ...' if len(left) > 10 else ''}" if left else ""))
    else:
        log("[interrupted] before grading started: nothing was graded")
    log(f"[interrupted] {os.path.relpath(course.grades_csv, REPO_DIR)} was not updated by this run")
    args = [a for a in sys.argv[1:] if a != "--resume"] if sys.argv[1:2] == ["grade"] else ["grade"]
    if _RUN.get("demo") and "--demo" not in args:
        args += ["--demo", "yes"]
    log(f"[interrupted] resume with: python -m grading {' '.join(args)} --resume "
        "(grades only what has no result from the same files)")


def _grade(opts: Options) -> int:
    t0 = time.perf_counter()
    preflight.check_assignments(opts.assignments)
    course = Course.from_env()
    use_demo = choose_class(course, opts.demo)
    if use_demo:
        course = Course(DEMO_ROOT)
        # the processes this run starts (nbgrader's commands and config, the workers) read the course root here
        os.environ["COURSE_ROOT"] = course.root
    _RUN["demo"], _RUN["course"] = use_demo, course
    with course_lock(course.root):
        return _grade_locked(opts, course, use_demo, t0)


@dataclasses.dataclass
class Run:
    """What the phases of one grading run (:func:`_grade_locked`) share, filled in the order they run."""
    opts: Options
    course: Course
    use_demo: bool
    t0: float
    expected: dict = dataclasses.field(default_factory=dict)  # the demo class's expected scores
    students: list = dataclasses.field(default_factory=list)  # the class: folders, links and roster students
    refused: dict = dataclasses.field(default_factory=dict)  # {student: why their id cannot be graded}
    assignments: list = dataclasses.field(default_factory=list)  # the class's assignments (rows of grades.csv)
    class_tasks: list = dataclasses.field(default_factory=list)  # every (assignment, student) submitted
    tasks: list = dataclasses.field(default_factory=list)  # those this run grades (--student: some)
    findings: list = dataclasses.field(default_factory=list)  # intake's findings
    dropped: dict = dataclasses.field(default_factory=dict)  # {task: entries intake dropped}
    held: set = dataclasses.field(default_factory=set)  # tasks whose notebook intake held back
    results: dict = dataclasses.field(default_factory=dict)  # {task: result}
    statuses: dict = dataclasses.field(default_factory=dict)  # {task: status column of grades.csv}
    grades: dict = dataclasses.field(default_factory=dict)  # {task: (score, max_score)}
    report_failed: int = 0  # 1 when the class report could not be built (grades.csv stands)

    def concerns(self, student: str) -> bool:
        """Is this student's part of what this run reports (all, or those of ``--student``)?"""
        return not self.opts.students or student in self.opts.students


def _grade_locked(opts: Options, course: Course, use_demo: bool, t0: float) -> int:
    """The phases of a grading run, in order; each logs what it did, and raises GradingError when the
    machinery fails."""
    run = Run(opts, course, use_demo, t0)
    _check_machine(run)
    _release(run)
    _find_class(run)
    _intake(run)
    if not run.class_tasks:
        log("[autograde] nothing submitted: no tasks")
        return 0
    _autograde(run)
    _stop_on_grader_faults(run)
    _write_grades(run)
    mismatches = _report(run)
    _stop_on_failed_feedback(run)
    return _demo_verdict(run, mismatches)


def _check_machine(run: Run) -> None:
    """The kernel (the students' edition of course_lib, the sandbox's kernelspec) and the course folder."""
    opts = run.opts
    if opts.kernel == launcher.KERNEL_NAME:
        from grading import edition

        log(f"[edition] the grading kernels import the students' edition of course_lib, built for this run in "
            f"{edition.ensure()} (grading/edition.py); the verifier alone uses the repository's")
        launcher.install_kernelspec()
        ok, why = launcher.bwrap_works()
        if not ok:
            log(f"[preflight] WARNING: no isolation, resource limits only: {why}")
    python = preflight.check_kernel(opts.kernel)
    status = preflight.check_course_lib_in_kernel(opts.kernel)
    log(f"[preflight] kernel {opts.kernel!r} ({python}): {status}")
    check_writable(run.course)


def _release(run: Run) -> None:
    """Every assignment released again, so the gradebook holds the current tests."""
    compared = 0
    release_assignments(run.course, run.opts.assignments, run.use_demo)
    for a in run.opts.assignments:
        compared += preflight.check_gradebook_matches_source(db_url(), a)
    log(f"[release] regenerated {len(run.opts.assignments)} assignment(s) into {run.course.release}; "
        f"the gradebook's {compared} test/locked cells equal the source")


def _find_class(run: Run) -> None:
    """The class (the demo class generated, or the folders in submitted/ as they are, and the roster), the ids
    that cannot be graded, the class's assignments and the tasks this run grades."""
    opts, course = run.opts, run.course
    if run.use_demo:
        done = prepare_demo(course, opts.assignments)
        run.expected = {a: e for a, e in demo.expected_scores().items() if a in done}
        log(f"[submissions] generated the demo class ({', '.join(demo.STUDENTS)}) for {len(done)} assignment(s) "
            f"in {course.submitted} (its own course: gradebook, feedback and grades.csv in {course.root})")
    else:
        log(f"[submissions] grading the class in {course.submitted} as it is")

    linked = intake_mod.linked_students(course.submitted)  # a link as a student folder: a row, a page, a report line
    if _real_dir(course.submitted):
        for name in sorted(os.listdir(course.submitted)):
            if not name.startswith(".") and name not in linked and not _real_dir(os.path.join(course.submitted, name)):
                log(f"[intake] ignored submitted/{name}: not a folder (a file), not graded")
    # every roster student (grading/roster.csv: this course's roster or the LMS's gradebook export) has a row, a
    # page and a report line, a folder or not: one without is "no submission", never left out
    students = sorted(set(student_folders(course.submitted)) | set(linked) | set(roster_students(course, run.use_demo)))
    run.students = students
    run.refused = {s: why for s in students if (why := linked.get(s) or id_refusal(s))}
    for s, why in run.refused.items():
        log(f"[intake] {s}: not graded: {why}")
    # the class's assignments: those listed with --assignment, else those someone submitted (so the totals
    # are not out of assignments nobody was given)
    run.assignments = list(opts.assignments) if opts.listed else \
        [a for a in opts.assignments if submissions(course, a)]
    run.class_tasks = [(a, s) for a in opts.assignments for s in submissions(course, a) if s not in run.refused]
    if opts.students:
        unknown = [s for s in opts.students if s not in students]
        if unknown:
            raise GradingError(f"--student {', '.join(unknown)}: no such folder in {course.submitted} "
                               f"(students: {', '.join(students[:20])}{' ...' if len(students) > 20 else ''})")
        run.tasks = [(a, s) for a, s in run.class_tasks if s in opts.students]
        log(f"[submissions] regrading {', '.join(opts.students)}: {len(run.tasks)} submission(s)")
    else:
        run.tasks = run.class_tasks
    _RUN["tasks"] = run.tasks


def _intake(run: Run) -> None:
    """Submissions are data (grading/intake.py): every notebook in a folder accounted for, what is over the
    bounds held back; then every student of the class gets a gradebook row."""
    run.findings = intake_mod.intake_class(run.class_tasks, run.opts.assignments, submitted=run.course.submitted,
                                           intake_dir=run.course.intake_dir)
    for f in run.findings:
        if not run.concerns(f["student"]):
            continue
        log(f"[intake] {f['assignment']}/{f['student']}: {f['kind']}: {f['message']}")
        if f["kind"] == "dropped":
            run.dropped.setdefault((f["assignment"], f["student"]), []).extend(f["entries"])
    run.held = intake_mod.held_tasks(run.findings)  # the notebook itself is over the bound: nothing to grade
    run.tasks = [t for t in run.tasks if t not in run.held]
    try:
        register_students(sorted({s for _, s in run.class_tasks}))
    except Exception as err:  # noqa: BLE001 - the gradebook is the grader's: name the cause and stop
        raise GradingError("could not write the gradebook: "
                           + (failures.machine_fault(f"{type(err).__name__}: {err}") or f"{type(err).__name__}: {err}")
                           + "; nothing was graded and the previous results are unchanged") from err


def _autograde(run: Run) -> None:
    """The tasks on the run's engine; then what timed out (or was not graded) while N workers shared the
    machine, once more, alone, with SECOND_PASS_FACTOR x the time limits: the grader's load is never the
    student's, and that verdict is the one recorded."""
    opts, course = run.opts, run.course
    t1 = time.perf_counter()
    engine = _RUN["engine"] = start_engine(opts, run.tasks)
    run.results = engine.autograde(course, run.tasks, opts.workers, feedback=opts.feedback, resume=opts.resume)
    for key, what in run.dropped.items():
        if key in run.results:
            run.results[key]["problems"] = [f"intake dropped {w}" for w in what] + list(
                run.results[key].get("problems") or [])
    log(f"[autograde] {len(run.tasks)} submission(s) with {engine.describe(opts.workers)} in "
        f"{time.perf_counter() - t1:.1f} s")
    again = sorted(k for k, r in run.results.items() if needs_second_pass(r) and not r.get("grader_fault"))
    if not (again and opts.second_pass):
        return
    t2 = time.perf_counter()
    env = second_pass_env()
    run.results.update(engine.autograde(course, again, 1, feedback=opts.feedback, env_extra=env))
    for a, s in again:  # recorded, so a resumed run does not grade it a third time
        run.results[(a, s)]["second_pass"] = True
        path = course.result_path(a, s)
        if os.path.exists(path):
            _write_json(path, run.results[(a, s)])
    log(f"[second pass] {len(again)} submission(s) with no grade or a notebook timeout, graded again alone with "
        f"cells limited to {env['COURSE_CELL_TIMEOUT']} s, in {time.perf_counter() - t2:.1f} s: "
        + ", ".join(f"{a}/{s}" for a, s in again))


def _stop_on_grader_faults(run: Run) -> None:
    """A submission the grading machine failed (not the student) stops the run before grades.csv is written."""
    faults = sorted((k, r["grader_fault"]) for k, r in run.results.items() if r.get("grader_fault"))
    if not faults:
        return
    log("")
    log(f"[grader failure] {len(faults)} submission(s) could not be graded because the grading machine failed "
        "(not the students): no grade was recorded for them and grades.csv was not rewritten:")
    for (a, s), why in faults:
        log(f"  {a}/{s}: {why}")
    raise GradingError(f"the grading machine failed: {faults[0][1]}; fix it and re-run with --resume "
                       f"(the previous {os.path.relpath(run.course.grades_csv, REPO_DIR)} is unchanged)")


def _write_grades(run: Run) -> None:
    """grades.csv: exactly the class graded (every student) x its assignments, each with its status."""
    statuses = {}
    for a in run.assignments:
        for s in run.students:
            if s in run.refused:
                statuses[(a, s)] = "not graded: " + run.refused[s]
            elif (a, s) in run.held:
                continue  # its notebook was held by intake: the finding is its status (apply_findings)
            elif (a, s) in run.results:
                statuses[(a, s)] = status_of(run.results[(a, s)])
            elif (a, s) in run.class_tasks:
                statuses[(a, s)] = status_of(read_result(run.course, a, s))
            else:
                statuses[(a, s)] = f"not graded: no submission for {a}"
    run.statuses = apply_findings(statuses, run.findings)
    # a file of this run's own: two runs in two course folders at once never read each other's export
    with tempfile.TemporaryDirectory(prefix="course-export-") as folder:
        export = os.path.join(folder, "export.csv")
        export_gradebook(export)
        run.grades = write_grades_csv(export, run.students, run.assignments, run.statuses, out=run.course.grades_csv,
                                      keep_others=run.opts.listed)


def _report(run: Run) -> list[str]:
    """The table, the problems by name, the feedback pages of what was not graded, the class report; returns
    the demo class's mismatches with its expected scores."""
    opts, course = run.opts, run.course
    log("")
    mismatches = print_table(run.assignments, run.students, run.grades, run.expected, run.results)
    problems = [(k, failure_reason(r)) for k, r in sorted(run.results.items()) if failure_reason(r)]
    problems += [((a, s), f"not graded: {run.refused[s]}") for a in run.assignments for s in run.students
                 if s in run.refused]
    log("")
    if problems:
        log(f"[report] {len(problems)} submission(s) with problems (integrity findings, crashes, timeouts, "
            "or not gradable; each scored on what ran):")
        for (a, s), why in problems:
            log(f"  {a}/{s}: {why}")
    for line in intake_mod.report_lines([f for f in run.findings if run.concerns(f["student"])]):
        log(line)
    stale = prune_feedback(course, run.students) if opts.feedback else []
    if opts.feedback:
        pages = write_not_graded_pages(course, {k: v for k, v in run.statuses.items() if run.concerns(k[1])})
        if pages:
            log(f"[report] {len(pages)} student page(s) say why a submission was not graded and what to do: "
                + ", ".join(os.path.relpath(p, course.root) for p in pages[:5]) + (" ..." if len(pages) > 5 else ""))
    if stale:
        log(f"[report] removed the feedback pages of {len(stale)} student(s) not in this class (an earlier run's): "
            + ", ".join(stale[:10]) + (" ..." if len(stale) > 10 else ""))
    log(f"[report] grades: {os.path.relpath(course.grades_csv, REPO_DIR)}")
    if opts.feedback:
        log(f"[report] feedback: {os.path.relpath(course.feedback, REPO_DIR)}/<student>/<assignment>/<notebook>.html")
    from grading import report  # the class report, LMS files and similarity table (grading/report.py)

    run.report_failed = report.after_grading(log, root=course.root)
    log(f"[report] total time {time.perf_counter() - run.t0:.1f} s")
    return mismatches


def _stop_on_failed_feedback(run: Run) -> None:
    """Feedback the grader could not write stops the run (the grades stand), and no page of an earlier grading
    is left to show an old score."""
    failed = [(k, r.get("feedback_fault") or (r.get("feedback_error") or "")[-300:].strip())
              for k, r in sorted(run.results.items()) if r.get("feedback_ok") is False]
    if not failed:
        return
    stale_pages = _remove_stale_pages(run.course, [k for k, _ in failed])
    log(f"[feedback] FAILED for {len(failed)} submission(s) (the grader's failure; their grades are "
        "recorded, their feedback pages are not there"
        + (f"; {len(stale_pages)} page(s) of an earlier grading removed, so no student reads an old score"
           if stale_pages else "") + "; --resume writes them):")
    for (a, s), why in failed:
        log(f"  {a}/{s}: {why}")
    raise GradingError(f"feedback could not be written for {len(failed)} submission(s) (listed above); "
                       "fix the cause and re-run with --resume (or --student ID) to write it")


def _demo_verdict(run: Run, mismatches: list[str]) -> int:
    """The exit status: 1 when the demo class missed an expected score or the class report failed, else 0."""
    if run.expected:
        if mismatches:
            log("[demo] MISMATCH with the expected scores in grading/demo/:")
            for m in mismatches:
                log(f"  {m}")
            return 1
        log("[demo] every demo score equals its expected value (grading/demo/*.py)")
    return run.report_failed
