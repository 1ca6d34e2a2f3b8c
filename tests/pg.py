"""A throwaway PostgreSQL server on loopback, for tests and benchmarks of the gradebook.

    with pg.running_server() as server:       # or: server = pg.start(); ...; server.stop()
        os.environ["COURSE_DB_URL"] = server.url  # postgresql+psycopg2://course@127.0.0.1:PORT/gradebook

What it does:

1. finds the server binaries (``initdb``, ``pg_ctl``, ``postgres``): ``$PG_BINDIR``, then
   ``pg_ctl`` on PATH (followed through symlinks), then Debian's ``/usr/lib/postgresql/<ver>/bin``
   (newest first);
2. if none are found and we are root on a machine with ``apt-get``, installs Debian's
   ``postgresql`` package (``apt-get update -qq && apt-get install -y -qq postgresql``);
   ``PG_NO_INSTALL=1`` forbids that;
3. ``initdb`` a fresh cluster in a new temporary folder (trust authentication, superuser
   ``course``). initdb and the server refuse to run as root, so as root they run as user
   ``postgres`` (or ``nobody``) through ``setpriv`` (or ``runuser``);
4. starts the server on a free port of 127.0.0.1 only, its unix socket in that folder,
   and creates the database;
5. ``stop()`` shuts it down (immediate mode) and removes the folder.

What it does NOT do: tune the server, keep data between runs, or listen on anything but
loopback. ``fast=True`` (tests) turns off fsync and synchronous commit: the data is thrown
away anyway; benchmarks use ``fast=False`` so PostgreSQL pays for durability as SQLite does.

Every reason it cannot provide a server raises :class:`PostgresUnavailable` with a
message saying what was missing and what was tried; tests turn that into a skip.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time

SUPERUSER = "course"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be provided here; the message says why."""


def _bindir_ok(d: str | None) -> bool:
    return bool(d) and all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres"))


def _version_key(path: str) -> tuple:
    m = re.search(r"/postgresql/([\d.]+)/bin$", path)
    return tuple(int(x) for x in m.group(1).split(".")) if m else (0,)


def find_bindir() -> str | None:
    """The folder holding initdb, pg_ctl and postgres, or None."""
    candidates = [os.environ.get("PG_BINDIR")]
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        candidates += [os.path.dirname(pg_ctl), os.path.dirname(os.path.realpath(pg_ctl))]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for d in candidates:
        if _bindir_ok(d):
            return d
    return None


