"""The class report of a 1,000-student synthetic class (12,000 submissions): its CPU time and its size.

    python tests/benchmarks/bench_report.py [--submissions 12000] [--seed 0] [--quick] [--out FILE]

Builds, in memory, what ``grading.report.collect`` reads from a gradebook and the autograded
notebooks, for a simulated class on the course's real structure (every assignment's graded cells,
points and hidden tests, from ``notebooks/``): ceil(N / 12) students, the last ones missing a few
assignments so there are exactly N submissions. Each solution cell is the instructor's solution
with one to three lines of the student's own (unique lines, as in a real class), a blank (the
release stub) or a known wrong answer of the demo class (with lines of the student's own too); 1 %
of the students (student k*100 + 1) hand in student k*100's cells re-indented, with a comment added.
Each test cell passes, or fails with a named misconception, "not implemented yet" or a NameError.
Then it times ``grading.report.write`` (similarity, numbers, plots, page, JSON, CSVs; matplotlib and
the sanitiser imported inside the timing, as in a fresh ``python -m grading report``) with
``time.process_time()`` and prints the CPU seconds, the wall seconds and the load average (on a
shared machine the wall time measures the other jobs too) and the sizes of index.html and
report.json, against the targets (5 s of CPU, a page under 1 MB), and the ratio to the CPU time
recorded before the line-based similarity (``BEFORE``, the same command at commit ce15e8e).
``--out`` also writes what it prints to FILE. The data are simulated; no gradebook is read.
``--quick``: 1,000 submissions.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
SOLUTION = "instructor's solution"  # grading.similarity.SOLUTION (not imported before the timing starts)

TARGET_S, TARGET_MB = 5.0, 1.0
BEFORE = os.path.join(REPO, "tests", "benchmarks", "results", "cpu_2026-11-28", "bench_report_12000_before_ce15e8e.txt")
_SOLUTION = re.compile(r"[ \t]*### BEGIN SOLUTION[\s\S]*?### END SOLUTION[ \t]*\n?")


def course_structure() -> list[dict]:
    """Each assignment's graded cells, solution cells (instructor's code and release stub), from notebooks/."""
    from grading import demo, report

    out = []
    for a in sorted(os.listdir(os.path.join(REPO, "notebooks"))):
        folder = os.path.join(REPO, "notebooks", a)
        if not (os.path.isdir(folder) and a[:2].isdigit()):
            continue
        (name,) = [f for f in os.listdir(folder) if f.endswith(".ipynb")]
        with open(os.path.join(folder, name)) as fh:
            nb = json.load(fh)
        cells, solutions = [], []
        for cell in nb["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            gid, src = meta.get("grade_id"), "".join(cell["source"])
            if meta.get("grade"):
                kind = "manual" if meta.get("solution") else ("hidden" if "BEGIN HIDDEN TESTS" in src else "visible")
                cells.append({"key": gid, "exercise": report.exercise_of(gid), "kind": kind,
                              "points": float(meta["points"])})
            elif meta.get("solution") and cell["cell_type"] == "code":
                indent = re.search(r"^([ \t]*)### BEGIN SOLUTION", src, re.M)
                pad = indent.group(1) if indent else ""
                stub = _SOLUTION.sub(f"{pad}# YOUR CODE HERE\n{pad}raise NotImplementedError()\n", src)
                solutions.append({"key": gid, "exercise": report.exercise_of(gid), "given": stub,
                                  "solution": demo._SOLUTION_MARKERS.sub("", src)})
        wrong = demo.load_spec(a).MISCONCEPTION if a in demo.assignments_with_demo() else {}
        out.append({"name": a, "max_score": sum(c["points"] for c in cells), "cells": cells, "solutions": solutions,
                    "wrong": wrong})
    return out


def own_lines(rng: random.Random, indent: str) -> str:
    """One to three lines only this student wrote."""
    kinds = [lambda: f"{indent}_check_{rng.randrange(10**6)} = {rng.randrange(1000)} * {rng.random():.4f}\n",
             lambda: f"{indent}assert {rng.randrange(1, 99)} > 0, 'sanity {rng.randrange(10**6)}'\n",
             lambda: f"{indent}_n{rng.randrange(10**5)} = len(str({rng.randrange(10**6)}))\n"]
    return "".join(rng.choice(kinds)() for _ in range(rng.randint(1, 3)))


def synthetic_class(n_submissions: int, seed: int) -> dict:
    rng = random.Random(seed)
    structure = course_structure()
    n_students = math.ceil(n_submissions / len(structure))
    students = [f"student{i:04d}" for i in range(n_students)]
    copiers = {students[i]: students[i - 1] for i in range(1, n_students, 100)}  # 1 %: student k*100 + 1 copies k*100
    subs, planted = [], [0]
    for a in structure:
        take = students if len(subs) + n_students <= n_submissions else students[:n_submissions - len(subs)]
        by_student = {}
        for s in take:
            outcome = rng.choices(["right", "wrong", "blank", "crash"], [0.8, 0.1, 0.05, 0.05])[0]
            code, scores, errors, seconds = {}, {}, {}, {}
            for sol in a["solutions"]:
                if outcome == "blank":
                    code[sol["key"]] = sol["given"]
                elif outcome == "wrong" and sol["key"] in a["wrong"]:
                    code[sol["key"]] = a["wrong"][sol["key"]].strip("\n") + "\n" + own_lines(rng, "")
                else:
                    body = sol["solution"]
                    head, _, rest = body.partition('"""\n')
                    head2, _, rest2 = rest.partition('"""\n')
                    code[sol["key"]] = (head + '"""\n' + head2 + '"""\n' + own_lines(rng, "    ") + rest2) \
                        if rest2 else body + own_lines(rng, "")
            for c in a["cells"]:
                if c["kind"] == "manual":
                    scores[c["key"]] = 0.0
                    continue
                seconds[c["key"]] = round(rng.lognormvariate(-3.5, 1.0), 4)
                if outcome == "right" or rng.random() < 0.5:
                    scores[c["key"]] = c["points"]
                    continue
                scores[c["key"]] = 0.0
                ex = c["exercise"]
                errors[c["key"]] = {
                    "wrong": ["AssertionError", f"{ex}: likely misconception 'simulated mistake "
                                                f"{rng.randrange(3)}': the output differs at position "
                                                f"{rng.randrange(64)} (input: simulated {s})"],
                    "blank": ["AssertionError", f"{ex}: not implemented yet (the function still raises "
                                                "NotImplementedError)."],
                    "crash": ["NameError", f"name '{ex}' is not defined"]}[outcome]
            by_student[s] = {"assignment": a["name"], "student": s, "score": sum(scores.values()),
                             "max_score": a["max_score"], "cells": scores, "errors": errors, "seconds": seconds,
                             "code": code}
        for s, original in copiers.items():
            if s in by_student and original in by_student:
                planted[0] += sum(c != sol["given"] for sol in a["solutions"]
                                  for c in [by_student[original]["code"][sol["key"]]])
                by_student[s]["code"] = {k: "# my own work\n" + v.replace("    ", "  ")
                                         for k, v in by_student[original]["code"].items()}
        subs += by_student.values()
    assignments = [{k: v for k, v in a.items() if k != "wrong"} for a in structure]
    for a in assignments:
        a["solutions"] = [{k: v for k, v in sol.items() if k != "solution"} for sol in a["solutions"]]
    return {"students": students, "submissions": subs, "assignments": assignments, "planted_copies": planted[0]}


