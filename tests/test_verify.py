"""Verdicts decided outside the student's process (grading/verify.py, course_lib/checks/transcript.py).

The "kernel" here is a separate Python process in record mode, as in grading: it runs a
submission's answer and one hostile trick, then a test cell's checks, and prints the
record. The verifier (this process, which never ran the submission's code) replays it.
Each trick makes the kernel's own check pass or its comparison lie; the verdict must be
exactly what the recorded outputs earn.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course_lib.checks import transcript
from grading import verify

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CORRECT = '''
import numpy as np
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))  # a fully -inf slice gives zeros, as promised
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)
'''
WRONG = '''
import numpy as np
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    return x / x.sum()  # not a softmax at all
'''
TEST_CELL = "checks.attention.check_softmax(softmax)\ncheks_done = True\n"
HIDDEN_CELL = "checks.attention.check_softmax(softmax, hidden=True)\n"

# Each trick runs after the answer is defined, before the test cell.
TRICKS = {
    "patch numpy's comparisons": '''
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, **k: np.ones(np.broadcast(a, b).shape, dtype=bool)
''',
    "swap the checker's comparison code through gc": '''
import gc
for obj in gc.get_objects():
    if callable(obj) and getattr(obj, "__name__", "") in ("_is_close", "assert_close", "compare_with_reference"):
        try:
            obj.__code__ = (lambda *a, **k: True).__code__
        except Exception:
            pass
''',
    "objects that compare equal to anything": '''
class Anything(np.ndarray):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
class Whatever:
    shape = (3,)
    def __eq__(self, other): return True
    def __array__(self, dtype=None, copy=None): return np.ones(3) / 3
def softmax(x, axis=-1):
    return Whatever()
''',
    "read the expected value from the checker's frames": '''
import sys
def softmax(x, axis=-1):
    f = sys._getframe(1)
    while f is not None:
        for name in ("expected", "ref_out", "want"):
            if name in f.f_locals:
                return f.f_locals[name]
        f = f.f_back
    return np.zeros_like(np.asarray(x, dtype=float))
''',
    "a trace function that rewrites the checker's locals": '''
import sys
def tracer(frame, event, arg):
    if event == "return" and frame.f_code.co_name in ("_is_close", "isclose_scalar"):
        return None
    return tracer
sys.settrace(tracer)
import course_lib.checks.core as core
core._AssertionError = type("Quiet", (Exception,), {})
''',
    "check functions replaced through an alias": '''
from course_lib import checks as c2
import course_lib.checks.attention as att
att.check_softmax = lambda *a, **k: None
att.compare_with_reference = lambda *a, **k: None
''',
}

KERNEL = '''
import json, sys
from course_lib import checks
from course_lib.checks import transcript
answer, trick, cell = json.loads(sys.stdin.read())
ns = {"checks": checks}
exec(answer, ns)
try:
    exec(trick, ns)
except Exception:
    pass
with transcript.using("record") as state:
    try:
        exec(cell, ns)
        kernel = "pass"
    except BaseException as err:
        kernel = "fail: " + type(err).__name__
    calls = list(state.calls)
sys.settrace(None)
sys.stdout.write("\\nRECORD " + json.dumps({"kernel": kernel, "calls": calls}))
'''


def run_kernel(answer: str, trick: str, cell: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", KERNEL], input=json.dumps([answer, trick, cell]),
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "COURSE_CHECK_MODE": "record"})
    assert "RECORD " in proc.stdout, proc.stderr[-2000:]
    return json.loads(proc.stdout.rsplit("RECORD ", 1)[1])


@pytest.mark.parametrize("trick", sorted(TRICKS))
@pytest.mark.parametrize("cell", [TEST_CELL, HIDDEN_CELL], ids=["visible", "hidden"])
def test_a_wrong_answer_with_a_kernel_trick_fails_outside_the_kernel(trick, cell):
    answer = WRONG if "def softmax" not in TRICKS[trick] else ""
    out = run_kernel(answer, TRICKS[trick], cell)
    verdict = verify.verify_cell(cell, out["calls"])
    assert verdict is not None, f"{trick}: the verifier passed a wrong answer (kernel said {out['kernel']})"


@pytest.mark.parametrize("cell", [TEST_CELL, HIDDEN_CELL], ids=["visible", "hidden"])
def test_a_correct_answer_passes_outside_the_kernel(cell):
    out = run_kernel(CORRECT, "", cell)
    assert out["kernel"] == "pass"
    assert verify.verify_cell(cell, out["calls"]) is None


def test_the_kernel_holds_no_expected_value_in_record_mode():
    out = run_kernel(TRICKS["read the expected value from the checker's frames"], "", TEST_CELL)
    shown = json.dumps(out["calls"])
    assert "PENDING" not in shown or "__unplain__" in shown
    assert verify.verify_cell(TEST_CELL, out["calls"]) is not None


def test_no_record_scores_nothing():
    assert "no recorded output" in verify.verify_cell(TEST_CELL, [])


def test_a_record_for_other_inputs_is_refused():
    out = run_kernel(CORRECT, "", TEST_CELL)
    forged = [dict(c, inputs="0" * 16) for c in out["calls"]]
    assert "does not match input" in verify.verify_cell(TEST_CELL, forged)


def test_a_record_with_a_forbidden_dtype_is_refused():
    out = run_kernel(CORRECT, "", TEST_CELL)
    calls = json.loads(json.dumps(out["calls"]))
    calls[0]["output"]["__ndarray__"]["dtype"] = "|O"
    assert verify.verify_cell(TEST_CELL, calls) is not None


def test_decode_never_runs_code():
    evil = {"__unplain__": "os.system('echo hi')"}
    assert isinstance(transcript.decode(evil), transcript.Unplain)
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(transcript.decode(json.loads(json.dumps(transcript.encode(arr)))), arr)
    nested = (1, [2.5, float("nan")], {"a": np.int64(3), (1, 2): "x"})
    back = transcript.decode(json.loads(json.dumps(transcript.encode(nested))))
    assert back[0] == 1 and back[2][(1, 2)] == "x" and np.isnan(back[1][1])


def test_preprocessor_scores_a_forged_pass_zero_and_strips_records():
    """A cell whose kernel printed success but whose record shows a wrong output gets an error output."""
    out = run_kernel(WRONG, TRICKS["patch numpy's comparisons"], TEST_CELL)
    cell = new_code_cell(TEST_CELL, metadata={"nbgrader": {"grade": True, "grade_id": "softmax_visible",
                                                           "points": 1, "solution": False, "locked": True}})
    cell.outputs = [new_output("stream", name="stdout", text="softmax: visible tests passed\n")]
    cell.outputs += [new_output("display_data", data={transcript.RECORD_MIME: c}) for c in out["calls"]]
    nb = new_notebook(cells=[cell])
    nb, res = verify.VerifyOutsideKernel().preprocess(nb, {})
    outs = nb.cells[0].outputs
    assert not any(transcript.RECORD_MIME in o.get("data", {}) for o in outs)
    assert [o.output_type for o in outs] == ["error"]
    assert res["course_verifier"][0]["grade_id"] == "softmax_visible"
    nbformat.validate(nb)


def test_check_calls_come_from_the_cell_source():
    src = textwrap.dedent('''
        """doc"""
        ### BEGIN HIDDEN TESTS
        checks.attention.check_softmax(softmax, hidden=True)
        checks.attention.check_attention_numpy(scaled_dot_product_attention, hidden=True)
        ### END HIDDEN TESTS
    ''')
    assert verify.check_calls(src) == [("attention", "check_softmax", {"hidden": True}),
                                       ("attention", "check_attention_numpy", {"hidden": True})]


# ---------------------------------------------------------------- feedback: messages are text (issue 33, item 6)
HOSTILE_MESSAGE = ("softmax: yours '\n\n# Fake headline\n\n[link](http://x) ![img](http://x/y.png) "
                   "<script>alert(1)</script> <b>bold</b> $x^2$'")


def _feedback_html(message: str) -> str:
    """The feedback page of a notebook whose one graded test failed with ``message`` (the summary
    and the per-test details), through the course's feedback preprocessors and nbconvert's HTML export."""
    from traitlets.config import Config

    from grading.feedback import FeedbackExporter, FeedbackSummary, HideHiddenTests, SafeOutputs, sanitise

    cell = new_code_cell("checks.attention.check_softmax(softmax)", outputs=[
        new_output("error", ename="AssertionError", evalue=message, traceback=[f"AssertionError: {message}"])])
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "softmax_visible", "points": 1,
                                 "score": 0, "locked": True, "schema_version": 3}
    nb = new_notebook(cells=[cell])
    resources = {}
    for pre in (HideHiddenTests(), FeedbackSummary(), SafeOutputs()):
        nb, resources = pre.preprocess(nb, resources)
    config = Config()
    config.HTMLExporter.sanitize_html = True
    config.HTMLExporter.filters = {"clean_html": sanitise}
    body, _ = FeedbackExporter(config=config).from_notebook_node(nb)  # the exporter grading configures
    return body


def test_verifier_messages_render_as_literal_text_in_the_summary_and_details():
    import html as html_lib

    body = _feedback_html(HOSTILE_MESSAGE)
    for markup in ("<h1", ">Fake headline</h1>", 'href="http://x"', '<img src="http://x/y.png"', "<script>alert",
                   "<b>bold</b>"):
        assert markup not in body, markup
    summary = body[body.index("course-sanitised"):]
    summary = summary[:summary.index("</div>")]
    shown = html_lib.unescape(summary)
    for literal in ("# Fake headline", "[link](http://x)", "![img](http://x/y.png)", "<script>alert(1)</script>",
                    "$x^2$"):
        assert literal in shown, literal  # the characters as written, in the summary
    assert "Fake headline" in body[body.index("</div>"):]  # and in the test's own output below it


def test_feedback_pages_compile_their_templates_once_per_process(monkeypatch):
    """nbgrader makes an exporter per page; the course's exporter keeps the compiled templates (issue 38),
    and the page is the same."""
    import jinja2

    from grading import feedback

    monkeypatch.setattr(feedback, "_COMPILED", feedback._CompiledTemplates())  # as in a new process
    compiled = []
    original = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile",
                        lambda self, *a, **k: compiled.append(a[1] if len(a) > 1 else k.get("name")) or
                        original(self, *a, **k))
    first = _feedback_html("softmax: expected 1.0, got 2.0")
    n_first = len(compiled)
    second = _feedback_html("softmax: expected 1.0, got 2.0")
    import re

    cell_ids = re.compile(r'id="cell-id=[0-9a-f]+"')  # new cells get random ids
    assert cell_ids.sub("", second) == cell_ids.sub("", first)
    assert n_first > 5, compiled
    assert len(compiled) == n_first, compiled[n_first:]  # nothing compiled for the second page
    with open(os.path.join(REPO, "grading", "nbgrader_config.py")) as fh:
        assert 'exporter_class = "grading.feedback.FeedbackExporter"' in fh.read()


# ---------------------------------------------------------------- bounded records and verifier (issue 33, item 4)
def _entry(output) -> dict:
    return {"exercise": "softmax", "label": "x", "inputs": "0" * 16, "output": output}


def test_a_record_over_its_bounds_is_refused_before_decoding():
    deep = 1
    for _ in range(transcript.MAX_RECORD_DEPTH + 5):
        deep = {"__list__": [deep]}
    wide = {"__list__": list(range(transcript.MAX_RECORD_ELEMENTS + 1))}
    long_string = "x" * (transcript.MAX_STRING_CHARS + 1)
    assert "nested more than" in transcript.record_bounds(_entry(deep))
    assert "more than" in transcript.record_bounds(_entry(wide)) and "values" in transcript.record_bounds(_entry(wide))
    assert "a string of" in transcript.record_bounds(_entry(long_string))
    assert transcript.record_bounds(_entry({"__list__": list(range(1000))})) is None
    # replayed, each is the test's failure with a note (never a crash of the verifier)
    for output in (deep, wide, long_string):
        with transcript.using("replay", [_entry(output)]):
            with pytest.raises(transcript.RecordError, match="over a record's bounds"):
                transcript.student_call(lambda: None, "softmax", "x", (), {})


def test_keys_built_to_collide_are_refused_in_linear_time():
    """ints n * (2**61 - 1) + 1 all hash to 1: a set of them took the old verifier quadratic time."""
    p = 2 ** 61 - 1
    colliding = [{"__int__": str(p * i + 1)} for i in range(1, 50_001)]
    assert len({hash(int(c["__int__"])) for c in colliding[:100]}) == 1
    out = transcript.decode({"__set__": "set", "items": colliding})
    assert isinstance(out, transcript.Unplain) and "collide" in out.why
    pairs = [[c, 1] for c in colliding]
    out = transcript.decode({"__dict__": pairs})
    assert isinstance(out, transcript.Unplain) and "collide" in out.why
    # plain keys decode as before: strings, small ints, tuples of them
    ok = transcript.decode(transcript.encode({("a", 1): 2, "b": {3, 4}, 5: frozenset({"c"})}))
    assert ok == {("a", 1): 2, "b": {3, 4}, 5: frozenset({"c"})}
    # a key that is not plain data (a list, an array) never reaches a dict
    assert isinstance(transcript.decode({"__dict__": [[{"__list__": [1]}, 1]]}), transcript.Unplain)


def test_strings_and_arrays_decode_by_their_declared_size():
    huge = {"__ndarray__": {"strings": ["x" * 2_000_000] + ["a"] * 1000, "shape": [1001], "dtype": "<U2000000"}}
    with pytest.raises(transcript.RecordError, match="larger than"):
        transcript.decode(huge)
    lying = {"__ndarray__": {"dtype": "<f8", "shape": [10 ** 9], "b64": ""}}
    with pytest.raises(transcript.RecordError, match="larger than"):
        transcript.decode(lying)
    overflow = {"__ndarray__": {"dtype": "<f8", "shape": [2 ** 32, 2 ** 32], "b64": ""}}  # np.prod wraps to 0
    with pytest.raises(transcript.RecordError):
        transcript.decode(overflow)
    small = transcript.encode(np.array(["ab", "c"]))
    assert transcript.decode(small).tolist() == ["ab", "c"]


def test_a_record_that_cannot_be_published_is_a_note_never_dropped():
    lone = "\ud800"
    entry = transcript._publishable(_entry(transcript.safe_encode(np.array([lone, "a"]))))
    assert entry["output"]["__unplain__"] and "Unicode" in entry["output"]["why"]
    entry = transcript._publishable(_entry({"__unplain__": "Evil" + lone}))  # any string the encoder missed
    assert "could not be published" in entry["output"]["why"]
    json.dumps(entry, ensure_ascii=False).encode("utf-8")  # what the kernel sends is valid UTF-8
    raised = transcript._publishable({"exercise": "softmax", "label": "x", "inputs": "0",
                                      "raised": {"message": "bad " + lone, "class": "AssertionError"}})
    assert raised["raised"]["message"] == "bad \\ud800"
    # in a kernel whose display publisher fails, the test fails with a note
    code = textwrap.dedent("""
        import IPython.display, sys
        from IPython.testing.globalipapp import get_ipython
        get_ipython()
        def broken(*a, **k):
            raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")
        IPython.display.publish_display_data = broken
        from course_lib.checks import transcript
        try:
            transcript.publish({"exercise": "softmax", "label": "x", "inputs": "0", "output": 1})
            print("NOT RAISED")
        except transcript.RecordError as err:
            print("NOTE", err)
    """)
    env = dict(os.environ, COURSE_CHECK_MODE="record")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "NOTE softmax: the record of input 'x' could not be published" in proc.stdout, proc.stdout + proc.stderr


def _fake_verify(source, records):
    import time as _t

    if source == "slow":
        while True:
            _t.perf_counter()
    if source == "huge":
        return str(len(bytearray(3 * 1024 ** 3)))
    if source == "crash":
        os.kill(os.getpid(), 9)
    if source == "exit":
        raise SystemExit(7)  # not an Exception: the child's own loop does not catch it
    return None if source == "pass" else f"verdict for {source}"


def test_the_verifier_bounds_each_record_in_time_and_memory(monkeypatch):
    monkeypatch.setattr(verify, "verify_cell", _fake_verify)
    jobs = [(1, "pass", []), (2, "slow", []), (3, "fail", []), (4, "huge", []), (5, "crash", []), (6, "pass", [])]
    out = verify.bounded_verdicts(jobs, cpu_seconds=1, memory_mb=512)
    assert out[1] is None and out[6] is None and out[3] == "verdict for fail"
    assert "more than 1 s of CPU time" in out[2] and "this test scores 0" in out[2]
    assert "more than 512 MiB of memory" in out[4]
    assert "verifier stopped" in out[5]


def test_preprocessor_scores_a_record_over_the_verifier_bounds_zero(monkeypatch):
    monkeypatch.setattr(verify, "verify_cell", _fake_verify)
    monkeypatch.setenv("COURSE_VERIFY_CPU_SECONDS", "1")
    cells = []
    for gid, source in (("a", "pass"), ("b", "slow"), ("c", "pass")):
        cell = new_code_cell(source, metadata={"nbgrader": {"grade": True, "grade_id": gid, "points": 1,
                                                            "solution": False, "locked": True}})
        cells.append(cell)
    nb, res = verify.VerifyOutsideKernel().preprocess(new_notebook(cells=cells), {})
    assert [len(c.outputs) for c in nb.cells] == [0, 1, 0]
    assert "CPU time" in nb.cells[1].outputs[0].evalue
    assert [v["grade_id"] for v in res["course_verifier"]] == ["b"]


def test_a_verifier_without_privileges_judges_every_record_after_a_busy_one(tmp_path):
    """The verifier's child sets a CPU limit per record. Without CAP_SYS_RESOURCE (as when grading) a
    process cannot raise its hard limit again, so a per-record hard limit made every record after one
    that spent a second of CPU fail to be judged (lesson 09's correct answers lost 2 points)."""
    drop = ["setpriv", "--bounding-set", "-sys_resource", "--inh-caps", "-all"]
    if os.geteuid() != 0:
        drop = []  # an unprivileged user has no CAP_SYS_RESOURCE to drop
    elif shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop CAP_SYS_RESOURCE")
    code = textwrap.dedent("""
        import json, time
        from grading import verify

        def fake(source, records):
            if source == "busy":
                end = time.process_time() + 2.5
                while time.process_time() < end:
                    pass
            return None if source in ("busy", "pass") else "verdict for " + source

        verify.verify_cell = fake
        jobs = [(1, "busy", []), (2, "pass", []), (3, "fail", []), (4, "busy", []), (5, "pass", [])]
        print(json.dumps(verify.bounded_verdicts(jobs, cpu_seconds=5, memory_mb=512)))
    """)
    proc = subprocess.run([*drop, sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"1": None, "2": None, "3": "verdict for fail", "4": None, "5": None}, out


def test_a_failure_of_the_verifier_itself_is_named_as_such_and_the_rest_is_judged(monkeypatch):
    """A verifier child that fails for its own reasons (not a bound) says so in the test's note, so that
    neither the student nor the instructor reads it as a time or memory limit."""
    monkeypatch.setattr(verify, "verify_cell", _fake_verify)
    out = verify.bounded_verdicts([(1, "pass", []), (2, "exit", []), (3, "fail", [])], cpu_seconds=5, memory_mb=512)
    assert out[1] is None and out[3] == "verdict for fail", out
    assert "the grader's verifier failed" in out[2] and "SystemExit: 7" in out[2] and "CPU" not in out[2], out[2]
