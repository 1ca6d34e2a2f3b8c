"""Feedback without the hidden tests (nbgrader#917, #1363).

nbgrader's feedback HTML is the autograded notebook, so it shows the hidden
tests' source and their full tracebacks (which quote that source). This
preprocessor, run by ``generate_feedback`` before the HTML export, replaces each
hidden region with a one-line note and each hidden cell's error with its last
line: the student still sees which hidden test failed, its points and the
checks' message ("likely misconception 'missing scaling': ..."), but not the
inputs or code that the instructor kept hidden. Printed output of hidden cells
is dropped for the same reason.

Student text reaches the page through one sanitiser, :func:`sanitise` (``nh3``, an
allowlist: formatting tags only, no script, style, event handler, form or frame, links
only http, https and mailto). nbconvert's HTML template passes every markdown cell
(student-added cells, written answers, the grader's notes), every HTML, markdown and SVG
output and the highlighted code through its ``clean_html`` filter when
``HTMLExporter.sanitize_html`` is on; ``nbgrader_config.py`` replaces that filter with
:func:`sanitise`. Streams, errors and plain text are escaped by the template itself.
``SafeOutputs`` renders and sanitises every markdown cell itself (nbgrader's feedback
template renders markdown cells without ``clean_html``), drops what the template would
render outside the filter (JavaScript, widget views, SVG, image data that is not base64,
file-name links, grade ids that are not plain names) and makes the feedback
folder hold only the generated pages: nbgrader copies every other file of the graded
folder there.
"""
from __future__ import annotations

import bisect
import collections
import json
import os
import re
import stat

import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Unicode

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# ------------------------------------------------------------------ the one sanitiser (grading/sanitise.py)
from grading.sanitise import ATTRIBUTES, TAGS, URL_SCHEMES, sanitise  # noqa: E402,F401 - feedback.sanitise stays


def sanitised_markdown(source: str) -> str:
    """A markdown cell rendered and sanitised here, as one raw HTML block that the template's own
    ``markdown2html`` passes through unchanged (nbgrader's feedback template renders markdown cells
    without nbconvert's ``clean_html``): no blank line, so the block cannot end early and let
    markdown build new markup from sanitised text; ``&#10;`` renders as the newline it replaces."""
    def render() -> str:
        from nbconvert.filters import markdown2html

        html = sanitise(markdown2html(source)).replace("\r", "").replace("\n", "&#10;")
        return f'<div class="course-sanitised">{html}</div>'

    # the lesson's text is the same on every student's page (rendering it was a tenth of a page's time)
    return _kept(("markdown", source), source, render)


_KEPT: collections.OrderedDict = collections.OrderedDict()


def _kept(key: tuple, source: str, make):
    """``make()``, kept for the life of the process under ``key`` (everything the result depends on): the
    2,048 most recently used, for sources of up to 20,000 characters. What every feedback page of an
    assignment shares (the lesson's text, the instructor's code cells) was rendered again for every page
    (cProfile, lesson 05's demo class)."""
    if len(source) > 20_000:
        return make()
    value = _KEPT.get(key)
    if value is None:
        value = _KEPT[key] = make()
        while len(_KEPT) > 2048:
            _KEPT.popitem(last=False)
    _KEPT.move_to_end(key)
    return value


# characters markdown (or the page's MathJax) would read as markup, written as numeric character references
_MARKUP = {c: f"&#{ord(c)};" for c in "#[]()!*_`~\\|{}$<>&\"'=:"}
_MARKUP["\n"] = "&#10;"
_MARKUP["\r"] = ""


def quoted_text(value) -> str:
    """A verifier message or a value it quotes, as HTML that shows it as literal text, one line of
    markup: every character markdown, HTML or MathJax could read as markup is a character reference,
    so ``# Fake headline``, ``[link](http://x)``, ``![img](http://x/y.png)`` and ``<script>`` show as
    the characters they are, also after the template's markdown pass."""
    text = _ANSI.sub("", str(value))
    return "".join(_MARKUP.get(c, c) for c in text)


SUMMARY_KEY = "course_summary"  # metadata of the note FeedbackSummary adds: SafeOutputs keeps it as HTML


_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
# SVG is dropped (it would need an SVG-aware sanitiser; matplotlib's default output is PNG)
SAFE_DATA = {"text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg"}


