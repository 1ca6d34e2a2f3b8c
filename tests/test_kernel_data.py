"""Issue 57, items 5-7: a kernel's text is data, no careless file stops the class, --resume sees a new grader.

Each test here can fail: it runs the grader's own step on what a hostile or careless submission sends or
leaves, and checks what the grader made of it (a cell's failure, an escaped name, a neutralised CSV cell).
"""
from __future__ import annotations

import errno
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from grading.course import Course

# a cell that sends, on the kernel's IOPub channel and as a reply to the running cell, one message of
# ``msg_type`` with ``content``; PACKED, when given, is the exact JSON text sent as the content
SEND = '''
k = get_ipython().kernel
s = k.session
packed = {packed!r}
orig = s.pack
if packed is not None:
    s.pack = lambda o, orig=orig: packed if isinstance(o, dict) and o.get("x57") else orig(o)
try:
    s.send(k.iopub_socket, {msg_type!r}, {content!r}, parent=k.get_parent())
finally:
    s.pack = orig
print("sent")
'''


def _run(tmp_path, *sources):
    from grading.kernel.client import ResilientExecute

    nb = new_notebook(cells=[new_code_cell(src) for src in sources] + [new_code_cell("print('after', 6 * 7)")])
    nb, _ = ResilientExecute(timeout=30, kernel_name="python3").preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    nbformat.validate(nb)  # what the grader writes is a valid notebook, whatever the kernel sent
    assert nb.cells[-1].outputs[-1].get("text") == "after 42\n", "the rest of the notebook was graded"
    return nb


def _enames(cell):
    return [o.get("ename") for o in cell.outputs if o.get("output_type") == "error"]


def test_execution_count_text_is_dropped_and_never_the_graders_state(tmp_path):
    from grading.failures import KERNEL_MESSAGE

    nb = _run(tmp_path, SEND.format(packed=None, msg_type="execute_result", content={
        "execution_count": "No space left on device", "data": {"text/plain": "x57 shown"}, "metadata": {}}))
    cell = nb.cells[0]
    assert cell.execution_count is None or type(cell.execution_count) is int, cell.execution_count
    assert KERNEL_MESSAGE not in _enames(cell) and any(
        "x57 shown" in str(o.get("data", {})) for o in cell.outputs), cell.outputs


@pytest.mark.parametrize("msg_type,content,packed", [
    ("status", {"x57": 1}, None),  # a status without an execution_state
    ("display_data", {"x57": 1}, b"[" * 200_000 + b"]" * 200_000),  # nested 200,000 deep: not even decodable
    ("comm_open", {"x57": 1, "target_name": "jupyter.widget", "data": {"state": {"_model_name": "OutputModel"}}}, None),
], ids=["status-without-state", "nested-200000", "output-widget-comm"])
def test_a_message_the_grader_cannot_take_is_that_cells_failure(tmp_path, msg_type, content, packed):
    from grading.failures import KERNEL_MESSAGE

    nb = _run(tmp_path, "x = 1", SEND.format(packed=packed, msg_type=msg_type, content=content))
    assert _enames(nb.cells[0]) == [], "the cell before it keeps its result"
    assert KERNEL_MESSAGE in _enames(nb.cells[1]), nb.cells[1].outputs


def test_machine_faults_come_from_errno_never_from_text(tmp_path):
    from grading import failures

    assert failures.fault_of(OSError(errno.ENOSPC, "x")).startswith("the disk is full")
    assert failures.fault_of(OSError(errno.EROFS, "x")).startswith("the course folder is on a read-only")
    assert failures.fault_of(RuntimeError("No space left on device")) is None
    assert failures.fault_of(ValueError("attempt to write a readonly database")) is None
    wrapped = RuntimeError("nbgrader failed")
    wrapped.__cause__ = OSError(errno.EDQUOT, "quota")
    assert failures.fault_of(wrapped).startswith("the disk quota"), "followed through __cause__"
    assert failures.probe_machine(str(tmp_path)) is None, "a writable folder is no fault"
    os.chmod(tmp_path, 0o500)
    try:
        if os.geteuid() != 0:
            assert "Permission denied" in failures.probe_machine(str(tmp_path))
    finally:
        os.chmod(tmp_path, 0o700)


