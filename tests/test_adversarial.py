"""Hostile and broken submissions to 01_attention, graded together with the honest demo class.

The table of cases, with the expected outcome of each, is ``tests/adversarial/cases.py``
(how to read it: ``tests/adversarial/__init__.py``).

Fast part (no grading run, ~30 s; the two probes of kernels running side by side are marked slow):
the table is consistent, every case builds a submission
whose code is valid Python (so a case fails for its hostile act, not a typo), the static
integrity scan flags exactly the cheating cases and nothing else (false positives would
zero honest students), and the sandbox kernel, probed directly, keeps secrets, folders,
network, memory and processes out of reach.

Slow part (``-m slow``, one class run of ~50 submissions with 2 workers, COURSE_CELL_TIMEOUT=10, shared with
tests/test_class_mess.py's messy class: ``lesson01_class`` in tests/shared_runs.py):
``python -m grading grade --demo no`` over the whole class; every student gets exactly its
expected score with the reason visible, the command exits 0 and names everyone, and no file
outside the students' own folders changed.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import re
import subprocess
import tempfile
import time

import nbformat
import pytest

from conftest import REPO
import sandbox_kernel
import shared_runs
from adversarial import cases as C
from adversarial import classrun

HOSTILE_IDS = [c.student for c in C.HOSTILE]


def _xfail(case: C.Case, reason: str | None):
    return pytest.param(case, id=case.student,
                         marks=[pytest.mark.xfail(strict=True, reason=reason)] if reason else [])


# ====================================================================== fast part: the table
def test_table_is_well_formed():
    from grading import demo

    students = [c.student for c in C.CASES]
    assert len(students) == len(set(students)), "student ids must be unique"
    assert len(C.HOSTILE) >= 30
    assert {c.student: c.score for c in C.HONEST} == demo.load_spec(C.ASSIGNMENT).EXPECTED, \
        "the honest students' expectations are the demo class's (grading/demo/01_attention.py)"
    for case in C.HOSTILE:
        assert re.fullmatch(r"x\d\d_[a-z0-9_]+", case.student), case.student
        assert case.build is not None and case.what
        assert 0 <= case.score <= C.MAX_SCORE and float(case.score).is_integer(), case
        assert case.feedback or case.report, f"{case.student}: an outcome without a visible reason"
        if case.integrity:
            assert C.INTEGRITY_FEEDBACK in case.feedback and C.INTEGRITY_REPORT in case.report, case.student
        if case.restored:
            assert C.RESTORED in case.feedback, case.student
        if case.restored and not case.integrity:
            assert C.INTEGRITY_FEEDBACK in case.absent, f"{case.student}: a restoration is no finding"
    # the workers take students in name order: the honest ones first, then the slow timeouts
    assert sorted(students) == students


@pytest.fixture(scope="module")
def release_ctx(tmp_path_factory):
    """A course root with the release of 01_attention and its tests in a gradebook (~5 s), made once per test
    session and shared with tests/test_class_mess.py (tests/shared_runs.py)."""
    return shared_runs.lesson01_release(tmp_path_factory)


def _built(ctx, case):
    return case.build(dataclasses.replace(ctx, student=case.student))


def _code_cells_compile(nb) -> list[str]:
    from IPython.core.inputtransformer2 import TransformerManager

    bad = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        try:
            compile(TransformerManager().transform_cell(cell.source), f"cell {i}", "exec")
        except SyntaxError as err:
            bad.append(f"cell {i}: {err}")
    return bad


UNREADABLE = {"x27_corrupt_json", "x28_empty_file", "x29_not_a_notebook", "x31_empty_folder"}


@pytest.mark.parametrize("case", C.HOSTILE, ids=HOSTILE_IDS)
def test_case_builds_a_submission_that_does_what_it_says(release_ctx, case):
    files = _built(release_ctx, case)
    notebooks = {n: t for n, t in files.items() if n.endswith(".ipynb") and isinstance(t, str)}
    if case.student == "x31_empty_folder":
        assert files == {}
        return
    assert len(notebooks) == 1, files.keys()
    (name, text), = notebooks.items()
    if case.student in UNREADABLE:
        with pytest.raises(Exception):
            nbformat.validate(nbformat.reads(text, as_version=4))
        return
    nb = nbformat.reads(text, as_version=4)
    assert not _code_cells_compile(nb), _code_cells_compile(nb)
    assert (name == C.NOTEBOOK) != (case.student == "x30_wrong_file_name")
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    release_ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in release_ctx.release.cells]
    if case.student == "x17_delete_test_cell":
        assert "softmax_visible" not in ids and "softmax_visible" in release_ids
    elif case.student == "x18_delete_solution_cell":
        assert "softmax_impl" not in ids
    elif case.student == "x32_other_assignment":
        assert not set(filter(None, ids)) & set(filter(None, release_ids)) - {"setup"}


def _scan(ctx, nb, notes=False):
    """The scan's findings (what costs points) of one notebook, or with ``notes`` (findings, restorations)."""
    integrity = pytest.importorskip("grading.integrity")

    resources = {"nbgrader": {"db_url": f"sqlite:///{os.path.join(ctx.root, 'gradebook.db')}",
                              "notebook": C.NOTEBOOK[:-6], "assignment": C.ASSIGNMENT}}
    nb, _ = integrity.ScanSubmission().preprocess(nb, resources)
    findings = list(nb.metadata.get(integrity.META_KEY, []))
    return (findings, list(nb.metadata.get(integrity.NOTES_KEY, []))) if notes else findings


def _honest_notebooks(ctx):
    from grading import demo

    spec = demo.load_spec(C.ASSIGNMENT)
    return {"s01_correct": demo.build_submission(ctx.release, ctx.solutions),
            "s02_blank": demo.build_submission(ctx.release, {}),
            "s03_misconception": demo.build_submission(ctx.release, {**ctx.solutions, **spec.MISCONCEPTION}),
            "s04_crash": demo.build_submission(ctx.release, {**ctx.solutions, **spec.CRASH})}


def test_static_scan_leaves_the_honest_class_alone(release_ctx):
    for student, nb in _honest_notebooks(release_ctx).items():
        assert _scan(release_ctx, nb) == [], student


def test_the_import_scan_reads_every_cell_and_keeps_only_short_ones():
    integrity = pytest.importorskip("grading.integrity")

    long = "x = 1\n" * 5000 + "import numpy.linalg as la"  # longer than a cell kept in memory
    before = integrity._imports_in.cache_info().currsize
    assert integrity.imported_names(["import torch as T", long, "import torch as T"]) == \
        {"T": "torch", "la": "numpy.linalg"}
    assert integrity._imports_in.cache_info().currsize <= before + 1


SCANNABLE = [c for c in C.HOSTILE if c.student not in UNREADABLE | {"x30_wrong_file_name"}]


@pytest.mark.parametrize("case", [_xfail(c, c.scan_gap) for c in SCANNABLE])
def test_static_scan_flags_exactly_the_cheating(release_ctx, case):
    (text,) = [t for n, t in _built(release_ctx, case).items() if n.endswith(".ipynb") and isinstance(t, str)]
    findings, notes = _scan(release_ctx, nbformat.reads(text, as_version=4), notes=True)
    if case.restored:
        assert notes, f"{case.student} ({case.what}): nothing restored"
    else:
        assert notes == [], f"{case.student}: nothing to restore, but the scan says {notes}"
    if not case.integrity:
        assert findings == [], f"{case.student} is not cheating, but the scan says {findings}"
    else:
        assert findings, f"{case.student} cheats ({case.what}) but the scan finds nothing"
    if not (case.integrity or case.restored):
        return
    said = " ".join(findings + notes)
    for reason in case.feedback + case.report:
        if reason not in (C.INTEGRITY_FEEDBACK, C.INTEGRITY_REPORT, C.RESTORED, "KernelDied", "unstable softmax") \
                and "tests passed" not in reason and not reason.startswith("blocked "):  # printed by the kernel
            assert reason in said, f"{case.student}: findings {findings} and notes {notes} do not mention {reason!r}"


