"""The students' bundle holds no solution, and its visible tests still work (grading/bundle.py).

The bundle is built into a temporary folder from release notebooks made with nbgrader's
own preprocessors. A separate Python process that imports ``course_lib`` from the bundle
(never from the repository: checked) runs every release notebook's visible tests, once
with the instructor's solutions pasted in (all pass) and once as released (all fail).
The scan looks for any trace of a solution: a function body of a withheld reference,
solution or hidden-test text, a source notebook, a gradebook.
"""
import ast
import json
import os
import re
import subprocess
import sys

import nbformat
import pytest

from conftest import REPO, source_notebooks
from grading import bundle

pytestmark = pytest.mark.slow

RUNNER = r'''
import json, os, re, sys
bundle_dir, mode, lesson, lib_dir = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sys.path.insert(0, lib_dir)
import matplotlib
matplotlib.use("Agg")
import nbformat
import course_lib
assert os.path.dirname(os.path.dirname(os.path.abspath(course_lib.__file__))) == os.path.abspath(lib_dir), \
    course_lib.__file__
solutions = json.loads(sys.stdin.read())
results = {}
for rel in sorted(r for r in solutions if r.split("/")[0] == lesson):
    path = os.path.join(bundle_dir, "notebooks", rel)
    nb = nbformat.read(path, as_version=4)
    os.chdir(os.path.dirname(path))
    ns = {"__name__": "__notebook__"}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        gid = meta.get("grade_id")
        if gid == "setup" or meta.get("solution"):
            src = solutions[rel].get(gid, cell.source) if mode == "solved" else cell.source
            try:
                exec(compile(src, gid or "cell", "exec"), ns)
            except Exception as err:
                results[f"{rel}:{gid}"] = f"solution cell raised {type(err).__name__}: {err}"
        elif meta.get("grade") and "checks." in cell.source:
            try:
                exec(compile(cell.source, gid, "exec"), dict(ns))
                results[f"{rel}:{gid}"] = None
            except BaseException as err:
                results[f"{rel}:{gid}"] = f"{type(err).__name__}: {str(err)[:300]}"
print("RESULTS " + json.dumps(results))
'''

_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def _release(src_path: str, dst_path: str) -> None:
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions
    from traitlets.config import Config

    cfg = Config()
    cfg.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    nb = nbformat.read(src_path, as_version=4)
    for pre in (ClearSolutions(config=cfg), ClearHiddenTests(config=cfg), ClearOutput(config=cfg)):
        nb, _ = pre.preprocess(nb, {"language": "python"})
    nbformat.write(nb, dst_path)


LESSONS = [a for a, _ in source_notebooks()]
LESSONS = sorted(set(LESSONS))

# Known gaps: these lessons are marked xfail with the reason (see the closing note of the session):
GAPS: dict[str, str] = {}  # lesson -> why its bundle is known to leak (none at present)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    release = tmp_path_factory.mktemp("release")
    for a, path in source_notebooks():
        os.makedirs(release / a, exist_ok=True)
        folder = os.path.dirname(path)
        for f in os.listdir(folder):
            if f.endswith(".ipynb"):
                _release(os.path.join(folder, f), str(release / a / f))
            elif os.path.isfile(os.path.join(folder, f)):
                with open(os.path.join(folder, f), "rb") as src, open(release / a / f, "wb") as dst:
                    dst.write(src.read())
    return str(release)


@pytest.fixture(scope="module")
def store():
    return bundle.capture_all()


def _bundle_for(lesson, release, store, tmp_path):
    """The bundle as handed out for ``lesson``: the solutions of the lessons before it are out
    (later lessons reuse their pieces), those of ``lesson`` and after are withheld."""
    if lesson not in _BUILT:  # one build per lesson for this module's tests (none of them writes to it)
        released = [a for a in LESSONS if a < lesson]
        out = tmp_path / "student-bundle"
        summary = bundle.build(str(out), released=released, release_dir=release, store=store)
        _BUILT[lesson] = (str(out), summary, released)
    return _BUILT[lesson]


_BUILT: dict = {}


def _gap(lesson):
    if lesson in GAPS:
        pytest.xfail(GAPS[lesson])


