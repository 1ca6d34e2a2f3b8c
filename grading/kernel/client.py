"""nbgrader's Execute preprocessor, made to survive a kernel that dies.

Plain nbgrader gives up on the whole submission when the kernel dies (``os._exit``,
a segfault through ctypes, the memory limit, a fork bomb hitting the process
limit): the student gets no grade at all, even for the exercises that were right.
``ResilientExecute`` instead

* marks the cell that killed the kernel with a ``KernelDied`` error (its tests score 0),
  or, for a cell that ignores the interrupt after the per-cell timeout, ``CellTimeoutError``,
* restarts the kernel, silently re-runs the cells before it (except earlier killers),
  and goes on with the next cell, at most ``max_restarts`` times per notebook;
* stops a notebook that runs longer than ``notebook_timeout`` seconds in total, marking
  every cell not yet run with ``NotebookTimeout`` (on top of the per-cell ``timeout``).

So a broken submission is graded on what ran, and nothing is lost.

Grade what grades: a code cell the instructor tagged ``demo-only`` in the source notebook
(training runs, plots, timing tables that no test reads) is not run when grading, when the
submission holds it unchanged (same source, not an answer or test cell). A cell the student
wrote or edited always runs. ``tests/test_notebooks.py`` proves the marking safe: no other
cell reads a name that only a demo-only cell defines, and the demo class (solutions full
marks, blanks zero) is graded with them skipped. ``--ResilientExecute.skip_demo_cells=False``
runs everything.

Output is bounded twice. While a cell runs, ``ResilientExecute`` keeps at most
``COURSE_OUTPUT_CELL_BYTES`` of its outputs in memory (a 100 MB print flood is not
held) and each check record (``RECORD_MIME``, the verifier's input) at most
``COURSE_RECORD_BYTES``. After the verifier has read and stripped the records,
``BoundOutputs`` trims every cell to ``COURSE_OUTPUT_CELL_BYTES`` and the notebook to
``COURSE_OUTPUT_NOTEBOOK_BYTES`` (streams, images, rich output and errors alike; an
error is shortened, never dropped, so trimming can never raise a score) and says so
in the cell with a visible note.
"""
from __future__ import annotations

import copy
import os
import re
import shutil
import tempfile
import time

from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import ensure_async, run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionComplete, CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, CaselessStrEnum, Integer, Type

from grading import NOTEBOOKS_DIR
from grading.kernel.polling import SlicedPollClient
from grading.failures import CELL_TIMEOUT, KERNEL_DIED, KERNEL_MESSAGE, NOTEBOOK_TIMEOUT


# the verifier's input (course_lib.checks.transcript.RECORD_MIME): bounded per record (COURSE_RECORD_BYTES) and
# counted in the notebook's intake budget (COURSE_INTAKE_NOTEBOOK_BYTES) while it arrives; never trimmed afterwards
RECORD_MIME = "application/vnd.course-check-record+json"
# what the grader reads from a kernel, per message (a ZeroMQ frame larger than this is refused by the socket
# before it is read: the grader never holds it)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
TRIM_NOTE = "[output trimmed"
DEMO_TAG = "demo-only"
DEMO_NOTE = "[demonstration cell: not run when grading (tag demo-only); run it in your notebook to see its output]\n"


def is_demo_cell(cell) -> bool:
    """A code cell the instructor tagged demo-only, that is neither an answer nor a test."""
    meta = cell.get("metadata", {})
    nbg = meta.get("nbgrader", {})
    return cell.get("cell_type") == "code" and DEMO_TAG in (meta.get("tags") or []) \
        and not nbg.get("grade") and not nbg.get("solution")


def demo_sources(assignment: str, notebook: str) -> set[str]:
    """The sources of the demo-only cells of the instructor's notebook (empty when there is none)."""
    import nbformat

    path = os.path.join(NOTEBOOKS_DIR, os.path.basename(assignment), os.path.basename(notebook) + ".ipynb")
    if not os.path.isfile(path):
        return set()
    return {c.source for c in nbformat.read(path, as_version=4).cells if is_demo_cell(c)}


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def output_bytes(out) -> int:
    """Bytes an output takes in the notebook (what the gradebook copy and the feedback page must hold)."""
    kind = out.get("output_type")
    if kind == "stream":
        return len(str(out.get("text", "")).encode("utf-8", "replace"))
    if kind == "error":
        return sum(len(str(x).encode("utf-8", "replace")) for x in
                   [out.get("ename", ""), out.get("evalue", ""), *(out.get("traceback") or [])])
    return sum(len(v.encode("utf-8", "replace")) if isinstance(v, str) else len(str(v))
               for v in (out.get("data") or {}).values())


