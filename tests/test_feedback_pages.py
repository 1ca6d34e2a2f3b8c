"""The feedback page's accessibility pass, done on the page's text (``grading.feedback.accessible``), gives the
document nbconvert's own BeautifulSoup pass gives (``HTMLExporter.from_notebook_node``): the same tree once both
are parsed, on the demo class's real pages and on pages made to be awkward."""
from __future__ import annotations

import os
import sys

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from grading.feedback import NO_ALT, FeedbackExporter, accessible  # noqa: E402
from nbconvert.exporters import HTMLExporter  # noqa: E402

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def both(nb, config=None, resources=None):
    """(the page with the text pass, the page with nbconvert's pass), each from a fresh exporter; fails if the
    text pass handed the page to nbconvert's (then the two would be equal whatever the text pass does)."""
    import grading.feedback as feedback

    passes = []
    feedback.accessible = lambda html: passes.append(accessible(html)) or passes[-1]
    try:
        mine, _ = FeedbackExporter(config=config).from_notebook_node(nb, dict(resources or {}))
    finally:
        feedback.accessible = accessible
    assert passes and passes[-1] is not None, "the text pass gave this page to nbconvert's pass"
    theirs, _ = HTMLExporter.from_notebook_node(FeedbackExporter(config=config), nb, dict(resources or {}))
    return mine, theirs


def feedback_config():
    """The exporter's configuration as ``nbgrader generate_feedback`` makes it from the course's (its feedback
    template, ``grading/nbgrader_config.py``'s settings)."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=os.path.join(REPO, "grading")).load_config()
    return GenerateFeedback(coursedir=CourseDirectory(config=config), config=config).config


def with_scores(nb):
    """What nbgrader's feedback adds from the gradebook before the export, made up (the pass is about the
    page's markup): a score and a comment on every graded cell."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader") or {}
        if meta.get("grade") or meta.get("task"):
            meta.setdefault("score", meta.get("points", 0))
            meta.setdefault("comment", None)
    return nb


def same_document(mine: str, theirs: str) -> bool:
    return str(BeautifulSoup(mine, features="html.parser")) == theirs


def awkward_notebook():
    nb = new_notebook(cells=[
        new_markdown_cell('An image without text <img src="a.png"> and one with <img alt="a plot" src="b.png"/>, '
                          "<IMG SRC='c.png' width=3>, and a tag that is only text: &lt;img src=x&gt;."),
        new_code_cell("plot()", outputs=[
            new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}),
            new_output("display_data", data={"text/html": '<div class="jp-OutputArea-output extra" title="a>b">'
                                                          "a student's div</div><img title='x > y' src='d.png'>"}),
            new_output("stream", name="stdout", text='<div class="jp-Cell-inputWrapper"> printed, escaped\n'),
        ]),
        new_code_cell("1 + 1", outputs=[new_output("execute_result", data={"text/plain": "2"}, execution_count=2)]),
    ])
    return nb


@pytest.mark.parametrize("template", ["lab", "feedback"])
def test_the_text_pass_gives_nbconverts_document_on_awkward_pages(template):
    # the feedback template reads the scores nbgrader puts in the resources
    scores = {"nbgrader": {"notebook": "awkward", "score": 1.0, "max_score": 2.0, "late_penalty": 0.0}}
    mine, theirs = both(awkward_notebook(), *((feedback_config(), scores) if template == "feedback" else ()))
    assert same_document(mine, theirs)
    soup = BeautifulSoup(mine, features="html.parser")
    images = soup.find_all("img")
    assert len(images) >= 5 and all(img.get("alt") for img in images)
    assert [img["alt"] for img in images].count(NO_ALT) == len(images) - 1  # every one but "a plot"
    focus = soup.select(".jp-Notebook div.jp-Cell-inputWrapper, .jp-Notebook div.jp-OutputArea-output")
    assert all(d.get("tabindex") == "0" for d in focus) and (focus or template == "feedback")
    assert '&lt;div class=&#34;jp-Cell-inputWrapper&#34;&gt; printed, escaped' in mine  # text stays text


def test_a_page_not_laid_out_as_the_template_writes_it_is_left_to_nbconvert():
    page = '<html><body><div class="jp-OutputArea-output">x</div></body></html>'
    assert accessible(page) == (page, 0)  # no .jp-Notebook: nothing to make focusable
    assert accessible('<body class="jp-Notebook"><div class="jp-OutputArea-output" tabindex="1">x</div>') is None
    assert accessible('<body class="jp-Notebook"><img src="a" src="b"></body>') is None
    assert accessible('<body><div class="jp-Notebook"><div class="jp-OutputArea-output"></div></div>') is None
    assert accessible('<body><![CDATA[ <img src=a> ]]></body>') is None
    # comments and the text of scripts and styles are not tags, for html.parser nor for the text pass
    page = '<body><!-- <img src=a> --><script>"<img src=b>"</script><style>/* <img src=c> */</style></body>'
    assert accessible(page) == (page, 0)
    page, missing = accessible('<body class="jp-Notebook"><img src="a"><div class="jp-Cell-inputWrapper"></div>')
    assert missing == 1 and page == (f'<body class="jp-Notebook"><img src="a" alt="{NO_ALT}">'
                                     '<div class="jp-Cell-inputWrapper" tabindex="0"></div>')


def test_the_text_pass_gives_nbconverts_document_on_the_demo_class(tmp_path_factory):
    """One autograded notebook per lesson of the demo class graded as `make grade` grades it (the four demo
    students in turn), with the feedback exporter's configuration."""
    from shared_runs import demo_class

    root, run = demo_class(tmp_path_factory)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    config = feedback_config()
    students = sorted(p.name for p in (root / "autograded").iterdir())
    lessons = sorted({p.name for s in students for p in (root / "autograded" / s).iterdir()})
    assert len(lessons) == 12, lessons
    for i, lesson in enumerate(lessons):
        student = students[i % len(students)]
        (path,) = (root / "autograded" / student / lesson).glob("*.ipynb")
        scores = {"nbgrader": {"notebook": path.stem, "score": 1.0, "max_score": 2.0, "late_penalty": 0.0}}
        mine, theirs = both(with_scores(nbformat.read(path, as_version=4)), config, scores)
        assert same_document(mine, theirs), f"{student}/{lesson}: the two passes give different documents"


def test_the_markdown_filter_keeps_the_lessons_text_but_never_a_cell_with_attachments():
    """FeedbackExporter.markdown2html keeps what a markdown cell renders to (the same on every student's page),
    except for a cell with attachments (a pasted image, up to a notebook's size): rendered every time, as
    nbconvert renders it."""
    import grading.feedback as feedback

    pasted = new_markdown_cell("A pasted plot: ![plot](attachment:plot.png)")
    pasted["attachments"] = {"plot.png": {"image/png": PNG}}
    nb = new_notebook(cells=[new_markdown_cell("# The lesson's text, the same on every page"), pasted])
    feedback._KEPT.clear()
    mine, _ = FeedbackExporter().from_notebook_node(nb, {})
    kept = [key for key in feedback._KEPT if key[0] == "markdown2html"]
    assert [key[1] for key in kept] == ["# The lesson's text, the same on every page"], kept
    assert f"data:image/png;base64,{PNG}" in mine
    again, _ = FeedbackExporter().from_notebook_node(nb, {})  # the kept text gives the same page
    assert again == mine
    theirs, _ = HTMLExporter.from_notebook_node(FeedbackExporter(), nb, {})
    assert same_document(mine, theirs)
