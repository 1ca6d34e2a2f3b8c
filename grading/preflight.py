"""Checks that must pass before grading, because nbgrader would otherwise score everyone 0.

1. The grading kernel exists (nbgrader needs the kernelspec by name).
2. ``course_lib`` imports inside that kernel (a kernel from another environment
   runs every test cell into ImportError, and nbgrader records 0 points silently),
   and the kernel runs the course environment's interpreter: the same Python version
   and the same ``sys.prefix`` (the venv) as the grader; otherwise grading is refused
   (a kernel on another Python grades with other packages than the course was tested on).
3. Every assignment to grade has a source folder with exactly the notebooks the
   release will contain.

Each failure raises :class:`PreflightError` with what was wrong and how to fix it.
"""
from __future__ import annotations

import os

from grading import NOTEBOOKS_DIR


class PreflightError(RuntimeError):
    """Grading cannot start; the message says why and what to do."""


def check_kernel(kernel_name: str) -> str:
    """Return the kernel's argv[0] (its python) or raise PreflightError."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        names = sorted(KernelSpecManager().find_kernel_specs())
        raise PreflightError(
            f"the grading kernel {kernel_name!r} does not exist (installed kernels: {names}). "
            "Install it into this environment with `python -m ipykernel install --sys-prefix` "
            "or set COURSE_KERNEL to one of the installed kernels."
        ) from None
    return spec.argv[0]


_PROBE = """
import os, sys, json, course_lib, course_lib.checks.core, course_lib.attention
hidden = not os.path.exists({notebooks!r})
print(("sandboxed" if os.environ.get("COURSE_SANDBOXED") else "not sandboxed")
      + ("; notebooks/ hidden" if hidden else "; notebooks/ VISIBLE"))
print("PYTHON " + json.dumps([sys.version, os.path.realpath(sys.prefix)]))
print("EDITION " + str(course_lib.edition().get("edition")))
print(course_lib.__file__)
"""


def environment() -> tuple[str, str]:
    """The course environment's interpreter as the grader runs it: (sys.version, real sys.prefix)."""
    import sys

    return sys.version, os.path.realpath(sys.prefix)


def check_interpreter(version: str, prefix: str) -> str:
    """Refuse a kernel whose interpreter is not the course environment's; return a short description."""
    import sys

    want_version, want_prefix = environment()
    if version != want_version or prefix != want_prefix:
        raise PreflightError(
            f"the grading kernel runs Python {version.split()[0]} from {prefix}, not the course environment's "
            f"Python {want_version.split()[0]} from {want_prefix}: it would grade with other packages than the "
            "course was tested on; refusing to grade. Reinstall the kernel from the environment "
            f"(`{sys.executable} -m grading sandbox-install`) and check that the sandbox can reach it.")
    return f"Python {version.split()[0]}, sys.prefix {prefix}"


