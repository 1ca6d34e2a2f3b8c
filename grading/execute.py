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
"""
from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Integer


def error_output(ename: str, evalue: str):
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


class FreshIPCKernelManager(AsyncKernelManager):
    """A kernel manager whose IPC sockets live in a folder of their own, made for each kernel.

    jupyter_client numbers IPC sockets from 1 upwards under one prefix; a kernel
    started right after another (or by a second worker) could reuse a socket path
    a dying kernel still holds ("Invalid Signature"). A fresh folder per kernel
    rules that out; a restart keeps it, so connected clients reconnect.
    """

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

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and self._own_ipc_dir:
            shutil.rmtree(self._own_ipc_dir, ignore_errors=True)
            self._own_ipc_dir = None

    cleanup_resources = _async_cleanup_resources


class ResilientExecute(Execute):
    notebook_timeout = Integer(600, help="wall-clock seconds for a whole notebook").tag(config=True)
    max_restarts = Integer(3, help="kernel restarts allowed per notebook").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs["kernel_manager_class"] = FreshIPCKernelManager
        super().__init__(*args, **kwargs)

    _asked_exit = False

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
        run_sync(self.km.restart_kernel)(now=True)
        run_sync(self.kc.wait_for_ready)(timeout=self.startup_timeout)
        for j in range(upto):
            cell = self.nb.cells[j]
            if cell.cell_type != "code" or j in skip:
                continue
            self.execute_cell(copy.deepcopy(cell), j, store_history=False)  # outputs already recorded

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        start = time.monotonic()
        killers: set[int] = set()
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
                        self._mark(rest, "NotebookTimeout", f"the notebook ran longer than {self.notebook_timeout} s "
                                                            "in total; this cell was not run")
                    break
                try:
                    self._asked_exit = False
                    self.preprocess_cell(cell, resources, index)
                    if self._asked_exit:
                        raise DeadKernelError("exit() called")
                except (DeadKernelError, CellTimeoutError) as err:
                    killers.add(index)
                    if self._asked_exit:
                        self._asked_exit = False
                        self._mark(cell, "KernelDied", "this cell called exit() or quit(), which stops the kernel; "
                                                       "the cells after it ran in a restarted kernel")
                    elif isinstance(err, CellTimeoutError):
                        self._mark(cell, "CellTimeoutError", f"this cell ran longer than {self.timeout} s and did "
                                                             "not stop when interrupted; the kernel was restarted")
                    else:
                        self._mark(cell, "KernelDied", "the kernel died while running this cell (os._exit, a "
                                                       "crash, or the memory/process limit); the cells after it "
                                                       "ran in a restarted kernel")
                    if len(killers) > self.max_restarts:
                        for rest in cells[index + 1:]:
                            self._mark(rest, "KernelDied", "too many kernel deaths; this cell was not run")
                        break
                    try:
                        self._restart_and_replay(index, killers)
                    except (DeadKernelError, CellTimeoutError):
                        for rest in cells[index + 1:]:
                            self._mark(rest, "KernelDied", "the kernel died again while re-running earlier cells; "
                                                           "this cell was not run")
                        break
                index += 1
        self.set_widgets_metadata()
        return self.nb, self.resources


class LimitRichOutput(Preprocessor):
    """Replace any rich output (image, HTML, JSON) larger than ``max_bytes`` with a short note.

    nbgrader's LimitOutput bounds printed lines and tracebacks only; a 40 MB image
    would otherwise end up in the gradebook's notebook and the student's feedback.
    """

    enabled = Bool(True)
    max_bytes = Integer(1_000_000).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") in ("display_data", "execute_result"):
                size = sum(len(v) if isinstance(v, str) else len(str(v)) for v in out.get("data", {}).values())
                if size > self.max_bytes:
                    out["data"] = {"text/plain": f"[output of {size:,} characters removed: larger than the "
                                                 f"{self.max_bytes:,} allowed in a graded notebook]"}
                    out["metadata"] = {}
        return cell, resources
