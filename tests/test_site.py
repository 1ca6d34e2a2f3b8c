"""The rendered edition (grading/site.py): one lesson's pages in both variants, and alt text everywhere.

The full build (twelve notebooks executed) is `make site`, outside `make test`; here lesson 01 is
executed and built in both variants, which exercises every step of the full build.
"""
import glob
import html as html_lib
import json
import os
import re

import nbformat
import pytest

from conftest import REPO, source_notebooks

_FIGURE = re.compile(r"plt\.show\(\)")


def _figure_cells():
    for a, path in source_notebooks():
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and _FIGURE.search(cell.source):
                yield f"{a} cell {i}", cell


def test_every_figure_has_alt_text():
    """Issue 39 item 5: every figure says what it shows in one sentence (MyST-NB writes it into <img alt>)."""
    missing, bad = [], []
    cells = list(_figure_cells())
    assert len(cells) > 20, "the notebooks draw more figures than this: the figure pattern is broken"
    for where, cell in cells:
        alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
        if not alt:
            missing.append(where)
        elif not (40 <= len(alt) <= 400 and alt.rstrip().endswith(".")):
            bad.append(f"{where}: {alt!r}")
    assert not missing, f"figure cells without alt text (cell metadata mystnb.image.alt): {missing}"
    assert not bad, f"alt text should be one sentence of 40-400 characters: {bad}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("myst_nb", reason="the site's packages (the `site` extra) are not installed")
    from grading import site as site_mod

    out = tmp_path_factory.mktemp("site")
    assert site_mod.main(["--lessons", "01", "--out", str(out)]) == 0
    return out


def _solution_lines(path: str) -> list[str]:
    """Long lines between ### BEGIN SOLUTION and ### END SOLUTION of a source notebook."""
    nb = nbformat.read(path, as_version=4)
    lines = []
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            parts = re.split(r"^[ \t]*### (?:BEGIN|END) SOLUTION[ \t]*$", cell.source, flags=re.MULTILINE)
            for part in parts[1::2]:
                lines += [ln.strip() for ln in part.splitlines() if len(ln.strip()) > 30
                          and not ln.strip().startswith(("#", '"""'))]
    return lines


def test_lesson_pages_with_navigation_search_and_alt_text(site):
    for variant in ("instructor", "students"):
        html = site / variant / "html"
        index = (html / "index.html").read_text()
        page = html / "01_attention" / "attention.html"
        assert page.is_file(), f"no page for lesson 01 in the {variant} site"
        assert 'href="01_attention/attention.html"' in index, "the index does not link the lesson"
        assert (html / "search.html").is_file() and (html / "searchindex.js").is_file(), "no search"
        text = page.read_text()
        assert 'rel="prev"' in text or 'rel="next"' in text, "no navigation between pages"
        imgs = re.findall(r"<img [^>]*>", text)
        assert imgs, f"the {variant} page of lesson 01 shows no figure: were the outputs kept?"
        for img in imgs:
            alt = re.search(r'alt="([^"]*)"', img)
            assert alt and not alt.group(1).endswith(".png"), f"an image without alt text: {img[:200]}"


def _text(path: str) -> str:
    """A file's text as a reader sees it: HTML without its tags (highlighting splits code into spans)."""
    text = open(path, encoding="utf-8", errors="replace").read()
    return html_lib.unescape(re.sub(r"<[^>]+>", "", text)) if path.endswith(".html") else text


def _site_text(folder) -> str:
    return "\n".join(_text(p) for p in glob.glob(str(folder / "**" / "*"), recursive=True)
                     if os.path.isfile(p) and p.endswith((".html", ".ipynb", ".txt", ".js", ".md")))


def test_students_site_holds_no_solution(site):
    src = os.path.join(REPO, "notebooks", "01_attention", "attention.ipynb")
    solution = _solution_lines(src)
    assert solution, "lesson 01 has solution lines: the scan below would prove nothing without them"
    joined = _site_text(site / "students")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "hidden=True"):
        assert marker not in joined, f"{marker!r} in the students' site"
    leaked = [ln for ln in solution if ln in joined or json.dumps(ln)[1:-1] in joined]
    assert not leaked, f"solution lines in the students' site: {leaked[:3]}"
    assert "YOUR CODE HERE" in joined, "the students' site should show the exercise stubs"
    # the same scan finds them in the instructor's variant (so it is able to find a leak)
    page = _text(str(site / "instructor" / "html" / "01_attention" / "attention.html"))
    assert all(ln in page for ln in solution), "the instructor's page should show every solution line"
