"""Grades that do not depend on the grader's load: the demo class graded on a quiet and on a busy machine.

    python tests/benchmarks/bench_load.py [--assignment 01_attention ...] [--busy 2] [--workers 2] [--quick]

Runs ``python -m grading grade --demo yes`` twice, in two fresh course roots, in this one
run: once on the machine as it is, once while ``--busy`` CPU-bound processes
(``while True: pass``) run the whole time. It prints both grade tables (scores from
``grades.csv``), each run's wall time and whether every grade is identical (it must be:
the second pass re-grades timeouts alone with more time, instructor cells are retried).
Exit status 1 when a grade differs. Default: every assignment with a demo class;
``--quick``: lessons 01, 05 and 07 (the fast, the heaviest and the timing-sensitive one).
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)


def grade(root: str, assignments: list[str], workers: int) -> tuple[dict, float, str]:
    args = [sys.executable, "-m", "grading", "grade", "--demo", "yes", "--workers", str(workers), "--no-feedback"]
    for a in assignments:
        args += ["--assignment", a]
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO, env=dict(os.environ, COURSE_ROOT=root, PYTHONPATH=REPO),
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    path = os.path.join(root, "demo_class", "grades.csv")  # the demo class is a course of its own
    if not os.path.exists(path):
        raise SystemExit(f"grading failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    with open(path, newline="") as fh:
        scores = {(r["assignment"], r["student_id"]): float(r["score"]) for r in csv.DictReader(fh)}
    return scores, wall, proc.stdout


def table(scores: dict) -> str:
    assignments = sorted({a for a, _ in scores})
    students = sorted({s for _, s in scores})
    lines = ["student".ljust(18) + "".join(f"{a[:14]:>16s}" for a in assignments)]
    for s in students:
        lines.append(s.ljust(18) + "".join(f"{scores.get((a, s), float('nan')):>16g}" for a in assignments))
    return "\n".join(lines)


def main() -> int:
    from grading import demo

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", action="append")
    p.add_argument("--busy", type=int, default=2, help="CPU-bound processes during the loaded run")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    assignments = args.assignment or (["01_attention", "05_blocks", "07_efficient"] if args.quick
                                      else sorted(demo.assignments_with_demo()))
    print(f"machine: {os.cpu_count()} cores; assignments: {', '.join(assignments)}; workers: {args.workers}")
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        quiet_root, busy_root = os.path.join(tmp, "quiet"), os.path.join(tmp, "busy")
        os.makedirs(quiet_root)
        os.makedirs(busy_root)
        quiet, quiet_wall, _ = grade(quiet_root, assignments, args.workers)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            busy, busy_wall, busy_out = grade(busy_root, assignments, args.workers)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    print(f"\nquiet machine: {quiet_wall:.1f} s\n{table(quiet)}")
    print(f"\nwith {args.busy} busy processes: {busy_wall:.1f} s ({busy_wall / quiet_wall:.2f}x the quiet time)\n"
          f"{table(busy)}")
    second = [line for line in busy_out.splitlines() if line.startswith("[second pass]")]
    print("\n" + (second[0] if second else "[second pass] none needed in the loaded run"))
    differ = sorted(k for k in set(quiet) | set(busy) if quiet.get(k) != busy.get(k))
    if differ:
        print(f"\nGRADES DIFFER for {len(differ)} submission(s): "
              + ", ".join(f"{a}/{s} quiet {quiet.get((a, s))} busy {busy.get((a, s))}" for a, s in differ))
        return 1
    print(f"\nidentical grades: {len(quiet)} submissions, quiet vs loaded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