def _solutions() -> dict:
    """{assignment/notebook: {grade_id: solution source}} from the instructor's notebooks."""
    out = {}
    for a, path in source_notebooks():
        nb = nbformat.read(path, as_version=4)
        out[f"{a}/{os.path.basename(path)}"] = {
            c.metadata["nbgrader"]["grade_id"]: _MARKERS.sub("", c.source) for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    return out


def _between_markers(grade_id: str, rel: str) -> str:
    """The text between ### BEGIN SOLUTION and ### END SOLUTION of one solution cell."""
    nb = nbformat.read(os.path.join(REPO, "notebooks", rel), as_version=4)
    source = next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    parts = re.split(r"^[ \t]*### (?:BEGIN|END) SOLUTION[ \t]*$", source, flags=re.MULTILINE)
    return "\n".join(parts[1::2])


def _run(bundle_dir: str, mode: str, lesson: str, lib_dir: str | None = None) -> dict:
    """Run the lesson's visible tests with the course_lib in ``lib_dir`` (default: the bundle folder)."""
    proc = subprocess.run([sys.executable, "-c", RUNNER, bundle_dir, mode, lesson, lib_dir or bundle_dir],
                          input=json.dumps(_solutions()),
                          capture_output=True, text=True, cwd=bundle_dir, timeout=1200,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_CHECK_MODE")})
    assert "RESULTS " in proc.stdout, proc.stderr[-3000:]
    return json.loads(proc.stdout.rsplit("RESULTS ", 1)[1])


@pytest.mark.parametrize("lesson", LESSONS)
def test_visible_tests_pass_on_the_solutions_and_fail_on_the_release(lesson, release, store, tmp_path):
    _gap(lesson)
    out, _, _ = _bundle_for(lesson, release, store, tmp_path)
    solved = _run(out, "solved", lesson)
    failed = {k: v for k, v in solved.items() if v is not None}
    assert solved and not failed, json.dumps(failed, indent=1)
    released = _run(out, "released", lesson)
    passed = [k for k, v in released.items() if v is None]
    assert released and not passed, passed


def _function_bodies(tree) -> set[str]:
    return {ast.dump(ast.Module(body=n.body[1:] if ast.get_docstring(n) else n.body, type_ignores=[]))
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


@pytest.mark.parametrize("lesson", LESSONS)
def test_bundle_holds_no_solution(lesson, release, store, tmp_path):
    _gap(lesson)
    out, summary, RELEASED = _bundle_for(lesson, release, store, tmp_path)
    secret = set()
    for a, _ in source_notebooks():
        if a not in RELEASED:
            secret |= bundle.exercise_names(a)
    # the withheld references' bodies, from the repository's course_lib
    withheld = set()
    for folder, _, files in os.walk(os.path.join(REPO, "course_lib")):
        for f in files:
            if f.endswith(".py") and "checks" not in folder:
                tree = ast.parse(open(os.path.join(folder, f)).read())
                for node in tree.body:
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in secret:
                        withheld |= {b for b in _function_bodies(node) if "Raise" not in b[:40]}
    assert withheld and summary["stripped"]
    found, texts = [], []
    for folder, _, files in os.walk(out):
        for f in files:
            path = os.path.join(folder, f)
            assert not f.endswith((".db", ".sqlite")), f"a gradebook in the bundle: {path}"
            if f.endswith(".py"):
                found += [path for b in _function_bodies(ast.parse(open(path).read())) if b in withheld]
            if f.endswith(".ipynb"):
                texts.append(open(path).read())
    assert not found, f"reference bodies of unreleased exercises in the bundle: {sorted(set(found))}"
    joined = "\n".join(texts)
    for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "hidden=True"):
        assert marker not in joined, f"{marker!r} in a bundle notebook"
    for rel, nb_solutions in _solutions().items():
        if rel.split("/")[0] in RELEASED:
            continue
        for gid, src in nb_solutions.items():
            solution = _between_markers(gid, rel)  # the docstring above the markers ships, by design
            body = [ln for ln in solution.splitlines() if ln.strip() and not ln.strip().startswith(("def ", '"""', "#"))]
            long_lines = [ln.strip() for ln in body if len(ln.strip()) > 30]
            assert not any(json.dumps(ln)[1:-1] in joined for ln in long_lines[:3]), f"solution text of {gid}"


def test_the_installed_bundle_runs_the_visible_tests(release, store, tmp_path):
    """As a student installs it (pip, offline, no dependencies fetched): stored values included."""
    lesson = LESSONS[0]
    out, _, _ = _bundle_for(lesson, release, store, tmp_path)
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--no-build-isolation", "--target", str(site), out], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (site / "course_lib" / "checks" / "_stored.json").is_file(), "the stored visible-test values were not installed"
    solved = _run(out, "solved", lesson, str(site))
    assert solved and not any(solved.values()), json.dumps(solved, indent=1)
    released = _run(out, "released", lesson, str(site))
    assert released and all(released.values()), json.dumps(released, indent=1)


def test_stored_values_are_visible_inputs_only(release, store, tmp_path):
    out, summary, _ = _bundle_for(LESSONS[0], release, store, tmp_path)
    assert summary["stored_values"] > 0
    # hidden checks ask the store for inputs it does not hold: they cannot run from the bundle
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import numpy as np\n"
            "from course_lib import checks\n"
            "def softmax(x, axis=-1):\n"
            "    x = np.asarray(x, dtype=float); e = np.exp(x - x.max(axis=axis, keepdims=True))\n"
            "    return e / e.sum(axis=axis, keepdims=True)\n"
            "try:\n    checks.attention.check_softmax(softmax, hidden=True)\nexcept AssertionError as e:\n"
            "    print('HIDDEN', e)\n")
    proc = subprocess.run([sys.executable, "-c", code, out], capture_output=True, text=True, timeout=300)
    assert "HIDDEN" in proc.stdout and "no expected output" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def test_known_wrong_answers_are_stubs_in_the_bundle(release, store, tmp_path):
    out, _, _ = _bundle_for(LESSONS[0], release, store, tmp_path)
    source = open(os.path.join(out, "course_lib", "checks", "attention.py")).read()
    assert "_not_shipped" in source
    assert "np.swapaxes(k, -1, -2) if transpose_k" not in source
