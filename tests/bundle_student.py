"""Run the students' bundle as a student who gets everything right (issue 41's check).

    .venv/bin/python tests/bundle_student.py [--released 01_attention,02_masking] \
        [--lessons 03_multihead,05_blocks] [--out DIR]

1. release every assignment's notebooks with nbgrader's own preprocessors (solutions ->
   stubs, hidden tests removed);
2. build the bundle (``grading.bundle.build``) with ``--released`` solutions out (default:
   none, the bundle a class gets before any solution is released);
3. fill each release notebook's solution cells with the instructor's solutions (by
   ``grade_id``), next to the bundle's own data files;
4. execute every filled notebook top to bottom in a kernel that can import ``course_lib``
   only from the bundle (the repository's editable install is removed from the kernel's
   import machinery by an IPython start-up file, and the kernel checks where
   ``course_lib`` came from);
5. print every cell that raised (lesson, cell index, grade_id, error) and exit 1 when any did.

``--json FILE`` writes {notebook: [errors]} for tests. Demonstration cells count: the issue
asks for zero errors in every cell, not only the graded ones.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

import nbformat

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from grading import bundle  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost_map_plugin  # noqa: E402  (the seconds a shared run's lock kept a process waiting)

_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
# run in the kernel before any cell: course_lib may come only from the bundle
_ISOLATE = r'''
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (getattr(f, "__module__", "") or "")
                    and "editable" not in type(f).__module__ and "editable" not in getattr(f, "__name__", "")]
sys.path[:] = [p for p in sys.path if p.rstrip("/") != {repo!r}]
import course_lib, os
_where = os.path.dirname(os.path.dirname(os.path.abspath(course_lib.__file__)))
if _where != {lib!r}:
    raise SystemExit(f"course_lib imported from {{_where}}, not from the bundle {lib!r}")
'''


def _nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def release_notebook(src: str, dst: str) -> None:
    """One release notebook, with nbgrader's own preprocessors (solutions -> stubs, no hidden tests, no outputs)."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions
    from traitlets.config import Config

    cfg = Config()
    cfg.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    nb = nbformat.read(src, as_version=4)
    for pre in (ClearSolutions(config=cfg), ClearHiddenTests(config=cfg), ClearOutput(config=cfg)):
        nb, _ = pre.preprocess(nb, {"language": "python"})
    nbformat.write(nb, dst)


def release_all(dest: str) -> None:
    """Release notebooks of every assignment into ``dest/<assignment>/`` (with their data files)."""
    for a in bundle.assignments():
        src_dir = os.path.join(bundle.NOTEBOOKS_DIR, a)
        os.makedirs(os.path.join(dest, a), exist_ok=True)
        for f in sorted(os.listdir(src_dir)):
            path = os.path.join(src_dir, f)
            if f.endswith(".ipynb"):
                release_notebook(path, os.path.join(dest, a, f))
            elif os.path.isfile(path):
                shutil.copy(path, os.path.join(dest, a, f))


def fill(release_nb: str, source_nb: str, out_nb: str) -> None:
    """The release notebook with each solution cell replaced by the instructor's solution."""
    src = {_nbg(c).get("grade_id"): _MARKERS.sub("", c.source)
           for c in nbformat.read(source_nb, as_version=4).cells if _nbg(c).get("solution")}
    nb = nbformat.read(release_nb, as_version=4)
    for cell in nb.cells:
        gid = _nbg(cell).get("grade_id")
        if _nbg(cell).get("solution") and gid in src:
            cell.source = src[gid]
    nbformat.write(nb, out_nb)


# run in the kernel after _ISOLATE when the run audits devices: tests/device_audit.py's virtual CUDA device
# (torch.cuda.is_available() is True, tensors made "on cuda" stay on the CPU, and an operation mixing
# devices raises as on a GPU) for every cell; the marker file says the audit was on
_AUDIT = r'''
import importlib.util as _ilu
_spec = _ilu.spec_from_file_location("device_audit", {audit!r})
_mod = _ilu.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
_course_device_audit = _mod.DeviceAudit()
_course_device_audit.__enter__()
import torch as _torch
open({marker!r}, "w").write("cuda" if _torch.cuda.is_available() else "cpu")
del _ilu, _spec, _mod, _torch
'''
AUDIT_MODULE = os.path.join(REPO, "tests", "device_audit.py")


