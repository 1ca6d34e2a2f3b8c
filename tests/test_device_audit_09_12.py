"""The device audit of lessons 09-12 (see tests/test_device_audit.py; a file of its own so that
pytest-xdist runs it beside the first half)."""
import pytest

from test_device_audit import assert_runs_on_the_virtual_gpu, notebooks

LATE = notebooks(9, 12)


@pytest.mark.slow
@pytest.mark.parametrize("notebook", LATE, ids=[p.parent.name for p in LATE])
def test_notebook_runs_on_the_virtual_gpu(notebook, tmp_path):
    assert_runs_on_the_virtual_gpu(notebook, tmp_path)
