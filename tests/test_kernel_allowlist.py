"""Deny by default (issue 57, items 1-3): what a sandboxed grading kernel can see and import is an allowlist.

* the table of packages per lesson (``grading.packages.LESSON_PACKAGES``) covers what each lesson's notebook
  and the course_lib modules it reaches import, and holds no package a lesson does not import;
* a real sandboxed kernel walks its whole visible filesystem: every file lies under the allowlist (the
  system's programs and libraries, the interpreter, the lesson's packages, the edition's course_lib, the
  lesson's hidden feed, its own /tmp); another clone of the course elsewhere on the host is not there;
* a lesson's kernel holds its lesson's hidden feed only;
* the top-level packages a lesson's kernel can import equal the lesson's allowlist; unlisted ones
  (rapidfuzz, edlib, Biopython, nbgrader, SQLAlchemy) do not import.
"""
from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO
from sandbox_kernel import Kernel
from grading import packages
from grading.kernel import launcher

LESSONS = sorted(d for d in os.listdir(os.path.join(REPO, "notebooks"))
                 if os.path.isdir(os.path.join(REPO, "notebooks", d)) and d[:2].isdigit())
UNLISTED = {"rapidfuzz": "rapidfuzz", "edlib": "edlib", "Bio": "biopython", "nbgrader": "nbgrader",
            "sqlalchemy": "sqlalchemy"}


def _third_party(lesson: str) -> set[str]:
    """The installed distributions a lesson's notebook and its course_lib modules import."""
    by_module = md.packages_distributions()
    names = packages.lesson_imports(lesson) - set(sys.stdlib_module_names) - {"course_lib"}
    missing = sorted(n for n in names if n not in by_module)
    assert not missing, f"{lesson} imports {missing}, which no installed distribution provides"
    return {packages._norm(by_module[n][0]) for n in names}


# ------------------------------------------------------------------ the table
def test_every_lesson_has_an_allowlist():
    assert sorted(packages.LESSON_PACKAGES) == LESSONS, (
        "grading/packages.py LESSON_EXTRA must name exactly the lessons of notebooks/: "
        f"table {sorted(packages.LESSON_PACKAGES)}, notebooks {LESSONS}")


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_allowlist_covers_what_the_lesson_imports(lesson):
    """Every package the lesson's notebook and course_lib modules import is in its allowlist's closure; every
    package the table names beyond the kernel's own is one the lesson imports (no package 'just in case')."""
    wanted = _third_party(lesson)
    allowed = set(packages.closure(packages.LESSON_PACKAGES[lesson]))
    assert wanted <= allowed, (f"{lesson} imports {sorted(wanted - allowed)}, not in its allowlist: add the "
                               "distribution to LESSON_EXTRA in grading/packages.py")
    kernel_own = set(packages.closure(packages.KERNEL))
    companions = {packages._norm(c) for n in wanted for c in packages.COMPANIONS.get(n, ())}
    extra = {packages._norm(p) for p in packages.LESSON_EXTRA[lesson] + packages.CORE} - wanted - kernel_own - companions
    assert not extra, f"{lesson}'s allowlist names {sorted(extra)}, which neither its notebook nor course_lib imports"


def test_the_view_reads_each_distributions_files_as_importlib_metadata_does():
    """packages._first_parts reads RECORD as a CSV without a PackagePath per line: for every installed distribution,
    the first parts of the paths are those of ``dist.files`` (what the view's entries are made from)."""
    sp = packages.site_packages()
    dists = list(md.distributions(path=[sp]))
    assert len(dists) > 50, len(dists)
    for dist in dists:
        expected = {f.parts[0] if f.parts else "" for f in dist.files or []}
        assert packages._first_parts(dist) == expected, dist.metadata["Name"]


def test_transformers_only_for_the_lessons_that_use_it_and_unlisted_packages_nowhere():
    using = {lesson for lesson in LESSONS if "transformers" in _third_party(lesson)}
    assert using and set(LESSONS) - using, using
    for lesson in LESSONS:
        closure = set(packages.closure(packages.LESSON_PACKAGES[lesson]))
        assert ("transformers" in closure) == (lesson in using), (lesson, "transformers")
        for dist in UNLISTED.values():
            assert dist not in closure, f"{lesson}'s kernel would see {dist}, which no lesson imports"


