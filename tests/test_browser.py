"""The student's flow and the readable feedback in a real browser (issue 11 item 3, issue 18 item 4).

Headless Chromium (the Debian package, driven by Playwright) at 1200 px wide:

* JupyterLab runs on loopback with the course's environment, on the students' bundle (release
  notebooks, the student edition of ``course_lib``; ``grading/bundle.py``), with its own Jupyter
  config, data, runtime and home folders. In lesson 01's release notebook the test types a wrong
  torch attention (no 1/sqrt(d_k)) into the answer cell: its visible test shows the whole
  misconception message, with no horizontal scrolling. Then the right answer: the visible test
  passes. The attention explorer (ipywidgets) renders and redraws when its slider is dragged.
  nbgrader's Validate button names exactly what is left to do.
* The feedback page of the demo misconception student of lesson 01, graded by the real pipeline
  (``python -m grading grade``: the session's graded lesson 01 class, tests/lesson01_runs.py), opened from file://:
  the whole message shows without horizontal scrolling. The class report the same run wrote
  (``grading/report.py``) opens too: it names the misconception, its plots decode and have alt text.
* The rendered course (``grading/site.py``, issue 64): lesson 01's page of the students' site opened
  from file:// with the network off: MathJax, served by the site, typesets every formula.

Skipped only when Chromium or the ``playwright`` package is missing. On failure, screenshots (and
the server's and the grader's logs) go to the git-ignored ``tests/.browser-artifacts/``.
"""
from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest

from conftest import REPO, source_notebooks

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sync_playwright is None,
                       reason="the playwright package is not installed (pip install playwright==1.65.2)"),
    pytest.mark.skipif(CHROMIUM is None,
                       reason="no Chromium (/usr/bin/chromium or chromium on PATH; apt-get install chromium)"),
]

LESSON, NOTEBOOK = "01_attention", "attention.ipynb"
STUDENT = "s03_misconception"
WIDTH, HEIGHT = 1200, 900
ARTIFACTS = os.path.join(REPO, "tests", ".browser-artifacts")
KERNEL_READY_S = 120  # a loaded 2-core machine: generous limits, and every wait is on a DOM condition
CELL_S = 180
VALIDATE_S = 300
MATHJAX_S = 60  # MathJax typesets lesson 01 in about a second

# what the student types into the answer cell of exercise 4 (scaled_dot_product_attention_torch)
WRONG = '''def scaled_dot_product_attention_torch(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights'''
RIGHT = WRONG.replace("q @ k.transpose(-2, -1)", "q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])")
assert RIGHT != WRONG


def _flat(text: str) -> str:
    return " ".join(text.split())


def _message(check: str, answer: str, **names) -> str:
    """The checks' message for a wrong answer, computed here with the repository's course_lib (live)."""
    import numpy as np
    import torch

    from course_lib import checks
    from course_lib.checks import transcript

    ns = {"math": math, "np": np, "torch": torch, **names}
    exec(answer, ns)
    fn = ns[re.search(r"^def (\w+)", answer, re.M).group(1)]
    with transcript.using("live"):
        try:
            getattr(checks.attention, check)(fn)
        except AssertionError as err:
            return str(err)
    raise AssertionError(f"{check} passed the wrong answer:\n{answer}")


# ---------------------------------------------------------------- artifacts
@contextlib.contextmanager
def artifacts_on_failure(name: str, *pages, logs=()):
    """Full-page screenshots of ``pages`` and copies of ``logs`` into tests/.browser-artifacts/ when the block fails."""
    try:
        yield
    except BaseException:
        os.makedirs(ARTIFACTS, exist_ok=True)
        for i, page in enumerate(pages):
            with contextlib.suppress(Exception):
                page.screenshot(path=os.path.join(ARTIFACTS, f"{name}-{i}.png"), full_page=True)
        for log in logs:
            with contextlib.suppress(OSError):
                shutil.copy(log, os.path.join(ARTIFACTS, f"{name}-{os.path.basename(log)}"))
        raise