def test_a_log_that_says_disk_full_is_no_grader_fault(tmp_path, monkeypatch):
    """The autograde step failed and its log (which holds the kernel's text) says 'No space left on
    device': the course folder takes writes, so the submission is the student's (not graded, second
    pass), never the grader's failure that stops the run."""
    from grading import worker


    class Api:
        def autograde(self, assignment, student, force, create):
            return {"success": False, "log": "ValidationError: 'No space left on device' is not of type "
                                              "'integer'\nOSError: [Errno 28] No space left on device"}

    result = worker.grade_one(Course(str(tmp_path)), Api(), "01_attention", "eve", feedback=False)
    assert "grader_fault" not in result, result
    assert result["autograde_ok"] is False


def test_resume_grades_again_what_an_older_grader_graded(tmp_path, monkeypatch):
    """Issue 57.7: a result records the grader's and the checks' fingerprint; a change of either (here one
    byte of a copy of grading/verify.py) makes ``--resume`` grade the submission again."""
    import shutil

    from grading import pipeline, worker

    code = tmp_path / "code" / "grading"
    shutil.copytree(os.path.dirname(worker.__file__), code, ignore=shutil.ignore_patterns("__pycache__", "demo"))
    monkeypatch.setattr(worker, "__file__", str(code / "worker.py"))
    course = Course(str(tmp_path / "course"))
    monkeypatch.setattr(worker, "NOTEBOOKS_DIR", str(tmp_path / "source"))
    for folder in ("submitted/ana/01_attention", "autograded/ana/01_attention"):
        (tmp_path / "course" / folder).mkdir(parents=True)
        (tmp_path / "course" / folder / "attention.ipynb").write_text("{}")
    (tmp_path / "source" / "01_attention").mkdir(parents=True)
    (tmp_path / "source" / "01_attention" / "attention.ipynb").write_text("{}")
    results = tmp_path / "course" / "logs" / "results" / "01_attention"
    results.mkdir(parents=True)

    def record(**extra):
        hashes = worker.content_hashes(course, "01_attention", "ana")
        (results / "ana.json").write_text(pipeline.json.dumps({"autograded": True, **hashes, **extra}))

    record()
    assert pipeline._task_done(course, "01_attention", "ana"), "same submission, sources and grader: kept"
    with open(code / "verify.py", "a") as fh:
        fh.write("\n# a door closed\n")
    assert not pipeline._task_done(course, "01_attention", "ana"), "a changed grader must grade again"
    record(grader_hash=None)
    assert not pipeline._task_done(course, "01_attention", "ana"), \
        "a result of a grader before issue 57 is graded again"


