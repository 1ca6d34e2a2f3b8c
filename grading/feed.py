"""The hidden tests' inputs, handed to the grading kernel as data (``hidden_feed/``).

The grading kernel imports the students' edition of ``course_lib`` (``grading.edition``), in which the
checks hold no hidden case, no hidden seed and nothing that builds one (they are in ``course_lib/judge/``,
which the edition leaves out): a
``check_*(student, hidden=True)`` there calls ``course_lib.checks.core.run_hidden_from_feed``. What
it runs comes from here: the judge (this process, with the repository's ``course_lib``) runs every hidden
test cell of the source notebooks on the instructor's solutions, in record mode, and keeps each call of
the student's function as it was about to be made: the exercise, the input's label, its arguments, the
forbidden built-ins and the observer. Each call is pickled at that moment (``cloudpickle``: an observer or
a feature map defined inside a check travels by value), so an input the call then changes is stored as it
was given.

The verifier (``grading.verify``) never reads this file: it runs the judge's check with the inputs it
builds itself and the reference, answering each call from the kernel's record; the record's input
fingerprints must match its own, so a feed that differs from the judge's inputs fails the test, never
passes it.

    write(folder)          # folder/hidden_feed/<checks module>.pkl, every lesson's hidden tests (the judge's),
                           # and folder/lesson_feeds/<lesson>/<checks module>.pkl, each lesson's alone
    capture()              # {check's qualified name: [[pickled call, ...] per hidden call of that check]}

What a kernel is handed it can read and print (a submission sees every input its function is called
with); the hidden inputs are kept out of everything students receive, and out of the kernel's
``course_lib``, which is byte for byte the students' edition (``tests/test_kernel_edition.py``).

A sandboxed kernel sees its own lesson's part only: ``grading.kernel.launcher`` mounts
``lesson_feeds/<lesson>`` as the kernel's ``hidden_feed`` (beside its ``course_lib``), so a lesson 01
submission cannot read (or print into its feedback) lesson 06's, 11's or 12's hidden inputs.

Does NOT cover: mounting it (``grading.kernel.launcher``) or the verdict (``grading.verify``).
"""
from __future__ import annotations

import ast
import io
import os
import pickle
import re

from grading import NOTEBOOKS_DIR

FOLDER = "hidden_feed"  # = course_lib.checks.core.FEED_FOLDER: one file per checks module
LESSONS = "lesson_feeds"  # beside FOLDER: lesson_feeds/<lesson>/, that lesson's feed alone (its kernel's FOLDER)
_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def _nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def hidden_calls(source: str) -> list[tuple[str, str, str]]:
    """The ``checks.<module>.<check>(<name>, hidden=True)`` calls of a test cell, in order: (module, check, name)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Attribute) and isinstance(node.func.value.value, ast.Name)
                and node.func.value.value.id == "checks"):
            continue
        if any(k.arg == "hidden" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in node.keywords) and node.args and isinstance(node.args[0], ast.Name):
            found.append((node.func.value.attr, node.func.attr, node.args[0].id))
    return sorted(found, key=lambda c: source.find(f"{c[0]}.{c[1]}("))


def _solutions(path: str) -> tuple[dict, "nbformat.NotebookNode"]:
    """(The namespace of the notebook's setup cell and the instructor's solution cells, run here; the notebook)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    ns: dict = {"__name__": "__notebook__"}
    cwd = os.getcwd()
    os.chdir(os.path.dirname(path))
    try:
        for cell in nb.cells:
            meta = _nbg(cell)
            if cell.cell_type == "code" and (meta.get("grade_id") == "setup" or meta.get("solution")):
                exec(compile(_MARKERS.sub("", cell.source), f"<{meta.get('grade_id')}>", "exec"), ns)
    finally:
        os.chdir(cwd)
    return ns, nb