def _stop(proc: subprocess.Popen, grace: float = 30) -> None:
    """Stop a process this module started (and its process group, which it leads): SIGTERM, then SIGKILL."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


# ---------------------------------------------------------------- the course: release, grading, bundle
@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """One folder for everything this module writes (TMPDIR of its processes too); removed at the end."""
    folder = tmp_path_factory.mktemp("browser")
    (folder / "tmp").mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def course(work, tmp_path_factory):
    """Lesson 01 released by nbgrader (the session's one release), and the feedback pages and class report of
    the session's graded lesson 01 class (tests/lesson01_runs.py: the real pipeline, ``python -m grading grade``
    on a local Dask cluster, feedback on), whose misconception student is the one of the demo below."""
    import lesson01_runs
    from grading import demo
    from shared_runs import copy_lesson01_release

    root = work / "course"
    root.mkdir()
    copy_lesson01_release(tmp_path_factory, root)  # `nbgrader generate_assignment 01_attention`, made once
    release = root / "release" / LESSON / NOTEBOOK
    assert release.exists(), release
    spec = demo.load_spec(LESSON)
    solutions = demo.solutions_from_source(nbformat.read(os.path.join(REPO, "notebooks", LESSON, NOTEBOOK), 4))
    run = lesson01_runs.dask_local_run(tmp_path_factory)
    assert STUDENT in lesson01_runs.STUDENTS
    log_path = work / "grading.log"
    log_path.write_text(run["stdout"] + run["stderr"])
    return {"pages": run["pages"], "returncode": run["returncode"], "release": release, "log": str(log_path),
            "solutions": solutions, "misconception": spec.MISCONCEPTION}


@pytest.fixture(scope="module")
def student_bundle(work, course):
    """The students' bundle (grading/bundle.py) as handed out: lesson 01's release from nbgrader above, the
    other lessons released with nbgrader's preprocessors (bundle_student.release_notebook), the stored values of
    lesson 01's visible tests only."""
    from bundle_student import release_notebook as _release

    from grading import bundle

    release = work / "release"
    for assignment, path in source_notebooks():
        (release / assignment).mkdir(parents=True, exist_ok=True)
        if assignment == LESSON:
            shutil.copy(course["release"], release / assignment / NOTEBOOK)
        else:
            _release(path, str(release / assignment / os.path.basename(path)))
    out = work / "bundle"
    bundle.build(str(out), release_dir=str(release), store=bundle.capture_visible(LESSON))
    return out


# ---------------------------------------------------------------- JupyterLab and the browser
@pytest.fixture(scope="module")
def lab(work, student_bundle):
    """JupyterLab on 127.0.0.1 (a free port, a random token) serving the bundle's notebooks, as README tells
    students (`jupyter lab bundle/notebooks`, course_lib from the bundle), with its own config, data, runtime
    and home folders."""
    dirs = {name: work / "lab" / name for name in ("config", "data", "runtime", "home")}
    for d in dirs.values():
        d.mkdir(parents=True)
    settings = dirs["config"] / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # the Validate button's nbgrader reads this folder too: a per-cell limit for a loaded test machine
    (dirs["config"] / "nbgrader_config.py").write_text("c = get_config()  # noqa\nc.Execute.timeout = 120\n")

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "MPLBACKEND", "COURSE_CHECK_MODE", "COURSE_ROOT") and not k.startswith("JUPYTER")}
    env.update(HOME=str(dirs["home"]), JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
               JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), TMPDIR=str(work / "tmp"), PYTHONPATH=str(student_bundle))
    root = student_bundle / "notebooks"
    probe = subprocess.run([sys.executable, "-c", "import course_lib, course_lib.checks.transcript as t; "
                            "print(course_lib.__file__); print(t.mode())"],
                           cwd=root, env=env, capture_output=True, text=True, timeout=300)
    where, mode = (probe.stdout.split() + ["?", "?"])[:2]
    assert where.startswith(str(student_bundle)) and mode == "stored", \
        f"the students' kernel would not use the bundle's course_lib: {probe.stdout}{probe.stderr[-2000:]}"

    token = secrets.token_hex(16)
    log_path = work / "lab.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0",
             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.allow_root=True"],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = _wait_for_server(server, dirs["runtime"], token, str(log_path))
        yield {"url": url, "token": token, "root": root, "log": str(log_path)}
    finally:
        _stop(server)


