"""The grader's integrity scan in the visible tests (issue 65 item 4): what grading will zero says so in JupyterLab.

One scan (``course_lib.checks.scan``, shipped with the students' edition; ``grading.integrity`` imports it):
the visible check reads the code the kernel ran as the grader reads the submission, and fails with the finding
before the notebook is handed in. A code-object copy that computes the right answer used to pass the visible test
and then lose that test and every later one in grading.
"""
import json
import os

import nbformat
import pytest

from conftest import NOTEBOOKS, ipc_config, source_notebooks
from course_lib.checks import scan

CODE_COPY = '''import types


def _mine(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


softmax = types.FunctionType(_mine.__code__, globals(), "softmax", (-1,))
'''


def _cells(path):
    with open(path, encoding="utf-8") as fh:
        return ["".join(c["source"]) for c in json.load(fh)["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("assignment, path", source_notebooks(), ids=[a for a, _ in source_notebooks()])
def test_the_instructors_notebook_run_as_written_has_no_finding(assignment, path):
    assert scan.kernel_findings(assignment, _cells(path)) == []


@pytest.mark.parametrize("assignment, path", source_notebooks(), ids=[a for a, _ in source_notebooks()])
def test_the_instructors_answers_typed_by_a_student_have_no_finding(assignment, path):
    """The answer cells differ from the release (a student's): read in full, as the grader reads them."""
    with open(path, encoding="utf-8") as fh:
        cells = [c for c in json.load(fh)["cells"] if c["cell_type"] == "code"]
    history = ["".join(c["source"]) + ("\n# mine" if c["metadata"].get("nbgrader", {}).get("solution") else "")
               for c in cells]
    assert scan.kernel_findings(assignment, history) == []


def test_a_code_object_copy_is_found_in_the_kernels_history():
    cells = _cells(os.path.join(NOTEBOOKS, "01_attention", "attention.ipynb"))
    found = scan.kernel_findings("01_attention", cells[:2] + [CODE_COPY])
    assert any("rewrites function code" in f for f in found), found
    assert all("In[2]" in f for f in found), found


def test_the_grader_reads_the_same_scan():
    """grading.integrity's scan is this module's (one implementation, not a copy)."""
    from grading import integrity

    assert integrity.scan_code is scan.scan_code
    assert integrity.neutralise_habits is scan.neutralise_habits


def test_the_visible_test_says_what_grading_will_zero():
    """Lesson 01 in a kernel, softmax answered by a code-object copy of a right function: the visible test fails
    with the integrity finding (it passed before: the answer is right)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = os.path.join(NOTEBOOKS, "01_attention", "attention.ipynb")
    nb = nbformat.read(path, as_version=4)
    keep = []
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid == "setup":
            keep.append(cell)
        elif gid == "softmax_impl":
            cell.source = CODE_COPY
            keep.append(cell)
        elif gid == "softmax_visible":
            keep.append(cell)
            break
    nb.cells = keep
    client = NotebookClient(nb, timeout=120, kernel_name="python3", config=ipc_config(),
                            resources={"metadata": {"path": os.path.dirname(path)}})
    with pytest.raises(CellExecutionError) as err:
        client.execute()
    text = " ".join(str(err.value).split())  # the teacher's note wraps lines
    assert "IntegrityError" in text and "rewrites function code" in text, text[-2000:]
    assert "every test after that cell score 0" in text
