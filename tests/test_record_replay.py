"""Every graded test cell can be judged outside the kernel (course_lib.checks.transcript).

For each source notebook: the instructor's solutions are run in this process; each
graded test cell's checks run in *record* mode (as in the grading kernel), the record
goes through JSON (as through the notebook file), and ``grading.verify`` replays it.
The verdict must equal the live verdict: pass for the solutions, the same message for
each demo misconception (grading/demo/<assignment>.py). A new lesson is covered as soon
as its notebook exists.
"""
import copy
import json
import os

import nbformat
import pytest

from conftest import source_notebooks
from course_lib.checks import core, transcript
from grading import demo, verify

NOTEBOOKS = source_notebooks()
IDS = [a for a, _ in NOTEBOOKS]


def nbg(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _namespace(nb, replace: dict | None = None) -> dict:
    """Run the setup cell and every solution cell (demo replacements applied) in a fresh namespace."""
    import matplotlib

    matplotlib.use("Agg")
    ns: dict = {"__name__": "__notebook__"}
    for cell in nb.cells:
        meta = nbg(cell)
        if cell.cell_type != "code" or not (meta.get("grade_id") == "setup" or meta.get("solution")):
            continue
        source = (replace or {}).get(meta.get("grade_id"), cell.source)
        try:
            exec(compile(source, f"<{meta.get('grade_id')}>", "exec"), ns)
        except Exception:
            pass  # a crashing demo cell: its names stay undefined, as in the kernel
    return ns


def _test_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and nbg(c).get("grade") and not nbg(c).get("solution")]


class _FedChecks:
    """``checks`` as the grading kernel's edition has it: a check called with hidden=True makes the calls the
    grader's feed holds (grading.feed) instead of building the hidden inputs itself."""

    def __init__(self, runs: dict, module=None):
        self._runs, self._module, self._used = runs, module, {}

    def __getattr__(self, name):
        from course_lib import checks

        if self._module is None:
            return _FedChecks(self._runs, getattr(checks, name))
        fn = getattr(self._module, name)
        if not name.startswith("check_"):
            return fn
        key = f"{self._module.__name__}.{name}"

        def check(student, hidden=False):
            if not hidden:
                return fn(student)
            n = self._used.get(key, 0)
            self._used[key] = n + 1
            return core._run_feed_calls(self._runs[key][n], student)
        return check


@pytest.fixture(scope="module")
def hidden_feed():
    """The hidden tests' inputs as the grader hands them to the kernel (grading.feed), captured once."""
    from grading import feed

    return feed.capture()


def _graded(kernel_verdict: str | None, calls: list, source: str) -> str | None:
    """What the student's feedback says, as grading.verify decides it: the verifier's verdict on the record; where
    the kernel's cell failed (scored 0 either way), the verifier's message replaces the kernel's when it has one."""
    records = json.loads(json.dumps(calls, ensure_ascii=False).encode("utf-8"))  # as the kernel's messages carry it
    verdict = verify.verify_cell(source, records)
    if kernel_verdict is None:
        return verdict
    return verdict if verdict is not None and not verdict.startswith("this test could not be verified") \
        else kernel_verdict


def _fed_verdict(cell, ns, runs) -> str | None:
    """The verdict when the hidden checks run from the grader's feed in the kernel (record), replayed here."""
    kernel_verdict = None
    with transcript.using("record") as state:
        try:
            exec(compile(cell.source, "<test>", "exec"), dict(ns, checks=_FedChecks(runs)))
        except AssertionError as err:
            kernel_verdict = str(err)
        except Exception as err:
            kernel_verdict = f"{type(err).__name__}: {err}"
        calls = state.calls
    return _graded(kernel_verdict, calls, cell.source)


def _live_and_replayed(cell, ns) -> tuple[str | None, str | None]:
    """(live verdict, verdict of record -> JSON -> replay) of one test cell."""
    def run(mode_name):
        with transcript.using(mode_name) as state:
            try:
                exec(compile(cell.source, "<test>", "exec"), dict(ns))
            except AssertionError as err:
                return str(err), state.calls
            except Exception as err:  # NameError etc.: the kernel cell fails, scores 0 either way
                return f"{type(err).__name__}: {err}", state.calls
            return None, state.calls

    live, _ = run("live")
    kernel_verdict, calls = run("record")
    return live, _graded(kernel_verdict, calls, cell.source)


