"""Shared fixtures: the list of assignments, and nbgrader configured the way grading runs it."""
import os
import sys
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The per-cell limit of the end-to-end runs that grade the demo class (every lesson, tests/shared_runs.py
# demo_class, or lesson 01's students alone): its crash student's endless loop in lesson 01 costs one whole limit
# (with make grade's 30 s it took 54.6 s of a worker's time in a full suite run; the slowest of the other 47
# submissions 7.4 s). A loaded machine costs no honest student a point at 8 s: the time a cell's kernel waits
# for a CPU is given back to it, and a timed-out instructor cell (setup) is re-run in place with more time
# (grading/kernel/client.py ResilientExecute); lesson 01's answers run in milliseconds, and the slowest graded cell
# of the twelve lessons took 2.2 s in that run (lesson 09's, measured from the autograded notebooks' timings).
LESSON01_CELL_TIMEOUT = "8"
NOTEBOOKS = os.path.join(REPO, "notebooks")
if REPO not in sys.path:  # the grading tools are a plain package at the repository root
    sys.path.insert(0, REPO)

os.environ.setdefault("MPLBACKEND", "Agg")

import cost_map_plugin  # noqa: E402  (tests/cost_map_plugin.py: the suite's cost, and the files' order)


def source_notebooks():
    """(assignment, path) of every source notebook, in lesson order."""
    out = []
    for a in sorted(os.listdir(NOTEBOOKS)):
        folder = os.path.join(NOTEBOOKS, a)
        if os.path.isdir(folder) and a[:2].isdigit():
            out += [(a, os.path.join(folder, f)) for f in sorted(os.listdir(folder)) if f.endswith(".ipynb")]
    return out


_IPC_ROOT = None


def _ipc_root() -> str:
    """One folder per test process for the kernels' IPC sockets, removed when the process exits
    (a run of `make test` leaves nothing in /tmp)."""
    global _IPC_ROOT
    if _IPC_ROOT is None:
        import atexit
        import shutil

        _IPC_ROOT = tempfile.mkdtemp(prefix="nbt-ipc-")
        atexit.register(shutil.rmtree, _IPC_ROOT, True)
    return _IPC_ROOT


def ipc_config():
    """traitlets config for executing notebooks over IPC sockets (no TCP port races between xdist workers), with the
    course's kernel client (grading/kernel/polling.py: no wait out a limit for a reply that came)."""
    from grading.kernel import polling

    cfg = polling.config()
    cfg.KernelManager.transport = "ipc"
    cfg.KernelManager.ip = os.path.join(tempfile.mkdtemp(dir=_ipc_root()), "kernel")
    cfg.Execute.timeout = 120
    cfg.Execute.kernel_name = "python3"
    return cfg


def snapshot(folder):
    """{relative path: (bytes, mtime_ns)} of every file under ``folder`` (hidden ones included): what a test
    compares to show that grading left an instructor's files exactly as placed."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, folder)] = (fh.read(), os.stat(path).st_mtime_ns)
    return out


def check_tables(qualified: str, prefix: str) -> dict:
    """{name: value} of the module-level tables (``WRONG_*`` lists, ``FORBIDDEN*`` tuples: ``prefix``) that a
    registered check's code, or a private helper of its module it calls, names."""
    import importlib
    import inspect

    from course_lib.checks import core, registry

    check = registry.resolve(qualified)
    module = importlib.import_module(check.__module__)
    codes = [inspect.unwrap(check).__code__]  # once the checks package has been imported, each check is wrapped
    for helper in (n for n in codes[0].co_names if n.startswith("_")):
        fn = getattr(module, helper, None)
        if callable(fn) and hasattr(inspect.unwrap(fn), "__code__"):
            codes.append(inspect.unwrap(fn).__code__)
    names = dict.fromkeys(n for code in codes for n in code.co_names if n.startswith(prefix))
    found = {n: getattr(module, n) for n in names}
    judge = core.judge(module.__name__)  # a split lesson's checks name their WRONG_* tables as core.wrongs(__name__, "X")
    if judge is not None:
        for code in codes:
            for c in code.co_consts:
                if isinstance(c, str) and c.isidentifier() and hasattr(judge, prefix + c):
                    found.setdefault(prefix + c, getattr(judge, prefix + c))
    return found


@pytest.fixture(scope="session")
def repo_dir():
    return REPO

# nbgrader runs `alembic` from PATH; make this environment's bin come first even
# when pytest was started as .venv/bin/python -m pytest without activating it.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


def pytest_configure(config):
    """The nbval runs of the notebooks get the prose-numbers check (tests/prose_numbers_plugin.py) after each
    notebook's last cell, unless it was already loaded with ``-p prose_numbers_plugin``.

    The grading kernel's edition of course_lib (grading/edition.py, about 12 CPU-seconds to build) is built
    once for a whole run under xdist (`make test`): the controller builds it before xdist starts its workers,
    which inherit COURSE_KERNEL_LIB (as a grading run's workers do), so every sandboxed kernel a test starts
    mounts the students' edition. A run without xdist (a contributor's `pytest tests/test_checks_attention.py`)
    builds it only when a collected file starts kernels or grading runs (``kernel_edition`` below)."""
    import prose_numbers_plugin

    if getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        from grading import edition

        edition.ensure()
    if not config.pluginmanager.is_registered(cost_map_plugin):
        config.pluginmanager.register(cost_map_plugin, "cost_map_plugin")
    if not config.pluginmanager.is_registered(prose_numbers_plugin) \
            and not config.pluginmanager.has_plugin("prose_numbers_plugin"):
        config.pluginmanager.register(prose_numbers_plugin, "prose_numbers_plugin")


# pytest-xdist (--dist loadfile) hands out whole files, one at a time to whichever worker is nearly done; by
# default it first sorts them by their NUMBER of tests, which put the slow files (few tests each) last, one of
# them running alone at the end while the other worker idled. `make test` passes --no-loadscope-reorder, so
# files go in collection order: the longest first (longest-processing-time-first scheduling), by the seconds
# each took in the last full run, which the suite writes itself (tests/cost_map.json, tests/cost_map_plugin.py).
SLOW_FILES = cost_map_plugin.file_seconds(os.path.join(REPO, "tests", "cost_map.json"))


def pytest_collection_modifyitems(session, config, items):
    """Slow files first, longest first (SLOW_FILES); the order inside a file is kept. Each test of a file that
    starts sandboxed kernels or grading runs gets the ``kernel_edition`` fixture."""
    def weight(item):
        rel = os.path.relpath(str(item.path), REPO).replace(os.sep, "/")
        return -SLOW_FILES.get(rel, 0)

    items[:] = sorted(items, key=weight)  # sorted() is stable
    needs = {}
    for item in items:
        path = str(item.path)
        if path not in needs:
            needs[path] = path.endswith(".py") and _starts_kernels(path)
        if needs[path] and "kernel_edition" not in item.fixturenames:
            item.fixturenames.append("kernel_edition")


# what a test file names when it starts a sandboxed kernel or a grading run (directly or through a helper module)
_KERNEL_WORDS = ('"-m", "grading"', "run_grading", "course-sandbox", "sandbox_kernel", "shared_runs", "classrun",
                 "bundle_fixtures", "bundle_student")


def _starts_kernels(path: str) -> bool:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return any(word in text for word in _KERNEL_WORDS)


@pytest.fixture(scope="session")
def kernel_edition():
    """The grading kernel's edition of course_lib for this process (COURSE_KERNEL_LIB): the one the xdist
    controller built, or built here on first use (a run without xdist)."""
    from grading import edition

    return edition.ensure()
