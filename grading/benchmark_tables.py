"""The Benchmarks page's tables, generated from the kept result files, never typed.

A benchmark run worth keeping is copied into ``tests/benchmarks/results/<machine>_<date>/`` (or that folder
itself, for a one-file run). :func:`markdown` reads every file there and writes one table per script that
made them: each row one file (or one section of a file that holds several runs), with the machine, the
commit and the load the file states, and the headline figures it prints. What a file does not state is
shown as "not recorded", never guessed; a file no parser below understands is listed by name with the
reason, never dropped. ``grading/site.py`` appends the result to ``grading/docs/benchmarks.md``, which
keeps the prose (``tests/test_site.py`` checks that it types no number).

Run ``python -m grading.benchmark_tables`` to print the tables (``--results FOLDER`` for another folder).

Does NOT cover: running the benchmarks (``make bench``; the scripts in ``tests/benchmarks/``) or judging
their figures against their targets (each script prints its own target beside the figure).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import re
import sys

from grading import REPO_DIR

RESULTS_DIR = os.path.join(REPO_DIR, "tests", "benchmarks", "results")
MACHINE_FILE = "machine.txt"  # in a results folder: the machine of the files beside it (nvidia-smi's CSV)
NOT_RECORDED = "not recorded"
_COMMIT = re.compile(r"(?:^|[_.-])([0-9a-f]{7,40})(?=[_.-]|$)")
_NUMBER = r"(-?\d+(?:\.\d+)?)"


class Unparsed(ValueError):
    """A result file a parser claimed but could not read: the page lists it by name with this reason."""


@dataclasses.dataclass(frozen=True)
class Row:
    file: str  # relative to the results folder
    run: str  # the section of the file ("" for the whole file)
    machine: str
    commit: str
    load: str
    figures: str


def commit_of(name: str) -> str:
    """The abbreviated commit a result file's name carries (``bench_grading_7904982.txt``), else not recorded.
    Runs of 7 to 40 hex digits between separators; the last one wins (``..._before_ce15e8e.txt``).

    >>> commit_of("bench_report_12000_512450b_seed0.txt"), commit_of("breakdown_threads_1_2.txt")
    ('512450b', 'not recorded')
    """
    found = _COMMIT.findall(os.path.splitext(name)[0])
    return found[-1] if found else NOT_RECORDED


def _folder_machine(folder: str) -> str | None:
    """The machine ``machine.txt`` names for the files of ``folder`` (its first data line), or None."""
    path = os.path.join(folder, MACHINE_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [line.strip() for line in fh if line.strip()]
    except OSError:
        return None
    data = [line for line in lines if not line.lower().startswith("name,")]
    return data[0] if data else None


# ------------------------------------------------------------------ one parser per script
def _grading(path: str, text: str) -> list[Row]:
    """``bench_grading.py`` (and its ``--breakdown``): a ``machine:`` line, then ``== <section>`` blocks (an
    excerpt of several runs' breakdowns: ``=== <run>`` blocks, with no machine line)."""
    machine = re.search(r"^machine:\s*(.+)$", text, re.M)
    sections = re.split(r"^={2,} ", text, flags=re.M)[1:]
    if not sections:
        raise Unparsed("no '== ' section")
    rows = []
    for section in sections:
        title, _, body = section.partition("\n")
        load = re.search(r"load average (before|after):\s*" + _NUMBER, section)
        figures = []
        for label, per in re.findall(r"^(\w+)\b.*?:\s+[\d.]+ s\s+[\d.]+ submissions/min\s+" + _NUMBER
                                     + r" s per submission per worker", body, re.M):
            figures.append(f"{label} {per} s")
        if figures:
            figures = ["per submission per worker: " + ", ".join(figures)]
        figures += [f"{what} {x}" for what, x in re.findall(r"^(speed-up [^:\n]+?)\s*:\s*" + _NUMBER + "x", body, re.M)
                    for x in [x + "x"]]
        wall = re.search(r"class wall time " + _NUMBER + r" s[^;\n]*;\s*" + _NUMBER
                         + r" s per submission per worker;\s*floor[^)\n]*\)\s*" + _NUMBER + " s", body)
        if wall:
            figures.append(f"class wall {wall[1]} s; {wall[2]} s per submission per worker; floor {wall[3]} s")
        overhead = re.search(r"^fixed overhead[^:\n]*:\s*" + _NUMBER + " s", body, re.M)
        if overhead:
            figures.append(f"fixed overhead {overhead[1]} s per submission")
        same = re.search(r"^grades identical:\s*(True|False)", body, re.M)
        if same:
            figures.append(f"grades identical: {same[1]}")
        if not figures:
            raise Unparsed(f"no figure in its section {title.strip()[:60]!r}")
        rows.append(Row(path, title.split(";")[0].strip(), machine[1].strip() if machine else NOT_RECORDED,
                        commit_of(os.path.basename(path)), f"{load[2]} ({load[1]})" if load else NOT_RECORDED,
                        "; ".join(figures)))
    return rows


def _report(path: str, text: str) -> list[Row]:
    """``bench_report.py``: the ``report.write:`` line (CPU, wall, load, CPUs) and the page sizes."""
    line = re.search(r"^report\.write:(.*)$", text, re.M)
    if not line:
        raise Unparsed("no 'report.write:' line")
    cpu, wall = re.search(_NUMBER + " s CPU", line[1]), re.search(_NUMBER + " s wall", line[1])
    if not cpu or not wall:
        raise Unparsed("its 'report.write:' line states no CPU or wall seconds")
    load = re.search(r"load average " + _NUMBER, line[1])  # over the run (the script's own words)
    cpus = re.search(r"on (\d+) CPU\(s\)", line[1])
    figures = [f"report.write {cpu[1]} s CPU, {wall[1]} s wall"]
    figures += [f"{name} {mb} MB" for name, mb in re.findall(r"(index\.html|report\.json):\s*" + _NUMBER + " MB", text)]
    command = re.search(r"^\$ (.+)$", text, re.M)
    run = re.search(r"--submissions (\d+)", command[1]) if command else None
    return [Row(path, f"{run[1]} submissions" if run else "", f"{cpus[1]} CPUs" if cpus else NOT_RECORDED,
                commit_of(os.path.basename(path)), load[1] if load else NOT_RECORDED, "; ".join(figures))]


def _first_run(path: str, data) -> list[Row]:
    """``bench_first_run.py``: JSON with the machine, the commit and each notebook's run from empty caches."""
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise Unparsed("no 'runs' list")
    loads = [r.get("load_average_before", [None])[0] for r in runs if isinstance(r, dict)]
    loads = [x for x in loads if isinstance(x, (int, float))]
    figures = [f"{os.path.basename(os.path.dirname(str(r.get('notebook', '?'))))} {r.get('seconds')} s {r.get('status')}"
               for r in runs if isinstance(r, dict)]
    limit = data.get("limit_seconds")
    return [Row(path, "", str(data.get("machine") or NOT_RECORDED), str(data.get("commit") or NOT_RECORDED),
                f"{min(loads)}-{max(loads)} (before each notebook)" if loads else NOT_RECORDED,
                "; ".join(figures) + (f" (limit {limit} s)" if limit is not None else ""))]


def _gpu_smoke_summary(lessons: list[tuple[str, str, float, float, int]]) -> str:
    """(lesson, status, seconds, peak MiB, failed cells) of each lesson -> the headline figures."""
    ok = [x for x in lessons if x[1].lower() == "ok" and x[4] == 0]
    slowest = max(lessons, key=lambda x: x[2])
    peak = max(lessons, key=lambda x: x[3])
    return (f"{len(ok)} of {len(lessons)} lessons ran with no failed cell; total {sum(x[2] for x in lessons):.1f} s; "
            f"slowest {slowest[0]} {slowest[2]} s; largest GPU peak {peak[3]} MiB ({peak[0]})")


def _gpu_smoke_json(path: str, data) -> list[Row]:
    """``gpu_smoke.py``'s JSON: one entry per lesson notebook with its cells, seconds and GPU peak."""
    if not isinstance(data, list) or not data or not all(isinstance(x, dict) and "cells" in x for x in data):
        raise Unparsed("not a list of notebooks with their cells")
    lessons = []
    for x in data:
        failed = sum(1 for c in x["cells"] if isinstance(c, dict) and c.get("status") not in ("ok", "skip"))
        lessons.append((str(x.get("lesson") or os.path.basename(os.path.dirname(str(x.get("notebook"))))),
                        "ok" if failed == 0 else "failed", float(x.get("seconds") or 0),
                        float(x.get("peak_gpu_mib") or 0), failed))
    device = data[0].get("device_name") or _folder_machine(os.path.dirname(path)) or NOT_RECORDED
    torch = data[0].get("torch")
    return [Row(path, "", f"{device}" + (f", torch {torch}" if torch else ""), commit_of(os.path.basename(path)),
                NOT_RECORDED, _gpu_smoke_summary(lessons))]


def _gpu_smoke_log(path: str, text: str) -> list[Row]:
    """``gpu_smoke.py``'s printed table: ``lesson status seconds cuda peak ok/skip/FAIL/blocked``."""
    rows = re.findall(r"^(\d\d_\w+)\s+(\w+)\s+" + _NUMBER + r"\s+(?:True|False)\s+" + _NUMBER
                      + r"\s+\d+/\d+/(\d+)/\d+\s*$", text, re.M)
    if not rows:
        raise Unparsed("no lesson row (lesson, status, seconds, cuda, peak MiB, cells ok/skip/FAIL/blocked)")
    device = re.search(r"cuda available: \w+ \| (.+)$", text, re.M)
    machine = device[1].strip() if device else (_folder_machine(os.path.dirname(path)) or NOT_RECORDED)
    lessons = [(a, s, float(t), float(p), int(f)) for a, s, t, p, f in rows]
    return [Row(path, "", machine, commit_of(os.path.basename(path)), NOT_RECORDED, _gpu_smoke_summary(lessons))]


def _causal_summary(points: list[tuple[str, int, float, float]]) -> str:
    """(method, L, ms, peak MiB) -> the figures at the longest L every method reached."""
    lengths = {}
    for method, length, _, _ in points:
        lengths.setdefault(method, set()).add(length)
    common = set.intersection(*lengths.values())
    if not common:
        raise Unparsed("no sequence length that every method ran")
    top = max(common)
    parts = [f"{m} {ms:g} ms, {mib:g} MiB" for m, length, ms, mib in points if length == top]
    return f"at L = {top}: " + "; ".join(parts)


def _efficient_csv(path: str, text: str) -> list[Row]:
    """``bench_efficient.py``'s CSV: one line per (method, sequence length) with its time and memory peak."""
    reader = csv.DictReader(io.StringIO(text))
    need = {"method", "L", "device", "time_ms", "peak_mib"}
    if not need <= set(reader.fieldnames or ()):
        raise Unparsed(f"its header lacks {sorted(need - set(reader.fieldnames or ()))}")
    lines = list(reader)
    try:
        points = [(r["method"], int(r["L"]), float(r["time_ms"]), float(r["peak_mib"])) for r in lines]
    except (TypeError, ValueError) as err:
        raise Unparsed(f"a line that is not numbers where numbers belong ({err})") from None
    if not points:
        raise Unparsed("no data line")
    device = (_folder_machine(os.path.dirname(path)) or lines[0]["device"]).split(",")[0]
    return [Row(path, f"{lines[0].get('dtype') or 'dtype ' + NOT_RECORDED}, {lines[0]['device']}", device, commit_of(os.path.basename(path)),
                NOT_RECORDED, _causal_summary(points))]


def _efficient_log(path: str, text: str) -> list[Row]:
    """``bench_efficient.py``'s printed log: ``# machine:``/``# device:`` lines, then ``method L= n  x ms  peak y MiB``."""
    found = re.findall(r"^\s+(\w+)\s+L=\s*(\d+)\s+" + _NUMBER + r" ms\s+peak\s+" + _NUMBER + " MiB", text, re.M)
    if not found:
        raise Unparsed("no 'method L= n  x ms  peak y MiB' line")
    device = re.search(r"^# device:\s*([^,\n]+)", text, re.M)
    machine = re.search(r"^# machine:\s*([^,\n]+)", text, re.M)
    where = device[1].strip() if device else (machine[1].strip() if machine else NOT_RECORDED)
    part = re.search(r"^# part 0:[^\n]*?(float32|bfloat16|float16)", text, re.M)
    points = [(m, int(n), float(ms), float(mib)) for m, n, ms, mib in found]
    return [Row(path, part[1] if part else "", where, commit_of(os.path.basename(path)), NOT_RECORDED,
                _causal_summary(points))]


# (script, claims(name, text): does this parser read the file, parse(path, text or JSON) -> rows)
KINDS = (
    ("bench_grading.py", lambda n, t: n.endswith(".txt") and bool(re.search(r"^={2,} ", t, re.M))
     and (bool(re.search(r"^machine:", t, re.M)) or "class wall time" in t), _grading),
    ("bench_report.py", lambda n, t: n.endswith(".txt") and (n.startswith("bench_report") or "report.write:" in t),
     _report),
    ("bench_first_run.py", lambda n, t: n.endswith(".json") and n.startswith("first_run"), _first_run),
    ("gpu_smoke.py", lambda n, t: n.endswith(".json") and n.startswith("gpu_smoke"), _gpu_smoke_json),
    ("gpu_smoke.py", lambda n, t: n.endswith(".log") and n.startswith("gpu_smoke"), _gpu_smoke_log),
    ("bench_efficient.py", lambda n, t: n.endswith(".csv") and n.startswith("efficient_"), _efficient_csv),
    ("bench_efficient.py", lambda n, t: n.endswith(".log") and n.startswith("bench_causal"), _efficient_log),
)


def collect(results: str = RESULTS_DIR) -> tuple[dict[str, list[Row]], list[tuple[str, str]]]:
    """({script: rows}, [(file, why it was not read)]) of every file under ``results``. A folder's
    ``machine.txt`` is read as the machine of its files, not listed."""
    tables: dict[str, list[Row]] = {}
    unread: list[tuple[str, str]] = []
    if not os.path.isdir(results):
        return tables, [(results, "no such folder")]
    root = os.path.abspath(results)

    def rel(path: str) -> str:
        return os.path.relpath(path, root)

    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            if name == MACHINE_FILE:
                continue
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except (OSError, UnicodeDecodeError) as err:
                unread.append((rel(path), f"cannot be read as text ({type(err).__name__})"))
                continue
            kinds = [(script, parse) for script, claims, parse in KINDS if claims(name, text)]
            if not kinds:
                unread.append((rel(path), "no parser knows this kind of file"))
                continue
            script, parse = kinds[0]
            try:
                rows = parse(path, json.loads(text) if name.endswith(".json") else text)
            except json.JSONDecodeError as err:
                unread.append((rel(path), f"not valid JSON ({err.msg}, line {err.lineno})"))
                continue
            except (Unparsed, KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
                unread.append((rel(path), f"read as {script} output, but {err}"))
                continue
            tables.setdefault(script, []).extend(dataclasses.replace(r, file=rel(r.file)) for r in rows)
    return tables, unread


def _cell(value: str) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(results: str = RESULTS_DIR, heading: str = "##") -> str:
    """The generated part of the Benchmarks page: one table per script, then the files not read."""
    tables, unread = collect(results)
    shown = os.path.relpath(results, REPO_DIR) if os.path.abspath(results).startswith(REPO_DIR + os.sep) else results
    lines = [f"{heading} Kept results", "",
             f"Generated from the files under `{shown}/` when the site is built (`grading/benchmark_tables.py`): "
             "each row is one file, or one run of a file that holds several, with the machine, the commit and the "
             "load average it states (before or after the run where it says which) and the headline figures it "
             "prints. "
             f"\"{NOT_RECORDED}\" marks what a file does not state.", ""]
    for script in dict.fromkeys(s for s, _, _ in KINDS):
        rows = tables.get(script)
        if not rows:
            continue
        lines += [f"{heading}# `{script}`", "", "| file | run | machine | commit | load | headline figures |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| `{_cell(r.file)}` | {_cell(r.run)} | {_cell(r.machine)} | {_cell(r.commit)} | {_cell(r.load)} "
                  f"| {_cell(r.figures)} |" for r in rows]
        lines.append("")
    if not tables:
        lines += ["No result file could be read.", ""]
    if unread:
        lines += [f"{heading}# Files not read", "", "Kept, but not in a table above:", ""]
        lines += [f"- `{_cell(f)}`: {_cell(why)}" for f, why in unread]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default=RESULTS_DIR, help="the folder of kept result files (default: the course's)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.results):
        print(f"--results: {args.results} is not a folder; expected the folder of kept benchmark result files "
              f"(default {RESULTS_DIR})", file=sys.stderr)
        return 2
    print(markdown(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
