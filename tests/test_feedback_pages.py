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


def both(nb, config=None):
    """(the page with the text pass, the page with nbconvert's pass), each from a fresh exporter."""
    mine, _ = FeedbackExporter(config=config).from_notebook_node(nb)
    theirs, _ = HTMLExporter.from_notebook_node(FeedbackExporter(config=config), nb)
    return mine, theirs


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


def test_the_text_pass_gives_nbconverts_document_on_awkward_pages():
    mine, theirs = both(awkward_notebook())
    assert same_document(mine, theirs)
    soup = BeautifulSoup(mine, features="html.parser")
    images = soup.find_all("img")
    assert len(images) >= 5 and all(img.get("alt") for img in images)
    assert [img["alt"] for img in images].count(NO_ALT) == len(images) - 1  # every one but "a plot"
    focus = soup.select("div.jp-Cell-inputWrapper, div.jp-OutputArea-output")
    assert focus and all(d.get("tabindex") == "0" for d in focus)
    assert '&lt;div class=&#34;jp-Cell-inputWrapper&#34;&gt; printed, escaped' in mine  # text stays text


def test_a_page_not_laid_out_as_the_template_writes_it_is_left_to_nbconvert():
    assert accessible('<html><body><div class="jp-OutputArea-output">x</div></body></html>') is None
    assert accessible('<body class="jp-Notebook"><div class="jp-OutputArea-output" tabindex="1">x</div>') is None
    assert accessible('<body class="jp-Notebook"><img src="a" src="b"></body>') is None
    page, missing = accessible('<body class="jp-Notebook"><img src="a"><div class="jp-Cell-inputWrapper"></div>')
    assert missing == 1 and page == (f'<body class="jp-Notebook"><img src="a" alt="{NO_ALT}">'
                                     '<div class="jp-Cell-inputWrapper" tabindex="0"></div>')


def test_the_text_pass_gives_nbconverts_document_on_the_demo_class(tmp_path_factory):
    """One autograded notebook per lesson of the demo class graded as `make grade` grades it (the four demo
    students in turn), with the course's exporter configuration."""
    from shared_runs import demo_class
    from traitlets.config.loader import PyFileConfigLoader

    root, run = demo_class(tmp_path_factory)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    config = PyFileConfigLoader("nbgrader_config.py", path=os.path.join(REPO, "grading")).load_config()
    students = sorted(p.name for p in (root / "autograded").iterdir())
    lessons = sorted({p.name for s in students for p in (root / "autograded" / s).iterdir()})
    assert len(lessons) == 12, lessons
    for i, lesson in enumerate(lessons):
        student = students[i % len(students)]
        (path,) = (root / "autograded" / student / lesson).glob("*.ipynb")
        mine, theirs = both(nbformat.read(path, as_version=4), config)
        assert same_document(mine, theirs), f"{student}/{lesson}: the two passes give different documents"