def _json_bytes(value) -> int:
    """Bytes ``value`` takes as JSON (what a record or a widget message costs the grader to keep)."""
    import json

    try:
        return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "replace"))
    except (TypeError, ValueError, RecursionError):
        return len(str(value))


def trim_note(text: str):
    return new_output("display_data", data={"text/plain": f"{TRIM_NOTE}: {text}]"})


def error_output(ename: str, evalue: str):
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


STARVED_SHARE = 0.5  # without run-queue waits: a timed-out cell whose kernel had less than this share of a CPU
GIVE_BACK_STEP = 0.05  # seconds: run-queue waits smaller than this are not given back to a cell at its limit


# ipykernel names each cell's code /tmp/ipykernel_<its pid>/<hash>.py, and a warning prints that
# path. The pid is the kernel's inside its sandbox (2 for a cold kernel, another for a warm one),
# so the same submission's feedback would differ with the kernel that ran it: the pid is dropped
# (stable_outputs).
_CELL_PATH = re.compile(r"/ipykernel_\d+/")


def stable_outputs(cell) -> None:
    """Outputs that depend on the submission alone, not on the kernel or its timing: consecutive
    writes to one stream are joined (a print's text and its newline arrive as one message or two,
    as the kernel happens to flush), and the kernel's pid is dropped from cell file paths."""
    if cell.get("cell_type") != "code":
        return
    joined = []
    for out in cell.get("outputs", []):
        prev = joined[-1] if joined else None
        if (out.get("output_type") == "stream" and prev is not None and prev.get("output_type") == "stream"
                and prev.get("name") == out.get("name") and isinstance(prev.get("text"), str)
                and isinstance(out.get("text"), str)):
            prev["text"] += out["text"]
        else:
            joined.append(out)
    cell["outputs"] = joined
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and isinstance(out.get("text"), str):
            out["text"] = _CELL_PATH.sub("/ipykernel/", out["text"])
        elif out.get("output_type") == "error" and isinstance(out.get("traceback"), list):
            out["traceback"] = [_CELL_PATH.sub("/ipykernel/", t) if isinstance(t, str) else t
                                for t in out["traceback"]]


