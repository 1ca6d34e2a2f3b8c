"""The grading kernel's edition of ``course_lib``: the students' edition, built once per grading run.

The grader (the verifier, ``grading.verify``) imports the repository's ``course_lib``: the judge's
edition, with every reference. The sandboxed kernel that runs a submission mounts this edition instead
(``grading.kernel.launcher``: ``COURSE_KERNEL_LIB`` names its folder, the only course code the kernel can see):

* the references' bodies (``course_lib/solutions/<topic>.py``) are left out, so every graded exercise's
  reference and equivalents raise ``NotImplementedError`` (:mod:`course_lib.solutions`), exactly as in the
  students' bundle (``grading.bundle.copy_course_lib``, a copy: nothing rewritten); assignments whose
  solutions are released (``c.CourseBundle.solutions_released``) keep theirs, as the students' bundle does;
* no judge's material: ``course_lib/judge/`` (known wrong answers, right alternatives, promise breakers,
  hidden cases) is not copied; the checks modules are copied as they are;
* the checks hold no hidden case, seed or input, exactly as in the students' bundle: a hidden test's check
  (``course_lib.checks.core.graded``) runs the inputs the grader hands the kernel as data
  (``hidden_feed/`` beside ``course_lib``, written by the judge: ``grading.feed``);
* no stored reference output (the bundle's ``_stored.json``): in record mode no expected value exists
  in the kernel at all. Apart from that file and ``_edition.json``, ``course_lib`` here is the students'
  edition byte for byte (``tests/test_kernel_edition.py``).

So a blank answer that reaches for a reference in the kernel, by any route (a module's globals, a
source file run by path, a code object, ``pydoc.locate``), finds a stub that raises: the body is not in any
file the kernel can read.

    ensure()            # the folder (built on first use in this process, or the one COURSE_KERNEL_LIB names)
    build(root)         # write one into root

Beside ``course_lib`` the folder holds, for the grader only: ``hidden_feed/`` (every lesson's hidden inputs),
``lesson_feeds/<lesson>/`` (each lesson's alone: what that lesson's kernel mounts as its ``hidden_feed``) and
``_kernel_view.json`` (the site-packages entries each lesson's kernel sees, ``grading.packages``). A sandboxed
kernel sees ``course_lib`` and its own lesson's feed, never the folder itself (``grading/docs/sandbox.md``).

Does NOT cover: what the sandbox mounts beside it (``grading.kernel.launcher``), or the verdict (``grading.verify``).
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile

ENV = "COURSE_KERNEL_LIB"
EDITION = "grading-kernel"


def build(root: str, released: list[str] | None = None) -> list[str]:
    """Write the kernel's edition as ``root/course_lib``; return the solutions files left out."""
    from grading import bundle, feed, packages

    released = bundle.solutions_released() if released is None else list(released)
    lib = os.path.join(root, "course_lib")
    if os.path.exists(lib):
        shutil.rmtree(lib)
    left_out = bundle.copy_course_lib(lib, released)
    with open(os.path.join(lib, "_edition.json"), "w") as fh:
        json.dump({"edition": EDITION, "released": sorted(released)}, fh)
    feed.write(root)  # the hidden tests' inputs, as data beside course_lib (grading/feed.py), and each lesson's
    packages.write_view(root)  # which packages each lesson's kernel sees (grading/packages.py)
    # readable by the kernel's own uid (the sandbox runs it as an unused uid), writable by no one but the grader
    for folder, dirs, files in os.walk(root):
        os.chmod(folder, 0o755)
        for f in files:
            os.chmod(os.path.join(folder, f), 0o644)
    return left_out


def is_edition(root: str | None) -> bool:
    """Does ``root`` hold a kernel edition (``root/course_lib/_edition.json`` says so)?"""
    if not root:
        return False
    try:
        with open(os.path.join(root, "course_lib", "_edition.json")) as fh:
            return json.load(fh).get("edition") == EDITION
    except (OSError, ValueError, AttributeError):
        return False


def ensure() -> str:
    """The folder of the kernel's edition for this grading run, built on first use and removed when the
    process that built it exits; its path is put in ``COURSE_KERNEL_LIB`` so that the grading workers,
    the kernel launchers and the warm-kernel template started from here find the same one."""
    root = os.environ.get(ENV)
    if is_edition(root):
        return root
    root = tempfile.mkdtemp(prefix="course-kernel-lib-")
    atexit.register(shutil.rmtree, root, True)
    build(root)
    os.environ[ENV] = root
    return root