# ====================================================================== fast part: the sandbox itself
def Kernel(root: str, workdir: str, env: dict | None = None) -> sandbox_kernel.Kernel:
    """One course-sandbox kernel started the way grading starts it (IPC, own folder, COURSE_ROOT)."""
    return sandbox_kernel.Kernel(workdir, dict(COURSE_ROOT=root, PYTHONPATH=REPO, **(env or {})))


@pytest.fixture(scope="module")
def sandbox_root(tmp_path_factory):
    from grading.kernel import launcher

    ok, why = launcher.bwrap_works()
    if not ok:
        pytest.skip(f"no bwrap isolation on this machine: {why}")
    launcher.install_kernelspec()
    root = tmp_path_factory.mktemp("sandbox-root")
    (root / "gradebook.db").write_text("the gradebook (holds the hidden tests)")
    return str(root)


@pytest.fixture(scope="module")
def kernel(sandbox_root, tmp_path_factory):
    work = tmp_path_factory.mktemp("student-work")
    k = Kernel(sandbox_root, str(work))
    yield k, str(work)
    k.close()


def test_sandbox_hides_secrets_and_folders(kernel, sandbox_root):
    k, work = kernel
    secret_files = [os.path.join(REPO, "notebooks", C.ASSIGNMENT, C.NOTEBOOK),
                    os.path.join(REPO, "grading", "demo", f"{C.ASSIGNMENT}.py"),
                    os.path.join(REPO, ".git", "HEAD"), os.path.join(sandbox_root, "gradebook.db")]
    out = k.run(f"""
for p in {secret_files!r}:
    try:
        open(p, "rb").read(1); print("READABLE", p)
    except OSError as e:
        print("hidden", type(e).__name__)
for p in {[os.path.join(REPO, "course_lib", "PWNED-probe"), os.path.join(REPO, "PWNED-probe"),
           os.path.join(sandbox_root, "PWNED-probe"), "/var/tmp/PWNED-probe"]!r}:
    try:
        open(p, "w").close(); print("WRITABLE", p)
    except OSError as e:
        print("read-only", type(e).__name__)
open("own.txt", "w").write("mine")
print("own folder writable:", open("own.txt").read())
import course_lib.checks.attention
print("course_lib importable")
""")
    assert "READABLE" not in out and out.count("hidden") == len(secret_files), out
    assert "WRITABLE" not in out and out.count("read-only") == 4, out
    assert "course_lib importable" in out and "own folder writable: mine" in out
    # the kernel works in its own copy of the folder: the grader's copy never holds what it wrote
    assert not os.path.exists(os.path.join(work, "own.txt"))
    assert not os.path.exists(os.path.join(REPO, "course_lib", "PWNED-probe"))


def test_sandbox_has_no_network_and_fails_fast(kernel):
    k, _ = kernel
    out = k.run("""
import socket, time
for host in ("127.0.0.1", "192.0.2.1"):  # loopback and TEST-NET-1 (never routed)
    t0 = time.monotonic()
    try:
        socket.create_connection((host, 80), timeout=3).close(); print("CONNECTED", host)
    except OSError as e:
        print(f"refused {host} {time.monotonic() - t0:.3f}")
""")
    times = [float(t) for t in re.findall(r"refused \S+ (\S+)", out)]
    assert "CONNECTED" not in out and len(times) == 2, out
    assert max(times) < 1.0, f"a connection attempt should fail at once, took {max(times)} s"


def test_sandbox_bounds_memory_processes_files_and_runs_as_nobody(kernel):
    k, _ = kernel
    out = k.run("""
import os, resource, time
import numpy as np
try:
    np.ones(50 * 1024 ** 3 // 8); print("ALLOCATED 50 GiB")
except MemoryError:
    print("memory refused")
print("uid", os.getuid())
print("pids visible", len([p for p in os.listdir("/proc") if p.isdigit()]))
print("fsize", resource.getrlimit(resource.RLIMIT_FSIZE)[0], "cpu", resource.getrlimit(resource.RLIMIT_CPU)[0])
children, refused = [], False
for _ in range(3000):
    try:
        pid = os.fork()
    except OSError:
        refused = True
        break
    if pid == 0:
        time.sleep(0.3)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print("forks", len(children), "refused", refused)
""")
    assert "memory refused" in out, out
    if os.geteuid() == 0:
        assert "uid 65534" in out or re.search(r"uid [1-9]\d*", out), out
    assert int(re.search(r"pids visible (\d+)", out).group(1)) < 10, f"the host's processes are visible: {out}"
    fsize, cpu = map(int, re.search(r"fsize (-?\d+) cpu (-?\d+)", out).groups())
    assert 0 < fsize <= 1024 ** 3 and 0 < cpu < 10 ** 5, out
    forks = int(re.search(r"forks (\d+) refused (\w+)", out).group(1))
    assert "refused True" in out and forks < 500, out


# ---------------------------------------------------------------- issue 20: the launcher, the interpreter, the env
def test_kernelspec_launcher_is_isolated():
    from grading.kernel import launcher

    argv = launcher.kernelspec()["argv"]
    assert argv[1:3] == ["-I", "-S"] and argv[3].endswith(os.path.join("grading", "kernel", "launcher.py")), argv
    assert os.path.isfile(argv[3]), argv
    assert "-m" not in argv, "`-m` puts the working directory (the submission) first on the import path"
    assert "env" not in launcher.kernelspec()


