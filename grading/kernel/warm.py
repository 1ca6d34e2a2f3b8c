"""Warm kernels: a template process with the course's imports done forks a fresh kernel per submission.

A cold grading kernel spends seconds importing torch, numpy, matplotlib and course_lib before the
first cell computes anything. A grading run (``grading.pipeline``, before its workers; a
``grading.worker`` run on its own starts its own) therefore starts one *template*: a process that
imports them once and opens its socket; a successor forked from it then loads what the checks of
the assignments being graded load on first use (``_warm_up``) while the first serves, and takes the
socket over once done. For every kernel, the launcher (``grading/kernel/launcher.py``) builds the sandbox
exactly as for a cold kernel (bwrap: new mount, PID, network, IPC and UTS namespaces; the same
allowlisted filesystem, its lesson's packages and hidden feed; the submission copied into a private, bounded /tmp as an unused uid of its own), but runs a
*holder* in it instead of the kernel, and asks the template for a kernel in that sandbox. The template forks; the child

1. keeps no file of the template's (every descriptor closed but the launcher's connection and
   the launcher's stdout/stderr, passed over the socket),
2. joins the holder's namespaces (``setns``: mount, network, IPC, UTS, then PID for its own child),
3. forks the kernel, which takes the holder's uid and no groups (no capability is left),
   sets ``no_new_privs``, the same resource limits as a cold kernel, the kernel's allowlisted
   environment, forgets the modules in memory that its lesson may not import (:func:`forget_unlisted`:
   what the template warmed up for another lesson's kernels), enters the submission's copy and starts
   IPython's kernel from the modules already in memory;
4. waits for it and reports its exit status to the launcher, which then ends the sandbox.

Isolation is that of a cold kernel: the same namespaces, uid, limits, folders and environment.
No state passes between submissions: the template never runs student code, every kernel is a
fresh fork of it (a module a student patched exists in that kernel's copy-on-write memory
only), and a kernel is used for one submission and then killed with its sandbox
(``tests/test_adversarial.py::test_warm_kernels_*``).

Warm kernels need root (``setns`` into the sandbox's namespaces) and bwrap; otherwise, or when the
template died or is not ready after ``COURSE_WARM_WAIT`` seconds (a launcher waits for one that is
still importing: a cold kernel would import the same stack again, competing for the CPU), or when
``COURSE_WARM_KERNELS=0``, the launcher starts a cold kernel as before. The template serves only
the workers of the run that started it: its socket sits in a folder only the grader's user can
open, and no folder of it is visible in any sandbox.

The template runs this file as ``python -m grading.kernel.warm`` (:func:`serve`), started by
:func:`start_template` alone (``tests/test_architecture.py``: nothing else starts one). What passes between a
launcher and the template is ``grading.kernel.protocol``, the file the launcher loads by its path.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import os
import signal
import socket
import sys

import grading
from grading.kernel import launcher
from grading.kernel.protocol import (NAMESPACES, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, TEMPLATE_MODULE, prctl,
                                     recv_request, send_exit, setns)

# torch._dynamo: torch imports it on the first call of a function it wraps with torch._compile._disable_dynamo,
# which the checks' TorchFunctionMode (course_lib.checks.core, the doors a student's torch function may not use)
# reaches on a student's first torch call: 1.3-1.5 s of every kernel that runs a torch check (py-spy, lesson 01)
PRELOAD = ("numpy", "torch", "torch._dynamo", "matplotlib", "matplotlib.pyplot", "IPython", "ipykernel.kernelapp",
           "ipykernel.ipkernel", "ipykernel.debugger", "course_lib", "course_lib.checks", "course_lib.plotting",
           # what IPKernelApp.initialize imports on first use (the history's sqlite3, the shell's debugger,
           # inspector and completer, the store magic, tornado's asyncio loop): 16 modules, once here
           "sqlite3", "faulthandler", "pdb", "IPython.core.debugger", "IPython.core.oinspect",
           "IPython.core.completerlib", "IPython.extensions.storemagic", "tornado.platform.asyncio")


# ------------------------------------------------------------------ the template
def _close_all_but(keep: set[int]) -> None:
    for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _become_kernel(req: dict) -> None:
    """In the sandbox's PID namespace: drop to the kernel's uid, bound it, start IPython's kernel."""
    uid = int(req["uid"])
    if uid <= 0:
        raise SystemExit("warm kernel: refusing to run a kernel as root")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # from root to a uid of its own: every capability is dropped
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # credentials changed: set again, after setuid
    launcher.set_limits(uid)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(req["env"])
    if req.get("modules") is not None:
        forget_unlisted(req["modules"], req.get("paths", ()))
    os.chdir(launcher.KERNEL_WORKDIR)
    # no working folder on sys.path (as a cold kernel, ``python -P``): a module file the submission writes
    # there can never shadow an installed one (tests/adversarial x63)
    sys.path[:] = [p for p in sys.path if p and p not in (".", os.getcwd())]
    sys.argv = ["ipykernel_launcher", "-f", req["connection_file"], *req.get("args", [])]
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(argv=sys.argv[1:])


