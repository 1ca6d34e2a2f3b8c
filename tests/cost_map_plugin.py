"""The suite's cost, written by the suite: seconds per test file, the slowest setups (where fixtures are
built) and the seconds of each registry exercise's own tests, from every test's report, so the next slow test is
visible in review.

An exercise's seconds are the call time of the tests parametrised by it (a parameter that is an ``Exercise`` of
``course_lib.checks.registry``): what adding an exercise adds to the suite through the tests that multiply with
the registry. tests/test_cost_map.py holds each to the growth budget (``EXERCISE_BUDGET_S``).

Waiting and making are counted apart: a test that blocks on the lock of a shared run (tests/shared_runs.py, bundle_student's
``_locked``) while another worker makes it is idle, not working; the seconds it waited are in the file's
``waited`` column (and out of its weight in the files' order, so a file that waited is not sent earlier next time).
The test that holds the lock while it makes the run puts the seconds held in its file's ``made`` column (the run
is the session's, made by whichever file needs it first); ``own`` is the file's total less both.

``make test`` sets ``COURSE_COST_MAP=tests/cost_map.json``; at the end of the session the controller (with
pytest-xdist, the reports of every worker reach it) writes that file and a Markdown table beside it
(``tests/cost_map.md``). A run of a few files writes nothing unless the variable is set. The order in which
``make test`` hands files to its workers (``tests/conftest.py``, longest first) is read from the JSON.
Does NOT cover: CPU time (these are wall seconds on the machine named in the file, under its load).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FILES: dict = {}
_SETUPS: list = []
_CALLS: list = []  # (seconds, test) of the calls of 5 s or more
_EXERCISES: dict = {}
_START = time.time()
_WAITS: list = []  # (lock, seconds) waited in this process since the last report
_MADE: list = []  # (lock, seconds) spent making a shared run in this process since the last report
_WAITED_TOTAL = [0.0]  # seconds waited in this process in all (what a hold of a lock leaves out of its own time)
EXERCISE_BUDGET_S = 10.0  # issue 62: adding an exercise through the registry adds at most this to the suite


def exercise_of(params: dict) -> str | None:
    """``assignment.name`` of the registry exercise among a test's parameters, or None (no exercise)."""
    for value in params.values():
        kind = type(value)
        if kind.__name__ == "Exercise" and kind.__module__ == "course_lib.checks.exercise":
            return f"{value.assignment}.{value.name}"
    return None


def pytest_collection_modifyitems(items):
    """Each test parametrised by an exercise carries its id in its reports (pytest-xdist sends a report's
    ``user_properties`` from the worker to the controller, which writes the map)."""
    for item in items:
        exercise = exercise_of(getattr(getattr(item, "callspec", None), "params", {}))
        if exercise:
            item.user_properties.append(("exercise", exercise))


def waited(lock: str, seconds: float) -> None:
    """Called by the shared runs' lock when taking it blocked for ``seconds`` (another process was making the run)."""
    _WAITS.append((os.path.basename(lock), round(seconds, 1)))
    _WAITED_TOTAL[0] += seconds


def waited_so_far() -> float:
    return _WAITED_TOTAL[0]