# ------------------------------------------------------------------ a real sandboxed kernel
def _Kernel(workdir: str, env: dict | None = None) -> Kernel:
    return Kernel(workdir, env, timeout=120)


@pytest.fixture(scope="module")
def isolated():
    ok, why = launcher.bwrap_works()
    if not ok:
        pytest.skip(f"no bwrap isolation on this machine: {why} (the kernel then sees what the grader sees)")
    launcher.install_kernelspec()


@pytest.fixture(scope="module")
def other_clone():
    """Another copy of the course on the host, with a reference file and a source notebook."""
    base = tempfile.mkdtemp(prefix="other-clone-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None)
    os.chmod(base, 0o755)
    for rel, text in (("course_lib/attention.py", "def softmax(x):\n    return 'REFERENCE'\n"),
                      ("notebooks/01_attention/attention.ipynb", "{}")):
        os.makedirs(os.path.dirname(os.path.join(base, rel)), exist_ok=True)
        with open(os.path.join(base, rel), "w") as fh:
            fh.write(text)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _lesson_kernel(tmp_path_factory, lesson: str, by_env: bool = False):
    parent = tmp_path_factory.mktemp("submission")
    work = parent / ("work" if by_env else lesson)
    work.mkdir()
    os.chmod(parent, 0o755)
    os.chmod(work, 0o755)
    return _Kernel(str(work), env={launcher.LESSON_ENV: lesson} if by_env else None), str(work)


WALK = r'''
import json, os
skip = ("/proc", "/sys", "/dev")
files, tops = [], sorted(os.listdir("/"))
for folder, dirs, names in os.walk("/"):
    if folder.startswith(skip):
        dirs[:] = []
        continue
    for n in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
        files.append(os.path.join(folder, n))
print(json.dumps({"tops": tops, "files": files}))
'''


def _allowed_roots(lesson: str, root: str, ipc: str) -> list[str]:
    """The allowlist, stated from its sources: the sandbox's system paths, the interpreter, the lesson's
    package table (grading.packages, not the edition's view file), the edition's course_lib and feed."""
    sp = launcher.kernel_site_packages()
    roots = list(launcher.SYSTEM_PATHS) + list(launcher.ETC_PATHS) + launcher.python_dirs()
    roots += [link for _, link in launcher.python_links()]
    roots += [os.path.join(sp, e) for e in packages.view(packages.LESSON_PACKAGES[lesson], sp)]
    roots += [os.path.join(root, "course_lib"), os.path.join(root, "hidden_feed")]
    # the kernel's own, in its private /tmp: its folder, its home, the submission as handed in, the font list,
    # the folder of its IPC sockets
    roots += [launcher.KERNEL_WORKDIR, "/tmp/home", launcher.SUBMISSION_MOUNT, launcher.MPL_CACHE_MOUNT, ipc]
    if os.environ.get("COURSE_CACHE"):
        roots.append(os.path.realpath(os.environ["COURSE_CACHE"]))
    return roots


def test_a_lesson_kernel_sees_only_the_allowlist(isolated, other_clone, tmp_path_factory):
    """Walk the whole visible tree of a lesson 01 kernel: every file is under the allowlist; the
    repository, other clones, /work, /root and home folders are not there."""
    root = launcher.kernel_lib_root()
    k, work = _lesson_kernel(tmp_path_factory, "01_attention")
    try:
        seen = json.loads(k.run(WALK).strip().splitlines()[-1])
    finally:
        k.close()
    roots = _allowed_roots("01_attention", root, k.ipc)
    outside = [f for f in seen["files"] if not any(f == r or f.startswith(r.rstrip("/") + "/") for r in roots)]
    assert not outside, (f"{len(outside)} files outside the allowlist are visible to the kernel, e.g. "
                         f"{outside[:15]}; expected only {roots}")
    assert len(seen["files"]) > 1000, "the walk found the interpreter and its libraries"
    assert not [f for f in seen["files"] if f.startswith(other_clone)], "another clone of the course is visible"
    for secret in (os.path.join(REPO, "notebooks"), os.path.join(REPO, "course_lib"), os.path.join(REPO, ".git"),
                   os.path.join(REPO, "grading"), "/work/shared", os.path.expanduser("~/.bash_history"), "/home"):
        assert not [f for f in seen["files"] if f == secret or f.startswith(secret + "/")], \
            f"{secret} is visible in the kernel: the sandbox must bind only the allowlist"
    assert set(seen["tops"]) <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "tmp", "dev",
                                 "proc"} | {p.strip("/").split("/")[0] for p in roots}, seen["tops"]