def planted_pairs(pair: dict) -> set:
    """The (original, copy) pairs synthetic_class planted: student k*100 and student k*100 + 1."""
    first = int(pair["a"][len("student"):])
    return {(pair["a"], f"student{first + 1:04d}")} if first % 100 == 0 else set()


def before_cpu(n: int) -> float | None:
    """The CPU seconds of report.write in BEFORE, when it was run on as many submissions; else None."""
    try:
        text = open(BEFORE, encoding="utf-8").read()
    except OSError:
        return None
    size = re.search(r"(\d+) submissions", text)
    cpu = re.search(r"([\d.]+) s CPU", text)
    return float(cpu.group(1)) if size and cpu and int(size.group(1)) == n else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--submissions", type=int, default=12000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="1,000 submissions")
    p.add_argument("--out", default=None, help="also write the results to this file")
    args = p.parse_args()
    n = 1000 if args.quick else args.submissions
    t0 = time.perf_counter()
    data = synthetic_class(n, args.seed)
    built = time.perf_counter() - t0
    from grading import report

    with tempfile.TemporaryDirectory(prefix="bench-report-") as out:
        load = os.getloadavg()[0]
        t1, c1 = time.perf_counter(), time.process_time()
        result = report.write(out, data, threshold=50)
        seconds, cpu = time.perf_counter() - t1, time.process_time() - c1
        load = max(load, os.getloadavg()[0])
        pairs = report.similarity(data)  # again, untimed: write() keeps no code in what it returns
        html_mb = os.path.getsize(result["paths"]["html"]) / 1e6
        json_mb = os.path.getsize(result["paths"]["json"]) / 1e6
    flagged = result["report"]["similarity"]
    students = [pr for pr in flagged if pr["b"] != SOLUTION]
    copies = sum(1 for pr in students if (pr["a"], pr["b"]) in planted_pairs(pr))
    lines = [f"simulated class: {len(data['students'])} students, {len(data['submissions'])} submissions, "
             f"{len(data['assignments'])} assignments (built in {built:.1f} s, not timed)",
             f"report.write: {cpu:.2f} s CPU, {seconds:.2f} s wall (target: at most {TARGET_S:g} s of CPU, "
             f"{cpu / TARGET_S:.2f} of it); load average {load:.1f} on {os.cpu_count()} CPU(s): on a busy machine "
             "the CPU time is the wall time this single-threaded job would take with a CPU of its own"]
    old = before_cpu(len(data["submissions"]))
    if old:
        lines.append(f"before (ce15e8e, {os.path.relpath(BEFORE, REPO)}): {old:.2f} s CPU; now {cpu / old:.2f} of it")
    lines.append(f"index.html: {html_mb:.2f} MB (target under {TARGET_MB:g} MB: {html_mb / TARGET_MB:.2f} of it), "
                 f"report.json: {json_mb:.2f} MB")
    from grading import similarity

    wrong = [similarity.raw_tokens(w) for a in course_structure() for w in a["wrong"].values()]
    same_wrong = sum(1 for pr in pairs if pr["b"] != SOLUTION and (pr["a"], pr["b"]) not in planted_pairs(pr) and any(
        all(similarity.raw_tokens(pr[c])[:len(w)] == w for c in ("code_a", "code_b")) for w in wrong))
    rows = result["report"]["similar_students"]
    lines.append(f"similarity: {len(students)} flagged pair(s) of cells of two students: {copies} among the "
                 f"{data['planted_copies']} planted copies of a non-blank cell, {same_wrong} sharing a known wrong "
                 f"answer of the demo class token for token, {len(students) - copies - same_wrong} other; "
                 f"{len(flagged) - len(students)} cell(s) flagged with the instructor's solution; "
                 f"{len(rows)} row(s) in the table of pairs of students")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(f"$ python tests/benchmarks/bench_report.py --submissions {n} --seed {args.seed}\n{text}\n")
    return 0 if cpu <= TARGET_S and html_mb < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