def test_launcher_imports_nothing_from_the_submission_folder(sandbox_root, tmp_path):
    """Modules named like the launcher's imports in the kernel's folder: none runs outside the sandbox."""
    work, markers = tmp_path / "work", tmp_path / "markers"
    work.mkdir()
    markers.mkdir()
    names = ["json", "shutil", "subprocess", "resource", "secrets", "re", "functools", "socket", "struct",
             "sitecustomize", "usercustomize"]
    for name in names:
        (work / f"{name}.py").write_text(
            f"import os\nopen({str(markers / name)!r}, 'w').write(str(os.getuid()))\n"
            "raise ImportError('shadow module')\n")
    (work / "grading").mkdir()
    (work / "grading" / "__init__.py").write_text(f"open({str(markers / 'grading')!r}, 'w').write('x')\n")
    (work / "grading" / "sandbox.py").write_text(f"open({str(markers / 'sandbox')!r}, 'w').write('x')\n")
    (work / "grading" / "kernel").mkdir()
    for name in ("__init__", "launcher", "protocol", "warm"):
        (work / "grading" / "kernel" / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').write('x')\n")
    k = Kernel(sandbox_root, str(work))
    try:
        out = k.run("import os\nprint('kernel alive in', os.getcwd())")
    finally:
        k.close()
    assert "kernel alive in /tmp/work" in out, out
    assert sorted(os.listdir(markers)) == [], "a module of the submission ran outside the sandbox"


def test_grading_kernel_runs_the_environments_interpreter(kernel):
    """The sandboxed kernel runs the course environment's Python and packages (not the system's)."""
    import sys

    import numpy

    from grading import preflight

    k, _ = kernel
    out = k.run("""
import json, os, sys, numpy
print("PY " + json.dumps([sys.version, os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
                          os.path.realpath(os.__file__), numpy.__version__, os.path.realpath(numpy.__file__)]))
""")
    line = [x for x in out.splitlines() if x.startswith("PY ")]
    assert line, out
    version, prefix, base, os_file, np_version, np_file = json.loads(line[0][3:])
    assert (version, prefix) == preflight.environment()
    assert base == os.path.realpath(sys.base_prefix) and os_file == os.path.realpath(os.__file__)
    assert (np_version, np_file) == (numpy.__version__, os.path.realpath(numpy.__file__))
    assert preflight.check_interpreter(version, prefix)
    with pytest.raises(preflight.PreflightError, match="refusing to grade"):
        preflight.check_interpreter("3.11.2 (main)", "/usr")


def test_kernel_environment_is_an_allowlist(sandbox_root, tmp_path):
    secrets = {"COURSE_DB_URL": "postgresql://grader:hunter2@db/gradebook", "PGPASSWORD": "hunter2",
               "COURSE_GRADEBOOK_PASSWORD": "hunter2", "AWS_SECRET_ACCESS_KEY": "hunter2",
               "GITHUB_TOKEN": "hunter2", "COURSE_NOTE": "https://user:hunter2@example.org/"}
    course = {"COURSE_CHECK_MODE": "record", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "PYTHONHASHSEED": "0", "MPLBACKEND": "agg"}
    # exact names, no pattern: a COURSE_* setting that looks harmless is not passed either (issue 33, item 7)
    unnamed = {"COURSE_SANDBOX_NPROC": "128", "COURSE_NOTE_TO_SELF": "plain words", "COURSE_WARM_SOCKET": "/x"}
    (tmp_path / "w").mkdir()
    k = Kernel(sandbox_root, str(tmp_path / "w"), env={**secrets, **course, **unnamed})
    try:
        out = k.run("import json, os\nprint('ENV ' + json.dumps(dict(os.environ)))\n"
                    "print('START ' + json.dumps(sorted(x.split(b'=')[0].decode() for x in "
                    "open('/proc/self/environ', 'rb').read().split(b'\\0') if x)))\n"
                    "print('PROC1 ' + json.dumps(open('/proc/1/cmdline', 'rb').read().decode('utf-8', 'replace')))\n"
                    "print('PIDS ' + json.dumps(sorted(int(p) for p in os.listdir('/proc') if p.isdigit())))")
    finally:
        k.close()
    env = json.loads([x for x in out.splitlines() if x.startswith("ENV ")][0][4:])
    assert not [k for k, v in env.items() if "hunter2" in v], env
    assert not set(secrets) & set(env)
    assert not set(unnamed) & set(env), sorted(set(unnamed) & set(env))
    from grading.kernel import launcher

    # what the kernel started with (its own start-up adds PAGER, CLICOLOR, ... to os.environ later):
    # the fixed names, and the working folder the sandbox's shell set when it entered it
    started = set(json.loads([x for x in out.splitlines() if x.startswith("START ")][0][6:]))
    assert started <= set(launcher.KERNEL_ENV_NAMES) | set(launcher.KERNEL_ENV_SET) | {"PWD", "OLDPWD", "SHLVL"}, \
        sorted(started - set(launcher.KERNEL_ENV_NAMES) - set(launcher.KERNEL_ENV_SET))
    # its own /proc: pid 1 is the sandbox's (bwrap's init or the sandbox's shell), never the host's init
    proc1 = json.loads([x for x in out.splitlines() if x.startswith("PROC1 ")][0][6:])
    with open("/proc/1/cmdline", "rb") as fh:
        host1 = fh.read().decode("utf-8", "replace")
    assert proc1 != host1, (proc1, host1)
    assert "bwrap" in proc1 or proc1.startswith("/bin/sh") or "setpriv" in proc1, proc1
    pids = json.loads([x for x in out.splitlines() if x.startswith("PIDS ")][0][5:])
    assert len(pids) < 20, pids  # the sandbox's few processes, not the machine's
    for key, value in course.items():
        assert env.get(key) == value, (key, env.get(key))
    assert env["HOME"].startswith("/tmp/") and env["COURSE_SANDBOXED"] == "1"
    assert env["PATH"].split(os.pathsep)[0] == os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__import__("sys").executable))), "bin")


def test_folder_and_private_tmp_share_one_disk_bound(sandbox_root, tmp_path):
    (tmp_path / "w").mkdir()
    k = Kernel(sandbox_root, str(tmp_path / "w"), env={"COURSE_SANDBOX_DISK_MB": "48"})
    try:
        out = k.run("""
chunk, written = b"x" * 2 ** 20, 0
try:
    for where in ("a.bin", "/tmp/b.bin", "c.bin"):  # 3 x 20 MiB, each far under the per-file limit
        with open(where, "wb") as fh:
            for _ in range(20):
                fh.write(chunk); fh.flush(); written += 1
    print("NOT BOUNDED", written)
except OSError as err:
    print("bounded at", written, "MiB:", err.strerror)
""")
    finally:
        k.close()
    assert "No space left on device" in out and "NOT BOUNDED" not in out, out
    assert 40 <= int(re.search(r"bounded at (\d+)", out).group(1)) <= 48, out
    shm = k2 = None
    try:
        k2 = Kernel(sandbox_root, str(tmp_path / "w"), env={"COURSE_SANDBOX_SHM_MB": "16"})
        shm = k2.run("""
try:
    with open("/dev/shm/fill", "wb") as fh:
        for _ in range(32):
            fh.write(b"x" * 2 ** 20); fh.flush()
    print("SHM NOT BOUNDED")
except OSError as err:
    print("shm bounded:", err.strerror)
""")
    finally:
        if k2:
            k2.close()
    assert "shm bounded: No space left on device" in shm, shm
    assert os.listdir(tmp_path / "w") == [], "the kernel's files never reach the grader's folder"