class HideHiddenTests(Preprocessor):
    enabled = Bool(True)  # nbconvert preprocessors are off unless enabled
    begin = Unicode("### BEGIN HIDDEN TESTS").tag(config=True)
    end = Unicode("### END HIDDEN TESTS").tag(config=True)

    def _strip_region(self, source: str) -> tuple[str, bool]:
        out, inside, found = [], False, False
        for line in source.splitlines():
            if self.begin in line:
                inside, found = True, True
                out.append("# hidden tests: not shown in feedback")
            elif self.end in line:
                inside = False
            elif not inside:
                out.append(line)
        return "\n".join(out), found

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "markdown" and meta.get("solution"):
            # a student's written answer is shown as text: nbgrader's feedback template renders
            # markdown without sanitizing, and a <script> there would run in the reader's browser
            cell.source = cell.source.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            return cell, resources
        if cell.cell_type != "code":
            return cell, resources
        source, hidden = self._strip_region(cell.source)
        if not hidden:
            return cell, resources
        cell.source = source
        kept = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                ename = output.get("ename", "Error")
                evalue = _ANSI.sub("", output.get("evalue", ""))
                output["traceback"] = [f"{ename}: {evalue}"]
                kept.append(output)
        cell.outputs = kept
        return cell, resources


# the grader's private folders, as a kernel's traceback or a message quotes them: never on a student's page
_RUN_FOLDER = re.compile(r"(?:/[^\s'\"/:]+)*/(?:course-grading|course-export|course-dask-worker|course-warm|course-seed|"
                         r"nbg-ipc|adv-tmp)-[A-Za-z0-9_]+")
TMP_SHOWN = "(grader's temporary folder)"
COURSE_SHOWN = "(course folder)"


def without_grader_paths(text: str) -> str:
    """``text`` with the grader's temporary folders and the course's own folder replaced by a name.

    Example: ``"File /tmp/course-grading-ab12/ed/course_lib/checks/core.py, line 3"`` ->
    ``"File (grader's temporary folder)/ed/course_lib/checks/core.py, line 3"``."""
    from grading import REPO_DIR
    from grading.course import Course

    if not isinstance(text, str):
        return text
    text = _RUN_FOLDER.sub(TMP_SHOWN, text)
    for folder, shown in ((Course.from_env().root, COURSE_SHOWN), (REPO_DIR, COURSE_SHOWN)):
        folder = folder.rstrip(os.sep)
        if len(folder) > 1:
            text = text.replace(folder + os.sep, shown + "/").replace(folder, shown)
    return text


def _scrub_output(out) -> None:
    """Every text an output shows (streams, errors, plain text and markup data), without grader paths."""
    if "text" in out:
        out["text"] = without_grader_paths("".join(out["text"]) if isinstance(out["text"], list) else out["text"])
    if out.get("output_type") == "error":
        out["evalue"] = without_grader_paths(str(out.get("evalue", "")))
        out["traceback"] = [without_grader_paths(str(t)) for t in out.get("traceback", [])]
    data = out.get("data", {})
    for mime in ("text/plain", "text/html", "text/markdown", "text/latex"):
        if mime in data:
            value = data[mime]
            data[mime] = without_grader_paths("".join(value) if isinstance(value, list) else value)