def made(lock: str, seconds: float) -> None:
    """Called by the shared runs' lock when this process held it ``seconds`` making the run (for every process
    of the session that reads it)."""
    _MADE.append((os.path.basename(lock), round(seconds, 1)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A phase's report carries what its test waited for and the shared runs it made (``user_properties`` reach
    the controller under xdist)."""
    outcome = yield
    for name, pending in (("waited", _WAITS), ("made", _MADE)):
        if pending:
            outcome.get_result().user_properties.append((name, list(pending)))
            pending.clear()


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_runtest_logreport(report):
    entry = _FILES.setdefault(_file_of(report.nodeid), {"tests": 0, "setup": 0.0, "call": 0.0, "teardown": 0.0,
                                                         "failed": 0, "waited": 0.0, "made": 0.0})
    entry[report.when] += report.duration
    for kind in ("waited", "made"):
        entry[kind] = entry.get(kind, 0.0) + sum(seconds for name, value in report.user_properties if name == kind
                                                 for _, seconds in value)
    if report.when == "call":
        entry["tests"] += 1
    if report.failed:
        entry["failed"] += 1
    if report.when == "setup" and report.duration >= 5:
        _SETUPS.append((round(report.duration, 1), report.nodeid))
    if report.when == "call" and report.duration >= 5:
        _CALLS.append((round(report.duration, 1), report.nodeid))
    if report.when == "call":  # a shared fixture's setup is paid once, whatever the number of exercises
        for name, value in report.user_properties:
            if name == "exercise":
                entry = _EXERCISES.setdefault(value, {"tests": 0, "seconds": 0.0})
                entry["tests"] += 1
                entry["seconds"] += report.duration


def _machine() -> str:
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model or platform.processor() or platform.machine()}"


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def write(path: str, files: dict, setups: list, wall: float, exercises: dict | None = None,
          calls: list | None = None) -> None:
    """Write the JSON at ``path`` and the Markdown table beside it (same name, ``.md``)."""
    for entry in files.values():
        entry["total"] = round(entry["setup"] + entry["call"] + entry["teardown"], 1)
        entry.setdefault("waited", 0.0)
        entry.setdefault("made", 0.0)
        entry["own"] = round(entry["total"] - entry["waited"] - entry["made"], 1)
        for key in ("setup", "call", "teardown", "waited", "made"):
            entry[key] = round(entry[key], 1)
    ordered = dict(sorted(files.items(), key=lambda kv: -kv[1]["total"]))
    per_exercise = {name: {"tests": e["tests"], "seconds": round(e["seconds"], 2)}
                    for name, e in sorted((exercises or {}).items(), key=lambda kv: -kv[1]["seconds"])}
    data = {"generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": _machine(), "commit": _commit(), "wall_seconds": round(wall, 1),
            "test_seconds": round(sum(e["total"] for e in files.values()), 1),
            "waited_seconds": round(sum(e["waited"] for e in files.values()), 1),
            "made_seconds": round(sum(e["made"] for e in files.values()), 1),
            "files": ordered, "slowest_setups": sorted(setups, reverse=True)[:30],
            "slowest_calls": sorted(calls or [], reverse=True)[:30], "exercises": per_exercise}
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")
    lines = ["# The suite's cost (generated by tests/cost_map_plugin.py; do not edit)", "",
             f"{data['generated']}, commit {data['commit']}, {data['machine']}: {data['wall_seconds']} s of wall "
             f"time, {data['test_seconds']} s of test time summed over the workers, of which "
             f"{data['waited_seconds']} s waiting for a shared run that another worker was making and "
             f"{data['made_seconds']} s making the shared runs (tests/shared_runs.py and the other users of "
             "bundle_student's lock: made once, by the first file that needs one, read by several). Per file: "
             "`waited` and `made` apart, and `own` = total less both: what the file's own tests cost.", "",
             "| file | tests | setup s | call s | teardown s | total s | waited s | made s | own s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| `{name}` | {e['tests']} | {e['setup']} | {e['call']} | {e['teardown']} | {e['total']} | {e['waited']} "
              f"| {e['made']} | {e['own']} |" for name, e in ordered.items()]
    lines += ["", "Setups of 5 s or more (where a fixture is built):", ""]
    lines += [f"- {seconds} s `{nodeid}`" for seconds, nodeid in data["slowest_setups"]]
    lines += ["", "Calls of 5 s or more:", ""]
    lines += [f"- {seconds} s `{nodeid}`" for seconds, nodeid in data["slowest_calls"]]
    if per_exercise:
        lines += ["", f"Seconds of the tests parametrised by each registry exercise ({len(per_exercise)} exercises, "
                      f"{sum(e['tests'] for e in per_exercise.values())} tests; budget {EXERCISE_BUDGET_S:g} s each), "
                      "the five largest:", ""]
        lines += [f"- {e['seconds']} s, {e['tests']} tests: `{name}`" for name, e in list(per_exercise.items())[:5]]
    with open(os.path.splitext(path)[0] + ".md", "w") as fh:
        fh.write("\n".join(lines) + "\n")


def pytest_sessionfinish(session, exitstatus):
    target = os.environ.get("COURSE_COST_MAP")
    if not target or hasattr(session.config, "workerinput") or not _FILES:
        return
    write(os.path.join(REPO, target) if not os.path.isabs(target) else target, _FILES, _SETUPS,
          time.time() - _START, _EXERCISES, _CALLS)


def file_seconds(path: str) -> dict:
    """{test file: seconds of its own work (total less what it waited for shared runs)} from a cost map written
    earlier; {} when there is none."""
    try:
        with open(path) as fh:
            return {name: entry["total"] - entry.get("waited", 0.0) for name, entry in json.load(fh)["files"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def exercise_seconds(path: str) -> dict | None:
    """{exercise: seconds of its own tests} from a cost map written earlier; None when the map has no such section
    (none, or one written before the section existed)."""
    try:
        with open(path) as fh:
            section = json.load(fh).get("exercises")
    except (OSError, ValueError, AttributeError):
        return None
    return {name: entry["seconds"] for name, entry in section.items()} if isinstance(section, dict) else None