def _wait_for_server(server, runtime, token, log_path) -> str:
    loopback = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    deadline = time.monotonic() + KERNEL_READY_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited ({server.returncode}):\n{open(log_path).read()[-3000:]}")
        info = glob.glob(os.path.join(runtime, f"jpserver-{server.pid}.json"))
        if info:
            with contextlib.suppress(ValueError, OSError):
                url = json.load(open(info[0]))["url"]
                with contextlib.suppress(OSError):
                    with loopback.open(f"{url}api/status?token={token}", timeout=10) as r:
                        if r.status == 200:
                            return url
        time.sleep(0.25)  # polling a process that has no DOM yet
    raise AssertionError(f"JupyterLab did not answer within {KERNEL_READY_S} s:\n{open(log_path).read()[-3000:]}")


@pytest.fixture(scope="module")
def browser(work):
    """Headless Chromium (the system's executable) driven by Playwright; its temporary files under ``work``."""
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(work / "tmp")  # the Playwright driver's own temporary folders
    try:
        pw = sync_playwright().start()
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
    home = work / "browser-home"
    home.mkdir()
    try:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"],
                                      env={**os.environ, "HOME": str(home), "TMPDIR": str(work / "tmp")})
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        pw.stop()


def _new_page(browser):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    # nothing leaves the machine: the lab on loopback and file:// pages only (a feedback page asks a CDN for MathJax)
    context.route("**/*", lambda route: route.continue_()
                  if re.match(r"^(file:|https?://127\.0\.0\.1[:/])", route.request.url) else route.abort())
    page = context.new_page()
    page.set_default_timeout(60_000)
    return page


class Notebook:
    """The release notebook of lesson 01 open in JupyterLab, driven through the page as a student would."""

    def __init__(self, page, nb):
        self.page, self.nb = page, nb
        self.done: set[str] = set()

    def index(self, *, grade_id=None, contains=None) -> int:
        for i, cell in enumerate(self.nb.cells):
            if grade_id and cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return i
            if contains and cell.cell_type == "code" and contains in cell.source:
                return i
        raise LookupError(grade_id or contains)

    def cell(self, i: int):
        return self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(i)

    def type_answer(self, i: int, code: str) -> None:
        """Replace the cell's text in its CodeMirror editor by typing (select all, then text input)."""
        editor = self.cell(i).locator(".cm-content")
        editor.scroll_into_view_if_needed()
        editor.click()
        self.page.keyboard.press("ControlOrMeta+a")
        self.page.keyboard.insert_text(code)
        typed = editor.inner_text()
        assert [line.rstrip() for line in typed.rstrip().split("\n")] == code.split("\n"), f"the editor holds:\n{typed}"

    def run(self, i: int, timeout_s: float = CELL_S):
        """Select the cell, Shift+Enter, and wait until its prompt shows a new execution count."""
        prompt = self.cell(i).locator(".jp-InputPrompt")
        prompt.scroll_into_view_if_needed()
        before = prompt.text_content()
        prompt.click()
        self.page.keyboard.press("Shift+Enter")
        self.page.wait_for_function("([el, before]) => /\\[\\d+\\]/.test(el.textContent) && el.textContent !== before",
                                    arg=[prompt.element_handle(), before], timeout=timeout_s * 1000)
        return self.cell(i)

    def errors(self, i: int) -> list[str]:
        return self.cell(i).locator(".jp-Cell-outputArea [data-mime-type='application/vnd.jupyter.stderr']") \
            .all_text_contents()

    def outputs(self, i: int) -> str:
        return self.cell(i).locator(".jp-Cell-outputArea").text_content()

    def once(self, what: str, step) -> None:
        """Run a step another test may already have done (each test can run alone, in file order they share it)."""
        if what not in self.done:
            step()
            self.done.add(what)

    def setup(self) -> None:
        def run_setup():
            i = self.index(grade_id="setup")
            self.run(i)
            assert not self.errors(i), f"the setup cell failed: {self.errors(i)}"
        self.once("setup", run_setup)

    def answer(self, code: str) -> None:
        """Type ``code`` into exercise 4's answer cell and run it and its visible test."""
        self.setup()
        impl = self.index(grade_id="attention_torch_impl")
        assert "def scaled_dot_product_attention_torch" in self.cell(impl).text_content()
        self.type_answer(impl, code)
        self.run(impl)
        assert not self.errors(impl), f"the answer cell failed: {self.errors(impl)}"
        self.run(self.index(grade_id="attention_torch_visible"))
        self.done.discard("right")


