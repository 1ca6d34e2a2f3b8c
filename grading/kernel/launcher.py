"""The sandboxed grading kernel: student code runs isolated, with bounded resources.

The kernelspec ``course-sandbox`` (installed by ``python -m grading sandbox-install``
into this environment) starts ``python -I -S <repo>/grading/kernel/launcher.py -f {connection_file}``.
The launcher runs as the grader (root when grading a class) in the submission's folder, so:

* it runs isolated (``-I -S``): no working directory, no user site, no PYTHON* variables,
  no site-packages on its import path; it is a plain script that imports the standard
  library only, so nothing in the submission's folder is ever imported by root;
* it reads the folder's path, then leaves it (``chdir("/")``); it never opens, lists or
  changes anything in it: the kernel enters the folder only inside the sandbox;
* it hands the kernel an environment of a fixed list of variable names (:func:`kernel_env`,
  :data:`KERNEL_ENV_NAMES`; no pattern such as ``COURSE_*``): no gradebook URL, password, token
  or other credential of the grader ever reaches it.

It sets resource limits and then replaces itself with the real IPython kernel inside
bubblewrap (``bwrap``, Debian package ``bubblewrap``):

isolated (with bwrap)
    * no network: a new, empty network namespace (no loopback peers, no internet);
    * its own PID, IPC and UTS namespaces; every process it starts dies with it;
    * its filesystem is an allowlist (:func:`visible_paths`; ``grading/docs/sandbox.md``): the sandbox's root is
      empty and only this is bound into it, read-only: the system's programs and shared libraries
      (:data:`SYSTEM_PATHS`, the loader's files of /etc), the interpreter and its standard library
      (:func:`python_dirs`; the base interpreter's and the system's site-packages covered by empty folders),
      the lesson's packages (the venv's site-packages is an empty folder holding the entries of the lesson's
      view alone: ``grading.packages``, written into the edition as ``_kernel_view.json``), the grading run's
      edition of ``course_lib`` (``COURSE_KERNEL_LIB``, built by ``grading.edition``: the students' edition,
      no reference or equivalent of a graded exercise in it), the lesson's hidden feed alone
      (``lesson_feeds/<lesson>`` of the edition, mounted as its ``hidden_feed``), the grader's matplotlib
      font list and ``COURSE_CACHE`` (the course's downloaded weights); a minimal /dev, the sandbox's own /proc.
      Nothing else of the host: no repository (``notebooks/`` with the hidden tests, ``.git``, ``grading/``),
      no other clone of the course, nothing of /work, /root or a home folder but the path down to the
      interpreter or venv where one lives there, no other student's folder. The lesson is
      ``COURSE_KERNEL_LESSON`` when the grader sets it, else the submission folder's name (nbgrader's
      ``autograded/<student>/<assignment>``: :func:`kernel_lesson`); a folder of no known lesson gets no
      hidden feed and the packages every lesson has;
    * the submission's folder is mounted read-only at ``/tmp/.submission`` and copied,
      inside the sandbox and as the kernel's own uid, into ``/tmp/work``, the kernel's
      working folder. ``/tmp`` is a private tmpfs of ``COURSE_SANDBOX_DISK_MB`` (default
      512 MiB): the files a kernel writes, in its folder and in /tmp together, are bounded
      in total and vanish with the kernel (``/dev/shm``: ``COURSE_SANDBOX_SHM_MB``, 64 MiB, of
      its own). The grader's copy of the folder is never
      writable by the kernel, so no grader step can meet a link, FIFO or device it made;
    * when the grader runs as root, each kernel runs as an unused uid of its own
      (``setpriv`` inside the sandbox), so the process limit below applies to that
      kernel alone (root is exempt from RLIMIT_NPROC; a shared uid such as nobody
      would let one student's fork bomb starve another's kernel) and it cannot
      escalate (no_new_privs).
    * the IPC socket folder (as root) is a private tmpfs of ``COURSE_SANDBOX_IPC_KB`` (1 MiB,
      64 files) owned by the kernel's uid (:func:`bound_ipc_folder`), unmounted when the kernel is
      gone (by the grader's kernel manager, or by the relay below once no restart claimed it).
channels (always)
    * the kernel's stdout and stderr are a pipe to a relay process of the launcher
      (:func:`_bounded_output`): the grader's file descriptors never reach the kernel, and the
      grader reads at most ``COURSE_KERNEL_OUTPUT_BYTES`` (64 KiB) of what it writes there.
bounded (always, also without bwrap)
    * memory: address space ``COURSE_SANDBOX_MEMORY_MB`` (default 6144 MiB);
    * processes and threads: ``COURSE_SANDBOX_NPROC`` more than the uid already runs (default 128);
    * CPU time: ``COURSE_SANDBOX_CPU_SECONDS`` per kernel (default 900 s), on top of the
      per-cell wall-clock timeout and the per-notebook limit of ``grading.kernel.client``;
    * file size: ``COURSE_SANDBOX_FSIZE_MB`` per file written (default 256 MiB).

Without bwrap (not installed, or user namespaces disabled) only the limits apply: the
kernel can then read and write what the grader's user can (every lesson's hidden feed, every installed
package, the repository), and use the network: the allowlists above need bwrap. As root
the launcher then refuses to start a kernel (root never runs submission code);
``python -m grading preflight`` says which mode is in force.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys

# A plain script, run with -I -S: nothing from the grading package (or the submission) is imported.
KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))  # grading/kernel/: this file and protocol.py
PACKAGE_DIR = os.path.dirname(KERNEL_DIR)  # grading/
REPO_DIR = os.path.dirname(PACKAGE_DIR)

KERNEL_NAME = "course-sandbox"
SUBMISSION_MOUNT = "/tmp/.submission"  # the submission, read-only, inside the sandbox
KERNEL_WORKDIR = "/tmp/work"  # the kernel's own copy of it, in the bounded private /tmp
MPL_CACHE_MOUNT = "/tmp/.matplotlib-cache"  # the grader's matplotlib font list, read-only


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {os.environ.get(name)!r}") from None


def environment_prefix() -> str:
    """The course environment's prefix (the venv), also when this runs with -S (no site: sys.prefix is the base)."""
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    return venv if os.path.exists(os.path.join(venv, "pyvenv.cfg")) else sys.prefix