def execute(path: str, lib_dir: str, timeout: int = 900, python: str | None = None,
            audit_devices: bool = False) -> list[dict]:
    """Run a notebook top to bottom (errors allowed, so every failing cell is listed).

    ``python``: the interpreter of the student's environment (:func:`student_env`); its kernel
    imports ``course_lib`` from ``lib_dir``, that environment's site-packages. Without it, the
    kernel is this interpreter's with ``lib_dir`` (the bundle folder) first on its path.
    ``audit_devices``: every cell runs under tests/device_audit.py's virtual CUDA device, so a
    tensor left on the wrong device raises as it would on a GPU (and is listed as an error)."""
    from nbclient import NotebookClient

    from grading.kernel import polling

    ipydir = tempfile.mkdtemp(prefix="bundle-ipython-")
    startup = os.path.join(ipydir, "profile_default", "startup")
    os.makedirs(startup)
    with open(os.path.join(startup, "00-only-the-bundle.py"), "w") as fh:
        fh.write(_ISOLATE.format(repo=REPO, lib=os.path.abspath(lib_dir)))
    marker = os.path.join(ipydir, "device-audit")
    if audit_devices:
        with open(os.path.join(startup, "01-device-audit.py"), "w") as fh:
            fh.write(_AUDIT.format(audit=AUDIT_MODULE, marker=marker))
    kernel_name = "python3"
    extra = {"PYTHONPATH": os.path.abspath(lib_dir)}
    if python:
        kernel_name, extra = "bundle-student", {"JUPYTER_PATH": ipydir}
        os.makedirs(os.path.join(ipydir, "kernels", kernel_name))
        with open(os.path.join(ipydir, "kernels", kernel_name, "kernel.json"), "w") as fh:
            json.dump({"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                       "display_name": "the student's environment", "language": "python"}, fh)
    env_keep = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_CHECK_MODE", "JUPYTER_PATH")}
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env_keep, IPYTHONDIR=ipydir, MPLBACKEND="agg", **extra)
    try:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, allow_errors=True, config=polling.config(),
                                resources={"metadata": {"path": os.path.dirname(path)}})
        client.execute()
        if audit_devices:
            seen = open(marker).read() if os.path.exists(marker) else "no marker: the audit did not start"
            if seen != "cuda":
                raise RuntimeError(f"the device audit was not on in the kernel of {path}: {seen}")
    finally:
        os.environ.clear()
        os.environ.update(old)
        shutil.rmtree(ipydir, ignore_errors=True)
    errors = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                errors.append({"cell": i, "grade_id": _nbg(cell).get("grade_id"), "ename": o.get("ename"),
                               "evalue": str(o.get("evalue"))[:500]})
    nbformat.write(nb, path)
    return errors


# ---------------------------------------------------------------- the student's environment
# Installs the bundle as its README says, into a fresh venv. The test machine is offline, so the
# steps before the last (torch, the packages installed without dependencies) are not run: the
# venv sees the course environment's installed packages through a .pth file that adds its
# site-packages as a plain path (the .pth files in there, among them the editable install of the
# repository's course_lib, are not run), and the last step runs offline. The venv has no pip of its
# own (``--without-pip``): it runs the course environment's pip and setuptools, which install into it.
OFFLINE = ["--no-index", "--no-build-isolation"]