def _process_tree(root: int) -> list[int] | None:
    """``root`` and its live descendants (Linux /proc), or None when ``root`` is gone."""
    parent = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                data = fh.read()
        except OSError:
            continue
        parent[int(name)] = int(data[data.rindex(")") + 2:].split()[1])
    if root not in parent:
        return None
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.append(pid)
            todo += children.get(pid, [])
    # a warm kernel (grading/kernel/warm.py) is forked by the worker's template, not by the launcher, into
    # the launcher's sandbox: every process of a PID namespace the tree created is the kernel's too
    def pid_ns(pid):
        try:
            return os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            return None

    own = pid_ns("self")
    sandboxes = {pid_ns(pid) for pid in tree} - {own, None}
    if sandboxes:
        tree += [pid for pid in parent if pid not in tree and pid_ns(pid) in sandboxes]
    return tree


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds (user + system) used so far by process ``root`` and its live descendants (Linux /proc)."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        tree = _process_tree(root)
        if tree is None:
            return None
        total = 0.0
        for pid in tree:
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    data = fh.read()
            except OSError:
                continue
            fields = data[data.rindex(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        return total
    except (OSError, ValueError, IndexError):
        return None


def tree_wait_seconds(root: int) -> float | None:
    """Seconds the threads of ``root`` and its live descendants spent runnable but waiting for a
    CPU (/proc/<pid>/task/<tid>/schedstat, second field, in ns). A sleeping thread does not
    accumulate it; a thread on a busy machine does. None where the kernel does not report it."""
    try:
        tree = _process_tree(root)
        if tree is None or not os.path.exists(f"/proc/{root}/schedstat"):
            return None
        total = 0
        for pid in tree:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                        total += int(fh.read().split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        return total / 1e9
    except (OSError, ValueError):
        return None


def tree_sched(root: int | None) -> tuple[float | None, float | None]:
    """(CPU seconds, run-queue wait seconds) of a process tree, for the load rule (``SchedSnapshot``)."""
    if not root:
        return None, None
    return tree_cpu_seconds(root), tree_wait_seconds(root)


class SchedSnapshot:
    """``tree_sched`` of a kernel taken ``delay`` seconds into a cell, on a timer thread.

    The load rule (``ResilientExecute._time_given_back``, ``_starved``) compares a timed-out cell's kernel
    before and after; reading /proc before every cell cost 0.16 s of the grader's CPU per submission (every
    process on the machine is scanned, twice). Only a cell that outlives ``delay`` is measured, over
    what it ran after that: a cell that times out always does, and most cells end before it.
    ``stop()`` cancels it, or waits for a reading in progress; ``taken`` is then final."""

    def __init__(self, root: int | None, delay: float):
        import threading

        self.sched, self.wall = (None, None), None
        self._timer = threading.Timer(delay, self._take, args=(root,))
        self._timer.daemon = True
        self._timer.start()

    def _take(self, root):
        self.wall = time.monotonic()
        self.sched = tree_sched(root)

    def stop(self) -> "SchedSnapshot":
        self._timer.cancel()
        self._timer.join()
        return self

    @property
    def taken(self) -> bool:
        return self.wall is not None


class PromptReadyClient(SlicedPollClient):
    """A kernel client whose ``wait_for_ready`` returns as soon as the kernel is ready.

    jupyter_client's version ends by reading IOPub until it has been quiet for 0.2 s: a fixed
    0.2 s on every kernel start and restart, a third of a warm kernel's start-up. Ready here means
    what it checks first: the kernel answered ``kernel_info`` on the shell channel and IOPub is
    connected, shown by the kernel's ``iopub_welcome`` (ipykernel 7 sends it once it has seen this
    client's subscription: nothing it publishes later is lost) or by the ``idle`` status of that same
    request arriving on IOPub (a kernel without the welcome). When neither comes within 0.2 s (the
    subscription reached the kernel after it published), the request is sent again. Everything the
    kernel published before is then read; a later message of an earlier request is ignored by
    nbclient, which reads only the messages of the request it sent.
    """

    def _create_connected_socket(self, channel, identity=None):
        """jupyter_client's socket, with ZeroMQ's inbound message bound (``MAX_MESSAGE_BYTES``,
        ``COURSE_KERNEL_MESSAGE_BYTES``): a larger frame from the kernel is dropped by the socket itself."""
        import zmq
        from jupyter_client.channels import HBChannel  # noqa: F401 - jupyter_client is loaded
        from jupyter_client.connect import channel_socket_types

        url = self._make_url(channel)
        sock = self.context.socket(channel_socket_types[channel])
        sock.linger = 1000
        # the client connects before the kernel has bound its sockets; ZeroMQ then tries again after
        # RECONNECT_IVL (100 ms by default): every kernel start waited up to 0.1 s per channel for it
        sock.setsockopt(zmq.RECONNECT_IVL, 5)
        sock.setsockopt(zmq.MAXMSGSIZE, _env_int("COURSE_KERNEL_MESSAGE_BYTES", MAX_MESSAGE_BYTES))
        if identity:
            sock.identity = identity
        if getattr(self, "curve_publickey", None) is not None:
            sock.curve_secretkey = self.curve_secretkey
            sock.curve_publickey = self.curve_publickey
            sock.curve_serverkey = self.curve_publickey
        sock.connect(url)
        return sock

    async def _idle_of(self, msg_id: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = await self.iopub_channel.get_msg(timeout=left)
            except Empty:
                return False
            if msg["msg_type"] == "iopub_welcome":
                return True
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" \
                    and msg["content"].get("execution_state") == "idle":
                return True
        return False

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            msg_id = self.kernel_info()
            reply_by = time.monotonic() + 1
            while (left := reply_by - time.monotonic()) > 0:
                try:
                    reply = await self.shell_channel.get_msg(timeout=left)
                except Empty:
                    break
                if reply["msg_type"] == "kernel_info_reply" and reply["parent_header"].get("msg_id") == msg_id:
                    # IOPub is connected once this request's idle arrives there; lost (not yet
                    # subscribed when the kernel published it): ask again, as jupyter_client does
                    if await self._idle_of(msg_id, 0.2):
                        self._handle_kernel_info_reply(reply)
                        return
                    break
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


class FreshIPCKernelManager(AsyncKernelManager):
    """A kernel manager whose IPC sockets live in a folder of their own, made for each kernel.

    jupyter_client numbers IPC sockets from 1 upwards under one prefix; a kernel
    started right after another (or by a second worker) could reuse a socket path
    a dying kernel still holds ("Invalid Signature"). A fresh folder per kernel
    rules that out; a restart keeps it, so connected clients reconnect.
    """

    # IPC by default (the course's configuration sets it too): TCP ports are picked free and then
    # bound by the kernel, so two kernels started at once (two workers, two test processes) can
    # race for one port and a client can end up talking to another submission's kernel
    transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)
    client_factory = Type(PromptReadyClient, klass=AsyncKernelClient, config=True)
    _own_ipc_dir = None

    async def _async_pre_start_kernel(self, **kw):
        # the checks in a grading kernel only record the student's outputs; the verdict is
        # decided outside it (course_lib.checks.transcript, grading.verify)
        env = dict(kw.get("env") or os.environ)
        env["COURSE_CHECK_MODE"] = "record"
        kw["env"] = env
        if self.transport == "ipc" and self._own_ipc_dir is None:
            self._own_ipc_dir = tempfile.mkdtemp(prefix="nbg-ipc-")
            self.ip = os.path.join(self._own_ipc_dir, "kernel")
        return await super()._async_pre_start_kernel(**kw)

    pre_start_kernel = _async_pre_start_kernel

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        # after a kill, jupyter_client polls the kernel's process every 0.1 s: the first poll comes
        # too soon and the second 0.1 s later, on every kernel; 10 ms is as cheap (a waitpid)
        await super()._async_wait(pollinterval=min(pollinterval, 0.01))

    def _close_control_socket(self) -> None:
        # a shutdown sends interrupt_request on the control channel, then (grading: now=True) kills the
        # kernel; a message still queued for the dead kernel held the socket's close for its linger
        # (0.1 s) on most kernel stops. Closed at shutdown only: whatever the kernel could still read has
        # been sent by then
        if self._control_socket is not None:
            self._control_socket.linger = 0
        super()._close_control_socket()

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and self._own_ipc_dir:
            from grading.kernel.launcher import release_ipc_folder

            release_ipc_folder(self._own_ipc_dir)  # the kernel's bounded tmpfs (grading as root)
            shutil.rmtree(self._own_ipc_dir, ignore_errors=True)
            self._own_ipc_dir = None

    cleanup_resources = _async_cleanup_resources


def _is_count(value) -> bool:
    """A prompt number as nbformat stores one: an int (never a bool) or None; e.g. 3 -> True, "3" -> False."""
    return value is None or (type(value) is int and 0 <= value < 2**53)


def timeout_message(limit) -> str:
    """What a student reads when a cell hit the per-cell time limit: the limit and the likely cause."""
    return (f"this cell ran longer than the grading time limit of {limit} s per cell (time its kernel spent waiting "
            "for a CPU busy with other work is not counted) and was stopped; the likely "
            "cause is an endless loop (a while loop whose condition never becomes false, a loop whose index is never "
            "advanced) or far more work than the exercise needs: check that every loop ends, on small inputs first")


class ResilientExecute(Execute):
    notebook_timeout = Integer(600, help="wall-clock seconds for a whole notebook").tag(config=True)
    max_restarts = Integer(3, help="kernel restarts allowed per notebook").tag(config=True)
    skip_demo_cells = Bool(True, help="do not run the instructor's demo-only cells (unchanged) when "
                                      "grading").tag(config=True)

    async def _async_poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg, task_poll_kernel_alive):
        self._awaited = msg_id  # the reply that _time_given_back may wait for past the limit
        try:
            return await super()._async_poll_for_reply(msg_id, cell, timeout, task_poll_output_msg,
                                                      task_poll_kernel_alive)
        finally:
            self._awaited = None

    async def _time_given_back(self, timeout):
        """At a cell's limit, the seconds its kernel waited for a CPU held by other work, given back.

        The limit charges a cell for the time its kernel ran or could have run: the run-queue waits of the
        kernel's threads since the cell's snapshot (``SchedSnapshot``; ``tree_wait_seconds``) are added to
        its deadline, again and again while they grow, up to ``retry_timeout_factor - 1`` times the limit
        in all. The kernel is not interrupted meanwhile: a cell that ends in that time ends as it would
        have on a quiet machine, and a loop that never ends costs the grader its limit in CPU, not a
        restart, a replay and a second run. Returns the cell's reply, or None when the limit stands (no
        snapshot, waits not reported, or nothing more to give back)."""
        snapshot, msg_id = self._sched, self._awaited
        if snapshot is None or msg_id is None or not timeout:
            return None
        snapshot.stop()  # a reading in progress completes: its values are final
        waited_before = snapshot.sched[1]
        if not snapshot.taken or waited_before is None:
            return None
        most = (self.retry_timeout_factor - 1) * timeout
        given = 0.0
        while given < most:
            waited = tree_wait_seconds(self._kernel_pid())
            more = 0.0 if waited is None else min(waited - waited_before, most) - given
            if more < GIVE_BACK_STEP:
                return None
            given += more
            end = time.monotonic() + more
            while (left := end - time.monotonic()) > 0:
                try:
                    msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=min(left, 1.0)))
                except Empty:
                    await self._async_check_alive()
                    continue
                if msg["parent_header"].get("msg_id") == msg_id:
                    return msg
        return None

    async def _async_handle_timeout(self, timeout, cell=None):
        reply = await self._time_given_back(timeout)
        if reply is not None:
            return reply  # nbclient takes it as the cell's reply
        # nbgrader's error says only "No reply from kernel before timeout": say the limit and the likely cause
        self.error_on_timeout = {"ename": CELL_TIMEOUT, "evalue": timeout_message(timeout),
                                 "traceback": [f"\x1b[0;31mCellTimeoutError\x1b[0m: {timeout_message(timeout)}"]}
        return await super()._async_handle_timeout(timeout, cell)

    def __init__(self, *args, **kwargs):
        kwargs["kernel_manager_class"] = FreshIPCKernelManager
        super().__init__(*args, **kwargs)

    _asked_exit = False
    _sched = None  # the running cell's SchedSnapshot (not during a replay or a retry)
    _awaited = None  # the msg_id of the reply being waited for
    _bad_messages: set = frozenset()
    _skipped: set = frozenset()
    _refused: set = frozenset()

    # ---- intake of kernel messages: a cell's outputs are bounded while they arrive
    def process_message(self, msg, cell, cell_index):
        """A kernel's message is data: any exception in handling one (a message nested past Python's
        recursion limit, a status without a state, a widget comm nbclient cannot follow) is this cell's
        failure, recorded as a :data:`KERNEL_MESSAGE` error on the cell; the rest of the notebook is graded.
        ``execution_count`` is kept only when it is an integer."""
        try:
            return self._process_message(msg, cell, cell_index)
        except CellExecutionComplete:
            raise
        except Exception as err:  # noqa: BLE001 - the kernel's message, never the grader's state
            if cell_index not in self._bad_messages:
                self._bad_messages.add(cell_index)
                cell.outputs.append(new_output("error", ename=KERNEL_MESSAGE, evalue=(
                    f"the grader could not take a message this cell's kernel sent ({type(err).__name__}); "
                    "this cell scores 0: print and display plain values only"), traceback=[]))
            if isinstance(msg, dict) and isinstance(msg.get("content"), dict) \
                    and msg["content"].get("execution_state") == "idle":
                raise CellExecutionComplete() from None
            return None

    async def _async_poll_output_msg(self, parent_msg_id, cell, cell_index) -> None:
        """nbclient's loop over a cell's IOPub messages, with a message that cannot even be decoded (JSON
        nested past the recursion limit) taken as this cell's failure like any other bad message."""
        while True:
            try:
                msg = await self.kc.iopub_channel.get_msg(timeout=None)
            except (ValueError, RecursionError, UnicodeError, TypeError, KeyError) as err:
                try:
                    self.process_message({"content": None, "msg_type": None, "bad": err}, cell, cell_index)
                except CellExecutionComplete:
                    return
                continue
            parent = msg.get("parent_header") if isinstance(msg, dict) else None
            if isinstance(parent, dict) and parent.get("msg_id") == parent_msg_id:
                try:
                    self.process_message(msg, cell, cell_index)
                except CellExecutionComplete:
                    return

    def _process_message(self, msg, cell, cell_index):
        if "bad" in msg:
            raise msg["bad"]
        """Display ids are refused: an output that names one is taken as a plain output (it can never be
        updated later), and ``update_display_data`` is dropped with a note. So what the intake and its
        bounds took is what is graded: a record, once taken, cannot be rewritten."""
        content = msg.get("content") or {}
        if isinstance(content, dict) and "execution_count" in content and not _is_count(content["execution_count"]):
            content = dict(content, execution_count=None)  # kernel text is never the cell's prompt number
            msg = dict(msg, content=content)
        transient = content.get("transient") if isinstance(content, dict) else None
        msg_type = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
        if msg_type == "update_display_data":
            if cell_index not in self._refused:  # a note of its own (BoundOutputs replaces the trim notes)
                self._refused.add(cell_index)
                cell.outputs.append(new_output("display_data", data={"text/plain": (
                    "[refused: an update of an earlier output (update_display_data); a graded notebook's "
                    "outputs are kept as first shown]")}))
            return None
        if transient and transient.get("display_id"):
            msg = dict(msg, content=dict(content, transient={}))
        return super().process_message(msg, cell, cell_index)

    def clear_output(self, outs, msg, cell_index):
        """``clear_output`` clears what the cell showed, never its check records (the verifier's input)."""
        records = [o for o in outs if RECORD_MIME in (o.get("data") or {})]
        super().clear_output(outs, msg, cell_index)
        if not self.clear_before_next_output:
            outs[:] = records + [o for o in outs if o not in records]

    def handle_comm_msg(self, outs, msg, cell_index):
        """Widget messages count in the cell's intake like any output (nbclient keeps widget state)."""
        size = _json_bytes(msg.get("content"))
        if not self._take(size, cell_index, outs):
            return None
        return super().handle_comm_msg(outs, msg, cell_index)

    def _take(self, size: int, cell_index: int, outs) -> bool:
        """Count ``size`` bytes in the cell's and the notebook's intake; False (with a note) when over."""
        limit = _env_int("COURSE_OUTPUT_CELL_BYTES", 500_000)
        total_limit = _env_int("COURSE_INTAKE_NOTEBOOK_BYTES", 64_000_000)
        if self._notebook_bytes() + size > total_limit:
            self._note_once(outs, cell_index, f"this notebook's outputs and check records passed the "
                                              f"{total_limit:,} bytes a graded notebook may send; the rest was "
                                              "not recorded (tests without their record score 0)")
            return False
        used = self._intake.get(cell_index, 0) + size
        if used > limit:
            self._note_once(outs, cell_index, f"this cell produced more than the {limit:,} bytes of output a "
                                              "graded cell keeps; the rest was not recorded")
            return False
        self._intake[cell_index] = used
        self._taken[cell_index] = self._taken.get(cell_index, 0) + size
        return True

    def _notebook_bytes(self) -> int:
        """Bytes of output and records taken so far in this notebook (a replayed cell counts once)."""
        return sum(self._taken.values())

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        data = content.get("data") or {}
        if self.clear_before_next_output:  # a clear_output(wait=True): records stay (see clear_output)
            records = [o for o in outs if RECORD_MIME in (o.get("data") or {})]
            outs[:] = records
            self.clear_display_id_mapping(cell_index)
            self.clear_before_next_output = False
        if RECORD_MIME in data:
            size = _json_bytes(data)
            limit = _env_int("COURSE_RECORD_BYTES", 8_000_000)
            if size > limit:
                self._note_once(outs, cell_index, f"a check record of {size:,} bytes was larger than "
                                                  f"{limit:,} and was refused: its test scores 0")
                return None
            total_limit = _env_int("COURSE_INTAKE_NOTEBOOK_BYTES", 64_000_000)
            if self._notebook_bytes() + size > total_limit:
                self._note_once(outs, cell_index, f"this notebook's outputs and check records passed the "
                                                  f"{total_limit:,} bytes a graded notebook may send; a check "
                                                  "record was refused: its test scores 0")
                return None
            # records count in the notebook's budget, not in the cell's display bound
            self._taken[cell_index] = self._taken.get(cell_index, 0) + size
            return super().output(outs, msg, None, cell_index)
        if msg.get("msg_type") == "error":  # errors decide scores: always kept (BoundOutputs shortens them)
            return super().output(outs, msg, None, cell_index)
        size = output_bytes({"output_type": "stream", "text": content.get("text", "")}) \
            if msg.get("msg_type") == "stream" else output_bytes({"data": data})
        if msg.get("msg_type") in ("stream", "display_data", "execute_result") and not self._take(size, cell_index, outs):
            return None
        return super().output(outs, msg, None, cell_index)

    def _note_once(self, outs, cell_index, text):
        if cell_index not in self._noted:
            self._noted.add(cell_index)
            outs.append(trim_note(text))

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        reply = kwargs.get("execute_reply") or {}
        for payload in reply.get("content", {}).get("payload", None) or []:
            if payload.get("source") == "ask_exit":  # exit()/quit(): the kernel stops after this reply
                self._asked_exit = True

    def _mark(self, cell, ename: str, evalue: str) -> None:
        if cell.cell_type == "code":
            cell.outputs = list(cell.get("outputs", [])) + [error_output(ename, evalue)]

    def _restart_and_replay(self, upto: int, skip: set[int]) -> None:
        """Restart the kernel and re-run the cells before ``upto`` (not the killers in ``skip``) to
        rebuild its state. Their outputs were recorded on the first run and stay: nbclient puts the
        executed copy back into the notebook, so the recorded cell is restored after each replay.
        A replay gets the retry's longer timeout: it only rebuilds state, and a replayed cell cut
        short on a busy machine would leave the next cells without their names."""
        run_sync(self.km.restart_kernel)(now=True)
        run_sync(self.kc.wait_for_ready)(timeout=self.startup_timeout)
        saved = self.timeout
        self.timeout = (saved or 30) * self.retry_timeout_factor
        try:
            for j in range(upto):
                cell = self.nb.cells[j]
                if cell.cell_type != "code" or j in skip or j in self._skipped:
                    continue
                self._intake.pop(j, None)
                self._taken.pop(j, None)
                try:
                    self.execute_cell(copy.deepcopy(cell), j, store_history=False)
                finally:
                    self.nb.cells[j] = cell  # the first run's outputs are what is graded
        finally:
            self.timeout = saved

    retry_timeout_factor = Integer(3, help="an instructor's cell that timed out runs once more with this many "
                                           "times the per-cell timeout; a cell whose kernel waited for a CPU runs "
                                           "on for at most this many times the timeout in all (_time_given_back)"
                                   ).tag(config=True)

    @staticmethod
    def _instructor_cell(cell) -> bool:
        """A locked cell that is neither a test nor an answer (setup): nbgrader restored it from the gradebook."""
        meta = cell.get("metadata", {}).get("nbgrader", {})
        return cell.cell_type == "code" and bool(meta.get("locked")) and not meta.get("grade") \
            and not meta.get("solution")

    def _retry_slow_cell(self, cell, resources, index, killers) -> bool:
        """Restart, replay the cells before, run this one again with a longer timeout; True when it completed."""
        saved = self.timeout
        try:
            self._restart_and_replay(index, killers)
            self.timeout = (saved or 30) * self.retry_timeout_factor
            self._intake.pop(index, None)
            self._taken.pop(index, None)
            self._noted.discard(index)
            self.preprocess_cell(cell, resources, index)
            return not self._asked_exit
        except (DeadKernelError, CellTimeoutError):
            return False
        finally:
            self.timeout = saved

    def _kernel_pid(self) -> int | None:
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        return getattr(process, "pid", None)

    def _starved(self, snapshot: SchedSnapshot) -> bool:
        """Was the kernel kept from the CPU while the cell ran (a busy machine, not the student's code), with
        that time not given back? Then the cell is re-run with more time.

        Where the kernel reports run-queue waits, never: the time its threads waited for a CPU was added
        to the cell's deadline before the limit was enforced (``_time_given_back``), so a cell that still
        timed out had its limit of running time (a cell that sleeps or waits on I/O does not wait for a
        CPU, and is charged like any slow cell). Where they are not reported, a CPU share under
        STARVED_SHARE since the snapshot (``SchedSnapshot``, taken early in the cell), which cannot tell
        a sleeping cell from a starved one."""
        snapshot.stop()
        if not snapshot.taken or snapshot.sched[1] is not None:  # not measured, or its waits were given back
            return False
        wall = time.monotonic() - snapshot.wall
        cpu_before, cpu_after = snapshot.sched[0], tree_cpu_seconds(self._kernel_pid())
        if wall <= 0 or cpu_before is None or cpu_after is None:
            return False
        return (cpu_after - cpu_before) / wall < STARVED_SHARE

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        start = time.monotonic()
        killers: set[int] = set()
        retried: set[int] = set()
        self._intake, self._noted, self._taken, self._refused = {}, set(), {}, set()
        self._bad_messages = set()  # _taken: bytes taken per cell, records included
        info = (resources or {}).get("nbgrader", {})
        demos = demo_sources(info.get("assignment", ""), info.get("notebook", "")) if self.skip_demo_cells else set()
        nbg = [c.get("metadata", {}).get("nbgrader", {}) for c in self.nb.cells]
        skipped = {i for i, c in enumerate(self.nb.cells)  # the instructor's demo cell, unchanged: never a test
                   if c.cell_type == "code" and c.source in demos and not nbg[i].get("grade")
                   and not nbg[i].get("solution")}
        self._skipped = skipped
        for i in skipped:
            self.nb.cells[i].outputs = [new_output("stream", name="stdout", text=DEMO_NOTE)]
            self.nb.cells[i].execution_count = None
        with self.setup_kernel():
            info_msg = self.wait_for_reply(self.kc.kernel_info())
            if info_msg and "language_info" in info_msg["content"]:
                self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
            cells = self.nb.cells
            index = 0
            while index < len(cells):
                cell = cells[index]
                if time.monotonic() - start > self.notebook_timeout:
                    for rest in cells[index:]:
                        self._mark(rest, NOTEBOOK_TIMEOUT, f"the notebook ran longer than {self.notebook_timeout} s "
                                                            "in total; this cell was not run")
                    break
                if index in skipped:
                    index += 1
                    continue
                # a tenth of the limit in (1 s at most): a timed-out cell is measured over 90% of its time
                sched = SchedSnapshot(self._kernel_pid(), min(1.0, (self.timeout or 10) / 10))
                self._sched = sched
                starved = False
                try:
                    self._asked_exit = False
                    self._intake.pop(index, None)
                    self._taken.pop(index, None)
                    self._noted.discard(index)
                    try:
                        self.preprocess_cell(cell, resources, index)
                    finally:
                        sched.stop()
                        self._sched = None
                    if self._asked_exit:
                        raise DeadKernelError("exit() called")
                    if index not in retried and any(
                            o.get("output_type") == "error" and o.get("ename") == "KeyboardInterrupt"
                            for o in cell.get("outputs", [])) and (
                            self._instructor_cell(cell) or self._starved(sched)):
                        raise CellTimeoutError("a cell was interrupted at the per-cell timeout on a busy machine")
                except (DeadKernelError, CellTimeoutError) as err:
                    if isinstance(err, CellTimeoutError) and not self._asked_exit:
                        starved = self._starved(sched)
                    if isinstance(err, CellTimeoutError) and not self._asked_exit and index not in retried \
                            and (self._instructor_cell(cell) or starved):
                        # an instructor's cell (setup) that timed out, or, where run-queue waits are not
                        # reported, a cell whose kernel had under STARVED_SHARE of a CPU: the grader's
                        # slowness (a busy machine, a slow import), not the student's; restart, replay,
                        # run it once more with more time
                        retried.add(index)
                        if self._retry_slow_cell(cell, resources, index, killers):
                            index += 1
                            continue
                    killers.add(index)
                    if self._asked_exit:
                        self._asked_exit = False
                        self._mark(cell, KERNEL_DIED, "this cell called exit() or quit(), which stops the kernel; "
                                                       "the cells after it ran in a restarted kernel")
                    elif isinstance(err, CellTimeoutError):
                        self._mark(cell, CELL_TIMEOUT, timeout_message(self.timeout) + "; it did not stop "
                                   "when interrupted, so the kernel was restarted")
                    else:
                        self._mark(cell, KERNEL_DIED, "the kernel died while running this cell (os._exit, a "
                                                       "crash, or the memory/process limit); the cells after it "
                                                       "ran in a restarted kernel")
                    if len(killers) > self.max_restarts:
                        for rest in cells[index + 1:]:
                            self._mark(rest, KERNEL_DIED, "too many kernel deaths; this cell was not run")
                        break
                    try:
                        self._restart_and_replay(index, killers)
                    except (DeadKernelError, CellTimeoutError):
                        for rest in cells[index + 1:]:
                            self._mark(rest, KERNEL_DIED, "the kernel died again while re-running earlier cells; "
                                                           "this cell was not run")
                        break
                index += 1
        for cell in self.nb.cells:
            stable_outputs(cell)
        self.set_widgets_metadata()
        return self.nb, self.resources


