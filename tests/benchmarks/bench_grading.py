"""Autograde time of the demo class: our parallel workers against plain sequential nbgrader.

    python tests/benchmarks/bench_grading.py [--workers 2] [--assignment 01_attention ...] [--copies 1]

Both runs grade the same submissions (the demo class, ``--copies`` times over) in
two fresh course roots, in the same run of this script:

* baseline: ``nbgrader autograde <assignment> --force`` per assignment, one process,
  students one after another, nbgrader's default TCP kernels and the plain ``python3``
  kernel (no sandbox);
* ours: ``grading.worker`` processes sharing the tasks (IPC kernels, the ``course-sandbox``
  kernel), no feedback.

It prints both wall times, the ratio and whether the exported grades are identical
(they must be). Target (issue 2): at least 1.5x with 2 workers on 2 cores.
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)


def env_for(root: str) -> dict:
    return dict(os.environ, COURSE_ROOT=root, PYTHONPATH=REPO)


def nbgrader(root: str, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=os.path.join(REPO, "grading"),
                          env=env_for(root), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def prepare(root: str, assignments: list[str], copies: int) -> list[tuple[str, str]]:
    """Release + demo class (copied `copies` times under new names) in a fresh course root."""
    os.makedirs(root, exist_ok=True)
    for a in assignments:
        nbgrader(root, "generate_assignment", a, "--force")
    code = ("import sys; from grading import demo\n"
            "for a in sys.argv[1:]: demo.generate(a)\n")
    subprocess.run([sys.executable, "-c", code, *assignments], cwd=REPO, env=env_for(root), check=True)
    submitted = os.path.join(root, "submitted")
    base = sorted(os.listdir(submitted))
    for c in range(1, copies):
        for s in base:
            shutil.copytree(os.path.join(submitted, s), os.path.join(submitted, f"{s}_copy{c}"))
    students = sorted(os.listdir(submitted))
    return [(a, s) for a in assignments for s in students if os.path.isdir(os.path.join(submitted, s, a))]


def export(root: str) -> dict:
    path = os.path.join(root, "grades.csv")
    nbgrader(root, "export", "--to", path)
    with open(path, newline="") as fh:
        return {(r["assignment"], r["student_id"]): float(r["score"]) for r in csv.DictReader(fh)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--assignment", action="append")
    parser.add_argument("--copies", type=int, default=1, help="grade the demo class this many times over")
    parser.add_argument("--quick", action="store_true", help="accepted for `make bench`; same as the default")
    args = parser.parse_args()
    from grading import demo

    assignments = args.assignment or demo.assignments_with_demo()
    tmp = tempfile.mkdtemp(prefix="bench-grading-")
    seq_root, par_root = os.path.join(tmp, "sequential"), os.path.join(tmp, "parallel")
    tasks = prepare(seq_root, assignments, args.copies)
    prepare(par_root, assignments, args.copies)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}")
    print(f"class: {len(tasks)} submissions ({', '.join(assignments)})")

    t0 = time.perf_counter()
    for a in assignments:
        nbgrader(seq_root, "autograde", a, "--force", "--KernelManager.transport=tcp", "--Execute.kernel_name=python3")
    t_seq = time.perf_counter() - t0

    t0 = time.perf_counter()
    results = os.path.join(par_root, "logs", "results")
    cmd = [sys.executable, "-m", "grading.worker", "--no-feedback", "--results", results,
           *[f"{a}/{s}" for a, s in tasks]]
    procs = [subprocess.Popen(cmd, cwd=REPO, env=env_for(par_root)) for _ in range(args.workers)]
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("a worker failed")
    t_par = time.perf_counter() - t0

    g_seq, g_par = export(seq_root), export(par_root)
    identical = g_seq == g_par
    print(f"plain nbgrader autograde, sequential : {t_seq:7.1f} s  ({len(tasks) / t_seq * 60:5.1f} submissions/min)")
    print(f"grading.worker x {args.workers}                 : {t_par:7.1f} s  ({len(tasks) / t_par * 60:5.1f} submissions/min)")
    print(f"speed-up: {t_seq / t_par:.2f}x (target >= 1.5x)   grades identical: {identical}")
    if not identical:
        for k in sorted(set(g_seq) | set(g_par)):
            if g_seq.get(k) != g_par.get(k):
                print(f"  {k}: sequential {g_seq.get(k)} vs parallel {g_par.get(k)}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
