"""Grading a whole class of lesson 01: plain sequential nbgrader vs our workers (SQLite, PostgreSQL).

    python tests/benchmarks/bench_class_scale.py [--students 200] [--quick] [--workers 2]
                  [--cell-timeout 30] [--runs A,B,C,D] [--profile 4] [--out DIR] [--keep]

The class (``--students`` N, ``--quick`` = 24) is built from the demo generator's parts
(``grading.demo.build_submission``, ``solutions_from_source`` and the 01_attention demo
module's ``MISCONCEPTION`` / ``CRASH``), in a fixed cycle of 25 kinds:

* 13 ``correct``   the instructor's solutions
* 6 ``partial``    correct except one named misconception (attention without 1/sqrt(d_k))
* 3 ``blank``      the release notebook untouched
* 1 ``loop``       softmax cell loops forever (costs one per-cell timeout)
* 1 ``exit``       softmax cell calls ``os._exit(1)`` (the kernel dies; graded on what ran)
* 1 ``raise``      the torch attention cell raises at definition time

Runs, each in its own fresh course root, same submissions, in this order:

A. baseline: ``nbgrader autograde 01_attention --force --KernelManager.transport=tcp
   --Execute.kernel_name=python3 --Execute.shutdown_kernel=graceful``: one process, students one
   after another, no sandbox, nbgrader's default kernel shutdown; the course's nbgrader_config.py
   otherwise, so a dying kernel costs the same points as in our runs (plain ``Execute`` would
   drop the whole submission and the grades could not be compared);
B. ``grading.worker`` x W (default 2), SQLite gradebook, the ``course-sandbox`` kernel;
C. the same on PostgreSQL (a throwaway server from tests/pg.py, fsync on);
D. B with nbgrader's default ``Execute.shutdown_kernel = "graceful"`` (ask the kernel to shut
   down and wait for it) instead of the course's ``"immediate"`` (kill it once its notebook ran),
   to keep measuring what that setting is worth;
E. (only with ``--runs ...,E``) B with one compute thread per kernel (``OMP_NUM_THREADS=1`` etc.).

CPU time per run is read from a cpuacct cgroup that the run's processes join (root, cgroup v1),
else from RUSAGE_CHILDREN (which misses the sandboxed kernels). The speed-up of B over A is about
the ratio of "cores busy" (CPU seconds / wall seconds) when both spend the same CPU per student.

Workers run without feedback, as ``nbgrader autograde`` makes none. Every run's grades are
exported with ``nbgrader export`` and must be identical (exit status 1 otherwise).

``--profile K`` (default 4) then grades K students in one worker process with per-phase
timers (kernel launch, kernel ready, each cell, kernel shutdown, nbgrader's own work,
SaveAutoGrades' database writes) and measures the CPU cost of each import in the
notebook's setup cell in a fresh interpreter, to say WHERE the time goes.

Outputs (CSV) go to ``tests/benchmarks/out/`` (git-ignored) or ``--out``. Figures depend on
the machine's load: the script prints the load average before and after.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ASSIGNMENT = "01_attention"
NOTEBOOK = "attention.ipynb"

CYCLE = ["correct", "partial", "blank", "correct", "loop", "correct", "partial", "exit", "correct", "blank",
         "correct", "raise", "partial", "correct", "correct", "partial", "correct", "blank", "correct", "partial",
         "correct", "correct", "partial", "correct", "correct"]
assert len(CYCLE) == 25 and CYCLE.count("correct") == 13 and CYCLE.count("partial") == 6

EXIT_SOFTMAX = '''
import os

def softmax(x, axis=-1):
    """Defined, then the kernel is killed before the cell ends."""
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)

os._exit(1)
'''
RAISE_TORCH = "raise RuntimeError('this student broke the torch attention cell')\n"


# ---------------------------------------------------------------------------------------------- class


def kinds(n: int) -> list[str]:
    return [CYCLE[i % len(CYCLE)] for i in range(n)]


def student_ids(n: int) -> list[str]:
    return [f"st{i:03d}_{k}" for i, k in enumerate(kinds(n))]


def build_class(release_nb_path: str, n: int) -> dict:
    """{student_id: notebook} built with the demo generator's building blocks."""
    import nbformat

    sys.path.insert(0, REPO)
    from grading import NOTEBOOKS_DIR, demo

    spec = demo.load_spec(ASSIGNMENT)
    release = nbformat.read(release_nb_path, as_version=4)
    source = nbformat.read(os.path.join(NOTEBOOKS_DIR, ASSIGNMENT, NOTEBOOK), as_version=4)
    correct = demo.solutions_from_source(source)
    variants = {
        "correct": correct,
        "partial": {**correct, **spec.MISCONCEPTION},
        "blank": {},
        "loop": {**correct, **spec.CRASH},
        "exit": {**correct, "softmax_impl": EXIT_SOFTMAX},
        "raise": {**correct, "attention_torch_impl": RAISE_TORCH},
    }
    built = {k: demo.build_submission(release, r) for k, r in variants.items()}
    return {sid: built[kind] for sid, kind in zip(student_ids(n), kinds(n))}


