"""The sandboxed grading kernel: student code runs isolated, with bounded resources.

The kernelspec ``course-sandbox`` (installed by ``python -m grading sandbox-install``
into this environment) starts ``python -m grading.sandbox -f {connection_file}``,
which sets resource limits and then replaces itself with the real IPython kernel
inside bubblewrap (``bwrap``, Debian package ``bubblewrap``):

isolated (with bwrap)
    * no network: a new, empty network namespace (no loopback peers, no internet);
    * its own PID, IPC and UTS namespaces; every process it starts dies with it;
    * read-only filesystem; the repository is hidden except ``course_lib`` and the
      Python environment, so ``notebooks/`` (the source with hidden tests), ``.git``,
      ``grading/`` (the gradebook, the demo answers, other students' folders) and
      the instructor's home directory are not visible;
    * writable: only the submission's own working folder and a private /tmp;
    * when the grader runs as root, each kernel runs as an unused uid of its own
      (``setpriv`` inside the sandbox), so the process limit below applies to that
      kernel alone (root is exempt from RLIMIT_NPROC; a shared uid such as nobody
      would let one student's fork bomb starve another's kernel) and it cannot
      escalate (no_new_privs).
bounded (always, also without bwrap)
    * memory: address space ``COURSE_SANDBOX_MEMORY_MB`` (default 6144 MiB);
    * processes and threads: ``COURSE_SANDBOX_NPROC`` more than the uid already runs (default 128);
    * CPU time: ``COURSE_SANDBOX_CPU_SECONDS`` per kernel (default 900 s), on top of the
      per-cell wall-clock timeout and the per-notebook limit of ``grading.execute``;
    * file size: ``COURSE_SANDBOX_FSIZE_MB`` per file written (default 256 MiB).

Without bwrap (not installed, or user namespaces disabled) only the limits
apply: the kernel can then read and write what the grader's user can, and use
the network. ``python -m grading preflight`` says which mode is in force.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys

from grading import GRADING_DIR, REPO_DIR

KERNEL_NAME = "course-sandbox"


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {os.environ.get(name)!r}") from None


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def bwrap_works() -> tuple[bool, str]:
    """Can bwrap create the namespaces we need here? (False, why) otherwise."""
    exe = bwrap_path()
    if exe is None:
        return False, "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    proc = subprocess.run([exe, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev",
                           "--proc", "/proc", "true"], capture_output=True, text=True)
    if proc.returncode != 0:
        return False, f"bwrap cannot create namespaces here: {proc.stderr.strip()[:200]}"
    return True, exe


def _count_user_tasks(uid: int) -> int:
    """Processes and threads of a user: RLIMIT_NPROC counts both."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                pass
    return n


def _free_uid() -> int:
    """An unused uid for one kernel (as root), so its process limit is its own."""
    import secrets

    used = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                used.add(os.stat(f"/proc/{pid}").st_uid)
            except OSError:
                pass
    while True:
        uid = 200_000 + secrets.randbelow(800_000)
        if uid not in used:
            return uid


def set_limits(uid: int) -> None:
    """Resource limits inherited by the kernel and everything it starts."""
    mb = 1024 * 1024
    memory = _env_int("COURSE_SANDBOX_MEMORY_MB", 6144) * mb
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = _env_int("COURSE_SANDBOX_CPU_SECONDS", 900)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    fsize = _env_int("COURSE_SANDBOX_FSIZE_MB", 256) * mb
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    nproc = _count_user_tasks(uid) + _env_int("COURSE_SANDBOX_NPROC", 128)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _bind_python(args: list[str]) -> None:
    prefixes = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    for p in sorted(prefixes):
        args += ["--ro-bind", p, p]