# ------------------------------------------------------------------ the kernel's environment
# the kernel's environment is this fixed list of names (passed through as they are, when set) plus the
# values kernel_env sets itself; every other name is dropped, whatever it looks like (no pattern: a
# COURSE_* setting the grader holds is never the kernel's unless it is named here)
KERNEL_ENV_NAMES = (
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_MESSAGES", "TZ", "TERM",
    "MPLBACKEND", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "NUMEXPR_MAX_THREADS", "VECLIB_MAXIMUM_THREADS", "TORCH_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
    "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
    "COURSE_CHECK_MODE",  # record: set by grading.kernel.client for every grading kernel
    "COURSE_CACHE",  # where course_lib.pretrained finds its cached weights (a path)
)
_PASS = frozenset(KERNEL_ENV_NAMES)
# the names kernel_env sets itself (with _PASS: every name a kernel's environment can hold)
KERNEL_ENV_SET = ("PATH", "PYTHONPATH", "HOME", "MPLCONFIGDIR", "IPYTHONDIR", "JUPYTER_RUNTIME_DIR",
                  "XDG_CACHE_HOME", "COURSE_SANDBOXED", "PYDEVD_DISABLE_FILE_VALIDATION")


KERNEL_LIB_ENV = "COURSE_KERNEL_LIB"  # the folder of the grading kernel's edition of course_lib (grading.edition)


def kernel_lib_root(environ: dict | None = None) -> str:
    """The folder that holds the grading kernel's edition of course_lib (``grading.edition``: the students'
    edition, no reference in it), named by ``COURSE_KERNEL_LIB``. A kernel never imports the repository's
    course_lib: without a valid edition the launcher refuses to start one."""
    root = (os.environ if environ is None else environ).get(KERNEL_LIB_ENV, "")
    why = "not set"
    if root:
        why = "not an absolute path to a folder the grader alone can write, holding course_lib/_edition.json " \
              "with edition 'grading-kernel'"
        try:
            with open(os.path.join(root, "course_lib", "_edition.json")) as fh:
                edition = json.load(fh).get("edition")
            modes = [os.stat(p).st_mode for p in (root, os.path.join(root, "course_lib"))]
            if os.path.isabs(root) and edition == "grading-kernel" and not any(m & 0o022 for m in modes):
                return os.path.realpath(root)
        except (OSError, ValueError, AttributeError):
            pass
    raise SystemExit(f"course-sandbox: no grading edition of course_lib to mount ({KERNEL_LIB_ENV} is {why}). "
                     "The kernel imports only the students' edition, never the repository's course_lib: grade "
                     "through `python -m grading`, which builds one per run (grading/edition.py).")