def capture(notebooks: list[str] | None = None, lessons: dict | None = None) -> dict:
    """Run every hidden check call of the source notebooks on the instructor's solutions; return the feed.
    ``lessons``, when given, is filled with {lesson (the notebook's folder): {check: [index of its run in the
    feed's list, ...]}}: which runs are that lesson's (:func:`lesson_feed`)."""
    import cloudpickle
    import matplotlib

    matplotlib.use("Agg")
    import course_lib.checks as checks
    from course_lib.checks import core, transcript

    if notebooks is None:
        notebooks = sorted(os.path.join(root, f) for root, _, files in os.walk(NOTEBOOKS_DIR) for f in files
                           if f.endswith(".ipynb") and ".ipynb_checkpoints" not in root)
    # a check's local functions (an observer, a feature map) travel by value; course_lib's own modules by name
    import importlib

    shared = {"__init__", "core", "transcript", "registry", "exercise"}  # by name: the kernel's own state lives in them
    modules = [importlib.import_module(f"course_lib.checks.{f[:-3]}")
               for f in sorted(os.listdir(os.path.dirname(checks.__file__)))
               if f.endswith(".py") and not f.startswith("_") and f[:-3] not in shared]
    for m in modules:
        cloudpickle.register_pickle_by_value(m)
    feed: dict = {}
    try:
        for path in notebooks:
            try:
                ns, nb = _solutions(path)
            except Exception as err:
                raise RuntimeError(f"{os.path.relpath(path, os.path.dirname(NOTEBOOKS_DIR))}: its setup and solution "
                                   f"cells, run to record the hidden tests' inputs, raised {type(err).__name__}: "
                                   f"{err}") from err
            for cell in nb.cells:
                if cell.cell_type != "code" or not _nbg(cell).get("grade") or _nbg(cell).get("solution"):
                    continue
                for module, check, name in hidden_calls(cell.source):
                    calls: list = []
                    outputs: list = []

                    class _Pickler(cloudpickle.Pickler):
                        def persistent_id(self, obj, _outputs=outputs):
                            # an input that is an earlier call's output: recorded as its place, so the kernel
                            # passes the student's own output there (core.output_path), never the solution's
                            path = core.output_path(_outputs, obj) if _outputs and not isinstance(
                                obj, (int, float, str, bool, type(None))) else None
                            return None if path is None else ("output", path)

                    def keep(fn, exercise, case, forbidden, observe, _calls=calls):
                        buffer = io.BytesIO()
                        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(
                            (fn, exercise, case.label, case.args, case.kwargs, forbidden, observe))
                        _calls.append(buffer.getvalue())

                    fn = getattr(getattr(checks, module), check)
                    core._FEED.capturing, core._FEED.outputs = keep, outputs
                    cwd = os.getcwd()
                    os.chdir(os.path.dirname(path))
                    try:
                        with transcript.using("record") as state:
                            fn(core.StudentSlot(ns[name]), hidden=True)
                            recorded = list(state.calls)
                    finally:
                        core._FEED.capturing, core._FEED.outputs = None, None
                        os.chdir(cwd)
                    if len(recorded) != len(calls):
                        raise RuntimeError(f"{fn.__module__}.{check}: {len(calls)} calls of the student's function, "
                                           f"{len(recorded)} records: a call outside core.call_student?")
                    # a call the solution answers by raising (a promised ValueError) is one the check goes on after
                    runs = feed.setdefault(f"{fn.__module__}.{check}", [])
                    if lessons is not None:
                        lessons.setdefault(os.path.basename(os.path.dirname(path)), {}).setdefault(
                            f"{fn.__module__}.{check}", []).append(len(runs))
                    runs.append([(blob, "raised" in entry) for blob, entry in zip(calls, recorded)])
    finally:
        for m in modules:
            cloudpickle.unregister_pickle_by_value(m)
    return feed