class BoundOutputs(Preprocessor):
    """Bound the outputs a graded notebook keeps: per cell and per notebook, every kind, with a note.

    Runs after the verifier (which reads and strips the check records) and after nbgrader's
    LimitOutput (lines). Streams are cut, rich outputs (images, HTML, JSON) larger than what is
    left are replaced by a note, errors are shortened but always kept (an error is what scores
    a test 0: dropping one could raise a grade). Check records are left alone.
    """

    enabled = Bool(True)
    cell_bytes = Integer(_env_int("COURSE_OUTPUT_CELL_BYTES", 500_000), help="output bytes one cell keeps").tag(config=True)
    notebook_bytes = Integer(_env_int("COURSE_OUTPUT_NOTEBOOK_BYTES", 2_000_000),
                             help="output bytes a whole notebook keeps").tag(config=True)
    error_bytes = Integer(20_000, help="bytes one error output (value and traceback) keeps").tag(config=True)

    def preprocess(self, nb, resources):
        self._left = self.notebook_bytes
        return super().preprocess(nb, resources)

    def _shorten_error(self, out) -> bool:
        if output_bytes(out) <= self.error_bytes:
            return False
        half = self.error_bytes // 2
        evalue = str(out.get("evalue", ""))
        if len(evalue) > half:
            out["evalue"] = evalue[:half] + " ... [trimmed]"
        tb, kept, size = list(out.get("traceback") or []), [], 0
        for line in tb[-20:]:
            line = str(line)[:half // 4]
            size += len(line)
            if size > half:
                break
            kept.append(line)
        out["traceback"] = kept or [f"{out.get('ename', 'Error')}: {out['evalue']}"]
        return True

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        budget = max(0, min(self.cell_bytes, self._left))
        used, trimmed, kept = 0, 0, []
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "display_data" and RECORD_MIME in out.get("data", {}):
                kept.append(out)
                continue
            if kind == "display_data" and str(out.get("data", {}).get("text/plain", "")).startswith(TRIM_NOTE):
                continue  # the intake's note: replaced by this one
            if kind == "error":
                trimmed += self._shorten_error(out)
                used += output_bytes(out)
                kept.append(out)
                continue
            size = output_bytes(out)
            if used + size <= budget:
                used += size
                kept.append(out)
                continue
            trimmed += 1
            if kind == "stream":
                room = max(0, budget - used)
                text = str(out.get("text", ""))
                if room > 200:
                    out["text"] = text.encode("utf-8", "replace")[:room].decode("utf-8", "ignore") + "\n"
                    used += output_bytes(out)
                    kept.append(out)
            # rich output that does not fit: dropped (the note below says so)
        if trimmed or any(str(o.get("data", {}).get("text/plain", "")).startswith(TRIM_NOTE)
                          for o in cell.get("outputs", []) if o.get("output_type") == "display_data"):
            kept.append(trim_note(f"this cell's output was cut to {budget:,} bytes (a graded cell keeps at most "
                                  f"{self.cell_bytes:,} bytes, a notebook {self.notebook_bytes:,}); "
                                  "what was cut does not change the score"))
        cell.outputs = kept
        self._left -= used
        return cell, resources


LimitRichOutput = BoundOutputs  # the old name, for configurations that still use it
