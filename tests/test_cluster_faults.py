"""Cheap checks of issue 61's pieces (grading/cluster.py, grading/progress.py) without a class run: a killed
worker's private folder is removed by the next worker and a live one's is not; the progress of a run in a log
is plain lines, per assignment from its own first submission; a grading task that raised says so."""
import io
import os
import subprocess
import time
import sys

import pytest

from conftest import REPO

sys.path.insert(0, REPO)


def make_folder(tmp, pid, started):
    folder = tmp / f"course-dask-worker-{pid}-abcd"
    (folder / "course" / "submitted" / "s01").mkdir(parents=True)
    (folder / "course" / "submitted" / "s01" / "attention.ipynb").write_text("{}")
    if started is not None:
        (folder / "owner").write_text(f"{pid} {started}\n")
    return folder


def test_a_dead_workers_folder_is_removed_and_a_live_ones_kept(tmp_path):
    from grading import cluster

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live_start = cluster._process_start(live.pid)
        assert live_start is not None
        gone = make_folder(tmp_path, dead.pid, "12345")
        (tmp_path / "x").mkdir()
        gone_no_owner = make_folder(tmp_path / "x", dead.pid, None)  # killed before it wrote its owner file
        kept = make_folder(tmp_path, live.pid, live_start)
        # the pid is alive but it is another process (a reused pid): its start time differs, so stale
        reused = tmp_path / f"course-dask-worker-{live.pid}-efgh"
        reused.mkdir()
        (reused / "owner").write_text(f"{live.pid} 1\n")
        other = tmp_path / "course-kernel-lib-zzz"  # not a worker's folder
        other.mkdir()
        removed = cluster.remove_stale_folders(str(tmp_path))
        assert sorted(removed) == sorted([str(gone), str(reused)]), removed
        assert kept.exists() and other.exists() and not gone.exists() and not reused.exists()
        assert cluster.remove_stale_folders(str(tmp_path / "x")) == [str(gone_no_owner)]
    finally:
        live.kill()
        live.wait()


def test_progress_in_a_log_is_plain_lines_per_assignment_from_its_first_start():
    from grading.progress import Progress

    now = [0.0]
    out = io.StringIO()
    p = Progress({"01_attention": 2, "02_masking": 3}, stream=out, clock=lambda: now[0], every=2)
    now[0] = 1.0
    p.started("01_attention")
    now[0] = 3.0
    p.finished("01_attention")
    p.finished("01_attention", failed=True)
    now[0] = 100.0  # 02_masking starts late: its time counts from its own first submission
    p.started("02_masking")
    now[0] = 106.0
    for _ in range(3):
        p.finished("02_masking")
    p.close()
    lines = out.getvalue().splitlines()
    assert lines == ["[progress] 01_attention: 2 of 2 graded in 2.0 s, 1 failed",
                     "[progress] 2 of 5 graded, 1 failed, 3.0 s, about 4.5 s left",
                     "[progress] 4 of 5 graded, 1 failed, 1 min 46 s, about 26.5 s left",
                     "[progress] 02_masking: 3 of 3 graded in 6.0 s",
                     "[progress] 5 of 5 graded, 1 failed, 1 min 46 s"], lines
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_a_task_that_raised_on_every_try_says_so_not_killed():
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    from grading import cluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as lc, \
            Client(lc) as client:
        future = client.submit(cluster.grade_submission, {"no": "assignment"}, retries=0)
        with pytest.raises(KeyError) as err:
            future.result()
        text = cluster.task_failure(future, err.value)
    assert text.startswith("the grading task raised on every try"), text
    assert "killed" not in text, text


def test_a_scheduler_whose_environment_differs_is_named_with_what_differs():
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    from grading import cluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as lc, \
            Client(lc) as client:
        mine = cluster.fingerprint()
        assert cluster.check_scheduler(client, mine)["course"] == mine["course"]
        with pytest.raises(cluster.ClusterError) as err:
            cluster.check_scheduler(client, dict(mine, course="0000", dask="2001.1"))
    text = str(err.value)
    assert "the Dask scheduler" in text and "nothing was graded" in text, text
    assert f"course: scheduler has {mine['course']!r}, the client '0000'" in text, text
    assert f"dask: scheduler has {mine['dask']!r}, the client '2001.1'" in text, text


def test_progress_on_a_terminal_is_one_bar_for_the_run_and_one_per_started_assignment():
    from grading.progress import Progress

    out = io.StringIO()
    p = Progress({"01_attention": 2, "02_masking": 1}, stream=out, tty=True)
    assert p.bar is not None and p.bar.total == 3 and p.bars == {}
    p.started("01_attention")
    assert list(p.bars) == ["01_attention"]  # 02_masking's bar (its clock) starts with its first submission
    p.finished("01_attention")
    p.finished("01_attention", failed=True)
    p.finished("02_masking")
    assert list(p.bars) == ["01_attention", "02_masking"] and p.bar.n == 3
    p.close()
    assert "all" in out.getvalue() and "failed=1" in out.getvalue()


def test_a_task_tried_again_after_it_raised_is_printed():
    """Each try of a grading task announces itself; the command prints the second and later ones."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    from grading import cluster

    lines = []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as lc, \
            Client(lc) as client:
        faults = cluster.FaultReporter(client, {}, lines.append)
        faults.tasks["grade-01_attention-s02_blank-1"] = ("01_attention", "s02_blank")
        future = client.submit(cluster.grade_submission, {"no": "assignment"}, key="grade-01_attention-s02_blank-1",
                               retries=2)
        with pytest.raises(KeyError):
            future.result()
        deadline = time.monotonic() + 30
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        faults.close()
    assert [line.split(" started on")[0] for line in lines] == [
        "[cluster] retried 01_attention/s02_blank: try 2", "[cluster] retried 01_attention/s02_blank: try 3"], lines


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (as the sandbox's IPC folder does)")
def test_a_dead_workers_folder_with_a_kernels_ipc_tmpfs_still_mounted_is_removed(tmp_path):
    """A worker killed while its kernel ran leaves that kernel's IPC tmpfs mounted in its folder
    (grading/kernel/launcher.py bound_ipc_folder): the successor unmounts it, then removes the folder."""
    from grading import cluster
    from grading.kernel import launcher

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = make_folder(tmp_path, dead.pid, "12345")
    ipc = folder / "nbg-ipc-abcd"
    assert launcher.bound_ipc_folder(str(ipc), 65534, 64)
    try:
        assert cluster.mounts_below(str(folder)) == [str(ipc)]
        assert cluster.remove_stale_folders(str(tmp_path)) == [str(folder)]
        assert not folder.exists() and cluster.mounts_below(str(tmp_path)) == []
    finally:
        launcher.release_ipc_folder(str(ipc))