@pytest.fixture(scope="module")
def notebook(browser, lab):
    page = _new_page(browser)
    nb = nbformat.read(os.path.join(lab["root"], LESSON, NOTEBOOK), 4)
    with artifacts_on_failure("open-notebook", page, logs=[lab["log"]]):
        page.goto(f"{lab['url']}lab/tree/{LESSON}/{NOTEBOOK}?token={lab['token']}")
        page.wait_for_function(f"document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell').length"
                               f" === {len(nb.cells)}", timeout=KERNEL_READY_S * 1000)
        page.wait_for_function("Array.from(document.querySelectorAll('.jp-StatusBar-Widget'))"
                               ".some(e => /Python 3 \\(ipykernel\\) \\| Idle/.test(e.innerText))",
                               timeout=KERNEL_READY_S * 1000)
    yield Notebook(page, nb)
    page.context.close()


# how many lines the browser lays the element's text out on
LINE_BOXES = """el => { const range = document.createRange(); range.selectNodeContents(el);
  return new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top))).size; }"""


def _overflowing(elements) -> list[str]:
    """Elements wider than their box (they would scroll sideways or cut the text), with their sizes."""
    describe = "el => `${el.tagName}.${el.className}: scrollWidth ${el.scrollWidth} > clientWidth ${el.clientWidth}`"
    return [e.evaluate(describe) for e in elements if e.evaluate("el => el.scrollWidth > el.clientWidth")]


# ---------------------------------------------------------------- the tests
def test_a_wrong_answer_shows_the_whole_message_without_scrolling(notebook, lab):
    """Issue 18 item 4: a failing visible test in JupyterLab, 1200 px wide: the misconception message is
    whole, no frame of the checks, nothing scrolls sideways."""
    expected = f"AssertionError: {_message('check_attention_torch', WRONG)}"
    assert "likely misconception 'missing scaling'" in expected
    page = notebook.page
    with artifacts_on_failure("wrong-answer", page, logs=[lab["log"]]):
        notebook.answer(WRONG)
        test = notebook.index(grade_id="attention_torch_visible")
        notebook.cell(test).scroll_into_view_if_needed()
        errors = notebook.errors(test)
        assert len(errors) == 1, f"expected one error output, got {errors}"
        shown = errors[0]
        assert _flat(expected) in _flat(shown), f"the message is not whole:\n{shown}\nexpected:\n{expected}"
        assert "course_lib/checks" not in shown and "Traceback" not in shown, shown
        # the output area, each output (the box that would scroll sideways) and each pre in it
        area = notebook.cell(test).locator(".jp-Cell-outputArea")
        boxes = [e.element_handle() for e in [area] + area.locator(".jp-OutputArea-output, pre").all()]
        assert len(boxes) >= 3
        assert not _overflowing(boxes), _overflowing(boxes)
        # the note is wrapped by the checks (course_lib.checks.teacher_note); the browser must not break
        # its lines again (a long line would leave a few characters alone on a line of their own)
        for pre in area.locator("pre").all():
            lines = pre.text_content().rstrip("\n").split("\n")
            assert pre.evaluate(LINE_BOXES) == len(lines), \
                f"the browser re-wrapped the note: {len(lines)} lines shown on {pre.evaluate(LINE_BOXES)} at {WIDTH} px"


def test_the_right_answer_passes_its_visible_test(notebook, lab):
    with artifacts_on_failure("right-answer", notebook.page, logs=[lab["log"]]):
        notebook.answer(RIGHT)
        notebook.done.add("right")
        test = notebook.index(grade_id="attention_torch_visible")
        assert not notebook.errors(test), f"the visible test failed: {notebook.errors(test)}"
        assert "scaled_dot_product_attention_torch: visible tests passed" in notebook.outputs(test)