def test_a_course_cloned_under_tmp_is_seen_by_its_kernel(sandbox_root, monkeypatch):
    """An instructor who clones into `mktemp -d`: the sandbox's fresh /tmp must not hide the course's
    environment and the run's edition of course_lib (it did: every kernel 'died on start'), and the rest
    stays hidden, the repository's own course_lib included (the kernel imports the students' edition)."""
    from grading.kernel import launcher

    base = tempfile.mkdtemp(prefix="course-clone-", dir="/tmp")
    try:
        repo, env = os.path.join(base, "grading"), os.path.join(base, "grading", ".venv")
        lib = os.path.join(base, "kernel-lib")
        for d in (os.path.join(repo, "course_lib"), env, os.path.join(lib, "course_lib")):
            os.makedirs(d)
        for f, text in ((os.path.join(lib, "course_lib", "mark"), "lib"), (os.path.join(env, "mark"), "env"),
                        (os.path.join(repo, "course_lib", "mark"), "REPOLIB"),
                        (os.path.join(repo, "solutions.txt"), "SECRET"),
                        (os.path.join(lib, "course_lib", "_edition.json"), '{"edition": "grading-kernel"}')):
            with open(f, "w") as fh:
                fh.write(text)
        os.chmod(base, 0o755)
        real = launcher.python_dirs()
        monkeypatch.setattr(launcher, "python_dirs", lambda: real + [env])
        monkeypatch.setattr(launcher, "REPO_DIR", repo)
        monkeypatch.setenv("COURSE_KERNEL_LIB", lib)
        work = tempfile.mkdtemp(dir=sandbox_root)
        probe = (f"cat {env}/mark {lib}/course_lib/mark; echo; cat {repo}/course_lib/mark 2>/dev/null || echo hidden; "
                 f"cat {repo}/solutions.txt 2>/dev/null || echo hidden; "
                 f"touch {lib}/course_lib/x 2>/dev/null && echo WRITABLE || echo read-only; "
                 "touch /tmp/mine && echo tmp-writable")
        argv = launcher.build_bwrap_command(launcher.bwrap_path(), ["/bin/sh", "-c", probe], work, [],
                                           env={"PATH": "/usr/bin:/bin"})
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["envlib", "hidden", "hidden", "read-only", "tmp-writable"], \
            out.stdout + out.stderr
    finally:
        import shutil
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="the kernel runs as a uid of its own only when grading as root")
def test_a_course_in_a_closed_folder_is_reached_by_the_kernels_uid(sandbox_root, monkeypatch):
    """A clone inside a `mktemp -d` folder outside /tmp (mode 0700, owned by root): the kernel's own uid
    could not enter it to reach its interpreter (every kernel 'died on start'). It must reach the
    environment and the run's edition of course_lib, read-only, and nothing else in that folder (the
    repository's own course_lib included)."""
    import shutil

    from grading.kernel import launcher

    if not os.access("/var/tmp", os.W_OK):
        pytest.skip("/var/tmp is not writable here")
    base = tempfile.mkdtemp(prefix="course-clone-", dir="/var/tmp")  # mode 0700
    try:
        repo, env = os.path.join(base, "grading"), os.path.join(base, "grading", ".venv")
        lib = os.path.join(base, "kernel-lib")  # the run's edition of course_lib (grading/edition.py)
        for d in (os.path.join(repo, "course_lib"), env, os.path.join(lib, "course_lib")):
            os.makedirs(d)
        for f, text in ((os.path.join(lib, "course_lib", "mark"), "lib"), (os.path.join(env, "mark"), "env"),
                        (os.path.join(repo, "course_lib", "mark"), "REPOLIB"),
                        (os.path.join(lib, "course_lib", "_edition.json"), '{"edition": "grading-kernel"}'),
                        (os.path.join(base, "other.txt"), "SECRET")):
            with open(f, "w") as fh:
                fh.write(text)
        assert not os.stat(base).st_mode & 0o001
        real = launcher.python_dirs()
        monkeypatch.setattr(launcher, "python_dirs", lambda: real + [env])
        monkeypatch.setattr(launcher, "REPO_DIR", repo)
        monkeypatch.setenv("COURSE_KERNEL_LIB", lib)
        work = tempfile.mkdtemp(dir=sandbox_root)
        os.chmod(work, 0o755)
        probe = (f"cat {env}/mark {lib}/course_lib/mark; echo; cat {base}/other.txt 2>/dev/null || echo hidden; "
                 f"cat {repo}/course_lib/mark 2>/dev/null || echo hidden; "
                 f"touch {env}/x 2>/dev/null && echo WRITABLE || echo read-only")
        uid = launcher._free_uid()
        as_kernel = [shutil.which("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                     "/bin/sh", "-c", probe]
        argv = launcher.build_bwrap_command(launcher.bwrap_path(), as_kernel, work, [], env={"PATH": "/usr/bin:/bin"})
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["envlib", "hidden", "hidden", "read-only"], out.stdout + out.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_course_where_the_kernel_keeps_its_files_is_refused(monkeypatch):
    from grading.kernel import launcher

    monkeypatch.setattr(launcher, "python_dirs", lambda: ["/tmp/work/venv"])
    with pytest.raises(SystemExit, match="overlaps /tmp/work"):
        launcher.build_bwrap_command("bwrap", ["true"], "/srv/sub", [])


# ---------------------------------------------------------------- issue 20: intake, outputs, feedback (no kernel)
def test_intake_keeps_regular_files_only_and_opens_nothing(tmp_path):
    import threading

    from grading import pipeline

    outside = tmp_path / "gradebook.db"
    outside.write_text("secret")
    sub = tmp_path / "sub"
    (sub / "data").mkdir(parents=True)
    (sub / "attention.ipynb").write_text("{}")
    (sub / "data" / "ok.csv").write_text("1,2")
    os.symlink(outside, sub / "link.db")
    os.symlink(tmp_path, sub / "data" / "dirlink")
    os.link(outside, sub / "hard.db")
    os.mkfifo(sub / "pipe")
    (sub / "big.bin").write_bytes(b"x" * 5000)
    for i in range(5):
        (sub / f"f{i}.txt").write_text("y")
    result = {}
    t = threading.Thread(target=lambda: result.update(dropped=pipeline.intake(
        str(sub), str(tmp_path / "quarantine"), max_files=5, max_bytes=4000)), daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "intake blocked (it opened the FIFO)"
    dropped = [str(d) for d in result["dropped"]]
    graded = sorted(str(p.relative_to(sub)) for p in sub.rglob("*") if not p.is_dir()
                    and str(p.relative_to(sub)) not in {d.path for d in result["dropped"]})
    assert graded == ["attention.ipynb", "data/ok.csv", "f0.txt", "f1.txt", "f2.txt"], graded
    # the files over a bound stay in the submission (issue 43.4), copied for the instructor and held from grading
    copied = sorted(d.path for d in result["dropped"] if d.copied)
    assert copied == ["big.bin", "f3.txt", "f4.txt"], copied
    for name in copied:
        assert (sub / name).exists() and (tmp_path / "quarantine" / name).read_bytes() == (sub / name).read_bytes()
    # links and the FIFO are held where they are (issue 66.1: nothing in submitted/ is moved), never copied or read
    assert all(os.path.lexists(sub / name) for name in ("link.db", "hard.db", "pipe", "data/dirlink"))
    assert not any(os.path.lexists(tmp_path / "quarantine" / name) for name in ("link.db", "hard.db", "pipe"))
    assert [d for d in dropped if "(symbolic link)" in d] == ["data/dirlink (symbolic link)", "link.db (symbolic link)"]
    assert "hard.db (hard link (2 names))" in dropped and "pipe (named pipe)" in dropped
    assert any(d.startswith("big.bin (5,000 bytes") for d in dropped), dropped
    assert sum("more than 5 files" in d for d in dropped) == 2, dropped
    assert outside.read_text() == "secret" and os.stat(outside).st_nlink == 2  # nothing followed or changed


def _nb_with_outputs(outputs):
    from nbformat.v4 import new_code_cell, new_notebook

    cell = new_code_cell("x")
    cell.outputs = outputs
    return new_notebook(cells=[cell])


def test_bound_outputs_trims_every_kind_keeps_errors_and_records():
    import base64

    from nbformat.v4 import new_output

    from grading.kernel import client

    record = new_output("display_data", data={client.RECORD_MIME: {"x": "r" * 900_000}, "text/plain": "rec"})
    outs = [new_output("stream", name="stdout", text="a" * 5_000_000),
            *[new_output("display_data", data={"image/png": base64.b64encode(b"p" * 300_000).decode()})
              for _ in range(10)],
            record,
            new_output("error", ename="ValueError", evalue="e" * 3_000_000, traceback=["t" * 100_000] * 50)]
    nb = _nb_with_outputs(outs)
    nb, _ = client.BoundOutputs(cell_bytes=500_000, notebook_bytes=2_000_000).preprocess(nb, {})
    kept = nb.cells[0].outputs
    sizes = sum(client.output_bytes(o) for o in kept if client.RECORD_MIME not in o.get("data", {}))
    assert sizes <= 500_000 + 20_000 + 1000, sizes
    assert [o.ename for o in kept if o.output_type == "error"] == ["ValueError"], "an error is never dropped"
    assert any(client.RECORD_MIME in o.get("data", {}) for o in kept), "records are the verifier's: untouched"
    assert "[output trimmed" in kept[-1].data["text/plain"]


def test_an_instructor_cell_slowed_by_the_machine_is_retried_not_charged(tmp_path):
    """A busy grader can make the setup cell (imports) exceed the per-cell timeout: that is the
    grader's slowness, so the cell runs once more with more time; a student's slow cell is still charged."""
    from nbformat.v4 import new_code_cell, new_notebook

    from grading.kernel.client import ResilientExecute

    setup = new_code_cell("import time\ntime.sleep(3)\nx = 41")
    setup.metadata["nbgrader"] = {"locked": True, "grade": False, "solution": False, "grade_id": "setup",
                                  "schema_version": 3}
    nb = new_notebook(cells=[setup, new_code_cell("while True:\n    pass"), new_code_cell("print('x is', x + 1)")])
    nb, _ = ResilientExecute(timeout=2, kernel_name="python3").preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert nb.cells[0].outputs == [], "the setup cell completed on its retry"
    assert "CellTimeoutError" in [o.get("ename") for o in nb.cells[1].outputs], "the student's loop is charged"
    assert nb.cells[2].outputs[0]["text"] == "x is 42\n"


def test_a_replay_keeps_the_outputs_of_the_first_run(tmp_path):
    """After a kernel death the cells before it are re-run to rebuild state; what they printed
    the first time is what is graded. (nbclient puts the executed copy back into the notebook:
    under load a replayed cell cut short replaced a setup cell's clean run with an interrupt.)"""
    from nbformat.v4 import new_code_cell, new_notebook

    from grading.kernel.client import ResilientExecute

    cells = [new_code_cell("import os\nprint('kernel', os.getpid())"), new_code_cell("import os\nos._exit(1)"),
             new_code_cell("import os\nprint('kernel', os.getpid())")]
    nb, _ = ResilientExecute(timeout=20, kernel_name="python3").preprocess(
        new_notebook(cells=cells), {"metadata": {"path": str(tmp_path)}})
    first, after = nb.cells[0].outputs, nb.cells[2].outputs
    assert [o.get("output_type") for o in first] == ["stream"] and after[0]["text"].startswith("kernel ")
    assert first[0]["text"] != after[0]["text"], "cell 0's output is the first kernel's, not the replay's"
    assert "KernelDied" in [o.get("ename") for o in nb.cells[1].outputs]


def _hogs_on_one_cpu(n: int):
    """``n`` busy loops pinned, with this process (and so the kernels it starts), to one CPU."""
    import subprocess
    import time

    from grading.kernel.client import tree_cpu_seconds

    cpu = min(os.sched_getaffinity(0))
    # each in a session of its own: with autogroup scheduling (sched_autogroup_enabled) a CPU is shared
    # between sessions first, so hogs sharing one session would together take only the kernel's share
    hogs = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\n"
                                                    "while True: pass"], start_new_session=True)
            for _ in range(n)]
    deadline = time.monotonic() + 30  # on a loaded machine the hogs may get little CPU: wait for them
    while any((tree_cpu_seconds(h.pid) or 0) <= 0.2 for h in hogs) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all((tree_cpu_seconds(h.pid) or 0) > 0.2 for h in hogs), "a busy process's CPU time is read from /proc"
    return cpu, hogs


