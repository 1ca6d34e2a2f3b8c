"""The hostile class of 01_attention: one entry per submission, with its exact expected outcome.

Each :class:`Case` names a student (the folder under ``submitted/``), says in one line
what the submission does, and fixes what grading must make of it:

``score``       the exact autograded points (of 9: softmax 1 + 2, numpy attention 1 + 2,
                torch attention 1 + 2) that ``grades.csv`` must show for the student;
``feedback``    substrings the student's feedback HTML must show in its outputs, errors or
                notes (never counted when they only appear in the student's own source);
``report``      substrings the report of ``python -m grading grade`` must show on the lines
                that name the student (its list of problems);
``absent``      substrings the feedback's outputs must NOT show ("LEAK", "ESCAPED", ...);
``absent_html`` substrings the feedback's raw HTML must not contain (an unescaped <script>);
``integrity``   True when the expectation rests on a finding of ``grading/integrity.py``: the
                autograded tests that run after the cell with the finding score 0, with a
                visible ``IntegrityError`` (the tests before it count as they ran);
``restored``    True when grading put the notebook's structure back as released (a deleted or
                edited test cell, changed nbgrader metadata, a cell of no assignment): no cost,
                a "restored as released" note in the feedback;
``scan_gap``    the static scan (``grading.integrity.ScanSubmission``) misses this case: its
                unit test is ``xfail(strict=True)`` with this reason;
``xfail``       grading lacks the behaviour the case demands: the class-run test of the case
                is ``xfail(strict=True)`` with this reason (it turns red once grading gains
                the behaviour: then remove the mark).

``build(ctx)`` returns the files of the submission folder (name -> text): most cases take
the release notebook, put the instructor's solutions (or the release stubs) into the
solution cells and then do their one hostile thing. Paths a case probes (the repository,
the course root, another student's folder) come from ``ctx``; markers a case prints when
an attack WORKS ("LEAK", "ESCAPED", ...) are assembled at run time, so the feedback never
shows them merely because it shows the source.

How the expectations were decided (also in tests/adversarial/__init__.py):

* broken or abusive but not cheating (loops, sleep, exit, segfaults, memory, forks, output
  floods, recursion, odd exceptions, deleting one's own answer): graded on what ran; the
  cells it broke score 0, the rest count;
* cheating (patching the checks or np.allclose, rebinding ``checks`` or AssertionError,
  hiding errors through IPython, exec/ctypes/sys.modules, calling the reference or PyTorch's
  built-in attention): the tests after the code score 0 with the reason shown (issue 43:
  code can only change the tests that run after it);
* what grading restores (editing or deleting test cells, editing nbgrader metadata, adding
  graded cells, another assignment's notebook): graded as released, with a note; the score
  is what the student's own code earns;
* not gradable (corrupt, empty, not a notebook, wrong file name, empty folder): 0, a row in
  grades.csv, and the report says why;
* the sandbox keeps every secret and every folder but the student's own out of reach.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import textwrap
from typing import Callable, Dict, Optional, Tuple

import nbformat
from nbformat.v4 import new_code_cell

ASSIGNMENT = "01_attention"
NOTEBOOK = "attention.ipynb"
MAX_SCORE = 9.0
MARKER = "PWNED"  # every file a hostile submission tries to write outside its folder is named PWNED-*


@dataclasses.dataclass
class Context:
    """What a case needs to build its submission."""

    release: nbformat.NotebookNode  # the release notebook of 01_attention (stubs, no hidden tests)
    solutions: Dict[str, str]  # grade_id -> the instructor's solution cell source (markers removed)
    root: str  # the nbgrader course root (COURSE_ROOT) of the run
    repo: str  # the repository
    student: str = ""  # the student being built (set by classrun.write_class)

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)


@dataclasses.dataclass(frozen=True)
class Case:
    student: str
    what: str
    score: float
    feedback: Tuple[str, ...] = ()  # must be in the feedback HTML's outputs (not in the student's source)
    report: Tuple[str, ...] = ()  # must be on the grade command's report lines that name the student
    build: Optional[Callable[[Context], Dict[str, str]]] = None  # None: an honest demo student
    absent: Tuple[str, ...] = ()  # must not be in the feedback's outputs
    absent_html: Tuple[str, ...] = ()  # must not be in the feedback's raw HTML
    integrity: bool = False
    restored: bool = False
    scan_gap: Optional[str] = None
    xfail: Optional[str] = None

    @property
    def honest(self) -> bool:
        return self.build is None


# ------------------------------------------------------------------ building blocks
@dataclasses.dataclass(frozen=True)
class Special:
    """A submission entry that is not a file with text: ``symlink`` / ``hardlink`` to ``target``, or a ``fifo``.
    (An archive from an LMS, or a student's own upload folder, can hold any of them.)"""

    kind: str
    target: str = ""


def _gid(cell) -> Optional[str]:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _index(nb, grade_id: str) -> int:
    for i, cell in enumerate(nb.cells):
        if _gid(cell) == grade_id:
            return i
    raise KeyError(f"no cell {grade_id!r} in the release notebook")


def notebook(ctx: Context, *, correct: bool = True, replace: Optional[Dict[str, str]] = None,
             after: Optional[Dict[str, list]] = None, drop: Tuple[str, ...] = (),
             edit: Optional[Callable] = None) -> nbformat.NotebookNode:
    """The release notebook with the instructor's solutions (``correct``) or the stubs, then
    ``replace`` (grade_id -> cell source), new student cells ``after`` a grade_id, cells dropped,
    and a final ``edit(nb)`` for anything else."""
    nb = copy.deepcopy(ctx.release)
    sources = dict(ctx.solutions) if correct else {}
    sources.update(replace or {})
    for cell in nb.cells:
        if _gid(cell) in sources:
            cell.source = textwrap.dedent(sources[_gid(cell)]).strip("\n")
    for gid, new_sources in (after or {}).items():
        i = _index(nb, gid)
        for k, src in enumerate(new_sources):
            nb.cells.insert(i + 1 + k, new_code_cell(textwrap.dedent(src).strip("\n")))
    nb.cells = [c for c in nb.cells if _gid(c) not in drop]
    if edit is not None:
        edit(nb)
    return nb


def files(nb, name: str = NOTEBOOK) -> Dict[str, str]:
    return {name: nbformat.writes(nb), "timestamp.txt": "2025-01-15 12:00:00.000000 UTC"}


def added(ctx: Context, after: str, source: str, correct: bool = True) -> Dict[str, str]:
    """Correct (or blank) submission plus one student cell after ``after``."""
    return files(notebook(ctx, correct=correct, after={after: [source]}))


LAST_IMPL = "attention_torch_impl"  # a student cell here runs after all three functions exist


def with_torch_cell(ctx: Context, prefix: str = "", suffix: str = "") -> Dict[str, str]:
    """Correct submission whose torch solution cell gets code before / after the function."""
    src = textwrap.dedent(prefix).strip("\n") + "\n\n" + ctx.solutions["attention_torch_impl"].strip("\n") \
        + "\n\n" + textwrap.dedent(suffix).strip("\n")
    return files(notebook(ctx, replace={"attention_torch_impl": src.strip("\n")}))


STUB_SOFTMAX = '''
def softmax(x, axis=-1):
    """Numerically stable softmax of x along axis."""
    # YOUR CODE HERE
    raise NotImplementedError()
'''

WRONG_SOFTMAX = '''
def softmax(x, axis=-1):
    """exp / sum without subtracting the max: overflows at large inputs."""
    e = np.exp(np.asarray(x, dtype=np.float64))
    return e / e.sum(axis=axis, keepdims=True)
'''


def _r(path: str) -> str:
    return repr(path)


# ------------------------------------------------------------------ the hostile cases
def infinite_loop(ctx):
    # the loop sits before the def: the torch function never exists
    return with_torch_cell(ctx, prefix="while True:\n    pass")


def sleep_forever(ctx):
    return added(ctx, "softmax_impl", "import time\ntime.sleep(10 ** 6)  # right before the softmax tests")


def ignore_interrupt(ctx):
    return added(ctx, LAST_IMPL, """
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the per-cell timeout's interrupt is ignored
        while True:
            pass
    """)


def sys_exit_in_function(ctx):
    return files(notebook(ctx, replace={"softmax_impl": '''
        import sys

        def softmax(x, axis=-1):
            """Leaves the interpreter instead of answering."""
            sys.exit("softmax refuses to be graded")
    ''', "attention_torch_impl": ctx.solutions["attention_torch_impl"] + "\n\nsys.exit(0)\n"}))


def os_exit(ctx):
    return with_torch_cell(ctx, suffix="import os\nos._exit(1)")


def builtin_exit(ctx):
    return with_torch_cell(ctx, suffix="exit()")


def segfault_ctypes(ctx):
    return with_torch_cell(ctx, suffix="import ctypes\nctypes.string_at(0)")


def kill_all(ctx):
    # as nobody in its own PID namespace it can signal nothing but itself, which kill(-1) spares;
    # without the namespace it would kill the other worker's kernel (also nobody)
    return with_torch_cell(ctx, suffix="""
        import os, signal
        os.kill(-1, signal.SIGKILL)  # every process it may signal
        print("still alive after kill(-1)")
    """)


def memory_bomb(ctx):
    # 50 GiB touched at once: the sandbox's address-space limit refuses it before any page is used
    return with_torch_cell(ctx, prefix="hog = np.ones(50 * 1024 ** 3 // 8)")


def fork_bomb(ctx):
    return added(ctx, LAST_IMPL, """
        import os, time
        children, refused = [], None
        for _ in range(3000):
            try:
                pid = os.fork()
            except OSError as err:
                refused = err
                break
            if pid == 0:
                time.sleep(0.5)
                os._exit(0)
            children.append(pid)
        for pid in children:
            os.waitpid(pid, 0)
        if refused:
            print(f"fork refused after {len(children)} children ({type(refused).__name__})")
        else:
            print("FORK LIMIT " + "NOT HIT after", len(children), "children")
    """)


def print_flood(ctx):
    return added(ctx, LAST_IMPL, """
        import sys
        line = "flood " * 16 + "\\n"  # 97 bytes
        for _ in range(1_050_000):  # ~100 MB
            sys.stdout.write(line)
    """)


def huge_image(ctx):
    return added(ctx, LAST_IMPL, """
        import base64, os
        from IPython.display import display
        blob = base64.b64encode(os.urandom(30 * 1024 * 1024)).decode()  # 40 MB of base64
        display({"image/png": blob}, raw=True)
        print("huge image displayed")
    """)


def disk_fill(ctx):
    return added(ctx, LAST_IMPL, """
        chunk = b"\\0" * (16 * 1024 * 1024)
        try:
            with open("filler.bin", "wb") as fh:
                for _ in range(20):  # 320 MiB
                    fh.write(chunk)
                    fh.flush()
            print("DISK LIMIT " + "NOT HIT")
        except OSError as err:
            print("disk write stopped:", err)
    """)


def recursion(ctx):
    return files(notebook(ctx, replace={"softmax_impl": '''
        def softmax(x, axis=-1):
            """Calls itself forever."""
            return softmax(x, axis)
    '''}))


def deep_recursion_crash(ctx):
    # C-level recursion (repr of a deeply nested list) past a raised recursion limit: a segfault
    return with_torch_cell(ctx, suffix="""
        import sys
        sys.setrecursionlimit(10 ** 8)
        nested = []
        for _ in range(10 ** 6):
            nested = [nested]
        repr(nested)
    """)


def keyboard_interrupt_subclass(ctx):
    return files(notebook(ctx, replace={"softmax_impl": '''
        class Stop(KeyboardInterrupt):
            """Not an Exception: escapes `except Exception` in the checks."""

        def softmax(x, axis=-1):
            raise Stop("softmax stops the grader")
    ''', "attention_torch_impl": '''
        class Escape(BaseException):
            """Neither an Exception nor an interrupt."""

        def scaled_dot_product_attention_torch(q, k, v, mask=None):
            raise Escape("torch attention escapes the checks")
    '''}))


def delete_test_cell(ctx):
    return files(notebook(ctx, drop=("softmax_visible",)))


def delete_solution_cell(ctx):
    return files(notebook(ctx, drop=("softmax_impl",)))


def test_cells_replaced_by_pass(ctx):
    # a wrong softmax, and both softmax tests emptied: nbgrader restores them and they must run
    def edit(nb):
        for gid in ("softmax_visible", "softmax_hidden"):
            nb.cells[_index(nb, gid)].source = "pass"
    return files(notebook(ctx, replace={"softmax_impl": WRONG_SOFTMAX}, edit=edit))


def points_100(ctx):
    def edit(nb):
        nb.cells[_index(nb, "softmax_visible")].metadata.nbgrader["points"] = 100
    return files(notebook(ctx, edit=edit))


def test_to_solution(ctx):
    def edit(nb):
        cell = nb.cells[_index(nb, "softmax_hidden")]
        cell.metadata.nbgrader.update(grade=False, solution=True, locked=False)
        cell.metadata.nbgrader.pop("points", None)
        cell.source = "pass"
    return files(notebook(ctx, replace={"softmax_impl": WRONG_SOFTMAX}, edit=edit))


def bonus_cell(ctx):
    def edit(nb):
        cell = new_code_cell('"""Bonus points."""\npass')
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": False, "points": 50,
                                     "grade_id": "bonus", "schema_version": 3}
        nb.cells.append(cell)
    return files(notebook(ctx, edit=edit))