def test_the_explorer_renders_and_follows_its_slider(notebook, lab):
    """Lesson 01's interactive explorer (ipywidgets) draws a query's weights, and redraws when the slider moves."""
    page = notebook.page
    with artifacts_on_failure("explorer", page, logs=[lab["log"]]):
        notebook.once("right", lambda: notebook.answer(RIGHT))
        heads = notebook.index(contains="pretrained.load_minilm")
        notebook.run(heads)
        assert not notebook.errors(heads), notebook.errors(heads)
        assert "max |your weights - the model's attention|" in notebook.outputs(heads)
        cell = notebook.run(notebook.index(contains="attention_explorer("))
        cell.scroll_into_view_if_needed()
        handle, label = cell.locator(".noUi-handle"), cell.locator(".widget-label", has_text="query token")
        figure = cell.locator(".widget-output img")
        handle.wait_for(state="visible", timeout=CELL_S * 1000)
        figure.wait_for(state="visible", timeout=CELL_S * 1000)
        first_label, first_figure = label.inner_text(), figure.get_attribute("src")
        assert handle.get_attribute("aria-valuenow") == "0.0" and first_label.startswith("query token: ")

        track = cell.locator(".noUi-base").bounding_box()
        grip = handle.bounding_box()
        page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2)
        page.mouse.down()
        page.mouse.move(track["x"] + track["width"] / 2, grip["y"] + grip["height"] / 2, steps=8)
        page.mouse.up()
        page.wait_for_function("([el, before]) => el.innerText !== before", arg=[label.element_handle(), first_label],
                               timeout=CELL_S * 1000)
        page.wait_for_function("([box, before]) => { const img = box.querySelector('img'); "
                               "return img !== null && img.src !== before; }",
                               arg=[cell.locator(".widget-output").element_handle(), first_figure],
                               timeout=CELL_S * 1000)
        value = float(handle.get_attribute("aria-valuenow"))
        assert value >= 1, f"the slider did not move: {value}"
        assert cell.locator(".widget-readout").inner_text().strip() == str(int(value))


def test_validate_names_exactly_what_is_left_to_do(notebook, lab):
    """nbgrader's Validate button (the @jupyter/nbgrader extension) saves, runs the whole notebook and
    lists the failing cells: with exercise 4 answered, softmax, the numpy attention and the written answer."""
    page = notebook.page
    with artifacts_on_failure("validate", page, logs=[lab["log"]]):
        notebook.once("right", lambda: notebook.answer(RIGHT))
        page.locator(".jp-NotebookPanel-toolbar jp-button.validate-button").click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(state="visible", timeout=VALIDATE_S * 1000)
        text = dialog.inner_text()
        assert dialog.locator("#validation-message").count() == 1, f"no validation result:\n{text}"
        assert "validation-failed" in dialog.locator("#validation-message").get_attribute("class"), text
        assert text.count("The following cell failed:") == 3, text
        assert "checks.attention.check_softmax(softmax)" in text and "NotImplementedError" in text, text
        assert "checks.attention.check_attention_numpy(scaled_dot_product_attention)" in text, text
        assert "scaled_dot_product_attention: not implemented yet" in _flat(text), text
        assert "YOUR ANSWER HERE" in text and "You did not provide a response." in text, text
        assert "check_attention_torch" not in text, f"the answered exercise is listed as failing:\n{text}"
        assert "Success!" not in text
        dialog.locator("button.jp-mod-accept").click()
        dialog.wait_for(state="detached")


def test_the_feedback_page_shows_the_whole_message_without_scrolling(browser, course):
    """Issue 18 item 4: the feedback page of the demo student with a missing 1/sqrt(d_k), 1200 px wide:
    the summary and both failing tests show the whole message, and nothing scrolls sideways."""
    expected = _message("check_attention_numpy", course["misconception"]["attention_numpy_impl"],
                        softmax=_solution(course, "softmax_impl", "softmax"))
    assert course["returncode"] == 0, open(course["log"]).read()[-4000:]
    html = course["pages"] / "feedback" / STUDENT / LESSON / NOTEBOOK.replace(".ipynb", ".html")
    assert html.exists(), open(course["log"]).read()[-4000:]

    page = _new_page(browser)
    try:
        with artifacts_on_failure("feedback", page, logs=[course["log"]]):
            page.goto(html.as_uri(), wait_until="load")
            assert page.evaluate("window.innerWidth") == WIDTH
            summary = page.locator("li", has_text="attention_numpy_visible").first
            error_outputs = page.locator(".output_error pre", has_text=expected[:60]).all()
            assert _flat(expected) in _flat(summary.inner_text()), summary.inner_text()
            assert len(error_outputs) == 2, f"expected the visible and the hidden test's errors: {len(error_outputs)}"
            assert any(_flat(expected) in _flat(p.inner_text()) for p in error_outputs)
            holders = [e.element_handle() for e in page.locator("li, pre", has_text="likely misconception").all()]
            assert len(holders) == 4, f"expected two summary items and two error outputs, got {len(holders)}"
            assert not _overflowing(holders), _overflowing(holders)
            assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth"), \
                page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
            right_edges = [h.evaluate("el => el.getBoundingClientRect().right") for h in holders]
            assert max(right_edges) <= WIDTH, right_edges
    finally:
        page.context.close()