def forget_unlisted(allowed, paths=()) -> list[str]:
    """Drop from ``sys.modules`` every module the template loaded that the kernel's lesson may not import
    (``allowed``: the top-level names of its package view, ``grading.kernel.launcher.allowed_modules``; the standard
    library always stays; so does a module loaded from one of ``paths``, the view's entries: debugpy's vendored
``_pydevd_bundle``), and every ``course_lib`` module that holds one (a checks module the template warmed
    up for another lesson's kernels, with its ``transformers``). The files are not in the kernel's sandbox
    (the first wall): an ``import`` of a dropped name fails as in a cold kernel. Returns the names dropped."""
    import types

    keep = set(allowed) | set(sys.stdlib_module_names) | set(sys.builtin_module_names) | {"__main__", "__mp_main__"}
    roots = tuple(p.rstrip("/") + "/" for p in paths)

    def inside(mod) -> bool:
        files = [getattr(mod, "__file__", None)] + list(getattr(mod, "__path__", None) or [])
        return any(isinstance(f, str) and f.startswith(roots) for f in files) if roots else False

    gone = {name for name, mod in sys.modules.items() if name.split(".")[0] not in keep and not inside(mod)}
    tops = {name.split(".")[0] for name in gone}
    changed = True
    while changed:
        changed = False
        for name, mod in list(sys.modules.items()):
            if name in gone or name.split(".")[0] != "course_lib" or mod is None:
                continue
            for value in list(vars(mod).values()):
                held = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
                if isinstance(held, str) and (held in gone or held.split(".")[0] in tops):
                    gone.add(name)
                    changed = True
                    break
    if any(name.split(".")[0] == "course_lib" for name in gone):  # all of it, or a package and its modules disagree
        gone |= {name for name in sys.modules if name.split(".")[0] == "course_lib"}
    for name in gone:
        sys.modules.pop(name, None)
    return sorted(gone)