def _cpu_after_each_cell(cells, timeout, tmp_path, hogs: int):
    """Run ``cells`` in a kernel pinned with ``hogs`` busy loops to one CPU; (notebook, the kernel's CPU seconds
    after each cell)."""
    from nbformat.v4 import new_code_cell, new_notebook

    from grading.kernel.client import ResilientExecute, tree_cpu_seconds, tree_wait_seconds

    seen = []

    class Recording(ResilientExecute):
        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            seen.append(tree_cpu_seconds(self._kernel_pid()))

    affinity = os.sched_getaffinity(0)
    cpu, procs = _hogs_on_one_cpu(hogs)
    try:
        assert tree_wait_seconds(procs[0].pid) is not None, "this kernel reports run-queue waits"
        os.sched_setaffinity(0, {cpu})  # the kernel started below inherits it
        nb, _ = Recording(timeout=timeout, kernel_name="python3").preprocess(
            new_notebook(cells=[new_code_cell(c) for c in cells]), {"metadata": {"path": str(tmp_path)}})
    finally:
        os.sched_setaffinity(0, affinity)
        for h in procs:
            h.kill()
            h.wait()
    return nb, seen


def test_a_cell_whose_kernel_waited_for_a_cpu_gets_that_time_back(tmp_path):
    """Issue 9: a student's cell that reached its limit while its kernel waited for a CPU (here: three busy
    loops share its one CPU) runs on for the seconds it waited (read from /proc: tree_wait_seconds), in the
    same kernel: no interrupt, no restart."""
    # the cell needs 3 s of wall time, and computes all along: it competes for the CPU
    nb, _ = _cpu_after_each_cell(["import os\nprint(os.getpid())",
                                  "import time\nt0 = time.monotonic()\nwhile time.monotonic() < t0 + 3:\n    pass\n"
                                  "print('done')", "print(os.getpid())"], 2, tmp_path, hogs=3)
    assert [o.get("text") for o in nb.cells[1].outputs] == ["done\n"], nb.cells[1].outputs
    assert nb.cells[0].outputs[0]["text"] == nb.cells[2].outputs[0]["text"], "the kernel was not restarted"


def test_a_starved_endless_loop_is_charged_its_limit_of_running_time_once(tmp_path):
    """An endless loop on a busy CPU is stopped once it has had its limit of running time (the seconds its kernel
    waited for the CPU come on top of the limit): a grade independent of the machine's load, and for the grader
    one limit of CPU, not a restart, a replay and a second run with 3x the limit (what the demo's endless loop
    cost on a busy machine before: 122 s of its class's run)."""
    nb, seen = _cpu_after_each_cell(["import os\nprint(os.getpid())", "while True:\n    pass",
                                     "print(os.getpid())"], 2, tmp_path, hogs=1)
    assert "KeyboardInterrupt" in [o.get("ename") for o in nb.cells[1].outputs], nb.cells[1].outputs
    assert nb.cells[0].outputs[0]["text"] == nb.cells[2].outputs[0]["text"], "interrupted in place, not rerun"
    # sharing the CPU with the busy loop, the kernel had about half of it: 1 s of CPU in the 2 s limit of wall
    # time; with its waits given back it computes for about its limit (minus the first 0.2 s, not measured)
    loop_cpu = seen[1] - seen[0]
    assert 1.3 <= loop_cpu <= 2 * 3 + 1, f"the endless loop computed {loop_cpu:.2f} s before it was stopped"


def test_without_run_queue_waits_a_cell_with_under_half_a_cpu_is_rerun(monkeypatch):
    """Where the kernel does not report run-queue waits (nothing to give back at the limit), a timed-out cell whose
    kernel had under STARVED_SHARE of a CPU since the snapshot is starved (re-run with more time); where they are
    reported, never (its waits were given back)."""
    import types

    from grading.kernel import client

    ex = client.ResilientExecute(kernel_name="python3")
    monkeypatch.setattr(ex, "_kernel_pid", lambda: 1)
    snap = types.SimpleNamespace(taken=True, wall=time.monotonic() - 10, sched=(1.0, None))
    snap.stop = lambda: snap
    monkeypatch.setattr(client, "tree_cpu_seconds", lambda pid: 3.0)  # 2 s of CPU in 10 s of wall time
    assert ex._starved(snap)
    monkeypatch.setattr(client, "tree_cpu_seconds", lambda pid: 9.0)  # 8 s in 10 s: it had the CPU
    assert not ex._starved(snap)
    monkeypatch.setattr(client, "tree_cpu_seconds", lambda pid: 3.0)
    snap.sched = (1.0, 0.5)  # waits reported
    assert not ex._starved(snap)


def test_sleeping_cells_are_charged_not_retried(tmp_path):
    """A cell that sleeps past the limit is not starved (it never waited for a CPU): it is charged at
    once, so a notebook of sleeping cells costs the grader about its cell limits, not 3x more."""
    import time

    from nbformat.v4 import new_code_cell, new_notebook

    from grading.kernel.client import ResilientExecute

    cells = [new_code_cell(f"import time\ntime.sleep(30)\nprint('woke {i}')") for i in range(4)]
    t0 = time.monotonic()
    nb, _ = ResilientExecute(timeout=2, kernel_name="python3").preprocess(
        new_notebook(cells=cells), {"metadata": {"path": str(tmp_path)}})
    elapsed = time.monotonic() - t0
    for cell in nb.cells:
        names = [o.get("ename") for o in cell.outputs if o.get("output_type") == "error"]
        assert "KeyboardInterrupt" in names, cell.outputs
        assert not [o for o in cell.outputs if o.get("output_type") == "stream"], "no cell ran to its end"
    # 4 cells x 2 s, plus the kernel's start (slow on a loaded machine); with a retry of each (3x the
    # limit, a restart and a replay) the same notebook took 49.5 s on a quiet machine
    assert elapsed < 40, f"the sleeping notebook took {elapsed:.1f} s"


