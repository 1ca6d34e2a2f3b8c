"""Each notebook's first run: its default run, top to bottom, in a fresh kernel, from empty caches.

    python tests/benchmarks/bench_first_run.py [ASSIGNMENT ...] [--cores 2] [--out FILE] [--timeout 900]

What a student's first run pays, and the README's "each notebook's default run stays under a minute on 2 CPU
cores" promise is about (issue 65 item 5). For each notebook (default: lessons 01-07 and 10-12; 08 and 09
are measured by their own owners' scripts, name them to include them):

* a fresh kernel (nbclient, ``python3``), started in the notebook's folder, its CPUs limited to the first
  ``--cores`` of this machine (the kernel inherits this process's CPU affinity);
* empty caches, each in a new temporary folder removed afterwards: the course's (``COURSE_CACHE``: the
  lesson 08 embeddings, lesson 09's converted model) and matplotlib's font cache (``MPLCONFIGDIR``), so
  nothing an earlier run left is read. Python's compiled modules stay where pip wrote them at install time
  (a student's first run has them too); the kernel inherits this process's environment otherwise
  (thread variables included: leave them unset to measure what a student's machine does);
* the notebook as committed (the instructor's answers, every flag at its default), the wall time from the
  kernel's start to its last cell's reply, and the three slowest cells.

The machine's load average is written before and after each notebook: a figure measured while other work ran
says so. Results: ``tests/benchmarks/results/first_run_<date>_<cores>cores.json`` (and a table on stdout).
Exit status 1 when a notebook failed or took longer than ``--limit`` seconds (default 60).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOKS = os.path.join(REPO, "notebooks")
RESULTS = os.path.join(REPO, "tests", "benchmarks", "results")
DEFAULT = ("01_attention", "02_masking", "03_multihead", "04_positional", "05_blocks", "06_bpe", "07_efficient",
           "10_proteins", "11_read_consensus", "12_long_range_dna")
# where a run keeps what the next run reads: each pointed at an empty folder of its own
CACHES = ("COURSE_CACHE", "MPLCONFIGDIR")


def notebook_of(assignment: str) -> str:
    folder = os.path.join(NOTEBOOKS, assignment)
    if not os.path.isdir(folder):
        known = sorted(a for a in os.listdir(NOTEBOOKS) if a[:2].isdigit())
        raise SystemExit(f"no assignment {assignment!r}: expected one of {known}")
    found = sorted(f for f in os.listdir(folder) if f.endswith(".ipynb"))
    if len(found) != 1:
        raise SystemExit(f"{assignment}: expected one notebook in {folder}, found {found}")
    return os.path.join(folder, found[0])


def _cell_seconds(cell) -> float | None:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = datetime.datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def first_run(path: str, timeout: int) -> dict:
    """One notebook's default run from empty caches in a fresh kernel: seconds, slowest cells, status."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    from grading.kernel import polling

    nb = nbformat.read(path, as_version=4)
    scratch = tempfile.mkdtemp(prefix="first-run-")
    saved = {k: os.environ.get(k) for k in CACHES}
    for k in CACHES:
        os.environ[k] = os.path.join(scratch, k.lower())
        os.makedirs(os.environ[k])
    load_before = os.getloadavg()
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=True, config=polling.config(),
                            resources={"metadata": {"path": os.path.dirname(path)}})
    status = "ok"
    t0 = time.perf_counter()
    try:
        client.execute()
    except CellTimeoutError:
        status = f"a cell ran past --timeout {timeout} s"
    except CellExecutionError as err:
        status = f"a cell raised: {str(err).strip().splitlines()[-1][:200]}"
    except DeadKernelError as err:
        status = f"the kernel died: {err}"
    finally:
        wall = time.perf_counter() - t0
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(scratch, ignore_errors=True)
    cells = [(i, _cell_seconds(c)) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    timed = sorted(((s, i) for i, s in cells if s is not None), reverse=True)
    return {"notebook": os.path.relpath(path, REPO), "seconds": round(wall, 1), "status": status,
            "cells_seconds": round(sum(s for s, _ in timed), 1),
            "slowest_cells": [{"cell": i, "seconds": round(s, 1),
                               "starts": "".join(nb.cells[i].source).strip().splitlines()[0][:80]
                               if "".join(nb.cells[i].source).strip() else ""} for s, i in timed[:3]],
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("assignments", nargs="*", help=f"default: {' '.join(DEFAULT)}")
    p.add_argument("--cores", type=int, default=2, help="CPUs the kernels may use (the first N of this machine)")
    p.add_argument("--timeout", type=int, default=900, help="seconds one cell may run")
    p.add_argument("--limit", type=float, default=60.0, help="the promise, in seconds per notebook")
    p.add_argument("--out", help="results file (default: tests/benchmarks/results/first_run_<date>_<cores>cores.json)")
    args = p.parse_args(argv)
    if args.cores < 1:
        raise SystemExit(f"--cores must be at least 1, got {args.cores}")
    available = sorted(os.sched_getaffinity(0))
    if args.cores > len(available):
        raise SystemExit(f"--cores {args.cores}: this process may use only {len(available)} CPUs {available}")
    os.sched_setaffinity(0, available[:args.cores])  # the kernels started below inherit it
    paths = [notebook_of(a) for a in (args.assignments or DEFAULT)]
    runs = []
    for path in paths:
        run = first_run(path, args.timeout)
        runs.append(run)
        mark = "" if run["status"] == "ok" and run["seconds"] <= args.limit else "  <-- " + (
            run["status"] if run["status"] != "ok" else f"over {args.limit:g} s")
        print(f"{run['notebook']:<50s} {run['seconds']:>7.1f} s  (load {run['load_average_before'][0]:.2f} -> "
              f"{run['load_average_after'][0]:.2f}){mark}", flush=True)
    result = {"what": "each notebook's default run from empty caches (COURSE_CACHE, MPLCONFIGDIR) in a fresh "
                      "kernel: tests/benchmarks/bench_first_run.py",
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "commit": _commit(), "cores": args.cores, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "python": platform.python_version(), "limit_seconds": args.limit, "runs": runs}
    out = args.out or os.path.join(
        RESULTS, f"first_run_{datetime.date.today().isoformat()}_{args.cores}cores.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
        fh.write("\n")
    print(f"written: {os.path.relpath(out, REPO)}")
    return 0 if all(r["status"] == "ok" and r["seconds"] <= args.limit for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