def duplicate_test_cell(ctx):
    def edit(nb):
        i = _index(nb, "softmax_visible")
        nb.cells.insert(i + 1, copy.deepcopy(nb.cells[i]))
        nb.cells[i + 1]["id"] = "duplicate-of-softmax-visible"
    return files(notebook(ctx, edit=edit))


def corrupt_json(ctx):
    text = nbformat.writes(notebook(ctx))
    return {NOTEBOOK: text[: len(text) // 2], "timestamp.txt": "2025-01-15 12:00:00.000000 UTC"}


def empty_file(ctx):
    return {NOTEBOOK: "", "timestamp.txt": "2025-01-15 12:00:00.000000 UTC"}


def not_a_notebook(ctx):
    return {NOTEBOOK: json.dumps({"cells": "softmax", "answers": [1, 2, 3]}),
            "timestamp.txt": "2025-01-15 12:00:00.000000 UTC"}


def wrong_file_name(ctx):
    return files(notebook(ctx), name="attention-Copy1.ipynb")


def empty_folder(ctx):
    return {}


def other_assignment(ctx):
    # lesson 02's notebook (as committed), handed in as lesson 01's
    text = subprocess.run(["git", "show", "HEAD:notebooks/02_masking/masking.ipynb"], cwd=ctx.repo,
                          capture_output=True, text=True, check=True).stdout
    return {NOTEBOOK: text, "timestamp.txt": "2025-01-15 12:00:00.000000 UTC"}




def _read_secrets_source(ctx) -> str:
    shared = os.path.join(os.path.dirname(ctx.repo), "shared", "DESIGN.md")
    targets = {
        "source notebook": os.path.join(ctx.repo, "notebooks", ASSIGNMENT, NOTEBOOK),
        "gradebook": ctx.path("gradebook.db"),
        "release": ctx.path("release", ASSIGNMENT, NOTEBOOK),
        "demo answers": os.path.join(ctx.repo, "grading", "demo", f"{ASSIGNMENT}.py"),
        "git": os.path.join(ctx.repo, ".git", "HEAD"),
        "design docs": shared,
        "instructor home": os.path.join(os.path.expanduser("~"), ".bash_history"),
    }
    return f"""
        targets = {targets!r}
        for what, path in targets.items():
            try:
                with open(path, "rb") as fh:
                    fh.read(64)
                print("LE" + "AK", what, path)
            except OSError as err:
                print("blocked read of", what, type(err).__name__)
    """


def read_secrets(ctx):
    # asks for the unsandboxed python3 kernel too: the grader must run its own sandbox kernel anyway
    def edit(nb):
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return files(notebook(ctx, after={LAST_IMPL: [_read_secrets_source(ctx)]}, edit=edit))


def read_other_student(ctx):
    paths = [ctx.path("submitted", "s01_correct", ASSIGNMENT, NOTEBOOK),
             ctx.path("autograded", "s01_correct", ASSIGNMENT, NOTEBOOK)]
    return added(ctx, LAST_IMPL, f"""
        import json
        stolen = None
        for path in {paths!r}:
            try:
                with open(path) as fh:
                    stolen = json.load(fh)
                print("LE" + "AK", path)
                break
            except OSError as err:
                print("blocked read of another student", type(err).__name__)
        if stolen is not None:  # copy s01_correct's answers into a module and use them
            answers = [c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                       for c in stolen["cells"] if c.get("metadata", {{}}).get("nbgrader", {{}}).get("solution")
                       and c["cell_type"] == "code"]
            with open("stolen_answers.py", "w") as fh:
                fh.write("import math\\nimport numpy as np\\nimport torch\\n\\n" + "\\n\\n".join(answers))
            from stolen_answers import softmax, scaled_dot_product_attention, scaled_dot_product_attention_torch
    """, correct=False)


def socket_probe(ctx):
    return added(ctx, LAST_IMPL, """
        import socket, time
        # loopback, and a TEST-NET-1 address (RFC 5737: never routed, no real traffic)
        for host, port in [("127.0.0.1", 8888), ("192.0.2.1", 80)]:
            t0 = time.monotonic()
            try:
                with socket.create_connection((host, port), timeout=3):
                    print("CONNEC" + "TED to", host, port)
            except OSError as err:
                dt = time.monotonic() - t0
                print(f"socket to {host} blocked ({type(err).__name__})", "SL" + "OW" if dt > 1.5 else "fast")
    """)


def write_outside(ctx):
    me = ctx.student
    name = f"{MARKER}-{me}.txt"
    targets = [
        os.path.join(ctx.repo, "course_lib", name),
        os.path.join(ctx.repo, "course_lib", "checks", name),
        os.path.join(ctx.repo, name),
        os.path.join(ctx.repo, "notebooks", ASSIGNMENT, name),
        os.path.join(ctx.repo, "grading", name),
        ctx.path(name),
        ctx.path("autograded", "s01_correct", ASSIGNMENT, name),
        ctx.path("submitted", me, ASSIGNMENT, name),
        ctx.path("feedback", name),
        os.path.join("/var/tmp", name),
    ]
    appends = [os.path.join(ctx.repo, "course_lib", "checks", "attention.py"),
               os.path.join(ctx.repo, "course_lib", "attention.py")]
    return added(ctx, LAST_IMPL, f"""
        for path in {targets!r}:
            try:
                with open(path, "w") as fh:
                    fh.write("written from a student's kernel")
                print("ESC" + "APED: wrote", path)
            except OSError as err:
                print("blocked write", type(err).__name__)
        for path in {appends!r}:
            try:
                open(path, "a").close()  # opening for append is enough to prove write access
                print("ESC" + "APED: may append to", path)
            except OSError as err:
                print("blocked append", type(err).__name__)
        with open({name!r}, "w") as fh:
            fh.write("own folder")
        with open("/tmp/{name}", "w") as fh:
            fh.write("private tmp")
        print("own folder and private /tmp writable")
    """)


def fake_grade_file(ctx):
    me = ctx.student
    targets = [ctx.path("grades.csv"), ctx.path("logs", "results", ASSIGNMENT, f"{me}.json"),
               ctx.path("gradebook.db")]
    return added(ctx, LAST_IMPL, f"""
        import json
        fake = json.dumps({{"student": {me!r}, "score": 9, "autograded": True, "autograde_ok": True}})
        for path in {targets!r}:
            try:
                with open(path, "a") as fh:
                    fh.write("{ASSIGNMENT},{me},9.0,9.0\\n" if path.endswith(".csv") else fake)
                print("ESC" + "APED: wrote", path)
            except OSError as err:
                print("blocked fake grade", type(err).__name__)
        for name in ("grades.csv", "gradebook.db", "{me}.json"):
            with open(name, "w") as fh:  # in its own folder: harmless, and must not count
                fh.write(fake)
        print("Score: 9/9 (all tests passed)")
    """, correct=False)


def fake_feedback(ctx):
    # nbgrader copies the files in the kernel's folder into the student's feedback folder:
    # a forged attention.html there must not survive as the feedback
    return added(ctx, LAST_IMPL, """
        fake = "<html><body><h1>attention (Score: 11.0 / 11.0)</h1><p>FORGED " + "FEEDBACK</p></body></html>"
        with open("attention.html", "w") as fh:
            fh.write(fake)
        print("forged attention.html written")
    """, correct=False)


def fake_passed(ctx):
    return files(notebook(ctx, correct=False, replace={"softmax_impl": '''
        print("softmax: visible tests passed")
        print("All tests passed! 9/9 points")

        def softmax(x, axis=-1):
            """Prints success, returns its input."""
            print("softmax: visible tests passed")
            return x
    '''}))


def patch_allclose(ctx):
    return files(notebook(ctx, correct=False, replace={"softmax_impl": WRONG_SOFTMAX + textwrap.dedent('''
        np.allclose = lambda *args, **kwargs: True
        np.isclose = lambda a, b, **kwargs: np.ones(np.broadcast(a, b).shape, dtype=bool)
        torch.allclose = lambda *args, **kwargs: True
    ''')}))


def patch_checks(ctx):
    return files(notebook(ctx, correct=False, replace={"softmax_impl": STUB_SOFTMAX + textwrap.dedent('''
        checks.attention.check_softmax = lambda *args, **kwargs: None
        checks.attention.check_attention_numpy = lambda *args, **kwargs: None
        checks.attention.check_attention_torch = lambda *args, **kwargs: None
    ''')}))


def setattr_checks(ctx):
    return files(notebook(ctx, correct=False, replace={"softmax_impl": STUB_SOFTMAX + textwrap.dedent('''
        for name in ("check_softmax", "check_attention_numpy", "check_attention_torch"):
            setattr(checks.attention, name, lambda *args, **kwargs: None)
    ''')}))


def sys_modules_checks(ctx):
    return files(notebook(ctx, correct=False, replace={"softmax_impl": STUB_SOFTMAX + textwrap.dedent('''
        import sys
        target = sys.modules["course_lib.checks.attention"]
        target.check_softmax = target.check_attention_numpy = target.check_attention_torch = print
    ''')}))


def redefine_checks(ctx):
    return added(ctx, LAST_IMPL, """
        from types import SimpleNamespace
        _ok = lambda *args, **kwargs: None
        checks = SimpleNamespace(attention=SimpleNamespace(
            check_softmax=_ok, check_attention_numpy=_ok, check_attention_torch=_ok))
    """, correct=False)


def redefine_assertion_error(ctx):
    return added(ctx, LAST_IMPL, """
        class AssertionError(Exception):
            '''A failed check is now an ordinary exception.'''
        NotImplementedError = AssertionError
    """, correct=False)


def swallow_errors(ctx):
    # IPython's custom exception hook: a failing test cell produces no error output at all
    return added(ctx, LAST_IMPL, """
        get_ipython().set_custom_exc((BaseException,), lambda shell, etype, value, tb, tb_offset=None: None)
    """, correct=False)


def swallow_errors_alias(ctx):
    # the same without ever writing the name get_ipython
    return added(ctx, LAST_IMPL, """
        from IPython.core import getipython as _g
        _shell = getattr(_g, "get_" + "ipython")()
        _shell.set_custom_exc((BaseException,), lambda *args, **kwargs: None)
    """, correct=False)


def call_reference(ctx):
    return files(notebook(ctx, replace={"softmax_impl": '''
        from course_lib.attention import softmax as _reference_softmax

        def softmax(x, axis=-1):
            """The course's own answer."""
            return _reference_softmax(x, axis)
    '''}))


def reference_via_checks(ctx):
    return files(notebook(ctx, replace={"softmax_impl": '''
        def softmax(x, axis=-1):
            """The reference, reached through the checks module the setup cell imported."""
            return checks.attention.ref.softmax(x, axis)
    '''}))


def call_sdpa(ctx):
    return files(notebook(ctx, replace={"attention_torch_impl": '''
        import torch.nn.functional as F

        def scaled_dot_product_attention_torch(q, k, v, mask=None):
            """PyTorch's built-in, with the weights recomputed for show."""
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            return out, w
    '''}))


def shell_escape(ctx):
    return added(ctx, LAST_IMPL, "!ls /\n%env")


def exec_answer(ctx):
    src = ctx.solutions["softmax_impl"]
    return files(notebook(ctx, replace={"softmax_impl": f"exec({src!r})"}))


def html_injection(ctx):
    def edit(nb):
        nb.cells[_index(nb, "why_sqrt_dk")].source = "Because <script>alert('x49 markdown')</script> variance."
    nb = notebook(ctx, after={LAST_IMPL: ["""
        from IPython.display import HTML, display
        display(HTML("<script>document.title = 'x49 output'</script><b>bold claim</b>"))
    """]}, edit=edit)
    return files(nb)


# ------------------------------------------------------------------ issue 20: root, data, secrets, totals, feedback
_SHADOW = """
# a module named like something the grader's launcher imports: it must never run outside the sandbox
import os, sys
try:
    with open({marker!r}, "w") as fh:
        fh.write("ran as uid %d" % os.getuid())
except OSError:
    pass
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[__name__]
import {name} as _real
sys.modules[__name__] = _real
"""


def launcher_shadow(ctx):
    """Modules in the submission named like the launcher's imports (json, shutil, subprocess, resource,
    secrets, functools) and a package ``grading`` with the launcher's own modules (``grading/kernel/launcher.py``,
    the ``protocol.py`` it loads, and ``grading/sandbox.py``: the launcher used to be ``python -m grading.sandbox``
    in this folder): none may run as root."""
    out = files(notebook(ctx, after={LAST_IMPL: ["print('shadow modules present')"]}))
    for name in ("json", "shutil", "subprocess", "resource", "secrets", "functools"):
        marker = os.path.join("/var/tmp", f"{MARKER}-{ctx.student}-{name}")
        out[f"{name}.py"] = _SHADOW.format(marker=marker, name=name)
    marker = os.path.join("/var/tmp", f"{MARKER}-{ctx.student}-grading")
    out["grading/__init__.py"] = f"open({marker!r}, 'w').write('grading package ran')\n"
    out["grading/sandbox.py"] = f"open({marker!r} + '-sandbox', 'w').write('launcher replaced')\n"
    out["grading/kernel/__init__.py"] = f"open({marker!r} + '-kernel', 'w').write('kernel package ran')\n"
    for name in ("launcher", "protocol"):
        out[f"grading/kernel/{name}.py"] = f"open({marker!r} + '-{name}', 'w').write('launcher replaced')\n"
    return out


def links_and_fifo(ctx):
    """The submission folder holds links to the gradebook and to another student's notebook, a hard
    link to the release, and a named pipe; the notebook tries to read them."""
    out = files(notebook(ctx, after={LAST_IMPL: ["""
        for name in ("gradebook.db", "s01.ipynb", "hard.db", "pipe"):
            try:
                with open(name, "rb") as fh:
                    fh.read(16)
                print("LE" + "AK through", name)
            except OSError as err:
                print("intake removed", name, type(err).__name__)
    """]}))
    out["gradebook.db"] = Special("symlink", ctx.path("gradebook.db"))
    out["s01.ipynb"] = Special("symlink", ctx.path("submitted", "s01_correct", ASSIGNMENT, NOTEBOOK))
    out["hard.db"] = Special("hardlink", ctx.path("gradebook.db"))  # sqlite writes it in place: 2 names
    out["pipe"] = Special("fifo")
    return out


def kernel_plants_links(ctx):
    """At run time the kernel replaces its own notebook with a link to the gradebook, links another
    student's notebook, makes a named pipe where the feedback page will go, and a link for chmod."""
    gradebook, other = ctx.path("gradebook.db"), ctx.path("autograded", "s01_correct", ASSIGNMENT, NOTEBOOK)
    return added(ctx, LAST_IMPL, f"""
        import os
        made = []
        for link, target in [("{NOTEBOOK}", {gradebook!r}), ("other.ipynb", {other!r}),
                             ("timestamp.txt", "/etc/shadow"), ("sub", "/")]:
            try:
                if os.path.lexists(link):
                    os.remove(link)
                os.symlink(target, link)
                made.append(link)
            except OSError as err:
                print("could not link", link, type(err).__name__)
        for fifo in ("attention.html", "extra.ipynb"):
            try:
                os.mkfifo(fifo)
                made.append(fifo)
            except OSError as err:
                print("could not mkfifo", fifo, type(err).__name__)
        print("planted", len(made), "links and pipes")
    """)


def env_secrets(ctx):
    return added(ctx, LAST_IMPL, """
        import os
        leaked = [k for k, v in os.environ.items() if "x54-secret" in v or "PASSWORD" in k or "DB_URL" in k]
        print("LE" + "AK", leaked) if leaked else print("environment clean:", len(os.environ), "variables")
        print("check mode", os.environ.get("COURSE_CHECK_MODE"))
        print("home is private", os.environ.get("HOME", "").startswith("/tmp"))
        print("interpreter", os.sys.prefix.endswith(".venv"))
    """)


def disk_total(ctx):
    return added(ctx, LAST_IMPL, """
        import os
        chunk, written = b"\\1" * (16 * 1024 * 1024), 0
        try:
            for i in range(8):  # 16 files of 64 MiB, each under the per-file limit: 1 GiB in all
                for where in (f"part{i}.bin", f"/tmp/part{i}.bin"):
                    with open(where, "wb") as fh:
                        for _ in range(4):
                            fh.write(chunk)
                            fh.flush()
                            written += len(chunk)
            print("DISK TOTAL " + "NOT HIT", written)
        except OSError as err:
            print("disk total bound hit after", written // 2 ** 20, "MiB:", err.strerror)
        for folder in (".", "/tmp"):
            for name in os.listdir(folder):
                if name.endswith(".bin"):
                    os.remove(os.path.join(folder, name))
    """)


def output_kinds_flood(ctx):
    return files(notebook(ctx, after={LAST_IMPL: [
        'print("one long line " + "z" * 5_000_000)',
        """
        import base64, os
        from IPython.display import display
        for _ in range(30):  # 30 images of 400 kB each
            display({"image/png": base64.b64encode(os.urandom(300_000)).decode()}, raw=True)
        """,
        'raise ValueError("a huge error " + "e" * 3_000_000)',
    ]}))


def feedback_script(ctx):
    def edit(nb):
        nb.cells[_index(nb, "why_sqrt_dk")].source = (
            "Because [click me](javascript:alert('x57 link')) and <img src=x onerror=\"alert('x57 img')\">.")
        nb.cells.insert(_index(nb, LAST_IMPL) + 1, nbformat.v4.new_markdown_cell(
            "<script>alert('x57 markdown')</script><a href=\"javascript:alert('x57 a')\">a</a>"
            "<iframe src=\"javascript:alert('x57 iframe')\"></iframe><svg onload=\"alert('x57 svg')\"></svg>"
            "<form action=\"javascript:alert('x57 form')\"><button>go</button></form>"))
    nb = notebook(ctx, after={LAST_IMPL: ["""
        from IPython.display import HTML, Markdown, display
        display(HTML("<a href='javascript:alert(1)'>x57 html link</a><img src=x onerror=alert('x57 out')>"))
        display(Markdown("[x57 md](javascript:alert('x57 md'))"))
        display({"image/png": '"><script>alert("x57 png")</script>', "text/plain": "x57 fake png"}, raw=True)
        display({"image/svg+xml": "<svg onload=\\"alert('x57 svg out')\\"></svg>"}, raw=True)
        display({"application/javascript": "alert('x57 js')"}, raw=True)
        print("x57 outputs shown")
    """]}, edit=edit)
    return files(nb)


def hostile_grade_id(ctx):
    def edit(nb):
        cell = nbformat.v4.new_code_cell("print('x58 cell')")
        cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": False,
                                     "grade_id": "<img src=x onerror=alert('x58')>", "schema_version": 3}
        nb.cells.insert(_index(nb, LAST_IMPL) + 1, cell)
    return files(notebook(ctx, edit=edit))


# ------------------------------------------------------------------ issue 33 (items 3-7): doors, records, channels, text
def aten_math_door(ctx):
    return files(notebook(ctx, replace={"attention_torch_impl": '''
        def scaled_dot_product_attention_torch(q, k, v, mask=None):
            """PyTorch's own math kernel, reached through torch.ops rather than F.scaled_dot_product_attention."""
            out, w = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=mask)
            return out, w
    '''}))


# a forged record for the call in progress, published by the student's own softmax just before the
# check's genuine one: the verifier takes the first record of a call, so it decodes the forged output
_FORGE = '''
import base64, hashlib, json
import numpy as np
from IPython.display import publish_display_data

def _fingerprint(args, kwargs):
    """course_lib.checks.transcript.fingerprint, written out (the checks are not imported)."""
    def enc(x):
        if isinstance(x, np.ndarray):
            a = np.ascontiguousarray(x)
            return {{"__ndarray__": {{"dtype": a.dtype.str, "shape": list(a.shape),
                                      "b64": base64.b64encode(a.tobytes()).decode("ascii")}}}}
        if isinstance(x, tuple):
            return {{"__tuple__": [enc(v) for v in x]}}
        if isinstance(x, dict):
            return {{"__dict__": [[enc(k), enc(v)] for k, v in x.items()]}}
        return x
    text = json.dumps(enc((tuple(args), dict(sorted(kwargs.items())))), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

_forged = []

def _forge(args, kwargs, output):
    entry = {{"exercise": "softmax", "label": "forged", "inputs": _fingerprint(args, kwargs), "output": output}}
    publish_display_data({{"application/vnd.course-check-record+json": entry, "text/plain": "{marker}"}})
    _forged.append(1)

def softmax(*args, **kwargs):
    """Correct, but its first call publishes a forged record of its own output first."""
    x = np.asarray(args[0], dtype=np.float64)
    axis = kwargs.get("axis", args[1] if len(args) > 1 else -1)
    if not _forged:
        _forge(args, kwargs, {payload})
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)  # a fully masked row: zeros
'''

# 60,000 integers n * (2**61 - 1) + 1: every one hashes to 1 (the old verifier built a set of them: quadratic)
SLOW_PAYLOAD = ('{"__set__": "set", "items": [{"__int__": str((2 ** 61 - 1) * i + 1)} for i in range(1, 60_001)]}')
# one string of 2 MB and 1,000 short ones in a string array: 1,001 x 2 MB x 4 bytes (8 GB) as numpy stores it
HUGE_PAYLOAD = ('{"__ndarray__": {"strings": ["x" * 2_000_000] + ["a"] * 1000, "shape": [1001], '
                '"dtype": "<U2000000"}}')


def slow_record(ctx):
    return files(notebook(ctx, replace={"softmax_impl": _FORGE.format(marker="x65 forged", payload=SLOW_PAYLOAD)}))


def huge_record(ctx):
    return files(notebook(ctx, replace={"softmax_impl": _FORGE.format(marker="x66 forged", payload=HUGE_PAYLOAD)}))


def unpublishable_record(ctx):
    return files(notebook(ctx, replace={"softmax_impl": '''
        def softmax(x, axis=-1):
            """Returns strings, one of them a lone surrogate: its record cannot be sent as UTF-8."""
            return np.array(["\\ud800", "x67"])
    '''}))


def display_update(ctx):
    return files(notebook(ctx, after={"softmax_impl": [
        "from IPython.display import display\nx68 = display({'text/plain': 'x68 as first shown'}, raw=True, "
        "display_id='x68')\nprint('x68 shown')"],
        LAST_IMPL: ["x68.update({'text/plain': 'x68 REWRITTEN'}, raw=True)\nprint('x68 update sent')"]}))


def channels_flood(ctx):
    return added(ctx, LAST_IMPL, """
        import os, sys
        chunk, written = b"e" * (1 << 20), 0
        for _ in range(64):  # 64 MiB straight to file descriptor 2
            try:
                written += os.write(2, chunk)
            except OSError as err:
                break
        print("x69 wrote", written >> 20, "MiB to fd 2")
        ipc = os.path.dirname(os.path.abspath(sys.argv[sys.argv.index("-f") + 1]))
        filled = 0
        try:
            with open(os.path.join(ipc, "fill.bin"), "wb") as fh:
                for _ in range(100):  # 100 MiB into the folder of its IPC sockets
                    fh.write(chunk)
                    fh.flush()
                    filled += 1
            print("IPC NOT " + "BOUNDED", filled)
        except OSError as err:
            print("x69 IPC folder bounded after", filled, "MiB:", err.strerror)
        finally:
            try:
                os.remove(os.path.join(ipc, "fill.bin"))
            except OSError:
                pass
    """)


def markdown_message(ctx):
    return files(notebook(ctx, replace={"softmax_impl": '''
        def softmax(x, axis=-1):
            """Raises an error whose message is markdown and HTML, quoted by the verifier's note."""
            raise ValueError("\\n\\n# x70 Fake headline\\n\\n[x70 link](http://x70.example) "
                             "![x70 img](http://x70.example/y.png) <script>alert('x70')</script>")
    '''}))


def course_env_and_proc(ctx):
    return added(ctx, LAST_IMPL, """
        import os
        seen = sorted(k for k in os.environ if k.startswith("COURSE_"))
        print("x71 COURSE_ names:", seen)
        print("x71 harmless setting", "LE" + "AKED" if os.environ.get("COURSE_X71_SETTING") else "not passed")
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        print("x71 own /proc only" if len(pids) < 20 else "PROC " + "LEAK %d pids" % len(pids))
        print("x71 pid 1 is", open("/proc/1/cmdline", "rb").read().split(b"\\0")[0].decode())
    """)


def other_clone_reference(ctx):
    """Issue 57 item 1: blank; softmax is the reference of another clone of the course on the grading machine
    (the grader's own repository, a colleague's worktree, last term's copy in a home folder), run by its path.
    The kernel's filesystem is an allowlist: no other clone is in it."""
    known = [os.path.join(ctx.repo, "course_lib", "attention.py"), "/work/main/course_lib/attention.py"]
    return files(notebook(ctx, correct=False, replace={"softmax_impl": f'''
        import glob
        import runpy

        candidates = {known!r}
        for pattern in ("/work/*/course_lib/attention.py", "/work/*/*/course_lib/attention.py",
                        "/root/*/course_lib/attention.py", "/home/*/*/course_lib/attention.py",
                        "/srv/*/course_lib/attention.py", "/opt/*/course_lib/attention.py",
                        "/var/tmp/*/course_lib/attention.py", "/tmp/*/grading/course_lib/attention.py"):
            candidates += glob.glob(pattern)
        found = []
        for path in candidates:
            try:
                source = open(path).read()
            except OSError:
                continue
            if "raise NotImplementedError" not in source.split("def softmax", 1)[-1][:2000]:
                found.append(path)
        if found:
            print("LE" + "AK: another clone's reference", found[0])
            softmax = runpy.run_path(found[0])["softmax"]
        else:
            print("x75 no other clone of the course is visible")
    '''}))


def other_lessons_feed(ctx):
    """Issue 57 item 2: a correct submission that prints every lesson's hidden inputs it can find beside the
    kernel's course_lib (lessons 06, 11 and 12's above all) into its feedback: its kernel holds lesson 01's."""
    return added(ctx, LAST_IMPL, """
        import glob
        import os
        import pickle
        import sys

        # the folder of the kernel's course_lib: on the import path (importing course_lib is a finding)
        edition = next(p for p in sys.path if p and os.path.isdir(os.path.join(p, "course" + "_lib")))
        mine = "course_lib.checks.attention.pkl"
        feeds = sorted(glob.glob(os.path.join(edition, "**", "*.pkl"), recursive=True))
        print("x76 feed files:", [os.path.basename(f) for f in feeds])
        for path in feeds + [os.path.join(edition, "hidden_feed", f"course_lib.checks.{m}.pkl")
                             for m in ("bpe", "consensus", "dna")]:
            if os.path.basename(path) == mine:
                continue
            try:
                with open(path, "rb") as fh:
                    print("LE" + "AK: another lesson's hidden inputs", path, list(pickle.load(fh))[:3])
            except OSError as err:
                print("x76 blocked", os.path.basename(path), type(err).__name__)
    """)


def unlisted_packages(ctx):
    """Issue 57 item 3: a correct submission reaching for installed packages lesson 01 does not use (edit
    distance with operations from rapidfuzz and edlib, Biopython's reverse_complement, nbgrader, SQLAlchemy):
    none of them is in the kernel's package view."""
    tries = "\n".join(f"""
        try:
            import {m}
            print("LE" + "AK: imported {m}")
        except ImportError as err:
            print("x77 refused", type(err).__name__, err.name)""" for m in ("rapidfuzz", "edlib", "Bio", "nbgrader",
                                                                            "sqlalchemy"))
    return added(ctx, LAST_IMPL, tries)


# ------------------------------------------------------------------ the table
HONEST = [
    Case("s01_correct", "the instructor's solutions", 9.0, feedback=("visible tests passed",)),
    Case("s02_blank", "the release notebook untouched", 0.0, feedback=("not implemented yet",)),
    Case("s03_misconception", "numpy attention without 1/sqrt(d_k)", 6.0, feedback=("missing scaling",)),
    Case("s04_crash", "softmax cell loops forever (demo)", 3.0, feedback=("CellTimeoutError",),
         report=("CellTimeoutError",)),
]

_NOT_JSON = "does not appear to be JSON"
# what grading/integrity.py shows: ApplyIntegrity's error output and note, the report's problem lines
# (a bare "IntegrityError" would also match the checks' own source quoted in any traceback)
# ------------------------------------------------------------------ review of issue 43's relaxations
COPY_REFERENCE = '''
import types
import course_lib.attention as ref
softmax = types.FunctionType(ref.softmax.__code__, ref.softmax.__globals__, 'softmax', ref.softmax.__defaults__)
'''


def duplicate_locked_cell(ctx):
    """A copy of the locked softmax test cell (its nbgrader metadata kept) placed before the original, its
    source replaced by code that copies the reference's code object into an untripwired function
    (nbgrader's DeduplicateIds keeps the last cell of a grade id and makes the others plain cells)."""
    def edit(nb):
        at = _index(nb, "softmax_visible")
        dup = copy.deepcopy(nb.cells[at])
        dup["id"] = "copy-of-softmax-visible"
        dup.source = textwrap.dedent(COPY_REFERENCE).strip("\n")
        nb.cells.insert(at, dup)
    return files(notebook(ctx, correct=False, edit=edit))


def magic_expansion(ctx):
    """A display magic whose argument IPython expands: ``{expr}`` is evaluated in the user namespace."""
    return files(notebook(ctx, correct=False, replace={"softmax_impl": '''
        _impl = []


        def softmax(x, axis=-1):
            return _impl[0](x, axis)
    '''}, after={"softmax_impl": [
        "%precision {_impl.append(__import__('types').FunctionType("
        "__import__('course_lib.attention', fromlist=('softmax',)).softmax.__code__, "
        "__import__('course_lib.attention', fromlist=('softmax',)).softmax.__globals__)) or 3}"]}))


def code_copy_by_name(ctx):
    """The reference reached through `os.sys.modules`, its code object through getattr with a string:
    no attribute the scan reads by name is written."""
    return files(notebook(ctx, correct=False, replace={"softmax_impl": '''
        import os
        import types

        _ref = os.sys.modules["course_lib.attention"].softmax
        softmax = types.FunctionType(getattr(_ref, "__code__"), getattr(_ref, "__globals__"), "softmax", (-1,))
    '''}))


def reference_run_by_path(ctx):
    """Issue 33 item 1: the reference module's source file run by its path (a fresh function, never the
    object the forbidden-call tripwires wrap). The kernel's course_lib is the students' edition: the file
    holds a stub that raises."""
    return files(notebook(ctx, correct=False, replace={"softmax_impl": '''
        import pathlib
        import runpy
        import sys

        # the package's folder found on the import path, its name built at run time
        _source = next(pathlib.Path(p) / ("course" + "_lib") / "attention.py" for p in sys.path
                       if (pathlib.Path(p) / ("course" + "_lib") / "attention.py").is_file())
        softmax = runpy.run_path(str(_source))["softmax"]
    '''}))


def reference_by_dotted_name(ctx):
    """Issue 33 item 1: the reference found by a dotted name built at run time (``pydoc.locate``)."""
    return files(notebook(ctx, correct=False, replace={"softmax_impl": '''
        import pydoc

        softmax = pydoc.locate(".".join(["course_lib", "attention", "soft" + "max"]))
    '''}))


def declared_right_answer(ctx):
    """Issue 34: a right alternative the checks declare with the exercise (``course_lib/checks/exercise.py``),
    reached through the registry found by a dotted name built at run time (the static scan flags an import of the
    checks, and importlib): the judge's edition holds a solution there; the kernel's edition no declaration at all
    (issue 58: they are in course_lib/judge/, which the editions leave out)."""
    return files(notebook(ctx, correct=False, replace={"softmax_impl": '''
        import pydoc

        _registry = pydoc.locate(".".join(["course_lib", "checks", "regis" + "try"]))
        softmax = _registry.exercise("01_attention", "softmax").right[0].fn
    '''}))


def module_written_then_imported(ctx):
    """A cell writes a module whose text copies the reference's code object and imports it: the code
    is a string literal where the scan reads it."""
    return files(notebook(ctx, correct=False, replace={"softmax_impl": '''
        with open("helper_x62.py", "w") as fh:
            fh.write("import sys, types\\n_r = sys.modules['course_lib.attention'].softmax\\n"
                     "softmax = types.FunctionType(_r.__code__, _r.__globals__, 'softmax', (-1,))\\n")
        from helper_x62 import softmax
    '''}))


def stdlib_shadow(ctx):
    """As x62, but the module written is named like a standard-library module no earlier cell imported
    (tabnanny): it is installed, so the import reads as harmless, and the kernel finds the student's file
    first when the working folder leads its sys.path. The kernel has no working folder on sys.path (``python -P``, and
    the warm kernel drops it): the import finds the installed module."""
    return files(notebook(ctx, correct=False, replace={"softmax_impl": '''
        with open("tabnanny.py", "w") as fh:
            fh.write("import sys, types\\n_r = sys.modules['course_lib.attention'].softmax\\n"
                     "softmax = types.FunctionType(_r.__code__, _r.__globals__, 'softmax', (-1,))\\n")
        from tabnanny import softmax
    '''}))


INTEGRITY_FEEDBACK = "integrity check failed"
INTEGRITY_REPORT = "IntegrityError: "
RESTORED = "restored as released"  # ApplyIntegrity's note for what grading put back (no cost)

HOSTILE = [
    # ---- time (the slow ones first: the workers take students in name order)
    Case("x01_infinite_loop", "`while True: pass` before the torch function", 6.0, build=infinite_loop,
         feedback=("CellTimeoutError",), report=("CellTimeoutError",)),
    Case("x02_sleep_forever", "time.sleep(10**6) in a cell right before the softmax tests", 9.0,
         build=sleep_forever, feedback=("CellTimeoutError", "softmax: visible tests passed"),
         report=("CellTimeoutError",)),
    Case("x03_ignore_interrupt", "ignores SIGINT, then loops: the kernel must be restarted", 9.0,
         build=ignore_interrupt, feedback=("CellTimeoutError", "scaled_dot_product_attention_torch: visible tests passed"),
         report=("CellTimeoutError",)),
    # ---- leaving the interpreter
    Case("x04_sys_exit", "softmax calls sys.exit(); sys.exit(0) after the torch function", 3.0,
         build=sys_exit_in_function, feedback=("SystemExit", "softmax refuses to be graded")),
    Case("x05_os_exit", "os._exit(1) after the torch function", 6.0, build=os_exit,
         feedback=("KernelDied",), report=("KernelDied in attention_torch_impl",)),
    Case("x06_builtin_exit", "exit() after the torch function", 6.0, build=builtin_exit,
         feedback=("KernelDied", "exit()"), report=("KernelDied in attention_torch_impl",)),
    Case("x07_segfault_ctypes", "ctypes.string_at(0) after the torch function: a crash AND an integrity finding "
         "(its tests, after it, score 0)", 6.0, build=segfault_ctypes, integrity=True, feedback=(INTEGRITY_FEEDBACK, "ctypes", "KernelDied"),
         report=(INTEGRITY_REPORT, "ctypes")),
    Case("x08_deep_recursion_crash", "repr of a 10^6-deep list with the recursion limit raised: C-stack segfault",
         6.0, build=deep_recursion_crash, feedback=("KernelDied",), report=("KernelDied in attention_torch_impl",)),
    Case("x09_kill_all", "os.kill(-1, SIGKILL): may only hit its own sandbox", 9.0, build=kill_all,
         feedback=("still alive after kill(-1)", "scaled_dot_product_attention_torch: visible tests passed")),
    # ---- resources
    Case("x10_memory_bomb", "np.ones(50 GiB) before the torch function", 6.0, build=memory_bomb,
         feedback=("MemoryError",)),
    Case("x11_fork_bomb", "os.fork() in a loop (children sleep 0.5 s)", 9.0, build=fork_bomb,
         feedback=("fork refused after",), absent=("FORK LIMIT NOT HIT",)),
    Case("x12_print_flood", "100 MB written to stdout", 9.0, build=print_flood,
         # nbgrader's LimitOutput note, or ours when the flood passed the byte bound first (which one
         # comes first depends on how fast the kernel wrote: under load, ours)
         feedback=("Output truncated | [output trimmed", "scaled_dot_product_attention_torch: visible tests passed")),
    Case("x13_huge_image", "a 40 MB base64 image output", 9.0, build=huge_image, feedback=("huge image displayed",)),
    Case("x14_disk_fill", "a 320 MiB file in its own folder", 9.0, build=disk_fill,
         feedback=("disk write stopped", "File too large"), absent=("DISK LIMIT NOT HIT",)),
    Case("x15_recursion", "softmax calls itself", 3.0, build=recursion, feedback=("RecursionError",)),
    Case("x16_base_exceptions", "softmax raises a KeyboardInterrupt subclass, torch attention a BaseException "
         "subclass (neither is an Exception)", 0.0, build=keyboard_interrupt_subclass,
         feedback=("softmax stops the grader", "torch attention escapes the checks")),
    # ---- the notebook's structure
    Case("x17_delete_test_cell", "softmax_visible deleted: put back and run", 9.0, build=delete_test_cell,
         restored=True, feedback=(RESTORED, "softmax_visible", "deleted", "softmax: visible tests passed"),
         absent=(INTEGRITY_FEEDBACK,)),
    Case("x18_delete_solution_cell", "softmax_impl deleted (its own loss, not cheating)", 3.0,
         build=delete_solution_cell, feedback=("NameError",), absent=(INTEGRITY_FEEDBACK,)),
    Case("x19_tests_replaced_by_pass", "wrong softmax, both softmax tests replaced by `pass`: restored and run "
         "(the wrong softmax also fails numpy attention's fully-masked row, visible and hidden)", 3.0,
         build=test_cells_replaced_by_pass, restored=True,
         feedback=(RESTORED, "locked cell was edited", "unstable softmax"), absent=(INTEGRITY_FEEDBACK,)),
    Case("x20_points_100", "softmax_visible worth 100 points: graded out of 1 as released", 9.0, build=points_100,
         restored=True, feedback=(RESTORED, "points"), absent=(INTEGRITY_FEEDBACK,)),
    Case("x21_test_to_solution", "wrong softmax; softmax_hidden turned into a solution cell holding `pass`: "
         "put back as released and run (numpy attention loses its fully-masked row too)", 3.0, build=test_to_solution, restored=True,
         feedback=(RESTORED, "metadata", "unstable softmax"), absent=(INTEGRITY_FEEDBACK,)),
    Case("x22_bonus_cell", "an added graded cell worth 50 points: run as an ordinary cell", 9.0, build=bonus_cell,
         restored=True, feedback=(RESTORED, "bonus"), absent=(INTEGRITY_FEEDBACK,)),
    Case("x23_duplicate_test_cell", "softmax_visible duplicated, e.g. by copy-paste (harmless)", 9.0,
         build=duplicate_test_cell, feedback=("softmax: visible tests passed",), absent=(INTEGRITY_FEEDBACK,)),
    Case("x24_write_outside", "writes into course_lib, the repo, the course root, another student", 9.0,
         build=write_outside, feedback=("blocked write", "blocked append", "own folder and private /tmp writable"),
         absent=("ESCAPED",)),
    Case("x25_fake_grade_file", "blank; writes grades.csv, its result JSON, the gradebook; prints 9/9", 0.0,
         build=fake_grade_file, feedback=("blocked fake grade", "not implemented yet"), absent=("ESCAPED",)),
    Case("x26_fake_passed", "blank; prints 'tests passed' and returns its input", 0.0, build=fake_passed,
         feedback=("AssertionError",)),
    # ---- files that are not the notebook
    Case("x27_corrupt_json", "the notebook cut in half", 0.0, build=corrupt_json, report=(_NOT_JSON,)),
    Case("x28_empty_file", "a 0-byte attention.ipynb", 0.0, build=empty_file, report=(_NOT_JSON,)),
    Case("x29_not_a_notebook", "valid JSON that is no notebook", 0.0, build=not_a_notebook,
         report=("could not be converted",)),
    Case("x30_wrong_file_name", "correct answers in attention-Copy1.ipynb", 0.0, build=wrong_file_name,
         report=("attention-Copy1",)),
    Case("x31_empty_folder", "an empty assignment folder", 0.0, build=empty_folder,
         report=("No notebooks were matched",)),
    Case("x32_other_assignment", "lesson 02's notebook handed in as attention.ipynb: lesson 01's tests put back "
         "and run (NameError); named the wrong assignment's notebook, lesson 02's own cells not read as the "
         "student's, so no integrity finding (issue 66.4)", 0.0, build=other_assignment,
         restored=True, feedback=(RESTORED, "the wrong assignment", "02_masking"), absent=(INTEGRITY_FEEDBACK,)),
    # ---- the sandbox
    Case("x33_read_secrets", "asks for the python3 kernel; reads the source notebook, gradebook, release, "
         "demo answers, .git, docs, home", 9.0, build=read_secrets,
         feedback=("blocked read of source notebook", "blocked read of gradebook", "blocked read of release",
                   "blocked read of demo answers", "blocked read of git", "blocked read of instructor home"),
         absent=("LEAK",)),
    Case("x34_read_other_student", "blank; copies s01_correct's answers if it can read them", 0.0,
         build=read_other_student, feedback=("blocked read of another student", INTEGRITY_FEEDBACK), absent=("LEAK",),
         integrity=True, report=(INTEGRITY_REPORT, "stolen_answers")),  # it imports the module it writes (x62)
    Case("x35_socket", "connects to 127.0.0.1 and to 192.0.2.1 (TEST-NET, never routed)", 9.0, build=socket_probe,
         feedback=("socket to 127.0.0.1 blocked", "socket to 192.0.2.1 blocked"), absent=("CONNECTED", "SLOW")),
    # ---- cheating
    Case("x36_patch_allclose", "wrong softmax; np.allclose, np.isclose, torch.allclose patched", 0.0,
         build=patch_allclose, integrity=True, feedback=(INTEGRITY_FEEDBACK, "np.allclose"),
         report=(INTEGRITY_REPORT, "np.allclose")),
    Case("x37_patch_checks", "blank; checks.attention.check_* replaced", 0.0, build=patch_checks, integrity=True,
         feedback=(INTEGRITY_FEEDBACK, "checks.attention.check_softmax"), report=(INTEGRITY_REPORT, "checks.attention")),
    Case("x38_setattr_checks", "blank; setattr(checks.attention, ...)", 0.0, build=setattr_checks, integrity=True,
         feedback=(INTEGRITY_FEEDBACK, "setattr"), report=(INTEGRITY_REPORT, "setattr")),
    Case("x39_sys_modules", "blank; checks patched through sys.modules", 0.0, build=sys_modules_checks,
         integrity=True, feedback=(INTEGRITY_FEEDBACK, "sys.modules"), report=(INTEGRITY_REPORT, "sys.modules")),
    Case("x40_redefine_checks", "blank; an added cell rebinds `checks`", 0.0, build=redefine_checks, integrity=True,
         feedback=(INTEGRITY_FEEDBACK, "'checks'"), report=(INTEGRITY_REPORT, "'checks'")),
    Case("x41_redefine_assertion_error", "blank; AssertionError and NotImplementedError redefined", 0.0,
         build=redefine_assertion_error, integrity=True, feedback=(INTEGRITY_FEEDBACK, "AssertionError"),
         report=(INTEGRITY_REPORT, "AssertionError")),
    Case("x42_swallow_errors", "blank; get_ipython().set_custom_exc hides every error output", 0.0,
         build=swallow_errors, integrity=True, feedback=(INTEGRITY_FEEDBACK, "get_ipython"),
         report=(INTEGRITY_REPORT, "get_ipython")),
    Case("x43_swallow_errors_alias", "blank; set_custom_exc reached without writing get_ipython", 0.0,
         build=swallow_errors_alias, integrity=True, feedback=(INTEGRITY_FEEDBACK,), report=(INTEGRITY_REPORT,)),
    Case("x44_call_reference", "softmax imports and calls course_lib.attention.softmax", 0.0, build=call_reference,
         integrity=True, feedback=(INTEGRITY_FEEDBACK, "course_lib.attention"),
         report=(INTEGRITY_REPORT, "course_lib.attention")),
    Case("x45_reference_via_checks", "softmax calls checks.attention.ref.softmax", 0.0, build=reference_via_checks,
         integrity=True, feedback=(INTEGRITY_FEEDBACK,), report=(INTEGRITY_REPORT,)),
    Case("x46_call_sdpa", "torch attention calls F.scaled_dot_product_attention (its tests score 0)", 6.0,
         build=call_sdpa,
         integrity=True, feedback=(INTEGRITY_FEEDBACK, "built-in attention"), report=(INTEGRITY_REPORT, "built-in")),
    Case("x47_shell_escape", "`!ls /` and `%env` in a cell added before the torch tests (they score 0)", 6.0,
         build=shell_escape, integrity=True,
         feedback=(INTEGRITY_FEEDBACK,), report=(INTEGRITY_REPORT,)),
    Case("x48_exec_answer", "softmax defined through exec(...)", 0.0, build=exec_answer, integrity=True,
         feedback=(INTEGRITY_FEEDBACK, "exec"), report=(INTEGRITY_REPORT, "exec")),
    # ---- the feedback itself
    Case("x49_html_injection", "<script> in an HTML output and in the written answer", 9.0, build=html_injection,
         feedback=("bold claim",),
         absent_html=("<script>document.title = 'x49 output'", "<script>alert('x49 markdown')")),
    Case("x50_fake_feedback", "blank; writes a forged attention.html (11/11) into its folder", 0.0,
         build=fake_feedback, feedback=("forged attention.html written", "not implemented yet"),
         absent=("FORGED FEEDBACK",)),
    # ---- issue 20: root never runs submission code; submissions are data; no secrets; totals; safe feedback
    Case("x51_launcher_shadow", "json.py, shutil.py, subprocess.py, resource.py, secrets.py, functools.py and a "
         "`grading` package (grading/kernel/launcher.py, protocol.py) in the folder, each writing a marker outside "
         "when imported", 9.0, build=launcher_shadow,
         feedback=("shadow modules present", "scaled_dot_product_attention_torch: visible tests passed")),
    Case("x52_links_and_fifo", "links to the gradebook and to s01's notebook, a hard link to the gradebook and a "
         "FIFO in the submission folder", 9.0, build=links_and_fifo,
         feedback=("intake removed gradebook.db", "intake removed s01.ipynb", "intake removed hard.db",
                   "intake removed pipe"),
         report=("intake dropped gradebook.db (symbolic link)", "s01.ipynb (symbolic link)",
                 "hard.db (hard link (2 names))", "pipe (named pipe)"), absent=("LEAK",)),
    Case("x53_kernel_plants_links", "the kernel replaces its notebook with a link to the gradebook, links "
         "s01's notebook, /etc/shadow and /, and makes FIFOs named like the feedback page", 9.0,
         build=kernel_plants_links, feedback=("planted 6 links and pipes",
                                              "scaled_dot_product_attention_torch: visible tests passed")),
    Case("x54_env_secrets", "looks for the gradebook URL, passwords and the grader's secrets in os.environ", 9.0,
         build=env_secrets, feedback=("environment clean", "check mode record", "home is private True",
                                      "interpreter True"), absent=("LEAK", "x54-secret")),
    Case("x55_disk_total", "8 files of 64 MiB in its folder and 8 in /tmp (each under the per-file limit)", 9.0,
         build=disk_total, feedback=("disk total bound hit", "No space left on device"),
         absent=("DISK TOTAL NOT HIT",)),
    Case("x56_output_kinds_flood", "a 5 MB line, 30 images of 400 kB, a 3 MB error message", 9.0,
         build=output_kinds_flood, feedback=("[output trimmed", "a huge error",
                                             "scaled_dot_product_attention_torch: visible tests passed")),
    Case("x57_feedback_script", "script, event handlers, javascript: links, iframe, form, SVG and a fake PNG in "
         "markdown, the written answer and outputs", 9.0, build=feedback_script,
         feedback=("x57 outputs shown", "x57 html link", "click me", "x57 fake png"),
         # what would be live markup (the student's source is shown escaped, so these never appear there)
         absent_html=("<script>alert", "<img src=x", "<svg", "<iframe", "<form", 'href="javascript:')),
    Case("x58_hostile_grade_id", "an added cell whose grade_id is an <img onerror> tag, quoted by the "
         "restoration note", 9.0, build=hostile_grade_id, restored=True,
         feedback=(RESTORED, "not a cell of this assignment"), absent=(INTEGRITY_FEEDBACK,),
         absent_html=("<img src=x onerror",)),
    Case("x59_duplicate_locked_cell", "blank; a copy of the softmax test cell (metadata kept) before the original "
         "holds code that copies the reference's code object (nbgrader grades only the last copy of a grade id)",
         0.0, build=duplicate_locked_cell, integrity=True,
         feedback=(INTEGRITY_FEEDBACK, "rewrites function code"), report=(INTEGRITY_REPORT, "course_lib.attention")),
    Case("x60_magic_expansion", "blank; `%precision {...}` (a display magic: IPython evaluates the braces) "
         "installs a copy of the reference softmax", 0.0, build=magic_expansion, integrity=True,
         feedback=(INTEGRITY_FEEDBACK, "get_ipython"), report=(INTEGRITY_REPORT, "get_ipython")),
    Case("x61_code_copy_by_name", "blank; softmax is a copy of the reference's code object, reached through "
         "os.sys.modules and getattr(..., '__code__')", 0.0, build=code_copy_by_name, integrity=True,
         feedback=(INTEGRITY_FEEDBACK, "sys.modules", "rewrites function code"),
         report=(INTEGRITY_REPORT, "sys.modules")),
    Case("x62_module_written_then_imported", "blank; softmax's cell writes helper_x62.py (a copy of the "
         "reference's code object, in a string) and imports softmax from it", 0.0,
         build=module_written_then_imported, integrity=True, feedback=(INTEGRITY_FEEDBACK, "not installed"),
         report=(INTEGRITY_REPORT, "helper_x62")),
    Case("x63_stdlib_shadow", "blank; softmax's cell writes tabnanny.py (a copy of the reference's code object) "
         "and imports softmax from it: 3/11 on 2026-11-25 until the kernel's sys.path lost its working folder; "
         "the import now finds the installed tabnanny", 0.0, build=stdlib_shadow,
         feedback=("cannot import name 'softmax' from 'tabnanny'",)),
    # ---- issue 33: every door of a forbidden built-in, bounded records and verifier, the worker's channels,
    # messages as text, the environment by exact names
    Case("x64_aten_math_door", "torch attention calls torch.ops.aten._scaled_dot_product_attention_math (PyTorch's "
         "math kernel behind F.scaled_dot_product_attention): its tests score 0", 6.0, build=aten_math_door,
         feedback=("_scaled_dot_product_attention_math", "this test scores 0")),
    Case("x65_slow_record", "correct softmax whose first call publishes a forged record of its output first: a "
         "set of 60,000 integers that all hash to 1 (quadratic to build); refused in linear time, the visible "
         "softmax test (whose record it is) scores 0, the rest count", 8.0, build=slow_record,
         feedback=("built to collide",), absent=("verifier stopped",)),
    Case("x66_huge_record", "correct softmax whose first call publishes a forged record first: a string array of "
         "one 2 MB string and 1,000 short ones (8 GB as numpy stores it); refused by its declared size, the "
         "visible softmax test scores 0", 8.0, build=huge_record, feedback=("a record's array bound",)),
    Case("x67_unpublishable_record", "softmax returns strings, one a lone surrogate: the record cannot be sent as "
         "UTF-8 and is recorded as not plain data (never dropped); the check already fails in the kernel (numpy "
         "cannot sum strings), so that failure is the note; numpy attention fails on the strings", 3.0,
         build=unpublishable_record, feedback=("softmax_visible (0 / 1)", "not compatible with add.reduce")),
    Case("x68_display_update", "an output shown with a display id, rewritten from a later cell with "
         "update_display_data: the update is refused with a note", 9.0, build=display_update,
         feedback=("x68 as first shown", "update_display_data", "x68 update sent"), absent=("x68 REWRITTEN",)),
    Case("x69_channels_flood", "64 MiB written to file descriptor 2 (the kernel's stderr), 100 MiB into the folder "
         "of its IPC sockets", 9.0, build=channels_flood,
         feedback=("x69 wrote", "x69 IPC folder bounded", "scaled_dot_product_attention_torch: visible tests passed"),
         absent=("IPC NOT BOUNDED",)),
    Case("x70_markdown_message", "softmax raises an error whose message holds a markdown headline, a link, a remote "
         "image and a script: quoted as text in the summary and the test's output", 3.0, build=markdown_message,
         feedback=("# x70 Fake headline", "[x70 link](http://x70.example)"),
         absent_html=('id="x70-Fake-headline"', 'href="http://x70.example"', 'src="http://x70.example/y.png"',
                      "<script>alert('x70')")),
    Case("x71_course_env_and_proc", "reads COURSE_* settings (a harmless-looking one included) and the host's "
         "/proc", 9.0, build=course_env_and_proc,
         feedback=("x71 harmless setting not passed", "x71 own /proc only"), absent=("LEAKED", "PROC LEAK")),
    Case("x72_reference_run_by_path", "blank; softmax is the function of course_lib/attention.py run by its path "
         "(runpy): in the students' edition the kernel mounts, a stub", 0.0, build=reference_run_by_path,
         feedback=("not released yet",)),
    Case("x73_reference_by_dotted_name", "blank; softmax is pydoc.locate of a dotted name built at run time: the "
         "students' edition's stub", 0.0, build=reference_by_dotted_name, feedback=("not released yet",)),
    Case("x74_declared_right_answer", "blank; softmax is the first right alternative the checks declare for it, "
         "found through the exercise registry (imported by a name built at run time): the kernel's edition holds no "
         "declaration (the judge's, course_lib/judge/, is left out) and the registry says so", 0.0,
         build=declared_right_answer, feedback=("not shipped in the student edition",)),
    # ---- issue 57: deny by default (the kernel's filesystem, hidden feed and packages are allowlists)
    Case("x75_other_clone_reference", "blank; softmax is run by path from another clone of the course on the "
         "machine (the grader's repository, /work/*, home folders): none is visible to the kernel", 0.0,
         build=other_clone_reference, feedback=("x75 no other clone of the course is visible",), absent=("LEAK",)),
    Case("x76_other_lessons_feed", "correct; prints the hidden inputs of every lesson it finds beside the "
         "kernel's course_lib: lesson 01's alone is there", 9.0, build=other_lessons_feed,
         feedback=("x76 feed files: ['course_lib.checks.attention.pkl']", "x76 blocked course_lib.checks.bpe.pkl"),
         absent=("LEAK",)),
    Case("x77_unlisted_packages", "correct; imports rapidfuzz, edlib, Biopython, nbgrader and SQLAlchemy "
         "(installed for the grader, not lesson 01's): none imports", 9.0, build=unlisted_packages,
         feedback=("x77 refused ModuleNotFoundError rapidfuzz", "x77 refused ModuleNotFoundError Bio",
                   "x77 refused ModuleNotFoundError sqlalchemy"), absent=("LEAK",)),
]

CASES = HONEST + HOSTILE
BY_STUDENT = {c.student: c for c in CASES}



# ====================================================================== issue 33 item 2: later lessons
# Until 2026-11-25 a fact the kernel reported about itself decided these verdicts: lesson 07's memory
# bound was a tracemalloc peak taken in the kernel, lessons 08 and 09 read requires_grad through the
# model object the student's function had just been given. Each case below replaces solution cells of
# a later lesson's notebook (the instructor's solutions elsewhere) and fixes the outcome of every graded
# test cell: those in ``failing`` score 0 with the verifier's note holding the words given, every other
# graded test cell passes. tests/test_record_replay.py::test_lesson_case runs the setup and solution
# cells and records each graded test cell as the grading kernel does, in a child process under the
# sandbox's address-space bound (RLIMIT_AS = COURSE_SANDBOX_MEMORY_MB MiB, as grading.kernel.launcher sets it),
# and judges the records with grading.verify. Ids start with the lesson (``l07_``), so ``-k 07`` selects
# them and they never collide with the x-numbered cases of 01_attention above.


@dataclasses.dataclass
class LessonCase:
    student: str
    assignment: str
    what: str
    replace: Dict[str, str]  # solution cell grade_id -> its whole source
    failing: Dict[str, str]  # graded test cell grade_id -> words its note must hold (the cell scores 0)
    before: str = ""  # what the same submission scored before the verdict stopped resting on the kernel


_QUADRATIC_RESET_PEAK = '''
import tracemalloc


def linear_attention(q, k, v, feature_map=elu_feature_map):
    """The (L, L) similarity matrix, then tracemalloc's peak reset so the kernel's measurement sees none of it."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    sims = feature_map(q) @ np.swapaxes(feature_map(k), -1, -2)
    out = (sims @ v) / sims.sum(axis=-1, keepdims=True)
    del sims
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()
    return out
'''

_CAUSAL_QUADRATIC_RESET_PEAK = '''
import tracemalloc


def causal_linear_attention(q, k, v, feature_map=elu_feature_map):
    """Masked (L, L) similarities, then tracemalloc's peak reset."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    T = q.shape[-2]
    sims = np.tril(feature_map(q) @ np.swapaxes(feature_map(k), -1, -2))
    out = (sims @ v) / sims.sum(axis=-1, keepdims=True)
    del sims
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()
    return out
'''

_QUADRATIC_IN_TORCH = '''
def linear_attention(q, k, v, feature_map=elu_feature_map):
    """The (L, L) matrix built in torch, whose allocator tracemalloc does not see."""
    fq = torch.as_tensor(feature_map(np.asarray(q, dtype=np.float64)))
    fk = torch.as_tensor(feature_map(np.asarray(k, dtype=np.float64)))
    sims = fq @ fk.transpose(-1, -2)
    out = (sims @ torch.as_tensor(np.asarray(v, dtype=np.float64))) / sims.sum(-1, keepdim=True)
    return out.numpy()
'''

_SHADOWED_PROBE = '''
def freeze_for_probe(model: nn.Module, head: str = "classifier") -> int:
    """Switches the head on, freezes nothing else, and gives the model a class whose parameter lists show
    every parameter outside the head as frozen (detached copies)."""
    modules = dict(model.named_modules())
    if head not in modules or head == "":
        raise ValueError(f"the model has no submodule called {head!r}")
    for p in modules[head].parameters():
        p.requires_grad_(True)
    prefix = head + "."

    class Shadow(type(model)):
        def named_parameters(self, *args, **kwargs):
            for name, p in super().named_parameters(*args, **kwargs):
                yield name, (p if name.startswith(prefix) else p.detach())

        def parameters(self, recurse=True):
            return (p for _, p in self.named_parameters())

    Shadow.__name__ = Shadow.__qualname__ = type(model).__name__
    model.__class__ = Shadow
    return sum(p.numel() for p in modules[head].parameters())
'''

_SHADOWED_FROZEN_MODEL = '''
def freeze_model(model: nn.Module) -> int:
    """Counts and switches to eval mode, freezes nothing, and shadows the model's parameter lists with
    detached copies, so every parameter reads as frozen."""
    total = sum(p.numel() for p in model.parameters())
    model.eval()
    real = model.named_parameters

    def named_parameters(*args, **kwargs):
        for name, p in real(*args, **kwargs):
            yield name, p.detach()

    model.named_parameters = named_parameters
    model.parameters = lambda *args, **kwargs: (p for _, p in named_parameters())
    return total
'''

QUADRATIC = "quadratic (phi(Q) phi(K)^T) V"

LESSON_CASES = [
    LessonCase("l07_tracemalloc_reset_peak", "07_efficient",
               "both linear attentions build the (L, L) matrix, then call tracemalloc.reset_peak()",
               {"linear_attention_impl": _QUADRATIC_RESET_PEAK,
                "causal_linear_attention_impl": _CAUSAL_QUADRATIC_RESET_PEAK},
               {"linear_attention_visible": QUADRATIC, "linear_attention_hidden": QUADRATIC,
                "causal_linear_attention_visible": QUADRATIC, "causal_linear_attention_hidden": QUADRATIC},
               before="15/15: the kernel's tracemalloc peak was the verdict"),
    LessonCase("l07_quadratic_in_torch", "07_efficient",
               "linear attention builds the (L, L) matrix in torch (tracemalloc sees numpy only)",
               {"linear_attention_impl": _QUADRATIC_IN_TORCH},
               {"linear_attention_visible": QUADRATIC, "linear_attention_hidden": QUADRATIC},
               before="15/15: tracemalloc does not see torch's allocator"),
    LessonCase("l08_shadowed_probe_model", "08_clinical_text",
               "freeze_for_probe freezes nothing outside the head and swaps the model's class for one whose "
               "named_parameters() shows the encoder frozen",
               {"freeze_for_probe_impl": _SHADOWED_PROBE},
               {"freeze_for_probe_visible": "requires_grad is wrong for",
                "freeze_for_probe_hidden": "requires_grad is wrong for"},
               before="full marks on both freeze_for_probe tests: the flags were read through the model"),
    LessonCase("l09_shadowed_frozen_model", "09_prompt_tuning",
               "freeze_model freezes nothing; model.named_parameters / parameters return detached copies",
               {"freeze_model_impl": _SHADOWED_FROZEN_MODEL},
               {"freeze_model_visible": "requires_grad", "freeze_model_hidden": "requires_grad"},
               before="full marks on both freeze_model tests: the flags were read through the model"),
]
