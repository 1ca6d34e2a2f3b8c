"""A tensor on the wrong device is caught on a CPU-only machine (issue: the student's machine).

tests/device_audit.py gives the CPU a virtual CUDA device with CUDA's device rule; this file tests
the audit itself and gpu_smoke.py's use of it (lesson 05 as it was before its device fix must fail where a
GPU failed). Every lesson as it is now runs under the audit in the bundle tests (tests/bundle_fixtures.py:
one run shows both that the students' bundle works and that the lesson runs on a GPU unchanged)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from device_audit import DeviceAudit

SMOKE = os.path.join(REPO, "tests", "benchmarks", "gpu_smoke.py")
MIXED = "Expected all tensors to be on the same device"


def test_the_audit_raises_where_cuda_would_and_only_there():
    with DeviceAudit():
        assert torch.cuda.is_available()
        device = torch.device("cuda")
        emb = torch.nn.Embedding(10, 4).to(device)
        assert emb.weight.device.type == "cuda" and emb.weight.is_cuda
        ids = torch.tensor([[1, 2, 3]])                      # made without a device: the CPU
        with pytest.raises(RuntimeError, match=MIXED):
            emb(ids)
        emb(ids.to(device))                                  # moved: fine
        with pytest.raises(RuntimeError, match=MIXED):       # the original stays on the CPU
            emb(ids)
        x = torch.randn(3, 4, device=device)
        with pytest.raises(RuntimeError, match=MIXED):
            x + torch.arange(4)
        x + torch.arange(4, device=x.device)
        x * torch.tensor(2.0)                                # a 0-dim CPU tensor mixes, as on CUDA
        x[torch.tensor([0, 2])]                              # CPU indices into a CUDA tensor: allowed
        assert x.cpu().device.type == "cpu" and x.device.type == "cuda"
        x.cpu().numpy()
        lin = torch.nn.Linear(4, 2).to(device)
        opt = torch.optim.Adam(lin.parameters())
        lin(x).pow(2).mean().backward()                      # gradients the audit never saw made
        opt.step()
        with torch.random.fork_rng():
            torch.manual_seed(0)
    assert not torch.cuda.is_available() or torch.version.cuda  # restored on exit


def _audit_notebook(notebook: pathlib.Path, tmp_path, folder: pathlib.Path | None = None) -> dict:
    """Run the notebook's code cells under the audit (tests/benchmarks/gpu_smoke.py's runner), in
    ``folder`` (default: the notebook's own)."""
    result = tmp_path / "result.json"
    env = dict(os.environ, COURSE_DEVICE_AUDIT="1", MPLBACKEND="Agg", TQDM_DISABLE="1",
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, SMOKE, "--child", str(notebook), "--result", str(result)],
                   cwd=folder or notebook.parent, env=env, check=True, capture_output=True, timeout=900)
    return json.loads(result.read_text())


def _problems(result: dict) -> list:
    return [(c["cell"], c["status"], c.get("why", "")) for c in result["cells"] if c["status"] not in ("ok", "skip")]


def revert_lesson_05_device_fix(nb: dict) -> int:
    """Lesson 05's cell that crashed on an H100 ('index is on cpu, different from other tensors on
    cuda:0'), put back as it was before commit 40e86a5 (its inputs never moved to the model's device),
    in the notebook JSON ``nb``: the number of cells changed (1)."""
    reverted = 0
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "x_ids, x_keep = ids_test[i:i + 1].to(device)" in src:
            src = "\n".join(line for line in src.split("\n") if not line.startswith("x_ids, x_keep = "))
            src = src.replace("(x_ids, x_keep)", "(ids_test[i:i + 1], keep_test[i:i + 1])")
            cell["source"], reverted = src, reverted + 1
    return reverted


@pytest.mark.slow
def test_lesson_05_before_its_device_fix_fails_under_the_audit(tmp_path):
    """gpu_smoke.py's audit (README: --audit-devices) finds the bug a GPU found."""
    nb = json.loads((pathlib.Path(REPO) / "notebooks" / "05_blocks" / "blocks.ipynb").read_text())
    assert revert_lesson_05_device_fix(nb) == 1, "the fixed cell of lesson 05 was not found: update this test"
    old = tmp_path / "blocks_before_fix.ipynb"
    old.write_text(json.dumps(nb))
    problems = _problems(_audit_notebook(old, tmp_path, pathlib.Path(REPO) / "notebooks" / "05_blocks"))
    assert len(problems) == 1 and problems[0][1] == "FAIL" and MIXED in problems[0][2], problems


def notebooks(first: int, last: int) -> list:
    """The lesson notebooks first..last (by number)."""
    found = sorted(pathlib.Path(REPO).glob("notebooks/[0-9][0-9]_*/*.ipynb"))
    return [p for p in found if first <= int(p.parent.name[:2]) <= last]


def test_every_lesson_is_audited():
    """Every lesson runs under the audit in the bundle tests (tests/bundle_fixtures.check_lesson: the
    students' bundle, filled with the solutions, on a virtual CUDA device; test_bundle_lessons_a.py shows
    that run catches lesson 05's old bug)."""
    import inspect

    import bundle_fixtures

    assert bundle_fixtures.LESSONS == [p.parent.name for p in notebooks(0, 99)]
    assert "audit_devices=True" in inspect.getsource(bundle_fixtures.check_lesson)