def test_the_class_report_opens_and_names_the_misconception(browser, course):
    """Issue 37: the class report the same grading run wrote (grading/report.py) opens from file://: lesson 01's
    numpy attention row names 'missing scaling', both plots decode and have alt text, nothing scrolls sideways."""
    report = course["pages"] / "report" / "index.html"
    assert course["returncode"] == 0 and report.exists(), open(course["log"]).read()[-4000:]
    page = _new_page(browser)
    try:
        with artifacts_on_failure("class-report", page, logs=[course["log"]]):
            page.goto(report.as_uri(), wait_until="load")
            assert page.locator("h1").inner_text() == "Class report"
            row = page.locator("tr", has_text="attention_numpy").first
            assert "missing scaling" in row.inner_text() and "likely misconception" in row.inner_text()
            images = page.locator("img").all()
            assert len(images) == 2, len(images)
            for img in images:
                assert img.get_attribute("alt").strip(), "a plot without alt text"
                assert img.evaluate("el => el.complete && el.naturalWidth > 0"), "a plot that does not decode"
            assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
    finally:
        page.context.close()


def _solution(course, grade_id: str, name: str):
    """A function of the instructor's solution (the demo student's other answers are these)."""
    import numpy as np

    ns = {"np": np, "math": math}
    exec(course["solutions"][grade_id], ns)
    return ns[name]


# ---------------------------------------------------------------- the rendered course, offline (issue 64 item 1)
@pytest.fixture(scope="module")
def students_site(tmp_path_factory):
    """The students' variant of the rendered course (grading/site.py), lesson 01 only: the session's one build
    of lesson 01's site (tests/shared_runs.py ``lesson01_site``, read by tests/test_site.py too)."""
    pytest.importorskip("myst_nb", reason="the site's packages (the `site` extra) are not installed")
    from shared_runs import lesson01_site

    out, run = lesson01_site(tmp_path_factory)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out / "students" / "html"


def test_the_rendered_lesson_typesets_its_formulas_with_the_network_off(browser, students_site):
    """Issue 64 item 1: lesson 01's page of the students' site, opened from file:// with every other request
    refused: MathJax (served by the site) typesets every formula (an mjx-container in each math span, no raw
    \\( ... \\) left in the text), and the page asked for nothing outside the site."""
    page_file = students_site / "01_attention" / "attention.html"
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, offline=True)
    refused = []

    def only_files(route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    context.route("**/*", only_files)
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        with artifacts_on_failure("site-offline", page):
            page.goto(page_file.as_uri(), wait_until="load")
            spans = page.locator("span.math, div.math")
            total = spans.count()
            assert total > 5, f"lesson 01's page should hold formulas, found {total} math elements"
            typeset = "Array.from(document.querySelectorAll('span.math, div.math'))" \
                      ".filter(e => e.querySelector('mjx-container')).length"
            try:
                page.wait_for_function(f"() => {typeset} === {total}", timeout=MATHJAX_S * 1000)
            except Exception:  # Playwright's timeout: say what was missing instead of its stack
                pytest.fail(f"after {MATHJAX_S} s, {page.evaluate(typeset)} of {total} formulas were typeset; "
                            f"MathJax loaded: {page.evaluate('typeof MathJax')}; requests refused (off the site): "
                            f"{refused}")
            assert page.locator("mjx-container").count() >= total
            body = page.locator("article").inner_text()
            raw = re.findall(r"\\\(.{0,40}|\\\[.{0,40}", body)
            assert not raw, f"formulas left as raw LaTeX: {raw[:3]}"
            assert page.evaluate("typeof MathJax === 'object' && MathJax.version.startsWith('3')"), \
                "MathJax 3 did not load from the site"
            assert not refused, f"the page asked the network for {refused}: the site must read offline"
    finally:
        context.close()
