"""A kernel client that never waits out a whole timeout for a message that has already arrived.

jupyter_client's asyncio channels wait for a message with one ``zmq.asyncio`` poll of the whole timeout (for a
cell, nbclient's per-cell limit). That poll is woken by the socket's file descriptor, which ZeroMQ signals on an
edge; when the wake-up is missed, the poll sleeps until its timeout, then looks once more without waiting,
finds the reply and returns it as if nothing happened (pyzmq's ``_AsyncPoller.poll``). Nothing fails: the run is
only as slow as its limit. That is the signature of the suite's slowest runs (a lesson 01 site build whose cells
all ran within 7 s returned after 910 s, its limit being 900 s, with no error; twice in two days, both in a full suite run).

Here every wait is cut into polls of at most :data:`SLICE` seconds, each ending with that same look, so a
missed wake-up costs at most a slice; the total timeout, and ``Empty`` when it passes, are unchanged. Used by
every nbclient run of the course: the grader's kernels (``grading.kernel.client.PromptReadyClient``), the
rendered site (``grading.site.execute``) and the suite's own executions (``KernelManager.client_factory``).
"""
from __future__ import annotations

import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from traitlets import Type

SLICE = 0.5  # seconds: the longest a missed wake-up can hold a message back


class SlicedPollChannel(AsyncZMQSocketChannel):
    """``get_msg(timeout)`` as jupyter_client's, in polls of at most :data:`SLICE` seconds."""

    async def get_msg(self, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            left = SLICE if deadline is None else min(SLICE, max(0.0, deadline - time.monotonic()))
            try:
                return await super().get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise


class SlicedPollClient(AsyncKernelClient):
    """An asyncio kernel client whose shell, IOPub, stdin and control channels poll in slices."""

    shell_channel_class = Type(SlicedPollChannel)
    iopub_channel_class = Type(SlicedPollChannel)
    stdin_channel_class = Type(SlicedPollChannel)
    control_channel_class = Type(SlicedPollChannel)


CLIENT_FACTORY = f"{__name__}.SlicedPollClient"  # for a traitlets config: c.KernelManager.client_factory


def config():
    """A traitlets config whose kernel managers hand out :class:`SlicedPollClient` (``NotebookClient(config=...)``);
    add the rest (transport, socket folder) to it."""
    from traitlets.config import Config

    cfg = Config()
    cfg.KernelManager.client_factory = CLIENT_FACTORY
    return cfg