def build_bwrap_command(exe: str, kernel_argv: list[str], workdir: str, private_dirs: list[str]) -> list[str]:
    """bwrap argv: read-only root, hidden repo/course/home, writable workdir and private dirs."""
    home = os.path.expanduser("~")
    args = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm",
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
            "--hostname", "sandbox"]
    args += ["--perms", "1777", "--tmpfs", "/tmp"]
    hidden = [home, REPO_DIR, GRADING_DIR, "/work/shared" if os.path.isdir("/work/shared") else None,
              os.path.join(os.path.dirname(REPO_DIR), "shared")]
    for h in dict.fromkeys(x for x in hidden if x and os.path.isdir(x)):
        args += ["--tmpfs", h]
    _bind_python(args)
    args += ["--ro-bind", os.path.join(REPO_DIR, "course_lib"), os.path.join(REPO_DIR, "course_lib")]
    args += ["--bind", workdir, workdir]
    for d in private_dirs:
        args += ["--bind", d, d]
    args += ["--chdir", workdir, "--setenv", "HOME", "/tmp", "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib",
             "--setenv", "IPYTHONDIR", "/tmp/ipython", "--setenv", "JUPYTER_RUNTIME_DIR", "/tmp/runtime",
             "--setenv", "COURSE_SANDBOXED", "1",
             # inside a PID namespace the kernel's parent is PID 1, which ipykernel's
             # parent poller reads as "grader gone"; --die-with-parent does that job
             "--unsetenv", "JPY_PARENT_PID", "--"]
    return args + kernel_argv


def _check_workdir(workdir: str) -> None:
    """Refuse to sandbox into a folder that holds the course or the system (it becomes writable)."""
    real = os.path.realpath(workdir)
    for protected in (REPO_DIR, GRADING_DIR, os.path.expanduser("~"), "/"):
        p = os.path.realpath(protected)
        if real == p or p.startswith(real.rstrip("/") + "/"):
            raise SystemExit(f"course-sandbox: refusing to run a kernel in {workdir}: it contains {protected}. "
                             "Start the kernel in the submission's own folder.")


def _hand_to(uid: int, paths: list[str]) -> None:
    """As root: give the writable folders themselves (not their files) to the kernel's uid."""
    for p in paths:
        os.chown(p, uid, uid)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-f" not in argv:
        raise SystemExit("usage: python -m grading.sandbox -f CONNECTION_FILE [kernel args]")
    i = argv.index("-f")
    connection_file = os.path.abspath(argv[i + 1])
    rest = argv[:i] + argv[i + 2:]
    with open(connection_file) as fh:
        info = json.load(fh)
    workdir = os.getcwd()
    _check_workdir(workdir)
    private = []
    # IPC sockets live next to the path in "ip"; the kernel needs that folder, and a
    # private copy of its connection file (the runtime folder holds other kernels' keys).
    if info.get("transport") == "ipc":
        if not os.path.isabs(info["ip"]):
            raise SystemExit("course-sandbox: IPC kernels need an absolute socket path (KernelManager.ip)")
        ipc_dir = os.path.dirname(info["ip"])
        _check_workdir(ipc_dir)
        private.append(ipc_dir)
        own_copy = os.path.join(ipc_dir, "connection.json")
        with open(own_copy, "w") as fh:
            json.dump(info, fh)
        connection_file = own_copy
    kernel_argv = [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file, *rest]
    ok, exe = bwrap_works()
    if ok and info.get("transport") != "ipc":
        ok = False  # a TCP kernel cannot live in an empty network namespace
    uid = os.geteuid()
    setpriv = shutil.which("setpriv")
    if ok and uid == 0 and setpriv:
        # bwrap runs as root (so it can mount what root can read), then the kernel
        # itself becomes an unprivileged uid of its own: the process limit binds
        # (root is exempt) and counts only this kernel's processes and threads, and
        # nothing outside its own folders is writable.
        uid = gid = _free_uid()
        _hand_to(uid, [workdir, *private])
        kernel_argv = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
                       "--", *kernel_argv]
    set_limits(uid)
    cmd = build_bwrap_command(exe, kernel_argv, workdir, private) if ok else kernel_argv
    os.execv(cmd[0], cmd)


def install_kernelspec(prefix: str | None = None) -> str:
    """Install the course-sandbox kernelspec into this environment; return its folder."""
    from jupyter_client.kernelspec import KernelSpecManager

    import tempfile

    spec = {
        "argv": [sys.executable, "-m", "grading.sandbox", "-f", "{connection_file}"],
        "display_name": "Python 3 (course sandbox)",
        "language": "python",
        "env": {"PYTHONPATH": REPO_DIR},
        # interrupts travel as a message on the control channel: a signal from the
        # grader would have to cross the sandbox's PID namespace
        "interrupt_mode": "message",
        "metadata": {"debugger": False},
    }
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kernel.json"), "w") as fh:
            json.dump(spec, fh, indent=1)
        return KernelSpecManager().install_kernel_spec(tmp, KERNEL_NAME, prefix=prefix or sys.prefix)


if __name__ == "__main__":
    main()