def test_sanitiser_leaves_no_way_to_run_script():
    from nbconvert.filters import markdown2html

    from grading.feedback import sanitise
    from adversarial.classrun import script_report

    hostile = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[a](javascript:alert(1))",
               "<a href=' javascript:alert(1)'>a</a>", "<svg onload=alert(1)></svg>", "<iframe src=x></iframe>",
               "<form action=javascript:alert(1)><button>b</button></form>", "<a href=\"data:text/html,x\">d</a>",
               "<math><mtext><script>alert(1)</script></mtext></math>", "<base href='javascript:/'>",
               "<meta http-equiv=refresh content='0;url=javascript:alert(1)'>", "<style>@import 'x'</style>",
               "<object data=x></object>", "<div style=\"background:url(javascript:alert(1))\">s</div>"]
    for text in hostile:
        page = sanitise(markdown2html(text))
        scripts, problems = script_report(page)
        assert scripts == [] and problems == [] and "javascript" not in page.lower() and "style" not in page, \
            (text, page)
    ok = sanitise(markdown2html("**bold** [site](https://example.org) <mailto:a@b.org> `code`"))
    assert "<strong>bold</strong>" in ok and 'href="https://example.org"' in ok and "mailto:a@b.org" in ok
    # markdown cells: nbgrader's feedback template renders them with markdown2html only (no clean_html),
    # so SafeOutputs puts the sanitised HTML there as one block that markdown2html passes unchanged
    from grading.feedback import sanitised_markdown

    for text in hostile + ["a\n\n<script>alert(1)</script>\n\n```\n<b>\n\n</b>\n```\n\n[x](javascript:alert(1))"]:
        block = sanitised_markdown(text)
        page = markdown2html(block)
        assert page.strip() == block and script_report(page) == ([], []), (text, page)


def test_feedback_folder_holds_only_the_page(tmp_path, monkeypatch):
    from grading.feedback import SafeOutputs

    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))  # the course nbgrader grades in this process
    SafeOutputs._pages.clear()
    folder = tmp_path / "feedback" / "s" / "a"
    (folder / "sub").mkdir(parents=True)
    for name in ("attention.html", "other.html", "answers.py", "sub/x"):
        (folder / name).write_text("copied from the graded folder")
    os.symlink("/etc/passwd", folder / "link")
    os.mkfifo(folder / "pipe")
    SafeOutputs()._only_pages({"nbgrader": {"student": "s", "assignment": "a", "notebook": "attention"}})
    assert os.listdir(folder) == [], "nothing copied survives (the page itself is written after this step)"
    (folder / "attention.html").write_text("the generated page")
    (folder / "forged.html").write_text("forged")
    SafeOutputs()._only_pages({"nbgrader": {"student": "s", "assignment": "a", "notebook": "second"}})
    assert os.listdir(folder) == ["attention.html"]


@pytest.mark.slow
def test_six_busy_sandbox_kernels_can_run_at_once(sandbox_root, tmp_path_factory):
    kernels = []
    try:
        for i in range(6):
            try:
                k = Kernel(sandbox_root, str(tmp_path_factory.mktemp(f"busy{i}")))
            except RuntimeError as err:
                pytest.fail(f"kernel {i + 1} of 6 died on start: {err}")
            kernels.append(k)
            out = k.run("import torch\nprint(float((torch.randn(200, 200) @ torch.randn(200, 200)).sum()) * 0)")
            assert "0.0" in out, out
    finally:
        for k in kernels:
            k.close()


@pytest.mark.slow
def test_fork_bomb_in_one_sandbox_leaves_another_sandbox_working(sandbox_root, tmp_path_factory):
    honest = Kernel(sandbox_root, str(tmp_path_factory.mktemp("honest")))
    bomber = Kernel(sandbox_root, str(tmp_path_factory.mktemp("bomber")))
    try:
        # the bomber holds as many children as its limit lets it for 2 s
        bomber.kc.execute("""
import os, sys, time
kids = []
try:
    for _ in range(3000):
        pid = os.fork()
        if pid == 0:
            time.sleep(2); os._exit(0)
        kids.append(pid)
except OSError:
    pass
print("bomber holds", len(kids), "children", flush=True)
for pid in kids:
    os.waitpid(pid, 0)
""")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = bomber.kc.get_iopub_msg(timeout=30)
            if msg["msg_type"] == "stream" and "bomber holds" in msg["content"]["text"]:
                break
        out = honest.run("""
import threading
done = []
threads = [threading.Thread(target=done.append, args=(i,)) for i in range(4)]
try:
    for t in threads: t.start()
    for t in threads: t.join()
    print("threads ok", len(done))
except RuntimeError as e:
    print("THREADS FAILED", e)
""")
        assert "threads ok 4" in out, out
    finally:
        time.sleep(3)
        honest.close()
        bomber.close()


# ====================================================================== slow part: one class run
@pytest.fixture(scope="module")
def class_run(tmp_path_factory):
    """The class graded once per test session (tests/shared_runs.py ``lesson01_class``): every case of the table
    beside tests/test_class_mess.py's messy class, graded by one ``grade`` command."""
    run = shared_runs.lesson01_class(tmp_path_factory)
    return run.outcome, run.guarded_before, run.guarded_after, run.ctx


@pytest.mark.slow
def test_grade_command_exits_0_and_names_every_submission(class_run):
    outcome, *_ = class_run
    assert outcome.returncode == 0, outcome.stdout[-3000:] + outcome.stderr[-3000:]
    missing = [c.student for c in C.CASES if c.student not in outcome.stdout]
    assert not missing, f"not named in the report: {missing}"


@pytest.mark.slow
def test_class_run_is_bounded_in_time(class_run):
    outcome, *_ = class_run
    assert outcome.seconds < 900, f"the class run took {outcome.seconds:.0f} s"


@pytest.mark.slow
@pytest.mark.parametrize("case", [_xfail(c, c.xfail) for c in C.CASES])
def test_outcome(class_run, case):
    outcome, *_ = class_run
    problems = classrun.check_case(outcome, case)
    assert not problems, f"{case.student} ({case.what}): " + "; ".join(problems)


@pytest.mark.slow
def test_nothing_written_outside_the_students_folders(class_run):
    outcome, before, after, ctx = class_run
    assert before == after, "a guarded file of the repository changed during the class run"
    # the kernel writes into its own copy of the folder (x24 saw it work): nothing reaches the grader's
    own = os.path.join(outcome.root, "autograded", "x24_write_outside", C.ASSIGNMENT) + os.sep
    assert not os.path.exists(own + f"{C.MARKER}-x24_write_outside.txt")
    assert classrun.stray_markers(outcome.root, ()) == []
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                            capture_output=True, text=True).stdout
    assert C.MARKER not in status, status


@pytest.mark.slow
def test_fake_grade_files_count_for_nothing(class_run):
    outcome, *_ = class_run
    result = outcome.results["x25_fake_grade_file"]
    assert result["student"] == "x25_fake_grade_file" and "worker_pid" in result and "score" not in result
    with open(os.path.join(outcome.root, "grades.csv")) as fh:
        assert "x25_fake_grade_file,9" not in fh.read().replace(C.ASSIGNMENT + ",", "")


@pytest.mark.slow
def test_edited_tests_are_restored_and_run(class_run):
    outcome, _, _, ctx = class_run
    nb = outcome.autograded("x19_tests_replaced_by_pass")
    assert nb is not None
    release = {c.metadata.nbgrader["grade_id"]: c.source for c in ctx.release.cells
               if "nbgrader" in c.metadata}
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    visible = cells["softmax_visible"]
    assert visible.source == release["softmax_visible"], "nbgrader restores the locked test"
    assert visible.execution_count is not None
    text = json.dumps(visible.outputs)
    assert "unstable softmax" in text, f"the restored test ran and named the misconception: {text[:500]}"
    assert "BEGIN HIDDEN TESTS" in cells["softmax_hidden"].source, "the hidden test is back too"