# ---------------------------------------------------------------- item 6: no careless file stops the class
FORMULA_IDS = ["=HYPERLINK(\"http://x\",\"x\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]


def _no_formula(path):
    import csv

    with open(path, newline="", encoding="utf-8") as fh:  # strict UTF-8: a lone surrogate would not be here
        rows = list(csv.reader(fh))
    bad = [cell for row in rows for cell in row if cell[:1] in ("=", "+", "-", "@", "\t", "\r")
           and not cell.replace(".", "", 1).lstrip("+-").isdigit()]
    assert not bad, f"cells a spreadsheet would run as formulas: {bad}"
    return rows


def test_safe_text_and_safe_cell():
    from grading.csvsafe import safe_cell, safe_text

    latin1 = os.fsdecode(b"caf\xe9.ipynb")  # a name from another system, as os.listdir returns it
    assert safe_text(latin1) == "caf\\xe9.ipynb" and safe_text("\ud800x") == "\\ud800x"
    safe_text(latin1).encode("utf-8")
    assert safe_cell("=1+1") == "'=1+1" and safe_cell("@x") == "'@x" and safe_cell("\tx") == "'\tx"
    assert safe_cell("-1.5") == "-1.5" and safe_cell(3.0) == 3.0 and safe_cell("ana") == "ana"


def test_grades_csv_takes_a_latin1_name_and_formula_ids(tmp_path):
    """A status naming a second notebook in Latin-1 bytes (a lone surrogate once decoded) and student ids
    that start a formula: grades.csv is written, in UTF-8, every student's row there with the score they
    earned and no cell a spreadsheet would run."""
    from grading import pipeline

    students = ["ana", *FORMULA_IDS]
    export = tmp_path / "export.csv"
    with open(export, "w", newline="") as fh:
        import csv

        w = csv.writer(fh)
        w.writerow(["assignment", "student_id", "score", "raw_score", "max_score"])
        for i, s in enumerate(students):
            w.writerow(["01_attention", s, f"{i}.0", f"{i}.0", "9.0"])
    extra = os.fsdecode(b"attention-copie-\xe9t\xe9.ipynb")
    statuses = {("01_attention", "ana"): f"graded with problems: extra: {extra}"}
    out = tmp_path / "grades.csv"
    grades = pipeline.write_grades_csv(str(export), students, ["01_attention"], statuses, out=str(out))
    assert grades[("01_attention", "ana")] == (0.0, 9.0) and grades[("01_attention", "@SUM(A1)")] == (4.0, 9.0)
    rows = _no_formula(out)
    assert len(rows) == 1 + len(students)
    assert "attention-copie-\\xe9t\\xe9.ipynb" in rows[1][-1], rows[1]
    assert rows[2][1] == "'" + FORMULA_IDS[0] and rows[2][2] == "1.0", rows[2]


def test_lms_and_similarity_csvs_neutralise_formulas(tmp_path):
    from grading import lms

    roster = {s: {"name": s, "canvas_id": "=1", "sis_user_id": "-x", "sis_login_id": "@a", "section": "+b",
                  "moodle_idnumber": "=2", "email": "=e@x"} for s in FORMULA_IDS}
    grades = {("01_attention", s): 9.0 for s in FORMULA_IDS}
    lms.write_canvas(str(tmp_path / "canvas.csv"), [("01_attention", 9.0)], FORMULA_IDS, grades, roster)
    lms.write_moodle(str(tmp_path / "moodle.csv"), [("01_attention", 9.0)], FORMULA_IDS, grades, roster)
    assert _no_formula(tmp_path / "canvas.csv")[2][0] == "'" + FORMULA_IDS[0]
    _no_formula(tmp_path / "moodle.csv")


def test_an_unparsable_timestamp_grades_undated_with_a_finding(tmp_path):
    from grading import intake, worker

    folder = tmp_path / "submitted" / "ana" / "01_attention"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_bytes(b"le 28 novembre \xe0 midi")
    course = worker._undated_course_directory()()
    assert course.get_existing_timestamp(str(folder)) is None, "graded undated, not stopped"
    findings = intake.intake_class([("01_attention", "ana")], submitted=str(tmp_path / "submitted"),
                                   intake_dir=str(tmp_path / "logs" / "intake"))
    undated = [f for f in findings if f["kind"] == "undated"]
    assert len(undated) == 1 and "timestamp.txt" in undated[0]["fix"], findings
    (folder / "timestamp.txt").write_text("2026-11-28 07:55:00.000000 UTC")
    assert course.get_existing_timestamp(str(folder)).year == 2026
    assert not [f for f in intake.intake_class([("01_attention", "ana")], submitted=str(tmp_path / "submitted"),
                                               intake_dir=str(tmp_path / "logs" / "intake")) if f["kind"] == "undated"]


# ---------------------------------------------------------------- item 4: gradients and freezing measured
def _numpy_attention(q, k, v, mask=None):
    """Right values computed in numpy, then marked requires_grad=True: no gradient reaches q."""
    import numpy as np
    import torch

    from course_lib.judge.attention import _right_softmax

    qn, kn, vn = (t.detach().numpy() for t in (q, k, v))
    s = qn @ np.swapaxes(kn, -1, -2) / np.sqrt(qn.shape[-1])
    if mask is not None:
        s = np.where(np.asarray(mask), s, -np.inf)
    w = _right_softmax(s, axis=-1)
    return torch.tensor(w @ vn, requires_grad=True), torch.tensor(w)


def _hooked_attention(q, k, v, mask=None):
    """The reference's values and graph, with a hook on q that zeroes the gradient reaching it."""
    from course_lib.judge.attention import _right_attention_torch

    if q.requires_grad:
        q.register_hook(lambda g: g * 0)
    return _right_attention_torch(q, k, v, mask) if mask is not None else _right_attention_torch(q, k, v)


def test_requires_grad_on_a_numpy_result_is_no_gradient():
    from course_lib.checks import attention as C

    with pytest.raises(AssertionError, match="gradients must flow back to q"):
        C.check_attention_torch(_numpy_attention)


def test_a_gradient_hook_is_refused_by_the_gradient_check():
    from course_lib.checks import attention as C

    with pytest.raises(AssertionError, match="refused: a gradient hook on q"):
        C.check_attention_torch(_hooked_attention)


def test_layer_norm_made_in_numpy_has_no_gradient():
    import numpy as np
    import torch

    from course_lib.checks import blocks as B

    def numpy_layer_norm(x, weight=None, bias=None, eps=1e-5):
        a = x.detach().numpy()
        y = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + eps)
        if weight is not None:
            y = y * weight.detach().numpy()
        if bias is not None:
            y = y + bias.detach().numpy()
        return torch.tensor(y, requires_grad=True)

    with pytest.raises(AssertionError, match="gradients must flow back to x"):
        B.check_layer_norm(numpy_layer_norm)