def _serve_one(conn: socket.socket) -> None:
    """The template's child: join the holder's sandbox, fork the kernel into it, report its exit."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the template is gone (its worker was killed): so is this
    req, fds = recv_request(conn)
    out, err = (fds + [-1, -1])[:2]
    holder = int(req["holder_pid"])
    # the holder's namespaces, opened before any is joined (joining mnt changes what /proc shows)
    ns = {k: os.open(f"/proc/{holder}/ns/{k}", os.O_RDONLY | os.O_CLOEXEC) for k in NAMESPACES}
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(out if out >= 0 else null, 1)
    os.dup2(err if err >= 0 else null, 2)
    _close_all_but({0, 1, 2, conn.fileno(), *ns.values()})
    for kind in NAMESPACES:
        setns(ns[kind], kind)
        os.close(ns[kind])
    os.chdir("/")
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            conn.close()  # the kernel never holds the connection to the launcher
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            _become_kernel(req)
            code = 0
        except SystemExit as e:  # the kernel shut down (or a cell called sys.exit in a thread)
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException as e:  # noqa: BLE001 - report and stop: never fall back into the template
            os.write(2, f"warm kernel failed to start: {type(e).__name__}: {e}\n".encode())
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001
                    pass
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:
        send_exit(conn, code)
    finally:
        os._exit(0)


def checks_modules(assignments: list[str]) -> list[str]:
    """The checks modules (``checks.<name>.check_*``) the source notebooks of ``assignments`` call. Read in
    the grader's process: the template never opens a source notebook (its solutions would stay in the
    memory every kernel is forked from)."""
    import re

    from grading import NOTEBOOKS_DIR

    names = []
    for assignment in assignments:
        folder = os.path.join(NOTEBOOKS_DIR, os.path.basename(assignment))
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith(".ipynb"):
                with open(os.path.join(folder, name), encoding="utf-8") as fh:
                    names += re.findall(r"\bchecks\.(\w+)\.check_\w+", fh.read())
    return list(dict.fromkeys(names))


def _warm_up(names: list[str]) -> None:
    """Stage two of the template (in its successor, ``serve``): what the graded assignments' checks
    load on first use, so that no kernel loads it again.

    For each checks module the graded notebooks call (``names``, from :func:`checks_modules`): the module, the modules behind the paths it forbids while a student's function runs
    (``FORBIDDEN*``; resolving torch.nn.attention.bias imports torch._dynamo: 2 s in every lesson 02
    kernel), and the course data loaders it imports from ``course_lib.bio`` that take no argument
    (the loaders keep their result in memory, ``functools.lru_cache``; the students' edition's checks,
    hidden cases folded away, no longer build lesson 06's corpus: its hidden inputs come as data,
    ``grading.feed``), and the module's own ``warm_up()`` where it has one (inputs that take time to read).
    A kernel gets them in its copy-on-write memory: what one student changes, the next never sees. A step that fails is
    skipped: the kernel then loads it, or fails on it, exactly as a cold kernel would. Everything is
    imported from the grading run's edition of course_lib (``grading.edition``), the only one on the
    template's path before the grading package."""
    import importlib
    import inspect
    import re

    done: set[str] = set()
    for name in dict.fromkeys(names):
        if name in done:
            continue
        done.add(name)
        try:
            # through the package's attribute, as a notebook reaches it (checks.<name>): that wraps
            # its checks so a failure reads as a teacher's note (course_lib.checks._teach), where an
            # import of the module itself would leave IPython's full traceback, slow and long
            module = getattr(importlib.import_module("course_lib.checks"), name)
            core = importlib.import_module("course_lib.checks.core")
        except Exception:  # noqa: BLE001 - see the docstring
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("FORBIDDEN") and isinstance(value, (tuple, list)):
                for path in value:
                    try:
                        core._resolve(path)
                    except Exception:  # noqa: BLE001 - not installed: the check skips it too
                        pass
        try:
            own = getattr(module, "warm_up", None)
            if callable(own):
                own()
        except Exception:  # noqa: BLE001 - see the docstring
            pass
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            continue
        for bio, imported in re.findall(r"from course_lib\.bio\.(\w+) import ([\w, ]+)", source):
            for fn_name in (n.strip() for n in imported.split(",")):
                try:
                    fn = getattr(importlib.import_module(f"course_lib.bio.{bio}"), fn_name)
                    params = inspect.signature(fn).parameters.values()
                    if all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                           for p in params):
                        fn()
                except Exception:  # noqa: BLE001 - see the docstring
                    pass


def _accept_loop(server: socket.socket, until: int | None = None) -> None:
    """Fork a child per request (``_serve_one``). ``until``: a pipe from the warmed successor; a byte
    on it: the successor serves from now on (this one waits, and serves again if the successor is
    gone: end of file)."""
    import select

    while True:
        ready = select.select([server] + ([until] if until is not None else []), [], [])[0]
        if until is not None and until in ready:
            if os.read(until, 1):
                while os.read(until, 1):  # until the successor is gone
                    pass
            os.close(until)
            until = None
            continue
        try:
            conn, _ = server.accept()  # non-blocking: the other process may have taken it
        except (BlockingIOError, InterruptedError):
            continue
        try:
            pid = os.fork()
        except OSError:
            conn.close()
            continue
        if pid == 0:
            try:
                server.close()
                _serve_one(conn)
            finally:
                os._exit(71)
        conn.close()


def serve(path: str, names: list[str] = ()) -> None:
    """Import the course's stack, open the socket at ``path`` and fork a child per request. Meanwhile
    a successor (a fork made once the socket is open) loads what the graded assignments' checks need (``names``: their checks modules)
    (``_warm_up``), then takes over the socket: the first kernels never wait for a warm-up, and
    the later ones start with it done."""
    import importlib

    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the worker that started it is gone: stop
    grading.collect_less()  # while it imports; its kernels get Python's own thresholds (set back below)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that cannot load here loads cold in the kernel
            pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path + ".tmp"
    server.bind(tmp)
    os.chmod(tmp, 0o600)
    server.listen(64)
    server.setblocking(False)
    os.rename(tmp, path)  # the socket appears only once the template is ready
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    if not names:
        gc.set_threshold(*grading.PYTHON_GC)
        _accept_loop(server)
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.close(ready_r)
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the template (its parent) was ended: so is this
        try:
            _warm_up(list(names))
        except BaseException:  # noqa: BLE001 - the template serves on without it
            os._exit(0)
        gc.set_threshold(*grading.PYTHON_GC)
        os.write(ready_w, b"w")
        _accept_loop(server)
    os.close(ready_w)
    gc.set_threshold(*grading.PYTHON_GC)
    _accept_loop(server, until=ready_r)


