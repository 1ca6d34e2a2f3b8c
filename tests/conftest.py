"""Shared fixtures: the list of assignments, and nbgrader configured the way grading runs it."""
import os
import sys
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = os.path.join(REPO, "notebooks")
if REPO not in sys.path:  # the grading tools are a plain package at the repository root
    sys.path.insert(0, REPO)

os.environ.setdefault("MPLBACKEND", "Agg")


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
    """traitlets config for executing notebooks over IPC sockets (no TCP port races between xdist workers)."""
    from traitlets.config import Config

    cfg = Config()
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


@pytest.fixture(scope="session")
def repo_dir():
    return REPO

# nbgrader runs `alembic` from PATH; make this environment's bin come first even
# when pytest was started as .venv/bin/python -m pytest without activating it.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


def pytest_configure(config):
    """The nbval runs of the notebooks get the prose-numbers check (tests/prose_numbers_plugin.py) after each
    notebook's last cell, unless it was already loaded with ``-p prose_numbers_plugin``."""
    import prose_numbers_plugin

    if not config.pluginmanager.is_registered(prose_numbers_plugin) \
            and not config.pluginmanager.has_plugin("prose_numbers_plugin"):
        config.pluginmanager.register(prose_numbers_plugin, "prose_numbers_plugin")