@pytest.mark.slow
def test_points_cannot_be_raised(class_run):
    outcome, *_ = class_run
    maxima = {s: m for s, (_, m) in outcome.grades.items()}
    assert set(maxima.values()) == {C.MAX_SCORE + 2}, maxima  # 9 autograded + the 2-point written answer


@pytest.mark.slow
def test_no_feedback_page_can_run_script(class_run):
    """Static check of every feedback page with an HTML parser: the template's own scripts (those of an
    honest student's page) and nothing else; no event handler, javascript: URL, frame, form or SVG."""
    outcome, *_ = class_run
    template_scripts = set(classrun.script_report(outcome.feedback_raw("s01_correct"))[0])
    assert template_scripts, "the honest page should carry the template's scripts"
    bad = {}
    for case in C.CASES:
        page = outcome.feedback_raw(case.student)
        problems = classrun.unsafe_markup(page, template_scripts) if page else []
        if problems:
            bad[case.student] = problems[:5]
    assert not bad, bad
    assert outcome.feedback_raw("x57_feedback_script") and outcome.feedback_raw("x49_html_injection")


@pytest.mark.slow
def test_feedback_folders_hold_only_the_page(class_run):
    outcome, *_ = class_run
    odd = {}
    for case in C.CASES:
        folder = os.path.join(outcome.root, "feedback", case.student, C.ASSIGNMENT)
        # one page: the graded notebook's, or (a submission that could not be graded: x27-x30) the page that
        # says why and what to do (pipeline.write_not_graded_pages)
        if os.path.isdir(folder) and sorted(os.listdir(folder)) not in (["attention.html"], ["not-graded.html"]):
            odd[case.student] = sorted(os.listdir(folder))
    assert not odd, odd
    for student in ("x27_corrupt_json", "x28_empty_file", "x30_wrong_file_name"):
        page = os.path.join(outcome.root, "feedback", student, C.ASSIGNMENT, "not-graded.html")
        assert os.path.isfile(page), f"{student}: not graded, and no page says why"


@pytest.mark.slow
def test_grading_run_leaves_nothing_in_tmp(class_run):
    outcome, *_ = class_run
    assert outcome.tmp_left == [], outcome.tmp_left


@pytest.mark.slow
def test_submissions_are_data_after_intake(class_run):
    outcome, *_ = class_run
    folder = os.path.join(outcome.root, "submitted", "x52_links_and_fifo", C.ASSIGNMENT)
    # nothing in submitted/ is moved (issue 66.1): the links and the FIFO are held where they are, never read
    assert sorted(os.listdir(folder)) == ["attention.ipynb", "gradebook.db", "hard.db", "pipe", "s01.ipynb",
                                          "timestamp.txt"]
    assert os.path.islink(os.path.join(folder, "gradebook.db")) and os.path.islink(os.path.join(folder, "s01.ipynb"))
    assert os.path.getsize(os.path.join(outcome.root, "gradebook.db")) > 10_000, "the gradebook is intact"
    quarantine = os.path.join(outcome.root, "logs", "intake", C.ASSIGNMENT, "x52_links_and_fifo")
    held = sorted(os.listdir(quarantine)) if os.path.isdir(quarantine) else []
    assert not set(held) & {"gradebook.db", "hard.db", "pipe", "s01.ipynb"}, f"a held entry was copied: {held}"


# ------------------------------------------------------------------ warm kernels (issue 16, grading/kernel/warm.py)
@pytest.fixture
def warm_template(tmp_path, monkeypatch):
    """The worker's template, started as a worker starts it; launchers find it through the environment."""
    from grading.kernel import launcher, warm

    ok, why = launcher.bwrap_works()
    if not (ok and warm.enabled()):
        pytest.skip(f"warm kernels need root and bwrap ({why if not ok else 'not root'})")
    launcher.install_kernelspec()
    template = warm.start_template(folder=tempfile.mkdtemp(prefix="course-warm-test-"))
    assert template.wait_ready(), "the template imported the course's stack and opened its socket"
    monkeypatch.setenv("COURSE_WARM_SOCKET", template.path)
    yield template.proc
    template.stop()


def _run_sandboxed(cells: list[str], folder, timeout: int = 30, cls=None):
    from nbformat.v4 import new_code_cell, new_notebook
    from traitlets.config import Config

    from grading.kernel.client import ResilientExecute

    config = Config()
    config.KernelManager.ip = os.path.join(tempfile.mkdtemp(prefix="nbg-ipc-"), "kernel")
    os.makedirs(folder, exist_ok=True)
    os.chmod(folder, 0o755)
    nb, _ = (cls or ResilientExecute)(timeout=timeout, kernel_name="course-sandbox", config=config).preprocess(
        new_notebook(cells=[new_code_cell(c) for c in cells]), {"metadata": {"path": str(folder)}})
    return [["".join(o.get("text", "")) or o.get("ename", "") for o in c.outputs] for c in nb.cells]


def _uid_processes(uid: int) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and os.stat(f"/proc/{name}").st_uid == uid:
                pids.append(int(name))
        except OSError:
            pass
    return pids


def test_warm_kernels_start_pristine_for_every_submission(warm_template, tmp_path):
    """Each warm kernel is a fresh fork of the template: what one student patched, wrote or left
    running is not there for the next, who runs as another uid in another sandbox."""
    first = ["import os, sys\nprint(os.getuid(), 'torch' in sys.modules)",
             "import numpy, torch, course_lib.checks\nnumpy.allclose = lambda *a, **k: True\n"
             "torch.softmax = None\ncourse_lib.checks.PATCHED = 1\nopen('/tmp/planted', 'w').write('x')\n"
             "open('left-behind.txt', 'w').write('x')\nimport subprocess\n"
             "subprocess.Popen(['sleep', '600'], start_new_session=True)\nprint('patched')"]
    second = ["import os, sys, numpy, torch, course_lib.checks\nprint(os.getuid(), 'torch' in sys.modules)",
              "print(numpy.allclose([1], [2]), torch.softmax is not None, hasattr(course_lib.checks, 'PATCHED'), "
              "os.path.exists('/tmp/planted'), os.path.exists('left-behind.txt'))",
              "print(sorted(open(f'/proc/{p}/comm').read().strip() for p in os.listdir('/proc') if p.isdigit()))",
              "import gc\nprint(gc.get_threshold(), gc.isenabled())"]
    out1 = _run_sandboxed(first, tmp_path / "a")
    uid1, warm1 = out1[0][0].split()
    assert warm1 == "True", "the first kernel was forked from the template (torch already imported)"
    assert out1[1] == ["patched\n"]
    assert _uid_processes(int(uid1)) == [], "the first kernel and its escaped child died with its sandbox"
    out2 = _run_sandboxed(second, tmp_path / "b")
    uid2, warm2 = out2[0][0].split()
    assert warm2 == "True" and uid2 != uid1 and int(uid2) > 0
    assert out2[1] == ["False True False False False\n"], "modules, /tmp and the folder are pristine"
    assert "sleep" not in out2[2][0], "no process of the first submission is visible"
    # the template imports with the grader's fewer collections (grading.collect_less), its kernels collect as Python does
    assert out2[3] == [f"{(700, 10, 10)} True\n"], out2[3]


