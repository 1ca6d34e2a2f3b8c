"""Issue 18: a failed check reads like a teacher's note in the notebook (IPython's rendering).

A wrong answer's visible test shows the message, whole and wrapped, and no frame from
inside ``course_lib.checks``; when the student's code raised, their own frames stay.
"""
import os
import re

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ipc_config
from course_lib.checks import teacher_note

ANSI = re.compile(r"\x1b\[[0-9;]*m")


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_cell() -> str:
    """Lesson 01's own setup cell (it imports the checks): a cell of the notebook as released, so the visible
    tests' integrity scan (course_lib.checks.scan) reads it as the instructor's, as in JupyterLab."""
    nb = nbformat.read(os.path.join(REPO, "notebooks", "01_attention", "attention.ipynb"), as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code" and "from course_lib import checks" in c.source)


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(_setup_cell()),
        nbformat.v4.new_code_cell("def scaled_dot_product_attention(q, k, v, mask=None):\n"
                                  "    s = q @ k.T\n"
                                  "    w = np.exp(s - s.max(-1, keepdims=True))\n"
                                  "    w = w / w.sum(-1, keepdims=True)\n"
                                  "    return w @ v, w"),
        nbformat.v4.new_code_cell("checks.attention.check_attention_numpy(scaled_dot_product_attention)"),
        nbformat.v4.new_code_cell("def softmax(x, axis=-1):\n    return np.exp(x) / undefined_total"),
        nbformat.v4.new_code_cell("checks.attention.check_softmax(softmax)"),
    ]
    env_before = os.environ.get("COURSE_CHECK_MODE")
    os.environ["COURSE_CHECK_MODE"] = "live"
    try:
        client = NotebookClient(nb, config=ipc_config(), kernel_name="python3", allow_errors=True, timeout=120)
        client.execute()
    finally:
        if env_before is None:
            os.environ.pop("COURSE_CHECK_MODE", None)
        else:
            os.environ["COURSE_CHECK_MODE"] = env_before
    return nb


def _error_text(cell) -> str:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert errors, f"the cell did not fail: {cell.source}"
    return ANSI.sub("", "\n".join(errors[-1].traceback))


def test_a_misconception_is_the_message_alone(executed):
    text = _error_text(executed.cells[2])
    assert "likely misconception 'missing scaling'" in text
    assert "course_lib/checks" not in text and "core.py" not in text, text
    assert all(len(line) <= 110 for line in text.splitlines()), "the message is not wrapped:\n" + text


def test_a_crash_keeps_the_students_frames_and_only_those(executed):
    text = _error_text(executed.cells[4])
    assert "Your code raised NameError here" in text and "undefined_total" in text, text
    assert "your notebook cell" in text
    assert "course_lib/checks" not in text, text


def test_teacher_note_wraps_and_keeps_every_word():
    err = AssertionError("softmax on input 'a long input label': " + "word " * 60)
    lines = teacher_note(err, width=60)
    assert all(len(line) <= 64 for line in lines)
    assert " ".join(" ".join(lines).split()) == " ".join(f"AssertionError: {err}".split())