def write(folder: str, notebooks: list[str] | None = None) -> str:
    """Write the feed into ``folder/hidden_feed/``, one file per checks module (a kernel reads its lesson's
    only); return that folder. Made once per content of ``course_lib`` and the notebooks, then copied from
    the grader's cache (:func:`cache_dir`)."""
    import shutil

    import subprocess
    import sys

    out = os.path.join(folder, FOLDER)
    cached = os.path.join(cache_dir(), _content_digest())
    if not os.path.isfile(os.path.join(cached, "complete")):
        tmp = cached + f".tmp{os.getpid()}"
        # in a fresh interpreter: the notebooks' setup cells seed generators and set torch's threads, which the
        # grading process keeps to itself
        cmd = [sys.executable, "-m", "grading.feed", tmp] + list(notebooks or [])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                              cwd=os.path.dirname(NOTEBOOKS_DIR),
                              env={k: v for k, v in os.environ.items() if k != "COURSE_CHECK_MODE"})
        if proc.returncode:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError("writing the hidden tests' inputs (python -m grading.feed) failed:\n"
                               + proc.stderr[-4000:])
        try:
            os.rename(tmp, cached)
        except OSError:  # another grading run made it first
            shutil.rmtree(tmp, ignore_errors=True)
    lessons = os.path.join(folder, LESSONS)
    for path in (out, lessons):
        if os.path.exists(path):
            shutil.rmtree(path)
    shutil.copytree(cached, out, ignore=shutil.ignore_patterns("complete", LESSONS))
    shutil.copytree(os.path.join(cached, LESSONS), lessons)
    return out


def cache_dir() -> str:
    """Where the grader keeps the feeds it made (``$COURSE_FEED_CACHE``, else ``~/.cache/course-hidden-feed``):
    never mounted into a kernel."""
    import tempfile

    root = os.environ.get("COURSE_FEED_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "course-hidden-feed")
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
        st = os.stat(root)
        if st.st_uid == os.getuid() and not st.st_mode & 0o022 and os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    # no cache of our own to write (a read-only home on a lab machine, a folder others can write): this run's own
    return _private_cache()


_PRIVATE: list = []


def _private_cache() -> str:
    import atexit
    import shutil
    import tempfile

    if not _PRIVATE:
        _PRIVATE.append(tempfile.mkdtemp(prefix="course-hidden-feed-"))
        atexit.register(shutil.rmtree, _PRIVATE[0], True)
    return _PRIVATE[0]


def _content_digest() -> str:
    """A digest of what the feed depends on: every source file of course_lib and of the notebooks' folder, the
    names and sizes of the data files there, and the versions of torch, numpy and cloudpickle."""
    import hashlib

    from grading import REPO_DIR

    h = hashlib.sha256(b"feed layout 2: per lesson")
    for top in (os.path.join(REPO_DIR, "course_lib"), NOTEBOOKS_DIR):
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", ".ipynb_checkpoints"))
            for f in sorted(files):
                path = os.path.join(root, f)
                h.update(os.path.relpath(path, top).encode() + b"\0")
                if f.endswith((".py", ".ipynb", ".json")):
                    with open(path, "rb") as fh:
                        h.update(hashlib.sha256(fh.read()).digest())
                else:
                    h.update(str(os.path.getsize(path)).encode())
    from importlib.metadata import version  # the installed versions, read without importing torch (seconds)

    h.update(" ".join(version(d) for d in ("torch", "numpy", "cloudpickle")).encode())
    return h.hexdigest()[:24]


def _by_module(feed: dict) -> dict:
    by_module: dict = {}
    for check, runs in feed.items():
        by_module.setdefault(check.rsplit(".", 1)[0], {})[check] = runs
    return by_module


def _dump(folder: str, feed: dict) -> None:
    os.makedirs(folder, exist_ok=True)
    for module, entries in _by_module(feed).items():
        with open(os.path.join(folder, module + ".pkl"), "wb") as fh:
            pickle.dump(entries, fh, protocol=pickle.HIGHEST_PROTOCOL)


def lesson_feed(feed: dict, runs: dict) -> dict:
    """One lesson's part of the feed: for each check it calls hidden, its own runs, in its notebook's order
    (``runs``: that lesson's entry of :func:`capture`'s ``lessons``). Another lesson's inputs are not in it."""
    return {check: [feed[check][i] for i in indices] for check, indices in runs.items()}


def _write_capture(tmp: str, notebooks: list[str] | None) -> None:
    lessons: dict = {}
    feed = capture(notebooks, lessons)
    _dump(tmp, feed)  # every lesson's: the judge's copy (and a kernel with no isolation: grading/kernel/launcher.py)
    for lesson, runs in lessons.items():
        _dump(os.path.join(tmp, LESSONS, lesson), lesson_feed(feed, runs))
    open(os.path.join(tmp, "complete"), "w").close()


if __name__ == "__main__":
    import sys

    _write_capture(sys.argv[1], sys.argv[2:] or None)