def student_env(dest: str, bundle_dir: str) -> tuple[str, str, list[str]]:
    """A fresh venv with the bundle installed: (its python, its site-packages, the install command run)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", dest], check=True, capture_output=True)
    python = os.path.join(dest, "bin", "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(site, "_course_packages.pth"), "w") as fh:
        fh.write(sysconfig.get_paths()["purelib"] + "\n")
    step = shlex.split(bundle.student_install_steps(".")[-1])
    assert step[:2] == ["pip", "install"], step
    command = [python, "-m", "pip", "install", "-q", *OFFLINE, *step[2:]]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_FIND_LINKS")}
    proc = subprocess.run(command, cwd=bundle_dir, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"the bundle's install step failed: {' '.join(command)}\n{proc.stdout[-3000:]}"
                           f"{proc.stderr[-3000:]}")
    where = subprocess.run([python, "-c", "import course_lib, os; print(os.path.dirname(os.path.dirname("
                            "os.path.abspath(course_lib.__file__))))"], capture_output=True, text=True,
                           cwd=dest, env=env).stdout.strip()
    if where != site:
        raise RuntimeError(f"the student's environment imports course_lib from {where!r}, not from {site!r}")
    return python, site, command


def build(out: str, released: list[str]) -> dict:
    """Release, build and install: {"bundle", "python", "site", "install"} (paths, the command run)."""
    release_dir = os.path.join(out, "release")
    release_all(release_dir)
    bdir = os.path.join(out, "bundle")
    bundle.build(bdir, released=released, release_dir=release_dir)
    python, site, command = student_env(os.path.join(out, "venv"), bdir)
    return {"bundle": bdir, "python": python, "site": site, "install": command, "released": released}


@contextlib.contextmanager
def _locked(path: str):
    """Hold an exclusive lock on ``path`` (made once per session by whichever process comes first); the seconds
    spent blocked on it, idle while another process makes the shared run, go to the cost map, and so do the
    seconds it was held (the run made here, for every process that reads it; a lock taken inside another's hold
    is part of the outer run)."""
    with open(path, "a") as fh:
        t0 = time.monotonic()
        fcntl.flock(fh, fcntl.LOCK_EX)
        blocked = time.monotonic() - t0
        if blocked >= 0.5:
            cost_map_plugin.waited(path, blocked)
        _HOLDING.append(path)
        t1, waits = time.monotonic(), cost_map_plugin.waited_so_far()
        try:
            yield
        finally:
            _HOLDING.pop()
            held = time.monotonic() - t1 - (cost_map_plugin.waited_so_far() - waits)  # its own waits are waits
            fcntl.flock(fh, fcntl.LOCK_UN)
            if held >= 0.5 and not _HOLDING:
                cost_map_plugin.made(path, held)


_HOLDING: list = []  # the shared runs' locks this process holds, outermost first


def shared_build(root: str, released: list[str]) -> dict:
    """:func:`build` once per ``released`` under ``root``, shared by processes (pytest-xdist workers)."""
    tag = "-".join(a[:2] for a in released) or "none"
    out = os.path.join(root, f"bundle-released-{tag}")
    with _locked(out + ".lock"):
        done = os.path.join(out, "BUILT.json")
        if not os.path.exists(done):
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            # in a fresh interpreter: CPython 3.11.7's ast.parse raised "SystemError: AST constructor
            # recursion depth mismatch" in a pytest process that had run notebooks before (measured)
            code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import bundle_student; "
                    "json.dump(bundle_student.build(sys.argv[2], json.loads(sys.argv[3])), open(sys.argv[4], 'w'))")
            proc = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__)), out,
                                   json.dumps(released), done + ".tmp"], capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(f"building the bundle (released: {released}) failed:\n{proc.stderr[-4000:]}")
            os.replace(done + ".tmp", done)
        with open(done) as fh:
            return json.load(fh)


def run_lesson(built: dict, assignment: str, work: str, audit_devices: bool = False, edit=None) -> dict:
    """Fill and execute ``assignment``'s notebooks in a copy of the built bundle's notebook folder
    (under ``work``) with the student's kernel: {assignment/notebook: [errors]} (``audit_devices``:
    see :func:`execute`). ``edit(nb)``, when given, changes each filled notebook (an nbformat node) in
    place before it runs (a test puts an old bug back)."""
    src_dir = os.path.join(built["bundle"], "notebooks", assignment)
    target_dir = os.path.join(work, assignment)
    shutil.rmtree(target_dir, ignore_errors=True)
    shutil.copytree(src_dir, target_dir)
    results = {}
    for src in bundle.source_notebooks(assignment):
        name = os.path.basename(src)
        target = os.path.join(target_dir, name)
        fill(target, src, target)
        if edit is not None:
            nb = nbformat.read(target, as_version=4)
            edit(nb)
            nbformat.write(nb, target)
        results[f"{assignment}/{name}"] = execute(target, built["site"], python=built["python"],
                                                  audit_devices=audit_devices)
    return results


# ---------------------------------------------------------------- misconception messages
# Run in a process of either environment: every known wrong answer (the instructor's checks module,
# loaded from its file) goes through that environment's check; prints {check: {wrong: message}}.
_MESSAGES = r'''
import ast, importlib.util, json, os, sys
import matplotlib
matplotlib.use("Agg")
topic, source_path = sys.argv[1], sys.argv[2]
from course_lib import checks
spec = importlib.util.spec_from_file_location("_instructor_checks_" + topic, source_path)
inst = importlib.util.module_from_spec(spec)
spec.loader.exec_module(inst)
if len(sys.argv) > 3 and sys.argv[3]:  # a split lesson: its WRONG_* tables are in its judge module's file
    spec = importlib.util.spec_from_file_location("_instructor_judge_" + topic, sys.argv[3])
    inst = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inst)
tree = ast.parse(open(source_path).read())
defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
def lists(node, seen):
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and getattr(sub.func, "attr", None) == "wrongs" and len(sub.args) == 2 \
                and isinstance(sub.args[1], ast.Constant) and "WRONG_" + sub.args[1].value not in out:
            out.append("WRONG_" + sub.args[1].value)  # core.wrongs(__name__, "X"): the judge module's WRONG_X
        elif isinstance(sub, ast.Name):
            if sub.id.startswith("WRONG_") and sub.id not in out:
                out.append(sub.id)
            elif sub.id in defs and sub.id.startswith("_") and sub.id not in seen:
                seen.add(sub.id)
                out += [x for x in lists(defs[sub.id], seen) if x not in out]
    return out
module = getattr(checks, topic)
result = {}
for name, node in defs.items():
    if not name.startswith("check_"):
        continue
    for lst in lists(node, set()):
        for wrong in getattr(inst, lst):
            try:
                getattr(module, name)(wrong.fn)
                message = "passed the visible tests"
            except AssertionError as err:
                message = f"{type(err).__name__}: {err}"
            except Exception as err:
                message = f"raised {type(err).__name__}: {err}"
            result.setdefault(name, {})[wrong.name] = message
print("MESSAGES " + json.dumps(result))
'''


def misconception_messages(topic: str, python: str | None = None, cwd: str | None = None) -> dict:
    """{check: {wrong answer's name: message}} for ``course_lib/checks/<topic>.py``'s known wrong answers,
    in the environment of ``python`` (default: this one, the repository's course_lib, live mode)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_CHECK_MODE")}
    source = os.path.join(REPO, "course_lib", "checks", f"{topic}.py")
    judge = os.path.join(REPO, "course_lib", "judge", f"{topic}.py")
    judge = judge if os.path.isfile(judge) else ""
    proc = subprocess.run([python or sys.executable, "-c", _MESSAGES, topic, source, judge], capture_output=True,
                          text=True, env=env, cwd=cwd or tempfile.gettempdir(), timeout=600)
    if "MESSAGES " not in proc.stdout:
        raise RuntimeError(f"the misconception run for {topic} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.rsplit("MESSAGES ", 1)[1])


def run(out: str, released: list[str], lessons: list[str] | None = None) -> dict:
    """Build, install, fill and execute; return {assignment/notebook: [errors]}."""
    built = build(out, released)
    results = {}
    for a in bundle.assignments():
        if lessons and not any(a.startswith(x) for x in lessons):
            continue
        t0 = time.perf_counter()
        results.update(run_lesson(built, a, os.path.join(out, "run")))
        print(f"[bundle-student] {a}: {time.perf_counter() - t0:.0f} s", flush=True)
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--released", default="", help="comma-separated assignments whose solutions are out")
    p.add_argument("--lessons", default="", help="comma-separated assignments (or prefixes such as 03) to run")
    p.add_argument("--out", default=None, help="working folder (default: a new temporary folder)")
    p.add_argument("--json", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="bundle-student-")
    released = [x for x in args.released.split(",") if x]
    lessons = [x for x in args.lessons.split(",") if x] or None
    results = run(out, released, lessons)
    bad = 0
    for nb, errors in results.items():
        print(f"{nb}: {'ok' if not errors else f'{len(errors)} cell(s) raised'}")
        for e in errors:
            bad += 1
            print(f"    cell {e['cell']} ({e['grade_id'] or 'not graded'}): {e['ename']}: {e['evalue'][:300]}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    print(f"[bundle-student] {out}: {len(results)} notebook(s), {bad} failing cell(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
