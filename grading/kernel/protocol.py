"""How a launcher asks the warm-kernel template for a kernel, and the system calls both sides need.

The launcher (``grading/kernel/launcher.py``, a plain script run as ``python -I -S`` with no folder of the
course on its import path) loads this file by its path; the template (``grading.kernel.warm``) imports it
as a module. So its top level imports the standard library only
(``tests/test_architecture.py::test_the_launchers_files_import_the_standard_library_only``).

One request per kernel, over the template's Unix socket (a folder only the grader's user can open):

* the launcher sends a 4-byte big-endian length, then the request as JSON (:func:`send_request`: the
  sandbox's holder pid, the kernel's uid, environment, connection file, arguments, the module names and
  package paths its lesson may import), and passes its stdout and stderr as file descriptors with it;
* the template's child answers, once the kernel has ended, with its exit status as a 4-byte big-endian
  signed integer (:func:`read_exit`; nothing: the connection was lost).

Does NOT cover: building the sandbox (``grading.kernel.launcher``) or forking the kernel into it
(``grading.kernel.warm``).
"""
from __future__ import annotations

import json
import os
import socket
import struct

TEMPLATE_MODULE = "grading.kernel.warm"  # what a template runs as (``python -m``): its command line names it
NAMESPACES = ("ipc", "uts", "net", "mnt", "pid")  # mnt last but pid: joining it resets root and cwd
CLONE = {"ipc": 0x08000000, "uts": 0x04000000, "net": 0x40000000, "mnt": 0x00020000, "pid": 0x20000000}
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
MAX_REQUEST = 1 << 20  # bytes of one request the template reads in its first message


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def setns(fd: int, kind: str) -> None:
    """Join the namespace ``kind`` (a key of :data:`CLONE`) that ``fd`` (``/proc/<pid>/ns/<kind>``) names."""
    _check(_libc().setns(fd, CLONE[kind]), f"setns({kind})")


def prctl(option: int, value: int) -> None:
    """``prctl(2)``, e.g. ``prctl(PR_SET_PDEATHSIG, signal.SIGKILL)``: this process dies with its parent."""
    _check(_libc().prctl(option, value, 0, 0, 0), f"prctl({option})")


# ------------------------------------------------------------------ the launcher's side
def send_request(path: str, request: dict, fds: list[int]) -> socket.socket:
    """Ask the template at ``path`` for a kernel; returns the connection (its end reports the exit)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    data = json.dumps(request).encode()
    socket.send_fds(sock, [struct.pack("!I", len(data)) + data], fds)
    return sock


def read_exit(sock: socket.socket) -> int | None:
    """The kernel's exit status, as the template's child reports it (None: connection lost)."""
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    return struct.unpack("!i", data)[0]


# ------------------------------------------------------------------ the template's side
def recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """The request :func:`send_request` sent, and the file descriptors passed with it (at most 4)."""
    msg, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 4)
    if len(msg) < 4:
        raise ValueError(f"a request starts with a 4-byte length; got {len(msg)} bytes")
    (size,) = struct.unpack("!I", msg[:4])
    body = msg[4:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ValueError("truncated request")
        body += chunk
    return json.loads(body), list(fds)


def send_exit(conn: socket.socket, code: int) -> None:
    """Report the kernel's exit status to the launcher (:func:`read_exit`)."""
    conn.sendall(struct.pack("!i", code))