def test_warm_kernels_are_as_isolated_as_cold_ones(warm_template, tmp_path):
    """Same sandbox: no network, the repository and home hidden, bounded, not root, no credential."""
    cells = ["import os, sys, resource\nprint(os.getuid() != 0, 'torch' in sys.modules, os.getcwd())",
             f"print(sorted(os.listdir({REPO!r})))",
             "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=2)\n    print('online')\n"
             "except OSError:\n    print('offline')",
             "print(resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20, resource.getrlimit(resource.RLIMIT_NPROC)[0] > 0)",
             "print(sorted(k for k in os.environ if 'WARM' in k or 'DB_URL' in k), open('/proc/self/status').read()"
             ".split('NoNewPrivs:')[1].split()[0], open('/proc/self/status').read().split('CapEff:')[1].split()[0])",
             "print(repr(open('/proc/1/cmdline', 'rb').read()), len([p for p in os.listdir('/proc') if p.isdigit()]))"]
    out = _run_sandboxed(cells, tmp_path / "c")
    with open("/proc/1/cmdline", "rb") as fh:
        host1 = repr(fh.read())
    proc1, npids = out[5][0].rsplit(" ", 1)
    assert proc1 != host1 and int(npids) < 20, ("its own /proc: pid 1 is the sandbox's", out[5], host1)
    assert out[0] == ["True True /tmp/work\n"]
    assert "notebooks" not in out[1][0] and ".git" not in out[1][0], out[1]
    assert out[2] == ["offline\n"]
    assert out[3][0].split()[0] == str(int(os.environ.get("COURSE_SANDBOX_MEMORY_MB", 6144)))
    assert out[4] == ["[] 1 0000000000000000\n"], "no template socket or credential, no_new_privs, no capability"


def test_the_templates_warm_ups_keep_the_checks_teacher_notes():
    """The template's warm-ups (grading/kernel/warm.py) load each graded assignment's checks as its notebook
    reaches them, so a failed check in a kernel forked after them still reads as a teacher's note. An
    import of the checks module itself skipped that wrapping: the kernel showed IPython's full
    traceback instead (0.1 s of formatting per failed cell)."""
    import subprocess

    code = ("from grading.kernel import warm\nwarm._warm_up(warm.checks_modules(['05_blocks']))\n"
            "import sys\nprint('course_lib.checks.blocks' in sys.modules)\n"
            "from course_lib import checks\n"
            "def stub(*args, **kwargs):\n    raise NotImplementedError()\n"
            "try:\n    checks.blocks.check_layer_norm(stub)\nexcept AssertionError as err:\n"
            "    print(type(err).__name__, hasattr(err, '_render_traceback_'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=REPO))
    assert out.stdout.split("\n")[:2] == ["True", "NotImplementedYet True"], out.stdout + out.stderr[-2000:]


def test_a_record_made_on_swapped_bpe_merges_scores_zero(monkeypatch):
    """The judge keeps the merges of lesson 06's hidden encode cases in memory (course_lib/judge/bpe.py, built once
    per process); a kernel never holds them (its hidden inputs come as data, grading/feed.py). Whoever makes the
    record on other merges (here: every kept input replaced by an empty one) gets outputs recorded on other inputs
    than the test's; the verifier builds its own inputs, finds the record does not match them, and the cell fails:
    the kernel records outputs, it never chooses the inputs they are judged on."""
    import json

    from course_lib.checks import bpe, transcript
    from course_lib.judge import bpe as judge
    from grading import verify

    def encode(ids, merges):  # a right answer: the earliest-learned pair present, merged left to right
        ids = list(ids)
        while len(ids) >= 2:
            present = [p for p in zip(ids, ids[1:]) if p in merges]
            if not present:
                return ids
            pair, out, i = min(present, key=merges.get), [], 0
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                    out, i = out + [merges[pair]], i + 2
                else:
                    out, i = out + [ids[i]], i + 1
            ids = out
        return ids

    cell = "checks.bpe.check_encode(encode_ids, hidden=True)\n"
    with transcript.using("record") as state:  # an honest record: the right answer passes
        bpe.check_encode(encode, hidden=True)
        honest = json.loads(json.dumps(state.calls))  # as the notebook file carries them
    assert verify.verify_cell(cell, honest) is None
    bpe.warm_up()
    kept = {name: judge._input(name) for name in ("medical 80 merges", "medical 120 merges")}
    with monkeypatch.context() as m:  # every kept input replaced by an empty one (no merges)
        m.setattr(judge, "_input", lambda name: type(kept[name])())
        with transcript.using("record") as state:
            bpe.check_encode(encode, hidden=True)  # record mode never compares
            records = json.loads(json.dumps(state.calls))
    assert judge._input("medical 80 merges") == kept["medical 80 merges"]
    verdict = verify.verify_cell(cell, records)
    assert verdict is not None and "does not match input" in verdict and "hepatosplenomegaly" in verdict, verdict


def test_warm_and_cold_kernels_give_the_same_outputs(warm_template, tmp_path, monkeypatch):
    """The feedback must not depend on which kernel ran the submission: a warning names the cell's
    file, /tmp/ipykernel_<pid>/..., and the pid differs (2 cold, another warm): it is dropped."""
    cells = ["import sys, warnings\nprint('torch' in sys.modules)",
             "def f():\n    warnings.warn('careful', RuntimeWarning)\nf()",
             "def g():\n    return 1 / 0\ng()"]
    warm_out = _run_sandboxed(cells, tmp_path / "warm")
    monkeypatch.delenv("COURSE_WARM_SOCKET")
    cold_out = _run_sandboxed(cells, tmp_path / "cold")
    assert (warm_out[0], cold_out[0]) == (["True\n"], ["False\n"]), "one warm and one cold kernel"
    assert "/tmp/ipykernel/" in warm_out[1][0] and "RuntimeWarning: careful" in warm_out[1][0], warm_out
    assert warm_out[1:] == cold_out[1:]


def test_stream_outputs_do_not_depend_on_how_the_kernel_flushed():
    """A print's text and its newline arrive as one stream message or two, as the kernel happens to
    flush: the graded notebook keeps one output per run of writes to a stream, in order."""
    from nbformat.v4 import new_code_cell, new_output

    from grading.kernel.client import stable_outputs

    def cell(*outs):
        c = new_code_cell("print(x)")
        c.outputs = list(outs)
        return c

    split = cell(new_output("stream", name="stdout", text="a"), new_output("stream", name="stdout", text="\n"),
                 new_output("stream", name="stderr", text="w\n"), new_output("stream", name="stdout", text="b\n"),
                 new_output("error", ename="E", evalue="v", traceback=["File /tmp/ipykernel_7/1.py:2"]))
    whole = cell(new_output("stream", name="stdout", text="a\n"), new_output("stream", name="stderr", text="w\n"),
                 new_output("stream", name="stdout", text="b\n"),
                 new_output("error", ename="E", evalue="v", traceback=["File /tmp/ipykernel_2/1.py:2"]))
    stable_outputs(split)
    stable_outputs(whole)
    assert split.outputs == whole.outputs
    assert [o.get("text") for o in split.outputs[:3]] == ["a\n", "w\n", "b\n"]
    assert split.outputs[3]["traceback"] == ["File /tmp/ipykernel/1.py:2"]


def test_a_warm_kernels_cpu_is_counted_for_the_load_rule(warm_template, tmp_path):
    """The load rule (ResilientExecute._starved) reads the kernel's CPU time and run-queue waits
    from the launcher's process tree; a warm kernel is forked by the template, into the launcher's
    sandbox, and must be counted (else a starved warm kernel's timeout would be charged)."""
    from grading.kernel.client import ResilientExecute, tree_cpu_seconds

    seen = []

    class Recording(ResilientExecute):
        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            seen.append(tree_cpu_seconds(self._kernel_pid()))

    out = _run_sandboxed(["import sys, time\nt0 = time.process_time()\nwhile time.process_time() < t0 + 1.5:\n"
                          "    pass\nprint('torch' in sys.modules)"], tmp_path / "d", cls=Recording)
    assert out[0] == ["True\n"], "a warm kernel"
    assert seen and seen[0] >= 1.4, seen