def write_class(root: str, klass: dict) -> None:
    import nbformat

    for sid, nb in klass.items():
        dest = os.path.join(root, "submitted", sid, ASSIGNMENT)
        os.makedirs(dest, exist_ok=True)
        nbformat.write(nb, os.path.join(dest, NOTEBOOK))
        with open(os.path.join(dest, "timestamp.txt"), "w") as fh:
            fh.write("2025-01-01 12:00:00.000000 UTC")


# ---------------------------------------------------------------------------------------------- runs


def env_for(root: str, kernel: str, cell_timeout: int, db_url: str | None = None) -> dict:
    env = dict(os.environ, COURSE_ROOT=root, PYTHONPATH=REPO, COURSE_KERNEL=kernel,
               COURSE_CELL_TIMEOUT=str(cell_timeout), MPLBACKEND="Agg")
    env.pop("COURSE_DB_URL", None)
    if db_url:
        env["COURSE_DB_URL"] = db_url
    return env


def nbgrader(env: dict, *args: str, meter: "CpuMeter | None" = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=os.path.join(REPO, "grading"),
                          env=env, capture_output=True, text=True, preexec_fn=meter.join if meter else None)
    if proc.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def prepare_root(root: str, env: dict, klass: dict) -> None:
    os.makedirs(root, exist_ok=True)
    nbgrader(env, "generate_assignment", ASSIGNMENT, "--force")
    write_class(root, klass)


def export(env: dict, root: str) -> dict:
    path = os.path.join(root, "grades.csv")
    nbgrader(env, "export", "--to", path)
    with open(path, newline="") as fh:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(fh) if r["assignment"] == ASSIGNMENT}


def graded_errors(root: str, sid: str) -> list[str]:
    """'grade_id: ename: evalue' of every graded cell with an error in the autograded notebook."""
    import nbformat

    path = os.path.join(root, "autograded", sid, ASSIGNMENT, NOTEBOOK)
    if not os.path.exists(path):
        return [f"no autograded notebook at {path}"]
    out = []
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error" and (meta.get("grade") or meta.get("solution") or
                                                     meta.get("grade_id") == "setup"):
                out.append(f"{meta.get('grade_id')}: {o.get('ename')}: {str(o.get('evalue'))[:160]}")
    return out


def run_baseline(env: dict, meter: "CpuMeter | None" = None) -> float:
    return nbgrader(env, "autograde", ASSIGNMENT, "--force", "--KernelManager.transport=tcp",
                    "--Execute.kernel_name=python3", "--Execute.shutdown_kernel=graceful", meter=meter)


WORKER_WITH_CONFIG = """
import sys
from grading import worker
load = worker.load_api
def load_api():
    api = load()
    for key, value in {overrides!r}.items():
        section, name = key.split(".")
        setattr(api.config[section], name, value)
    return api
worker.load_api = load_api
sys.exit(worker.main(sys.argv[1:]))
"""


