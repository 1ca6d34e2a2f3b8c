"""What several test files need and is expensive to make, made once per test session and shared by its processes
(pytest-xdist workers wait on a lock for the one that makes it): the folder it lives in, and the demo class graded
by the command instructors run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

from bundle_student import _locked

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shared_root(tmp_path_factory) -> str:
    """A folder shared by every process of the test session (what is built once for all of them goes there)."""
    base = tmp_path_factory.getbasetemp()
    # under xdist each worker has its own basetemp below one per-session folder: share that one
    return str(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


def demo_class(tmp_path_factory) -> tuple[Path, types.SimpleNamespace]:
    """The whole demo class graded once, as `make grade` grades it (``python -m grading grade --demo yes
    --workers 2``, feedback and the report included) in a course root of its own: (the demo course's folder,
    the command's returncode, stdout and stderr). The tests that read it must leave its grades as they are."""
    root = Path(shared_root(tmp_path_factory)) / "demo-class-graded"
    done = root / "RUN.json"
    with _locked(str(root) + ".lock"):
        if not done.exists():
            root.mkdir(exist_ok=True)
            env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT="30", PYTHONPATH=REPO)
            proc = subprocess.run([sys.executable, "-m", "grading", "grade", "--demo", "yes", "--workers", "2"],
                                  cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
            done.write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}))
    run = json.loads(done.read_text())
    return root / "demo_class", types.SimpleNamespace(**run)