def test_a_hook_that_zeroes_gradients_does_not_pass_for_frozen():
    """The encoder's gradients zeroed by hooks instead of requires_grad_(False): the probe trains copies of
    the parameters (no hook runs), so the encoder trains and the check names it."""
    from course_lib.checks import clinical as chk

    def hooked_freeze(model, head="classifier"):
        for name, p in model.named_parameters():
            if not name.startswith(head + "."):
                p.register_hook(lambda g: g * 0)
        for p in getattr(model, head).parameters():
            p.requires_grad_(True)
        return sum(p.numel() for p in getattr(model, head).parameters())

    with pytest.raises(AssertionError, match="requires_grad is wrong|refused: a gradient hook"):
        chk.check_freeze_for_probe(hooked_freeze)


def _record_then_verify(cell: str, **ns) -> tuple[str, str | None]:
    """The kernel's side (record mode: the checks only record) and the verifier's verdict on the records."""
    import json

    from course_lib import checks
    from course_lib.checks import transcript
    from grading import verify

    ns = {"checks": checks, **ns}
    with transcript.using("record") as state:
        try:
            exec(cell, ns)
            kernel = "pass"
        except AssertionError as err:
            kernel = f"fail: {err}"
        calls = json.loads(json.dumps(list(state.calls)))  # what crosses the wire: plain JSON
    return kernel, verify.verify_cell(cell, calls)


@pytest.mark.parametrize("answer,verdict", [
    ("_right_attention_torch", None),
    ("_numpy_attention", "gradients must flow back to q"),
    ("_hooked_attention", "refused: a gradient hook on q"),
], ids=["honest", "numpy-requires-grad", "zeroing-hook"])
def test_the_verifier_judges_the_recorded_gradient(answer, verdict):
    """Graded: the kernel records the gradient autograd gives (or why there is none) and the verifier,
    outside the kernel, compares it with the reference's; the honest answer keeps its pass."""
    from course_lib.judge.attention import _right_attention_torch

    fns = {"_right_attention_torch": _right_attention_torch, "_numpy_attention": _numpy_attention,
           "_hooked_attention": _hooked_attention}
    for cell in ("checks.attention.check_attention_torch(f)\n", "checks.attention.check_attention_torch(f, hidden=True)\n"):
        kernel, got = _record_then_verify(cell, f=fns[answer])
        if verdict is None:
            assert got is None, (kernel, got)
        else:
            assert got is not None and verdict in got, (kernel, got)


@pytest.mark.parametrize("freeze,verdict", [("right", None), ("hooked", "requires_grad is wrong")], ids=["honest", "hooks"])
def test_the_verifier_judges_freezing_measured_on_copies(freeze, verdict):
    from course_lib.judge import clinical as judge

    def hooked(model, head="classifier"):
        for name, p in model.named_parameters():
            if not name.startswith(head + "."):
                p.register_hook(lambda g: g * 0)
        for p in getattr(model, head).parameters():
            p.requires_grad_(True)
        return sum(p.numel() for p in getattr(model, head).parameters())

    f = judge._right_freeze_dot_prefix if freeze == "right" else hooked
    kernel, got = _record_then_verify("checks.clinical.check_freeze_for_probe(f)\n", f=f)
    if verdict is None:
        assert got is None, (kernel, got)
    else:
        assert got is not None and verdict in got, (kernel, got)