class Template:
    """A running template: its process, its folder (``template.sock`` in it once ready; removed when it stops)
    and :attr:`env`, what the launchers of its kernels need to find it."""

    def __init__(self, proc, folder: str, path: str):
        self.proc, self.folder, self.path = proc, folder, path
        self.env = environment(proc, path)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = 120) -> bool:
        return wait_ready(self.proc, self.path, timeout)

    def stop(self, kill: bool = False) -> None:
        """End the template (SIGTERM, or SIGKILL with ``kill``) and remove its folder."""
        import shutil

        with contextlib.suppress(ProcessLookupError):
            self.proc.kill() if kill else self.proc.terminate()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_template(assignments: list[str] = (), folder: str | None = None) -> Template:
    """Start a template of warm kernels: the one function that starts one (a grading run's, :func:`shared`; a
    local Dask cluster's, shared by its workers; a remote Dask worker's own; a ``grading.worker`` run on its
    own; ``tests/test_architecture.py`` checks that nothing else does). ``assignments``: what it will grade
    (its warm-ups, ``_warm_up``). ``folder``: where its socket goes (emptied first), else a new private
    folder under TMPDIR; either is removed by :meth:`Template.stop`.

    The template imports course_lib from the grading run's edition (``grading.edition``, built here if none
    is), as the kernels it forks would; its socket is ``folder/template.sock`` once it is ready."""
    import shutil
    import subprocess
    import tempfile

    from grading import REPO_DIR, edition

    lib = edition.ensure()
    if folder is None:
        folder = tempfile.mkdtemp(prefix="course-warm-")
    else:
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    os.chmod(folder, 0o700)
    home = os.path.join(folder, "home")
    os.makedirs(home, exist_ok=True)
    env = launcher.kernel_env(home=home)  # what a kernel's imports see; each kernel gets its own after the fork
    env["COURSE_CHECK_MODE"] = "record"  # as the kernel manager sets it for a grading kernel
    # the kernels' edition of course_lib first (the only course_lib the template imports), then the grading
    # package for grading.kernel.warm itself (the repository is hidden in every sandbox the kernels run in)
    env["PYTHONPATH"] = os.pathsep.join([lib, REPO_DIR])
    mpl = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "matplotlib")
    if os.path.isdir(mpl):
        env["MPLCONFIGDIR"] = mpl  # the grader's font list, as cold kernels copy it
    path = os.path.join(folder, "template.sock")
    # -P: the working directory is not put on the import path
    proc = subprocess.Popen([sys.executable, "-P", "-m", TEMPLATE_MODULE, path, *checks_modules(list(assignments))],
                            cwd="/", env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    return Template(proc, folder, path)


def environment(proc, path: str) -> dict:
    """What a launcher needs to find a template (``grading/kernel/launcher.py``): its socket, and its pid to
    wait for a template that is still importing; and, once bwrap has been probed here (one process),
    the bwrap that works, so that no launcher of the run probes it again (``launcher.bwrap_works``)."""
    env = {"COURSE_WARM_SOCKET": path, "COURSE_WARM_PID": str(proc.pid)}
    exe = _bwrap_probed()
    if exe:
        env[launcher.BWRAP_CHECKED_ENV] = exe
    return env


@functools.lru_cache(maxsize=1)
def _bwrap_probed() -> str | None:
    """The bwrap that works here (probed once per process), or None."""
    ok, exe = launcher.bwrap_works()
    return exe if ok else None


@contextlib.contextmanager
def shared(assignments: list[str] = ()):
    """One template for all the workers of a grading run, started before them so that it imports
    while they import nbgrader; yields the environment the workers pass on to their launchers
    (``{}`` where warm kernels are off). Ended, with its folder, when the run is."""
    if not enabled():
        yield {}
        return
    template = start_template(assignments)
    try:
        yield template.env
    finally:
        template.stop()


def wait_ready(proc, path: str, timeout: float = 120) -> bool:
    """Wait until the template has imported and opened its socket; False if it died or took too long."""
    import time

    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.path.exists(path)


def enabled() -> bool:
    return os.environ.get("COURSE_WARM_KERNELS", "1") != "0" and os.geteuid() == 0


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