def run_workers(env: dict, root: str, students: list[str], workers: int, overrides: dict | None = None,
                meter: "CpuMeter | None" = None) -> tuple:
    results = os.path.join(root, "logs", "results")
    args = ["--no-feedback", "--results", results, *[f"{ASSIGNMENT}/{s}" for s in students]]
    if overrides:
        cmd = [sys.executable, "-c", WORKER_WITH_CONFIG.format(overrides=overrides), *args]
    else:
        cmd = [sys.executable, "-m", "grading.worker", *args]
    os.makedirs(results, exist_ok=True)
    logs = [open(os.path.join(root, "logs", f"worker-{i}.stderr"), "w+") for i in range(workers)]
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log,
                              preexec_fn=meter.join if meter else None) for log in logs]
    errors = []
    for p, log in zip(procs, logs):
        p.wait()
        if p.returncode != 0:
            log.seek(0)
            errors.append(f"worker exit {p.returncode}: {log.read()[-2000:]}")
        log.close()
    wall = time.perf_counter() - t0
    if errors:
        raise SystemExit("\n".join(errors))
    per = []
    for s in students:
        with open(os.path.join(results, ASSIGNMENT, f"{s}.json")) as fh:
            r = json.load(fh)
        per.append((s, r.get("seconds", float("nan")), r.get("worker_pid"), bool(r.get("autograded"))))
    return wall, per


def process_limit_hits(root: str) -> int:
    n = 0
    folder = os.path.join(root, "logs")
    for f in os.listdir(folder):
        if f.startswith("worker-") and f.endswith(".stderr"):
            with open(os.path.join(folder, f), errors="replace") as fh:
                for line in fh:
                    if "RLIMIT_NPROC" in line or "Resource temporarily unavailable" in line or \
                            "can't start new thread" in line:
                        n += 1
    return n


# Inherited by the kernel (the sandbox passes the environment through): one compute thread per
# kernel, as W workers on W cores already use every core.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def ensure_sandbox_kernel() -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec("course-sandbox")
    except NoSuchKernel:
        subprocess.run([sys.executable, "-m", "grading", "sandbox-install"], cwd=REPO, check=True)


# ---------------------------------------------------------------------------------------------- profile

PROFILER = r"""
import json, os, sys, time
t0 = time.perf_counter()
from grading import worker
from grading.course import Course
import nbclient
from nbgrader.converters.autograde import Autograde
from nbgrader.preprocessors import SaveAutoGrades
from grading.kernel.client import ResilientExecute
T = {}
def add(k, v):
    T[k] = T.get(k, 0.0) + v
def timed(cls, name, label):
    orig = getattr(cls, name)
    def f(self, *a, **kw):
        t = time.perf_counter()
        try:
            return orig(self, *a, **kw)
        finally:
            add(label, time.perf_counter() - t)
    setattr(cls, name, f)
timed(nbclient.NotebookClient, "start_new_kernel", "kernel launch (Popen)")
timed(nbclient.NotebookClient, "start_new_kernel_client", "kernel ready (python, ipykernel imports)")
timed(nbclient.NotebookClient, "_cleanup_kernel", "kernel shutdown")
timed(ResilientExecute, "preprocess", "execute: kernel + cells + shutdown")
timed(SaveAutoGrades, "preprocess", "SaveAutoGrades (gradebook writes)")
timed(Autograde, "start", "Autograde.start (everything)")
orig_cell = ResilientExecute.preprocess_cell
def cell(self, c, resources, index):
    t = time.perf_counter()
    try:
        return orig_cell(self, c, resources, index)
    finally:
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        add("cell: setup (imports torch, matplotlib, course_lib)" if gid == "setup" else "cells: all others",
            time.perf_counter() - t)
ResilientExecute.preprocess_cell = cell
add("worker: import grading + nbgrader (once per worker)", time.perf_counter() - t0)
overrides = json.loads(os.environ.get("BENCH_OVERRIDES", "{}"))
api = worker.load_api()
course = Course.from_env()
for key, value in overrides.items():
    section, name = key.split(".")
    setattr(api.config[section], name, value)
tasks = sys.argv[1:]
wall = time.perf_counter()
for task in tasks:
    a, s = task.split("/")
    t = time.perf_counter()
    worker.grade_one(course, api, a, s, feedback=False)
    add("grade_one (per student, total)", time.perf_counter() - t)
T["__wall__"] = time.perf_counter() - wall
T["__n__"] = len(tasks)
print("PROFILE " + json.dumps(T))
"""