def check_course_lib_in_kernel(kernel_name: str, timeout: float = 120.0) -> str:
    """Start the grading kernel, import course_lib and its checks there.

    Returns "<sandbox status>; course_lib from <path>". Raises PreflightError when
    course_lib does not import, or when a sandboxed kernel can still see notebooks/.
    """
    import shutil
    import tempfile

    from jupyter_client.manager import KernelManager

    from grading import edition
    from grading.kernel import launcher

    if kernel_name == launcher.KERNEL_NAME:
        edition.ensure()  # the students' edition the sandboxed kernel mounts (grading/edition.py)
    ipc = tempfile.mkdtemp(prefix="nbg-ipc-")
    workdir = tempfile.mkdtemp(prefix="preflight-")
    km = KernelManager(kernel_name=kernel_name, transport="ipc", ip=os.path.join(ipc, "kernel"))
    try:
        import subprocess

        km.start_kernel(cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except Exception as err:
        shutil.rmtree(ipc, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
        raise PreflightError(f"the grading kernel {kernel_name!r} does not start: {err}") from err
    kc = km.client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=timeout)
        outputs: list[str] = []

        def collect(msg):
            content = msg.get("content", {})
            if msg.get("msg_type") == "stream":
                outputs.append(content.get("text", ""))
            elif msg.get("msg_type") == "error":
                outputs.append(f"{content.get('ename')}: {content.get('evalue')}")

        reply = kc.execute_interactive(_PROBE.format(notebooks=NOTEBOOKS_DIR), timeout=timeout,
                                       output_hook=collect)
        text = "".join(outputs).strip()
        if reply["content"]["status"] != "ok":
            raise PreflightError(
                f"course_lib does not import in the grading kernel {kernel_name!r} ({text}). Every test "
                "cell would fail and nbgrader would score all students 0. Install the course into the "
                "kernel's environment: `pip install -e .` with that kernel's python."
            )
        import json

        lines = text.splitlines()
        if "VISIBLE" in lines[0] and "not sandboxed" not in lines[0]:
            raise PreflightError("the sandboxed kernel can read notebooks/ (the hidden tests); refusing to grade")
        (python,) = [json.loads(line[len("PYTHON "):]) for line in lines if line.startswith("PYTHON ")]
        (kind,) = [line[len("EDITION "):] for line in lines if line.startswith("EDITION ")]
        if "not sandboxed" not in lines[0] and kind != edition.EDITION:
            raise PreflightError(f"the sandboxed kernel imports the {kind!r} edition of course_lib from {lines[-1]}, "
                                 f"not the students' edition ({edition.EDITION!r}, grading/edition.py): it could "
                                 "reach the references; refusing to grade")
        interpreter = check_interpreter(*python)
        return f"{lines[0]}; {interpreter}; course_lib ({kind} edition) from {lines[-1]}"
    except RuntimeError as err:  # died before replying
        raise PreflightError(f"the grading kernel {kernel_name!r} died on start: {err}") from err
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(ipc, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)


def list_assignments() -> list[str]:
    """Assignment folders under notebooks/, in lesson order (NN_topic)."""
    return sorted(d for d in os.listdir(NOTEBOOKS_DIR)
                  if os.path.isdir(os.path.join(NOTEBOOKS_DIR, d)) and d[:2].isdigit())


def check_assignments(assignments: list[str]) -> None:
    known = list_assignments()
    for a in assignments:
        if a not in known:
            raise PreflightError(f"unknown assignment {a!r}; the source folder notebooks/ has {known}")
        nbs = [f for f in os.listdir(os.path.join(NOTEBOOKS_DIR, a)) if f.endswith(".ipynb")]
        if not nbs:
            raise PreflightError(f"assignment {a!r} has no notebook in notebooks/{a}/")


def check_gradebook_matches_source(db_url: str, assignment: str) -> int:
    """After the release: every locked/graded cell the gradebook grades against equals the source.

    nbgrader grades against the tests it stored at release time, not the ones in
    notebooks/; a stale gradebook would grade with old tests. Returns the number of
    cells compared; raises PreflightError naming the first cell that differs.
    """
    import nbformat
    from nbgrader.api import Gradebook, MissingEntry

    compared = 0
    folder = os.path.join(NOTEBOOKS_DIR, assignment)
    with Gradebook(db_url) as gb:
        for name in sorted(f for f in os.listdir(folder) if f.endswith(".ipynb")):
            nb_id = name[:-len(".ipynb")]
            try:
                stored = {c.name: c.source for c in gb.find_notebook(nb_id, assignment).source_cells}
            except MissingEntry:
                raise PreflightError(f"the gradebook has no notebook {nb_id!r} for {assignment!r}; "
                                     "regenerate the release") from None
            for cell in nbformat.read(os.path.join(folder, name), as_version=4).cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if meta.get("locked") or (meta.get("grade") and not meta.get("solution")):
                    gid = meta.get("grade_id")
                    if stored.get(gid) != cell.source:
                        raise PreflightError(
                            f"{assignment}/{name}: the gradebook's copy of cell {gid!r} differs from the source "
                            "notebook, so grading would use stale tests. Regenerate the release "
                            "(nbgrader generate_assignment --force).")
                    compared += 1
    return compared
