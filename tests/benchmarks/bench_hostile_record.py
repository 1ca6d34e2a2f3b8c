"""A record built to be slow or huge to verify costs its own submission, never the class (issue 33, item 4).

    python tests/benchmarks/bench_hostile_record.py [--workers 2] [--hostile x65_slow_record] [--repeat 1]

Grades lesson 01's demo class (the four honest demo students of tests/adversarial) three ways, each
in a fresh course root with the real command (``python -m grading grade``), in this one run:

* ``demo``: the demo class alone;
* ``demo + honest``: plus a fifth, honest submission (a copy of the instructor's solutions), the
  cost of one more submission of any kind;
* ``demo + hostile``: plus the hostile submission instead (default ``x65_slow_record``: every call of
  its softmax first publishes a forged record holding 60,000 integers that all hash to 1, a set the
  verifier used to build in quadratic time; ``x66_huge_record``: a string array of 8 GB as numpy
  stores it).

It prints the wall times, the hostile submission's grade and note, and the ratios. Target: demo +
hostile within 10% of demo + honest (the hostile record is refused in linear time, or stopped by the
verifier's CPU and memory bounds: ``COURSE_VERIFY_CPU_SECONDS``, ``COURSE_VERIFY_MEMORY_MB``).
Before issue 33 the demo + hostile run did not finish (the verifier had no bound).

Measured 2026-11-25 on the project VM (2 CPUs, shared with other grading runs at the time, so the
three differ by load as much as by work): demo 103.8 s, demo + honest 95.4 s, demo + hostile 93.8 s
(x65 graded 8 of 9 with "built to collide" in its feedback): demo + hostile / demo + honest = 0.98.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, REPO)

from adversarial import cases as C  # noqa: E402
from adversarial import classrun  # noqa: E402


def run(cases, workers: int, label: str) -> tuple[float, dict, object]:
    root = tempfile.mkdtemp(prefix="bench-hostile-")
    try:
        ctx = classrun.prepare(root)
        classrun.write_class(ctx, cases=cases)
        t0 = time.perf_counter()
        outcome = classrun.grade(root, workers=workers, timeout=3000)
        seconds = time.perf_counter() - t0
        if outcome.returncode != 0:
            raise SystemExit(f"{label}: grading failed ({outcome.returncode}):\n{outcome.stderr[-2000:]}")
        notes = {c.student: outcome.feedback_text(c.student) for c in cases}
        return seconds, dict(outcome.grades), notes
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hostile", default="x65_slow_record", help="a student of tests/adversarial/cases.py")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each configuration (the fastest is kept)")
    args = parser.parse_args()

    demo = list(C.HONEST)
    honest_extra = dataclasses.replace(C.HONEST[0], student="s05_extra_honest",
                                       build=lambda ctx: C.files(C.notebook(ctx)))  # the solutions, built
    hostile = C.BY_STUDENT[args.hostile]
    configs = [("demo", demo), ("demo + honest", demo + [honest_extra]), ("demo + hostile", demo + [hostile])]
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"workers {args.workers}; hostile {hostile.student}: {hostile.what}")
    times: dict = {}
    for label, cases in configs:
        best = None
        for _ in range(args.repeat):
            seconds, grades, notes = run(cases, args.workers, label)
            best = seconds if best is None else min(best, seconds)
        times[label] = best
        line = f"{label:16s} {len(cases)} submissions  {best:7.1f} s"
        if label == "demo + hostile":
            score = grades.get(hostile.student)
            line += f"   {hostile.student}: {score} (expected {hostile.score})"
            text = notes.get(hostile.student, "")
            for needle in hostile.feedback:
                line += f"; feedback {'has' if needle in text else 'LACKS'} {needle!r}"
        print(line, flush=True)
    ratio = times["demo + hostile"] / times["demo + honest"]
    print(f"demo + hostile / demo + honest = {ratio:.3f} (target <= 1.10); "
          f"demo + hostile / demo = {times['demo + hostile'] / times['demo']:.3f}")


if __name__ == "__main__":
    main()
