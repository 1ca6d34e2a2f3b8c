"""Small guards for what several processes share: the suite's shared runs' folders, and the kernelspec every
grading run installs into one environment."""
from __future__ import annotations

import json
import os
import re

from conftest import REPO


def test_every_shared_run_has_a_folder_of_its_own():
    """Two shared runs under one name: the second builder's clean-up deletes the first one's results while other
    workers read them (it happened: lesson 01's three-student set-up and the merged class both named theirs
    "lesson01-class")."""
    named: dict[str, list[str]] = {}
    folder = os.path.join(REPO, "tests")
    for f in sorted(os.listdir(folder)):
        if f.endswith(".py"):
            with open(os.path.join(folder, f), encoding="utf-8") as fh:
                for name in re.findall(r'shared_root\([^)]*\)\)\s*/\s*"([^"]+)"', fh.read()):
                    named.setdefault(name, []).append(f)
    assert len(named) >= 5, named
    twice = {name: files for name, files in named.items() if len(files) > 1}
    assert not twice, f"shared runs with the same folder: {twice}"


def test_the_kernelspec_is_written_in_place_never_removed(tmp_path):
    """jupyter_client's install deletes the kernelspec's folder and copies it again: a grading run starting a kernel
    beside another run's install once found no kernelspec (test_interrupt, in a full suite). The course's install
    leaves the folder in place, rewrites ``kernel.json`` only when it differs (by a rename) and otherwise not at
    all."""
    from grading.kernel import launcher

    folder = launcher.install_kernelspec(prefix=str(tmp_path))
    assert folder == os.path.join(str(tmp_path), "share", "jupyter", "kernels", launcher.KERNEL_NAME)
    path = os.path.join(folder, "kernel.json")
    with open(path) as fh:
        assert json.load(fh) == launcher.kernelspec()
    inode, stamp = os.stat(folder).st_ino, os.stat(path).st_mtime_ns
    assert launcher.install_kernelspec(prefix=str(tmp_path)) == folder
    assert os.stat(path).st_mtime_ns == stamp, "an up-to-date kernel.json was written again"
    with open(path, "w") as fh:  # a stale one (an older launcher's) is replaced
        json.dump({"argv": ["python", "grading/sandbox.py"]}, fh)
    stale_inode = os.stat(path).st_ino
    launcher.install_kernelspec(prefix=str(tmp_path))
    with open(path) as fh:
        assert json.load(fh) == launcher.kernelspec()
    assert os.stat(path).st_ino != stale_inode, "kernel.json was rewritten in place, not renamed over"
    assert os.stat(folder).st_ino == inode, "the folder was removed and made again"
    assert os.listdir(folder) == ["kernel.json"], "a temporary file was left behind"