@pytest.mark.parametrize("assignment,path", NOTEBOOKS, ids=IDS)
def test_solutions_pass_when_verified_outside_the_kernel(assignment, path, monkeypatch, hidden_feed):
    monkeypatch.chdir(os.path.dirname(path))
    nb = nbformat.read(path, as_version=4)
    ns = _namespace(nb)
    failures = []
    for cell in _test_cells(nb):
        live, replayed = _live_and_replayed(cell, ns)
        fed = _fed_verdict(cell, ns, hidden_feed)
        if live is not None or replayed is not None or fed is not None:
            failures.append(f"{nbg(cell)['grade_id']}: live={live!r}\n  replayed={replayed!r}\n  fed={fed!r}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("assignment,path", NOTEBOOKS, ids=IDS)
def test_misconception_gets_the_same_verdict_outside_the_kernel(assignment, path, monkeypatch, hidden_feed):
    if assignment not in demo.assignments_with_demo():
        pytest.skip(f"{assignment} has no demo class yet")
    monkeypatch.chdir(os.path.dirname(path))
    spec = demo.load_spec(assignment)
    nb = nbformat.read(path, as_version=4)
    ns = _namespace(nb, copy.deepcopy(spec.MISCONCEPTION))
    failed_somewhere = False
    for cell in _test_cells(nb):
        live, replayed = _live_and_replayed(cell, ns)
        fed = _fed_verdict(cell, ns, hidden_feed)  # the hidden inputs from the grader's feed, as in the kernel
        assert (live is None) == (replayed is None) == (fed is None), (nbg(cell)["grade_id"], live, replayed, fed)
        if live is not None:
            failed_somewhere = True
            assert replayed == live, (live, replayed)  # the same message (issue 34), not only the same exercise
            assert fed == live, (live, fed)
    assert failed_somewhere, f"{assignment}: the demo misconception fails no test"


# ---------------------------------------------------------------- issue 33 item 2: nothing the kernel says about itself
# The cases (tests/adversarial/cases.py, LESSON_CASES) are recorded in a child process under the sandbox's
# address-space bound, exactly as grading.kernel.launcher starts a kernel (RLIMIT_AS soft = hard =
# COURSE_SANDBOX_MEMORY_MB MiB): lesson 07's graded memory bound rests on it.
_RECORD_CHILD = r'''
import json, os, sys
import nbformat
from course_lib.checks import transcript

path, replace, out_file = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
nb = nbformat.read(path, as_version=4)
nbg = lambda c: c.get("metadata", {}).get("nbgrader", {})
ns = {"__name__": "__notebook__"}
for cell in nb.cells:
    meta = nbg(cell)
    if cell.cell_type == "code" and (meta.get("grade_id") == "setup" or meta.get("solution")):
        try:
            exec(compile(replace.get(meta.get("grade_id"), cell.source), "<%s>" % meta.get("grade_id"), "exec"), ns)
        except Exception:
            pass
result = {}
for cell in nb.cells:
    meta = nbg(cell)
    if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
        with transcript.using("record") as state:
            try:
                exec(compile(cell.source, "<test>", "exec"), dict(ns))
                kernel = None
            except AssertionError as err:
                kernel = str(err)
            except Exception as err:
                kernel = "%s: %s" % (type(err).__name__, err)
            calls = list(state.calls)
        result[meta["grade_id"]] = {"kernel": kernel, "calls": calls, "source": cell.source}
with open(out_file, "w") as fh:
    json.dump(result, fh, ensure_ascii=False)
'''


def _bounded():
    import resource

    from course_lib.checks.efficient import sandbox_memory_bytes

    limit = sandbox_memory_bytes()
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def record_in_a_bounded_kernel(path: str, replace: dict, tmp_path) -> dict:
    """grade_id -> (kernel's verdict, verifier's verdict) of every graded test cell, recorded in a child
    process under the sandbox's RLIMIT_AS and judged here by grading.verify (as VerifyOutsideKernel does:
    the verifier's message replaces a failing kernel's when the cell left records)."""
    import subprocess
    import sys

    out_file = str(tmp_path / "records.json")
    proc = subprocess.run([sys.executable, "-c", _RECORD_CHILD, path, json.dumps(replace), out_file],
                          cwd=os.path.dirname(path), capture_output=True, text=True, preexec_fn=_bounded,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out_file) as fh:
        recorded = json.load(fh)
    verdicts = {}
    for grade_id, r in recorded.items():
        records = json.loads(json.dumps(r["calls"], ensure_ascii=False).encode("utf-8"))
        verifier = verify.verify_cell(r["source"], records) if (records or r["kernel"] is None) else None
        verdicts[grade_id] = (r["kernel"], verifier)
    return verdicts


def _lesson_cases():
    from adversarial import cases

    return [pytest.param(c, id=f"{c.assignment}-{c.student}") for c in cases.LESSON_CASES]


@pytest.mark.parametrize("case", _lesson_cases())
def test_lesson_case(case, tmp_path):
    """Each hostile answer of a later lesson scores 0 on exactly the tests it names, with the note, and
    every other graded test of the notebook passes (recorded under the sandbox's memory bound)."""
    [path] = [p for a, p in NOTEBOOKS if a == case.assignment]
    verdicts = record_in_a_bounded_kernel(path, case.replace, tmp_path)
    assert set(case.failing) <= set(verdicts), sorted(verdicts)
    for grade_id, (kernel, verifier) in verdicts.items():
        if grade_id in case.failing:
            note = verifier if verifier is not None else kernel
            assert note is not None, f"{case.student}: {grade_id} passed"
            assert case.failing[grade_id] in note, (grade_id, note)
        else:
            assert kernel is None and verifier is None, (case.student, grade_id, kernel, verifier)