class SafeOutputs(Preprocessor):
    """What the page renders outside the sanitiser is made plain; the feedback folder holds only pages;
    no page shows the grader's temporary folders or the course's own (:func:`without_grader_paths`)."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        self._only_pages(resources)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(cell.get("id", "x"))):
            cell["id"] = f"cell-{index}"
        tags = cell.get("metadata", {}).get("tags")
        if tags is not None:
            cell.metadata["tags"] = [t for t in tags if isinstance(t, str) and re.fullmatch(r"[A-Za-z0-9_-]+", t)]
        cell.pop("attachments", None)
        cell.source = without_grader_paths(cell.source)
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            _scrub_output(out)
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", str(gid)):
            del cell.metadata["nbgrader"]  # the template quotes grade ids unescaped: only the gradebook's kind
        if cell.cell_type == "markdown" and cell.get("metadata", {}).get(SUMMARY_KEY):
            # the grader's own note: fixed tags around text escaped by quoted_text (every character that
            # markdown, HTML or MathJax reads as markup is a character reference), on one line, so the
            # template's markdown pass keeps it as one raw HTML block and nothing a message quotes becomes
            # a headline, a link or an image (a sanitiser would turn the references back into characters)
            html = cell.source.replace("\r", "").replace("\n", "&#10;")
            cell.source = f'<div class="course-sanitised">{html}</div>'
        elif cell.cell_type == "markdown":
            cell.source = sanitised_markdown(cell.source)
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") not in ("display_data", "execute_result"):
                continue
            data = out.get("data", {})
            for mime in list(data):
                value = data[mime]
                if mime not in SAFE_DATA or (mime.startswith("image/") and
                                             not (isinstance(value, str) and _BASE64.fullmatch(value))):
                    del data[mime]
            if not data:
                data["text/plain"] = "[output not shown in feedback]"
            meta = out.get("metadata", {})
            out["metadata"] = {k: v for k, v in meta.items() if k in ("width", "height") and isinstance(v, (int, float))}
        return cell, resources

    _pages: dict = {}  # feedback folder -> the pages this process generates into it

    @classmethod
    def _only_pages(cls, resources) -> None:
        """Remove what nbgrader copied from the graded folder into the feedback folder: everything but
        the pages generated in this run (the current notebook's page is written after this step)."""
        from grading.course import Course

        info = resources.get("nbgrader", {})
        student, assignment = info.get("student"), info.get("assignment")
        if not student or not assignment:
            return
        # the course nbgrader grades in this process (COURSE_ROOT: a Dask worker's private copy included)
        folder = Course.from_env().task_folder("feedback", student, assignment)
        ours = cls._pages.setdefault(folder, set())
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            for name in os.listdir(fd):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if name in ours and stat.S_ISREG(st.st_mode):
                    continue
                if stat.S_ISDIR(st.st_mode):
                    import shutil

                    shutil.rmtree(name, dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        ours.add(f"{info.get('notebook')}.html")


class PendingHandGrades(Preprocessor):
    """A written answer nobody has graded yet reads "pending", not "Score: 0.0 / 2.0".

    Runs after ``GetGrades``. A cell whose grade still needs a person (nbgrader's
    ``needs_manual_grade``: no manual score given yet) loses its score line and gets a note in its
    place; the summary at the top (``FeedbackSummary``) names the pending answers. Once graded in the
    formgrader, regenerating the feedback shows the score as usual.
    """

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook, MissingEntry

        info = resources.get("nbgrader", {})
        pending = []
        with Gradebook(info["db_url"]) as gb:
            for cell in nb.cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if not (meta.get("grade") and (meta.get("solution") or meta.get("task"))):
                    continue
                try:
                    grade = gb.find_grade(meta["grade_id"], info["notebook"], info["assignment"], info["student"])
                except MissingEntry:
                    continue
                if not grade.needs_manual_grade:
                    continue
                points = float(meta.get("points") or grade.max_score or 0)
                pending.append((meta["grade_id"], points))
                meta["grade"] = False  # no score line: the template would print 0.0 for a missing score
                note = (f"**Pending: graded by hand** ({points:g} point{'s' if points != 1 else ''}); "
                        "not scored yet, so not in the score above.")
                if cell.cell_type == "markdown":
                    cell.source = f"> {note}\n\n{cell.source}"
                else:
                    cell.source = f"# Pending: graded by hand ({points:g} points); not scored yet\n{cell.source}"
        resources["course_pending"] = pending
        return nb, resources


class FeedbackSummary(Preprocessor):
    """A note at the top of the page: each failed autograded test, its points and the checks' message.

    Runs after ``GetGrades`` (which puts each cell's score in its metadata) and before
    ``SafeOutputs`` (which sanitises the note like every markdown cell). Hidden tests appear
    with their message only, as in the cell below.
    """

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        from nbformat.v4 import new_markdown_cell

        failed = []
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if errors:
                message = without_grader_paths(_ANSI.sub("", str(errors[-1].get("evalue", ""))))[:800] \
                    or errors[-1].get("ename", "error")
                failed.append((str(meta.get("grade_id", "")), meta.get("score", 0), meta.get("points", 0), message))
        if not failed:
            text = "<p><b>Every autograded test passed.</b></p>"
        else:
            items = "".join(f"<li><b>{quoted_text(gid)}</b> ({float(score):g} / {float(points):g}): "
                            f"<samp>{quoted_text(message)}</samp></li>" for gid, score, points, message in failed)
            text = f"<p><b>What to look at</b> ({len(failed)} failed test(s)):</p><ul>{items}</ul>"
        others = other_notebooks(resources.get("nbgrader", {}))
        if others:
            text += ("<p><b>Your other notebooks</b> (only the assignment's own notebook is graded):</p><ul>"
                     + "".join(f"<li>{quoted_text(m)}<br><b>What to do:</b> {quoted_text(fix)}</li>" for m, fix in others)
                     + "</ul>")
        pending = resources.get("course_pending") or []
        if pending:
            text += ("<p><b>Pending</b>: " + ", ".join(f"{quoted_text(gid)} ({points:g} points)" for gid, points in pending)
                     + " graded by hand, not scored yet.</p>")
        cell = new_markdown_cell(text)
        cell.metadata[SUMMARY_KEY] = True
        nb.cells.insert(0, cell)
        return nb, resources


def other_notebooks(info: dict) -> list[tuple[str, str]]:
    """(message, what to do) of each notebook beside this submission's graded one (``attention-Copy1.ipynb``
    holding the work), as intake words it (``grading.intake.check_notebooks``, its ``extra`` findings), read
    from the submission folder of the course this process grades (a Dask worker's private copy included);
    [] where there is none or the folder cannot be read."""
    from grading.course import Course
    from grading.intake import check_notebooks, expected_notebooks

    student, assignment = info.get("student"), info.get("assignment")
    if not student or not assignment:
        return []
    folder = Course.from_env().task_folder("submitted", str(student), str(assignment))
    expected = expected_notebooks(str(assignment)) or [f"{info.get('notebook')}.ipynb"]
    try:
        found = check_notebooks(folder, expected, "")
    except (OSError, ValueError):
        return []
    out = []
    for kind, message, fix in found:
        if kind != "extra":
            continue
        if fix.startswith("the work seems to be in"):
            fix = fix.replace(" and regrade", " and ask your instructor to grade it again")
        elif fix.startswith("nothing, unless"):
            fix = "nothing, unless your work is in it: then tell your instructor"
        out.append((message, fix))
    return out


WRAP_CSS = """
/* grading/feedback.py: long messages wrap to the page instead of running off its edge */
div.output_area pre, div.output_subarea pre, div.output_text pre, .course-sanitised li {
  white-space: pre-wrap; overflow-wrap: anywhere; word-break: break-word;
}
"""


class WrapLongLines(Preprocessor):
    """Adds :data:`WRAP_CSS` to the page's inline CSS (after nbconvert's ``CSSHTMLHeaderPreprocessor``)."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        resources.setdefault("inlining", {}).setdefault("css", []).append(WRAP_CSS)
        return nb, resources



# ------------------------------------------------------------------ the page's exporter
class _CompiledTemplates(jinja2.BytecodeCache):
    """Jinja bytecode kept for the life of the process, shared by every feedback page it writes.

    nbgrader makes a new exporter, so a new Jinja environment, for each page: without this, the
    feedback template and the 20-odd templates it includes are compiled again for every submission
    (about a fifth of a page's time, measured with cProfile on lesson 05's demo class). Jinja keys
    the bytecode by template name and checks it against the source's checksum, so an edited
    template is compiled afresh."""

    def __init__(self):
        self.store = {}

    def load_bytecode(self, bucket):
        code = self.store.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket):
        self.store[bucket.key] = bucket.bytecode_to_string()


_COMPILED = _CompiledTemplates()


class CachedHighlight(Highlight2HTML):
    """nbconvert's ``highlight_code`` filter, its HTML kept (:func:`_kept`): Pygments' lexer was the largest
    single cost of a page. The key is everything the HTML depends on: the source, the language, the
    cell's metadata and the formatter's options."""

    def __call__(self, source, language=None, metadata=None):
        import json

        key = ("code", source, language or self.pygments_lexer,
               json.dumps(metadata, sort_keys=True, default=repr),
               json.dumps(self.extra_formatter_options, sort_keys=True, default=repr))
        return _kept(key, source, lambda: super(CachedHighlight, self).__call__(source, language, metadata))


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter (configured as ``HTMLExporter``), its templates compiled once per process."""

    def _create_environment(self):
        env = super()._create_environment()
        env.bytecode_cache = _COMPILED
        return env

    @jinja2.pass_context
    def markdown2html(self, context, source):
        """nbconvert's markdown filter (``HTMLExporter.markdown2html``), its HTML kept (:func:`_kept`): every
        markdown cell reaches it as the same sanitised block on every student's page (:func:`sanitised_markdown`),
        and mistune's pass over those blocks was about a third of a page's time (cProfile, lesson 05's demo
        class). The key is everything the filter's HTML depends on: the source, the exporter's options and,
        where images are embedded (``embed_images``: read from files), the notebook's folder. A cell with
        attachments (a student's pasted image: up to a notebook's size) is rendered every time, never kept."""
        render = lambda: HTMLExporter.markdown2html(self, context, source)  # noqa: E731
        if context.get("cell", {}).get("attachments"):
            return render()
        path = context.get("resources", {}).get("metadata", {}).get("path", "") if self.embed_images else ""
        key = ("markdown2html", source, path, self.embed_images, self.anchor_link_text, self.exclude_anchor_links,
               json.dumps(self.lexer_options, sort_keys=True, default=repr))
        return _kept(key, source, render)

    def from_notebook_node(self, nb, resources=None, **kw):
        """The page as ``HTMLExporter`` writes it, with its accessibility pass (alternative text on images,
        focusable cell inputs and outputs) done on the HTML text by :func:`accessible` instead of a
        BeautifulSoup tree: parsing, selecting and printing that tree took 0.4-0.9 s of every page (about
        half of its time, lesson 05's demo class). Where the text is not as the template writes it,
        :func:`accessible` returns None and nbconvert's own pass runs."""
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        # the same two filters HTMLExporter.from_notebook_node registers before rendering
        self.register_filter("highlight_code",
                             self.filters.get("highlight_code", CachedHighlight(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        fast = accessible(html)
        if fast is None:
            return super().from_notebook_node(nb, resources, **kw)
        page, missing_alt = fast
        if missing_alt:
            self.log.warning("Alternative text is missing on %s image(s).", missing_alt)
        return page, resources


_TAG = re.compile(r"<([a-zA-Z][^\s/>]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
_ATTR = re.compile(r"([^\s=/>\"']+)(?:\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+))?")
# what html.parser does not read as tags: comments, and the text of script and style elements
_NOT_TAGS = re.compile(r"<!--.*?-->|<(script|style)\b.*?</\1\s*>", re.S | re.I)
NO_ALT = "No description has been provided for this image"
FOCUSABLE = ("jp-Cell-inputWrapper", "jp-OutputArea-output")
_READ = frozenset({"img", "div", "body"})


def accessible(html: str):
    """nbconvert's accessibility pass on an exported page (``HTMLExporter.from_notebook_node``: every
    ``img`` without ``alt`` gets one; every ``div.jp-Cell-inputWrapper`` and ``div.jp-OutputArea-output``
    inside an element of class ``jp-Notebook`` gets ``tabindex="0"``), on the text. Returns (page,
    images given an alt), or None where the page is not laid out as nbconvert's templates write it (an
    attribute written twice on a tag the pass reads: img, div, body; a ``tabindex`` already there,
    ``jp-Notebook`` on an element other than the body, a ``<!`` or ``<?`` markup other than the doctype
    and comments): the caller then runs
    nbconvert's own pass. ``tests/test_feedback_pages.py`` checks, on the demo class's feedback pages
    and on pages made to be awkward, that both give the same document."""
    skip = [m.span() for m in _NOT_TAGS.finditer(html)]
    starts = [a for a, _ in skip]

    def hidden(pos: int) -> bool:  # in a comment, or in a script's or style's text
        i = bisect.bisect_right(starts, pos) - 1
        return i >= 0 and pos < skip[i][1]

    if any(not hidden(m.start()) for m in re.finditer(r"<[!?](?!--|doctype)", html, re.I)):
        return None
    out, pos, missing = [], 0, 0
    inside = False  # in the .jp-Notebook body
    for m in _TAG.finditer(html):
        name, inner = m.group(1).lower(), m.group(2)
        # the only tags the pass reads or changes: img, div, body and whichever carries the class jp-Notebook. A
        # page has tens of thousands of tags, nearly all Pygments' spans, which it neither reads nor changes (an
        # attribute written twice there reads the same in both passes' documents once parsed)
        if name not in _READ and "jp-Notebook" not in inner:
            continue
        if hidden(m.start()):
            continue
        attrs = dict(_attrs(inner))
        if len(attrs) != sum(1 for _ in _ATTR.finditer(inner.rstrip("/"))):
            return None
        if "jp-Notebook" in attrs.get("class", "").split():
            if name != "body" or inside:
                return None
            inside = True
        if name == "img" and "alt" not in attrs:
            addition = f' alt="{NO_ALT}"'
            missing += 1
        elif name == "div" and any(c in FOCUSABLE for c in attrs.get("class", "").split()):
            if not inside:
                continue
            if "tabindex" in attrs:
                return None
            addition = ' tabindex="0"'
        else:
            continue
        end = m.end() - 1
        if inner.endswith("/"):
            end -= 1
        out += [html[pos:end], addition]
        pos = end
    if inside and re.search(r"</body\s*>.*<div\b", html, re.S | re.I):
        return None  # a div after the body: not inside it
    out.append(html[pos:])
    return "".join(out), missing


def _attrs(inner: str):
    for a in _ATTR.finditer(inner.rstrip("/")):
        value = a.group(2) or ""
        if value[:1] in "\"'":
            value = value[1:-1]
        yield a.group(1).lower(), value