IMPORT_COST = r"""
import json, resource, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
out = {}
def step(name, code):
    c, t = cpu(), time.perf_counter()
    exec(code, {})
    out[name] = (cpu() - c, time.perf_counter() - t)
step("ipykernel", "import ipykernel.kernelapp")
step("numpy", "import numpy")
step("torch", "import torch")
step("matplotlib.pyplot (Agg)", "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot")
step("course_lib.checks", "from course_lib import checks; import course_lib.checks.attention")
step("seaborn (imported by course_lib.plotting)", "import seaborn")
step("ipywidgets", "import ipywidgets")
step("course_lib.plotting (rest)", "from course_lib import plotting")
print("IMPORTS " + json.dumps(out))
"""


def profile(env: dict, students: list[str], overrides: dict | None = None) -> dict:
    env = dict(env, BENCH_OVERRIDES=json.dumps(overrides or {}))
    proc = subprocess.run([sys.executable, "-c", PROFILER, *[f"{ASSIGNMENT}/{s}" for s in students]],
                          cwd=REPO, env=env, capture_output=True, text=True)
    line = [x for x in proc.stdout.splitlines() if x.startswith("PROFILE ")]
    if proc.returncode != 0 or not line:
        raise SystemExit(f"profiler failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[0][len("PROFILE "):])


def import_costs(env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", IMPORT_COST], cwd=REPO, env=env, capture_output=True, text=True)
    line = [x for x in proc.stdout.splitlines() if x.startswith("IMPORTS ")]
    if proc.returncode != 0 or not line:
        raise SystemExit(f"import profiler failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[0][len("IMPORTS "):])


# ---------------------------------------------------------------------------------------------- main


class CpuMeter:
    """CPU seconds of one run's whole process tree: a cpuacct cgroup (v1, root) that every process
    of the run joins before exec, so kernels that bwrap re-parents are counted too. Without it,
    RUSAGE_CHILDREN (misses processes nobody waits for, e.g. inside the sandbox's PID namespace)."""

    BASE = "/sys/fs/cgroup/cpuacct"

    def __init__(self, name: str):
        self.path = os.path.join(self.BASE, f"bench-class-{os.getpid()}-{name}")
        try:
            os.mkdir(self.path)
            self.ok = True
        except OSError:
            self.ok = False
        self.start = children_cpu()

    def join(self) -> None:  # preexec_fn: runs in the child before exec
        if self.ok:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))

    def seconds(self) -> float:
        if self.ok:
            with open(os.path.join(self.path, "cpuacct.usage")) as fh:
                return int(fh.read()) / 1e9
        return children_cpu() - self.start

    def close(self) -> None:
        if self.ok:
            for _ in range(50):  # the last processes may still be exiting
                try:
                    os.rmdir(self.path)
                    return
                except OSError:
                    time.sleep(0.1)


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process tree so far: kernels are
    waited for by nbgrader / the workers, so their time is included."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="24 students (every kind at least once)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cell-timeout", type=int, default=30, help="per-cell timeout in seconds (course default 30)")
    parser.add_argument("--profile", type=int, default=4, help="students to profile phase by phase (0: skip)")
    parser.add_argument("--runs", default="A,B,C,D", help="which runs (A baseline, B SQLite, C PostgreSQL, "
                                                             "D graceful shutdown, E B + one thread per kernel)")
    parser.add_argument("--out", default=os.path.join(HERE, "out"))
    parser.add_argument("--keep", action="store_true", help="keep the course roots (printed) for inspection")
    args = parser.parse_args()
    n = 24 if args.quick else args.students
    runs = set(args.runs.split(","))
    if "A" not in runs:
        raise SystemExit("run A (the baseline) is needed for the ratios")
    os.makedirs(args.out, exist_ok=True)
    sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.dirname(HERE))  # tests/ for pg.py
    from importlib.metadata import version

    from grading.kernel import launcher

    ensure_sandbox_kernel()
    bwrap_ok, why = launcher.bwrap_works()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"nbgrader {version('nbgrader')}, sandbox: {'bwrap' if bwrap_ok else 'limits only (' + why + ')'}")
    print(f"load average at start: {loadavg()} (other processes share these cores: figures are noisy)")
    students = student_ids(n)
    counts = {k: kinds(n).count(k) for k in dict.fromkeys(CYCLE)}
    print(f"class: {n} students of {ASSIGNMENT}: " + ", ".join(f"{v} {k}" for k, v in counts.items())
          + f"; per-cell timeout {args.cell_timeout} s; {args.workers} workers")

    tmp = tempfile.mkdtemp(prefix="bench-class-")
    server = None
    timings, grades, per_student, cpu = {}, {}, {}, {}
    try:
        # A: the baseline, and the class built from its release
        root = os.path.join(tmp, "A")
        env = env_for(root, "python3", args.cell_timeout)
        os.makedirs(root)
        nbgrader(env, "generate_assignment", ASSIGNMENT, "--force")
        klass = build_class(os.path.join(root, "release", ASSIGNMENT, NOTEBOOK), n)
        write_class(root, klass)
        print(f"[A] plain nbgrader autograde, sequential, python3 kernel, SQLite ... ", end="", flush=True)
        meter = CpuMeter("A")
        timings["A"] = run_baseline(env, meter)
        cpu["A"] = meter.seconds()
        meter.close()
        grades["A"] = export(env, root)
        print(f"{timings['A']:.1f} s")

        plan = [("B", "grading.worker, course-sandbox, SQLite", None, None),
                ("C", "grading.worker, course-sandbox, PostgreSQL", "pg", None),
                ("D", "grading.worker, course-sandbox, SQLite, graceful kernel shutdown (nbgrader default)", None,
                 {"Execute.shutdown_kernel": "graceful"}),
                ("E", "as B, and one thread per kernel for OpenMP/BLAS/torch", None, None)]
        for name, label, db, overrides in plan:
            if name not in runs:
                continue
            db_url = None
            if db == "pg":
                import pg

                try:
                    server = pg.start(dbname="gradebook", fast=False)
                except pg.PostgresUnavailable as err:
                    print(f"[{name}] skipped: {err}")
                    continue
                db_url = server.url
            root = os.path.join(tmp, name)
            env = env_for(root, "course-sandbox", args.cell_timeout, db_url)
            if name == "E":
                env.update(ONE_THREAD)
            prepare_root(root, env, klass)
            print(f"[{name}] {label}, {args.workers} workers ... ", end="", flush=True)
            meter = CpuMeter(name)
            timings[name], per_student[name] = run_workers(env, root, students, args.workers, overrides, meter)
            cpu[name] = meter.seconds()
            meter.close()
            starved = process_limit_hits(root)
            if starved:
                print(f"[{name}] {starved} message(s) in the workers' stderr say a kernel could not start a thread "
                      "(the sandbox's process limit, RLIMIT_NPROC)")
            grades[name] = export(env, root)
            print(f"{timings[name]:.1f} s")
            if db == "pg":
                print(f"    PostgreSQL {server.version()} (fsync on) at {server.url}")
        print(f"load average after the runs: {loadavg()}")

        # grades
        base = grades["A"]
        identical = all(g == base for g in grades.values())
        print()
        print(f"{'run':4s} {'seconds':>9s} {'students/min':>13s} {'vs A':>7s} {'CPU s/student':>14s} "
              f"{'cores busy':>11s}  grades == A")
        for name in sorted(timings):
            same = grades[name] == base
            print(f"{name:4s} {timings[name]:9.1f} {n / timings[name] * 60:13.1f} {timings['A'] / timings[name]:6.2f}x"
                  f" {cpu[name] / n:14.2f} {cpu[name] / timings[name]:11.2f}  {same}")
        by_kind = {}
        for sid, kind in zip(students, kinds(n)):
            by_kind.setdefault(kind, set()).add(base.get(sid))
        print("scores by kind (run A): " + ", ".join(f"{k} {sorted(v)}" for k, v in by_kind.items()))
        if not identical:
            print("GRADES DIFFER:")
            for sid in students:
                row = {r: grades[r].get(sid) for r in grades}
                if len(set(row.values())) > 1:
                    print(f"  {sid}: {row}")
                    for r in sorted(grades):
                        for line in graded_errors(os.path.join(tmp, r), sid):
                            print(f"    {r}: {line}")
        for name, rows in per_student.items():
            secs = sorted(s for _, s, _, _ in rows)
            by = {}
            for sid, s, _, _ in rows:
                by.setdefault(sid.split("_", 1)[1], []).append(s)
            print(f"[{name}] seconds per student (inside a worker): median {secs[len(secs) // 2]:.1f}, "
                  + ", ".join(f"{k} {sum(v) / len(v):.1f}" for k, v in by.items())
                  + f"; share of worker time on 'loop' students: {sum(by.get('loop', [])) / sum(secs):.0%}")

        with open(os.path.join(args.out, "class_scale_runs.csv"), "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["run", "students", "workers", "seconds", "students_per_min", "speedup_vs_A",
                        "cpu_seconds_per_student", "grades_identical_to_A", "loadavg_end"])
            for name in sorted(timings):
                w.writerow([name, n, 1 if name == "A" else args.workers, round(timings[name], 2),
                            round(n / timings[name] * 60, 2), round(timings["A"] / timings[name], 3),
                            round(cpu[name] / n, 3), grades[name] == base, loadavg()])
        with open(os.path.join(args.out, "class_scale_grades.csv"), "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["student", "kind", *sorted(grades)])
            for sid, kind in zip(students, kinds(n)):
                w.writerow([sid, kind, *[grades[r].get(sid) for r in sorted(grades)]])

        # where the time goes
        if args.profile:
            pick = []
            for kind in ("correct", "partial", "blank", "correct", "partial", "correct"):
                sid = next(s for s in students if s.endswith("_" + kind) and s not in pick)
                pick.append(sid)
            pick = pick[:args.profile]
            root = os.path.join(tmp, "B")
            env = env_for(root, "course-sandbox", args.cell_timeout)
            rows = []
            print(f"\nwhere the time goes: {len(pick)} students ({', '.join(pick)}) in one worker process, "
                  f"course-sandbox, SQLite; seconds per student")
            prof = {"as configured": profile(env, pick),
                    "graceful shutdown": profile(env, pick, {"Execute.shutdown_kernel": "graceful"})}
            env_py = env_for(os.path.join(tmp, "A"), "python3", args.cell_timeout)
            prof["python3 kernel (no sandbox)"] = profile(env_py, pick)
            if server is not None:
                env_pg = dict(env, COURSE_ROOT=os.path.join(tmp, "C"), COURSE_DB_URL=server.url)
                prof["PostgreSQL gradebook"] = profile(env_pg, pick)
            keys = [k for k in next(iter(prof.values())) if not k.startswith("__")]
            print(f"{'phase':55s}" + "".join(f"{c[:22]:>24s}" for c in prof))
            for k in keys:
                once = k.startswith("worker:")
                vals = [p.get(k, 0.0) / (1 if once else p["__n__"]) for p in prof.values()]
                print(f"{k:55s}" + "".join(f"{v:24.2f}" for v in vals))
                rows.append([k, *[round(v, 3) for v in vals]])
            other = [(p["grade_one (per student, total)"] - p["execute: kernel + cells + shutdown"]) / p["__n__"]
                     for p in prof.values()]
            print(f"{'nbgrader outside execution (copy, DB, preprocessors)':55s}" + "".join(f"{v:24.2f}" for v in other))
            rows.append(["nbgrader outside execution", *[round(v, 3) for v in other]])
            costs = import_costs(env)
            print("\nsetup cell imports in a fresh interpreter (CPU s, wall s):")
            for k, (c, t) in costs.items():
                print(f"  {k:45s} {c:6.2f} {t:6.2f}")
                rows.append([f"import {k} (cpu, wall)", round(c, 3), round(t, 3)])
            with open(os.path.join(args.out, "class_scale_profile.csv"), "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["phase (seconds per student)", *prof])
                w.writerows(rows)
        print(f"\nCSV: {os.path.relpath(args.out, os.getcwd())}/class_scale_{{runs,grades,profile}}.csv")
        return 0 if identical else 1
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print(f"course roots kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
