"""Issue 62 item 3: a contributor's loop over the checks and the references (``pytest tests/test_checks_attention.py``)
builds no grading kernel edition and executes no notebook; the files that start kernels are the ones that get it."""
import glob
import os

import conftest
from conftest import REPO

FAST = sorted(glob.glob(os.path.join(REPO, "tests", "test_checks_*.py")))


def test_there_are_checks_test_files():
    assert len(FAST) >= 10, FAST


def test_no_checks_test_file_builds_the_kernel_edition_or_runs_a_notebook():
    slow = []
    for path in FAST:
        text = open(path, encoding="utf-8").read()
        if conftest._starts_kernels(path) or "nbclient" in text or "nbconvert" in text:
            slow.append(os.path.basename(path))
    assert not slow, f"these checks test files start kernels, grading runs or notebooks: {slow}"


def test_a_file_that_starts_sandboxed_kernels_gets_the_edition():
    for name in ("test_adversarial.py", "test_kernel_allowlist.py", "test_real_class.py"):
        assert conftest._starts_kernels(os.path.join(REPO, "tests", name)), name