def test_a_lesson_kernel_holds_its_own_hidden_feed_only(isolated, tmp_path_factory):
    root = launcher.kernel_lib_root()
    everything = sorted(os.listdir(os.path.join(root, "hidden_feed")))
    own = sorted(os.listdir(os.path.join(root, "lesson_feeds", "01_attention")))
    assert own == ["course_lib.checks.attention.pkl"] and len(everything) >= 12, (own, everything)
    probe = f'''
import os
print(sorted(os.listdir({os.path.join(root, "hidden_feed")!r})))
for p in [{os.path.join(root, "hidden_feed", "course_lib.checks.bpe.pkl")!r},
          {os.path.join(root, "lesson_feeds", "11_read_consensus", "course_lib.checks.consensus.pkl")!r},
          {os.path.join(root, "lesson_feeds", "12_long_range_dna", "course_lib.checks.dna.pkl")!r}]:
    print(os.path.exists(p))
'''
    k, _ = _lesson_kernel(tmp_path_factory, "01_attention")
    try:
        out = k.run(probe).split("\n")
    finally:
        k.close()
    assert out[0] == str(own), f"a lesson 01 kernel must hold lesson 01's hidden feed alone: {out}"
    assert out[1:4] == ["False"] * 3, f"lessons 06, 11 and 12's feeds must not be visible to lesson 01: {out}"


@pytest.mark.parametrize("lesson, by_env", [("01_attention", False), ("02_masking", True)])
def test_a_lesson_kernel_imports_its_allowlist_and_nothing_else(isolated, tmp_path_factory, lesson, by_env):
    """The importable top-level names (pkgutil over the kernel's sys.path) equal the lesson's allowlist's
    (grading.packages: the table's distributions and their dependencies), the standard library and the
    edition's course_lib; rapidfuzz, edlib, Biopython, nbgrader and SQLAlchemy, installed on the host, do not
    import."""
    for module in UNLISTED:
        assert importlib.util.find_spec(module), \
            f"{module} must be installed on the host for this test to mean anything"
    sp = launcher.kernel_site_packages()
    expected = set()
    for e in packages.view(packages.LESSON_PACKAGES[lesson], sp):
        if not e.endswith((".dist-info", ".egg-info", ".libs", ".data", ".pth")):
            expected.add(e.split(".", 1)[0])
    probe = f'''
import json, os, pkgutil, sys, importlib, importlib.util
std = os.path.realpath(os.path.dirname(os.__file__)) + "/"  # the interpreter's own: its tests and demo modules too
paths = [p for p in sys.path if p and os.path.isdir(p) and not (os.path.realpath(p) + "/").startswith(std)]
names = {{m.name for m in pkgutil.iter_modules(paths)}}
for p in paths:  # namespace packages (mpl_toolkits): folders without __init__.py that import
    names |= {{d for d in os.listdir(p) if d.isidentifier() and os.path.isdir(os.path.join(p, d))
              and importlib.util.find_spec(d) is not None}}
names = sorted(names - set(sys.stdlib_module_names))
refused = {{}}
for m in {sorted(UNLISTED)!r}:
    try:
        importlib.import_module(m); refused[m] = "IMPORTED"
    except ImportError as e:
        refused[m] = type(e).__name__
print(json.dumps([names, refused]))
'''
    k, _ = _lesson_kernel(tmp_path_factory, lesson, by_env=by_env)
    try:
        names, refused = json.loads(k.run(probe).strip().splitlines()[-1])
    finally:
        k.close()
    # the edition's root holds course_lib and hidden_feed (the lesson's .pkl files: a folder that imports as an
    # empty namespace package, no code in it)
    got = set(names) - {"course_lib", "hidden_feed"}
    assert "course_lib" in names
    assert got == expected, (f"{lesson}: importable but not allowed {sorted(got - expected)}; allowed but not "
                             f"importable {sorted(expected - got)}")
    assert ("transformers" in got) == (lesson == "01_attention"), sorted(got)
    assert refused == {m: "ModuleNotFoundError" for m in UNLISTED}, refused