def kernel_env(environ: dict | None = None, home: str = "/tmp/home") -> dict:
    """The kernel's whole environment: the names in KERNEL_ENV_NAMES the grader has set, plus KERNEL_ENV_SET."""
    environ = dict(os.environ if environ is None else environ)
    env = {k: environ[k] for k in KERNEL_ENV_NAMES if k in environ}
    env.update({
        "PATH": os.pathsep.join([os.path.join(environment_prefix(), "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
        "PYTHONPATH": kernel_lib_root(environ),  # the students' edition of course_lib: all the course code it sees
        "HOME": home, "MPLCONFIGDIR": os.path.join(home, ".matplotlib"),
        "IPYTHONDIR": os.path.join(home, ".ipython"), "JUPYTER_RUNTIME_DIR": os.path.join(home, ".runtime"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"), "COURSE_SANDBOXED": "1",
    })
    env.setdefault("MPLBACKEND", "agg")
    # ipykernel imports debugpy at start-up, which then warns on stderr about Python's frozen modules
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    assert set(env) <= _PASS | set(KERNEL_ENV_SET), sorted(set(env) - _PASS - set(KERNEL_ENV_SET))
    return env


def kernel_threads(workers: int, environ: dict | None = None) -> dict:
    """The OpenMP (torch, numpy's BLAS) threads of each grading kernel, as the environment to set:
    the machine's cores shared among the run's ``workers`` kernels (cores // workers, at least 1), so
    that the kernels side by side never start more threads than there are cores (each would start
    one per core, and they spin-wait for each other's cores; the paired runs that measured it are
    ``tests/benchmarks/results/cpu_2026-11-27/breakdown_threads_*.txt``, tabled on the Benchmarks page).
    Empty where the instructor set ``OMP_NUM_THREADS``: that value is kept."""
    environ = os.environ if environ is None else environ
    if environ.get("OMP_NUM_THREADS"):
        return {}
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return {"OMP_NUM_THREADS": str(max(1, cores // max(1, int(workers))))}


@contextlib.contextmanager
def kernel_threads_set(workers: int):
    """:func:`kernel_threads` in this process's environment for the duration (a grading run: the warm
    template, the workers and their kernels inherit it); the caller's environment is given back after."""
    threads = kernel_threads(workers)
    os.environ.update(threads)
    try:
        yield threads
    finally:
        for name in threads:
            os.environ.pop(name, None)


# ------------------------------------------------------------------ bwrap
def bwrap_path() -> str | None:
    return shutil.which("bwrap")


BWRAP_CHECKED_ENV = "COURSE_BWRAP_WORKS"  # set by a grading run that has probed bwrap once (grading.kernel.warm.environment)


def bwrap_works(trust_run: bool = False) -> tuple[bool, str]:
    """Can bwrap create the namespaces we need here? (False, why) otherwise. ``trust_run``: a launcher of a
    grading run that has already probed this bwrap (``COURSE_BWRAP_WORKS`` names it) skips the probe, a
    process of its own on every kernel start; should bwrap fail after all, the kernel does not start and
    the grading run reports that submission as the machine's fault."""
    exe = bwrap_path()
    if exe is None:
        return False, "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    if trust_run and os.environ.get(BWRAP_CHECKED_ENV) == exe:
        return True, exe
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


# ------------------------------------------------------------------ what the kernel sees: an allowlist
# the system's programs and shared libraries (the interpreter's libc, torch's libgomp, /bin/sh and cp for the
# copy into the kernel's folder), each bound read-only where it exists; a link (merged /usr) is made again
SYSTEM_PATHS = ("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/libexec",
                "/usr/share/zoneinfo", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# the files of /etc the dynamic loader and the C library read
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf",
             "/etc/passwd", "/etc/group", "/etc/alternatives")
VIEW_FILE = "_kernel_view.json"  # = grading.packages.VIEW_FILE: the edition's package view, per lesson
LESSON_FEEDS = "lesson_feeds"  # = grading.feed.LESSONS: <edition>/lesson_feeds/<lesson>/, one lesson's hidden feed
FEED_FOLDER = "hidden_feed"  # = course_lib.checks.core.FEED_FOLDER, where the kernel's course_lib reads its feed
LESSON_ENV = "COURSE_KERNEL_LESSON"  # the grader may name the lesson; else the submission folder's name


def python_dirs() -> list[str]:
    """What the kernel's interpreter needs, read-only: the venv's ``pyvenv.cfg``, the interpreter it was made
    from (the real executable), the standard library (its ``site-packages`` left out: :func:`hidden_packages`)
    and ``libpython`` where the interpreter links it. The venv's ``site-packages`` is the lesson's view
    (:func:`kernel_view`), never bound whole."""
    import glob
    import sysconfig

    prefix = environment_prefix()
    paths = [os.path.join(prefix, "pyvenv.cfg"), os.path.realpath(sys.executable),
             os.path.realpath(os.path.join(prefix, "bin", "python"))]
    base = {k: sys.base_prefix for k in ("base", "platbase", "installed_base", "installed_platbase")}
    paths += [sysconfig.get_paths(vars=base)[k] for k in ("stdlib", "platstdlib")]
    libdir = sysconfig.get_config_var("LIBDIR")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir:
        paths += glob.glob(os.path.join(libdir, "libpython*"))
    return list(dict.fromkeys(p for p in paths if p and os.path.exists(p) and p != "/"))


def python_links() -> list[tuple[str, str]]:
    """The links from the venv's ``bin/python*`` to the real interpreter, each step (target, link), made again
    in the sandbox (the venv's bin/ holds nbgrader's and pip's scripts too: not the kernel's)."""
    prefix = environment_prefix()
    folder = os.path.join(prefix, "bin")
    out: dict = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        for _ in range(16):  # a chain of links (venv -> pyenv's python3 -> python3.11)
            if not (name.startswith("python") and os.path.islink(path)) or path in out:
                break
            out[path] = os.readlink(path)
            path = os.path.join(os.path.dirname(path), out[path])
    return [(target, link) for link, target in out.items()]


def hidden_packages() -> list[str]:
    """Folders of packages inside what the kernel sees that are not its view: the base interpreter's
    site-packages, the system Python's dist-packages (an empty tmpfs over each)."""
    import glob

    out = []
    for pattern in (os.path.join(sys.base_prefix, "lib", "python3*", "*-packages"), "/usr/lib/python3*/*-packages",
                    "/usr/local/lib/python3*/*-packages", "/usr/lib/python3/dist-packages"):
        out += glob.glob(pattern)
    return sorted({os.path.realpath(p) for p in out if os.path.isdir(p)} - {os.path.realpath(kernel_site_packages())})


def kernel_site_packages() -> str:
    return os.path.join(environment_prefix(), "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                        "site-packages")


def _read_view(root: str) -> dict:
    try:
        with open(os.path.join(root, VIEW_FILE)) as fh:
            view = json.load(fh)
        return view if isinstance(view, dict) else {}
    except (OSError, ValueError):
        return {}


def kernel_lesson(workdir: str, root: str | None = None, environ: dict | None = None) -> str | None:
    """The lesson a kernel grades: ``COURSE_KERNEL_LESSON`` when the grader set it, else the name of the
    submission's folder (nbgrader autogrades ``autograded/<student>/<assignment>``); only a lesson the
    edition's view knows. None otherwise: the kernel then gets no hidden feed and the default packages."""
    environ = os.environ if environ is None else environ
    root = kernel_lib_root(environ) if root is None else root
    lessons = _read_view(root).get("lessons") or {}
    name = environ.get(LESSON_ENV) or os.path.basename(os.path.realpath(workdir))
    return name if name in lessons and "/" not in name and not name.startswith(".") else None


def kernel_view(root: str, lesson: str | None) -> tuple[str, list[str]]:
    """(site-packages, the entries of it the lesson's kernel sees): ``grading.packages`` wrote them into the
    edition (``_kernel_view.json``). No view: no entry (deny by default: nothing third-party imports)."""
    view = _read_view(root)
    entries = (view.get("lessons") or {}).get(lesson) if lesson else view.get("default")
    sp = kernel_site_packages()
    if view.get("site_packages") and os.path.realpath(view["site_packages"]) != os.path.realpath(sp):
        entries = None  # a view of another environment: nothing of it
    names = [e for e in entries or [] if isinstance(e, str) and e and "/" not in e and e not in (".", "..")]
    return sp, names


def allowed_modules(root: str, lesson: str | None) -> list[str]:
    """The top-level module names of the lesson's view (a folder, ``x.py``, ``x.cpython-*.so``), course_lib."""
    _, names = kernel_view(root, lesson)
    mods = {"course_lib"}
    for e in names:
        if e.endswith((".dist-info", ".egg-info", ".libs", ".data")):
            continue
        mods.add(e.split(".", 1)[0])
    return sorted(mods)


def _parents(args: list[str], target: str) -> None:
    """Make each folder above ``target`` in the sandbox's fresh root, 0755 (bwrap would make them 0700 as root,
    which the kernel's uid cannot traverse)."""
    made = {args[i + 1] for i, a in enumerate(args[:-1]) if a == "--dir"}
    path = "/"
    for part in os.path.dirname(target).strip("/").split("/") if os.path.dirname(target) != "/" else []:
        path = os.path.join(path, part)
        if path not in made:
            args += ["--perms", "0755", "--dir", path]


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def _check_not_kernel_path(path: str) -> None:
    """A course under /tmp must not sit where the kernel's own files go inside the sandbox."""
    for own in (SUBMISSION_MOUNT, KERNEL_WORKDIR, "/tmp/home", MPL_CACHE_MOUNT):
        if path == own or _under(path, own) or _under(own, path):
            raise SystemExit(f"course-sandbox: the course environment at {path} overlaps {own}, where the "
                             "sandboxed kernel keeps its own files. Clone the course (or create its "
                             "environment) in another folder.")


def visible_paths(workdir: str, lesson: str | None = None) -> dict:
    """What a sandboxed kernel sees of the host, read-only, as {path inside: path on the host}: the system's
    programs and libraries, the interpreter, the lesson's packages, the edition's course_lib, the lesson's
    hidden feed, the matplotlib font list, the course cache (``COURSE_CACHE``). Everything else of the host
    is absent (the sandbox's root is empty). The allowlist :func:`build_bwrap_command` mounts and
    ``tests/test_kernel_allowlist.py`` walks."""
    home = os.path.expanduser("~")
    root = kernel_lib_root()
    seen: dict = {}
    for p in SYSTEM_PATHS + ETC_PATHS:
        if os.path.exists(p) and not os.path.islink(p):
            seen[p] = p
    for p in python_dirs():
        seen[p] = p
    sp, names = kernel_view(root, lesson)
    for n in names:
        if os.path.lexists(os.path.join(sp, n)):
            seen[os.path.join(sp, n)] = os.path.join(sp, n)
    seen[os.path.join(root, "course_lib")] = os.path.join(root, "course_lib")
    feed = os.path.join(root, LESSON_FEEDS, lesson) if lesson else None
    if feed and os.path.isdir(feed):
        seen[os.path.join(root, FEED_FOLDER)] = feed
    mpl_cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "matplotlib")
    if os.path.isdir(mpl_cache):  # the grader's font list: a fresh kernel need not rebuild it (seconds per kernel)
        seen[MPL_CACHE_MOUNT] = mpl_cache
    cache = os.environ.get("COURSE_CACHE")
    if cache and os.path.isabs(cache) and os.path.isdir(cache):  # the course's downloaded weights: lesson data
        seen[os.path.realpath(cache)] = os.path.realpath(cache)
    return seen


def build_bwrap_command(exe: str, kernel_argv: list[str], workdir: str, private_dirs: list[str],
                        env: dict | None = None, lesson: str | None = None) -> list[str]:
    """bwrap argv: an empty root with only :func:`visible_paths` bound read-only, a minimal /dev, the sandbox's
    /proc, one bounded private /tmp (the kernel's folder and home), the submission read-only. ``lesson``: the
    lesson graded (default: :func:`kernel_lesson` of ``workdir``)."""
    disk = _env_int("COURSE_SANDBOX_DISK_MB", 512) * 1024 * 1024
    shm = _env_int("COURSE_SANDBOX_SHM_MB", 64) * 1024 * 1024
    if lesson is None:
        lesson = kernel_lesson(workdir)
    args = [exe, "--dev", "/dev", "--proc", "/proc",
            "--perms", "1777", "--size", str(shm), "--tmpfs", "/dev/shm",
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
            "--hostname", "sandbox",
            # the kernel's files, its folder included, live in one bounded tmpfs; a bind below /tmp (a course
            # cloned under `mktemp -d`) lands inside it, read-only
            "--perms", "1777", "--size", str(disk), "--tmpfs", "/tmp"]
    for p in SYSTEM_PATHS:
        if os.path.islink(p):  # merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(p), p]
    visible = visible_paths(workdir, lesson)
    sp, _ = kernel_view(kernel_lib_root(), lesson)
    hidden = hidden_packages()
    mounts = sorted(visible.items(), key=lambda kv: kv[0].count("/"))  # a folder before what is bound inside it
    site_made = False
    for inside, host in mounts:
        if _under(inside, "/tmp") and inside != MPL_CACHE_MOUNT:
            _check_not_kernel_path(inside)
        if _under(inside, sp) and not site_made:
            _parents(args, sp)
            args += ["--perms", "0755", "--tmpfs", sp]  # the view: only the lesson's entries below
            site_made = True
        _parents(args, inside)
        args += ["--ro-bind", host, inside]
    for h in hidden:
        if any(h == v or _under(h, v) for v in visible):
            args += ["--tmpfs", h]
    for target, link in python_links():
        _parents(args, link)
        args += ["--symlink", target, link]
    args += ["--ro-bind", workdir, SUBMISSION_MOUNT]
    for d in private_dirs:
        _parents(args, d)
        args += ["--bind", d, d]
    args += ["--chdir", "/", "--clearenv"]
    for k, v in sorted((env or {}).items()):
        args += ["--setenv", k, v]
    return args + ["--"] + kernel_argv


# copies the submission into the kernel's own folder, inside the sandbox, as the kernel's uid
_ENTER = ('umask 022; mkdir -p "$HOME" "$MPLCONFIGDIR" "$0" && cp -R -- "$1"/. "$0"/ 2>/dev/null; '
          f'cp {MPL_CACHE_MOUNT}/fontlist-*.json "$MPLCONFIGDIR"/ 2>/dev/null; '
          'cd "$0" && shift 1 && exec "$@"')


# warm kernels (grading/kernel/warm.py): the same copy, then the sandbox only holds its namespaces until the
# template's fork has joined them; it ends when the launcher does (stdin closes)
# The holder stays root inside the sandbox (bwrap leaves it no capability), so the kernel's uid cannot
# signal it: os.kill(-1, SIGKILL) in a cell must not end its own sandbox, as with a cold kernel.
_COPY = ('umask 022; mkdir -p "$HOME" "$MPLCONFIGDIR" "$0" && cp -R -- "$1"/. "$0"/ 2>/dev/null; '
         f'cp {MPL_CACHE_MOUNT}/fontlist-*.json "$MPLCONFIGDIR"/ 2>/dev/null; exit 0')
_HOLD = ('"$0" --reuid="$1" --regid="$1" --clear-groups --no-new-privs -- /bin/sh -c "$2" "$3" "$4"; '
         'echo ready; exec cat >/dev/null')


@functools.lru_cache(maxsize=1)
def _protocol():
    """``grading/kernel/protocol.py``, loaded by its path (this script runs with ``-I -S``: no folder of the
    course is on its import path, so no ``import grading.kernel.protocol``); once per launcher."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("course_kernel_protocol", os.path.join(KERNEL_DIR, "protocol.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _warm_kernel(exe: str, setpriv: str, uid: int, workdir: str, private: list[str], env: dict,
                 connection_file: str, rest: list[str], socket_path: str) -> int | None:
    """Run the kernel as a fork of the worker's template inside a fresh sandbox; its exit status,
    or None when the template cannot serve (the caller then starts a cold kernel)."""
    protocol = _protocol()
    hold = ["/bin/sh", "-c", _HOLD, setpriv, str(uid), _COPY, KERNEL_WORKDIR, SUBMISSION_MOUNT]
    # the worker is killed: this launcher dies too (PR_SET_PDEATHSIG, set by main), so bwrap (--die-with-parent)
    # and the kernel with it
    info_r, info_w = os.pipe()
    cmd = build_bwrap_command(exe, hold, workdir, private, env)
    cmd = [cmd[0], "--info-fd", str(info_w)] + cmd[1:]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=[info_w])
    os.close(info_w)
    try:
        with os.fdopen(info_r) as fh:
            holder = int(json.loads(fh.read())["child-pid"])
        if proc.stdout.readline().strip() != b"ready":
            return None
        root = kernel_lib_root()
        lesson = kernel_lesson(workdir, root)
        sp, names = kernel_view(root, lesson)
        request = {"holder_pid": holder, "uid": uid, "env": env, "connection_file": connection_file,
                   "args": rest, "modules": allowed_modules(root, lesson),
                   "paths": [os.path.join(sp, n) for n in names] + [os.path.join(root, "course_lib")]}
        try:
            sock = protocol.send_request(socket_path, request, [1, 2])
        except OSError:
            return None
        with sock:
            code = protocol.read_exit(sock)
        return 1 if code is None else code
    except (ValueError, KeyError, OSError):
        return None
    finally:
        proc.kill()
        proc.wait()


def _template_ready(socket_path: str) -> bool:
    """Is the template's socket open? A template that is still importing (``COURSE_WARM_PID`` alive)
    is waited for, up to ``COURSE_WARM_WAIT`` seconds (default 30): a cold kernel started meanwhile
    would import the same stack again, competing with it for the CPU."""
    import time

    deadline = time.monotonic() + _env_int("COURSE_WARM_WAIT", 30)
    pid = _env_int("COURSE_WARM_PID", 0)
    while not os.path.exists(socket_path) and pid > 0 and time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if _protocol().TEMPLATE_MODULE.encode() not in fh.read():
                    break  # gone, and the pid reused
        except OSError:
            break  # gone
        time.sleep(0.02)
    return os.path.exists(socket_path)


def _check_workdir(workdir: str) -> None:
    """Refuse to sandbox into a folder that holds the course or the system."""
    real = os.path.realpath(workdir)
    # the course this kernel's grading run grades: COURSE_ROOT, read now (grading/course.py, which this
    # script cannot import), else the folder grading/ itself
    course_root = os.path.abspath(os.environ.get("COURSE_ROOT") or PACKAGE_DIR)
    for protected in (REPO_DIR, course_root, os.path.expanduser("~"), "/"):
        p = os.path.realpath(protected)
        if real == p or p.startswith(real.rstrip("/") + "/"):
            raise SystemExit(f"course-sandbox: refusing to run a kernel in {workdir}: it contains {protected}. "
                             "Start the kernel in the submission's own folder.")


def _write_private(path: str, data: str, owner: int | None = None) -> None:
    """Write a file in a folder the kernel can write, without following anything it put there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    if owner is not None:
        os.fchown(fd, owner, owner)
    with os.fdopen(fd, "w") as fh:
        fh.write(data)


_CLAIMS = "/run/course-sandbox"  # root only: which launcher last claimed each IPC folder's tmpfs


def _claim_path(folder: str) -> str:
    import hashlib

    return os.path.join(_CLAIMS, "ipc-" + hashlib.sha256(os.path.realpath(folder).encode()).hexdigest()[:32])


def _claim(folder: str, pid: int | None) -> int | None:
    """Under a lock: with ``pid``, record this launcher as the IPC folder's owner (a restart's launcher
    takes it over); without, read the owner. Returns the owner before the call."""
    import fcntl

    os.makedirs(_CLAIMS, mode=0o700, exist_ok=True)
    fd = os.open(_claim_path(folder), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, 32, 0).strip()
        owner = int(raw) if raw.isdigit() else None
        if pid is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(pid).encode(), 0)
        return owner
    finally:
        os.close(fd)


def _release_when_unclaimed(folder: str, pid: int) -> None:
    """The relay, once its kernel is gone: unmount the IPC folder's tmpfs unless a restarted kernel's
    launcher claimed it since, and remove the claim; the folder itself when the grader left it empty
    (whatever starts a kernel, the grader's kernel manager or another client, nothing stays mounted)."""
    import fcntl

    try:
        fd = os.open(_claim_path(folder), os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, 32, 0).strip()
        if raw != str(pid).encode():
            return  # a restart took it over: its own relay releases it
        release_ipc_folder(folder)
        for leftover in (_claim_path(folder), folder):
            try:
                (os.rmdir if leftover == folder else os.unlink)(leftover)  # the folder only when empty
            except OSError:
                pass
    finally:
        os.close(fd)


def _bounded_output(limit: int, on_exit=None) -> None:
    """The kernel never holds a grader's file descriptor: its stdout and stderr (and this launcher's,
    which it inherits) become a pipe read by a relay process of the launcher, which forwards the first
    ``limit`` bytes (``COURSE_KERNEL_OUTPUT_BYTES``, 64 KiB: start-up errors) to the grader's stderr and
    discards the rest with one note. What the grader reads from a kernel's channels is bounded; a cell
    that floods ``os.write(2, ...)`` fills no worker's pipe."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the relay: outside the sandbox, our code only
        try:
            os.close(write_fd)
            # a session of its own: jupyter_client ends a kernel by signalling its process group, and the
            # relay must outlive the kernel to release its IPC folder (it ends at end of file, when the
            # kernel and its sandbox are gone)
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)  # the grader's stdout: not needed by the relay
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            forwarded = 0
            while True:
                try:
                    chunk = os.read(read_fd, 1 << 16)
                except InterruptedError:
                    continue
                if not chunk:
                    break
                if forwarded < limit:
                    part = chunk[:limit - forwarded]
                    forwarded += len(part)
                    try:
                        os.write(2, part)
                        if forwarded >= limit:
                            os.write(2, f"\n[course-sandbox: the kernel wrote more than {limit:,} bytes to its "
                                        "stdout/stderr; the rest was discarded]\n".encode())
                    except OSError:
                        forwarded = limit
            if on_exit is not None:
                on_exit()
        finally:
            os._exit(0)
    os.close(read_fd)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


MNT_DETACH = 2


def _libc():
    import ctypes

    # the symbols the interpreter is linked with, libc's among them (ctypes.util.find_library runs
    # `ldconfig -p`, a process of its own on every kernel start and stop)
    return ctypes.CDLL(None, use_errno=True)


def bound_ipc_folder(folder: str, uid: int, size_kb: int) -> bool:
    """As root: a private tmpfs of ``size_kb`` KiB over the IPC folder, owned by the kernel's uid, so the
    sockets the kernel makes there (and anything else it writes there) stay in a bounded folder of its
    own; the grader unmounts it when the kernel is gone (:func:`release_ipc_folder`). True when mounted
    (or already), False where the grader is not root (the folder then stays on the host's /tmp)."""
    if os.geteuid() != 0:
        return False
    # a restart: the last kernel's relay may have released and removed the folder a moment ago
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if os.path.ismount(folder):
        return True
    opts = f"size={size_kb}k,nr_inodes=64,mode=0700,uid={uid},gid={uid}".encode()
    if _libc().mount(b"tmpfs", folder.encode(), b"tmpfs", 0x2 | 0x4 | 0x8, opts) != 0:  # nosuid nodev noexec
        import ctypes

        raise SystemExit(f"course-sandbox: cannot mount a tmpfs on the IPC folder {folder}: "
                         f"{os.strerror(ctypes.get_errno())}")
    return True


def release_ipc_folder(folder: str) -> None:
    """Unmount the IPC folder's tmpfs (the grader, after its kernel is gone); nothing when not mounted."""
    if folder and os.path.ismount(folder):
        _libc().umount2(folder.encode(), MNT_DETACH)


def _refuse_orphan(parent: int) -> None:
    """Stop when the process that started this launcher is gone (it was reparented): its run was interrupted
    or its worker killed, and a kernel started now would outlive them."""
    if os.getppid() != parent:
        raise SystemExit("course-sandbox: the grading worker that asked for this kernel is gone; not starting it")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-f" not in argv:
        raise SystemExit("usage: python -I -S grading/kernel/launcher.py -f CONNECTION_FILE [kernel args]")
    i = argv.index("-f")
    # the grading worker that asked for this kernel is killed (an interrupted run): this launcher dies too,
    # whatever it is doing (waiting for the warm template, then starting a cold kernel); the setting carries over
    # the exec into bwrap. When the worker is already gone, no kernel is started.
    parent = os.getppid()
    _protocol().prctl(_protocol().PR_SET_PDEATHSIG, signal.SIGKILL)
    _refuse_orphan(parent)
    connection_file = os.path.abspath(argv[i + 1])
    rest = argv[:i] + argv[i + 2:]
    workdir = os.getcwd()
    os.chdir("/")  # the submission's folder is entered only inside the sandbox
    _check_workdir(workdir)
    with open(connection_file) as fh:
        info = json.load(fh)
    private = []
    # IPC sockets live next to the path in "ip"; the kernel needs that folder, and a
    # private copy of its connection file (the runtime folder holds other kernels' keys).
    if info.get("transport") == "ipc":
        if not os.path.isabs(info["ip"]):
            raise SystemExit("course-sandbox: IPC kernels need an absolute socket path (KernelManager.ip)")
        ipc_dir = os.path.dirname(info["ip"])
        _check_workdir(ipc_dir)
        private.append(ipc_dir)
        connection_file = os.path.join(ipc_dir, "connection.json")
    python = os.path.join(environment_prefix(), "bin", "python") if os.path.exists(
        os.path.join(environment_prefix(), "bin", "python")) else sys.executable
    # -P: the working folder (the submission's copy) is not put on sys.path, and IPython then adds no ''
    # either (sys.flags.safe_path): a module file the submission writes never shadows an installed one
    kernel_argv = [python, "-P", "-m", "ipykernel_launcher", "-f", connection_file, *rest]
    ok, exe = bwrap_works(trust_run=True)
    if ok and info.get("transport") != "ipc":
        ok = False  # a TCP kernel cannot live in an empty network namespace
    uid = os.geteuid()
    kernel_uid = _free_uid() if ok and uid == 0 else None
    launcher, on_exit = os.getpid(), None
    if private and kernel_uid is not None:  # root: the IPC folder is a bounded tmpfs of this kernel's
        _claim(private[0], launcher)
        bound_ipc_folder(private[0], kernel_uid, _env_int("COURSE_SANDBOX_IPC_KB", 1024))
        on_exit = lambda folder=private[0]: _release_when_unclaimed(folder, launcher)  # noqa: E731
    _bounded_output(_env_int("COURSE_KERNEL_OUTPUT_BYTES", 64 * 1024), on_exit)
    if private:  # a private copy; a restarted kernel's folder may hold links it made: never followed
        _write_private(connection_file, json.dumps(info), kernel_uid)
    if not ok:
        if uid == 0 and os.environ.get("COURSE_SANDBOX_ALLOW_ROOT") != "1":
            raise SystemExit(f"course-sandbox: no bwrap isolation ({exe}); refusing to run a student's kernel "
                             "as root. Install bubblewrap, or grade as an unprivileged user.")
        set_limits(uid)
        home = os.path.join(private[0], "home") if private else os.path.join(workdir, ".home")
        os.makedirs(home, exist_ok=True)
        os.chdir(workdir)
        _refuse_orphan(parent)
        os.execve(kernel_argv[0], kernel_argv, kernel_env(home=home))
    setpriv = shutil.which("setpriv")
    env = kernel_env()
    entry = ["/bin/sh", "-c", _ENTER, KERNEL_WORKDIR, SUBMISSION_MOUNT, *kernel_argv]
    if uid == 0:
        if not setpriv:
            raise SystemExit("course-sandbox: setpriv (util-linux) is missing; refusing to run a kernel as root")
        # bwrap runs as root (so it can mount what root can read), then the kernel
        # itself becomes an unprivileged uid of its own: the process limit binds
        # (root is exempt) and counts only this kernel's processes and threads.
        uid = gid = kernel_uid
        for p in private:
            os.chown(p, uid, gid)  # root made it (mkdtemp), nothing inside it is followed
        entry = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs", "--", *entry]
        socket_path = os.environ.get("COURSE_WARM_SOCKET")
        if socket_path and private and _template_ready(socket_path):
            set_limits(uid)  # as for a cold kernel: bwrap and the holder inherit them
            code = _warm_kernel(exe, setpriv, uid, workdir, private, env, connection_file, rest, socket_path)
            if code is not None:
                sys.exit(code)
    set_limits(uid)
    cmd = build_bwrap_command(exe, entry, workdir, private, env)
    _refuse_orphan(parent)  # the template wait can be long: the worker may have gone meanwhile
    os.execv(cmd[0], cmd)


def kernelspec() -> dict:
    return {
        # -I: isolated (no working directory, user site or PYTHON* variables); -S: no site-packages.
        # A script, not -m: -m would put the working directory (the submission) first on sys.path.
        "argv": [sys.executable, "-I", "-S", os.path.join(KERNEL_DIR, "launcher.py"), "-f", "{connection_file}"],
        "display_name": "Python 3 (course sandbox)",
        "language": "python",
        # interrupts travel as a message on the control channel: a signal from the
        # grader would have to cross the sandbox's PID namespace
        "interrupt_mode": "message",
        "metadata": {"debugger": False},
    }


def install_kernelspec(prefix: str | None = None) -> str:
    """Install the course-sandbox kernelspec into this environment (``<prefix>/share/jupyter/kernels/``, where
    jupyter_client looks); return its folder.

    Every grading run calls this, and runs may start side by side on one environment (two instructors, a test
    suite's workers): jupyter_client's own install deletes the folder and copies it again, so a run starting a
    kernel at that moment found no kernelspec. Here the folder is never removed: ``kernel.json`` is written only
    when it differs from :func:`kernelspec` (a stale one, naming an old launcher, is replaced), as a temporary
    file renamed over it, which readers see whole or not at all."""
    import tempfile

    folder = os.path.join(prefix or environment_prefix(), "share", "jupyter", "kernels", KERNEL_NAME)
    path = os.path.join(folder, "kernel.json")
    text = json.dumps(kernelspec(), indent=1)
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return folder
    except OSError:
        pass
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kernel.json.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return folder


if __name__ == "__main__":
    main()
