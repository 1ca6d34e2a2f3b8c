"""grading/kernel/polling.py: a wait for a kernel's message is cut into polls of at most SLICE seconds (a missed
wake-up costs one slice, not the cell's whole limit), and still ends with Empty exactly when its timeout passes.
Every nbclient run of the course and of the suite goes through it."""
import asyncio
import ast
import os
import time
from queue import Empty

import pytest
from jupyter_client.channels import AsyncZMQSocketChannel

from conftest import REPO
from grading.kernel import polling


class Script:
    """Stands in for one zmq poll per call: records the timeout asked for, and answers from ``answers``
    (Empty after sleeping that timeout, as a poll that saw nothing; or the message)."""

    def __init__(self, answers):
        self.answers, self.asked = list(answers), []

    async def poll(self, timeout=None):
        self.asked.append(timeout)
        answer = self.answers.pop(0) if self.answers else Empty
        if answer is Empty:
            await asyncio.sleep(timeout or 0)
            raise Empty
        return answer


@pytest.fixture
def script(monkeypatch):
    def make(answers):
        fake = Script(answers)

        async def get_msg(channel, timeout=None):
            return await fake.poll(timeout)

        monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", get_msg)
        return fake
    return make


def channel():
    return polling.SlicedPollChannel.__new__(polling.SlicedPollChannel)  # get_msg needs no socket here


def test_a_message_that_a_poll_missed_comes_within_a_slice_of_the_next(script, monkeypatch):
    monkeypatch.setattr(polling, "SLICE", 0.02)
    fake = script([Empty, Empty, {"msg": "reply"}])
    t0 = time.monotonic()
    assert asyncio.run(channel().get_msg(timeout=900)) == {"msg": "reply"}
    assert time.monotonic() - t0 < 5, "the wait did not return within a few slices"
    assert len(fake.asked) == 3 and all(0 <= t <= 0.02 for t in fake.asked), \
        f"each poll should wait at most one slice (0.02 s), asked {fake.asked}"


def test_the_timeout_still_ends_the_wait_with_empty(script, monkeypatch):
    monkeypatch.setattr(polling, "SLICE", 0.05)
    fake = script([])
    t0 = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(channel().get_msg(timeout=0.3))
    took = time.monotonic() - t0
    assert 0.29 <= took < 3, f"Empty should come when the 0.3 s timeout passes, came after {took:.2f} s"
    assert len(fake.asked) >= 6 and max(fake.asked) <= 0.05, fake.asked


def test_no_timeout_waits_in_slices_until_the_message(script, monkeypatch):
    monkeypatch.setattr(polling, "SLICE", 0.01)
    fake = script([Empty] * 4 + [{"msg": "late"}])
    assert asyncio.run(channel().get_msg(timeout=None)) == {"msg": "late"}
    assert fake.asked == [0.01] * 5, fake.asked


def test_a_zero_timeout_polls_once_without_waiting(script):
    fake = script([])
    with pytest.raises(Empty):
        asyncio.run(channel().get_msg(timeout=0))
    assert fake.asked == [0.0], fake.asked


def test_the_client_polls_in_slices_on_every_channel_that_waits():
    client = polling.SlicedPollClient
    for name in ("shell", "iopub", "stdin", "control"):
        assert issubclass(getattr(client, f"{name}_channel_class").default_value, polling.SlicedPollChannel), name
    from grading.kernel.client import FreshIPCKernelManager

    assert issubclass(FreshIPCKernelManager.client_factory.default_value, polling.SlicedPollClient), \
        "the grader's kernels should poll in slices"


def test_the_config_hands_out_the_sliced_client():
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(config=polling.config())
    assert km.client_factory is polling.SlicedPollClient, km.client_factory
    assert isinstance(km.client(), polling.SlicedPollClient)


def _notebook_clients(path):
    """The calls ``NotebookClient(...)`` in a file, each with whether it passes ``config=``."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "NotebookClient":
            yield node.lineno, any(k.arg == "config" for k in node.keywords)


def test_every_notebook_client_of_the_course_and_the_suite_is_given_the_sliced_client():
    """Each file that makes a NotebookClient passes a config, and names the sliced client (directly, through
    ``polling.config()`` or through tests/conftest.py's ``ipc_config``)."""
    found, bad = 0, []
    for top in ("grading", "tests"):
        for root, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", "demo_class")]
            for f in files:
                if not f.endswith(".py") or f == os.path.basename(__file__):
                    continue
                path = os.path.join(root, f)
                calls = list(_notebook_clients(path))
                if not calls:
                    continue
                found += len(calls)
                text = open(path, encoding="utf-8").read()
                names_it = any(name in text for name in ("CLIENT_FACTORY", "polling.config()", "ipc_config()"))
                bad += [f"{os.path.relpath(path, REPO)}:{line}" for line, config in calls if not (config and names_it)]
    assert found >= 4, f"found {found} NotebookClient calls: the scan is broken"
    assert not bad, f"NotebookClient made without the sliced client (grading/kernel/polling.py): {bad}"
