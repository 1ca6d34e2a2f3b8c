"""The students' bundle (grading/bundle.py) holds no solution, no equivalent and no hidden test input; it
installs with its README's commands; its stored mode names the same misconceptions as the repository.

The bundle is the default one (nothing released), built and installed once per session
(tests/bundle_fixtures.py: a fresh venv that sees the course environment's packages but not its
editable course_lib; the README's last install step, run offline). Running every lesson in it:
test_bundle_lessons_a.py, test_bundle_lessons_b.py, test_bundle_released.py.
"""
import ast
import json
import os
import re
import shlex
import subprocess

import nbformat
import pytest
import torch

import bundle_student
import graded_cells
from bundle_fixtures import built_bundle, shared_root
from conftest import REPO, source_notebooks
from course_lib.checks import core, registry
from grading import bundle

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return built_bundle(tmp_path_factory, [])


def _py_files(folder):
    for root, _, files in os.walk(folder):
        for f in files:
            yield os.path.join(root, f)


def _function_bodies(tree) -> set[str]:
    return {ast.dump(ast.Module(body=n.body[1:] if ast.get_docstring(n) else n.body, type_ignores=[]))
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _bodies_of(qualified: str) -> set[str]:
    """The bodies (own and nested functions') of a withheld function or class of the repository: in its lesson's
    solutions file (``course_lib.dna.reverse_complement``'s in ``course_lib/solutions/dna.py``)."""
    module, name = qualified.rsplit(".", 1)
    tree = ast.parse(open(os.path.join(REPO, "course_lib", "solutions", module.rsplit(".", 1)[1] + ".py")).read())
    node = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
    return {b for b in _function_bodies(node) if "Raise" not in b[:40]}


def _solutions() -> dict:
    out = {}
    for a, path in source_notebooks():
        nb = nbformat.read(path, as_version=4)
        out[f"{a}/{os.path.basename(path)}"] = {
            c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    return out


# ---------------------------------------------------------------- no solution
def test_bundle_holds_no_reference_and_no_equivalent(built):
    lib = os.path.join(built["site"], "course_lib")
    withheld = {}
    for e in registry.exercises():
        for qual in e.withheld:
            withheld[qual] = _bodies_of(qual)
    assert all(withheld.values()), [q for q, b in withheld.items() if not b]
    # a one-line method (`return len(self.vocab)`, shared by every tokenizer class) is nobody's solution
    all_bodies = {b for b in set().union(*withheld.values()) if len(b) > 250}
    found = []
    for path in _py_files(built["bundle"]):
        if path.endswith(".py"):
            found += [path for b in _function_bodies(ast.parse(open(path).read())) if b in all_bodies]
        assert not path.endswith((".db", ".sqlite")), f"a gradebook in the bundle: {path}"
    assert not found, f"bodies of withheld references or equivalents in the bundle: {sorted(set(found))}"
    # the installed package too, and each withheld name raises what it should
    # (a whole class, lesson 06's tokenizers, is withheld as a name: asking the module for it raises)
    code = ("import importlib, inspect, json, sys\nout = {}\nfor q in json.loads(sys.argv[1]):\n"
            "    m, n = q.rsplit('.', 1)\n    try:\n        obj = getattr(importlib.import_module(m), n)\n"
            "        ps = [p for p in inspect.signature(obj).parameters.values() if p.default is p.empty]\n"
            "        args = [None for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]\n"
            "        kwargs = {p.name: None for p in ps if p.kind is p.KEYWORD_ONLY}\n"
            "        obj(*args, **kwargs)\n        out[q] = 'returned'\n"
            "    except NotImplementedError as err:\n        out[q] = 'withheld' if 'not released' in str(err) else str(err)\n"
            "    except Exception as err:\n        out[q] = f'{type(err).__name__}: {err}'\n"
            "print('OUT ' + json.dumps(out))")
    proc = subprocess.run([built["python"], "-c", code, json.dumps(sorted(withheld))], capture_output=True,
                          text=True, cwd=built["bundle"], timeout=300)
    assert "OUT " in proc.stdout, proc.stderr[-3000:]
    out = json.loads(proc.stdout.rsplit("OUT ", 1)[1])
    assert {q: v for q, v in out.items() if v != "withheld"} == {}
    assert os.path.isdir(lib)


def test_the_edition_is_a_copy(built):
    """No code is rewritten to make the students' edition: every file it holds is the repository's, byte for
    byte, except the two data files its builder writes; what it lacks is the judge package and the solutions
    files of the lessons not released (all of them in this bundle)."""
    lib = os.path.join(built["bundle"], "course_lib")
    repo_lib = os.path.join(REPO, "course_lib")

    def files(root):
        return {os.path.relpath(p, root) for p in _py_files(root) if "__pycache__" not in p}
    shipped, repo = files(lib), files(repo_lib)
    written = {"_edition.json", os.path.join("checks", "_stored.json")}
    changed = [f for f in sorted(shipped - written)
               if open(os.path.join(lib, f), "rb").read() != open(os.path.join(repo_lib, f), "rb").read()]
    assert not changed, f"files of the edition that differ from the repository's: {changed}"
    assert shipped - written <= repo, sorted(shipped - written - repo)
    missing = sorted(repo - shipped)
    solutions = sorted(f for f in repo if f.startswith("solutions" + os.sep) and not f.endswith("__init__.py"))
    assert solutions and all(f in missing for f in solutions), "a withheld lesson's solutions file shipped"
    assert [f for f in missing if not f.startswith(("judge" + os.sep, "solutions" + os.sep))] == [], missing


def test_notebooks_hold_no_solution_text(built):
    texts = []
    for path in _py_files(os.path.join(built["bundle"], "notebooks")):
        if path.endswith(".ipynb"):
            texts.append(open(path).read())
    joined = "\n".join(texts)
    for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "hidden=True"):
        assert marker not in joined, f"{marker!r} in a bundle notebook"
    for rel, cells in _solutions().items():
        for gid, source in cells.items():
            parts = re.split(r"^[ \t]*### (?:BEGIN|END) SOLUTION[ \t]*$", source, flags=re.MULTILINE)
            body = [ln.strip() for ln in "\n".join(parts[1::2]).splitlines()
                    if ln.strip() and not ln.strip().startswith(("def ", '"""', "#"))]
            long_lines = [ln for ln in body if len(ln) > 30]
            assert not any(json.dumps(ln)[1:-1] in joined for ln in long_lines[:3]), f"solution text of {rel} {gid}"


def test_known_wrong_answers_are_not_shipped(built):
    """The checks ship without their known wrong answers (they are in course_lib/judge/, which the bundle leaves
    out): lesson 01's, and lesson 08's, the last lesson split."""
    source = open(os.path.join(built["bundle"], "course_lib", "checks", "attention.py")).read()
    assert "WRONG_" not in source and "np.swapaxes(k, -1, -2) if transpose_k" not in source
    assert not os.path.exists(os.path.join(built["bundle"], "course_lib", "judge"))
    source = open(os.path.join(built["bundle"], "course_lib", "checks", "clinical.py")).read()
    assert "WRONG_" not in source and "hidden.mean(dim=-2)" not in source


# ---------------------------------------------------------------- no hidden input
def test_no_hidden_test_input_in_the_bundle(built, tmp_path_factory):
    seen = graded_cells.shared_record(shared_root(tmp_path_factory))["seen"]
    vis, hid = seen["visible"], seen["hidden"]
    hidden_seeds = hid["seeds"] - vis["seeds"]
    hidden_labels = hid["labels"] - vis["labels"]
    hidden_strings = {s for s in hid["strings"] - vis["strings"] if s not in vis["labels"]}
    assert len(hidden_seeds) > 20 and len(hidden_labels) > 50, (len(hidden_seeds), len(hidden_labels))
    # seeds: no integer literal of a checks module (or of the stored values) is a hidden case's seed
    checks_dir = os.path.join(built["bundle"], "course_lib", "checks")
    leaks = []
    for f in sorted(os.listdir(checks_dir)):
        if f.endswith(".py"):
            ints = {n.value for n in ast.walk(ast.parse(open(os.path.join(checks_dir, f)).read()))
                    if isinstance(n, ast.Constant) and type(n.value) is int}
            leaks += [f"{f}: seed {s}" for s in sorted(ints & hidden_seeds)]
    # labels and literal inputs: no string constant of the bundle's Python files is one, and the stored
    # values (and, for inputs, the notebooks) do not hold one. Labels are only checked against sources and
    # stored values: a notebook's prose may say what the hidden tests cover ("the empty string").
    py_strings, stored, notebooks = set(), [], []
    for path in _py_files(built["bundle"]):
        if path.endswith(".py"):
            py_strings |= {n.value for n in ast.walk(ast.parse(open(path).read()))
                           if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        elif path.endswith(".json"):
            stored.append(open(path, encoding="utf-8").read())
        elif path.endswith(".ipynb"):
            notebooks.append(open(path, encoding="utf-8").read())
    stored_text, nb_text = "\n".join(stored), "\n".join(notebooks)

    def within(x, text):
        return x in text or json.dumps(x)[1:-1] in text

    leaks += [f"label {x!r}" for x in sorted(hidden_labels) if x in py_strings or within(x, stored_text)]
    leaks += [f"input {x[:60]!r}" for x in sorted(hidden_strings)
              if x in py_strings or within(x, stored_text) or within(x, nb_text)]
    assert not leaks, "hidden test inputs in the bundle:\n" + "\n".join(leaks[:60])


def test_hidden_flag_in_the_bundle_says_the_hidden_tests_are_not_there(built):
    code = ("from course_lib import checks\nimport numpy as np\n"
            "try:\n    checks.attention.check_softmax(lambda x, axis=-1: np.asarray(x), hidden=True)\n"
            "except RuntimeError as err:\n    print('SAID', err)\n")
    proc = subprocess.run([built["python"], "-c", code], capture_output=True, text=True, cwd=built["bundle"], timeout=300)
    assert proc.stdout.startswith("SAID " + core.HIDDEN_NOT_SHIPPED), proc.stdout + proc.stderr[-2000:]


# ---------------------------------------------------------------- install and README
def test_install_is_the_readmes_and_needs_no_instructor_tools(built):
    readme = open(os.path.join(built["bundle"], "README.md")).read()
    steps = bundle.student_install_steps(".")
    for step in steps:
        assert step in readme, f"the bundle README lacks the install step {step!r}"
    ran = built["install"]
    assert ran[1:4] == ["-m", "pip", "install"] and ran[-len(shlex.split(steps[-1])[2:]):] == shlex.split(steps[-1])[2:]
    assert [x for x in ran[4:] if x.startswith("--")] == ["--no-index", "--no-build-isolation"] and "-q" in ran
    assert "--index-url https://download.pytorch.org/whl/cpu" in steps[0] and bundle.torch_pin() in steps[0]
    assert torch.__version__.split("+")[0] == bundle.torch_pin().split("==")[1]
    assert not any(r.lower().startswith(("nbgrader", "jupyter-server")) for r in bundle.student_nodeps())
    assert "grade" not in bundle.STUDENT_EXTRAS.split(",")
    assert f"Python {bundle.requires_python().lstrip('>=')}" in readme
    for topic in ("conda", "~/.cache/course_lib", "COURSE_CACHE", "--force-reinstall", "jpserver_extensions"):
        assert topic in readme, topic


# ---------------------------------------------------------------- same misconception messages
@pytest.mark.parametrize("topic", ["attention", "masking", "bpe", "clinical"])
def test_misconception_messages_in_stored_mode_equal_the_repositorys(topic, built):
    """Every known wrong answer of lessons 01, 02, 06 and 08 gets the same message from the installed
    bundle's checks (stored mode) as from the repository's (live)."""
    here = bundle_student.misconception_messages(topic)
    there = bundle_student.misconception_messages(topic, python=built["python"], cwd=built["bundle"])
    assert sum(len(v) for v in here.values()) >= 5, here
    diff = {f"{check}: {name}": {"repository": msg, "bundle": there.get(check, {}).get(name)}
            for check, wrongs in here.items() for name, msg in wrongs.items()
            if there.get(check, {}).get(name) != msg}
    assert not diff, json.dumps(diff, indent=1)[:6000]