def install_with_apt(timeout: float = 900) -> str:
    """Install Debian's postgresql package (root + apt-get only); return what was done."""
    if os.environ.get("PG_NO_INSTALL"):
        raise PostgresUnavailable("PostgreSQL server binaries not found and PG_NO_INSTALL is set")
    if os.geteuid() != 0:
        raise PostgresUnavailable("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found, and not root "
                                  "to install them: apt-get install postgresql, or set PG_BINDIR")
    if not shutil.which("apt-get"):
        raise PostgresUnavailable("PostgreSQL server binaries not found and no apt-get to install them; "
                                  "install PostgreSQL and set PG_BINDIR to the folder with initdb and pg_ctl")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = "apt-get update -qq && apt-get install -y -qq postgresql"
    try:
        proc = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PostgresUnavailable(f"`{cmd}` did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise PostgresUnavailable(f"`{cmd}` failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    return cmd


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as(user: pwd.struct_passwd | None) -> list[str]:
    """Command prefix that runs a program as ``user`` (nothing when we are not root)."""
    if user is None:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", user.pw_name, "--"]
    raise PostgresUnavailable("running as root, and neither setpriv nor runuser is available to start "
                              "PostgreSQL as an unprivileged user (initdb refuses root)")


def _server_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresUnavailable("running as root and there is no user 'postgres' or 'nobody' to run PostgreSQL as")


def url_for(port: int, dbname: str) -> str:
    """SQLAlchemy URL naming the psycopg2 driver: SQLAlchemy 2.1 maps a bare ``postgresql://``
    to psycopg 3, which the course does not install."""
    return f"postgresql+psycopg2://{SUPERUSER}@127.0.0.1:{port}/{dbname}"


class Server:
    """One running cluster. ``url`` is a SQLAlchemy URL (psycopg2 driver)."""

    def __init__(self, bindir: str, folder: str, port: int, dbname: str, prefix: list[str], env: dict):
        self.bindir, self.folder, self.port, self.dbname = bindir, folder, port, dbname
        self._prefix, self._env = prefix, env
        self.data = os.path.join(folder, "data")
        self.logfile = os.path.join(folder, "server.log")
        self.url = url_for(port, dbname)

    def __repr__(self) -> str:
        return f"<PostgreSQL {self.version()} at {self.url}>"

    def _bin(self, name: str) -> str:
        return os.path.join(self.bindir, name)

    def version(self) -> str:
        out = subprocess.run([self._bin("postgres"), "--version"], capture_output=True, text=True).stdout
        m = re.search(r"\(PostgreSQL\) (\S+)", out)
        return m.group(1) if m else out.strip()

    def log_tail(self, n: int = 1500) -> str:
        try:
            with open(self.logfile, errors="replace") as fh:
                return fh.read()[-n:]
        except OSError:
            return ""

    def connect(self, dbname: str | None = None):
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname=dbname or self.dbname)

    def create_database(self, name: str) -> str:
        """Create another database on this server; return its URL."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"database name must match [a-z_][a-z0-9_]*, got {name!r}")
        conn = self.connect("postgres")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE {name}")
        finally:
            conn.close()
        return url_for(self.port, name)

    def stop(self) -> None:
        """Stop the server (immediate: the data is thrown away) and remove its folder."""
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            subprocess.run([*self._prefix, self._bin("pg_ctl"), "-D", self.data, "-m", "immediate", "-w",
                            "-t", "60", "stop"], env=self._env, capture_output=True, text=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def start(dbname: str = "gradebook", fast: bool = True, install: bool = True, tries: int = 3) -> Server:
    """Start a fresh server with an empty database ``dbname``; raise PostgresUnavailable if we cannot."""
    try:
        import psycopg2  # noqa: F401 - the gradebook needs the driver, not only the server
    except ImportError:
        raise PostgresUnavailable("the psycopg2 driver is not installed (pip install psycopg2-binary)") from None
    bindir = find_bindir()
    if bindir is None:
        if not install:
            raise PostgresUnavailable("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found")
        install_with_apt()
        bindir = find_bindir()
        if bindir is None:
            raise PostgresUnavailable("installed Debian's postgresql package but still found no initdb/pg_ctl")
    user = _server_user()
    prefix = _run_as(user)
    env = dict(os.environ, LC_ALL="C", LANG="C")
    env.pop("PGDATA", None)
    folder = tempfile.mkdtemp(prefix="course-pg-")
    server = None
    try:
        os.chmod(folder, 0o700)
        if user is not None:
            os.chown(folder, user.pw_uid, user.pw_gid)
            if not _can_enter(prefix, folder, env):
                raise PostgresUnavailable(f"user {user.pw_name!r} cannot enter {folder} (check the permissions "
                                          "of the temporary folder's parents, or set TMPDIR)")
        initdb = subprocess.run([*prefix, os.path.join(bindir, "initdb"), "-D", os.path.join(folder, "data"),
                                 "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
                                env=env, capture_output=True, text=True, timeout=300)
        if initdb.returncode != 0:
            raise PostgresUnavailable(f"initdb failed (exit {initdb.returncode}): {initdb.stderr.strip()[-800:]}")
        options = f"-c listen_addresses=127.0.0.1 -k {folder}"
        if fast:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        last = ""
        for _ in range(tries):  # another process may take the free port before the server binds it
            port = _free_port()
            server = Server(bindir, folder, port, dbname, prefix, env)
            proc = subprocess.run([*prefix, os.path.join(bindir, "pg_ctl"), "-D", server.data, "-l", server.logfile,
                                   "-w", "-t", "60", "-o", f"{options} -p {port}", "start"],
                                  env=env, capture_output=True, text=True, timeout=120)
            if proc.returncode == 0:
                break
            last = (proc.stderr.strip() + "\n" + server.log_tail()).strip()
            subprocess.run([*prefix, os.path.join(bindir, "pg_ctl"), "-D", server.data, "-m", "immediate",
                            "stop"], env=env, capture_output=True, text=True)
        else:
            raise PostgresUnavailable(f"the PostgreSQL server did not start: {last[-1200:]}")
        _wait_connectable(server)
        server.create_database(dbname)
        return server
    except BaseException:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _can_enter(prefix: list[str], folder: str, env: dict) -> bool:
    return subprocess.run([*prefix, "test", "-w", folder], env=env).returncode == 0


def _wait_connectable(server: Server, timeout: float = 30.0) -> None:
    import psycopg2

    deadline = time.monotonic() + timeout
    while True:
        try:
            server.connect("postgres").close()
            return
        except psycopg2.OperationalError as err:
            if time.monotonic() > deadline:
                raise PostgresUnavailable(f"server started but refuses connections: {err}; "
                                          f"log: {server.log_tail()}") from None
            time.sleep(0.2)


@contextlib.contextmanager
def running_server(dbname: str = "gradebook", fast: bool = True, install: bool = True):
    """Context manager around :func:`start` / :meth:`Server.stop`."""
    server = start(dbname, fast=fast, install=install)
    try:
        yield server
    finally:
        server.stop()
